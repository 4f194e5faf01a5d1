"""One pool scenario, every chosen policy, on the same jobs; the scoreboard with each queue's
violation seconds beside the totals."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scaler.simulate.policies import check_overrides
from scaler.simulate.pool_engine import PoolRunResult, PoolSimulation
from scaler.simulate.pool_policies import build_pool
from scaler.simulate.pool_scenario import PoolScenario
from scaler.simulate.run import Progress, control_tick
from scaler.simulate.scoreboard import KEYS, OURS, Row, row, verdict
from scaler.simulate.workload import generate


@dataclass(frozen=True, slots=True)
class PoolScenarioRun:
    pool: PoolScenario
    results: dict[str, PoolRunResult]

    @property
    def rows(self) -> dict[str, Row]:
        """The scoreboard's figures, and ``slo_violation_s:<queue>`` for each queue."""
        out: dict[str, Row] = {}
        for name, result in self.results.items():
            figures = row(result.result, self.pool.duration)
            for queue, seconds in zip(self.pool.queues, result.queue_violations, strict=True):
                figures[f"slo_violation_s:{queue.name}"] = round(seconds, 1)
            out[name] = figures
        return out

    def json(self) -> dict[str, object]:
        return {"scenario": self.pool.name, "policies": self.rows}


def simulate_pool(
    pool: PoolScenario, policies: Sequence[str], progress: Progress | None = None
) -> PoolScenarioRun:
    check_overrides(pool.base)
    autoscalers = {name: build_pool(name, pool) for name in policies}  # fail before running
    workloads = [generate(queue.scenario) for queue in pool.queues]
    tick = control_tick(pool.base)
    results: dict[str, PoolRunResult] = {}
    for name, autoscaler in autoscalers.items():
        results[name] = PoolSimulation(pool, workloads, autoscaler, tick=tick).run()
        if progress is not None:
            progress(name, 1.0)
    return PoolScenarioRun(pool, results)


_HEADERS = ("p50 s", "p99 s", "max s", "over SLO s", "worker-s", "scalings", "over ceil s",
            "dups", "completed")  # fmt: skip
_SHOWN = tuple(key for key in KEYS if key != "api_wait_p99_s")


def render_pool(run: PoolScenarioRun) -> str:
    pool = run.pool
    rows = run.rows
    queues = [q.name for q in pool.queues]
    width = max(len(name) for name in rows)
    slos = ", ".join(f"{q.name} {q.target_age:g} s" for q in pool.queues)
    ceiling = pool.base.ceiling
    lines = [
        f"{pool.name}: {pool.duration:g} s, pool {','.join(queues)} served {pool.order.value}, "
        f"SLO {slos}, ceiling {'none' if ceiling is None else ceiling}",
        " " * width
        + "  "
        + "  ".join(f"{h:>11}" for h in (*_HEADERS, *(f"{q} SLO s" for q in queues))),
    ]
    for name, figures in rows.items():
        keys = (*_SHOWN, *(f"slo_violation_s:{q}" for q in queues))
        lines.append(f"{name:<{width}}  " + "  ".join(f"{figures[key]:>11}" for key in keys))
    if OURS in rows:
        outcome = verdict(rows)
        lines.append(f"goal {'met' if outcome.met else 'missed'}: " + "; ".join(outcome.lines))
    return "\n".join(lines)
