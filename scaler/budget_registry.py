"""The dependency budgets one server shares between the pools that ask it, and the decision of a
trigger within them.

A **pool** is one ScaledObject (or ScaledJob): ``namespace/name``, its workers. A **budget** is
one dependency's limit, shared by every pool whose triggers name it in the same scope
(:func:`budget_key`): by default a static dependency (``postgres=100/5``) within the namespace,
a probed one (``postgres=probe:orders-pg/5``) with every trigger that probes that connection
profile, whatever its namespace. After a trigger's own decision (:mod:`scaler.evaluation`), the
registry records what the pool needs and how late its queue is, splits each budget between the
pools that asked within ``idle`` seconds (:mod:`scaler.shared_budget`'s rule) and lowers the decision to the pool's
grant, with the reason ``shared budget postgres: 8 of 20 workers, 2 pools``. A trigger whose
dependencies share several budgets answers its smallest grant, and asks each of the others for
no more than that: the slots it could not use there go to their other pools.

What a pool may still run (``held``) is the most of what its broker shows attached, what it
was answered within ``hold`` seconds, and one worker if it was answered active within
``cooldown`` seconds: the HPA keeps the highest recommendation of its scale-down stabilisation
window (300 s by default), so a pool told to shrink may run its old count that long, and KEDA
keeps the HPA's one replica until its ``cooldownPeriod`` (300 s by default) has passed since
the pool was last active. Another pool grows into those slots only after.

Bounded, since any ScaledObject author creates these: at most ``max_budgets`` budgets (a new one
past it replaces the budget asked about least recently whose pools have all gone idle, else it
is ``RESOURCE_EXHAUSTED``) and ``max_pools`` pools per budget (a new pool past it is
``RESOURCE_EXHAUSTED``: refusing it keeps KEDA's replicas where they are, while dropping a pool
that runs would let its workers go uncounted).
"""

from __future__ import annotations

import collections
import math
from collections.abc import Hashable
from dataclasses import dataclass, field, replace

from scaler.ceilings.limit import Ceiling
from scaler.errors import ResourceExhausted
from scaler.policy import Decision, Reason
from scaler.shared_budget import PoolAsk, Share, shares
from scaler.signals import QueueSignals
from scaler.trigger_spec import NOT_SHARED, Dependency, Metric, TriggerSpec

#: a pool whose ScaledObject asked nothing for this long frees its share (serve --budget-idle)
IDLE = 120.0
#: a pool may run what it was answered this long ago (serve --budget-hold: the HPA's default
#: scale-down stabilisation window)
HOLD = 300.0
#: a pool answered active may run one worker this long after (serve --budget-cooldown: KEDA's
#: default cooldownPeriod; below it the HPA keeps at least one replica)
COOLDOWN = 300.0
#: budgets one server keeps at most
MAX_BUDGETS = 1000
#: pools sharing one budget at most
MAX_POOLS = 100


@dataclass(frozen=True, slots=True)
class BudgetKey:
    """Which budget a dependency belongs to: its scope and the name within it."""

    #: ``namespace shop``, ``namespace shop, scope orders`` or ``profile orders-pg``
    scope: str
    name: str

    @property
    def label(self) -> str:
        """``shop/postgres``, ``shop/orders/postgres``, ``profile/orders-pg``: for metrics
        (``postgres`` where no namespace is known: ``probe`` without ``--namespace``)."""
        prefix = self.scope.removeprefix("namespace ").replace(", scope ", "/").strip("/")
        return f"{prefix}/{self.name}" if prefix else self.name


def budget_key(namespace: str, spec: TriggerSpec, dep: Dependency) -> BudgetKey | None:
    """The budget ``dep`` of ``spec`` shares, for a trigger in ``namespace``; None when it is
    the trigger's own (``dependencyScope: none``)."""
    scope = spec.dependency_scope
    if scope == NOT_SHARED:
        return None
    if scope is None and dep.probe is not None:
        # the profile names one database for every namespace it serves
        return BudgetKey("profile", dep.probe)
    named = f", scope {scope}" if scope is not None else ""
    return BudgetKey(f"namespace {namespace}{named}", dep.name)


@dataclass(slots=True)
class _TriggerAsk:
    need: int
    per_worker: float
    weight: float
    floor: int
    #: workers the broker shows attached (None: not shown)
    observed: int | None
    #: its oldest job's age over its target age (0 where unknown)
    lateness: float
    #: the budget's limit in slots, as this trigger sees it
    limit: float
    asked: float


@dataclass(slots=True)
class _Pool:
    #: by trigger: the newest ask of each of the pool's triggers that name the budget
    triggers: dict[Hashable, _TriggerAsk] = field(default_factory=dict)
    #: answers within ``hold``, each larger than every later one (the window's maximum first)
    answers: collections.deque[tuple[float, int]] = field(default_factory=collections.deque)
    #: when it was last answered active (KEDA keeps a worker until its cooldown has passed)
    last_active: float | None = None

    def ask(self, pool: str, now: float, hold: float, cooldown: float) -> PoolAsk:
        asks = self.triggers.values()
        while self.answers and self.answers[0][0] < now - hold:
            self.answers.popleft()
        answered = self.answers[0][1] if self.answers else 0
        if self.last_active is not None and now - self.last_active <= cooldown:
            answered = max(answered, 1)
        observed = max((a.observed or 0 for a in asks), default=0)
        return PoolAsk(
            pool=pool,
            need=max(a.need for a in asks),  # KEDA scales to the largest of the triggers
            per_worker=max(a.per_worker for a in asks),
            weight=max(a.weight for a in asks),
            floor=max(a.floor for a in asks),
            held=max(answered, observed),
            lateness=max(a.lateness for a in asks),
        )

    def answered(self, now: float, workers: int, active: bool | None) -> None:
        while self.answers and self.answers[-1][1] <= workers:
            self.answers.pop()
        self.answers.append((now, workers))
        if active:
            self.last_active = now


@dataclass(slots=True)
class _Budget:
    pools: dict[str, _Pool] = field(default_factory=dict)
    asked: float = 0.0
    #: the last split and what it was made from: the same asks and limit give the same split
    split_of: tuple[float, tuple[PoolAsk, ...]] | None = None
    split: BudgetShares | None = None


@dataclass(frozen=True, slots=True)
class PoolShare:
    """One pool's figures in one budget, for metrics and ``probe``."""

    pool: str
    need: int
    held: int
    weight: float
    allotted: int
    granted: int


@dataclass(frozen=True, slots=True)
class BudgetShares:
    """One budget as last split: its limit in slots and every pool's share."""

    key: BudgetKey
    limit: float
    pools: tuple[PoolShare, ...]


@dataclass(frozen=True, slots=True)
class _Grant:
    key: BudgetKey
    dependency: str
    share: Share
    #: the most workers the whole budget allows this pool, and the pools in it
    whole: int
    pools: int


class BudgetRegistry:
    """Every shared budget of one server and the pools in them (module doc)."""

    def __init__(
        self,
        *,
        idle: float = IDLE,
        hold: float = HOLD,
        cooldown: float = COOLDOWN,
        max_budgets: int = MAX_BUDGETS,
        max_pools: int = MAX_POOLS,
    ) -> None:
        self.idle = idle
        self.hold = hold
        self.cooldown = cooldown
        self.max_budgets = max_budgets
        self.max_pools = max_pools
        #: least recently asked first
        self._budgets: collections.OrderedDict[BudgetKey, _Budget] = collections.OrderedDict()
        #: each budget as last split
        self.last: dict[BudgetKey, BudgetShares] = {}

    def apply(
        self,
        namespace: str,
        name: str,
        trigger: Hashable,
        spec: TriggerSpec,
        signals: QueueSignals,
        decision: Decision,
        now: float,
        lateness: float | None = None,
    ) -> Decision:
        """``decision``, for the trigger ``trigger`` of the pool ``namespace/name``, within the
        pool's grant of every budget its dependencies share; the same decision where none
        lowers it. ``lateness``: the pool's oldest age over its target (a pool of queues: the
        latest queue's), by default the signals' oldest age over the spec's target. Raises
        :class:`ResourceExhausted` past a bound (module doc)."""
        parts = decision.ceiling_parts
        if parts is None or decision.ceiling_unknown is not None:
            return decision
        pool = f"{namespace}/{name}"
        late = _lateness(signals, spec) if lateness is None else lateness
        pools: list[_Pool] = []
        touched: list[tuple[BudgetKey, _Budget, int]] = []
        tightest: _Grant | None = None
        for dep in spec.dependencies:
            key = budget_key(namespace, spec, dep)
            limit = _limit(dep, parts)
            if key is None or limit is None:
                continue
            budget = self._budget(key, now)
            entry = budget.pools.get(pool)
            if entry is None:
                if len(budget.pools) >= self.max_pools:
                    raise ResourceExhausted(
                        f"the shared budget of dependency {dep.name!r} already has "
                        f"{len(budget.pools)} pools, this scaler's limit; give this "
                        "ScaledObject's trigger its own dependencyScope"
                    )
                entry = budget.pools[pool] = _Pool()
            entry.triggers[trigger] = _TriggerAsk(
                need=decision.desired_workers,
                per_worker=dep.per_worker,
                weight=spec.dependency_weight,
                floor=spec.min_workers,
                observed=signals.consumers,
                lateness=late,
                limit=limit,
                asked=now,
            )
            pools.append(entry)
            split = self._split(key, budget, now)
            share = next(s for s in split.pools if s.pool == pool)
            touched.append((key, budget, share.granted))
            asked = entry.ask(pool, now, self.hold, self.cooldown)
            whole = math.floor(split.limit / asked.per_worker + 1e-9)
            found = _Grant(
                key, dep.name, Share(share.allotted, share.granted), whole, len(split.pools)
            )
            if tightest is None or found.share.granted < tightest.share.granted:
                tightest = found
        if tightest is None:
            return decision
        workers = min(decision.desired_workers, tightest.share.granted)
        answer = _within(decision, spec, signals, tightest, workers)
        for entry in pools:
            entry.answered(now, workers, answer.active)
        for number, (key, budget, _) in enumerate(touched):
            # what the pool's other budgets do not let it run it does not need in this one:
            # those slots go to this budget's other pools (its own grant here it keeps asking
            # for, so slots it waits for while others scale in stay claimed)
            elsewhere = [g for n, (_, _, g) in enumerate(touched) if n != number]
            ask = budget.pools[pool].triggers[trigger]
            if elsewhere and min(elsewhere) < ask.need:
                ask.need = min(elsewhere)
                self._split(key, budget, now)
        return answer

    def _budget(self, key: BudgetKey, now: float) -> _Budget:
        budget = self._budgets.get(key)
        if budget is not None:
            self._budgets.move_to_end(key)
        else:
            if len(self._budgets) >= self.max_budgets:
                self._evict(now)
            budget = self._budgets[key] = _Budget()
        budget.asked = now
        return budget

    def _evict(self, now: float) -> None:
        for key, budget in self._budgets.items():
            self._expire(key, budget, now)
            if not budget.pools:
                del self._budgets[key]
                self.last.pop(key, None)
                return
        raise ResourceExhausted(
            f"this scaler already keeps {len(self._budgets)} shared dependency budgets with live "
            "pools, its limit; KEDA retries later"
        )

    def _expire(self, key: BudgetKey, budget: _Budget, now: float) -> None:
        for pool_name, pool in list(budget.pools.items()):
            for trigger, ask in list(pool.triggers.items()):
                if now - ask.asked > self.idle:
                    del pool.triggers[trigger]
            if not pool.triggers:
                del budget.pools[pool_name]

    def _split(self, key: BudgetKey, budget: _Budget, now: float) -> BudgetShares:
        self._expire(key, budget, now)
        asks = [
            pool.ask(name, now, self.hold, self.cooldown)
            for name, pool in sorted(budget.pools.items())
        ]
        # the limits the pools' triggers name may disagree: the smallest is kept to
        limit = min(a.limit for pool in budget.pools.values() for a in pool.triggers.values())
        inputs = (limit, tuple(asks))
        if budget.split is not None and budget.split_of == inputs:
            return budget.split  # KEDA's calls come in runs on the same figures
        split = shares(limit, asks)
        result = BudgetShares(
            key,
            limit,
            tuple(
                PoolShare(
                    a.pool, a.need, a.held, a.weight, split[a.pool].allotted, split[a.pool].granted
                )
                for a in asks
            ),
        )
        self.last[key] = result
        budget.split_of, budget.split = inputs, result
        return result

    def touched(self, namespace: str, spec: TriggerSpec) -> list[BudgetShares]:
        """The budgets the dependencies of ``spec`` (in ``namespace``) share, as last split."""
        keys = (budget_key(namespace, spec, dep) for dep in spec.dependencies)
        return [self.last[key] for key in keys if key is not None and key in self.last]

    def snapshot(self, now: float) -> list[BudgetShares]:
        """Every budget with live pools, as last split (idle pools dropped first)."""
        for key, budget in list(self._budgets.items()):
            self._expire(key, budget, now)
            if not budget.pools:
                del self._budgets[key]
                self.last.pop(key, None)
        return [self.last[key] for key in self._budgets if key in self.last]


def _lateness(signals: QueueSignals, spec: TriggerSpec) -> float:
    """The queue's oldest age over its target age; 0 where the age is unknown."""
    age = signals.oldest_age.value
    return age / spec.target_age if age is not None and spec.target_age > 0 else 0.0


def _limit(dep: Dependency, parts: Ceiling) -> float | None:
    """The slots of ``dep`` the trigger's ceiling used: the static limit, or the probe's figure
    (its fallback while the probe cannot read); None when there is none."""
    if dep.probe is None:
        return dep.limit
    part = next((p for p in parts.each if p.name == dep.name), None)
    return part.slots if part is not None else None


def _within(
    decision: Decision, spec: TriggerSpec, signals: QueueSignals, grant: _Grant, workers: int
) -> Decision:
    """``decision`` with at most ``workers``, the pool's grant of ``grant``'s budget."""
    note = f"{grant.share.granted} of {grant.whole} workers, {grant.pools} pool" + (
        "s" if grant.pools != 1 else ""
    )
    if grant.share.granted < grant.share.allotted:
        note += f" (allotted {grant.share.allotted}: waiting for others to scale in)"
    value = decision.metric_value
    if value is not None:
        if spec.metric is Metric.WORKERS:
            value = float(workers)
        else:  # KEDA's Value type: ceil(ready × value / target) must not pass the grant
            granted = grant.share.granted
            value = min(value, spec.metric_target * granted / max(signals.consumers or 0, 1))
    active = decision.active
    if active is not None and workers == 0:
        active = False  # KEDA would start a worker the budget has no room for
    if workers >= decision.desired_workers:
        return replace(decision, metric_value=value, active=active)
    parts = decision.ceiling_parts
    assert parts is not None  # apply() returns early without them
    return replace(
        decision,
        desired_workers=workers,
        ceiling=workers if decision.ceiling is None else min(decision.ceiling, workers),
        limited_by=grant.dependency,
        reason=Reason.SHARED_BUDGET,
        metric_value=value,
        active=active,
        ceiling_parts=replace(parts, note=note),
    )
