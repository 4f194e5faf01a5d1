"""The fleet simulator: KEDA and HPA maths, scenario files, the engine, and the shipped scenarios
against issue 5's goal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from scaler.cli import main
from scaler.simulate.keda import (
    HorizontalPodAutoscaler,
    KedaLoop,
    MetricType,
    PodCounts,
    replicas_for,
)
from scaler.simulate.pool_scenario import is_pool_document
from scaler.simulate.run import simulate
from scaler.simulate.scenario import Hpa, Keda, ScenarioError
from scaler.simulate.scenario_file import load_document, load_scenario, parse_scenario
from scaler.simulate.scoreboard import KEYS, OURS, verdict
from scaler.simulate.shared_scenario import is_shared

#: the single-queue, single-Deployment scenarios (tests/unit/test_simulate_pool.py runs the pool
#: ones, tests/unit/test_simulate_shared.py those of several Deployments)
SCENARIOS = [
    path
    for path in sorted((Path(__file__).resolve().parents[2] / "scenarios").glob("*.yaml"))
    if not is_pool_document(yaml.safe_load(path.read_text())) and not is_shared(load_document(path))
]

#: where our policy misses the goal, and why (docs/simulator.md, "Where the goal is missed"):
#: none of the shipped scenarios since the closed loop met RQ's exact counts
KNOWN_MISSES: dict[str, set[str]] = {}


def small(**changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "name": "small",
        "duration": "10m",
        "seed": 3,
        "arrivals": [{"at": 0, "rate": 4}],
        "jobs": [{"share": 1, "duration": {"median": "1s", "p99": "3s"}}],
        "workers": {"concurrency": 2, "bootSeconds": "10s"},
        "dependency": {"name": "db", "capacity": 20, "perWorker": 2, "apiShare": 0.2},
        "slo": {"targetAge": "30s"},
        "trigger": {
            "url": "redis://sim/0", "queue": "q", "format": "rq", "targetAge": "30s",
            "jobDuration": "1.2s", "workerConcurrency": "2", "dependencies": "db=16/2",
        },
    }  # fmt: skip
    document.update(changes)
    return document


# --- the HPA and KEDA ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("metric_type", "value", "target", "pods", "expected"),
    [
        pytest.param(
            MetricType.AVERAGE_VALUE, 10.5, 1.0, PodCounts(10, 10), 10, id="within tolerance"
        ),
        pytest.param(
            MetricType.AVERAGE_VALUE, 12.0, 1.0, PodCounts(10, 10), 12, id="average value"
        ),
        pytest.param(
            MetricType.AVERAGE_VALUE, 500.0, 20.0, PodCounts(2, 1), 25, id="ceil(sum/target)"
        ),
        pytest.param(MetricType.VALUE, 120.0, 60.0, PodCounts(4, 3), 6, id="value: ratio x ready"),
        pytest.param(MetricType.VALUE, 120.0, 60.0, PodCounts(0, 0), 2, id="value from zero"),
        pytest.param(MetricType.UTILIZATION, 4.0, 0.5, PodCounts(4, 4), 8, id="cpu"),
        pytest.param(
            MetricType.UTILIZATION, 4.0, 0.5, PodCounts(8, 4), 8, id="unready count as idle"
        ),
        pytest.param(
            MetricType.UTILIZATION, 4.2, 0.5, PodCounts(8, 4), 8, id="then within tolerance"
        ),
    ],
)
def test_hpa_recommendation(
    metric_type: MetricType, value: float, target: float, pods: PodCounts, expected: int
) -> None:
    assert replicas_for(metric_type, value, target, pods, 0.1) == expected


def test_hpa_scale_up_limit_and_scale_down_stabilisation() -> None:
    hpa = HorizontalPodAutoscaler(Hpa(), 1, 100)
    assert hpa.desired(0.0, 50, 2) == 6  # max(+100%, +4 pods) per 15 s
    assert hpa.desired(15.0, 50, 6) == 12
    assert hpa.desired(30.0, 3, 12) == 12  # the highest recommendation of the last 300 s
    assert hpa.desired(316.0, 3, 12) == 3
    assert hpa.desired(330.0, None, 3) == 3  # metric unavailable: no change
    assert hpa.desired(345.0, 7, 0) == 0  # the HPA does nothing at zero


def test_keda_activation_and_cooldown() -> None:
    keda = KedaLoop(Keda(cooldown_period=300.0))
    assert keda.poll(0.0, True, 0) == 1
    assert keda.poll(30.0, False, 5) == 5
    assert keda.poll(299.0, False, 5) == 5
    assert keda.poll(300.0, False, 5) == 0
    assert keda.poll(330.0, None, 3) == 3  # an error changes nothing


# --- scenario files -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        pytest.param({"workers": {"bootSecs": 3}}, "workers.bootSecs: unknown key", id="typo"),
        pytest.param({"duration": "an hour"}, "duration: got 'an hour'", id="duration"),
        pytest.param({"arrivals": []}, "arrivals: expected at least one", id="no arrivals"),
        pytest.param({"trigger": {"queue": "q"}}, "trigger.url", id="trigger metadata"),
        pytest.param({"policies": {"cpu": {"target": 3}}}, "policies.cpu.target", id="setting"),
        pytest.param({"policies": {"hpa-magic": {}}}, "policies.hpa-magic", id="policy"),
    ],
)
def test_scenario_errors_name_the_key(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError, match=message.replace(".", r"\.")):
        simulate(parse_scenario(small(**change)), ["cpu"])


def test_the_ceiling_leaves_the_api_its_share() -> None:
    scenario = parse_scenario(small())
    assert scenario.ceiling == 8  # (20 - 20% for the API) / 2 per worker


# --- the engine ---------------------------------------------------------------------------------


def test_every_policy_sees_the_same_jobs_and_completes_them() -> None:
    run = simulate(parse_scenario(small(initialWorkers=3)), ["queue-age-scaler", "fixed"])
    ours, fixed = run.results[OURS], run.results["fixed"]
    assert len(ours.waits) == len(fixed.waits) > 2000
    assert ours.completed >= len(ours.waits) - 20
    assert ours.duplicates == fixed.duplicates == 0


def test_scale_in_without_drain_runs_interrupted_jobs_again() -> None:
    document = small(
        arrivals=[{"at": 0, "rate": 0.6}, {"at": "3m", "rate": 0.05}],
        jobs=[{"share": 1, "duration": {"median": "20s", "p99": "40s"}}],
        workers={"concurrency": 2, "bootSeconds": "10s", "drain": False},
        hpa={"scaleDownStabilization": "30s"},
    )
    document["trigger"] |= {"jobDuration": "22s"}
    result = simulate(parse_scenario(document), [OURS]).results[OURS]
    assert result.duplicates > 0
    assert result.completed <= len(result.waits)


def test_over_the_ceiling_the_api_waits() -> None:
    document = small(arrivals=[{"at": 0, "rate": 30}], policies={"fixed": {"replicas": 14}})
    rows = simulate(parse_scenario(document), ["fixed"]).rows
    assert rows["fixed"]["over_ceiling_s"] == 600.0
    assert rows["fixed"]["api_wait_p99_s"] > 0


# --- the command and the shipped scenarios ------------------------------------------------------


def test_json_prints_the_scoreboard(capsys: pytest.CaptureFixture[str]) -> None:
    path = SCENARIOS[0]
    assert main(["simulate", str(path), "--json", "--policies", "queue-age-scaler,cpu"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["scenario"] == load_scenario(path).name
    assert list(printed["policies"]) == ["queue-age-scaler", "cpu"]
    assert all(list(row) == list(KEYS) for row in printed["policies"].values())


def test_out_writes_a_figure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "small.yaml"
    path.write_text(json.dumps(small(duration="3m")))
    assert main(["simulate", str(path), "--out", str(tmp_path / "figures")]) == 0
    assert "queue-age-scaler" in capsys.readouterr().out
    assert (tmp_path / "figures" / "small.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_shipped_scenario_meets_the_goal(path: Path) -> None:
    scenario = load_scenario(path)
    outcome = verdict(simulate(scenario, list(_all_policies())).rows)
    held = {"under_ceiling", "fewest_violations", "cheap_enough"} - KNOWN_MISSES.get(
        scenario.name, set()
    )
    for name in held:
        assert getattr(outcome, name), f"{scenario.name}: {outcome.lines}"
    for name in KNOWN_MISSES.get(scenario.name, set()):
        assert not getattr(outcome, name), (
            f"{scenario.name} now meets {name}: drop it from KNOWN_MISSES and the docs"
        )


def _all_policies() -> tuple[str, ...]:
    from scaler.simulate.policies import POLICY_NAMES

    return POLICY_NAMES
