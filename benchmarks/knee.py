"""Issue 13's goals on the simulator's dependency scenarios, with figures.

- Knee scenarios (a USL curve): the ceiling our policy learned (``learnKnee``) and when, against
  the real knee (goal: within ±10% after the first peak); the jobs it completes against the best
  fixed fleet of any size (goal: at least 95%), and against the depth and CPU policies.
- Live-slot scenarios (``otherSessions``): seconds above the real ceiling and jobs completed with
  the probed trigger the scenario ships, and with the same trigger typed (its ``|LIMIT``
  fallback as a static limit; goal: the probe 0 s above where the typed limit goes over).

Run: ``.venv/bin/python -m benchmarks.knee scenarios/usl-*.yaml scenarios/live-slots-*.yaml``
(about a minute per knee scenario: the fixed fleets are swept).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import re
from pathlib import Path
from typing import Any

import yaml

from scaler.simulate.engine import Simulation
from scaler.simulate.metric_sources import KedaAutoscaler
from scaler.simulate.policies import build
from scaler.simulate.queue_age_source import QueueAgeSource
from scaler.simulate.run import control_tick, simulate
from scaler.simulate.scenario import Scenario
from scaler.simulate.scenario_file import parse_scenario
from scaler.simulate.workload import generate

#: the policies that grow with the backlog or CPU, whatever the dependency does
GREEDY = ("keda-redis-listlength", "keda-rabbitmq-queuelength", "cpu")


def learned_caps(scenario: Scenario) -> tuple[list[tuple[float, int | None]], int]:
    """Our policy's knee cap each time it changed, (time, workers), and the jobs completed."""
    autoscaler = build("queue-age-scaler", scenario)
    assert isinstance(autoscaler, KedaAutoscaler)
    source = autoscaler.source
    assert isinstance(source, QueueAgeSource)
    changes: list[tuple[float, int | None]] = []
    step = autoscaler.step

    def watched(obs: Any, replicas: int) -> int:
        answer = step(obs, replicas)
        knee = source.evaluator.state.knee
        cap = knee.cap if knee is not None else None
        if not changes or changes[-1][1] != cap:
            changes.append((obs.now, cap))
        return answer

    autoscaler.step = watched  # type: ignore[method-assign]
    tick = control_tick(scenario)
    result = Simulation(scenario, generate(scenario), autoscaler, tick=tick, series_step=60).run()
    return changes, result.completed


def best_fixed(scenario: Scenario, knee: float) -> tuple[int, int]:
    """The fixed fleet that completes the most jobs, from half the knee to twice it."""
    best = (0, -1)
    for replicas in range(max(1, int(knee / 2)), int(2 * knee) + 2):
        fixed = dataclasses.replace(scenario, policies={"fixed": {"replicas": replicas}})
        completed = simulate(fixed, ["fixed"]).rows["fixed"]["completed"]
        if int(completed) > best[1]:
            best = (replicas, int(completed))
    return best


def knee_report(scenario: Scenario) -> list[str]:
    knee = scenario.knee
    assert knee is not None
    changes, ours = learned_caps(scenario)
    first_peak_end = _first_peak_end(scenario)
    after = [cap for t, cap in changes if t <= first_peak_end and cap is not None]
    settled = after[-1] if after else None
    within = settled is not None and abs(settled - knee) <= 0.1 * knee
    replicas, fixed = best_fixed(scenario, knee)
    rows = simulate(scenario, list(GREEDY)).rows
    lines = [
        f"{scenario.name}: real knee {knee:.1f} workers",
        "  learned cap (time s, workers): "
        + ", ".join(f"{t:.0f}: {cap}" for t, cap in changes if cap is not None),
        f"  at the end of the first peak ({first_peak_end:.0f} s): {settled} "
        f"({'within' if within else 'NOT within'} ±10% of {knee:.1f})",
        f"  completed: ours {ours}; best fixed fleet {replicas} workers {fixed}; "
        f"ours/best {ours / fixed:.3f} (goal >= 0.95)",
    ]
    for name in GREEDY:
        lines.append(
            f"  {name}: completed {rows[name]['completed']}, API wait p99 "
            f"{rows[name]['api_wait_p99_s']} s"
        )
    return lines


def slots_report(path: Path, scenario: Scenario) -> list[str]:
    document = yaml.safe_load(path.read_text())
    dependencies = str(document["trigger"]["dependencies"])
    typed_text = re.sub(r"probe:[A-Za-z0-9_.-]+\|", "", dependencies)
    if typed_text == dependencies:
        return [f"{scenario.name}: no probe:NAME|LIMIT fallback to compare as a typed limit"]
    document["trigger"]["dependencies"] = typed_text
    typed = parse_scenario(document)
    ours = simulate(scenario, ["queue-age-scaler"]).rows["queue-age-scaler"]
    static = simulate(typed, ["queue-age-scaler"]).rows["queue-age-scaler"]
    return [
        f"{scenario.name}:",
        f"  probed ({dependencies}): {ours['over_ceiling_s']} s above the real ceiling, "
        f"{ours['completed']} completed, {ours['slo_violation_s']} s over the SLO",
        f"  typed ({typed_text}): {static['over_ceiling_s']} s above the real ceiling, "
        f"{static['completed']} completed, {static['slo_violation_s']} s over the SLO",
    ]


def _first_peak_end(scenario: Scenario) -> float:
    """When the arrival rate first falls after its first rise."""
    rates = [(s.at, s.rate) for s in scenario.arrivals]
    for (_, before), (at, rate) in itertools.pairwise(rates):
        if rate < before:
            return at
    return scenario.duration


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("scenarios", nargs="+", type=Path)
    args = parser.parse_args()
    for path in args.scenarios:
        scenario = parse_scenario(yaml.safe_load(path.read_text()))
        lines = knee_report(scenario) if scenario.knee is not None else []
        if scenario.dependency.others:
            lines += slots_report(path, scenario)
        print("\n".join(lines or [f"{scenario.name}: no USL curve nor other sessions"]))


if __name__ == "__main__":
    main()
