"""How close the scaler's signals are to the truth, per job library and load.

For each library and load, real producers enqueue jobs and real consumers take them, each
recording when (``benchmarks/accuracy_libraries.py``). The scaler's own sampler samples the queue
every ``--interval`` seconds; at every sample the oldest age, the arrival rate and the completion
rate are compared with what the producers and consumers recorded.

Loads:
- ``steady``: a backlog of 200 jobs, then 20 jobs/s in and 25 jobs/s out: a backlog throughout;
- ``bursty``: 120 jobs at once every 12 s, 20 jobs/s out: the queue drains and refills;
- ``keeping-up``: 8 jobs/s in, consumers able to take 40/s: the queue is mostly empty.

Goals (issue 3): age error at most 1 s + 2% where the library records a timestamp; at most one
sample interval + 5% for estimates, once the history spans the age; rates within 10% in steady
state with a backlog.

Run: ``.venv/bin/python -m benchmarks.accuracy [--libraries rq,celery] [--loads steady]
[--seconds 36] [--json]`` with Redis on 127.0.0.1:6379 (or ``--redis-url``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from benchmarks.accuracy_libraries import LIBRARIES
from benchmarks.accuracy_library import Library, Truth
from brokers.base import Precision
from brokers.registry import open_adapter
from scaler.errors import Unavailable
from scaler.evaluation import Evaluator
from scaler.metrics import Metrics
from scaler.sampler import SamplerRegistry
from scaler.signals import QueueSignals
from scaler.spec import parse_metadata

RATE_WINDOW = 10.0


@dataclass(frozen=True)
class Load:
    name: str
    backlog: int
    #: seconds -> jobs to enqueue at that moment, called on a 10 ms tick
    arrivals: Callable[[float, float], int]
    take_rate: float
    #: whether the rate goal applies (a backlog throughout)
    rate_goal: bool


def _steady(rate: float) -> Callable[[float, float], int]:
    return lambda before, now: int(now * rate) - int(before * rate)


def _bursts(jobs: int, every: float) -> Callable[[float, float], int]:
    return lambda before, now: jobs * (int(now / every) - int(before / every))


LOADS = {
    load.name: load
    for load in (
        Load("steady", 200, _steady(20.0), 25.0, True),
        Load("bursty", 0, _bursts(120, 12.0), 20.0, False),
        Load("keeping-up", 0, _steady(8.0), 40.0, False),
    )
}


@dataclass
class Errors:
    age_exact: list[float] = field(default_factory=list)
    age_exact_goal: list[bool] = field(default_factory=list)
    age_estimate: list[float] = field(default_factory=list)
    age_estimate_goal: list[bool] = field(default_factory=list)
    age_lower_bound_valid: list[bool] = field(default_factory=list)
    arrival: list[float] = field(default_factory=list)
    completion: list[float] = field(default_factory=list)
    rate_exact: list[bool] = field(default_factory=list)
    samples: int = 0
    stale: int = 0


def true_age(truth: Truth, at: float, start: int) -> tuple[float | None, int]:
    """The oldest job waiting at ``at`` (enqueued by then, not taken by then), and where to start
    looking next time (jobs before it were taken)."""
    with truth.lock:
        enqueued = truth.enqueued[start:]
        taken = dict(truth.taken)
    for offset, (job_id, enqueued_at) in enumerate(enqueued):
        if enqueued_at > at:
            return 0.0, start + offset
        took = taken.get(job_id)
        if took is None or took > at:
            return at - enqueued_at, start + offset
    return 0.0, start + len(enqueued)


def true_rates(truth: Truth, at: float, window: float) -> tuple[float, float]:
    with truth.lock:
        arrived = sum(1 for _, t in truth.enqueued if at - window < t <= at)
        took = sum(1 for t in truth.taken.values() if at - window < t <= at)
    return arrived / window, took / window


def score(
    signals: QueueSignals,
    truth: Truth,
    errors: Errors,
    interval: float,
    cursor: int,
    warm: bool,
    load: Load,
) -> int:
    at = signals.observed_at
    age, cursor = true_age(truth, at, cursor)
    errors.samples += 1
    figure = signals.oldest_age
    if age is not None and figure.value is not None and age > 0:
        error = abs(figure.value - age)
        if figure.precision is Precision.EXACT:
            errors.age_exact.append(error)
            errors.age_exact_goal.append(error <= 1.0 + 0.02 * age)
        elif figure.precision is Precision.ESTIMATE:
            errors.age_estimate.append(error)
            errors.age_estimate_goal.append(error <= interval + 0.05 * age)
        elif figure.precision is Precision.LOWER_BOUND:
            errors.age_lower_bound_valid.append(figure.value <= age + interval)
    if warm:
        arrived, took = true_rates(truth, at, RATE_WINDOW)
        for measured, real, bucket in (
            (signals.arrival_rate, arrived, errors.arrival),
            (signals.completion_rate, took, errors.completion),
        ):
            if measured.value is not None and real > 0:
                bucket.append(abs(measured.value - real) / real)
        errors.rate_exact.append(signals.arrival_rate.precision is Precision.EXACT)
    return cursor


def _pace(stop: threading.Event, rate: float, step: Callable[[], Any]) -> None:
    start, calls = time.monotonic(), 0
    while not stop.is_set():
        step()
        calls += 1
        stop.wait(max(0.0, start + calls / rate - time.monotonic()))


def _produce(stop: threading.Event, library: Library, load: Load, t0: float) -> None:
    before = 0.0
    while not stop.is_set():
        now = time.monotonic() - t0
        for _ in range(load.arrivals(before, now)):
            library.produce()
        before = now
        stop.wait(0.01)


class Traffic(threading.Thread):
    """A producer or consumer thread whose failure ends the run instead of skewing it."""

    def __init__(self, target: Callable[[], None]) -> None:
        super().__init__(daemon=True)
        self._work = target
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._work()
        except BaseException as error:
            self.error = error


async def run_one(
    redis_url: str, library_name: str, load: Load, seconds: float, interval: float
) -> dict[str, Any]:
    queue = f"qas-acc-{library_name}-{uuid.uuid4().hex[:6]}"
    truth = Truth()
    library = LIBRARIES[library_name](redis_url, queue, truth)
    metadata = {
        "url": redis_url,
        "queue": queue,
        "workerThroughput": "1",
        "sampleInterval": f"{interval}s",
        "rateWindow": f"{RATE_WINDOW}s",
        **library.metadata,
    }
    spec = parse_metadata(metadata)
    samplers = SamplerRegistry(open_adapter, Metrics())
    errors = Errors()
    stop = threading.Event()
    threads: list[Traffic] = []
    try:
        sampler = samplers.get(spec)
        await sampler.history(first_timeout=5.0)  # the sampler runs before any job arrives
        for _ in range(load.backlog):
            library.produce()
        t0 = time.monotonic()
        threads.append(Traffic(lambda: _produce(stop, library, load, t0)))
        if library.uses_worker:
            library.start_worker(load.take_rate)
        else:
            threads.append(Traffic(lambda: _pace(stop, load.take_rate, library.take)))
        for thread in threads:
            thread.start()
        cursor, seen, evaluator = 0, 0.0, Evaluator()
        while time.monotonic() - t0 < seconds:
            failed = [t.error for t in threads if t.error is not None]
            if failed:
                raise RuntimeError(f"{library_name}/{load.name}: traffic failed") from failed[0]
            await sampler.wait_for_sample(interval * 2)
            try:
                history = await sampler.history(first_timeout=1.0)
            except Unavailable:  # a slow sample on a loaded machine: count it, go on
                errors.stale += 1
                continue
            if history[-1].observed_at == seen:
                continue
            seen = history[-1].observed_at
            signals = evaluator.evaluate(history, spec, sampler.arrivals).signals
            warm = time.monotonic() - t0 > RATE_WINDOW + 2 * interval
            cursor = score(signals, truth, errors, interval, cursor, warm, load)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=10)
        await samplers.aclose()
        library.stop()
    return summarize(library_name, load, errors, len(truth.enqueued), len(truth.taken))


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _share(flags: list[bool]) -> float | None:
    return round(sum(flags) / len(flags), 3) if flags else None


def summarize(
    library: str, load: Load, errors: Errors, produced: int, taken: int
) -> dict[str, Any]:
    def r(value: float | None, digits: int = 2) -> float | None:
        return None if value is None else round(value, digits)

    return {
        "library": library,
        "load": load.name,
        "produced": produced,
        "taken": taken,
        "samples": errors.samples,
        "stale_samples": errors.stale,
        "age_exact_n": len(errors.age_exact),
        "age_exact_err_p50_s": r(_pct(errors.age_exact, 0.5)),
        "age_exact_err_max_s": r(max(errors.age_exact, default=None) if errors.age_exact else None),
        "age_exact_within_goal": _share(errors.age_exact_goal),
        "age_estimate_n": len(errors.age_estimate),
        "age_estimate_err_p50_s": r(_pct(errors.age_estimate, 0.5)),
        "age_estimate_err_max_s": r(max(errors.age_estimate) if errors.age_estimate else None),
        "age_estimate_within_goal": _share(errors.age_estimate_goal),
        "age_lower_bound_n": len(errors.age_lower_bound_valid),
        "age_lower_bound_valid": _share(errors.age_lower_bound_valid),
        "arrival_rate_err_p50": r(statistics.median(errors.arrival), 3) if errors.arrival else None,
        "arrival_rate_err_max": r(max(errors.arrival, default=None) if errors.arrival else None, 3),
        "completion_rate_err_p50": r(statistics.median(errors.completion), 3)
        if errors.completion
        else None,
        "completion_rate_err_max": r(max(errors.completion) if errors.completion else None, 3),
        "rates_exact_share": _share(errors.rate_exact),
        "rate_goal_applies": load.rate_goal,
        "rates_within_goal": _share([e <= 0.10 for e in errors.arrival + errors.completion])
        if load.rate_goal
        else None,
    }


COLUMNS = (
    ("library", "library", 9),
    ("load", "load", 10),
    ("age_exact_err_p50_s", "age err p50", 11),
    ("age_exact_err_max_s", "max", 6),
    ("age_exact_within_goal", "in goal", 7),
    ("age_estimate_err_p50_s", "est err p50", 11),
    ("age_estimate_err_max_s", "max", 6),
    ("age_estimate_within_goal", "in goal", 7),
    ("age_lower_bound_n", "lower-b n", 9),
    ("arrival_rate_err_p50", "λ err p50", 9),
    ("arrival_rate_err_max", "max", 6),
    ("completion_rate_err_p50", "μ err p50", 9),
    ("completion_rate_err_max", "max", 6),
    ("rates_exact_share", "exact", 5),
    ("rates_within_goal", "in goal", 7),
)


def table(rows: list[dict[str, Any]]) -> str:
    def cell(value: Any, width: int) -> str:
        return f"{'-' if value is None else value:>{width}}"

    lines = ["  ".join(cell(title, width) for _, title, width in COLUMNS)]
    lines += ["  ".join(cell(row[key], width) for key, _, width in COLUMNS) for row in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--libraries", default=",".join(LIBRARIES))
    parser.add_argument("--loads", default=",".join(LOADS))
    parser.add_argument("--seconds", type=float, default=36.0, help="per library and load")
    parser.add_argument("--interval", type=float, default=1.0, help="sampleInterval")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = []
    for library in args.libraries.split(","):
        for load_name in args.loads.split(","):
            print(f"running {library} / {load_name} ...", file=sys.stderr, flush=True)
            row = asyncio.run(
                run_one(args.redis_url, library, LOADS[load_name], args.seconds, args.interval)
            )
            print(json.dumps(row), file=sys.stderr, flush=True)  # nothing lost if a later run fails
            rows.append(row)
    print(json.dumps(rows, indent=1) if args.json else table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
