"""Both ends of a Redis list, read without moving a payload that is too large or unchanged.

One read-only script (touching only the list's key, so cluster-safe; sent by its hash, see
``RedisConnection.execute``) runs ``LLEN``,
``LPOS`` of the list marker (``brokers.list_marker``) and ``LINDEX`` at both ends at one
instant. Inside Redis it measures each end's element and hashes it (``redis.sha1hex``), and it
sends an element back only when it is at most :data:`~brokers.payloads.MAX_PAYLOAD_BYTES` long
and its hash differs from the one the adapter holds. So a job that sits at an end for many
samples crosses the network once, and one above the bound never: its time is skipped (warning
``payload_too_large``) and, at the push end, it cannot be a marker (the arrivals of the next
interval are then the list's growth, a lower bound).

The newest element is not read at all while the marker is found at the push end: it is the
marker, which the adapter holds; an empty list costs its ``LLEN`` alone. Redis has no command that tells an element's length without
reading it, and reading a 50 MB
element into the script takes Redis about 0.2 s. So an end known to hold an element above the
bound is not read again while its position shows it unchanged: at the oldest end, while the
marker shows that nothing was taken; at the push end, while the marker is still the newest
element; without a marker, while the length is unchanged. A push and a take within one interval
leave the length as it was, so such an end is read again at least every
:data:`REMEASURE_EVERY` samples whatever its position shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from brokers.base import End
from brokers.list_marker import ListMarker, MarkerCounts
from brokers.payloads import MAX_PAYLOAD_BYTES
from brokers.redis_connection import Command

#: an end holding an element above the bound is read again at least this often (samples)
REMEASURE_EVERY = 20
#: the size the script reports for an end it did not read, its position showing it unchanged
UNREAD = -2

#: KEYS[1] the list. ARGV: oldest index, size bound, known oldest hash, known newest hash,
#: whether the oldest and the newest may be left unread while unchanged (1/0; for the oldest
#: also 2: it is held, and left unread where the marker shows nothing taken), the previous
#: length, then 1, marker, rank, maxlen to look for a marker (0 not to). Replies {length,
#: oldest size, hash, element, newest size, hash, element, LPOS}: size -1 for an empty list,
#: -2 (UNREAD) when not read; the element false when unchanged, too large or not read (and at
#: the newest end when the list's one element is sent as the oldest); LPOS false when not asked.
SCRIPT = """
local key, bound = KEYS[1], tonumber(ARGV[2])
local oldest_index, previous = tonumber(ARGV[1]), tonumber(ARGV[7])
local length = redis.call('LLEN', key)
-- an empty (or missing) list: no element to read, no marker to find (LPOS would answer {})
if length == 0 then return {0, -1, '', false, -1, '', false, ARGV[8] == '1' and {} or false} end
local found, arrivals = false, nil
if ARGV[8] == '1' then
  found = redis.call('LPOS', key, ARGV[9], 'RANK', ARGV[10], 'COUNT', 2, 'MAXLEN', ARGV[11])
  if #found == 1 then
    arrivals = found[1]
    if oldest_index == 0 then arrivals = length - 1 - found[1] end
  end
end
local oldest_still, newest_still = false, false
if arrivals then
  oldest_still, newest_still = previous + arrivals == length, arrivals == 0
elseif ARGV[8] ~= '1' then
  oldest_still, newest_still = length == previous, length == previous
end
local function measure(index)
  local value = redis.call('LINDEX', key, index)
  if not value then return {-1, '', false} end
  if #value > bound then return {#value, '', false} end
  return {#value, redis.sha1hex(value), value}
end
local function answer(read, known)
  if read[2] == known then return read[1], read[2], false end
  return read[1], read[2], read[3]
end
local o_read, n_read = {-2, '', false}, {-2, '', false}
-- '2': the caller holds the oldest element; left unread where the marker shows nothing taken
local o_kept = ARGV[5] == '2' and arrivals and previous + arrivals == length
if not ((ARGV[5] == '1' and oldest_still) or o_kept) then o_read = measure(oldest_index) end
if not ((ARGV[6] == '1' and newest_still) or arrivals == 0) then
  if length == 1 and o_read[1] ~= -2 then n_read = o_read else n_read = measure(-1 - oldest_index) end
end
local o_size, o_digest, o_value = answer(o_read, ARGV[3])
local n_size, n_digest, n_value = answer(n_read, ARGV[4])
if n_read == o_read and o_value then n_value = false end -- one element: sent once, as the oldest
return {length, o_size, o_digest, o_value, n_size, n_digest, n_value, found}
"""


@dataclass(frozen=True, slots=True)
class Element:
    """One end of the list as the script saw it."""

    size: int
    #: the element's SHA-1 (hex), ``b""`` when too large
    digest: bytes
    #: the element, or None when it is too large or the hash given was its own
    payload: bytes | None

    @property
    def too_large(self) -> bool:
        return self.size > MAX_PAYLOAD_BYTES


@dataclass(frozen=True, slots=True)
class Ends:
    """One sample of a list: its length, its oldest element (None when empty), the counts."""

    length: int
    oldest: Element | None
    counts: MarkerCounts


class _Oversize:
    """How long an end has held an element above the bound without being read."""

    def __init__(self) -> None:
        self.element: Element | None = None
        self.unread = 0

    def may_skip(self) -> bool:
        return self.element is not None and self.unread < REMEASURE_EVERY

    def observe(self, element: Element) -> Element:
        """The element at this end: the one held when the script left it unread."""
        if element.size == UNREAD and self.element is not None:
            self.unread += 1
            return self.element
        self.element, self.unread = (element, 0) if element.too_large else (None, 0)
        return element


class ListEnds:
    """Samples one list whose oldest element is at ``oldest_end``; keeps its marker."""

    def __init__(self, key: str, oldest_end: End) -> None:
        self.key = key
        self._oldest_index = 0 if oldest_end is End.HEAD else -1
        self.marker = ListMarker(oldest_end.opposite)
        #: the newest element (the marker to look for next), and its hash
        self._newest: tuple[bytes, bytes] | None = None
        self._length = 0
        self._big_oldest = _Oversize()
        self._big_newest = _Oversize()
        #: the oldest element last read (at most the bound), and samples since it was read
        self._oldest_held: Element | None = None
        self._oldest_unread = 0

    def command(self, known_oldest: bytes) -> Command:
        """The script's call; ``known_oldest`` is the hash of the oldest element the caller
        holds what it needs of (``b""`` for none): that element is not sent again."""
        query = self.marker.query()
        newest_digest = self._newest[1] if self._newest is not None else b""
        skips = (self._oldest_skip(known_oldest), int(self._big_newest.may_skip()))
        look: tuple[int | bytes, ...] = (
            (1, query.marker, query.rank, query.maxlen) if query is not None else (0,)
        )
        args: tuple[str | bytes | int, ...] = (
            1, self.key, self._oldest_index, MAX_PAYLOAD_BYTES, known_oldest, newest_digest,
            *skips, self._length, *look,
        )  # fmt: skip
        command: Command = ("EVAL", SCRIPT, *args)
        return command

    def _oldest_skip(self, known_oldest: bytes) -> int:
        """1: an oldest element above the bound may be left unread while unchanged; 2: the
        caller holds the oldest one (its hash is ``known_oldest``), which the script then
        reads only where the marker shows a job taken (at least every REMEASURE_EVERY
        samples); 0: read it."""
        if self._big_oldest.may_skip():
            return 1
        held = self._oldest_held
        if known_oldest and held is not None and held.digest == known_oldest:
            return 2 if self._oldest_unread < REMEASURE_EVERY else 0
        return 0

    def observe(self, reply: Sequence[Any]) -> Ends:
        """Account for the script's reply to :meth:`command`."""
        length, o_size, o_digest, o_value, n_size, n_digest, n_value, found = reply
        if length == 1 and n_value is None and n_digest == o_digest and o_value is not None:
            n_value = o_value  # one element, both ends: the script sent it once
        self._length = length
        newest = Element(n_size, n_digest, n_value)
        if newest.size != UNREAD or self._big_newest.element is not None:
            newest = self._big_newest.observe(newest)
            if newest.size < 0 or newest.too_large:
                self._newest = None
            elif newest.payload is not None:
                self._newest = (newest.payload, newest.digest)
        # else unchanged: the element held is the newest still (the marker was found there)
        marker = self._newest[0] if self._newest is not None else None
        counts = self.marker.observe(length, found, marker)
        held = self._oldest_held
        if o_size == UNREAD and self._big_oldest.element is None and held is not None:
            self._oldest_unread += 1  # left unread: the element held is the oldest still
            return Ends(length, Element(held.size, held.digest, None), counts)
        oldest = self._big_oldest.observe(Element(o_size, o_digest, o_value))
        self._oldest_unread = 0
        self._oldest_held = oldest if oldest.size >= 0 and not oldest.too_large else None
        return Ends(length, oldest if oldest.size >= 0 else None, counts)
