"""The server process's memory: what its garbage collector scans, and what the C library keeps.

CPython's full collection walks every object that can hold references, and blocks the event
loop while it does. Most of them are made at start (modules, classes, functions, protobuf
descriptors) and live as long as the process: :func:`freeze_startup_objects` moves them out of
every later collection, so that a full one walks only what the server made since. Under the
hostile benchmark's flood, full collections took 230-580 ms each before (24 in 90 s).

What the server makes later lives long too (each queue's sampler, history and series): at
10,000 queues a full collection walked 1.2 million objects, held the loop for 1.0-1.2 s, found
almost nothing to collect, and came every 30 s (CPython runs one once a quarter more objects
than the last one kept have outlived the young collections). :func:`freeze_collection_survivors`
freezes what each collection of the middle generation keeps, and has one run every fourth young
collection: no collection walks an object again once it has outlived a middle one, and none
walks more than four young collections' survivors (at 10,000 queues 1-3 ms, where freezing
what each full collection kept left full collections of 5-13 ms every 1.5 s). What was frozen
and has become cyclic garbage since (a call in flight at a collection: grpc.aio leaves a cycle
of five objects per call; a refused call, its exception's frames) is collected by a full pass
over everything (:func:`full_passes`): once the memory Python's allocator holds grew by a
quarter since the last pass, a minute after it at the soonest, and every 10 minutes at the
latest, so nothing is kept for good. A pass that found little (the memory grew because the
server keeps more: new queues, fuller histories) doubles the time to the next one it may make
for growth: at 10,000 queues a pass holds the loop for about 0.7 s, and in the first minutes it
found 430 objects to free in 900,000. The growth is the allocator's count of blocks in use
(``sys.getallocatedblocks``: it reads the header of each of the allocator's pools, 3-10 ms at
10,000 queues, so once a minute), not the count of frozen objects: CPython counts those by
walking them all, and at 10,000 queues each check held the loop for 30-150 ms.
Objects that refcounting frees (most of them) are freed at once, frozen or not.

What the server frees goes back to the C library, which keeps most of it (the blocks between
live ones); :func:`release_free_memory_every` hands it back to the system every minute.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import gc
import importlib
import sys
import time
from collections.abc import Callable

from brokers.formats import FORMATS

#: how often the free memory is handed back to the system
TRIM_EVERY = 60.0
#: a full pass over the frozen objects too is due once the allocator's blocks in use are this
#: share more than after the last pass (cyclic garbage that frozen objects hold: a flood of
#: refused calls leaves some) ...
FULL_PASS_GROWTH = 0.25
#: ... but no sooner than this after the last, and at the latest this long after it
FULL_PASS_SPACING = 60.0
FULL_PASS_EVERY = 600.0
#: a pass that freed fewer objects than this share of the blocks in use found little: the next
#: one for growth waits twice as long as the last did
FULL_PASS_FOUND_LITTLE = 0.01
#: how often the blocks in use are counted (CPython reads every pool of the allocator's to count
#: them: at 10,000 queues, 3-10 ms)
FULL_PASS_CHECK = 60.0
#: the middle generation is collected after this many young collections (CPython's default:
#: 11, which walked 7,000-11,000 objects in 5-6 ms at 10,000 queues)
MIDDLE_EVERY = 4
#: CPython's middle generation (its collections move what they keep to the oldest)
_MIDDLE = 1


def freeze_startup_objects() -> int:
    """Import every queue adapter's module (they are otherwise imported at first use, after the
    freeze), collect the garbage, and freeze what is left; how many objects were frozen.

    For the server's process only, once, at start: frozen objects are never collected, so
    freezing again later would keep whatever garbage cycles they then formed."""
    for info in FORMATS.values():
        importlib.import_module(info.adapter.partition(":")[0])
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def freeze_collection_survivors() -> None:
    """From now on, freeze the objects each collection of the middle (or the oldest)
    generation keeps (a ``gc`` callback), and collect the middle generation after every
    ``MIDDLE_EVERY`` young collections: each walks a few young collections' survivors once,
    and the oldest generation holds nothing but what a collection is under way with."""
    if _freeze_survivors not in gc.callbacks:
        gc.callbacks.append(_freeze_survivors)
    young, _, oldest = gc.get_threshold()
    gc.set_threshold(young, MIDDLE_EVERY - 1, oldest)  # CPython: after more than the threshold


def _freeze_survivors(phase: str, info: dict[str, int]) -> None:
    # after a collection of the middle generation the young one is empty, and what it kept
    # has joined the oldest: what is frozen is what it kept, reachable, never garbage it had
    # yet to find
    if phase == "stop" and info["generation"] >= _MIDDLE:
        gc.freeze()


def full_pass() -> int:
    """One full collection over every object, the frozen ones too (they are frozen again
    after it, where :func:`freeze_collection_survivors` is on); how many it collected."""
    gc.unfreeze()
    return gc.collect()


def full_pass_due(
    blocks: int, after_last: int, since_last: float, spacing: float = FULL_PASS_SPACING
) -> bool:
    """Whether a full pass is due: ``blocks`` in use now, ``after_last`` after the last pass,
    ``since_last`` seconds ago; ``spacing``, the least time between passes for growth
    (:func:`next_spacing`)."""
    if since_last >= FULL_PASS_EVERY:
        return True
    return since_last >= spacing and blocks > after_last * (1 + FULL_PASS_GROWTH)


def next_spacing(spacing: float, blocks: int, freed: int) -> float:
    """The least time before the next pass for growth, after one that started with ``blocks``
    in use and freed ``freed`` objects: twice ``spacing`` where it found little, else the
    shortest."""
    if freed < blocks * FULL_PASS_FOUND_LITTLE:
        return min(spacing * 2, FULL_PASS_EVERY)
    return FULL_PASS_SPACING


async def full_passes(check: float = FULL_PASS_CHECK) -> None:
    """:func:`full_pass` whenever one is due (:func:`full_pass_due`), until cancelled."""
    after_last, last, spacing = sys.getallocatedblocks(), time.monotonic(), FULL_PASS_SPACING
    while True:
        await asyncio.sleep(check)
        blocks = sys.getallocatedblocks()
        if full_pass_due(blocks, after_last, time.monotonic() - last, spacing):
            spacing = next_spacing(spacing, blocks, full_pass())
            after_last, last = sys.getallocatedblocks(), time.monotonic()


def release_free_memory() -> bool:
    """Hand the C library's free memory back to the system (glibc's ``malloc_trim``): freed
    blocks between live ones otherwise stay in the process's RSS for good; False where the C
    library has no such call (musl). It releases the GIL; it holds the allocator's locks for
    a few milliseconds."""
    trim = _malloc_trim()
    return trim is not None and bool(trim(0))


async def release_free_memory_every(seconds: float = TRIM_EVERY) -> None:
    """:func:`release_free_memory` every ``seconds``, off the event loop, until cancelled."""
    while _malloc_trim() is not None:
        await asyncio.sleep(seconds)
        await asyncio.to_thread(release_free_memory)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    trim: Callable[[int], int] | None = getattr(ctypes.CDLL(None), "malloc_trim", None)
    return trim
