"""Sidekiq's, RQ's, Dramatiq's and Resque's worker figures against the truth, with worker
processes: Sidekiq (Debian's ruby-sidekiq, ``TimedJob`` in tests/clients/sidekiq_jobs.rb), RQ
(``rq worker``, the package in the venv), Dramatiq (the ``dramatiq`` command running
``benchmarks/dramatiq_jobs.py``) and Resque (four processes writing what Resque 3.0's workers
write, ``benchmarks/resque_worker.py``: no Ruby Resque is installable here).

For each library and load, jobs are pushed (Sidekiq: its JSON payload, ``LPUSH queue:<q>`` and
``SADD queues``, as its client writes them; RQ: ``rq.Queue.enqueue``; Dramatiq:
``actor.send``) and run by real worker processes: two Sidekiq processes of 2 and 3 threads,
four RQ workers (a slot each), or two Dramatiq processes of 2 threads (Dramatiq records no
thread count, so its slots must read unknown), on a private redis-server (Sidekiq's process
registry is not namespaced). Each job records when it
started and finished, and in which process. The scaler's adapter samples the queue every
``--interval`` s; at every sample:

- processes and slots: equal to the processes serving the queue and their threads;
- in flight: Sidekiq's against the jobs each process ran at its last heartbeat (its ``beat``,
  read around the sample), and against the jobs running at the sample (the read happened
  between the moment the sample was asked for and its ``observed_at``: the truth is what ran
  throughout that span, or at some moment of it), to show the heartbeat's
  staleness; RQ's against the jobs taken (recorded by the worker, before it forks the job's
  work horse) and not finished at the sample. "Equal" allows 50 ms around each job's run, and
  for Sidekiq's heartbeat the 250 ms before ``beat`` (a process takes its work state, writes
  it, pings Redis and reads its RSS before it stamps ``beat``);
- arrivals and completions: each interval's, between two samples, within the jobs pushed
  (started, for Sidekiq's list-marker completions; finished, for RQ's counters) surely between
  the two reads and those possibly between them; and whether the intervals flagged exact were;
- completion rate over 10 s against the jobs finished in those 10 s (goal: within 10%);
- the share of samples whose counts were flagged exact.

Run: ``.venv/bin/python -m benchmarks.accuracy_workers [--libraries sidekiq,rq,dramatiq,resque]
[--loads steady,bursty,keeping-up] [--seconds 40] [--interval 1]`` (needs ``scripts/clients``
for Sidekiq; starts its own redis-server).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import dramatiq
import redis
import redis.asyncio as aioredis
import rq
import rq.job
from dramatiq.brokers.redis import RedisBroker

from benchmarks.processes import ROOT
from benchmarks.sidekiq_redis import private_redis
from brokers.base import QueueSnapshot
from brokers.connections import Connections
from brokers.registry import open_adapter
from scaler.spec import parse_metadata
from tests.integration.clients import SidekiqProcess

EPSILON = 0.05
#: a Sidekiq process takes its work state, writes it, pings Redis and reads its RSS before it
#: stamps ``beat``: the state is of a moment in the span this long before the beat
BEAT_SPAN = 0.25
RATE_WINDOW = 10.0
#: Sidekiq: the processes' threads; RQ: the workers (one job each)
SIDEKIQ_THREADS = (2, 3)
RQ_WORKERS = 4
DRAMATIQ_PROCESSES, DRAMATIQ_THREADS = 2, 2
RESQUE_WORKERS = 4


@dataclass(frozen=True)
class Load:
    backlog: int
    #: (seconds since start) -> jobs due by then
    due: Callable[[float], int]
    #: jobs per second the workers can take
    take_rate: float


LOADS = {
    "steady": Load(200, lambda t: int(t * 20), 25.0),
    "bursty": Load(0, lambda t: 120 * (int(t / 12) + 1), 20.0),
    "keeping-up": Load(0, lambda t: int(t * 8), 40.0),
}


def timed_job(ms: int) -> None:
    """RQ's job: runs ``ms`` milliseconds."""
    time.sleep(ms / 1000)


class RecordingWorker(rq.Worker):
    """RQ's forking worker, recording when it took each job (its ``BLMOVE`` and the job's fetch
    just done) and when the job left the started registry (the transaction that counts it):
    the job is in flight in between, its work horse's fork included, which takes a while on a
    loaded machine (``rq worker -w benchmarks.accuracy_workers.RecordingWorker``)."""

    def dequeue_job_and_maintain_ttl(
        self, timeout: int | None, max_idle_time: int | None = None
    ) -> tuple[rq.job.Job, rq.Queue] | None:
        taken = super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)
        if taken is not None:
            self._record("started", taken[0])
        return taken

    def handle_job_success(self, job: rq.job.Job, *args: Any, **kwargs: Any) -> None:
        super().handle_job_success(job, *args, **kwargs)  # in the work horse
        self._record("finished", job)

    def _record(self, event: str, job: rq.job.Job) -> None:
        self.connection.hset(f"{job.origin}:{event}", job.id, f"{os.getpid()} {time.time()}")


@dataclass
class Records:
    """What happened: (job id, before, after) for each push; job id -> (pid, time)."""

    pushed: list[tuple[str, float, float]] = field(default_factory=list)
    started: dict[str, tuple[int, float]] = field(default_factory=dict)
    finished: dict[str, tuple[int, float]] = field(default_factory=dict)

    def running(self, t: float, pid: int | None = None, margin: float = 0.0) -> int:
        """Jobs running at ``t`` (in process ``pid``); ``margin`` widens each job's run."""
        return self.running_in(t, t, pid, margin)[1]

    def running_in(
        self, start: float, end: float, pid: int | None = None, margin: float = 0.0
    ) -> tuple[int, int]:
        """Jobs running throughout ``[start, end]``, and at some moment of it widened by
        ``margin`` (in process ``pid``): the truth of a read made at an unknown moment in it."""
        sure = loose = 0
        for job, (where, began) in self.started.items():
            if pid is not None and where != pid:
                continue
            ended = self.finished.get(job, (0, end + 1))[1]
            sure += began <= start and ended > end
            loose += began - margin <= end and ended + margin > start
        return sure, loose


class Library:
    """One library's producer and workers."""

    name: str
    #: whether the library records its processes' threads (Dramatiq does not)
    records_slots = True
    #: whether the completions are the list marker's (jobs taken) rather than jobs finished
    takes: bool
    processes: int
    slots: int

    def __init__(self, url: str, queue: str, ms: int) -> None:
        self.url, self.queue, self.ms = url, queue, ms
        self.client: Any = redis.Redis.from_url(url)

    def push(self) -> str:
        raise NotImplementedError

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    async def beats(self, r: aioredis.Redis) -> dict[int, float]:
        """Each live process's last heartbeat, by pid (none where the library keeps none)."""
        return {}

    async def registered(self, adapter: Any, r: aioredis.Redis) -> bool:
        """Whether every worker process has registered."""
        return bool((await adapter.sample()).consumers == self.processes)

    def records(self) -> tuple[dict[str, tuple[int, float]], dict[str, tuple[int, float]]]:
        def read(key: str) -> dict[str, tuple[int, float]]:
            out = {}
            for job, raw in self.client.hgetall(f"{self.queue}:{key}").items():
                pid, at = raw.decode().split()
                out[job.decode()] = (int(pid), float(at))
            return out

        return read("started"), read("finished")


class Sidekiq(Library):
    name, takes = "sidekiq", True
    processes, slots = len(SIDEKIQ_THREADS), sum(SIDEKIQ_THREADS)

    def push(self) -> str:
        jid, now = uuid.uuid4().hex[:24], time.time()
        job = {
            "class": "TimedJob",
            "args": [self.queue, self.ms],
            "retry": True,
            "queue": self.queue,
            "jid": jid,
            "created_at": now,
            "enqueued_at": now,
        }
        with self.client.pipeline() as pipe:
            pipe.sadd("queues", self.queue)
            pipe.lpush(f"queue:{self.queue}", json.dumps(job))
            pipe.execute()
        return jid

    def start(self) -> None:
        self.workers = [SidekiqProcess(self.url, [self.queue], n) for n in SIDEKIQ_THREADS]

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()

    async def beats(self, r: aioredis.Redis) -> dict[int, float]:
        out = {}
        for identity in await r.smembers("processes"):
            beat = await r.hget(identity, "beat")
            if beat is not None:  # the identity is host:pid:nonce
                key = identity if isinstance(identity, bytes) else identity.encode()
                out[int(key.split(b":")[-2])] = float(beat)
        return out


class RQ(Library):
    name, takes = "rq", False
    processes = slots = RQ_WORKERS

    def push(self) -> str:
        queue = rq.Queue(self.queue, connection=self.client)
        # by name: run as ``-m``, this module is ``__main__`` here, not in the workers
        job = queue.enqueue("benchmarks.accuracy_workers.timed_job", self.ms)
        return str(job.id)

    def start(self) -> None:
        command = [sys.executable, "-m", "rq.cli", "worker", "--url", self.url, self.queue]
        command += ["--worker-class", "benchmarks.accuracy_workers.RecordingWorker"]
        self.workers = [
            subprocess.Popen(
                [*command, "--name", f"{self.queue}-{n}"],
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for n in range(RQ_WORKERS)
        ]

    def stop(self) -> None:
        _terminate(self.workers)


class Dramatiq(Library):
    """Two ``dramatiq`` processes of 2 threads each (``benchmarks/dramatiq_jobs.py``), each
    prefetching as many messages as it has threads (``dramatiq_queue_prefetch``): Dramatiq
    counts what a consumer prefetched in its ack set, so with its default prefetch (twice the
    threads) in flight also counts the messages a process holds waiting for a thread."""

    name, takes, records_slots = "dramatiq", True, False
    processes, slots = DRAMATIQ_PROCESSES, DRAMATIQ_PROCESSES * DRAMATIQ_THREADS

    def __init__(self, url: str, queue: str, ms: int) -> None:
        super().__init__(url, queue, ms)
        self.broker = RedisBroker(url=url)  # type: ignore[no-untyped-call]
        self.actor = dramatiq.actor(
            broker=self.broker, actor_name="timed_job", queue_name=queue, max_retries=0
        )(_never_run)

    async def registered(self, adapter: Any, r: aioredis.Redis) -> bool:
        """Every process's broker beats (an idle one holds nothing of the queue, so the adapter
        cannot tell it serves it yet)."""
        members = cast(list[bytes], await r.zrange("dramatiq:__heartbeats__", 0, -1))
        beating = {m.decode() for m in members}
        return len(beating - {self.broker.broker_id}) >= self.processes

    def push(self) -> str:
        job = uuid.uuid4().hex
        self.actor.send(job, self.ms)
        return job

    def start(self) -> None:
        env = os.environ | {
            "QAS_ACC_URL": self.url,
            "QAS_ACC_QUEUE": self.queue,
            "dramatiq_queue_prefetch": str(DRAMATIQ_THREADS),
        }
        command = [sys.executable, "-m", "dramatiq", "benchmarks.dramatiq_jobs"]
        command += ["--processes", str(DRAMATIQ_PROCESSES), "--threads", str(DRAMATIQ_THREADS)]
        self.workers = [
            subprocess.Popen(
                command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
        ]

    def stop(self) -> None:
        _terminate(self.workers)
        self.broker.close()


class Resque(Library):
    """Four workers writing what Resque 3.0's write (``benchmarks/resque_worker.py``: no Ruby
    Resque is installable here), a job at a time each."""

    name, takes = "resque", False
    processes = slots = RESQUE_WORKERS

    def push(self) -> str:
        job = uuid.uuid4().hex
        payload = {"class": "TimedJob", "args": [job, self.ms]}
        self.client.rpush(f"resque:queue:{self.queue}", json.dumps(payload))
        return job

    def start(self) -> None:
        command = [sys.executable, "-m", "benchmarks.resque_worker", self.url, self.queue]
        self.workers = [
            subprocess.Popen(
                [*command, str(self.ms)],
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for _ in range(RESQUE_WORKERS)
        ]

    def stop(self) -> None:
        _terminate(self.workers)


def _never_run(job: str, ms: int) -> None:
    """The producer's side of ``benchmarks.dramatiq_jobs.timed_job`` (the workers run theirs)."""


def _terminate(workers: list[subprocess.Popen[bytes]]) -> None:
    for worker in workers:
        worker.terminate()
    for worker in workers:
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


LIBRARIES: dict[str, type[Library]] = {
    "sidekiq": Sidekiq,
    "rq": RQ,
    "dramatiq": Dramatiq,
    "resque": Resque,
}


@dataclass
class Sample:
    #: when the sample was asked for: the read happened between this and its ``observed_at``
    asked: float
    snapshot: QueueSnapshot
    #: each process's heartbeat, read before and after the sample (equal: no beat in between)
    beats: dict[int, float]
    steady_beats: bool


def _share(flags: list[bool]) -> float | None:
    return round(sum(flags) / len(flags), 3) if flags else None


def _within(value: int | None, low: int, high: int) -> bool:
    return value is not None and low <= value <= high


def score(library: Library, samples: list[Sample], records: Records) -> dict[str, Any]:
    ends = records.started if library.takes else records.finished
    names = ("processes", "slots", "in_flight", "now", "arrivals", "completions", "flag")
    ok: dict[str, list[bool]] = {k: [] for k in names}
    previous = samples[0]
    stale: list[int] = []
    rate_errors: list[float] = []
    for sample in samples[1:]:
        s, a, t = sample.snapshot, sample.asked, sample.snapshot.observed_at
        ok["processes"].append(s.consumers == library.processes)
        ok["slots"].append(s.slots == (library.slots if library.records_slots else None))
        sure_now, loose_now = records.running_in(a, t, margin=EPSILON)
        ok["now"].append(_within(s.in_flight, sure_now, loose_now))
        beats = sample.beats.items()
        if beats:  # as of each process's heartbeat
            if sample.steady_beats:  # the work state is taken a little before the beat
                spans = [records.running_in(b - BEAT_SPAN, b, pid, EPSILON) for pid, b in beats]
                sure, loose = sum(x for x, _ in spans), sum(x for _, x in spans)
                ok["in_flight"].append(_within(s.in_flight, sure, loose))
            shown = s.in_flight or 0
            stale.append(max(0, sure_now - shown, shown - loose_now))
        else:
            ok["in_flight"].append(ok["now"][-1])
        # each interval's counts, against what happened in it: surely between the two reads
        # (after the previous one was answered, before this one was asked), or possibly
        pa, pt = previous.asked, previous.snapshot.observed_at
        low = sum(1 for _, before, after in records.pushed if before > pt and after < a)
        high = sum(1 for _, before, after in records.pushed if after > pa and before < t)
        arrived = (s.arrivals_total or 0) - (previous.snapshot.arrivals_total or 0)
        ok["arrivals"].append(low <= arrived <= high)
        done = (s.completions_total or 0) - (previous.snapshot.completions_total or 0)
        low = sum(1 for _, at in ends.values() if pt + EPSILON < at < a - EPSILON)
        high = sum(1 for _, at in ends.values() if pa - EPSILON < at < t + EPSILON)
        ok["completions"].append(low <= done <= high)
        if s.counts_exact:
            ok["flag"].append(ok["arrivals"][-1] and ok["completions"][-1])
        previous = sample
        base = next(b.snapshot for b in samples if b.snapshot.observed_at >= t - RATE_WINDOW)
        span = t - base.observed_at
        if span >= RATE_WINDOW - 1:
            true_rate = sum(1 for _, at in ends.values() if base.observed_at < at <= t) / span
            rate = ((s.completions_total or 0) - (base.completions_total or 0)) / span
            if true_rate > 0:
                rate_errors.append(abs(rate - true_rate) / true_rate)
    readings = samples[-1].snapshot.readings
    return {
        "samples": len(samples) - 1,
        "jobs": len(records.pushed),
        "processes_equal": _share(ok["processes"]),
        "slots_equal": _share(ok["slots"]),
        "in_flight_equal": _share(ok["in_flight"]),
        "in_flight_precision": readings.in_flight.precision.value,
        "in_flight_age_max_s": round(max(x.snapshot.readings.in_flight.age for x in samples), 3),
        "in_flight_equal_at_sample": _share(ok["now"]),
        "in_flight_off_at_sample_max": max(stale) if stale else None,
        "arrivals_exact": _share(ok["arrivals"]),
        "completions_exact": _share(ok["completions"]),
        "completion_rate_err_max": round(max(rate_errors), 3) if rate_errors else None,
        "counts_flagged_exact": _share([x.snapshot.counts_exact for x in samples[1:]]),
        "flagged_exact_and_right": _share(ok["flag"]),
        "counts_source": samples[-1].snapshot.counts_source,
    }


async def _drive(
    library: Library, load: Load, records: Records, stop: asyncio.Event, t0: float
) -> None:
    pushed = len(records.pushed)
    while not stop.is_set():
        for _ in range(min(load.due(time.monotonic() - t0) - pushed, 50)):
            before = time.time()
            job = await asyncio.to_thread(library.push)
            records.pushed.append((job, before, time.time()))
            pushed += 1
        await asyncio.sleep(0.01)


async def run_one(url: str, name: str, load_name: str, seconds: float, interval: float) -> Any:
    load = LOADS[load_name]
    queue = f"qas-acc-{name}-{uuid.uuid4().hex[:6]}"
    cls = LIBRARIES[name]
    ms = round(1000 * cls.slots / load.take_rate)
    library = cls(url, queue, ms)
    metadata = {"url": url, "queue": queue, "format": name, "workerThroughput": "1"}
    connections = Connections()
    adapter = open_adapter(parse_metadata(metadata).source, connections)
    r = aioredis.Redis.from_url(url)
    records, stop = Records(), asyncio.Event()
    library.start()
    try:
        deadline = time.monotonic() + 60
        while not await library.registered(adapter, r):
            assert time.monotonic() < deadline, f"{name}: the workers did not register"
            await asyncio.sleep(0.2)
        for _ in range(load.backlog):
            before = time.time()
            records.pushed.append((library.push(), before, time.time()))
        samples: list[Sample] = []
        t0 = time.monotonic()
        traffic = asyncio.create_task(_drive(library, load, records, stop, t0))
        while time.monotonic() - t0 < seconds:
            beats = await library.beats(r)
            asked = time.time()
            snapshot = await adapter.sample()
            after = await library.beats(r)
            samples.append(Sample(asked, snapshot, after, beats == after))
            await asyncio.sleep(interval)
        stop.set()
        await traffic
        records.started, records.finished = library.records()
    finally:
        await adapter.aclose()
        await connections.aclose()
        library.stop()
        await r.aclose()
    return {"library": name, "load": load_name, "job_ms": ms} | score(library, samples, records)


async def run(args: argparse.Namespace) -> None:
    async with private_redis() as url:
        for name in args.libraries.split(","):
            for load in args.loads.split(","):
                print(json.dumps(await run_one(url, name, load, args.seconds, args.interval)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--libraries", default=",".join(LIBRARIES))
    parser.add_argument("--loads", default=",".join(LOADS))
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--interval", type=float, default=1.0)
    asyncio.run(run(parser.parse_args(argv)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
