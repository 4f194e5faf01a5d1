"""One scenario, every chosen policy, on the same jobs."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from scaler.simulate.engine import Simulation
from scaler.simulate.policies import build, check_overrides
from scaler.simulate.run_result import RunResult
from scaler.simulate.scenario import Scenario
from scaler.simulate.scoreboard import Row, row
from scaler.simulate.workload import Workload, generate

#: points per series in the figures
SERIES_POINTS = 720

#: called with the policy's name and the share of its run done
Progress = Callable[[str, float], None]


@dataclass(frozen=True, slots=True)
class ScenarioRun:
    scenario: Scenario
    results: dict[str, RunResult]
    #: arrivals per second over each series step, at the series' times
    arrival_rate: list[float]

    @property
    def rows(self) -> dict[str, Row]:
        return {name: row(result, self.scenario.duration) for name, result in self.results.items()}

    def json(self) -> dict[str, object]:
        """``{"scenario": NAME, "policies": {POLICY: {figure: value}}}``."""
        return {"scenario": self.scenario.name, "policies": self.rows}


def control_tick(scenario: Scenario) -> float:
    return min(1.0, scenario.spec.sample_interval)


def simulate(
    scenario: Scenario, policies: Sequence[str], progress: Progress | None = None
) -> ScenarioRun:
    check_overrides(scenario)
    autoscalers = {name: build(name, scenario) for name in policies}  # fail before running
    workload = generate(scenario)
    tick = control_tick(scenario)
    step = max(tick, tick * round(scenario.duration / SERIES_POINTS / tick))
    results: dict[str, RunResult] = {}
    for name, autoscaler in autoscalers.items():
        report = None if progress is None else _for_policy(progress, name)
        simulation = Simulation(
            scenario, workload, autoscaler, tick=tick, series_step=step, progress=report
        )
        results[name] = simulation.run()
    return ScenarioRun(scenario, results, _arrival_rate(workload, scenario.duration, step))


def _for_policy(progress: Progress, name: str) -> Callable[[float], None]:
    return lambda share: progress(name, share)


def _arrival_rate(workload: Workload, duration: float, step: float) -> list[float]:
    bins = [0] * (math.ceil(duration / step - 1e-9) + 1)
    for t in workload.arrivals[:-1]:
        bins[min(int(t / step) + 1, len(bins) - 1)] += 1
    return [count / step for count in bins]
