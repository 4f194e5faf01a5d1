"""One dependency's budget shared between the pools that ask for it: who gets how many workers.

Pure: no clock, no I/O. The server's registry (:mod:`scaler.budget_registry`) keeps the pools
that asked recently and calls :func:`shares` with what each one asked.

**The rule: weighted max-min fairness (water-filling), in the dependency's slots.** Every pool
holds ``per_worker`` slots per worker. First each pool's ``minWorkers`` (``floor``) is filled,
then its whole need, both by water-filling: a level ``θ`` rises, and each pool takes
``min(need × per_worker, θ × weight)`` slots (never less than it already has), until the slots
run out or every need is met. A pool that needs little takes what it needs and leaves the rest
to the others; two pools that both need more than an equal share split the slots in proportion
to their weights. Slots are then rounded down to whole workers, and the slots left go one
worker at a time to the unmet pool with the least slots per weight after that worker, while one
fits.

**A pool behind its target weighs more.** Each pool's weight in that split is its
``dependencyWeight`` times its *lateness*: its oldest job's age over its target age, taken
between 1 (on time) and :data:`LATE_WEIGHT` (1.5 times late or more). Between pools that both
need more than the slots allow, the one whose queue is already over its target gets the larger
part, up to half again its weight's: the pool with slack, its age within its target, gives way
while the other drains what it built up. The bound keeps the configured weights in charge (a
pool of weight 2 on time still gets more than a pool of weight 1 however late), so where the
pools' needs far exceed the slots it does not spread the lateness to every pool; and a small
pool keeps at least two thirds of its plain share beside late ones.

**The transition: a pool grows only into slots nobody else holds or is allotted.** A pool's
``held`` workers are those it may still run (what it runs, and what it was told within the
time its HPA may take to scale in). Its ``granted`` workers, what it is answered now, are its
allotment, but above what it holds never more than the slots left once every other pool's
larger of held and allotment is counted. A pool that must shrink is told its allotment at once; the slots it frees
go to the others only once it no longer holds them. So ``Σ per_worker × max(held, granted)``
never exceeds the limit when any pool grows, and no grant raises the slots in use while the
pools already hold more than the limit (a probed limit that fell).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: slack on comparisons of slot counts (limits and per-worker slots are given as decimals)
EPSILON = 1e-9
#: the most a pool's lateness (oldest age over target age) multiplies its weight by
LATE_WEIGHT = 1.5


@dataclass(frozen=True, slots=True)
class PoolAsk:
    """What one pool asks of a budget now."""

    #: the pool's name: ``namespace/scaledObject``
    pool: str
    #: the workers it would run if the budget were its alone (after its own bounds)
    need: int
    #: slots one of its workers holds
    per_worker: float
    #: its share of contested slots relative to the others' (``dependencyWeight``)
    weight: float = 1.0
    #: workers it should get before any pool gets more than its own floor (``minWorkers``)
    floor: int = 0
    #: workers it may still run: the most it runs now or was told within its scale-in time
    held: int = 0
    #: its oldest job's age over its target age (0 where unknown)
    lateness: float = 0.0

    @property
    def share_weight(self) -> float:
        """Its weight in the split: ``weight`` times its lateness within [1, LATE_WEIGHT]."""
        return self.weight * min(LATE_WEIGHT, max(1.0, self.lateness))


@dataclass(frozen=True, slots=True)
class Share:
    """One pool's part of a budget."""

    #: its fair allotment (:func:`allocate`)
    allotted: int
    #: what it may answer now: the allotment, less what others still hold (:func:`grant`)
    granted: int


def allocate(limit: float, asks: Sequence[PoolAsk]) -> dict[str, int]:
    """Each pool's workers under ``limit`` slots by weighted max-min fairness (module doc):
    ``Σ allotted × per_worker ≤ limit``, no pool above its need."""
    floors = _water_fill(limit, asks, [min(a.floor, a.need) for a in asks], [0] * len(asks))
    workers = _water_fill(limit, asks, [a.need for a in asks], floors)
    return {ask.pool: count for ask, count in zip(asks, workers, strict=True)}


def grant(limit: float, asks: Sequence[PoolAsk], allotted: Mapping[str, int]) -> dict[str, int]:
    """What each pool may answer now (module doc): its allotment, within the slots the others
    neither hold nor are allotted."""
    claimed = [a.per_worker * max(a.held, allotted[a.pool]) for a in asks]
    total = sum(claimed)
    granted: dict[str, int] = {}
    for ask, claim in zip(asks, claimed, strict=True):
        room = limit - (total - claim)
        fits = math.floor(room / ask.per_worker + EPSILON) if room > 0 else 0
        # what it holds it keeps, up to its allotment; it grows only into room nobody claims
        granted[ask.pool] = min(allotted[ask.pool], max(ask.held, fits))
    return granted


def shares(limit: float, asks: Sequence[PoolAsk]) -> dict[str, Share]:
    """:func:`allocate`, then :func:`grant`: every pool's allotment and what it may answer."""
    allotted = allocate(limit, asks)
    granted = grant(limit, asks, allotted)
    return {a.pool: Share(allotted[a.pool], granted[a.pool]) for a in asks}


def _water_fill(
    limit: float, asks: Sequence[PoolAsk], needs: Sequence[int], base: Sequence[int]
) -> list[int]:
    """Workers per pool, from ``base`` up to ``needs``, by weighted water-filling in slots."""
    wanted = [max(n, b) for n, b in zip(needs, base, strict=True)]
    if sum(a.per_worker * w for a, w in zip(asks, wanted, strict=True)) <= limit + EPSILON:
        return wanted  # every need fits

    level = _water_level(limit, asks, wanted, base)
    slots = [
        max(b * a.per_worker, min(w * a.per_worker, level * a.share_weight))
        for a, w, b in zip(asks, wanted, base, strict=True)
    ]
    workers = [
        max(b, min(w, math.floor(s / a.per_worker + EPSILON)))
        for a, w, b, s in zip(asks, wanted, base, slots, strict=True)
    ]
    left = limit - sum(a.per_worker * n for a, n in zip(asks, workers, strict=True))
    # the slots left after rounding: one worker at a time to the unmet pool with the least
    # slots per weight after it, while one fits
    heap = [
        ((n + 1) * a.per_worker / a.share_weight, a.pool, i)
        for i, (a, n, w) in enumerate(zip(asks, workers, wanted, strict=True))
        if n < w
    ]
    heapq.heapify(heap)
    while heap:
        _, _, i = heapq.heappop(heap)
        ask = asks[i]
        if ask.per_worker > left + EPSILON:
            continue  # does not fit; a pool with smaller workers may
        workers[i] += 1
        left -= ask.per_worker
        if workers[i] < wanted[i]:
            heapq.heappush(
                heap, ((workers[i] + 1) * ask.per_worker / ask.share_weight, ask.pool, i)
            )
    return workers


def _water_level(
    limit: float, asks: Sequence[PoolAsk], wanted: Sequence[int], base: Sequence[int]
) -> float:
    """The level θ at which ``Σ clamp(θ × weight, base slots, wanted slots)`` reaches
    ``limit`` (the wanted slots exceed it). The sum is piecewise linear in θ: each pool adds its
    weight to the slope from θ = base/weight until θ = wanted/weight; the breakpoints are walked
    in order until the segment where the limit is crossed."""
    const = 0.0
    events: list[tuple[float, int, float, float]] = []
    for ask, most, least in zip(asks, wanted, base, strict=True):
        low, high = least * ask.per_worker, most * ask.per_worker
        const += low
        weight = ask.share_weight
        if high > low:
            events.append((low / weight, 0, weight, low))  # starts rising
            events.append((high / weight, 1, weight, high))  # has all it wants
    slope = 0.0
    level = 0.0
    for level_at, kind, weight, slots in sorted(events):
        if slope > 0 and slope * level_at + const >= limit:
            return (limit - const) / slope
        level = level_at
        if kind == 0:
            slope, const = slope + weight, const - slots
        else:
            slope, const = slope - weight, const + slots
    return level
