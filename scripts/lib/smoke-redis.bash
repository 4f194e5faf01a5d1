# Sourced by scripts/image and scripts/package: the Redis their smoke tests push jobs to.
# start_smoke_redis keeps $REDIS_URL when it is set, else takes the Redis on 127.0.0.1:6379
# when one answers, else starts a private redis-server on a free port (installing it from Debian
# when it is missing) and points REDIS_URL at it; stop_smoke_redis stops what it started.
smoke_redis_pid=

start_smoke_redis() {
  [[ -z ${REDIS_URL:-} ]] || return 0
  if (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null; then
    REDIS_URL=redis://127.0.0.1:6379/0
    return 0
  fi
  if ! command -v redis-server >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server \
      >/dev/null
  fi
  local port
  port=$(.venv/bin/python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  redis-server --bind 127.0.0.1 --port "$port" --save "" --appendonly no >/dev/null &
  smoke_redis_pid=$!
  REDIS_URL=redis://127.0.0.1:$port/0
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
  done
  echo "started a private redis-server on 127.0.0.1:$port (nothing answered on 6379)" >&2
}

stop_smoke_redis() {
  [[ -z $smoke_redis_pid ]] || kill "$smoke_redis_pid" 2>/dev/null || true
}
