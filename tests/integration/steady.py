"""Steady producers and consumers for the list marker tests, and the checks of their counts.

Each producer or consumer runs in its own thread, so the job libraries' own blocking clients can
drive a queue while the test samples it on the event loop.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

from brokers.base import QueueAdapter, QueueSnapshot

#: a sample every 0.5 s: at least 8 (~4 s), and on until the traffic below ran (at most ~12 s on
#: a busy machine)
MIN_SAMPLES, MAX_SAMPLES = 8, 24
#: the jobs produced and taken for a meaningful check
MIN_PRODUCED, MIN_TAKEN = 150, 100


class Steady:
    """Calls ``step`` ``rate`` times a second in a thread; ``done`` counts the calls that did
    something (``step`` returned True: a job sent, or a job taken)."""

    def __init__(self, rate: float, step: Callable[[], bool]) -> None:
        self.rate = rate
        self.step = step
        self.done = 0
        self._error: Exception | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Steady:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        assert not self._thread.is_alive(), "the traffic thread did not stop"
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        start, calls = time.monotonic(), 0
        try:
            while not self._stop.is_set():
                if self.step():
                    self.done += 1
                calls += 1
                self._stop.wait(max(0.0, start + calls / self.rate - time.monotonic()))
        except Exception as error:  # raised again by stop(), in the test
            self._error = error


async def sample_steady_traffic(
    adapter: QueueAdapter, producer: Steady, consumer: Steady
) -> tuple[QueueSnapshot, list[QueueSnapshot], QueueSnapshot]:
    """The first sample, those every 0.5 s while both run, and the last after both stopped."""
    first = await adapter.sample()
    producer.start()
    consumer.start()
    snapshots: list[QueueSnapshot] = []
    while len(snapshots) < MAX_SAMPLES:
        await asyncio.sleep(0.5)
        snapshots.append(await adapter.sample())
        ran = producer.done >= MIN_PRODUCED and consumer.done >= MIN_TAKEN
        if ran and len(snapshots) >= MIN_SAMPLES:
            break
    producer.stop()
    consumer.stop()
    return first, snapshots, await adapter.sample()


def assert_counts_match(
    first: QueueSnapshot,
    snapshots: list[QueueSnapshot],
    last: QueueSnapshot,
    produced: int,
    taken: int,
) -> None:
    """The marker counts against what the traffic did: every interval exact, within 15% (and,
    with every interval exact, equal)."""
    seen = [(s.depth, s.arrivals_total, s.completions_total, s.counts_exact) for s in snapshots]
    assert all(s.counts_exact for s in [*snapshots, last]), seen
    assert all(s.depth for s in snapshots)  # the backlog never emptied
    arrivals = last.arrivals_total - first.arrivals_total  # type: ignore[operator]
    completions = last.completions_total - first.completions_total  # type: ignore[operator]
    assert produced >= MIN_PRODUCED and taken >= MIN_TAKEN, (produced, taken)
    assert abs(arrivals - produced) <= 0.15 * produced
    assert abs(completions - taken) <= 0.15 * taken
    assert (arrivals, completions) == (produced, taken)
    assert last.counts_source == "list-marker"
