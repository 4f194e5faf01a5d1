"""The saturation knee, learned from the pool's own throughput (pure: no I/O, no clock).

A dependency that saturates on CPU, locks or IO serves fewer jobs per second past some number
of workers, long before its slots run out. The Universal Scalability Law describes that curve:
X(N) = λN / (1 + σ(N − 1) + κN(N − 1)), peaking at N* = √((1 − σ)/κ). Its inverse is a
quadratic, N / X(N) = a + bN + cN² (a = (1 − σ)/λ, b = (σ − κ)/λ, c = κ/λ), so a weighted
least-squares fit of N / X over the worker counts the pool ran at gives the curve, and its peak
at N* = √(a / c), without assuming where the knee is. A constant load beside the workers (an
API on the same database) shifts the curve but keeps it quadratic, so the same fit holds.

What is learned from: each pair of consecutive samples where the same N workers were attached
and busy while jobs waited (the depth above zero at both, and every job slot in flight where the
format shows it): their completions per second is X(N) for that N, not the arrival rate. Each
N keeps its seconds and completions, fading with :data:`HALF_LIFE` so a dependency that changes
is followed. Each call learns the pairs of the history it is given (the samples of the
trigger's ``rateWindow``) that are newer than what it learned before.

The knee caps the ceiling only once the fit is *conclusive*: at least :data:`MIN_COUNTS` worker
counts with :data:`MIN_SECONDS` each, a curve that bends down (c > 0, a > 0), and a peak well
inside what was seen (the pool ran :data:`PAST_THE_PEAK` times N* or more: a peak beyond the data
is a guess, and no cap is needed where the throughput still rises). The cap moves only when a conclusive fit moves it by more than
:data:`HYSTERESIS` (and at least one worker), so the fleet does not oscillate around it; an
inconclusive fit may only raise it, towards its peak and no higher than the most workers seen
saturated (so a cap set early on noise gives way once the pool did better above it), and never
lowers it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from brokers.base import QueueSnapshot
from scaler.ceilings.limit import Ceiling, DependencyCeiling

#: the weight of an observation halves every this many seconds
HALF_LIFE = 3600.0
#: seconds a worker count needs before it enters the fit
MIN_SECONDS = 10.0
#: distinct worker counts a fit needs
MIN_COUNTS = 3
#: the cap moves when the knee moves by more than this share of it
HYSTERESIS = 0.1
#: a sample counts as all slots busy when this share of them runs jobs
BUSY_SHARE = 0.9
#: a fit is conclusive once the pool ran this far past its peak (a peak at the edge of the data
#: is as likely noise as a knee)
PAST_THE_PEAK = 1.2
#: the name of the knee's part of the ceiling, its source, and its metric label
KNEE = "knee"


@dataclass(frozen=True, slots=True)
class WorkerCount:
    """What the pool completed while ``workers`` workers were attached and saturated."""

    workers: int
    seconds: float
    completions: float
    #: the sample time of the newest observation folded in
    at: float


@dataclass(frozen=True, slots=True)
class KneeFit:
    """The throughput curve fitted to the counts: USL's figures and its peak."""

    #: N*: the workers where completions per second peak
    workers: float
    #: completions per second at N*
    peak: float
    sigma: float
    kappa: float
    #: completions per second of one worker alone (λ)
    single: float
    #: the most workers observed saturated (the fit is conclusive only past N*)
    highest: int

    def describe(self) -> str:
        """``throughput peaks at 25.6 workers (9.8 jobs/s; sigma 0.020, kappa 0.00150)``."""
        return (
            f"throughput peaks at {self.workers:.1f} workers ({self.peak:.3g} jobs/s; "
            f"sigma {self.sigma:.3f}, kappa {self.kappa:.5f})"
        )


@dataclass(frozen=True, slots=True)
class KneeState:
    counts: tuple[WorkerCount, ...] = ()
    #: the newest sample time learned from (each pair is learned once)
    seen_until: float | None = None
    #: the newest fit, conclusive or not (None: too few counts)
    fit: KneeFit | None = None
    #: the workers the knee allows now; None until a conclusive fit
    cap: int | None = None


def learn(state: KneeState, history: Sequence[QueueSnapshot], concurrency: int) -> KneeState:
    """Fold the saturated sample pairs of ``history`` not seen yet into the counts, refit, and
    move the cap where the fit is conclusive and outside the hysteresis band."""
    counts = {c.workers: c for c in state.counts}
    seen = state.seen_until
    for older, newer in itertools.pairwise(history):
        if seen is not None and newer.observed_at <= seen:
            continue
        workers, seconds, completions = _saturated(older, newer, concurrency)
        if workers:
            counts[workers] = _fold(counts.get(workers), workers, seconds, completions, newer)
    if not history:
        return state
    now = history[-1].observed_at
    folded = tuple(sorted(counts.values(), key=lambda c: c.workers))
    fit = fit_curve(folded, now)
    return replace(
        state, counts=folded, seen_until=max(now, seen or now), fit=fit, cap=_cap(state.cap, fit)
    )


def _cap(cap: int | None, fit: KneeFit | None) -> int | None:
    """The cap a fit moves to, past the hysteresis: ``floor(N*)`` when conclusive; when not, it
    may only rise, towards N*, and no higher than the most workers seen saturated (an early cap
    set on noise is not kept once the pool was seen doing better above it)."""
    if fit is None:
        return cap
    knee = max(1, math.floor(fit.workers + 1e-9))
    if not conclusive(fit):
        if cap is None:
            return None
        knee = max(cap, min(knee, fit.highest))
    if cap is None or abs(knee - cap) > max(1.0, HYSTERESIS * cap):
        return knee
    return cap


def _saturated(
    older: QueueSnapshot, newer: QueueSnapshot, concurrency: int
) -> tuple[int, float, float]:
    """(workers, seconds, completions) of a pair where the same workers were saturated, else
    (0, 0, 0)."""
    workers = newer.consumers
    seconds = newer.observed_at - older.observed_at
    if not workers or older.consumers != workers or seconds <= 0:
        return 0, 0.0, 0.0
    if not (older.depth and newer.depth):  # jobs waited at both: the workers were the limit
        return 0, 0.0, 0.0
    for snapshot in (older, newer):
        if (
            snapshot.in_flight is not None
            and snapshot.in_flight < BUSY_SHARE * workers * concurrency
        ):
            return 0, 0.0, 0.0
    if older.completions_total is None or newer.completions_total is None:
        return 0, 0.0, 0.0
    if not (older.counts_exact and newer.counts_exact):
        return 0, 0.0, 0.0
    completions = newer.completions_total - older.completions_total
    if completions < 0:  # a counter reset (the broker restarted)
        return 0, 0.0, 0.0
    return workers, seconds, float(completions)


def _fold(
    count: WorkerCount | None, workers: int, seconds: float, completions: float, at: QueueSnapshot
) -> WorkerCount:
    if count is None:
        return WorkerCount(workers, seconds, completions, at.observed_at)
    fade = 0.5 ** ((at.observed_at - count.at) / HALF_LIFE)
    return WorkerCount(
        workers,
        count.seconds * fade + seconds,
        count.completions * fade + completions,
        at.observed_at,
    )


def fit_curve(counts: Sequence[WorkerCount], now: float) -> KneeFit | None:
    """The weighted least-squares fit of N / X = a + bN + cN² over ``counts`` (weights: their
    seconds, faded to ``now``); None with too few counts or a curve that has no peak."""
    usable = [c for c in counts if c.seconds >= MIN_SECONDS and c.completions > 0]
    if len(usable) < MIN_COUNTS:
        return None
    rows = []
    for count in usable:
        weight = count.seconds * 0.5 ** ((now - count.at) / HALF_LIFE)
        n = float(count.workers)
        rows.append((weight, n, n / (count.completions / count.seconds)))
    solved = _solve_quadratic(rows)
    if solved is None:
        return None
    a, b, c = solved
    if a <= 0 or c <= 0:
        return None  # no peak: the throughput still rises (or the data is too flat to tell)
    workers = math.sqrt(a / c)
    per_one = a + b + c  # 1 / λ: N / X at N = 1
    if per_one <= 0:
        return None
    return KneeFit(
        workers=workers,
        peak=workers / (a + b * workers + c * workers * workers),
        sigma=(b + c) / per_one,
        kappa=c / per_one,
        single=1 / per_one,
        highest=max(count.workers for count in usable),
    )


def conclusive(fit: KneeFit) -> bool:
    """Whether the pool ran well past the fitted peak, so the knee is inside what was seen."""
    return fit.highest >= PAST_THE_PEAK * fit.workers


def _solve_quadratic(
    rows: Sequence[tuple[float, float, float]],
) -> tuple[float, float, float] | None:
    """Weighted least squares of y = a + bx + cx² over (weight, x, y): the normal equations,
    solved by Cramer's rule; None when they are singular."""
    s = [sum(w * x**k for w, x, _ in rows) for k in range(5)]
    t = [sum(w * x**k * y for w, x, y in rows) for k in range(3)]
    matrix = ((s[0], s[1], s[2]), (s[1], s[2], s[3]), (s[2], s[3], s[4]))
    det = _det(matrix)
    if abs(det) < 1e-12 * max(1.0, abs(s[4]) * abs(s[0]) * abs(s[2])):
        return None
    solution = []
    for column in range(3):
        replaced = tuple(
            tuple(t[r] if c == column else matrix[r][c] for c in range(3)) for r in range(3)
        )
        solution.append(_det(replaced) / det)
    return solution[0], solution[1], solution[2]


def _det(m: Sequence[Sequence[float]]) -> float:
    return (
        m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
        - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
        + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
    )


def with_knee(parts: Ceiling, state: KneeState) -> Ceiling:
    """``parts`` with the knee's cap among the limits, once there is one; the smallest limit
    sets the ceiling (a tie goes to what was there first)."""
    if state.cap is None or state.fit is None:
        return parts
    knee = DependencyCeiling(KNEE, state.cap, KNEE, f"learned: {state.fit.describe()}")
    each = (*parts.each, knee)
    if parts.unknown is not None or (parts.workers is not None and parts.workers <= state.cap):
        return replace(parts, each=each)
    return Ceiling(state.cap, KNEE, knee.note, each)
