"""One probe per connection profile, shared by every trigger that names it, each refreshed on
its own interval; the RPCs read its newest figure and never wait on the dependency once warm."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping

from scaler.ceilings import http, mysql, pgbouncer, postgres, redis
from scaler.ceilings.headroom import Headroom, ProbeFailed, ProbeFigure
from scaler.metrics import Metrics
from scaler.trigger_spec import TriggerSpec

log = logging.getLogger(__name__)

#: how often a probe reads its dependency (serve --probe-interval)
REFRESH_INTERVAL = 15.0
#: the shortest --probe-interval: each reading opens a connection to the dependency
MIN_PROBE_INTERVAL = 1.0
#: the longest one reading may take
PROBE_TIMEOUT = 5.0
#: a probe nobody asked about for this long stops
IDLE_AFTER = 600.0
#: how long the first request for a probe waits for its first reading
FIRST_READING_TIMEOUT = 1.0

Reader = Callable[[str, float], Awaitable[Headroom]]
READERS: Mapping[str, Reader] = {
    "postgres": postgres.read,
    "pgbouncer": pgbouncer.read,
    "mysql": mysql.read,
    "redis": redis.read,
    "http": http.read,
}


class Probe:
    """Reads one dependency every ``interval`` seconds and keeps the newest good reading."""

    def __init__(
        self,
        name: str,
        kind: str,
        url: str,
        reader: Reader,
        metrics: Metrics,
        *,
        interval: float,
        idle_after: float,
    ) -> None:
        self.name = name
        self.kind = kind
        self._url = url
        self._reader = reader
        self._metrics = metrics
        self.interval = interval
        self.idle_after = idle_after
        self.reading: Headroom | None = None
        #: monotonic time ``reading`` was asked for (what it shows is as of then, or later)
        self.read_at: float | None = None
        #: the newest attempt's error; None when it succeeded
        self.error: str | None = None
        self._last_asked = time.monotonic()
        self._first = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def figure(self, first_timeout: float) -> ProbeFigure:
        """The newest reading, its age and the error since; waits for a first attempt."""
        self._last_asked = time.monotonic()
        if not self._first.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._first.wait(), first_timeout)
        age = None if self.read_at is None else time.monotonic() - self.read_at
        return ProbeFigure(self.kind, self.reading, age, self.error)

    def start(self, on_stop: Callable[[Probe], None]) -> None:
        self._task = asyncio.create_task(self._run(on_stop), name=f"probe {self.name}")

    async def aclose(self, timeout: float) -> bool:
        """Stop reading, within ``timeout`` seconds whatever the reading waits on (a driver in a
        thread); False when it did not end in that time (it is then left cancelled)."""
        task = self._task
        if task is None or task.done():
            return True
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=timeout)
        return bool(done)

    async def _run(self, on_stop: Callable[[Probe], None]) -> None:
        try:
            while time.monotonic() - self._last_asked <= self.idle_after:
                started = time.monotonic()
                await self.read_once()
                await asyncio.sleep(max(0.0, started + self.interval - time.monotonic()))
            log.info("stopping the idle probe %s", self.name)
        finally:
            on_stop(self)
            self._metrics.forget_probe(self.name, self.kind)

    async def read_once(self) -> None:
        started = time.monotonic()
        timeout = PROBE_TIMEOUT
        try:
            reading = await asyncio.wait_for(self._reader(self._url, timeout), timeout)
        except TimeoutError:
            self._failed(f"{self.kind}: no answer within {timeout:g}s")
        except ProbeFailed as error:
            self._failed(str(error))
        except Exception as error:  # a bug must not kill the probe; the reasons will say so
            log.exception("probe %s failed unexpectedly", self.name)
            self._failed(f"{self.kind}: {error!r}")
        else:
            if self.error is not None:
                log.info("probe %s reads again: %s", self.name, reading.detail)
            self.reading, self.read_at, self.error = reading, started, None
            self._metrics.record_probe(self.name, self.kind, reading, self.age)
        self._first.set()

    def age(self) -> float | None:
        """Seconds since the newest good reading (for the metrics, read at scrape time)."""
        return None if self.read_at is None else time.monotonic() - self.read_at

    def _failed(self, error: str) -> None:
        if self.error != error:
            log.warning("probe %s: %s", self.name, error)
        self.error = error
        self._metrics.record_probe_error(self.name, self.kind)


class ProbeRegistry:
    """Starts one probe per connection profile that triggers name, and forgets idle ones."""

    def __init__(
        self,
        metrics: Metrics,
        *,
        interval: float = REFRESH_INTERVAL,
        idle_after: float = IDLE_AFTER,
        readers: Mapping[str, Reader] = READERS,
    ) -> None:
        self._metrics = metrics
        self.interval = interval
        self._idle_after = idle_after
        self._readers = readers
        self._probes: dict[tuple[str, str], Probe] = {}

    def __len__(self) -> int:
        return len(self._probes)

    async def figures(
        self, spec: TriggerSpec, first_timeout: float = FIRST_READING_TIMEOUT
    ) -> dict[str, ProbeFigure]:
        """The figure of every probe ``spec`` names, by profile; starts the probes not running."""
        probes = [self._probe(dep.probe, dep.probe_kind, dep.probe_url)
                  for dep in spec.dependencies
                  if dep.probe is not None and dep.probe_kind is not None and dep.probe_url is not None]  # fmt: skip
        figures = await asyncio.gather(*(probe.figure(first_timeout) for probe in probes))
        return {probe.name: figure for probe, figure in zip(probes, figures, strict=True)}

    def _probe(self, name: str, kind: str, url: str) -> Probe:
        probe = self._probes.get((name, url))
        if probe is None:
            probe = Probe(
                name,
                kind,
                url,
                self._readers[kind],
                self._metrics,
                interval=self.interval,
                idle_after=self._idle_after,
            )
            self._probes[(name, url)] = probe
            probe.start(self._forget)
            log.info("started the %s probe %s, every %gs", kind, name, self.interval)
        return probe

    def _forget(self, probe: Probe) -> None:
        for key, known in list(self._probes.items()):
            if known is probe:
                del self._probes[key]

    async def aclose(self, timeout: float = PROBE_TIMEOUT) -> None:
        """Stop every probe, within about ``timeout`` seconds in all."""
        probes = list(self._probes.values())
        ended = await asyncio.gather(*(probe.aclose(timeout) for probe in probes))
        if not all(ended):
            log.warning(
                "%d of %d probes did not stop within %gs", ended.count(False), len(ended), timeout
            )
