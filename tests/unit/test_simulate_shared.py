"""Several Deployments on one shared dependency in the simulator: the scenario format, the
fleets run in lockstep on one dependency, the shared ceiling's figure, and the shipped
scenarios against the goal (ours the only policy never above the shared ceiling)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scaler.cli import main
from scaler.simulate.policies import POLICY_NAMES
from scaler.simulate.scenario import ScenarioError
from scaler.simulate.scenario_file import load_document
from scaler.simulate.scoreboard import OURS, verdict
from scaler.simulate.shared_run import OVER_SHARED, simulate_shared
from scaler.simulate.shared_scenario import is_shared, parse_shared_scenario

SHARED = [
    path
    for path in sorted((Path(__file__).resolve().parents[2] / "scenarios").glob("*.yaml"))
    if is_shared(load_document(path))
]


def deployment(name: str, rate: float, **changes: Any) -> dict[str, Any]:
    item: dict[str, Any] = {
        "name": name,
        "initialWorkers": 1,
        "arrivals": [{"at": 0, "rate": 1}, {"at": "1m", "rate": rate}],
        "jobs": [{"share": 1, "duration": {"median": "1s", "p99": "2s"}}],
        "workers": {"concurrency": 2, "bootSeconds": "10s"},
        "perWorker": 2,
        "hpa": {"scaleDownStabilization": "30s"},
        "trigger": {
            "url": "redis://sim/0", "queue": name, "format": "rq", "targetAge": "30s",
            "jobDuration": "1.1s", "workerConcurrency": "2", "dependencies": "db=20/2",
        },
    }  # fmt: skip
    item.update(changes)
    return item


def two(**changes: Any) -> dict[str, Any]:
    """20 slots for the workers, 10 workers in all; each Deployment asks for about 9."""
    document: dict[str, Any] = {
        "name": "two",
        "duration": "6m",
        "seed": 4,
        "dependency": {"name": "db", "capacity": 25, "apiShare": 0.2},
        "slo": {"targetAge": "30s"},
        "deployments": [deployment("a", 16), deployment("b", 16)],
    }
    document.update(changes)
    return document


def test_each_trigger_alone_goes_above_the_shared_ceiling_the_budget_does_not() -> None:
    scenario = parse_shared_scenario(two())
    assert scenario.names == ("a", "b") and scenario.slots == 20
    run = simulate_shared(scenario, [OURS, "keda-rabbitmq-queuelength"])
    rows = run.rows
    assert rows[OURS][OVER_SHARED] == 0
    assert rows["keda-rabbitmq-queuelength"][OVER_SHARED] > 60
    # neither Deployment starves: the 10 workers are split between them
    pools = run.pool_rows[OURS]
    assert pools["a"]["completed"] > 0.8 * pools["b"]["completed"]
    assert pools["b"]["completed"] > 0.8 * pools["a"]["completed"]


def test_one_deployments_jobs_slow_the_others_on_the_dependency() -> None:
    """Over the dependency's slots, every fleet's operations there slow down (processor
    sharing over the whole demand): b alone completes more than beside an a that floods it."""
    alone = two(deployments=[deployment("b", 16)])
    crowded = two(deployments=[deployment("a", 60), deployment("b", 16)])
    policy = ["keda-rabbitmq-queuelength"]
    b_alone = simulate_shared(parse_shared_scenario(alone), policy).pool_rows[policy[0]]["b"]
    b_crowded = simulate_shared(parse_shared_scenario(crowded), policy).pool_rows[policy[0]]["b"]
    assert b_crowded["wait_p99_s"] > b_alone["wait_p99_s"]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (two(deployments=[]), "deployments: expected a list of mappings"),
        (two(deployments=[deployment("a", 1), deployment("a", 1)]), "deployments[1].name"),
        (two(deployments=[deployment("a", 1, replicas=3)]), "deployments[0].replicas: unknown key"),
        (two(trigger={}), "trigger: unknown key of a scenario with deployments"),
        (two(dependency={"name": "db"}), "dependency: expected a mapping with the shared capacity"),
        (
            two(deployments=[deployment("a", 1, workers={"concurrency": 0})]),
            "deployments[0].workers.concurrency",
        ),
    ],
)
def test_scenario_errors_name_the_key(document: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_shared_scenario(document)


def test_the_command_prints_the_shared_scoreboard(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "two.yaml"
    path.write_text(json.dumps(two(duration="3m")))
    assert main(["simulate", str(path), "--policies", f"{OURS},fixed"]) == 0
    table = capsys.readouterr().out
    assert "over shared s" in table and "a SLO s" in table and "goal " in table
    assert main(["simulate", str(path), "--json", "--policies", OURS]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["deployments"] == ["a", "b"]
    assert set(printed["byDeployment"][OURS]) == {"a", "b"}
    assert OVER_SHARED in printed["policies"][OURS]


@pytest.mark.parametrize("path", SHARED, ids=[p.stem for p in SHARED])
def test_shipped_shared_scenario_meets_the_goal(path: Path) -> None:
    run = simulate_shared(parse_shared_scenario(load_document(path)), list(POLICY_NAMES))
    outcome = verdict(run.rows, OVER_SHARED)
    assert outcome.met, f"{path.stem}: {outcome.lines}"
