"""List marker tracking: arrivals and jobs taken on a plain Redis list, between two samples.

Pure logic; the adapter runs the Redis commands. At each sample the adapter reads the list's
length, the element at the push end (the next marker) and, with ``LPOS``, where the previous
marker is now. Every element between the push end and the marker arrived since the previous
sample; the rest of the change in length is what consumers took. When the marker is gone (taken,
or beyond ``MAXLEN``), or the list was empty before, only lower bounds are known.

``LPOS`` runs with ``MAXLEN`` of about :data:`MAXLEN_GROWTH` times the arrivals of the previous
interval (at least :data:`MIN_MAXLEN`), so its cost follows arrivals per interval, not the
length of the queue.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from brokers.base import End

MIN_MAXLEN = 1000
MAXLEN_GROWTH = 4


@dataclass(frozen=True, slots=True)
class MarkerQuery:
    """Arguments for ``LPOS key marker RANK rank MAXLEN maxlen``.

    ``rank`` is 1 to search from the head, -1 from the tail: always from the push end.
    """

    marker: bytes
    rank: int
    maxlen: int

    def command(self, key: str) -> tuple[str, str, bytes, str, int, str, int, str, int]:
        """``LPOS`` for the two nearest copies: a second copy makes the marker ambiguous."""
        return ("LPOS", key, self.marker, "RANK", self.rank, "COUNT", 2, "MAXLEN", self.maxlen)


@dataclass(frozen=True, slots=True)
class MarkerCounts:
    """Running totals; ``exact`` is False when this interval's additions are lower bounds."""

    arrivals_total: int
    completions_total: int
    exact: bool


class ListMarker:
    """Tracks one list whose producers push at ``push_end`` and consumers take at the other."""

    def __init__(self, push_end: End) -> None:
        self.push_end = push_end
        self.arrivals_total = 0
        self.completions_total = 0
        self._marker: bytes | None = None
        self._length: int | None = None
        self._maxlen = MIN_MAXLEN
        #: whether the list has held anything since tracking began
        self.ever_used = False

    def query(self) -> MarkerQuery | None:
        """What to ask ``LPOS`` this sample; None when there is no marker to look for."""
        if self._marker is None:
            return None
        return MarkerQuery(self._marker, 1 if self.push_end is End.HEAD else -1, self._maxlen)

    def observe(
        self, length: int, found: Sequence[int] | None, newest: bytes | None
    ) -> MarkerCounts:
        """Account for one sample.

        ``length`` is ``LLEN``; ``found`` is ``LPOS``'s answer to :meth:`MarkerQuery.command`
        (indexes from the head, nearest the push end first; None when not asked); ``newest`` is
        the element at the push end (None when the list is empty, or when that element is too
        large to look for). The first sample only sets the marker. Two copies of the marker (identical payloads) make the count a lower bound:
        the nearer copy may be a newer job.
        """
        exact = True
        if self._length is not None:
            marker_index = found[0] if found else None
            arrivals, exact = self._arrivals(self._length, length, marker_index)
            if found is not None and len(found) > 1:
                exact = False
            taken = self._length + arrivals - length
            if taken < 0:  # jobs came back at the oldest end (a requeue): not counted as taken
                taken, exact = 0, False
            self.arrivals_total += arrivals
            self.completions_total += taken
            self._maxlen = max(MIN_MAXLEN, MAXLEN_GROWTH * arrivals)
        self._marker = newest if length > 0 else None
        self._length = length
        self.ever_used = self.ever_used or length > 0
        return MarkerCounts(self.arrivals_total, self.completions_total, exact)

    def _arrivals(self, previous: int, length: int, marker_index: int | None) -> tuple[int, bool]:
        """Jobs pushed since the previous sample, and whether that count is exact."""
        if self._marker is None:  # the list was empty (everything in it now is new) or had no
            return max(0, length - previous), False  # marker: at least its growth is new
        if marker_index is None:  # taken (so all is new) or beyond MAXLEN (so MAXLEN are new)
            return min(length, self._maxlen), False
        moved = marker_index if self.push_end is End.HEAD else length - 1 - marker_index
        return max(0, moved), True
