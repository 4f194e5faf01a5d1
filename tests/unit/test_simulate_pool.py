"""The pool simulator: several FIFO queues served by one fleet in a serving order, the policies
on it (ours through the server's pool evaluation, KEDA's scalers one trigger per queue with the
HPA taking the largest recommendation), and the shipped pool scenarios against the goal."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from scaler.cli import main
from scaler.pool_spec import ServingOrder
from scaler.simulate.direct_autoscalers import Fixed
from scaler.simulate.pool_engine import PoolSimulation
from scaler.simulate.pool_policies import PoolKeda, Whole, build_pool
from scaler.simulate.pool_run import simulate_pool
from scaler.simulate.pool_scenario import is_pool_document, parse_pool_scenario
from scaler.simulate.scenario import ScenarioError
from scaler.simulate.scoreboard import verdict
from scaler.simulate.workload import generate

POOL_SCENARIOS = [
    path
    for path in sorted((Path(__file__).resolve().parents[2] / "scenarios").glob("*.yaml"))
    if is_pool_document(yaml.safe_load(path.read_text()))
]
#: where our policy misses the goal, and why (docs/simulator.md, "Pools")
KNOWN_MISSES: dict[str, set[str]] = {"pool-sidekiq-weighted": {"fewest_violations", "cheap_enough"}}


def small_pool(order: str = "strict", **changes: Any) -> dict[str, Any]:
    """Two queues, each 6 jobs/s of 1 s: 12 busy slots, on a fixed fleet of 2 x 4 slots."""
    queue = {"arrivals": [{"at": 0, "rate": 6}], "jobs": [{"share": 1, "duration": {"median": "1s", "p99": "1s"}}]}  # fmt: skip
    document: dict[str, Any] = {
        "name": "small-pool",
        "duration": "10m",
        "seed": 3,
        "initialWorkers": 2,
        "pool": {
            "order": order,
            "queues": [
                {"name": "high", "weight": 3, "targetAge": "10s", **copy.deepcopy(queue)},
                {"name": "low", "weight": 1, "targetAge": "60s", **copy.deepcopy(queue)},
            ],
        },
        "workers": {"concurrency": 4, "bootSeconds": "10s"},
        "dependency": {"name": "db", "capacity": 40, "perWorker": 4},
        "trigger": {
            "url": "redis://sim/0",
            "format": "sidekiq",
            "queues": "high:3,low:1" if order == "weighted" else "high,low",
            "queueOrder": order,
            "queueTargetAges": "high=10s,low=60s",
            "workerConcurrency": "4",
        },
    }
    document.update(changes)
    return document


def run_fixed(order: str, replicas: int) -> tuple[float, float]:
    """Each queue's share of the completions on a fixed fleet too small for both."""
    pool = parse_pool_scenario(small_pool(order))
    workloads = [generate(q.scenario) for q in pool.queues]
    result = PoolSimulation(pool, workloads, Whole(Fixed(replicas)), tick=1.0).run()
    done = result.queue_completed
    return done[0] / sum(done), done[1] / sum(done)


def test_strict_order_serves_the_lower_queue_only_from_what_the_higher_leaves() -> None:
    high, low = run_fixed("strict", 2)  # 8 slots for 12 jobs/s of 1 s
    assert high > 0.7 and low < 0.3  # high takes the 6 slots it needs, low the 2 left


def test_weighted_order_shares_the_slots_by_weight() -> None:
    high, _ = run_fixed("weighted", 1)  # 4 slots, both queues always waiting
    assert high == pytest.approx(0.75, abs=0.05)


def test_round_robin_takes_turns() -> None:
    high, _ = run_fixed("roundRobin", 1)
    assert high == pytest.approx(0.5, abs=0.05)


def test_keda_scalers_get_one_trigger_per_queue_and_ours_one_for_the_pool() -> None:
    pool = parse_pool_scenario(small_pool())
    ours = build_pool("queue-age-scaler", pool)
    theirs = build_pool("keda-redis-listlength", pool)
    assert isinstance(ours, PoolKeda) and isinstance(theirs, PoolKeda)
    assert (len(ours.sources), len(theirs.sources)) == (1, 2)
    assert pool.order is ServingOrder.STRICT


def test_ours_sizes_the_pool_for_both_queues_where_one_trigger_per_queue_does_not() -> None:
    run = simulate_pool(
        parse_pool_scenario(small_pool()), ["queue-age-scaler", "keda-redis-listlength"]
    )
    rows = run.rows
    # 12 jobs/s of 1 s need 12 slots: 3 workers; the largest queue alone asks for fewer
    assert (
        rows["queue-age-scaler"]["slo_violation_s:low"]
        < rows["keda-redis-listlength"]["slo_violation_s:low"]
    )
    assert rows["queue-age-scaler"]["over_ceiling_s"] == 0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"arrivals": [{"at": 0, "rate": 1}]}, "arrivals: a pool scenario gives it per queue"),
        ({"pool": {"order": "fifo", "queues": []}}, "pool.order: got 'fifo'"),
        ({"pool": {"queues": [{"name": "a", "colour": 1}]}}, "pool.queues[0].colour: unknown key"),
    ],
)
def test_pool_scenario_errors_name_the_key(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_pool_scenario(small_pool(**change))
    assert message in str(caught.value)


def test_the_trigger_must_list_the_pools_queues() -> None:
    document = small_pool()
    document["trigger"]["queues"] = "low,high"
    with pytest.raises(ScenarioError, match="expected the pool's queues in order, high,low"):
        parse_pool_scenario(document)


def test_json_has_each_queues_violations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "pool.yaml"
    path.write_text(json.dumps(small_pool(duration="2m")))
    assert main(["simulate", str(path), "--json", "--policies", "queue-age-scaler,fixed"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["scenario"] == "small-pool"
    assert set(out["policies"]) == {"queue-age-scaler", "fixed"}
    assert {"slo_violation_s", "slo_violation_s:high", "slo_violation_s:low"} <= set(
        out["policies"]["fixed"]
    )


@pytest.mark.parametrize("path", POOL_SCENARIOS, ids=[p.stem for p in POOL_SCENARIOS])
def test_shipped_pool_scenario_meets_the_goal(path: Path) -> None:
    from scaler.simulate.policies import POLICY_NAMES

    pool = parse_pool_scenario(yaml.safe_load(path.read_text()))
    outcome = verdict(simulate_pool(pool, list(POLICY_NAMES)).rows)
    misses = KNOWN_MISSES.get(pool.name, set())
    for name in {"under_ceiling", "fewest_violations", "cheap_enough"} - misses:
        assert getattr(outcome, name), f"{pool.name}: {outcome.lines}"
    for name in misses:
        assert not getattr(outcome, name), f"{pool.name} now meets {name}: update KNOWN_MISSES"
