"""Runs tests/smoke/smoke.sh (the real grpcurl) against the real `queue-age-scaler serve` process,
then stops the server with SIGTERM and checks it exits cleanly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import redis
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.conftest import free_port

pytestmark = pytest.mark.integration
SMOKE = Path(__file__).with_name("smoke.sh")
BIN = Path(sys.executable).parent


@pytest.fixture
def server_address() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    process = subprocess.Popen(
        [
            str(BIN / "queue-age-scaler"),
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--metrics-port",
            "0",
        ],
        stderr=subprocess.PIPE,
    )
    address = f"127.0.0.1:{port}"
    with grpc.insecure_channel(address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        deadline = time.monotonic() + 20
        while True:
            try:
                if (
                    health.Check(health_pb2.HealthCheckRequest(), timeout=1).status
                    == health_pb2.HealthCheckResponse.SERVING
                ):
                    break
            except grpc.RpcError:
                if time.monotonic() > deadline or process.poll() is not None:
                    process.kill()
                    _, log = process.communicate()
                    raise AssertionError(f"the server did not start: {log.decode()}") from None
                time.sleep(0.1)
    yield address, process
    if process.poll() is None:
        process.kill()
    process.communicate()  # reaps it and closes the pipe


def test_grpcurl_smoke_and_clean_sigterm(
    server_address: tuple[str, subprocess.Popen[bytes]], redis_url: str
) -> None:
    address, process = server_address
    queue = f"qas-smoke-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(redis_url)
    client.lpush(
        f"queue:{queue}",
        json.dumps(
            {"jid": "abc", "class": "W", "args": [], "enqueued_at": int(time.time() * 1000)}
        ),
    )
    try:
        result = subprocess.run(
            ["bash", str(SMOKE), address, redis_url, queue],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "GRPCURL": str(BIN / "grpcurl")},
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert "smoke: all checks passed" in result.stdout
    finally:
        client.delete(f"queue:{queue}")
        client.close()
    process.send_signal(signal.SIGTERM)
    _, log = process.communicate(timeout=15)
    assert process.returncode == 0
    assert "stopped" in log.decode()
