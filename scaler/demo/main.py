"""``python -m scaler.demo`` (``scripts/demo``): the scaler at work on a laptop, in 3 minutes.

Starts a private redis-server on a free port (or uses ``--redis-url``), the real server
(``queue-age-scaler serve`` on free ports), a producer playing a scenario (quiet, a burst, a steady
peak, the end), and Sidekiq-style worker processes that KEDA and the HPA, emulated over gRPC, scale
through the server. Shows it live, then writes a figure and the samples of the run, and prints a
one-line summary. Everything it started is stopped when it ends, on Ctrl-C and SIGTERM too.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
import httpx
import redis.asyncio as aioredis

from scaler.demo.keda_loop import EmulatedKeda
from scaler.demo.processes import ProcessGroup, WorkerFleet, free_port, stop
from scaler.demo.record import Recording, Sample, read_metrics
from scaler.demo.scenario import CEILING, PHASES, Producer, Timing
from scaler.demo.view import View, open_view
from scaler.demo.worker import queue_key, waits_key
from scaler.generated import externalscaler_pb2_grpc as pb_grpc

DESCRIPTION = (
    "The scaler at work in 3 minutes: a private redis-server, the real server, a producer "
    "playing a scenario (quiet, a burst, a steady peak, the end), Sidekiq-style worker processes, "
    "and KEDA and the HPA emulated over gRPC scaling them through the server. Shows it live, then "
    "writes a figure of the run and prints a one-line summary. Stops everything it started, on "
    "Ctrl-C too."
)
#: how long the server may take to answer after it starts
STARTUP_TIMEOUT = 30.0


class DemoError(Exception):
    """The demo cannot run; the message says why and what to do."""


class Interrupted(Exception):
    """Ctrl-C (or SIGTERM) before the scenario started."""


def _answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    except OSError:
        return False
    return True


class Demo:
    def __init__(self, timing: Timing, run_dir: Path, redis_url: str | None) -> None:
        self.timing = timing
        self.run_dir = run_dir
        self.redis_url = redis_url
        self.queue = f"demo-{uuid.uuid4().hex[:6]}"
        self.group = ProcessGroup()
        self.stopping = asyncio.Event()
        self.redis_server: subprocess.Popen[bytes] | None = None
        self.server: subprocess.Popen[bytes] | None = None
        self.fleet: WorkerFleet | None = None
        self.recording = Recording(timing.target_age, CEILING)
        self.waits: list[float] = []
        #: jobs the producer sent in all
        self.sent = 0
        self.notes: list[str] = []

    async def run(self, live: bool) -> None:
        """Start, play the scenario, stop everything (whatever happens)."""
        try:
            url = self.redis_url or await self._start_redis()
            client = aioredis.Redis.from_url(url)
            try:
                grpc_port, metrics_port = await self._start_server()
                worker = [sys.executable, "-m", "scaler.demo.worker", url, self.queue]
                workers_log = (self.run_dir / "workers.log").open("wb")
                with workers_log:
                    self.fleet = WorkerFleet(worker, self.group, output=workers_log)
                    await self._play(client, url, grpc_port, metrics_port, live)
                    self._stop_workers()
                self.waits = [float(w) for w in await client.lrange(waits_key(self.queue), 0, -1)]
                await client.delete(queue_key(self.queue), waits_key(self.queue))
            finally:
                await client.aclose()
        finally:
            self._stop_all()

    async def _start_redis(self) -> str:
        binary = shutil.which("redis-server")
        if binary is None:
            if _answers(6379):
                self.notes.append("no redis-server here: using the Redis on 127.0.0.1:6379")
                return "redis://127.0.0.1:6379/0"
            raise DemoError(
                "redis-server is not installed and nothing answers on 127.0.0.1:6379: install "
                "it (apt-get install redis-server; scripts/demo does) or pass --redis-url"
            )
        port = free_port()
        # saves nothing (no RDB, no AOF): its folder stays empty
        self.redis_server = self.group.spawn(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
             "no", "--dir", str(self.run_dir), "--logfile", ""],
            output=subprocess.DEVNULL,
        )  # fmt: skip
        url = f"redis://127.0.0.1:{port}/0"
        client = aioredis.Redis.from_url(url)
        try:
            await self._wait_for("redis-server", self.redis_server, client.ping)
        finally:
            await client.aclose()
        return url

    async def _start_server(self) -> tuple[int, int]:
        grpc_port, metrics_port = free_port(), free_port()
        command = [sys.executable, "-m", "scaler", "serve", "--host", "127.0.0.1",
                   "--port", str(grpc_port), "--metrics-port", str(metrics_port), "--grace", "2"]  # fmt: skip
        with (self.run_dir / "scaler.log").open("wb") as log:
            self.server = self.group.spawn(command, output=log)

        async def metrics_answer() -> None:
            async with httpx.AsyncClient() as http:
                (await http.get(f"http://127.0.0.1:{metrics_port}/metrics")).raise_for_status()

        await self._wait_for("the scaler", self.server, metrics_answer)
        return grpc_port, metrics_port

    async def _wait_for(
        self, name: str, process: subprocess.Popen[bytes], ready: Callable[[], Awaitable[object]]
    ) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            if self.stopping.is_set():
                raise Interrupted
            if process.poll() is not None:
                log = self.run_dir / "scaler.log"
                hint = f"; its log: {log}" if process is self.server else ""
                raise DemoError(f"{name} exited with status {process.returncode}{hint}")
            try:
                await ready()
                return
            except (OSError, httpx.HTTPError, aioredis.ConnectionError):
                if time.monotonic() > deadline:
                    raise DemoError(f"{name} did not answer within {STARTUP_TIMEOUT:g} s") from None
                await asyncio.sleep(0.1)

    async def _play(
        self, client: aioredis.Redis, url: str, grpc_port: int, metrics_port: int, live: bool
    ) -> None:
        assert self.fleet is not None
        timing = self.timing
        producer = Producer(client, self.queue, timing)
        done = asyncio.Event()
        async with (
            grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{metrics_port}") as http,
        ):
            keda = EmulatedKeda(pb_grpc.ExternalScalerStub(channel), timing.metadata(url, self.queue),
                                self.fleet, timing.keda, timing.hpa, tick=min(0.25, timing.seconds(0.25)))  # fmt: skip
            keda.log = self.recording.scaling
            started = time.monotonic()
            emulating = asyncio.create_task(keda.run(done))
            try:
                with open_view(timing, live=live) as view:
                    await self._observe(client, http, producer, started, view)
            finally:
                self.sent = producer.sent
                done.set()
                await emulating
        self.notes.extend(f"KEDA: {error}" for error in keda.errors[:5])

    async def _observe(
        self,
        client: aioredis.Redis,
        http: httpx.AsyncClient,
        producer: Producer,
        started: float,
        view: View,
    ) -> None:
        """Push the jobs due every 50 ms and take a sample every tick, to the scenario's end."""
        assert self.fleet is not None
        tick = max(0.1, self.timing.seconds(0.5))
        next_sample = 0.0
        while not self.stopping.is_set():
            elapsed = time.monotonic() - started
            if elapsed >= self.timing.duration:
                break
            await producer.push_due(elapsed)
            if elapsed >= next_sample:
                next_sample = elapsed + tick
                self.recording.samples.append(await self._sample(client, http, producer, elapsed))
                view.show(self.recording)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), 0.05)

    async def _sample(
        self, client: aioredis.Redis, http: httpx.AsyncClient, producer: Producer, elapsed: float
    ) -> Sample:
        assert self.fleet is not None
        async with client.pipeline(transaction=False) as pipe:
            pipe.llen(queue_key(self.queue))
            pipe.lindex(queue_key(self.queue), -1)
            pipe.llen(waits_key(self.queue))
            depth, oldest, done = await pipe.execute()
        age = time.time() - json.loads(oldest)["enqueued_at"] if oldest else 0.0
        try:
            scaler = read_metrics((await http.get("/metrics")).text)
        except httpx.HTTPError:
            scaler = read_metrics("")
        self.fleet.watch()
        return Sample(
            at=round(elapsed, 3),
            phase=self.timing.phase_at(elapsed).name,
            depth=depth,
            oldest_age=round(max(0.0, age), 3),
            workers=self.fleet.ready,
            alive=self.fleet.alive,
            sent=producer.sent,
            done=done,
            scaler=scaler,
        )

    def _stop_workers(self) -> None:
        if self.fleet is not None:
            self.fleet.stop(grace=self.timing.job_seconds + 5.0)

    def _stop_all(self) -> None:
        """Workers (they drain), the server, Redis; then SIGKILL whatever is left in the group."""
        self._stop_workers()
        if self.server is not None:
            stop(self.server, grace=5.0)
        if self.redis_server is not None:
            stop(self.redis_server, grace=5.0)
        self.group.kill()
        left = self.group.alive
        if left:
            self.notes.append(f"processes still running: {[p.pid for p in left]}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="scripts/demo", description=DESCRIPTION)
    parser.add_argument(
        "--duration",
        type=float,
        default=Timing().duration,
        help="seconds the scenario lasts (default 180); shorter compresses everything: jobs, "
        "rates, targets, KEDA's and the HPA's timings",
    )
    parser.add_argument(
        "--no-live", action="store_true", help="print a line every few seconds, no live panel"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("out/demo"),
        help="folder for the runs (default out/demo): each in its own folder with the figure, "
        "the samples (JSON) and the server's and workers' logs",
    )
    parser.add_argument(
        "--redis-url", help="use this Redis instead of starting a private redis-server"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not 20 <= args.duration <= 3600:
        raise SystemExit("demo: --duration is in seconds, from 20 to 3600 (default 180)")
    timing = Timing(args.duration)
    run_dir = args.out / time.strftime("%Y%m%d-%H%M%S")
    run_dir.mkdir(parents=True, exist_ok=True)
    phases = ", ".join(
        f"{p.name} {timing.seconds(p.length):.3g} s at {p.rate / timing.factor:.3g}/s"
        for p in PHASES
    )
    print(f"demo: {phases}; logs in {run_dir}", flush=True)
    return asyncio.run(_run(timing, run_dir, args))


async def _run(timing: Timing, run_dir: Path, args: argparse.Namespace) -> int:
    demo = Demo(timing, run_dir, args.redis_url)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, demo.stopping.set)
    try:
        await demo.run(live=not args.no_live)
    except DemoError as error:
        print(f"demo: {error}", file=sys.stderr)
        return 1
    except Interrupted:
        print("demo: interrupted before the scenario started; everything stopped", flush=True)
        return 130
    for note in demo.notes:
        print(f"demo: {note}", flush=True)
    interrupted = demo.stopping.is_set()
    summary = demo.recording.summary(demo.sent, demo.waits, interrupted=interrupted)
    settings = {"duration": timing.duration, "phases": [p.name for p in PHASES],
                "metadata": timing.metadata("redis://…", demo.queue)}  # fmt: skip
    data = demo.recording.as_json(summary, settings)
    (run_dir / "run.json").write_text(json.dumps(data, indent=1))
    if demo.recording.samples:
        from scaler.demo.figure import write_figure

        figure = write_figure(demo.recording, timing, run_dir / "run.png")
        print(f"demo: figure {figure}", flush=True)
    print(f"demo: {summary.line()}", flush=True)
    return 130 if interrupted else 0
