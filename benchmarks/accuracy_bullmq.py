"""BullMQ's figures against the truth, with the real Node client (tests/clients/bullmq_driver.js,
installed by scripts/clients): priorities, delays and pauses mixed.

The driver adds the jobs (a third with a priority 1-5, a fifth delayed 0.5-3 s) and runs two
Workers of concurrency 2; it records when each job was added, started and finished. The
scaler's BullMQ adapter samples the queue every ``--interval`` s; the queue is paused for 3 s
every 15 s. At every sample:

- age: the oldest job ready (added + delay) and not started, against the adapter's oldest age
  (goal: within 1 s + 2%);
- in flight: the adapter's count within the jobs started and not finished (±50 ms, the moves
  to and from BullMQ's active list around the processor);
- workers: the adapter's count equal to the two Workers;
- arrivals and completions: the adapter's totals since the first sample within the jobs the
  driver added (finished) by then, counted with and without the add (finish) in flight;
- completion rate over 10 s against the jobs finished in those 10 s (goal: within 10%).

Run: ``.venv/bin/python -m benchmarks.accuracy_bullmq [--loads steady,bursty,keeping-up]
[--seconds 40] [--interval 1]`` with Redis on 127.0.0.1:6379 (or ``--redis-url``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
import uuid
from dataclasses import dataclass
from typing import Any

from brokers.base import QueueSnapshot
from brokers.connections import Connections
from brokers.registry import open_adapter
from scaler.spec import parse_metadata
from tests.integration.clients import BullMQDriver

WORKERS, CONCURRENCY = 2, 2
EPSILON = 0.05
RATE_WINDOW = 10.0
PAUSE_EVERY, PAUSE_FOR = 15.0, 3.0


@dataclass(frozen=True)
class Load:
    backlog: int
    #: (seconds since start) -> jobs due by then
    due: Any
    take_rate: float


LOADS = {
    "steady": Load(200, lambda t: int(t * 20), 25.0),
    "bursty": Load(0, lambda t: 120 * (int(t / 12) + 1), 20.0),
    "keeping-up": Load(0, lambda t: int(t * 8), 40.0),
}


def _options(rng: random.Random) -> dict[str, int]:
    roll = rng.random()
    if roll < 1 / 3:
        return {"priority": rng.randint(1, 5)}
    if roll < 1 / 3 + 1 / 5:
        return {"delay": rng.randint(500, 3000)}
    return {}


async def _drive(driver: BullMQDriver, load: Load, seconds: float, stop: asyncio.Event) -> None:
    rng = random.Random(11)
    t0, added, paused = time.monotonic(), 0, False
    while not stop.is_set():
        t = time.monotonic() - t0
        want_paused = t % PAUSE_EVERY >= PAUSE_EVERY - PAUSE_FOR
        if want_paused != paused:
            await driver.call("pause" if want_paused else "resume")
            paused = want_paused
        for _ in range(min(load.due(t) - added, 50)):
            await driver.add(1, **_options(rng))
            added += 1
        await asyncio.sleep(0.01)
    if paused:
        await driver.call("resume")


def _share(flags: list[bool]) -> float | None:
    return round(sum(flags) / len(flags), 3) if flags else None


def score(snapshots: list[QueueSnapshot], log: dict[str, Any]) -> dict[str, Any]:
    added = [
        (str(i), before / 1000, after / 1000, delay / 1000)
        for i, before, after, delay in log["added"]
    ]
    started = {k: v / 1000 for k, v in log["started"].items()}
    finished = {k: v / 1000 for k, v in log["finished"].items()}
    first = snapshots[0]
    t0 = first.observed_at
    age_ok, in_flight_ok, workers_ok, arrivals_ok, completions_ok = [], [], [], [], []
    age_errors: list[float] = []
    rate_errors: list[float] = []
    for s in snapshots[1:]:
        t = s.observed_at
        ready = [b + d for i, b, _, d in added if b + d <= t and started.get(i, t + 1) > t]
        true_age = t - min(ready) if ready else 0.0
        measured = t - s.oldest_enqueued_at if s.oldest_enqueued_at is not None else None
        if s.depth == 0:  # an empty queue's age is 0, exactly (the signals' "empty")
            measured = 0.0
        if true_age > 0 and measured is not None:
            age_errors.append(abs(measured - true_age))
            age_ok.append(abs(measured - true_age) <= 1.0 + 0.02 * true_age)
        elif true_age > 0:
            age_ok.append(False)
        sure = sum(1 for i, a in started.items() if a <= t < finished.get(i, t + 1))
        loose = sum(
            1 for i, a in started.items() if a - EPSILON <= t < finished.get(i, t + 1) + EPSILON
        )
        in_flight_ok.append(s.in_flight is not None and sure <= s.in_flight <= loose)
        workers_ok.append(s.consumers == WORKERS)
        low = sum(1 for _, _, after, _ in added if t0 < after and after <= t)
        high = sum(1 for _, before, _, _ in added if before <= t) - sum(
            1 for _, _, after, _ in added if after <= t0
        )
        arrived = (s.arrivals_total or 0) - (first.arrivals_total or 0)
        arrivals_ok.append(low <= arrived <= high)
        done = (s.completions_total or 0) - (first.completions_total or 0)
        low = sum(1 for f in finished.values() if t0 + EPSILON < f <= t - EPSILON)
        high = sum(1 for f in finished.values() if t0 - EPSILON < f <= t + EPSILON)
        completions_ok.append(low <= done <= high)
        base = next((b for b in snapshots if b.observed_at >= t - RATE_WINDOW), None)
        if base is not None and t - base.observed_at >= RATE_WINDOW - 1:
            span = t - base.observed_at
            true_rate = sum(1 for f in finished.values() if base.observed_at < f <= t) / span
            rate = ((s.completions_total or 0) - (base.completions_total or 0)) / span
            if true_rate > 0:
                rate_errors.append(abs(rate - true_rate) / true_rate)
    return {
        "samples": len(snapshots) - 1,
        "jobs": len(added),
        "age_n": len(age_ok),
        "age_err_p50_s": round(sorted(age_errors)[len(age_errors) // 2], 3) if age_errors else None,
        "age_err_max_s": round(max(age_errors), 3) if age_errors else None,
        "age_within_goal": _share(age_ok),
        "in_flight_equal": _share(in_flight_ok),
        "workers_equal": _share(workers_ok),
        "arrivals_exact": _share(arrivals_ok),
        "completions_exact": _share(completions_ok),
        "completion_rate_err_max": round(max(rate_errors), 3) if rate_errors else None,
        "counts_flagged_exact": _share([s.counts_exact for s in snapshots]),
    }


async def run_one(redis_url: str, name: str, seconds: float, interval: float) -> dict[str, Any]:
    load = LOADS[name]
    queue = f"qas-acc-bullmq-{uuid.uuid4().hex[:6]}"
    driver = await BullMQDriver.start(redis_url, queue)
    metadata = {"url": redis_url, "queue": queue, "format": "bullmq", "workerThroughput": "1"}
    connections = Connections()
    adapter = open_adapter(parse_metadata(metadata).source, connections)
    stop = asyncio.Event()
    try:
        if load.backlog:
            await driver.add(load.backlog)
        ms = round(1000 * WORKERS * CONCURRENCY / load.take_rate)
        for n in range(WORKERS):
            await driver.call("worker", concurrency=CONCURRENCY, name=f"w{n}", ms=ms)
        snapshots = [await adapter.sample()]
        traffic = asyncio.create_task(_drive(driver, load, seconds, stop))
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds:
            await asyncio.sleep(interval)
            snapshots.append(await adapter.sample())
        stop.set()
        await traffic
        log = await driver.call("log")
    finally:
        await adapter.aclose()
        await connections.aclose()
        await driver.close()
    return {"library": "bullmq (Node)", "load": name} | score(snapshots, log)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--loads", default=",".join(LOADS))
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--interval", type=float, default=1.0)
    args = parser.parse_args(argv)
    for name in args.loads.split(","):
        print(json.dumps(asyncio.run(run_one(args.redis_url, name, args.seconds, args.interval))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
