"""The server's registry of shared budgets (scaler/budget_registry.py), on a clock of its own:
who is in a budget, what a pool holds (its answers within the hold, a worker within the
cooldown), idle pools, the smallest limit, a ScaledObject's several triggers, and the bounds."""

from __future__ import annotations

import dataclasses

import pytest

from brokers.base import Precision, QueueSnapshot
from scaler.budget_registry import BudgetRegistry
from scaler.errors import ResourceExhausted
from scaler.evaluation import Evaluation, Evaluator
from scaler.policy import Reason
from scaler.spec import parse_metadata
from scaler.trigger_spec import TriggerSpec


def spec(dependencies: str = "postgres=100/5", **keys: str) -> TriggerSpec:
    metadata = {"url": "redis://x/0", "queue": "q", "format": "sidekiq", "workerThroughput": "1"}
    return parse_metadata(metadata | {"dependencies": dependencies} | keys)


def evaluated(trigger: TriggerSpec, desired: int) -> Evaluation:
    """A real evaluation of a backlog, its answer set to ``desired`` workers (0: idle)."""
    history = [
        QueueSnapshot(0.0, 100, 0, -30.0, Precision.EXACT, "payload", 100, 0),
        QueueSnapshot(1.0, 100, 0, -29.0, Precision.EXACT, "payload", 100, 0),
    ]
    evaluation = Evaluator().evaluate(history, trigger)
    decision = dataclasses.replace(
        evaluation.decision, desired_workers=desired, metric_value=float(desired),
        active=desired > 0,
    )  # fmt: skip
    return dataclasses.replace(evaluation, decision=decision)


def ask(registry: BudgetRegistry, name: str, desired: int, now: float, trigger: TriggerSpec | None = None,
        key: str = "t") -> int:  # fmt: skip
    trigger = trigger or spec()
    evaluation = evaluated(trigger, desired)
    decision = registry.apply(
        "shop", name, (name, key), trigger, evaluation.signals, evaluation.decision, now
    )
    return decision.desired_workers


def test_an_idle_pool_keeps_one_worker_for_the_cooldown_then_its_share_goes() -> None:
    registry = BudgetRegistry(hold=10.0, cooldown=60.0, idle=600.0)
    assert ask(registry, "mailer", 1, now=0.0) == 1
    assert ask(registry, "mailer", 0, now=20.0) == 0  # idle; KEDA keeps 1 until its cooldown
    assert ask(registry, "orders", 20, now=21.0) == 19
    assert ask(registry, "orders", 20, now=61.0) == 20  # 61 s after mailer was last active


def test_a_pool_told_to_shrink_is_counted_at_its_old_size_for_the_hold() -> None:
    registry = BudgetRegistry(hold=30.0, cooldown=0.0)
    assert ask(registry, "orders", 20, now=0.0) == 20
    assert ask(registry, "mailer", 10, now=1.0) == 0  # orders holds all 20
    assert ask(registry, "orders", 20, now=2.0) == 10  # told its share at once
    assert ask(registry, "mailer", 10, now=29.0) == 0  # orders' 20 is 29 s old
    assert ask(registry, "mailer", 10, now=31.0) == 10


def test_the_pool_that_stopped_asking_frees_its_share_after_the_idle_time() -> None:
    registry = BudgetRegistry(hold=0.0, cooldown=0.0, idle=120.0)
    assert ask(registry, "orders", 20, now=0.0) == 20
    assert ask(registry, "mailer", 20, now=1.0) == 10  # no hold: orders' 20 is not counted
    assert ask(registry, "orders", 20, now=2.0) == 10
    assert ask(registry, "mailer", 20, now=3.0) == 10
    assert ask(registry, "mailer", 20, now=121.0) == 10  # orders asked 119 s ago
    assert ask(registry, "mailer", 20, now=123.0) == 20  # 121 s: orders is idle
    assert [b.key.label for b in registry.snapshot(123.0)] == ["shop/postgres"]
    assert registry.snapshot(400.0) == []


def test_the_smallest_limit_of_a_budget_holds() -> None:
    registry = BudgetRegistry(hold=0.0, cooldown=0.0)
    assert ask(registry, "orders", 20, now=0.0, trigger=spec("postgres=100/5")) == 20
    # 60 slots: mailer's 1 worker, orders the other 11
    assert ask(registry, "mailer", 1, now=1.0, trigger=spec("postgres=60/5")) == 1
    assert ask(registry, "orders", 20, now=2.0, trigger=spec("postgres=100/5")) == 11


def test_the_triggers_of_one_scaledobject_are_one_pool_needing_the_largest() -> None:
    registry = BudgetRegistry(hold=0.0, cooldown=0.0)
    assert ask(registry, "orders", 4, now=0.0, key="a") == 4
    assert ask(registry, "orders", 6, now=0.0, key="b") == 6
    assert ask(registry, "mailer", 20, now=1.0) == 14  # orders needs 6 (its largest), not 10
    (budget,) = registry.snapshot(1.0)
    assert [(p.pool, p.need, p.granted) for p in budget.pools] == [
        ("shop/mailer", 20, 14), ("shop/orders", 6, 6),
    ]  # fmt: skip


def test_slots_another_budget_does_not_let_a_pool_use_go_to_the_others() -> None:
    """orders names postgres (shared with mailer) and redis (shared with reports, of weight
    3): redis grants it 5 workers, so it asks postgres for 5, not 20, and mailer gets 15."""
    registry = BudgetRegistry(hold=0.0, cooldown=0.0)
    both = spec("postgres=100/5,redis=40/2")
    assert (
        ask(registry, "reports", 20, now=0.0, trigger=spec("redis=40/2", dependencyWeight="3"))
        == 20
    )
    assert ask(registry, "orders", 20, now=1.0, trigger=both) == 5
    assert ask(registry, "mailer", 15, now=2.0) == 15
    postgres = next(b for b in registry.snapshot(2.0) if b.key.name == "postgres")
    assert [(p.pool, p.need, p.allotted) for p in postgres.pools] == [
        ("shop/mailer", 15, 15), ("shop/orders", 5, 5),
    ]  # fmt: skip
    # orders' next ask is its whole need again; redis still holds it to 5
    assert ask(registry, "orders", 20, now=3.0, trigger=both) == 5


def test_a_pool_waiting_in_its_tightest_budget_keeps_its_claim_there() -> None:
    """orders waits for mailer to scale in on postgres (its redis budget would give it all):
    it keeps asking postgres for its whole need, so mailer is still told its share, 10."""
    registry = BudgetRegistry(hold=30.0, cooldown=0.0)
    both = spec("postgres=100/5,redis=40/2")
    assert ask(registry, "mailer", 20, now=0.0) == 20
    assert ask(registry, "orders", 20, now=1.0, trigger=both) == 0  # mailer holds 20 for 30 s
    assert ask(registry, "mailer", 20, now=2.0) == 10
    assert ask(registry, "orders", 20, now=31.0, trigger=both) == 10


def test_the_later_pool_gets_more_of_the_contested_slots() -> None:
    registry = BudgetRegistry(hold=0.0, cooldown=0.0)
    trigger = spec()  # targetAge 60 s by default: the evaluated backlog is 31 s old
    assert trigger.target_age == 60
    assert ask(registry, "orders", 20, now=0.0) == 20
    evaluation = evaluated(trigger, 20)
    late = registry.apply(
        "shop", "mailer", "m", trigger, evaluation.signals, evaluation.decision, 1.0, 1.25
    )
    assert late.desired_workers == 11  # 1.25 against orders' 1 (on time): 11 of the 20 workers
    assert ask(registry, "orders", 20, now=2.0) == 9


def test_the_reason_names_the_budget_and_the_share() -> None:
    registry = BudgetRegistry(hold=1.5, cooldown=0.0)
    ask(registry, "orders", 20, now=0.0)
    trigger = spec()
    evaluation = evaluated(trigger, 20)
    waiting = registry.apply(
        "shop", "mailer", "m", trigger, evaluation.signals, evaluation.decision, 1.0
    )
    assert waiting.reason_text == (
        "shared budget postgres: 0 of 20 workers, 2 pools (allotted 10: waiting for others to "
        "scale in)"
    )
    assert (waiting.desired_workers, waiting.metric_value, waiting.active) == (0, 0.0, False)
    ask(registry, "orders", 20, now=2.0)  # told 10; its 20 of t=0 counted until 1.5 s
    decision = registry.apply(
        "shop", "mailer", "m", trigger, evaluation.signals, evaluation.decision, 3.0
    )
    assert decision.reason is Reason.SHARED_BUDGET
    assert decision.reason_text == "shared budget postgres: 10 of 20 workers, 2 pools"
    assert (decision.desired_workers, decision.metric_value, decision.active) == (10, 10.0, True)


def test_not_shared_and_other_namespaces() -> None:
    registry = BudgetRegistry(hold=0.0, cooldown=0.0)
    assert ask(registry, "orders", 20, now=0.0) == 20
    assert ask(registry, "alone", 20, now=1.0, trigger=spec(dependencyScope="none")) == 20
    assert ask(registry, "apart", 20, now=1.0, trigger=spec(dependencyScope="reports-db")) == 20
    trigger = spec()
    evaluation = evaluated(trigger, 20)
    elsewhere = registry.apply(
        "other", "orders", "o", trigger, evaluation.signals, evaluation.decision, 1.0
    )
    assert elsewhere.desired_workers == 20
    assert [b.key.label for b in registry.snapshot(1.0)] == [
        "shop/postgres", "shop/reports-db/postgres", "other/postgres",
    ]  # fmt: skip


def test_bounds_on_pools_and_budgets() -> None:
    registry = BudgetRegistry(hold=0.0, cooldown=0.0, idle=10.0, max_pools=2, max_budgets=1)
    ask(registry, "a", 1, now=0.0)
    ask(registry, "b", 1, now=0.0)
    with pytest.raises(ResourceExhausted, match="already has 2 pools"):
        ask(registry, "c", 1, now=0.0)
    with pytest.raises(ResourceExhausted, match="1 shared dependency budgets"):
        ask(registry, "a", 1, now=1.0, trigger=spec("redis=10/1"))
    # once the first budget's pools have gone idle, a new budget takes its place
    assert ask(registry, "a", 3, now=20.0, trigger=spec("redis=10/1")) == 3
    assert [b.key.label for b in registry.snapshot(20.0)] == ["shop/redis"]
