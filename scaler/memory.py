"""The server process's memory: what its garbage collector scans.

CPython's full collection walks every object that can hold references, and blocks the event
loop while it does. Most of them are made at start (modules, classes, functions, protobuf
descriptors) and live as long as the process: :func:`freeze_startup_objects` moves them out of
every later collection, so that a full one walks only what the server made since. Under the
hostile benchmark's flood, full collections took 230-580 ms each before (24 in 90 s).
"""

from __future__ import annotations

import gc
import importlib

from brokers.formats import FORMATS


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
