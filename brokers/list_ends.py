"""Both ends of a Redis list, read without moving a payload that is too large or unchanged.

One read-only script (``EVAL``, touching only the list's key, so cluster-safe) runs ``LLEN``,
``LINDEX`` at both ends and ``LPOS`` of the list marker (``brokers.list_marker``) at one
instant. Inside Redis it measures each end's element and hashes it (``redis.sha1hex``), and it
sends an element back only when it is at most :data:`~brokers.payloads.MAX_PAYLOAD_BYTES` long
and its hash differs from the one the adapter holds. So a job that sits at an end for many
samples crosses the network once, and one above the bound never: its time is skipped (warning
``payload_too_large``) and, at the push end, it cannot be a marker (the arrivals of the next
interval are then the list's growth, a lower bound).

An element above the bound is still copied into the script once per sample to be measured
(Redis has no command that tells an element's length without reading it); it stays inside
Redis.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from brokers.formats import End
from brokers.list_marker import ListMarker, MarkerCounts
from brokers.payloads import MAX_PAYLOAD_BYTES
from brokers.redis_connection import Command

#: KEYS[1] the list; ARGV: oldest index, size bound, known oldest hash, known newest hash,
#: then 1, marker, rank, maxlen to look for a marker (0 not to). Replies {length, oldest size,
#: hash, element, newest size, hash, element, LPOS}: size -1 for an empty list; the element
#: false when unchanged or too large; LPOS false when not asked.
SCRIPT = """
local key, bound = KEYS[1], tonumber(ARGV[2])
local oldest_index = tonumber(ARGV[1])
local function read(index, known)
  local value = redis.call('LINDEX', key, index)
  if not value then return -1, '', false end
  local size = #value
  if size > bound then return size, '', false end
  local digest = redis.sha1hex(value)
  if digest == known then return size, digest, false end
  return size, digest, value
end
local length = redis.call('LLEN', key)
local found = false
if ARGV[5] == '1' then
  found = redis.call('LPOS', key, ARGV[6], 'RANK', ARGV[7], 'COUNT', 2, 'MAXLEN', ARGV[8])
end
local o_size, o_digest, o_value = read(oldest_index, ARGV[3])
local n_size, n_digest, n_value = read(-1 - oldest_index, ARGV[4])
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


class ListEnds:
    """Samples one list whose oldest element is at ``oldest_end``; keeps its marker."""

    def __init__(self, key: str, oldest_end: End) -> None:
        self.key = key
        self._oldest_index = 0 if oldest_end is End.HEAD else -1
        self.marker = ListMarker(oldest_end.opposite)
        #: the newest element (the marker to look for next), and its hash
        self._newest: tuple[bytes, bytes] | None = None

    def command(self, known_oldest: bytes) -> Command:
        """The script's call; ``known_oldest`` is the hash of the oldest element the caller
        holds what it needs of (``b""`` for none): that element is not sent again."""
        query = self.marker.query()
        newest_digest = self._newest[1] if self._newest is not None else b""
        look: tuple[int | bytes, ...] = (
            (1, query.marker, query.rank, query.maxlen) if query is not None else (0,)
        )
        args: tuple[str | bytes | int, ...] = (
            1, self.key, self._oldest_index, MAX_PAYLOAD_BYTES, known_oldest, newest_digest, *look
        )  # fmt: skip
        command: Command = ("EVAL", SCRIPT, *args)
        return command

    def observe(self, reply: Sequence[Any]) -> Ends:
        """Account for the script's reply to :meth:`command`."""
        length, o_size, o_digest, o_value, n_size, n_digest, n_value, found = reply
        newest = Element(n_size, n_digest, n_value)
        if newest.size < 0 or newest.too_large:
            self._newest = None
        elif newest.payload is not None:
            self._newest = (newest.payload, newest.digest)
        # else unchanged: the element held is the newest still
        marker = self._newest[0] if self._newest is not None else None
        counts = self.marker.observe(length, found, marker)
        oldest = Element(o_size, o_digest, o_value) if o_size >= 0 else None
        return Ends(length, oldest, counts)
