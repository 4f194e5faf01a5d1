"""The simulator's queue-age-scaler goes through the server's evaluation code, not a copy: the
same Evaluator (signals, policy, per-sample cache) and the same reading of KEDA's answers from a
decision, where an unknown figure is UNAVAILABLE to the server and no answer to the simulated
KEDA."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import pytest

from scaler import evaluation
from scaler.errors import Unavailable
from scaler.policy import Decision, Reason
from scaler.simulate.autoscaler import Observation
from scaler.simulate.queue_age_source import QueueAgeSource, keda_answers
from scaler.simulate.scenario_file import parse_scenario

SIMULATE = Path(__file__).resolve().parents[2] / "scaler" / "simulate"
#: what only the server's evaluation step may call: a call of these in the simulator would be
#: a second evaluation path
EVALUATION_ONLY = {"compute_signals", "decide", "is_active", "PolicyState"}


def test_no_simulator_module_evaluates_on_its_own() -> None:
    for path in SIMULATE.glob("*.py"):
        tree = ast.parse(path.read_text())
        imported = {
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
            and node.module in ("scaler.policy", "scaler.signals")
            for alias in node.names
        }
        assert not imported & EVALUATION_ONLY, f"{path.name} imports {imported & EVALUATION_ONLY}"


def _source(fmt: str = "rq") -> QueueAgeSource:
    document = {
        "name": "shared",
        "duration": "5m",
        "arrivals": [{"at": 0, "rate": 1}],
        "jobs": [{"share": 1, "duration": {"median": "1s", "p99": "2s"}}],
        "trigger": {
            "url": "redis://sim/0", "queue": "q", "format": fmt, "targetAge": "30s",
            "jobDuration": "1s", "workerConcurrency": "1",
        },
    }  # fmt: skip
    return QueueAgeSource(parse_scenario(document))


def _observation(now: float, arrivals: int) -> Observation:
    times = [float(i) for i in range(arrivals)]
    return Observation(
        now=now, depth=arrivals, in_flight=0, oldest_enqueued_at=0.0 if arrivals else None,
        arrivals_total=arrivals, starts_total=0, completions_total=0, booting=0, ready=0,
        draining=0, cpu_ready=0.0, queue_head=0, requeued=(), arrival_times=times,
    )  # fmt: skip


def test_the_simulated_scaler_answers_from_the_servers_evaluator() -> None:
    source = _source()
    assert type(source.evaluator) is evaluation.Evaluator
    for second in range(40):
        source.observe(_observation(float(second), second))
    value, active = source.read(_observation(39.0, 39))
    assert active is True
    # the answer is the server's own: the metric value of the decision the Evaluator made
    last = source.evaluator.evaluate(source.history.view, source.spec, source.history.arrivals)
    assert not last.fresh  # the same sample: the decision the read was answered from
    assert value == evaluation.metric_value(source.spec, last.decision) > 0


def test_what_the_server_answers_unavailable_the_simulated_keda_gets_no_answer_for() -> None:
    source = _source()
    spec = source.spec
    known = Decision(3, None, None, Reason.AGE_OVER_TARGET, 3.0, True, 3.0, 1.0)
    assert evaluation.metric_value(spec, known) == 3.0
    assert evaluation.activity(spec, known) is True
    with pytest.raises(Unavailable, match=r"the workers of .* is unknown right now"):
        evaluation.metric_value(spec, replace(known, metric_value=None))
    with pytest.raises(Unavailable, match=r"the depth of .* is unknown right now"):
        evaluation.activity(spec, replace(known, active=None))
    # before the first sample there is nothing to answer from: no value, no activity
    assert source.read(_observation(0.0, 0)) == (None, None)
    # KEDA asks both in one GetMetricsAndActivity call, for its poll and the HPA's metric:
    # either UNAVAILABLE leaves both unanswered (an IsActive error holds the HPA's replicas too)
    assert keda_answers(spec, known) == (3.0, True)
    assert keda_answers(spec, replace(known, active=None)) == (None, None)
    assert keda_answers(spec, replace(known, metric_value=None)) == (None, None)
