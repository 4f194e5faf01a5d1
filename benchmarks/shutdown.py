"""SIGTERM under load: how long ``queue-age-scaler serve`` takes to exit, and with what status.

Per run: starts the real CLI (``serve --grace G``) as a child process, makes it sample many Sidekiq
queues on a private redis-server (one GetMetricSpec per queue starts each queue's sampler), opens
StreamIsActive streams on some of them, drives IsActive calls over all of them, then sends SIGTERM
while that load goes on. It prints, per run, the exit status, the seconds from SIGTERM to exit and
when the metrics port stopped answering; a process still running ``--give-up`` seconds after
SIGTERM is killed (status -9).

Run: ``.venv/bin/python -m benchmarks.shutdown`` (1,000 queues, 100 streams, 5 runs: about three
minutes; ``--help`` for the options). It talks to 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a path: make the project importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc
import redis.asyncio as aioredis

from benchmarks.bench_servers import wait_ready
from benchmarks.processes import ROOT, free_port, log_tail
from benchmarks.sidekiq_redis import create_queues, delete_queues, private_redis
from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc

#: concurrent GetMetricSpec calls while the samplers start
START_CONCURRENCY = 50


@dataclass(frozen=True)
class Outcome:
    """One run: the exit status (-9: killed after ``give_up``) and the times after SIGTERM."""

    exit_code: int
    exit_seconds: float
    metrics_closed_seconds: float | None
    streams_open_at_sigterm: int
    is_active_calls: int


def progress(message: str) -> None:
    print(f"[shutdown] {message}", file=sys.stderr, flush=True)


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def refs(queues: Sequence[str], url: str, interval: str) -> list[pb.ScaledObjectRef]:
    return [
        pb.ScaledObjectRef(
            name=f"so-{queue}",
            namespace="bench",
            scalerMetadata={
                "scalerAddress": "scaler:6000",
                "url": url,
                "queue": queue,
                "format": "sidekiq",
                "workerThroughput": "1",
                "sampleInterval": interval,
            },
        )
        for queue in queues
    ]


async def start_samplers(
    stub: pb_grpc.ExternalScalerAsyncStub, objects: Sequence[pb.ScaledObjectRef]
) -> None:
    limit = asyncio.Semaphore(START_CONCURRENCY)

    async def one(ref: pb.ScaledObjectRef) -> None:
        async with limit:
            await stub.GetMetricSpec(ref, timeout=30.0)

    await asyncio.gather(*(one(ref) for ref in objects))


async def hold_stream(
    stub: pb_grpc.ExternalScalerAsyncStub, ref: pb.ScaledObjectRef, opened: list[int]
) -> None:
    """Read a StreamIsActive stream until it ends, whichever way."""
    call = stub.StreamIsActive(ref)
    counted = False
    with contextlib.suppress(grpc.aio.AioRpcError, asyncio.CancelledError):
        async for _ in call:
            if not counted:
                opened[0] += 1
                counted = True
    if counted:
        opened[0] -= 1


async def is_active_load(
    stub: pb_grpc.ExternalScalerAsyncStub,
    objects: Sequence[pb.ScaledObjectRef],
    offset: int,
    step: int,
    calls: list[int],
) -> None:
    """IsActive over ``objects`` in a loop, as fast as answers come; errors (once the server
    stops) are ignored."""
    index = offset
    while True:
        with contextlib.suppress(grpc.aio.AioRpcError):
            await stub.IsActive(objects[index % len(objects)], timeout=5.0)
            calls[0] += 1
        index += step
        await asyncio.sleep(0)


@contextlib.asynccontextmanager
async def server_process(
    grace: float,
) -> AsyncIterator[tuple[asyncio.subprocess.Process, int, int, Path]]:
    port, metrics_port = free_port(), free_port()
    log_path = Path(f"/tmp/qas-bench-shutdown-{os.getpid()}.log")
    entry = ROOT / ".venv" / "bin" / "queue-age-scaler"
    base = [str(entry)] if entry.exists() else [sys.executable, "-m", "scaler"]
    with log_path.open("wb") as log:
        proc = await asyncio.create_subprocess_exec(
            *base,
            *("--log-level", "WARNING", "serve", "--host", "127.0.0.1"),
            *("--port", str(port), "--metrics-port", str(metrics_port), "--grace", f"{grace:g}"),
            *("--min-sample-interval", "100ms"),  # --sample-interval may go below the 1 s floor
            cwd=ROOT,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=log,
            stderr=asyncio.subprocess.STDOUT,
        )
    try:
        yield proc, port, metrics_port, log_path
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def one_run(
    url: str,
    queues: Sequence[str],
    interval: str,
    streams: int,
    clients: int,
    load: float,
    grace: float,
    give_up: float,
) -> Outcome:
    objects = refs(queues, url, interval)
    async with server_process(grace) as (proc, port, metrics_port, log_path):
        await wait_ready("ours", port, log_path)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = pb_grpc.ExternalScalerStub(channel)
            await start_samplers(stub, objects)
            opened, calls = [0], [0]
            tasks = [
                asyncio.create_task(hold_stream(stub, ref, opened)) for ref in objects[:streams]
            ]
            tasks += [
                asyncio.create_task(is_active_load(stub, objects, k, clients, calls))
                for k in range(clients)
            ]
            await asyncio.sleep(load)
            open_at_sigterm = opened[0]
            proc.send_signal(signal.SIGTERM)
            sent = time.monotonic()
            metrics_closed: float | None = None
            while proc.returncode is None and time.monotonic() - sent < give_up:
                if metrics_closed is None and not port_open(metrics_port):
                    metrics_closed = time.monotonic() - sent
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(proc.wait(), 0.05)
            exit_seconds = time.monotonic() - sent
            if proc.returncode is None:
                progress(
                    f"still running {give_up:g}s after SIGTERM; killing it. Log tail:\n{log_tail(log_path)}"
                )
                proc.kill()
                await proc.wait()
            elif metrics_closed is None:
                metrics_closed = exit_seconds
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    log_path.unlink(missing_ok=True)
    return Outcome(
        exit_code=proc.returncode if proc.returncode is not None else -9,
        exit_seconds=exit_seconds,
        metrics_closed_seconds=metrics_closed,
        streams_open_at_sigterm=open_at_sigterm,
        is_active_calls=calls[0],
    )


async def benchmark(args: argparse.Namespace) -> list[Outcome]:
    async with contextlib.AsyncExitStack() as stack:
        url = args.redis_url or await stack.enter_async_context(private_redis())
        client = aioredis.Redis.from_url(url)
        stack.push_async_callback(client.aclose)
        prefix = f"qas-bench-{uuid.uuid4().hex[:8]}"
        queues = await create_queues(client, prefix, args.queues, jobs=1)
        stack.push_async_callback(delete_queues, client, prefix)
        outcomes = []
        for run in range(1, args.runs + 1):
            outcome = await one_run(
                url,
                queues,
                args.sample_interval,
                args.streams,
                args.clients,
                args.load,
                args.grace,
                args.give_up,
            )
            progress(
                f"run {run}: exit {outcome.exit_code} after {outcome.exit_seconds:.2f}s "
                f"(metrics port closed after {outcome.metrics_closed_seconds or 0:.2f}s; "
                f"{outcome.streams_open_at_sigterm} streams open, "
                f"{outcome.is_active_calls} IsActive answered)"
            )
            outcomes.append(outcome)
        return outcomes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--queues", type=int, default=1000)
    parser.add_argument("--streams", type=int, default=100, help="StreamIsActive streams held open")
    parser.add_argument("--clients", type=int, default=16, help="concurrent IsActive callers")
    parser.add_argument("--load", type=float, default=10.0, help="seconds of load before SIGTERM")
    parser.add_argument("--grace", type=float, default=10.0, help="the server's --grace")
    parser.add_argument(
        "--give-up", type=float, default=60.0, help="kill the server this long after SIGTERM"
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--sample-interval", default="1s", help="every queue's sampleInterval (default 1s)"
    )
    parser.add_argument("--redis-url", help="default: a private redis-server")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    outcomes = asyncio.run(benchmark(args))
    if args.json:
        print(json.dumps({"options": vars(args), "runs": [asdict(o) for o in outcomes]}))
        return 0
    print(
        f"{args.queues} queues sampled every {args.sample_interval}, {args.streams} "
        f"StreamIsActive streams, {args.clients} IsActive callers, grace {args.grace:g}s"
    )
    print("run  exit  seconds  metrics port closed (s)")
    for run, o in enumerate(outcomes, 1):
        closed = "-" if o.metrics_closed_seconds is None else f"{o.metrics_closed_seconds:.2f}"
        print(f"{run:>3}  {o.exit_code:>4}  {o.exit_seconds:>7.2f}  {closed:>7}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
