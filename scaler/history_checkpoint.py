"""A compact checkpoint of the queues' arrival histories, so that a restarted scaler, or a
replica that takes over, estimates ages at once instead of reporting lower bounds until its own
history covers the waiting jobs (for a queue at its target, about ``targetAge``).

``serve --history-checkpoint DIR``: every :data:`WRITE_EVERY` seconds (and at shutdown) each
replica writes ``DIR/<its host name>.json`` (a temporary file renamed over it, so a reader never
sees half a file): per queue, at most :data:`POINTS` points of its arrival history, its newest
arrival count and rate and where the counts come from. A queue's sampler, on its first sample,
looks the queue up in every file of the directory (read at most every :data:`WRITE_EVERY`
seconds) and takes the newest entry written within :data:`MAX_AGE`: on an ``emptyDir`` a
restarted container resumes its own histories, on a volume the replicas share each resumes the
others'. Queues are named by a hash of their source (the URL included), never by the URL.

The counts a checkpoint holds continue the new ones as follows. A broker's own counters
(RabbitMQ's publish totals, a stream's ``entries-added``) go on across a restart of the scaler:
the points are taken as they are (unless the counter went down: a reset, and the checkpoint is
ignored). The adapters' own counts (the list marker, arq's score window, BullMQ's events) start
again at the first sample: the arrivals between the checkpoint and that sample are taken to have
come at the checkpoint's recent rate, and the old points are shifted by that, so estimates
resumed so are estimates (off by the arrivals the gap really had, against the rate assumed).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brokers.base import QueueSnapshot, QueueSource
from scaler.arrival_history import ArrivalHistory

log = logging.getLogger(__name__)

#: how often a replica writes its checkpoint, and how often a reader reads the directory again
WRITE_EVERY = 15.0
#: an entry older than this is not resumed from (the history it holds no longer reaches now)
MAX_AGE = 900.0
#: points kept per queue
POINTS = 48
#: the counts sources that are a broker's own counters, continuous across a restart
BROKER_COUNTERS = frozenset({"management-totals", "stream-counters"})
VERSION = 1


def source_key(source: QueueSource) -> str:
    """The name of a queue in a checkpoint: a hash of its source (which holds the URL)."""
    text = repr((source.broker, source.url, source.queue, source.format, source.options))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class Entry:
    """One queue's arrival history, as checkpointed."""

    written_at: float
    counts_source: str
    total: int
    rate: float
    points: tuple[tuple[float, int], ...]

    def shifted(self, first: QueueSnapshot) -> list[tuple[float, int]] | None:
        """The points in the count of ``first`` (the first sample after the restart), or None
        when they cannot continue it (a broker counter that went down)."""
        if first.arrivals_total is None or not self.points:
            return None
        if self.counts_source in BROKER_COUNTERS:
            return list(self.points) if first.arrivals_total >= self.total else None
        gap = max(0.0, first.counted_at - self.points[-1][0])
        offset = first.arrivals_total - (self.total + round(self.rate * gap))
        return [(t, n + offset) for t, n in self.points]


def entry_of(history: ArrivalHistory, counts_source: str, now: float) -> Entry | None:
    points = history.points(POINTS)
    if len(points) < 2:
        return None
    return Entry(now, counts_source, points[-1][1], history.recent_rate(), tuple(points))


class Checkpoints:
    """The checkpoint directory: this replica's file, and everyone's entries to resume from."""

    def __init__(self, directory: Path, *, name: str | None = None) -> None:
        self.directory = directory
        self.path = directory / f"{name or socket.gethostname()}.json"
        self._read_at = -math.inf
        self._entries: dict[str, Entry] = {}

    def write(self, entries: dict[str, Entry]) -> None:
        document = {
            "version": VERSION,
            "queues": {
                key: [e.written_at, e.counts_source, e.total, e.rate, [list(p) for p in e.points]]
                for key, e in entries.items()
            },
        }
        temporary = self.path.with_suffix(".tmp")
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            temporary.write_text(json.dumps(document, separators=(",", ":")))
            os.replace(temporary, self.path)
        except OSError as error:
            log.warning("could not write the history checkpoint %s: %s", self.path, error)

    def lookup(self, key: str, now: float) -> Entry | None:
        """The newest entry for ``key`` written within :data:`MAX_AGE` of ``now`` (wall clock),
        in any replica's file."""
        if time.monotonic() - self._read_at >= WRITE_EVERY:
            self._read_at = time.monotonic()
            self._entries = self._read_all()
        entry = self._entries.get(key)
        return entry if entry is not None and now - entry.written_at <= MAX_AGE else None

    def _read_all(self) -> dict[str, Entry]:
        newest: dict[str, Entry] = {}
        with contextlib.suppress(OSError):
            for path in sorted(self.directory.glob("*.json")):
                for key, entry in _read_file(path).items():
                    if key not in newest or entry.written_at > newest[key].written_at:
                        newest[key] = entry
        return newest


def _read_file(path: Path) -> dict[str, Entry]:
    """A checkpoint file's entries; a file that cannot be read or parsed has none."""
    try:
        document: Any = json.loads(path.read_text())
        if document.get("version") != VERSION:
            return {}
        return {
            key: Entry(
                float(written),
                str(source),
                int(total),
                float(rate),
                tuple((float(t), int(n)) for t, n in points),
            )
            for key, (written, source, total, rate, points) in document["queues"].items()
        }
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as error:
        log.warning("ignoring the history checkpoint %s: %s", path, error)
        return {}
