"""An in-memory broker behind the adapter contract, as dramatiq's StubBroker is beside its base.

:class:`MemoryBroker` holds queues (:class:`MemoryQueue`: waiting jobs with their enqueue times,
jobs in flight, consumers, counters) and can be made to fail (an outage:
:class:`~brokers.errors.BrokerUnreachable`), to hang (no answer at all) or to be misconfigured
(:class:`~brokers.errors.QueueMisconfigured`). :class:`MemoryAdapter` is a
:class:`~brokers.base.QueueAdapter` that presents a memory queue as a given format shows it: what
the format's :class:`~brokers.formats.FormatInfo` says it reports (in flight, consumers), the
oldest job's enqueue time only where the format's jobs carry one, exact counters for a stream and
list-marker counts (:class:`~brokers.list_marker.ListMarker`, with ``LPOS``'s ``MAXLEN``) for a
list. Unit tests serve it through the SamplerRegistry's adapter factory; the simulator writes its
queue into it each sample and reads it back through :meth:`MemoryAdapter.read`.
"""

from __future__ import annotations

import asyncio
import collections
import enum
import time
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple, TypeVar

from brokers import registry
from brokers.base import End, Precision, QueueSnapshot, QueueSource, Reading, WorkerReadings
from brokers.connections import Connections
from brokers.errors import BrokerUnreachable, QueueMisconfigured
from brokers.list_marker import ListMarker

T = TypeVar("T")


class MemoryJob(NamedTuple):
    id: bytes
    enqueued_at: float


class MemoryQueue:
    """One queue: waiting jobs oldest first, the jobs in flight, consumers and the counters.

    Job ids are unique among the waiting jobs (they are what a list marker looks for)."""

    def __init__(self) -> None:
        #: the waiting jobs' ids and enqueue times, oldest first (two deques: the simulator
        #: pushes a few hundred thousand jobs an hour, and extends them in one call)
        self._ids: collections.deque[bytes] = collections.deque()
        self._times: collections.deque[float] = collections.deque()
        #: job id -> its place; the newest job's place is ``_newest``, the oldest's is one more
        #: than ``_newest - len``, so a job's distance from the push end is ``_newest - place``
        self._places: dict[bytes, int] = {}
        self._newest = 0
        self.in_flight = 0
        self.consumers = 0
        #: of the consumers, those that take no more jobs and finish their own (draining)
        self.draining = 0
        #: job slots per consumer
        self.concurrency = 1
        self.arrivals_total = 0
        self.completions_total = 0

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def oldest(self) -> MemoryJob | None:
        return MemoryJob(self._ids[0], self._times[0]) if self._ids else None

    @property
    def newest(self) -> MemoryJob | None:
        return MemoryJob(self._ids[-1], self._times[-1]) if self._ids else None

    def push(self, job_id: bytes, enqueued_at: float) -> None:
        """A job arrives at the push end."""
        self.push_all((job_id,), (enqueued_at,))

    def push_all(self, ids: Sequence[bytes], enqueued_at: Sequence[float]) -> None:
        """Jobs arrive at the push end, the first first, with their enqueue times."""
        if len(ids) != len(enqueued_at):
            raise ValueError(f"{len(ids)} job ids for {len(enqueued_at)} enqueue times")
        places = dict(zip(ids, range(self._newest + 1, self._newest + 1 + len(ids)), strict=True))
        if len(places) != len(ids) or not self._places.keys().isdisjoint(places):
            raise ValueError("a job id that already waits in this queue, or twice")
        self._places.update(places)
        self._ids.extend(ids)
        self._times.extend(enqueued_at)
        self._newest += len(ids)
        self.arrivals_total += len(ids)

    def take(self, count: int = 1) -> int:
        """Consumers take up to ``count`` of the oldest jobs, in flight until finished (or
        requeued); returns how many there were to take."""
        ids, pop_time, places = self._ids, self._times.popleft, self._places
        taken = min(count, len(ids))
        for _ in range(taken):
            del places[ids.popleft()]
            pop_time()
        self.in_flight += taken
        return taken

    def finish(self, count: int = 1) -> None:
        """``count`` jobs in flight are done."""
        done = min(count, self.in_flight)
        self.in_flight -= done
        self.completions_total += done

    def requeue(self, jobs: Iterable[MemoryJob]) -> None:
        """Jobs in flight go back at the oldest end (their worker died), the first oldest."""
        back = list(jobs)
        oldest_place = self._newest - len(self._ids)
        for offset, job in enumerate(reversed(back)):
            if job.id in self._places:
                raise ValueError(f"job {job.id!r} already waits in this queue")
            self._places[job.id] = oldest_place - offset
        self._ids.extendleft(job.id for job in reversed(back))
        self._times.extendleft(job.enqueued_at for job in reversed(back))
        self.in_flight = max(0, self.in_flight - len(back))

    def from_push_end(self, job_id: bytes, maxlen: int) -> int | None:
        """How many jobs arrived after ``job_id`` (its distance from the push end), if it waits
        within ``maxlen`` of the push end: ``LPOS ... MAXLEN`` from the push end."""
        place = self._places.get(job_id)
        if place is None or self._newest - place >= maxlen:
            return None
        return self._newest - place


class Health(enum.Enum):
    UP = "up"
    #: every sample fails at once: an outage
    DOWN = "down"
    #: every sample waits forever: a broker that gives no answer
    HANGING = "hanging"
    #: every sample says the queue is not what the trigger says
    MISCONFIGURED = "misconfigured"


class MemoryBroker:
    """Queues by name, one health for the whole broker, and the adapters opened on it."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.queues: dict[str, MemoryQueue] = {}
        self.health = Health.UP
        self.problem = ""
        self.adapters: list[MemoryAdapter] = []
        #: set while the broker answers: a hanging sample waits on it
        self.answering = asyncio.Event()
        self.answering.set()

    def queue(self, name: str) -> MemoryQueue:
        """The queue called ``name``, created empty on first use."""
        queue = self.queues.get(name)
        if queue is None:
            queue = self.queues[name] = MemoryQueue()
        return queue

    def fail(self) -> None:
        self._become(Health.DOWN)

    def hang(self) -> None:
        """Samples from now on get no answer until :meth:`recover` (or the sampler's timeout)."""
        self._become(Health.HANGING)

    def misconfigure(self, problem: str) -> None:
        self.problem = problem
        self._become(Health.MISCONFIGURED)

    def recover(self) -> None:
        self._become(Health.UP)

    def _become(self, health: Health) -> None:
        self.health = health
        if health is Health.HANGING:
            self.answering.clear()
        else:
            self.answering.set()

    def open(self, source: QueueSource, connections: Connections | None = None) -> MemoryAdapter:
        """An adapter for ``source``'s queue: the SamplerRegistry's adapter factory (a memory
        queue needs no connection: ``connections`` is taken and not used)."""
        adapter = MemoryAdapter(self, source)
        self.adapters.append(adapter)
        return adapter


class MemoryAdapter:
    """A memory queue as ``source``'s format shows it."""

    def __init__(self, broker: MemoryBroker, source: QueueSource) -> None:
        info = registry.format_info(source.format)
        if info.snapshot_model is None:
            raise ValueError(
                f"format {source.format} provides no snapshot model to show a queue by"
            )
        model = info.snapshot_model(info, source)
        self.broker = source.broker
        self.queue = source.queue
        self.closed = False
        self.samples = 0
        self._memory = broker
        self._model = model
        self._in_flight = info.reports_in_flight
        self._consumers = info.reports_consumers
        self._push_end = model.push_end
        self._marker = ListMarker(self._push_end)
        #: counts kept here where they switch between the broker's and the marker's (RQ's):
        #: the totals, the broker's and the marker's at the last sample, and its consumers
        self._totals = (0, 0)
        self._last: tuple[int, int, int, int, int] | None = None
        #: in flight at the library's last heartbeat, and when that was
        self._beat: tuple[int, float] | None = None
        #: the broker's counters and in flight at its last refresh, and when that was
        self._refreshed: tuple[tuple[int, int, int], float] | None = None

    async def sample(self) -> QueueSnapshot:
        memory = self._memory
        await memory.answering.wait()  # a hanging broker: until it recovers, or the timeout
        if memory.health is Health.DOWN:
            raise BrokerUnreachable(self.broker, self.queue, detail="the memory broker is down")
        if memory.health is Health.MISCONFIGURED:
            raise QueueMisconfigured(memory.problem)
        return self.read(memory.clock())

    def read(self, now: float) -> QueueSnapshot:
        """One sample of the queue at ``now``, as the format's adapter would take it."""
        queue = self._memory.queue(self.queue)
        self.samples += 1
        depth = len(queue)
        model = self._model
        exact = True
        if model.broker_counters and not model.counters_need_workers:
            arrivals, completions = queue.arrivals_total, queue.completions_total
        else:
            counts = self._marker.observe(depth, self._marker_found(queue, depth), _id(queue))
            arrivals, completions, exact = (
                counts.arrivals_total,
                counts.completions_total,
                counts.exact,
            )
        source = model.counts_source
        if model.counters_need_workers:
            arrivals, completions, exact, source = self._switched(
                queue, arrivals, completions, exact
            )
        consumers = queue.consumers - (0 if model.draining_counts else queue.draining)
        in_flight, age = queue.in_flight, 0.0
        if model.heartbeat:
            self._beat = _renewed(self._beat, queue.in_flight, now, model.heartbeat)
            in_flight, age = self._beat[0], now - self._beat[1]
        counted_at = None
        if model.refresh:
            figures = (arrivals, completions, in_flight)
            self._refreshed = _renewed(self._refreshed, figures, now, model.refresh)
            (arrivals, completions, in_flight), counted_at = self._refreshed
        oldest = queue.oldest
        timed = self._model.oldest_source != "" and oldest is not None
        return QueueSnapshot(
            observed_at=now,
            depth=depth,
            in_flight=in_flight if self._in_flight else None,
            oldest_enqueued_at=oldest.enqueued_at if timed and oldest is not None else None,
            oldest_precision=Precision.EXACT if timed else Precision.UNKNOWN,
            oldest_source=self._model.oldest_source if timed or self._model.broker_counters else "",
            arrivals_total=arrivals,
            completions_total=completions,
            counts_exact=exact,
            counts_source=source,
            consumers=consumers if self._consumers else None,
            slots=consumers * queue.concurrency if model.reports_slots else None,
            readings=WorkerReadings(
                in_flight=Reading(Precision.ESTIMATE, age=age) if model.heartbeat else Reading()
            ),
            counts_observed_at=counted_at,
        )

    def _switched(
        self, queue: MemoryQueue, arrivals: int, completions: int, exact: bool
    ) -> tuple[int, int, bool, str]:
        """Counts from the broker's counters while workers are registered (now or at the
        previous sample), else the marker's (``arrivals``, ``completions``, ``exact``), and
        their source."""
        last, now = self._last, (queue.arrivals_total, queue.completions_total)
        self._last = (*now, arrivals, completions, queue.consumers)
        counters = bool(queue.consumers or (last is not None and last[4]))
        source = self._model.counts_source if counters else "list-marker"
        if last is None:
            return (*self._totals, exact, source)
        if counters:
            added, done, exact = now[0] - last[0], now[1] - last[1], True
        else:
            added, done = arrivals - last[2], completions - last[3]
        self._totals = (self._totals[0] + added, self._totals[1] + done)
        return (*self._totals, exact, source)

    def _marker_found(self, queue: MemoryQueue, depth: int) -> list[int] | None:
        """What ``LPOS`` answers for the previous marker: its index from the head, if found."""
        query = self._marker.query()
        if query is None:
            return None
        newer = queue.from_push_end(query.marker, query.maxlen)
        if newer is None:
            return []
        return [newer if self._push_end is End.HEAD else depth - 1 - newer]

    async def aclose(self) -> None:
        self.closed = True


def _renewed(held: tuple[T, float] | None, value: T, now: float, period: float) -> tuple[T, float]:
    """A figure the library or broker writes every ``period`` seconds (a heartbeat, a statistics
    refresh), and when it was written: ``value`` now if a period has passed since ``held``,
    else ``held``."""
    return (value, now) if held is None or now - held[1] >= period else held


def _id(queue: MemoryQueue) -> bytes | None:
    newest = queue.newest
    return None if newest is None else newest.id
