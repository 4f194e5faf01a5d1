"""The pool decision: one answer for the workers that serve several queues, built on each queue's
own decision, with the serving order, per-queue targets and the bounds on the total."""

from __future__ import annotations

import dataclasses

import pytest

from scaler.policy import Reason
from scaler.pool_policy import (
    PoolDecision,
    PoolMember,
    PoolState,
    allot,
    decide_pool,
    member_spec,
    queue_workers,
    with_total,
)
from scaler.pool_spec import ServingOrder
from scaler.signals import QueueSignals
from scaler.spec import parse_metadata
from scaler.trigger_spec import TriggerSpec
from tests.unit.test_policy import NOW, signals_of


def pool_of(**metadata: str) -> TriggerSpec:
    """A Sidekiq pool; every worker completes one job a second unless told otherwise."""
    base = {
        "url": "redis://localhost",
        "format": "sidekiq",
        "queues": "critical,default,low",
        "workerThroughput": "1",
    }
    return parse_metadata(base | metadata)


def decided(spec: TriggerSpec, *signals: QueueSignals) -> PoolDecision:
    assert spec.pool is not None
    queues = spec.pool.resolve()
    members = [PoolMember(q, member_spec(spec, q), s) for q, s in zip(queues, signals, strict=True)]
    decision, _ = decide_pool(members, spec, NOW, PoolState())
    return decision


#: critical keeps 6 of the 10 workers busy with a small backlog (needs 6 + 120/60 = 8), default
#: has a backlog (4 + 360/60 = 10), low is starved: nothing runs, 300 s old (1 + 300/60 = 6)
CRITICAL = signals_of(
    depth=120, in_flight=6, consumers=10, age=20, arrivals=6, completions=6, flow=6
)
DEFAULT = signals_of(
    depth=360, in_flight=4, consumers=10, age=50, arrivals=4, completions=4, flow=4
)
LOW = signals_of(depth=300, in_flight=0, consumers=10, age=300, arrivals=1, completions=0, flow=1)


def test_the_pool_needs_the_sum_of_its_queues_not_the_largest() -> None:
    pool = decided(pool_of(), CRITICAL, DEFAULT, LOW)
    needs = {q.name: round(q.need, 6) for q in pool.queues}
    assert needs == {"critical": 8.0, "default": 10.0, "low": 6.0}
    # KEDA's one metric per trigger would give the HPA max(8, 10, 6) = 10
    assert pool.decision.desired_workers == 24
    assert pool.decision.metric_value == 24.0
    assert pool.driving == "default"
    assert pool.decision.reason is Reason.DRAINING_BACKLOG
    assert pool.decision.reason_text == (
        "draining backlog; queue default needs 10.0 of 24.0 workers (draining backlog)"
    )


def test_each_queue_is_decided_on_its_share_of_the_workers() -> None:
    pool = decided(pool_of(), CRITICAL, DEFAULT, LOW)
    # 10 workers, running 6 : 4 : 0 jobs
    assert [q.signals.consumers for q in pool.queues] == [6, 4, 0]
    assert queue_workers([CRITICAL, DEFAULT, LOW], None) == [None, None, None]


def test_strict_order_starves_the_lower_queue_under_the_ceiling() -> None:
    pool = decided(pool_of(maxWorkers="12"), CRITICAL, DEFAULT, LOW)
    assert pool.decision.desired_workers == 12
    assert pool.decision.reason is Reason.CLAMPED
    assert pool.decision.limited_by == "maxWorkers"
    shares = {q.name: round(q.allotted, 6) for q in pool.queues}
    assert shares == {"critical": 8.0, "default": 4.0, "low": 0.0}
    assert pool.driving == "low"
    assert pool.decision.reason_text == (
        "clamped by maxWorkers; queue low gets 0.0 of the 6.0 workers it needs (draining backlog)"
    )


def test_a_budget_that_lowers_the_total_lowers_the_queues_allotments() -> None:
    pool = decided(pool_of(), CRITICAL, DEFAULT, LOW)
    # a shared budget grants 12 of the 24: strict order, the lowest queues go short
    granted = dataclasses.replace(pool.decision, desired_workers=12, reason=Reason.SHARED_BUDGET)
    within = with_total(pool, granted)
    assert {q.name: round(q.allotted, 6) for q in within.queues} == {
        "critical": 8.0, "default": 4.0, "low": 0.0,
    }  # fmt: skip
    assert within.driving == "low"
    assert within.decision.detail == (
        "queue low gets 0.0 of the 6.0 workers it needs (draining backlog)"
    )
    # the budget granting the whole need changes nothing but the decision
    assert with_total(pool, pool.decision).queues == pool.queues


def test_the_pools_lateness_is_its_latest_queues_age_over_its_own_target() -> None:
    spec = pool_of(queueTargetAges="critical=10s,low=10m")
    pool = decided(spec, CRITICAL, DEFAULT, LOW)
    # critical 20 s of 10 s, default 50 s of the pool's 60 s, low 300 s of 600 s
    assert pool.lateness == pytest.approx(2.0)


def test_weighted_order_gives_each_queue_its_weights_share_under_the_ceiling() -> None:
    spec = pool_of(queues="critical:5,default:3,low:1", queueOrder="weighted", maxWorkers="18")
    pool = decided(spec, CRITICAL, DEFAULT, LOW)
    # 18 by 5:3:1 is 10, 6, 2; critical needs only 8, its 2 more go 3:1 to default and low
    shares = {q.name: round(q.allotted, 6) for q in pool.queues}
    assert shares == {"critical": 8.0, "default": 7.5, "low": 2.5}
    assert pool.driving == "low"  # 2.5 of 6 is the shortest


@pytest.mark.parametrize(
    ("order", "needs", "weights", "workers", "expected"),
    [
        (ServingOrder.STRICT, [3, 4, 5], [1, 1, 1], 6, [3, 3, 0]),
        (ServingOrder.STRICT, [3, 4, 5], [1, 1, 1], 20, [3, 4, 5]),
        (ServingOrder.WEIGHTED, [10, 10, 10], [5, 3, 1], 9, [5, 3, 1]),
        (ServingOrder.WEIGHTED, [2, 10, 10], [5, 3, 1], 9, [2, 5.25, 1.75]),
        (ServingOrder.ROUND_ROBIN, [1, 10, 10], [1, 1, 1], 9, [1, 4, 4]),
        (ServingOrder.ROUND_ROBIN, [0, 2, 2], [1, 1, 1], 9, [0, 2, 2]),
    ],
)
def test_allot(
    order: ServingOrder,
    needs: list[float],
    weights: list[float],
    workers: float,
    expected: list[float],
) -> None:
    assert allot(order, needs, weights, workers) == pytest.approx(expected)


def test_a_queues_own_target_age_sets_its_need() -> None:
    # critical drains its 120 waiting jobs within 10 s, not the pool's 60 s: 6 + 12 = 18
    pool = decided(pool_of(queueTargetAges="critical=10s"), CRITICAL, DEFAULT, LOW)
    assert [round(q.need, 6) for q in pool.queues] == [18.0, 10.0, 6.0]
    assert pool.decision.desired_workers == 34
    assert pool.driving == "critical"


def test_target_drain_time_set_holds_for_every_queue() -> None:
    spec = pool_of(queueTargetAges="critical=10s", targetDrainTime="120s")
    pool = decided(spec, CRITICAL, DEFAULT, LOW)
    # drains over 120 s: default 4 + 3, low 1 + 2.5; critical's oldest job (20 s) is twice
    # its own 10 s target, so its 6 workers are doubled
    assert [round(q.need, 6) for q in pool.queues] == [12.0, 7.0, 3.5]
    assert pool.queues[0].decision.reason is Reason.AGE_OVER_TARGET


def test_dependencies_bound_the_total_once() -> None:
    pool = decided(pool_of(dependencies="postgres=100/5"), CRITICAL, DEFAULT, LOW)
    assert pool.decision.desired_workers == 20  # 100 / 5, not 20 per queue
    assert pool.decision.limited_by == "postgres"
    assert all(q.decision.ceiling is None for q in pool.queues)


def test_min_workers_holds_the_pool_not_each_queue() -> None:
    idle = signals_of(depth=0, in_flight=0, consumers=3)
    pool = decided(pool_of(minWorkers="3"), idle, idle, idle)
    assert pool.decision.desired_workers == 3
    assert pool.decision.reason is Reason.MIN_WORKERS
    assert pool.decision.active is False


def test_an_idle_pool_needs_no_worker() -> None:
    idle = signals_of(depth=0, in_flight=0, consumers=0)
    pool = decided(pool_of(), idle, idle, idle)
    assert (pool.decision.desired_workers, pool.decision.reason, pool.driving) == (
        0,
        Reason.IDLE,
        None,
    )
    assert pool.decision.active is False


def test_one_queue_with_work_makes_the_pool_active() -> None:
    idle = signals_of(depth=0, in_flight=0, consumers=0)
    waiting = signals_of(depth=3, in_flight=0, consumers=0, age=5, arrivals=0.1, completions=0)
    pool = decided(pool_of(), idle, idle, waiting)
    assert pool.decision.active is True
    assert pool.decision.desired_workers == 1
    assert pool.driving == "low"


def test_an_unknown_depth_leaves_the_pool_without_an_answer() -> None:
    unknown = signals_of(depth=None, consumers=10)
    pool = decided(pool_of(), CRITICAL, unknown, LOW)
    assert pool.decision.metric_value is None
    assert pool.unknown is not None and "'default'" in pool.unknown


def test_a_starved_queue_borrows_the_throughput_the_pool_learned() -> None:
    spec = parse_metadata(
        {"url": "redis://localhost", "format": "sidekiq", "queues": "critical,low"}
    )
    assert spec.pool is not None
    queues = spec.pool.resolve()
    busy = signals_of(
        depth=50, in_flight=10, consumers=10, age=30, arrivals=20, completions=20, flow=20
    )
    starved = signals_of(
        depth=600, in_flight=0, consumers=10, age=120, arrivals=2, completions=0, flow=2
    )
    members = [
        PoolMember(queues[0], member_spec(spec, queues[0]), busy),
        PoolMember(queues[1], member_spec(spec, queues[1]), starved),
    ]
    state = PoolState()
    _, state = decide_pool(members, spec, NOW, state)  # critical learns 20/s over 10 = 2/s each
    assert state.queues["critical"].learned_throughput == pytest.approx(2.0)
    pool, _ = decide_pool(members, spec, NOW + 1, state)
    # low, which runs nothing, takes 2/s a worker: 2/2 + 600/60/2 = 6
    assert round(pool.queues[1].need, 6) == 6.0


def test_round_robin_shares_fetches_so_a_queue_of_long_jobs_takes_the_slots() -> None:
    """kombu reads emails and reports in turn: while both have jobs waiting, each 8 s report
    holds its slot 16 times as long as a 500 ms email, so emails gets 1/17 of the slots."""
    metadata = {
        "url": "amqp://guest:guest@localhost:5672/%2F",
        "queues": "emails,reports",
        "queueOrder": "roundRobin",
        "workerConcurrency": "8",
        "queueJobDurations": "emails=500ms,reports=8s",
    }
    emails = signals_of(depth=100, in_flight=10, consumers=4, age=10, arrivals=20, completions=20, flow=20)  # fmt: skip
    reports = signals_of(depth=400, in_flight=22, consumers=4, age=100, arrivals=0.2, completions=0.2, flow=0.2)  # fmt: skip
    pool = decided(parse_metadata(metadata), emails, reports)
    # each queue's flow over a quarter of the 60 s target may wait (emails: 300 jobs, more than
    # its 100; reports: 3), the rest drains in the target less one job: emails: 20/s at 16/s a
    # worker = 1.25; reports: 0.2/s + 397 in 52 s at 1/s a worker = 7.835, and 0.06 more: its
    # 22 running jobs hold 2.75 workers, e^(-30/8) of which still run 30 s ahead (the flow's
    # 0.2 the rest); emails' 1/17 of the slots must be 1.25 workers: 21.25
    assert [round(q.need, 3) for q in pool.queues] == [1.25, 7.895]
    assert round(pool.decision.needed or 0, 2) == 21.25
    assert pool.decision.desired_workers == 22
    strict = decided(parse_metadata(metadata | {"queueOrder": "strict"}), emails, reports)
    assert strict.decision.desired_workers == 10  # emails first: the sum, 9.14
