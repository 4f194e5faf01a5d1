"""A pool trigger, parsed: the queues one fleet of workers serves and the order it serves them in.

``queues`` lists the pool's queues, comma-separated, in serving order: ``critical,default,low``.
An entry may carry a weight, ``critical:5`` (a whole number, at least 1; only with
``queueOrder: weighted``), and may be a glob (``reports-*``, ``mail.?``, ``[ab]-jobs``) where the
format can list its queues (Sidekiq's ``queues`` set, RabbitMQ's management API). A glob's
matches are served at its place, in name order; a queue that an exact entry names is served at
that entry's place, whatever glob also matches it. ``queueTargetAges`` overrides ``targetAge``
per entry, as written in ``queues``: ``critical=10s,reports-*=10m`` (a glob's applies to each of
its matches). ``queueOrder`` is how a free worker picks its next job:

- ``strict`` (the default): from the first queue in the list that has one, as Sidekiq does with
  ``-q critical -q default -q low`` and without weights (strict ordering), and RQ with
  ``rq worker high default low``: a lower queue is served only from what the higher ones leave.
- ``weighted``: each fetch puts the queues in a random order weighted by their weights and takes
  from the first one that has a job, as Sidekiq does with ``-q critical,5 -q default,3 -q low``
  (weighted random ordering): while every queue has work each gets its weight's share of the
  slots; a queue without work leaves its share to the others.
- ``roundRobin``: the queues take turns, as Celery's worker consuming ``-Q a,b`` (kombu's
  ``round_robin_cycle`` rotates the queue it reads first after each message) and Dramatiq's
  consumers: while every queue has work each gets an equal share.

:func:`PoolSpec.resolve` turns the entries and the queues a broker lists into the pool's
queues (:class:`PoolQueue`); :func:`scaler.pool_policy.member_spec` makes the single-queue spec each queue is
sampled and decided with (:mod:`scaler.pool_policy`).
"""

from __future__ import annotations

import enum
import fnmatch
import re
from collections.abc import Iterable
from dataclasses import dataclass

#: the most queues a pool may have, listed or matched by its globs (serve --max-pool-queues)
DEFAULT_MAX_POOL_QUEUES = 50
_GLOB_CHARS = frozenset("*?[")
#: what looks like a weight after the last ``:`` (a number, maybe negative or a fraction)
_WEIGHT_LIKE = re.compile(r"-?\d+(?:\.\d*)?")


class ServingOrder(enum.StrEnum):
    """How a pool's free worker picks the queue of its next job (see the module's text)."""

    STRICT = "strict"
    WEIGHTED = "weighted"
    ROUND_ROBIN = "roundRobin"


def is_glob(pattern: str) -> bool:
    return not _GLOB_CHARS.isdisjoint(pattern)


@dataclass(frozen=True, slots=True)
class PoolEntry:
    """One entry of ``queues``: a queue name or a glob, its weight and its own targetAge."""

    pattern: str
    weight: int = 1
    #: None: the trigger's targetAge
    target_age: float | None = None

    @property
    def is_glob(self) -> bool:
        return is_glob(self.pattern)


@dataclass(frozen=True, slots=True)
class PoolQueue:
    """One queue of a pool, resolved: its name, weight and targetAge (None: the trigger's)."""

    name: str
    weight: int = 1
    target_age: float | None = None


@dataclass(frozen=True, slots=True)
class PoolSpec:
    """What ``queues``, ``queueOrder`` and ``queueTargetAges`` say, in serving order."""

    entries: tuple[PoolEntry, ...]
    order: ServingOrder = ServingOrder.STRICT
    #: targetDrainTime is not set: each queue drains within its own targetAge
    drain_follows_age: bool = True

    @property
    def has_globs(self) -> bool:
        return any(entry.is_glob for entry in self.entries)

    @property
    def text(self) -> str:
        """The entries as ``queues`` has them, for names and messages."""
        return ",".join(entry.pattern for entry in self.entries)

    def resolve(self, listed: Iterable[str] = ()) -> tuple[PoolQueue, ...]:
        """The pool's queues in serving order: each exact entry, each glob's matches among
        ``listed`` (the queues the broker lists) at its place, in name order. A queue an exact
        entry names is served there; one that two globs match, at the first."""
        exact = {entry.pattern for entry in self.entries if not entry.is_glob}
        names = sorted(set(listed) - exact)
        taken: set[str] = set()
        queues: list[PoolQueue] = []
        for entry in self.entries:
            if entry.is_glob:
                matches = [n for n in fnmatch.filter(names, entry.pattern) if n not in taken]
            else:
                matches = [entry.pattern]
            for name in matches:
                taken.add(name)
                queues.append(PoolQueue(name, entry.weight, entry.target_age))
        return tuple(queues)


def weight_like(text: str) -> bool:
    """Whether ``text`` (what follows an entry's last ``:``) is meant as a weight."""
    return _WEIGHT_LIKE.fullmatch(text) is not None
