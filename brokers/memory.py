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
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from brokers import registry
from brokers.base import End, Precision, QueueSnapshot, QueueSource
from brokers.connections import Connections
from brokers.errors import BrokerUnreachable, QueueMisconfigured
from brokers.list_marker import ListMarker


@dataclass(frozen=True, slots=True)
class MemoryJob:
    id: bytes
    enqueued_at: float


class MemoryQueue:
    """One queue: waiting jobs oldest first, the jobs in flight, consumers and the counters.

    Job ids are unique among the waiting jobs (they are what a list marker looks for)."""

    def __init__(self) -> None:
        self._jobs: collections.deque[MemoryJob] = collections.deque()
        #: job id -> its place; the newest job's place is ``_newest``, the oldest's is one more
        #: than ``_newest - len``, so a job's distance from the push end is ``_newest - place``
        self._places: dict[bytes, int] = {}
        self._newest = 0
        self.in_flight = 0
        self.consumers = 0
        self.arrivals_total = 0
        self.completions_total = 0

    def __len__(self) -> int:
        return len(self._jobs)

    @property
    def oldest(self) -> MemoryJob | None:
        return self._jobs[0] if self._jobs else None

    @property
    def newest(self) -> MemoryJob | None:
        return self._jobs[-1] if self._jobs else None

    def push(self, job_id: bytes, enqueued_at: float) -> None:
        """A job arrives at the push end."""
        if job_id in self._places:
            raise ValueError(f"job {job_id!r} already waits in this queue")
        self._jobs.append(MemoryJob(job_id, enqueued_at))
        self._newest += 1
        self._places[job_id] = self._newest
        self.arrivals_total += 1

    def take(self, count: int = 1) -> list[MemoryJob]:
        """Consumers take up to ``count`` of the oldest jobs; they are in flight until finished."""
        taken = [self._jobs.popleft() for _ in range(min(count, len(self._jobs)))]
        for job in taken:
            del self._places[job.id]
        self.in_flight += len(taken)
        return taken

    def finish(self, count: int = 1) -> None:
        """``count`` jobs in flight are done."""
        done = min(count, self.in_flight)
        self.in_flight -= done
        self.completions_total += done

    def requeue(self, jobs: Iterable[MemoryJob]) -> None:
        """Jobs in flight go back at the oldest end (their worker died), the first oldest."""
        back = list(jobs)
        oldest_place = self._newest - len(self._jobs)
        for offset, job in enumerate(reversed(back)):
            if job.id in self._places:
                raise ValueError(f"job {job.id!r} already waits in this queue")
            self._places[job.id] = oldest_place - offset
        self._jobs.extendleft(reversed(back))
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

    def __init__(self, name: str = "redis", *, clock: Callable[[], float] = time.time) -> None:
        self.name = name
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
        if self._model.broker_counters:
            arrivals, completions, exact = queue.arrivals_total, queue.completions_total, True
        else:
            counts = self._marker.observe(depth, self._marker_found(queue, depth), _id(queue))
            arrivals, completions, exact = (
                counts.arrivals_total,
                counts.completions_total,
                counts.exact,
            )
        oldest = queue.oldest
        timed = self._model.oldest_source != "" and oldest is not None
        return QueueSnapshot(
            observed_at=now,
            depth=depth,
            in_flight=queue.in_flight if self._in_flight else None,
            oldest_enqueued_at=oldest.enqueued_at if timed and oldest is not None else None,
            oldest_precision=Precision.EXACT if timed else Precision.UNKNOWN,
            oldest_source=self._model.oldest_source if timed or self._model.broker_counters else "",
            arrivals_total=arrivals,
            completions_total=completions,
            counts_exact=exact,
            counts_source=self._model.counts_source,
            consumers=queue.consumers if self._consumers else None,
        )

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


def _id(queue: MemoryQueue) -> bytes | None:
    newest = queue.newest
    return None if newest is None else newest.id
