"""One sampler per queue, shared by every trigger that names it.

A sampler reads its queue on its own schedule and keeps a short history of snapshots; RPCs
read that history and never wait on the broker once the queue is warm. A sampler nobody asked
about for a long while stops and releases its connection.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Callable, Sequence

from brokers.base import QueueAdapter, QueueSnapshot
from scaler.arrival_history import ArrivalHistory
from scaler.errors import (
    BrokerUnreachable,
    QueueMisconfigured,
    SampleStale,
    ScalerError,
    Unavailable,
)
from scaler.metrics import Metrics
from scaler.spec import QueueSource, TriggerSpec

log = logging.getLogger(__name__)

#: a sampler nobody asked about for this long stops
IDLE_AFTER = 600.0
#: a sample older than this many intervals is not answered from
STALE_AFTER_INTERVALS = 3
#: while a StreamIsActive watches a queue, sample at least this often
WATCHED_INTERVAL = 0.25
#: the shortest bound on one broker round trip
MIN_SAMPLE_TIMEOUT = 2.0

AdapterFactory = Callable[[QueueSource], QueueAdapter]


class Sampler:
    """Samples one queue every ``interval`` seconds into a bounded history."""

    def __init__(
        self,
        source: QueueSource,
        adapter: QueueAdapter,
        metrics: Metrics,
        *,
        interval: float,
        window: float,
        idle_after: float = IDLE_AFTER,
    ) -> None:
        self.source = source
        self.interval = interval
        self.window = window
        self.idle_after = idle_after
        self.last_error: ScalerError | None = None
        self._adapter = adapter
        self._metrics = metrics
        self._history: collections.deque[QueueSnapshot] = collections.deque()
        #: the longer history of arrivals that estimates ages where jobs carry no timestamp
        self.arrivals = ArrivalHistory()
        self._last_success = 0.0  # monotonic time of the newest snapshot
        self._last_asked = time.monotonic()
        self._watchers = 0
        self._first = asyncio.Event()
        self._changed = asyncio.Event()
        #: set when a stream starts watching, so that the loop does not sleep out a long interval
        self._watch_started = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # -- what triggers do ------------------------------------------------------------------

    def ask(self, spec: TriggerSpec) -> None:
        """Note a request: keeps the sampler alive and honours the spec's interval and window."""
        self._last_asked = time.monotonic()
        self.interval = min(self.interval, spec.sample_interval)
        self.window = max(self.window, spec.rate_window)

    async def history(self, first_timeout: float) -> Sequence[QueueSnapshot]:
        """The recent snapshots, oldest first; raises Unavailable when there is no fresh one."""
        if not self._first.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._first.wait(), first_timeout)
        if isinstance(self.last_error, QueueMisconfigured):  # not a blip: the newest sample's
            raise QueueMisconfigured(str(self.last_error))  # answer, whatever came before
        if not self._history:
            detail = f": {self.last_error}" if self.last_error else ""
            raise SampleStale(f"no sample of {self.source.describe()} yet{detail}")
        age = time.monotonic() - self._last_success
        if age > STALE_AFTER_INTERVALS * self.interval:
            detail = f"; last error: {self.last_error}" if self.last_error else ""
            raise SampleStale(
                f"the newest sample of {self.source.describe()} is {age:.1f}s old "
                f"(more than {STALE_AFTER_INTERVALS} sample intervals){detail}"
            )
        return self._history  # read it before the next await: the sampler appends to it

    async def wait_for_sample(self, timeout: float) -> None:
        """Return after the next sample (or error), or after ``timeout``."""
        changed = self._changed
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(changed.wait(), timeout)

    @contextlib.contextmanager
    def watched(self) -> collections.abc.Iterator[None]:
        """While a stream watches, sample at least every ``WATCHED_INTERVAL`` seconds."""
        self._watchers += 1
        self._watch_started.set()
        try:
            yield
        finally:
            self._watchers -= 1
            self._last_asked = time.monotonic()

    # -- the loop --------------------------------------------------------------------------

    def start(self, on_stop: Callable[[Sampler], None]) -> None:
        self._task = asyncio.create_task(self._run(on_stop), name=f"sampler {self.source.queue}")

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    @property
    def idle(self) -> bool:
        return not self._watchers and time.monotonic() - self._last_asked > self.idle_after

    async def _run(self, on_stop: Callable[[Sampler], None]) -> None:
        try:
            while not self.idle:
                started = time.monotonic()
                await self._sample_once()
                interval = min(self.interval, WATCHED_INTERVAL) if self._watchers else self.interval
                with contextlib.suppress(TimeoutError):
                    pause = max(0.0, started + interval - time.monotonic())
                    await asyncio.wait_for(self._watch_started.wait(), pause)
                self._watch_started.clear()
            log.info("stopping the idle sampler of %s", self.source.describe())
        finally:
            on_stop(self)
            self._metrics.forget_queue(self.source)
            await asyncio.shield(self._adapter.aclose())

    async def _sample_once(self) -> None:
        started = time.monotonic()
        timeout = max(MIN_SAMPLE_TIMEOUT, self.interval * STALE_AFTER_INTERVALS)
        try:
            snapshot = await asyncio.wait_for(self._adapter.sample(), timeout)
        except TimeoutError:
            self._failed(
                BrokerUnreachable(
                    self.source.broker, self.source.queue, detail=f"no answer within {timeout:g}s"
                )
            )
        except ScalerError as error:
            self._failed(error)
        except Exception as error:  # a bug must not kill the sampler; the RPCs will say so
            log.exception("sampling %s failed unexpectedly", self.source.describe())
            self._failed(
                Unavailable(
                    f"sampling {self.source.describe()} failed unexpectedly (a bug: the "
                    "scaler's log has the traceback)",
                    detail=repr(error),
                )
            )
        else:
            self._history.append(snapshot)
            self._trim()
            if snapshot.arrivals_total is not None:
                self.arrivals.add(snapshot.counted_at, snapshot.arrivals_total)
            self._last_success = time.monotonic()
            self.last_error = None
            self._first.set()
            seconds = time.monotonic() - started
            self._metrics.record_sample(self.source, snapshot, seconds, self.arrivals)
        self._changed.set()
        self._changed = asyncio.Event()

    def _failed(self, error: ScalerError) -> None:
        if self.last_error is None or self.last_error.logged != error.logged:
            log.warning("sampling %s: %s", self.source.describe(), error.logged)
        self.last_error = error
        self._metrics.record_sample_error(self.source, type(error).__name__)

    def _trim(self) -> None:
        newest = self._history[-1].observed_at
        keep_from = newest - self.window - 2 * self.interval
        while len(self._history) > 2 and self._history[1].observed_at <= keep_from:
            self._history.popleft()


class SamplerRegistry:
    """Starts one sampler per distinct queue source and forgets it when it stops."""

    def __init__(
        self, open_adapter: AdapterFactory, metrics: Metrics, *, idle_after: float = IDLE_AFTER
    ) -> None:
        self._open_adapter = open_adapter
        self._metrics = metrics
        self._idle_after = idle_after
        self._samplers: dict[QueueSource, Sampler] = {}

    def __len__(self) -> int:
        return len(self._samplers)

    def get(self, spec: TriggerSpec) -> Sampler:
        """The sampler of ``spec``'s queue, started if needed, noted as asked."""
        sampler = self._samplers.get(spec.source)
        if sampler is None:
            sampler = Sampler(
                spec.source,
                self._open_adapter(spec.source),
                self._metrics,
                interval=spec.sample_interval,
                window=spec.rate_window,
                idle_after=self._idle_after,
            )
            self._samplers[spec.source] = sampler
            sampler.start(self._forget)
            log.info("started sampling %s every %gs", spec.source.describe(), spec.sample_interval)
        sampler.ask(spec)
        return sampler

    def _forget(self, sampler: Sampler) -> None:
        if self._samplers.get(sampler.source) is sampler:
            del self._samplers[sampler.source]

    async def aclose(self) -> None:
        await asyncio.gather(*(s.aclose() for s in list(self._samplers.values())))
