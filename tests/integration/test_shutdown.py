"""SIGTERM under load stops the real ``queue-age-scaler serve`` within its grace: 300 Redis
queues sampled (250 of them every 100 ms), 50 StreamIsActive streams open and IsActive calls
going on; exit status 0 within grace + 2 s, and the metrics port closed with it. And the last
resort: a shutdown that hangs anyway ends the process with status 1 soon after the grace."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
import redis.asyncio as aioredis
from grpc_health.v1 import health_pb2, health_pb2_grpc

from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc
from tests.conftest import free_port

pytestmark = pytest.mark.integration
BIN = Path(sys.executable).parent
GRACE = 3.0
QUEUES = 300
STREAMS = 50


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


async def wait_serving(port: int, process: asyncio.subprocess.Process) -> None:
    deadline = time.monotonic() + 20.0
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        health = health_pb2_grpc.HealthStub(channel)
        while True:
            with contextlib.suppress(grpc.aio.AioRpcError):
                reply = await health.Check(health_pb2.HealthCheckRequest(), timeout=1.0)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            assert process.returncode is None, "the server exited at start"
            assert time.monotonic() < deadline, "the server did not start within 20 s"
            await asyncio.sleep(0.1)


@pytest.mark.timeout(120)
async def test_sigterm_under_load_exits_0_within_the_grace(
    redis_url: str, r: aioredis.Redis, token: str
) -> None:
    queues = [f"qas-stop-{token}-{i}" for i in range(QUEUES)]
    for queue in queues[::2]:  # half the queues hold a job: those streams repeat `true`
        await r.rpush(queue, "job")
    refs = [
        pb.ScaledObjectRef(
            name=f"so-{i}",
            namespace="shop",
            scalerMetadata={
                "url": redis_url,
                "queue": q,
                "format": "list",
                "workerThroughput": "1",
                # samples always under way: a reply and the cancellation at shutdown meet often
                # (Python 3.11's wait_for then lost the cancellation and the sampler ran on);
                # the streams' queues at 1 s, so that an overloaded machine leaves them fresh
                "sampleInterval": "1s" if i < STREAMS else "100ms",
            },
        )
        for i, q in enumerate(queues)
    ]
    port, metrics_port = free_port(), free_port()
    process = await asyncio.create_subprocess_exec(
        str(BIN / "queue-age-scaler"),
        *("--log-level", "WARNING", "serve", "--host", "127.0.0.1", "--port", str(port)),
        *("--metrics-port", str(metrics_port), "--grace", f"{GRACE:g}"),
        *("--min-sample-interval", "100ms"),  # 250 of the queues are sampled every 100 ms
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        await wait_serving(port, process)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = pb_grpc.ExternalScalerStub(channel)
            limit = asyncio.Semaphore(30)

            async def start(so: pb.ScaledObjectRef) -> None:
                async with limit:
                    await stub.GetMetricSpec(so, timeout=20.0)

            await asyncio.gather(*(start(so) for so in refs))  # 300 samplers
            streams = [stub.StreamIsActive(so) for so in refs[:STREAMS]]

            async def read_to_the_end(
                stream: grpc.aio.UnaryStreamCall[pb.ScaledObjectRef, pb.IsActiveResponse],
            ) -> tuple[float, grpc.StatusCode]:
                """When the stream ended and how (an overloaded queue's stream may end
                UNAVAILABLE before the SIGTERM)."""
                with contextlib.suppress(grpc.aio.AioRpcError):
                    while isinstance(await stream.read(), pb.IsActiveResponse):  # not EOF
                        pass
                return time.monotonic(), await stream.code()

            readers = [asyncio.create_task(read_to_the_end(stream)) for stream in streams]
            answered = [0]

            async def load(offset: int) -> None:
                for i in range(offset, 1_000_000, 8):
                    with contextlib.suppress(grpc.aio.AioRpcError):
                        await stub.IsActive(refs[i % QUEUES], timeout=5.0)
                        answered[0] += 1

            callers = [asyncio.create_task(load(k)) for k in range(8)]
            await asyncio.sleep(2.0)
            assert answered[0] > 0 and port_open(metrics_port)
            process.send_signal(signal.SIGTERM)
            sent = time.monotonic()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), GRACE + 2.0)
            took = time.monotonic() - sent
            for caller in callers:
                caller.cancel()
            await asyncio.gather(*callers, return_exceptions=True)
            async with asyncio.timeout(5.0):  # their end reached the client before the exit
                ends = await asyncio.gather(*readers)
        assert process.returncode == 0, (
            f"still running {took:.1f}s after SIGTERM (grace {GRACE:g}s)"
        )
        assert not port_open(metrics_port)
        codes = [code for ended_at, code in ends if ended_at >= sent]
        assert len(codes) >= STREAMS // 2  # most streams were open at SIGTERM
        assert set(codes) == {grpc.StatusCode.OK}  # those open then ended cleanly
    finally:
        if process.returncode is None:
            process.kill()
        _, log = await process.communicate()
    assert b"Traceback" not in log, log.decode()[-3000:]


def test_a_shutdown_that_hangs_anyway_exits_with_status_1_after_the_grace() -> None:
    code = "from scaler.server import _exit_after; import time; _exit_after(0.5); time.sleep(60)"
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=30)
    assert result.returncode == 1
    assert time.monotonic() - started < 10.0
    assert b"shutdown did not end within 0.5s; exiting with status 1" in result.stderr
