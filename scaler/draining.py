"""The workers the policy's own answers let go, while they may still be draining.

A scale-in does not free the dependency at once. The HPA keeps the largest recommendation of
its stabilisation window (``HPA_STABILIZATION``, 300 s by default), so it removes replicas when
a larger answer leaves the window; each removed pod then stops taking jobs and keeps running,
holding its share of the dependency, until it has finished its jobs or its grace period ends.
The HPA does not count terminating pods among its replicas, so a scale-up soon after a scale-in
adds new pods beside them. Where the broker does not show these workers (Huey, plain lists,
Celery; a quiet Sidekiq process is not among the consumers), and where it shows them but pods
still booting hide how many drain, only the answers tell: every drop of the window's largest
answer is a count of workers that may drain, kept until the broker shows they are gone (the
workers, or the jobs in flight), or for the grace period the trigger gives (``gracePeriod``),
or, where neither tells (Huey, plain lists), for ``DRAIN_HORIZON``.

Pure: the state goes in and comes out with each decision.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

from brokers import registry
from brokers.base import QueueSource
from scaler.signals import QueueSignals
from scaler.trigger_spec import TriggerSpec

#: the HPA's default scale-down stabilisation: it may hold the largest answer this long
HPA_STABILIZATION = 300.0
#: where the broker shows nothing of the workers, a pod let go is taken to drain this long at
#: least, or for ``DRAIN_JOBS`` mean job times where that is longer (it finishes its jobs);
#: 600 s held a fleet of 3-second jobs at the room beside pods gone long since, for 10
#: minutes while a diurnal peak's backlog grew (the shipped diurnal scenario as a plain list)
DRAIN_HORIZON = 300.0
DRAIN_JOBS = 10.0
#: a pod added this long ago has booted: where the consumers count draining workers and the
#: HPA's replicas have not grown for this long, those seen beyond them drain
BOOT_HORIZON = 300.0
#: a pod let go is deleted up to this long after the answer that lets it go: the HPA acts at
#: its next sync (15 s by default), KEDA's scale to zero at its next poll (30 s)
DELETE_LAG = 30.0
#: the HPA's default tolerance: it leaves the replicas as they are while the answer is within
#: 10% of them, so it may run fewer than the answer it holds (:func:`held_up`)
HPA_TOLERANCE = 0.1
#: KEDA's default ``cooldownPeriod`` (300 s) less its default polling interval (30 s): it
#: counts the cooldown from the last poll that saw the trigger active, which may come a poll
#: before the first inactive answer; after it KEDA may scale the Deployment to zero
KEDA_COOLDOWN = 270.0


@dataclass(frozen=True, slots=True)
class Released:
    """What the answers let go: ``entries``, ``(when, workers)`` oldest first, the workers the
    HPA may have removed that may still drain; ``answers``, the answers of the HPA's window
    that it may still hold, ``(when, workers)`` each larger than those after it; and, where the
    broker's consumers count draining workers, a floor on those that take jobs."""

    entries: tuple[tuple[float, int], ...] = ()
    answers: tuple[tuple[float, int], ...] = ()
    ready_floor: int | None = None
    #: when the replicas the HPA may hold last grew
    grown_at: float | None = None
    #: since when every answer has been inactive (KEDA counts its cooldown from then)
    inactive_since: float | None = None

    @property
    def workers(self) -> int:
        return sum(count for _, count in self.entries)

    @property
    def held(self) -> int | None:
        """The replicas the HPA may hold: the window's largest answer."""
        return self.answers[0][1] if self.answers else None


NONE_RELEASED = Released()


@functools.cache
def consumers_count_draining(source: QueueSource) -> bool:
    """Whether a worker that takes no more jobs but finishes its own still counts among the
    consumers the format shows (not a quiet Sidekiq process); False where it shows none."""
    info = registry.format_info(source.format)
    if not info.reports_consumers:
        return False
    return info.snapshot_model is None or info.snapshot_model(info, source).draining_counts


def settle(released: Released, signals: QueueSignals, spec: TriggerSpec, now: float) -> Released:
    """``released`` with what the broker shows now (:func:`draining_at_most`): those let go
    first are taken as gone first; where the broker shows no workers, after
    :func:`drain_horizon` at the latest (where it shows them, a grace period ended by the clock
    would let them go while the HPA is still about to delete the pods, and the floor of those
    that take jobs would count them). Where it shows the jobs that run but not the workers
    (Celery, arq, pgtable) and the trigger gives no grace period, no horizon: a pod is let go
    once the jobs in flight show it gone, since a mix's mean job says nothing of how long its
    longest runs (``broad-185``: a pod let go drained a 20-minute job of a mix whose mean was
    21 seconds, and a burst's fleet at the ceiling beside it was above it for 654 s)."""
    entries = list(released.entries)
    shows_drain = signals.in_flight is not None and spec.grace_period is None
    if signals.consumers is None and not shows_drain:
        horizon = drain_horizon(spec)
        entries = [(when, count) for when, count in entries if now - when < horizon]
    excess = sum(count for _, count in entries) - draining_at_most(released, signals, spec, now)
    while excess > 0 and entries:
        when, count = entries[0]
        if count <= excess:
            entries.pop(0)
            excess -= count
        else:
            entries[0] = (when, int(count - excess))
            excess = 0
    floor, seen = released.ready_floor, signals.consumers
    if seen is not None and consumers_count_draining(spec.source):
        floor = max(floor or 0, seen - sum(count for _, count in entries))
    return replace(released, entries=tuple(entries), ready_floor=floor)


def draining_at_most(
    released: Released, signals: QueueSignals, spec: TriggerSpec, now: float
) -> float:
    """The most workers that can be draining, by what the broker shows. A draining worker runs
    at least one job: no more than the jobs in flight. Where the consumers count draining
    workers: no more than those above the floor of the workers that take jobs, and once the
    HPA's replicas have not grown for ``BOOT_HORIZON`` (every pod it holds is up), no more
    than the consumers beyond the fewest it may run (:func:`held_up`). While jobs wait every
    slot of a worker that takes jobs is busy, so only the jobs in flight beyond those slots run on draining workers: the slots the
    library records where its consumers leave draining workers out (a quiet Sidekiq process),
    or, where it shows no workers, those of the replicas the HPA holds once they are up."""
    bound = math.inf if signals.in_flight is None else float(signals.in_flight)
    seen, in_flight = signals.consumers, signals.in_flight
    counts = seen is not None and consumers_count_draining(spec.source)
    if counts and seen is not None and released.ready_floor is not None:
        bound = min(bound, max(0, seen - released.ready_floor))
    if not counts and signals.depth and signals.slots and in_flight is not None:
        bound = min(bound, max(0, in_flight - signals.slots))
    held, grown_at = released.held, released.grown_at
    if held is None or grown_at is None or now - grown_at < BOOT_HORIZON:
        return bound
    running = held_up(held)
    if counts and seen is not None:
        bound = min(bound, max(0, seen - running))
    slots = spec.worker_concurrency
    if seen is None and signals.depth and in_flight is not None and slots:
        bound = min(bound, max(0, in_flight - running * slots))
    return bound


def hpa_holds(asked: float, replicas: int) -> bool:
    """Whether the HPA leaves ``replicas`` as they are for an answer of ``asked`` workers (the
    ``workers`` metric, an AverageValue of 1): within ``HPA_TOLERANCE`` of them, tested as the
    HPA tests it, in floating point. So 11 asked of 10 is past it: ``|1 - 11/10|`` reads
    0.10000000000000009, and the HPA scales to 11."""
    return replicas > 0 and abs(1 - asked / replicas) <= HPA_TOLERANCE


def held_up(held: int) -> int:
    """The fewest replicas the HPA may run while it holds an answer of ``held``: within its
    tolerance of the answer it does not scale (:func:`hpa_holds`)."""
    fewest = math.ceil(held / (1 + HPA_TOLERANCE) - 1e-9)
    return fewest if held <= 0 or hpa_holds(held, fewest) else fewest + 1


def likely_draining(
    released: Released, signals: QueueSignals, spec: TriggerSpec, now: float
) -> int:
    """Of the workers that may drain (``released``, settled), those that likely still do: all
    of them where the broker shows the jobs that run (:func:`settle` lets them go once those
    stop) or where the trigger gives the grace period (:func:`settle` lets them go at its end);
    elsewhere only those let go within ``DRAIN_JOBS`` mean jobs (the trigger's ``jobDuration``;
    none without it), since :func:`drain_horizon`'s floor is a guess."""
    if signals.in_flight is not None or spec.grace_period is not None:
        return released.workers  # settled by what runs, or by the grace
    job = given_job_seconds(spec)
    if job is None:
        return 0
    return sum(count for when, count in released.entries if now - when < DRAIN_JOBS * job)


def drain_horizon(spec: TriggerSpec) -> float:
    """How long a pod let go may drain: the grace period the trigger gives (``gracePeriod``,
    the Deployment's ``terminationGracePeriodSeconds``: Kubernetes kills the pod then; after
    ``DELETE_LAG``, since the pod is deleted a little after the answer), else,
    where the broker cannot show it, ``DRAIN_HORIZON``, or ``DRAIN_JOBS`` times the mean job the
    trigger gives (``jobDuration``) where longer."""
    if spec.grace_period is not None:
        return spec.grace_period + DELETE_LAG
    job = given_job_seconds(spec)
    if job is not None:
        return max(DRAIN_HORIZON, DRAIN_JOBS * job)
    return DRAIN_HORIZON


def given_job_seconds(spec: TriggerSpec) -> float | None:
    """The mean job the trigger gives (``jobDuration``, or ``workerConcurrency`` over
    ``workerThroughput``); None where it gives neither."""
    if spec.worker_throughput and spec.worker_concurrency:
        return spec.worker_concurrency / spec.worker_throughput
    return None


def room(released: Released, ceiling: int, last: int | None) -> int:
    """The most workers to answer beside those that may drain, never under the previous
    answer (a scale-in would let more go)."""
    return max(min(last or 0, ceiling), ceiling - released.workers)


def after_answer(
    released: Released, desired: int, now: float, seen: int | None, inactive: bool = False
) -> Released:
    """``released`` once ``desired`` is answered at ``now``, ``inactive`` or not: the HPA's
    window without the answers it no longer holds, and what it may have let go since (before
    any answer, the workers the broker shows, ``seen``, are what it holds). An answer within
    the HPA's tolerance of the replicas it holds (:func:`hpa_holds`) leaves them, for as long
    as it is given: 9 asked of 10 runs 10, and a later answer of 8 lets 2 go, not 1
    (``ceilings-105``: the 10th pod drained beside a scale-up to the ceiling). Once the answers
    have been inactive for ``KEDA_COOLDOWN``, KEDA may have scaled the Deployment to zero past
    the HPA's window: every replica the window holds may go, whatever the answer."""
    answers = list(released.answers)
    if not answers and seen is not None:
        answers = [(now, seen)]
    before = answers[0][1] if answers else 0
    if desired < before and hpa_holds(desired, before):
        desired = before  # the HPA recommends the replicas it runs: it lets none go
    answers = [(when, count) for when, count in answers if now - when <= HPA_STABILIZATION]
    since = None
    if inactive:
        since = now if released.inactive_since is None else released.inactive_since
    if since is not None and now - since >= KEDA_COOLDOWN:
        answers, desired = [], 0
    while answers and answers[-1][1] <= desired:
        answers.pop()
    answers.append((now, desired))
    drop = before - answers[0][1]
    grown_at = now if drop < 0 or released.grown_at is None else released.grown_at
    if drop <= 0:
        return replace(released, answers=tuple(answers), grown_at=grown_at, inactive_since=since)
    floor = released.ready_floor
    return Released(
        entries=(*released.entries, (now, drop)),
        answers=tuple(answers),
        ready_floor=None if floor is None else max(0, floor - drop),
        grown_at=grown_at,
        inactive_since=since,
    )
