"""The simulated dependency: a USL throughput curve, another service's sessions over time, and
the probe our policy reads it through."""

from __future__ import annotations

import math
from typing import Any

import pytest

from scaler.simulate.pods import usl_rate
from scaler.simulate.run import simulate
from scaler.simulate.scenario import ScenarioError
from scaler.simulate.scenario_file import parse_scenario
from tests.unit.test_simulate import small


def test_the_usl_rate_is_the_throughput_per_operation_and_past_the_slots_they_wait() -> None:
    # no contention: every operation at full speed up to the slots, then they share them
    assert usl_rate(10, 20, 0.0, 0.0) == 1.0
    assert usl_rate(40, 20, 0.0, 0.0) == 0.5
    # sigma 0.1, kappa 0.012 at 10 at once: X(10) = 10 / (1 + 0.9 + 1.08)
    assert usl_rate(10, 100, 0.1, 0.012) * 10 == pytest.approx(10 / 2.98)
    # the throughput peaks at N* = sqrt((1 - sigma) / kappa) = 8.66, and falls past it
    throughput = [usl_rate(n, 100, 0.1, 0.012) * n for n in range(1, 30)]
    assert throughput.index(max(throughput)) + 1 == 9
    assert throughput[20] < throughput[8] * 0.8


def test_other_sessions_change_the_slots_and_the_ceiling_over_time() -> None:
    scenario = parse_scenario(
        small(dependency={
            "name": "db", "capacity": 20, "perWorker": 2, "apiShare": 0.2,
            "otherSessions": [{"at": 0, "sessions": 0}, {"at": "2m", "sessions": 8}],
            "usl": {"sigma": 0.05, "kappa": 0.01},
        })
    )  # fmt: skip
    dependency = scenario.dependency
    assert [dependency.ceiling_at(t) for t in (0, 119, 120, 599)] == [8, 8, 4, 4]
    assert dependency.knee_operations == pytest.approx(math.sqrt(0.95 / 0.01))
    # in workers: where the jobs' completions peak beside the API's 4 operations, over 2 job
    # slots each; checked against the curve itself
    assert scenario.knee == pytest.approx(math.sqrt((1 + 0.05 * 3 + 0.01 * 12) / 0.01) / 2)
    jobs = [m * usl_rate(m + 4, 20, 0.05, 0.01) for m in range(1, 17)]
    assert scenario.knee is not None
    assert jobs.index(max(jobs)) + 1 == round(scenario.knee * 2)


@pytest.mark.parametrize(
    ("dependency", "message"),
    [
        ({"capacity": 0, "usl": {"kappa": 0.01}}, "usl and otherSessions need a capacity"),
        ({"capacity": 20, "usl": {"alpha": 1}}, "dependency.usl.alpha: unknown key"),
        (
            {"capacity": 20, "otherSessions": [{"at": "2m", "sessions": 1}, {"at": 0, "sessions": 2}]},
            "otherSessions: expected the steps in time order",
        ),
    ],
)  # fmt: skip
def test_bad_dependency_models_are_named(dependency: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        parse_scenario(small(dependency={"name": "db"} | dependency))


def test_a_probed_trigger_follows_the_slots_another_service_leaves() -> None:
    # 20 slots less the API's 4: 8 workers, until another service takes 8 slots at 1m (4 left),
    # before the load rises at 2m
    document = small(
        duration="8m",
        arrivals=[{"at": 0, "rate": 1}, {"at": "2m", "rate": 12}],
        initialWorkers=1,
        dependency={
            "name": "db", "capacity": 20, "perWorker": 2, "apiShare": 0.2,
            "otherSessions": [{"at": 0, "sessions": 0}, {"at": "1m", "sessions": 8}],
        },
    )  # fmt: skip
    probed = document | {"trigger": document["trigger"] | {"dependencies": "db=probe:db/2"}}
    typed = simulate(parse_scenario(document), ["queue-age-scaler"]).rows["queue-age-scaler"]
    live = simulate(parse_scenario(probed), ["queue-age-scaler"]).rows["queue-age-scaler"]
    # the typed limit (16 slots) keeps 8 workers where only 4 fit; the probe never goes over
    assert typed["over_ceiling_s"] > 200
    assert live["over_ceiling_s"] == 0
