"""The README's grpcurl example ("Ask it yourself"), run as written against the real server.

Only what a run on this machine needs changes: the server's port, the Redis URL, the queue's
name (one of the test's own), and where the venv is.
"""

from __future__ import annotations

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
README = Path(__file__).resolve().parents[2] / "README.md"
BIN = Path(sys.executable).parent


def readme_example() -> str:
    text = README.read_text()
    start = text.index("```sh\n", text.index("### Ask it yourself")) + len("```sh\n")
    return text[start : text.index("```", start)]


@pytest.fixture
def server_port() -> Iterator[int]:
    port = free_port()
    command = [str(BIN / "queue-age-scaler"), "serve", "--host", "127.0.0.1", "--port", str(port)]
    with subprocess.Popen(
        [*command, "--no-metrics"], stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL
    ) as process:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            health = health_pb2_grpc.HealthStub(channel)
            deadline = time.monotonic() + 20
            while True:
                try:
                    health.Check(health_pb2.HealthCheckRequest(), timeout=1)
                    break
                except grpc.RpcError:
                    assert time.monotonic() < deadline and process.poll() is None
                    time.sleep(0.1)
        yield port
        process.terminate()
        process.wait(timeout=20)


def test_the_readme_grpcurl_example_answers_as_the_readme_says(
    server_port: int, redis_url: str
) -> None:
    queue = f"qas-readme-{uuid.uuid4().hex[:8]}"
    example = readme_example()
    for written, here in (
        ("localhost:6000", f"127.0.0.1:{server_port}"),
        ("redis://127.0.0.1:6379/0", redis_url),
        ("redis-cli ", f"redis-cli -u {redis_url} "),
        (".venv/bin/", f"{BIN}/"),
        ("hello", queue),
    ):
        assert written in example, written
        example = example.replace(written, here)
    try:
        done = subprocess.run(
            ["bash", "-c", example], capture_output=True, text=True, timeout=60, check=False
        )
    finally:
        redis.Redis.from_url(redis_url).delete(f"queue:{queue}")
    out = done.stdout
    assert f'"metricName": "queue-age-workers-{queue}"' in out, done.stderr
    assert '"targetSizeFloat": 1' in out
    assert '"metricValueFloat": 1' in out
    assert out.count('"result": true') >= 2  # IsActive, then StreamIsActive
    assert "DeadlineExceeded" in done.stderr  # the README's -max-time ends the stream
