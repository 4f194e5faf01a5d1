"""One sampler per queue, shared by every trigger that names it.

A sampler reads its queue on its own schedule and keeps a bounded history of snapshots; RPCs
read that history and never wait on the broker once the queue is warm. It samples at the
shortest ``sampleInterval`` among the live triggers on the queue while the queue needs it (watched,
near its target, changing, asked about after a pause), slower up to the slow bound while it is
idle or steady, and keeps the longest ``rateWindow`` among them (:mod:`scaler.sample_schedule`);
a faster trigger takes effect at once. The samplers of one broker share its budget of commands
per second, if the operator set one (:class:`BrokerPacer`).
A failing source backs off. A sampler nobody asked about for a long while stops and releases its
connection; at shutdown every sampler stops within a bounded time, whatever it waits on.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import math
import random
import time
from collections.abc import Callable, Iterator

from brokers.base import AdapterFactory, QueueAdapter, QueueSnapshot, QueueSource
from brokers.connections import Connections, Traffic
from scaler.errors import (
    BrokerUnreachable,
    QueueMisconfigured,
    ResourceExhausted,
    SampleStale,
    ScalerError,
    Unavailable,
)
from scaler.failure_log import REPORT_EVERY, FailureLog
from scaler.history_checkpoint import WRITE_EVERY, Checkpoints, Entry, entry_of, source_key
from scaler.limits import Limits
from scaler.metrics import Metrics
from scaler.sample_clock import SampleClock
from scaler.sample_history import SampleHistory
from scaler.sample_schedule import (
    ASK_PAUSE,
    FAST_AFTER_ASK,
    LIVE_FOR,
    NEAR_TARGET,
    Demand,
    Demands,
    Urgency,
    Wanted,
    allocate,
    changed,
    flowing,
    next_interval,
    pause_after,
    urgency,
)
from scaler.signals import oldest_age
from scaler.trigger_spec import TriggerSpec

log = logging.getLogger(__name__)

# the samplers' own generator: the module's shared one belongs to whoever else runs in the process
_jitter_source = random.Random()

#: a sampler nobody asked about for this long stops
IDLE_AFTER = 600.0
#: a sample older than this many intervals is not answered from
STALE_AFTER_INTERVALS = 3
#: while a StreamIsActive watches a queue, sample at least this often
WATCHED_INTERVAL = 0.25
#: the bounds on one broker round trip (otherwise STALE_AFTER_INTERVALS intervals)
MIN_SAMPLE_TIMEOUT = 2.0
MAX_SAMPLE_TIMEOUT = 10.0
#: the most snapshots a queue's history keeps, whatever rate window its triggers ask for
MAX_HISTORY = 10_000
#: the longest wait for an adapter to release its connection when its sampler stops
ADAPTER_CLOSE_TIMEOUT = 1.0
#: a broker's pacer works its samplers' intervals out again at most this often
PACE_EVERY = 2.0
#: commands per sample a pacer assumes until it has measured its broker's
ASSUMED_COMMANDS_PER_SAMPLE = 2.0
#: samples of one broker under way at once, at most; the others wait for a place before their
#: timeout starts, so more samples due than the process takes at once queue up (late, and
#: answered) instead of all timing out together (10,000 queues' first samples, say)
MAX_SAMPLES_IN_FLIGHT = 256
#: the pause before the next sample is cut by a random share of up to this much: of a relaxed
#: interval, so queues that slowed down together do not stay in step ...
RELAXED_JITTER = 0.2
#: ... and of a failing source's back-off, so queues that failed together (a broker's outage,
#: a burst of first samples more than the process can take at once) do not retry together
BACKOFF_JITTER = 0.5


class BrokerPacer:
    """Keeps the samples of one broker within a budget of commands per second: every
    :data:`PACE_EVERY` seconds it measures the broker's commands per sample (its
    :class:`~brokers.connections.Traffic` over the samples taken) and gives each sampler a floor
    on its interval from :func:`~scaler.sample_schedule.allocate`, least urgent queues slowed
    first."""

    def __init__(self, budget: float, traffic: Traffic) -> None:
        if budget <= 0:
            raise ValueError(f"the command budget is {budget}; expected more than 0")
        self.budget = budget
        self._traffic = traffic
        self._samplers: list[Sampler] = []
        #: per sampler (by id) stretched by the budget: its floor, and its urgency then
        self._floors: dict[int, tuple[float, Urgency]] = {}
        self._paced_at = -math.inf
        self._samples = 0
        self._measured_from = (traffic.commands, 0)
        self.commands_per_sample = ASSUMED_COMMANDS_PER_SAMPLE

    def join(self, sampler: Sampler) -> None:
        self._samplers.append(sampler)
        self._paced_at = -math.inf

    def leave(self, sampler: Sampler) -> None:
        with contextlib.suppress(ValueError):
            self._samplers.remove(sampler)
        self._floors.pop(id(sampler), None)

    def sampled(self) -> None:
        self._samples += 1

    def floor(self, sampler: Sampler, now: float, level: Urgency) -> float:
        """The shortest interval the budget allows ``sampler`` now, at urgency ``level``."""
        if now - self._paced_at >= PACE_EVERY:
            self._pace(now)
        floor = self._floors.get(id(sampler))
        if floor is None or level > floor[1]:
            return 0.0
        return floor[0]

    def _pace(self, now: float) -> None:
        self._paced_at = now
        commands, samples = self._measured_from
        if self._samples - samples >= 20:  # enough samples to measure their cost
            spent = self._traffic.commands - commands
            self.commands_per_sample = max(0.1, spent / (self._samples - samples))
            self._measured_from = (self._traffic.commands, self._samples)
        samplers = list(self._samplers)
        wanted = [s.wanted(now) for s in samplers]
        intervals = allocate(wanted, self.budget / self.commands_per_sample)
        # only the queues the budget stretched get a floor, kept while they are no more urgent
        # than they were (one that becomes urgent before the next pacing is not held back)
        self._floors = {
            id(s): (x, w.urgency)
            for s, w, x in zip(samplers, wanted, intervals, strict=True)
            if x > w.interval
        }


class Sampler:
    """Samples one queue at the pace of its live triggers into a bounded history."""

    def __init__(
        self,
        source: QueueSource,
        adapter: QueueAdapter,
        metrics: Metrics,
        first: Demand,
        *,
        clock: SampleClock,
        idle_after: float = IDLE_AFTER,
        live_for: float = LIVE_FOR,
        max_history: int = MAX_HISTORY,
        report_every: float = REPORT_EVERY,
        slow_interval: float | None = None,
        pacer: BrokerPacer | None = None,
        checkpoints: Checkpoints | None = None,
        slots: asyncio.Semaphore | None = None,
    ) -> None:
        self.source = source
        self._clock = clock
        self._checkpoints = checkpoints
        #: the places for samples of this queue's broker
        self._slots = slots or asyncio.Semaphore(1)
        #: the slow bound (None: always the fast interval)
        self.slow_interval = slow_interval
        self._pacer = pacer
        self.idle_after = idle_after
        self.last_error: ScalerError | None = None
        #: failed samples in a row (0 after a success): the backoff
        self.failures = 0
        self._adapter = adapter
        self._metrics = metrics
        self._demands = Demands(first, time.monotonic(), live_for=live_for)
        self._live_for = live_for
        self._history = SampleHistory(max_history)
        #: the longer history of arrivals that estimates ages where jobs carry no timestamp
        self.arrivals = self._history.arrivals
        self._failure_log = FailureLog(log, source.describe(), every=report_every)
        self._last_success = 0.0  # monotonic time of the newest snapshot
        self._last_asked = time.monotonic()
        self._started_at = 0.0  # monotonic time the last sample started
        self._sampling = False
        self._watchers = 0
        self._stopping = False
        #: set once the first sample has succeeded or failed
        self._first = asyncio.Event()
        #: set by the next sample (made when a call waits for it)
        self._changed: asyncio.Event | None = None
        #: the sample under way (or the sampler's closing), if any
        self._task: asyncio.Task[None] | None = None
        self._task_name = f"sampler {source.queue}"
        self._on_stop: Callable[[Sampler], None] | None = None
        self._closed = False
        #: the registry hands this sampler out until it stops (SamplerRegistry.get)
        self.registered = True
        #: the urgency and the relaxed interval after the newest sample, and the interval then
        #: planned (staleness is judged by it)
        self.urgency = Urgency.CHANGING
        self._relaxed = first.interval
        self._planned = first.interval
        self._previous: QueueSnapshot | None = None
        #: KEDA asked after a pause: the queue is fast until then (monotonic)
        self._fast_until = -math.inf
        #: the share of the next pause taken (1: all of it; less: jittered)
        self._jitter = 1.0
        #: a call asked for a fresh read of a queue near its target: sample now
        self._read_now = False

    # -- what triggers do ------------------------------------------------------------------

    @property
    def interval(self) -> float:
        """The shortest sample interval among the live triggers: freshness is judged by it."""
        return self._demands.interval(time.monotonic())

    @property
    def window(self) -> float:
        """The longest rate window among the live triggers: the history covers it."""
        return self._demands.window(time.monotonic())

    @property
    def actual_interval(self) -> float:
        """The interval in force now: the fast one while the queue is urgent, else relaxed up
        to the slow bound; no shorter than the broker's budget allows."""
        return self._actual(time.monotonic())

    def ask(self, demand: Demand) -> None:
        """Note a trigger's request: keeps the sampler alive and its demand live. An interval
        shorter than the one followed so far takes effect now, not after the current pause; so
        does the fast interval when KEDA asks after a pause (:data:`ASK_PAUSE`)."""
        now = time.monotonic()
        paused = now - self._last_asked > ASK_PAUSE
        self._last_asked = now
        before = self._demands.interval(now)
        self._demands.ask(demand, now)
        interval = demand.interval
        if paused:
            self._fast_until = now + FAST_AFTER_ASK
        if interval < before:  # a trigger asks for fresher samples: they are judged by its
            self._planned = min(self._planned, interval)
        if interval < before or (paused and self._first.is_set()):
            self._reschedule()

    def wanted(self, now: float) -> Wanted:
        """What this queue wants of its broker's budget."""
        return Wanted(self._unpaced(now), self._slow(now), self._urgency_now(now))

    def history_now(self) -> tuple[QueueSnapshot, ...] | None:
        """The recent snapshots where :meth:`history` would return them at once (sampled, the
        newest fresh and read without error, no read due on this ask); else None."""
        if self.last_error is not None:
            return None
        view = self._history.view  # empty until the first sample
        now = time.monotonic()
        if not view or self._too_old(now) or self._reads_on_ask(now):
            return None
        return view

    async def history(self, first_timeout: float) -> tuple[QueueSnapshot, ...]:
        """The recent snapshots, oldest first; raises Unavailable when there is no fresh one.

        The first request waits for the queue's first sample, up to ``first_timeout``; so does a
        request that finds the newest snapshot too old while the source is healthy and a sample
        is under way or due within that time (the first at a faster trigger's interval). A
        failing source is answered at once, with its last error."""
        now = time.monotonic()
        # whether the newest sample is too old as of ``now`` (None: to be worked out again,
        # after a wait)
        stale: bool | None = None
        if not self._first.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(first_timeout):
                    await self._first.wait()
        elif (
            (stale := self._too_old(now))
            and self.last_error is None
            and self._due_within(first_timeout)
        ):
            await self.wait_for_sample(first_timeout)
            stale = None
        elif self._reads_on_ask(now):
            self._read_now = True
            self._reschedule()
            await self.wait_for_sample(first_timeout)
            stale = None
        if stale is None:
            now = time.monotonic()
            stale = self._too_old(now)
        if isinstance(self.last_error, QueueMisconfigured):  # not a blip: the newest sample's
            raise QueueMisconfigured(str(self.last_error))  # answer, whatever came before
        if not self._history:
            detail = f": {self.last_error}" if self.last_error else ""
            raise SampleStale(f"no sample of {self.source.describe()} yet{detail}")
        if self.last_error is not None and self.urgency.read_on_ask:
            # near its target the answer needs a fresh read, and the newest read failed: an
            # outage, not a queue that stood still since its last sample
            raise SampleStale(
                f"the newest read of {self.source.describe()} failed: {self.last_error}"
            )
        if stale:
            age = now - self._last_success
            detail = f"; last error: {self.last_error}" if self.last_error else ""
            raise SampleStale(
                f"the newest sample of {self.source.describe()} is {age:.1f}s old "
                f"(more than {STALE_AFTER_INTERVALS} sample intervals of "
                f"{self._stale_interval(now):g}s){detail}"
            )
        return self._history.view  # immutable: the next sample makes a new one

    async def wait_for_sample(self, timeout: float) -> None:
        """Return after the next sample (or error), or after ``timeout``."""
        changed = self._changed
        if changed is None:
            changed = self._changed = asyncio.Event()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await changed.wait()

    @contextlib.contextmanager
    def watched(self) -> Iterator[None]:
        """While a stream watches, sample at least every ``WATCHED_INTERVAL`` seconds."""
        self._watchers += 1
        self._reschedule()
        try:
            yield
        finally:
            self._watchers -= 1
            self._last_asked = time.monotonic()

    def _reads_on_ask(self, now: float) -> bool:
        """A queue near its target (not watched: then it is read every WATCHED_INTERVAL) is
        read when KEDA asks if its newest sample is older than the fast interval (or than its
        broker's budget allows), its source healthy; the call waits for that read (up to the
        first-sample timeout, as for a stale sample) and is answered from the newest sample."""
        if not self.urgency.read_on_ask or self._watchers or self._stopping:
            return False
        if self.last_error is not None:
            return False
        return self._sampling or now - self._last_success > self._paced_fast(now)

    def _too_old(self, now: float) -> bool:
        age = now - self._last_success
        if self.last_error is None and age <= STALE_AFTER_INTERVALS * self._planned:
            return False  # the stale interval is at least the planned one: no need to work it out
        return age > STALE_AFTER_INTERVALS * self._stale_interval(now)

    def _stale_interval(self, now: float) -> float:
        """The interval a sample's age is judged by: the one planned after the newest sample,
        or the one in force now if longer (a budget that stretched it), never the configured
        minimum alone. Once a read has failed, the queue's quiet is no longer known: the newest
        sample is judged by the interval retries start from (the fast one), so an idle queue
        relaxed to the slow bound does not answer a sample from before an outage for minutes."""
        if self.last_error is not None:
            return self._paced_fast(now)
        return max(self._planned, self._actual(now))

    def _paced_fast(self, now: float) -> float:
        """The fast interval, no shorter than its broker's budget allows: how fresh a queue
        read on KEDA's ask must be, and where a failing source's back-off starts, whatever the
        queue had relaxed to."""
        fast = self._fast(now)
        if self._pacer is not None:
            fast = max(fast, self._pacer.floor(self, now, self._urgency_now(now)))
        return fast

    def _due_within(self, seconds: float) -> bool:
        """A sample is under way, or the next one is due within ``seconds``."""
        due = self._started_at + self._pause()
        return self._sampling or due - time.monotonic() <= seconds

    def _pause(self) -> float:
        """The pause from one sample's start to the next's, as things stand now: never shorter
        than the fast interval, nor longer than the interval in force (or the back-off)."""
        now = time.monotonic()
        if self.failures:
            pause = pause_after(self._paced_fast(now), self.failures)
        else:
            pause = self._actual(now)
        return max(self._fast(now), pause * self._jitter)

    def _fast(self, now: float) -> float:
        interval = self._demands.interval(now)
        return min(interval, WATCHED_INTERVAL) if self._watchers else interval

    def _slow(self, now: float, fast: float | None = None) -> float:
        """The slow bound: the live triggers' shortest ``slowSampleInterval`` (the server's for
        a trigger without one), never below the fast interval (``fast``, where worked out)."""
        if fast is None:
            fast = self._fast(now)
        slow = self._demands.slow(now, self.slow_interval)
        return fast if slow is None else max(fast, slow)

    def _urgency_now(self, now: float) -> Urgency:
        """The newest sample's urgency, raised while watched or right after KEDA asked."""
        if self._watchers:
            return Urgency.WATCHED
        if now < self._fast_until and self.urgency < Urgency.ASKED:
            return Urgency.ASKED
        return self.urgency

    def _unpaced(self, now: float) -> float:
        fast = self._fast(now)
        if self._urgency_now(now).fast:
            return fast
        return max(fast, min(self._slow(now, fast), self._relaxed))

    def _actual(self, now: float) -> float:
        interval = self._unpaced(now)
        if self._pacer is not None:
            interval = max(interval, self._pacer.floor(self, now, self._urgency_now(now)))
        return interval

    # -- the loop --------------------------------------------------------------------------

    def start(self, on_stop: Callable[[Sampler], None]) -> None:
        """Sample now, then when due until stopped or idle; ``on_stop`` is called once the
        sampler stops."""
        self._on_stop = on_stop
        self._clock.schedule(self, time.monotonic())

    async def aclose(self, timeout: float) -> bool:
        """Stop sampling and release the connection, within ``timeout`` seconds whatever the
        sample under way waits on; False when it did not end in that time (it is then left
        cancelled)."""
        self._stopping = True  # a cancellation swallowed inside a library still ends it
        self._clock.cancel(self)
        turn = self._task
        if turn is not None and not turn.done():
            turn.cancel()
        closing = self._task = asyncio.create_task(self._close(after=turn), name=self._task_name)
        done, _ = await asyncio.wait({closing}, timeout=timeout)
        return bool(done)

    @property
    def idle(self) -> bool:
        """Nobody asked for ``idle_after``; for a queue that never answered (a broken trigger
        seen once, a port that is no broker), once no trigger is live on it (``live_for``)."""
        after = self.idle_after if self._last_success else min(self.idle_after, self._live_for)
        return not self._watchers and time.monotonic() - self._last_asked > after

    def due(self) -> None:
        """The next sample is due (:class:`~scaler.sample_clock.SampleClock`): start it, or
        stop if the queue is idle."""
        if self._stopping:
            return
        if self.idle:
            log.info("stopping the idle sampler of %s", self.source.describe())
            self._stopping = True
            self._task = asyncio.create_task(self._close(), name=self._task_name)
        else:
            self._task = asyncio.create_task(self._turn(), name=self._task_name)

    async def _turn(self) -> None:
        try:
            await self._sample_once()
        finally:
            if not self._stopping and not self._schedule_next():
                self._stopping = True
            if self._stopping:
                await self._close()
            else:  # a task done holds its coroutine until the next sample: not kept idle
                self._task = None

    def _reschedule(self) -> None:
        """Work the time of the next sample out again (a faster trigger, a stream started
        watching, a call waits for a fresh read); a sample under way does when it ends."""
        if self._stopping or self._on_stop is None:
            return
        if self._task is not None and not self._task.done():
            return
        self._schedule_next()

    def _schedule_next(self) -> bool:
        """Schedule the next sample: now for a call waiting on a read, else a pause after the
        last one started; False where working it out failed (a bug: logged, and the sampler
        stops, so that the next call starts a new one instead of answering stale forever)."""
        try:
            at = time.monotonic() if self._read_now else self._started_at + self._pause()
        except Exception:
            log.exception("scheduling the next sample of %s failed", self.source.describe())
            return False
        self._clock.schedule(self, at)
        return True

    async def _close(self, after: asyncio.Task[None] | None = None) -> None:
        """Stop: once ``after`` (the sample under way) has ended, if given; then tell the
        registry, forget the queue's metrics and release the connection. A turn cancelled
        before it started never runs its own ``finally``: this still closes."""
        if after is not None:
            await asyncio.wait({after})
        if self._closed:
            return
        self._closed = True
        self._clock.cancel(self)
        if self._on_stop is not None:
            self._on_stop(self)
        self._metrics.forget_queue(self.source)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(ADAPTER_CLOSE_TIMEOUT):
                await asyncio.shield(self._adapter.aclose())

    async def _sample_once(self) -> None:
        self._started_at = started = time.monotonic()
        self._sampling = True
        self._read_now = False  # this sample is the read a call asked for
        timeout = min(
            MAX_SAMPLE_TIMEOUT, max(MIN_SAMPLE_TIMEOUT, self.interval * STALE_AFTER_INTERVALS)
        )
        try:
            async with self._slots, asyncio.timeout(timeout):
                snapshot = await self._adapter.sample()
        except TimeoutError:
            self._failed(
                BrokerUnreachable(
                    self.source.broker, self.source.queue, detail=f"no answer within {timeout:g}s"
                )
            )
        except ScalerError as error:
            self._failed(error)
        except Exception as error:  # a bug must not kill the sampler; the RPCs will say so
            self._failed(
                Unavailable(
                    f"sampling {self.source.describe()} failed unexpectedly (a bug: the "
                    "scaler's log has the traceback)",
                    detail=repr(error),
                ),
                cause=error,
            )
        else:
            self._succeeded(snapshot, time.monotonic() - started)
        finally:
            self._sampling = False
        self._first.set()
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    def checkpoint(self, now: float) -> Entry | None:
        """This queue's arrival history for a checkpoint (None before two samples)."""
        if self._previous is None:
            return None
        return entry_of(self.arrivals, self._previous.counts_source, now)

    def _resume(self, first: QueueSnapshot) -> None:
        """Put the checkpointed history of the queue, if any, before the first sample's."""
        if self._checkpoints is None:
            return
        entry = self._checkpoints.lookup(source_key(self.source), time.time())
        points = entry.shifted(first) if entry is not None else None
        if entry is not None and points:
            self.arrivals.restore(points)
            log.info(
                "resumed the arrival history of %s from a checkpoint written %.0fs ago",
                self.source.describe(),
                time.time() - entry.written_at,
            )

    def _succeeded(self, snapshot: QueueSnapshot, seconds: float) -> None:
        self._history.append(snapshot, window=self.window, interval=self.interval)
        if self._previous is None:
            self._resume(snapshot)
        self._last_success = now = time.monotonic()
        self.last_error = None
        self.failures = 0
        self._failure_log.succeeded()
        self._plan(snapshot, now)
        self._metrics.record_sample(
            self.source, snapshot, seconds, self.arrivals, interval=self._planned
        )

    def _plan(self, snapshot: QueueSnapshot, now: float) -> None:
        """The urgency and the next interval after a sample."""
        previous, self._previous = self._previous, snapshot
        age = oldest_age(snapshot, self.arrivals).value
        target_age = self._demands.target_age(now)
        self.urgency = urgency(
            watched=False,  # read live: a stream may start or end before the next sample
            age=age,
            target_age=target_age,
            asked_after_pause=False,  # likewise
            moved=changed(previous, snapshot),
            busy=bool(snapshot.depth) or bool(snapshot.in_flight),
        )
        until_near = (
            NEAR_TARGET * target_age - age
            if age is not None and target_age is not None and self.urgency < Urgency.NEAR_TARGET
            else None
        )
        self._relaxed = next_interval(
            self._relaxed,
            self.urgency,
            self._fast(now),
            self._slow(now),
            self._demands.window(now),
            flowing=flowing(previous, snapshot),
            until_near=until_near,
        )
        self._planned = self._actual(now)
        self._jitter = (
            1.0 - _jitter_source.uniform(0.0, RELAXED_JITTER) if not self.urgency.fast else 1.0
        )
        if self._pacer is not None:
            self._pacer.sampled()

    def _failed(self, error: ScalerError, *, cause: Exception | None = None) -> None:
        self._failure_log.failed(cause or error, time.monotonic())
        # kept for its message only: not the failed sample's frames (its traceback, and the
        # exception it was raised from), which would keep that sample's objects alive
        error.__traceback__ = error.__context__ = error.__cause__ = None
        self.last_error = error
        self.failures += 1
        self._jitter = 1.0 - _jitter_source.uniform(0.0, BACKOFF_JITTER)
        self._metrics.record_sample_error(self.source, type(error).__name__)


class SamplerRegistry:
    """Starts one sampler per distinct queue source and forgets it when it stops.

    Its adapters are opened on ``connections``, which whoever made them (the server, ``probe``)
    closes after the registry; without them, the registry makes its own and closes them in
    :meth:`aclose`."""

    def __init__(
        self,
        open_adapter: AdapterFactory,
        metrics: Metrics,
        *,
        idle_after: float = IDLE_AFTER,
        live_for: float = LIVE_FOR,
        max_history: int = MAX_HISTORY,
        report_every: float = REPORT_EVERY,
        limits: Limits | None = None,
        connections: Connections | None = None,
        slow_interval: float | None = None,
        broker_budget: float | None = None,
        checkpoints: Checkpoints | None = None,
    ) -> None:
        """``slow_interval``: the slow bound of every queue's interval (None: queues are read at
        their fast interval always); ``broker_budget``: commands per second per broker URL
        (None: no budget); ``checkpoints``: where the arrival histories are checkpointed and
        resumed from (None: nowhere)."""
        if max_history < 2:
            raise ValueError(f"max_history must be at least 2 snapshots, not {max_history}")
        self._open_adapter = open_adapter
        self._owns_connections = connections is None
        self.connections = Connections() if connections is None else connections
        self._metrics = metrics
        self._idle_after = idle_after
        #: a trigger not asked about for this long (or 3 of its intervals) no longer sets the pace
        self.live_for = live_for
        self._max_history = max_history
        self._report_every = report_every
        self._closed = False
        self._limits = limits or Limits()
        self._samplers: dict[QueueSource, Sampler] = {}
        self._clock = SampleClock()
        #: samplers per broker URL
        self._per_broker: collections.Counter[str] = collections.Counter()
        self.slow_interval = slow_interval
        self.broker_budget = broker_budget
        #: per broker URL, with a budget
        self._pacers: dict[str, BrokerPacer] = {}
        self.checkpoints = checkpoints
        self._writer: asyncio.Task[None] | None = None
        #: per broker URL: the places for its samples under way
        self._slots: dict[str, asyncio.Semaphore] = {}

    def __len__(self) -> int:
        return len(self._samplers)

    def get(self, spec: TriggerSpec, known: Sampler | None = None) -> Sampler:
        """The sampler of ``spec``'s queue, started if needed, noted as asked; ``known``, the one
        an earlier call got for the same spec, saves the lookup while it still samples."""
        if known is not None and known.registered:
            known.ask(spec.demand)
            return known
        sampler = self._samplers.get(spec.source)
        if sampler is None:
            if self._closed:
                raise Unavailable("the scaler is shutting down")
            self._check_room(spec.source)
            pacer = self._pacer(spec.source.url)
            sampler = Sampler(
                spec.source,
                self._open_adapter(spec.source, self.connections),
                self._metrics,
                spec.demand,
                clock=self._clock,
                idle_after=self._idle_after,
                live_for=self.live_for,
                max_history=self._max_history,
                report_every=self._report_every,
                slow_interval=self.slow_interval,
                pacer=pacer,
                checkpoints=self.checkpoints,
                slots=self._slots.setdefault(
                    spec.source.url, asyncio.Semaphore(MAX_SAMPLES_IN_FLIGHT)
                ),
            )
            self._samplers[spec.source] = sampler
            self._per_broker[spec.source.url] += 1
            if pacer is not None:
                pacer.join(sampler)
            if self.checkpoints is not None and self._writer is None:
                self._writer = asyncio.create_task(self._write_checkpoints(), name="checkpoints")
            sampler.start(self._forget)
            log.info("started sampling %s every %gs", spec.source.describe(), spec.sample_interval)
        sampler.ask(spec.demand)
        return sampler

    def _pacer(self, url: str) -> BrokerPacer | None:
        if self.broker_budget is None:
            return None
        pacer = self._pacers.get(url)
        if pacer is None:
            pacer = self._pacers[url] = BrokerPacer(
                self.broker_budget, self.connections.traffic(url)
            )
        return pacer

    def _check_room(self, source: QueueSource) -> None:
        """Refuse a new queue past the server's limits; the queues sampled already go on."""
        if len(self._samplers) >= self._limits.max_queues:
            raise ResourceExhausted(
                f"this scaler samples {len(self._samplers)} queues, its limit (--max-queues); "
                f"{source.describe()} is not sampled until one stops (10 minutes after KEDA last "
                "asks about it) or the operator raises the limit"
            )
        on_broker = self._per_broker[source.url]
        if on_broker >= self._limits.max_queues_per_broker:
            raise ResourceExhausted(
                f"this scaler samples {on_broker} queues on the broker of {source.describe()}, "
                "its limit per broker (--max-queues-per-broker); the queue is not sampled until "
                "one of them stops or the operator raises the limit"
            )

    def _forget(self, sampler: Sampler) -> None:
        sampler.registered = False
        if self._samplers.get(sampler.source) is sampler:
            del self._samplers[sampler.source]
            url = sampler.source.url
            self._per_broker[url] -= 1
            if url in self._pacers:
                self._pacers[url].leave(sampler)
            if not self._per_broker[url]:
                del self._per_broker[url]
                self._pacers.pop(url, None)
                self._slots.pop(url, None)

    def checkpoint_entries(self) -> dict[str, Entry]:
        now = time.time()
        entries = {source_key(s.source): s.checkpoint(now) for s in self._samplers.values()}
        return {key: entry for key, entry in entries.items() if entry is not None}

    async def write_checkpoint(self) -> None:
        """Write this server's checkpoint now (off the event loop: it may be megabytes)."""
        if self.checkpoints is not None:
            await asyncio.to_thread(self.checkpoints.write, self.checkpoint_entries())

    async def _write_checkpoints(self) -> None:
        while not self._closed:
            await asyncio.sleep(WRITE_EVERY)
            await self.write_checkpoint()

    async def aclose(self, timeout: float = 5.0) -> None:
        """Stop every sampler, within about ``timeout`` seconds in all (the checkpoint, if
        any, written first)."""
        self._closed = True
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                async with asyncio.timeout(timeout / 2):
                    await self.write_checkpoint()
        samplers = list(self._samplers.values())
        ended = await asyncio.gather(*(s.aclose(timeout) for s in samplers))
        self._clock.close()
        if self._owns_connections:
            await self.connections.aclose()
        if not all(ended):
            log.warning(
                "%d of %d samplers did not stop within %gs", ended.count(False), len(ended), timeout
            )
