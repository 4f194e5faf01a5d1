"""One timer for every sampler of a registry: it starts each queue's next sample when due.

A sampler waiting for its next sample holds nothing but its place here (a tuple in a heap). A
task per sampler, each asleep in ``asyncio.timeout`` on an event, held about fifteen objects per
queue (its coroutine frames, the timer, its handle and context, the future and the event), made
anew at every pause; at 10,000 queues they were half of what each of CPython's full collections
walked, pauses that held the event loop for 10-20 ms about once a second.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import math
import time
from typing import Protocol

log = logging.getLogger(__name__)

#: samples due within this much of the timer's firing start with it (the loop's timers may
#: fire a little early; a sample a millisecond early is as good as on time)
EARLY = 0.001
#: the heap is rebuilt from its live places once it holds this many times more entries than
#: there are samplers waiting (each reschedule leaves the earlier entry behind)
STALE_SHARE = 2


class Due(Protocol):
    def due(self) -> None:
        """The sampler's next sample is due: start it (without waiting for it)."""


class SampleClock:
    """Calls each scheduled sampler's :meth:`Due.due` at the time it was last scheduled for.

    A sampler has at most one place: scheduling it again replaces its earlier place, and
    :meth:`cancel` removes it. Times are ``time.monotonic()`` seconds."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Due]] = []
        #: each scheduled sampler's place: the number of its entry in the heap
        self._places: dict[Due, int] = {}
        self._numbers = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf

    def __len__(self) -> int:
        return len(self._places)

    def schedule(self, sampler: Due, at: float) -> None:
        """``sampler.due()`` at ``at`` (or as soon as possible, if that has passed), instead of
        when it was scheduled for before."""
        number = next(self._numbers)
        self._places[sampler] = number
        heapq.heappush(self._heap, (at, number, sampler))
        if len(self._heap) > STALE_SHARE * len(self._places) + 64:
            self._compact()
        if at < self._timer_at:
            self._arm(at)

    def cancel(self, sampler: Due) -> None:
        """Never call ``sampler.due()`` for its current place."""
        self._places.pop(sampler, None)

    def close(self) -> None:
        """Drop every place and the timer."""
        self._places.clear()
        self._heap.clear()
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._timer_at = None, math.inf

    def _current(self, entry: tuple[float, int, Due]) -> bool:
        """Whether ``entry`` is its sampler's place still (not rescheduled nor cancelled)."""
        return self._places.get(entry[2]) == entry[1]

    def _compact(self) -> None:
        self._heap = [entry for entry in self._heap if self._current(entry)]
        heapq.heapify(self._heap)

    def _arm(self, at: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = at
        delay = max(0.0, at - time.monotonic())
        self._timer = asyncio.get_running_loop().call_later(delay, self._fire)

    def _fire(self) -> None:
        self._timer, self._timer_at = None, math.inf
        now = time.monotonic() + EARLY
        heap = self._heap
        try:
            while heap and heap[0][0] <= now:
                entry = heapq.heappop(heap)
                if not self._current(entry):
                    continue
                sampler = entry[2]
                del self._places[sampler]
                try:
                    sampler.due()
                except Exception:  # a bug in one sampler must not stop the others' samples
                    log.exception("starting a sample failed")
        finally:
            while heap and not self._current(heap[0]):
                heapq.heappop(heap)
            if heap and heap[0][0] < self._timer_at:
                self._arm(heap[0][0])
