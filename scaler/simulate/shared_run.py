"""Several Deployments on one shared dependency, every chosen policy, on the same jobs.

For each policy, one :class:`~scaler.simulate.engine.Simulation` per Deployment (its own fleet,
trigger, KEDA and HPA), run in lockstep, one control tick at a time: before each tick every
fleet learns how many of the others' jobs hold the dependency, which slows its own operations
there as the API's do. The alternatives scale each trigger on its own, as KEDA would; this
project's triggers go through one :class:`~scaler.budget_registry.BudgetRegistry`, the
server's, as if one scaler served every ScaledObject. Beside the usual figures, the time the
Deployments' workers together held more slots than the dependency has for them
(``over_shared_ceiling_s``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scaler.budget_registry import BudgetRegistry
from scaler.simulate.autoscaler import Autoscaler
from scaler.simulate.engine import Simulation
from scaler.simulate.metric_sources import KedaAutoscaler
from scaler.simulate.policies import build, check_overrides
from scaler.simulate.queue_age_source import QueueAgeSource
from scaler.simulate.run import SERIES_POINTS, Progress, control_tick
from scaler.simulate.run_result import RunResult
from scaler.simulate.scenario import Scenario
from scaler.simulate.scoreboard import OURS, Row, row
from scaler.simulate.shared_scenario import SharedScenario
from scaler.simulate.workload import generate

#: the figure of the time above the ceiling the Deployments share
OVER_SHARED = "over_shared_ceiling_s"


@dataclass(frozen=True, slots=True)
class SharedRun:
    scenario: SharedScenario
    #: by policy, by Deployment
    results: dict[str, dict[str, RunResult]]
    #: by policy: seconds the workers of all Deployments held more slots than there are
    over_shared_s: dict[str, float]

    @property
    def rows(self) -> dict[str, Row]:
        """One row per policy, its Deployments together: waits of every job, violation
        seconds, worker-seconds, scalings, duplicates and completions summed."""
        return {
            name: _together(list(by_pool.values()), self.scenario.duration)
            | {OVER_SHARED: round(self.over_shared_s[name], 1)}
            for name, by_pool in self.results.items()
        }

    @property
    def pool_rows(self) -> dict[str, dict[str, Row]]:
        duration = self.scenario.duration
        return {
            name: {pool: row(result, duration) for pool, result in by_pool.items()}
            for name, by_pool in self.results.items()
        }

    def json(self) -> dict[str, object]:
        """``{"scenario", "deployments", "policies": {POLICY: row}, "byDeployment": ...}``."""
        return {
            "scenario": self.scenario.name,
            "deployments": list(self.scenario.names),
            "policies": self.rows,
            "byDeployment": self.pool_rows,
        }


def simulate_shared(
    scenario: SharedScenario, policies: Sequence[str], progress: Progress | None = None
) -> SharedRun:
    for deployment in scenario.deployments:
        check_overrides(deployment)
        for name in policies:
            build(name, deployment)  # fail before running
    workloads = [generate(d) for d in scenario.deployments]
    tick = min(control_tick(d) for d in scenario.deployments)
    step = max(tick, tick * round(scenario.duration / SERIES_POINTS / tick))
    results: dict[str, dict[str, RunResult]] = {}
    over: dict[str, float] = {}
    # set as the operator would: the Deployments' longest HPA window and KEDA cooldown
    hold = max(d.hpa.scale_down_stabilization for d in scenario.deployments)
    cooldown = max(d.keda.cooldown_period for d in scenario.deployments)
    for name in policies:
        budgets = BudgetRegistry(hold=hold, cooldown=cooldown)
        simulations = [
            Simulation(d, w, _autoscaler(name, d, pool, budgets), tick=tick, series_step=step)
            for d, w, pool in zip(scenario.deployments, workloads, scenario.names, strict=True)
        ]
        results[name], over[name] = _lockstep(scenario, simulations, tick)
        if progress is not None:
            progress(name, 1.0)
    return SharedRun(scenario, results, over)


def _autoscaler(name: str, deployment: Scenario, pool: str, budgets: BudgetRegistry) -> Autoscaler:
    if name == OURS:
        return KedaAutoscaler(deployment, QueueAgeSource(deployment, budgets, pool))
    return build(name, deployment)


def _lockstep(
    scenario: SharedScenario, simulations: list[Simulation], tick: float
) -> tuple[dict[str, RunResult], float]:
    ticks = max(s.start() for s in simulations)
    slots = scenario.slots
    over = 0.0
    per_worker = [s.scenario.dependency.per_worker for s in simulations]
    for k in range(1, ticks + 1):
        t = min(k * tick, scenario.duration)
        jobs = [s.n_dep for s in simulations]
        total = sum(jobs)
        for simulation, own in zip(simulations, jobs, strict=True):
            simulation.share_dependency(total - own, t - tick)
            simulation.step(k)
        held = sum(p * s.working for p, s in zip(per_worker, simulations, strict=True))
        if held > slots + 1e-9:
            over += tick
    results = {pool: s.finish() for pool, s in zip(scenario.names, simulations, strict=True)}
    return results, over


def _together(results: list[RunResult], duration: float) -> Row:
    waits = [w for r in results for w in r.waits]
    joined = RunResult(
        waits=waits,
        slo_violation_s=sum(r.slo_violation_s for r in results),
        worker_seconds=sum(r.worker_seconds for r in results),
        scale_events=sum(r.scale_events for r in results),
        over_ceiling_s=max(r.over_ceiling_s for r in results),
        # one dependency: every fleet's operations there run at the same speed
        api_waits=results[0].api_waits,
        duplicates=sum(r.duplicates for r in results),
        completed=sum(r.completed for r in results),
        series=results[0].series,
    )
    return row(joined, duration)
