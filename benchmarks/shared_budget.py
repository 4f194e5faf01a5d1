"""What a shared dependency budget costs per KEDA call: ``BudgetRegistry.apply`` (the pool's
need recorded, the budget split between its pools, the decision lowered to the grant) for a
budget of 1, 10 and 100 pools, and the split alone (``shared_budget.shares``).

    .venv/bin/python -m benchmarks.shared_budget [--calls 20000]

Prints microseconds per call, the best of three rounds: with the same figures again (the split
is reused) and with a new need on every call (a new split each time: the worst case). Each
pool's decision is a real one (the policy's, on two snapshots of a backlog); the pools ask in
turn, as KEDA's polls would.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

from brokers.base import Precision, QueueSnapshot
from scaler.budget_registry import BudgetRegistry
from scaler.evaluation import Evaluator
from scaler.policy import Decision
from scaler.shared_budget import PoolAsk, shares
from scaler.signals import QueueSignals
from scaler.spec import parse_metadata
from scaler.trigger_spec import TriggerSpec

Decided = tuple[str, TriggerSpec, QueueSignals, Decision]


def _decided(pools: int) -> list[Decided]:
    """For each pool: its name, spec, signals and decision (a backlog of 40 workers' worth)."""
    out: list[Decided] = []
    for number in range(pools):
        metadata = {
            "url": "redis://bench/0",
            "queue": f"q{number}",
            "format": "sidekiq",
            "workerThroughput": "1",
            "targetDrainTime": "10s",
            "dependencies": "postgres=100/5",
        }
        spec = parse_metadata(metadata)
        history = [
            QueueSnapshot(0.0, 400, 0, -30.0, Precision.EXACT, "payload", 1000, 600, consumers=4),
            QueueSnapshot(1.0, 400, 0, -29.0, Precision.EXACT, "payload", 1004, 604, consumers=4),
        ]
        evaluation = Evaluator().evaluate(history, spec)
        out.append((f"pool-{number}", spec, evaluation.signals, evaluation.decision))
    return out


def _apply(pools: int, calls: int, *, changing: bool) -> float:
    """µs per apply; ``changing``: every call with another need (a new split each time),
    else the same figures again (the split reused, as between KEDA's back-to-back calls)."""
    registry = BudgetRegistry()
    decided = _decided(pools)
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for call in range(calls):
            name, spec, signals, decision = decided[call % pools]
            if changing:
                decision = dataclasses.replace(decision, desired_workers=10 + call % 7)
            registry.apply("shop", name, name, spec, signals, decision, 0.0)
        best = min(best, time.perf_counter() - started)
    return best / calls * 1e6


def _shares(pools: int, calls: int) -> float:
    asks = [PoolAsk(f"p{n}", 10 + n % 30, 5.0, 1.0 + n % 3, 0, n % 7) for n in range(pools)]
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(calls):
            shares(100.0, asks)
        best = min(best, time.perf_counter() - started)
    return best / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()
    print(
        f"{'pools':>6}  {'apply, same figures µs':>22}  {'apply, new need µs':>18}  {'split µs':>9}"
    )
    for pools in (1, 10, 100):
        calls = max(200, args.calls // max(1, pools // 10))
        same = _apply(pools, calls, changing=False)
        new = _apply(pools, calls, changing=True)
        print(f"{pools:>6}  {same:>22.1f}  {new:>18.1f}  {_shares(pools, calls):>9.1f}")


if __name__ == "__main__":
    main()
