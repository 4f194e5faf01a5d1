"""A worker that writes to Redis what Resque 3.0's does, for the accuracy benchmark
(``benchmarks/accuracy_workers.py``): no Ruby Resque is installable here (Debian, PyPI and npm
have none), so this imitates its writes, in its order, one job at a time:

- at start (``register_worker``): ``SADD resque:workers <id>``, the heartbeat
  ``HSET resque:workers:heartbeat <id> <ISO 8601>`` (every 5 s here; Resque's is 60 s);
- each job: ``LPOP resque:queue:<q>`` (``reserve``), then ``SET resque:worker:<id>`` to
  ``{"queue", "run_at", "payload"}`` (``working_on``), the job's run, then one pipeline:
  ``DEL resque:worker:<id>``, ``INCRBY resque:stat:processed 1``,
  ``INCRBY resque:stat:processed:<id> 1`` (``done_working``);
- an empty queue: sleep 0.1 s (Resque's ``interval`` is 5 s; shorter keeps the load's pace);
- at SIGTERM (``unregister_worker``): ``SREM``, ``DEL`` the worker's keys and counters.

The id is ``<host>:<pid>:<queue>``. Each job records when it started and finished in the hashes
``<queue>:started`` and ``<queue>:finished`` (job id -> "pid epoch-seconds"), as the benchmark's
other workers do. Run: ``python -m benchmarks.resque_worker URL QUEUE MS``."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
from datetime import UTC, datetime
from types import FrameType

import redis

NS = "resque"
BEAT_EVERY = 5.0


def main(url: str, queue: str, ms: int) -> None:
    client = redis.Redis.from_url(url)
    worker = f"{socket.gethostname()}:{os.getpid()}:{queue}"
    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)

    def beat() -> float:
        now = datetime.now(UTC).isoformat(timespec="seconds")
        client.hset(f"{NS}:workers:heartbeat", worker, now)
        return time.monotonic()

    client.sadd(f"{NS}:workers", worker)
    last_beat = beat()
    while not stopping:
        if time.monotonic() - last_beat >= BEAT_EVERY:
            last_beat = beat()
        raw = client.lpop(f"{NS}:queue:{queue}")
        if not isinstance(raw, bytes):  # empty (an LPOP of one job is bytes or None)
            time.sleep(0.1)
            continue
        payload = json.loads(raw)
        job = str(payload["args"][0])
        run_at = datetime.now(UTC).isoformat()
        work = {"queue": queue, "run_at": run_at, "payload": payload}
        client.set(f"{NS}:worker:{worker}", json.dumps(work, separators=(",", ":")))
        client.hset(f"{queue}:started", job, f"{os.getpid()} {time.time()}")
        time.sleep(ms / 1000)
        client.hset(f"{queue}:finished", job, f"{os.getpid()} {time.time()}")
        with client.pipeline(transaction=False) as pipe:
            pipe.delete(f"{NS}:worker:{worker}")
            pipe.incrby(f"{NS}:stat:processed", 1)
            pipe.incrby(f"{NS}:stat:processed:{worker}", 1)
            pipe.execute()
    with client.pipeline(transaction=False) as pipe:
        pipe.srem(f"{NS}:workers", worker)
        pipe.delete(f"{NS}:worker:{worker}", f"{NS}:worker:{worker}:started")
        pipe.hdel(f"{NS}:workers:heartbeat", worker)
        pipe.delete(f"{NS}:stat:processed:{worker}", f"{NS}:stat:failed:{worker}")
        pipe.execute()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
