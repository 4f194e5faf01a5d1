"""A server under benchmark: started as a child process, checked ready, warmed up, stopped."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from benchmarks.keda_load import keda_sequence
from benchmarks.processes import ROOT, STOP_TIMEOUT, free_port, log_tail
from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc

SCALER_SERVICE = "externalscaler.ExternalScaler"
#: time to start a server, see it ready and warm it up
READY_TIMEOUT = 30.0
WARMUP_TIMEOUT = 30.0
#: the longest one warm-up sequence may take
CALL_TIMEOUT = 10.0


def server_command(
    kind: str, port: int, redis_url: str, serve_options: Sequence[str] = ("--no-metrics",)
) -> list[str]:
    """``ours``: the real command, with ``serve_options``; else a reference server."""
    if kind == "ours":
        entry = ROOT / ".venv" / "bin" / "queue-age-scaler"
        # ``python -m scaler`` is the same main() when the entry point is not installed;
        # --log-level belongs to the main parser, so it goes before ``serve``
        base = [str(entry)] if entry.exists() else [sys.executable, "-m", "scaler"]
        serve = ["serve", "--host", "127.0.0.1", "--port", str(port), *serve_options]
        return [*base, "--log-level", "WARNING", *serve]
    command = [sys.executable, "-m", "benchmarks.bare_server", str(port)]
    return [*command, "--keda-redis", redis_url] if kind == "keda" else command


@contextlib.asynccontextmanager
async def started_server(
    kind: str, redis_url: str, pin: list[str], serve_options: Sequence[str] = ("--no-metrics",)
) -> AsyncIterator[tuple[int, int, Path]]:
    """The server as a child process: (pid, port, log file); stopped, then killed, on exit."""
    port = free_port()
    log_path = Path(f"/tmp/qas-bench-{kind}-{os.getpid()}.log")
    with log_path.open("wb") as log:
        proc = await asyncio.create_subprocess_exec(
            *pin,
            *server_command(kind, port, redis_url, serve_options),
            cwd=ROOT,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=log,
            stderr=asyncio.subprocess.STDOUT,
        )
    try:
        yield proc.pid, port, log_path
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), STOP_TIMEOUT)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        log_path.unlink(missing_ok=True)  # any error raised above already quotes its tail


async def wait_ready(kind: str, port: int, log_path: Path) -> None:
    """``ours``: grpc.health.v1 says SERVING for the scaler service; others: channel ready."""
    deadline = time.monotonic() + READY_TIMEOUT
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                await asyncio.wait_for(channel.channel_ready(), 2.0)
                if kind != "ours":
                    return
                health = health_pb2_grpc.HealthStub(channel)
                reply = await health.Check(
                    health_pb2.HealthCheckRequest(service=SCALER_SERVICE), timeout=2.0
                )
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
        except (TimeoutError, grpc.aio.AioRpcError) as error:
            last = error
        await asyncio.sleep(0.2)
    raise RuntimeError(
        f"{kind} server not ready on port {port} within {READY_TIMEOUT:g}s ({last!r}); "
        f"its log:\n{log_tail(log_path)}"
    )


async def warm_up(
    port: int,
    refs: Sequence[pb.ScaledObjectRef],
    log_path: Path,
    timeout: float = WARMUP_TIMEOUT,
    concurrency: int = 20,
) -> None:
    """One sequence per ScaledObject (so every queue has been asked for once), until all pass;
    ``concurrency`` sequences at once."""
    deadline = time.monotonic() + timeout
    pending = list(refs)
    limit = asyncio.Semaphore(concurrency)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = pb_grpc.ExternalScalerStub(channel)

        async def one(ref: pb.ScaledObjectRef) -> str | None:
            async with limit:
                try:
                    await asyncio.wait_for(keda_sequence(stub, ref), CALL_TIMEOUT)
                    return None
                except grpc.aio.AioRpcError as error:
                    return f"{error.code().name}: {error.details()}"
                except TimeoutError:
                    return f"no answer within {CALL_TIMEOUT:g}s"

        while pending:
            failures = await asyncio.gather(*(one(ref) for ref in pending))
            pending = [ref for ref, failed in zip(pending, failures, strict=True) if failed]
            if not pending:
                return
            if time.monotonic() > deadline:
                first = next(f for f in failures if f)
                raise RuntimeError(
                    f"warm-up: {len(pending)} ScaledObjects still fail after {timeout:g}s, "
                    f"e.g. {first}; server log:\n{log_tail(log_path)}"
                )
            await asyncio.sleep(0.5)
