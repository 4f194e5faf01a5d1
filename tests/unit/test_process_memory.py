"""The server's start leaves what it imported out of every later garbage collection, and the
memory it frees goes back to the system (each in a process of its own: freezing the test
runner's objects would keep them for its whole run, and its RSS is not ours to measure)."""

from __future__ import annotations

import json
import subprocess
import sys

PROGRAM = """
import gc, json, sys
import scaler.server  # what `serve` has imported when it freezes
from scaler.process_memory import freeze_startup_objects
before = len(gc.get_objects())
frozen = freeze_startup_objects()
print(json.dumps({
    "before": before, "after": len(gc.get_objects()), "frozen": frozen,
    "adapters": [m for m in ("brokers.rabbitmq", "brokers.redis_streams") if m in sys.modules],
}))
"""


def test_the_objects_made_at_start_are_left_out_of_collections() -> None:
    run = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, check=True, timeout=60
    )
    figures = json.loads(run.stdout)
    # the adapters are imported before the freeze, not at the first queue of their format
    assert figures["adapters"] == ["brokers.rabbitmq", "brokers.redis_streams"]
    assert figures["frozen"] > figures["before"] // 2
    assert figures["after"] < figures["before"] // 10  # what a full collection still walks


TRIM = """
import gc, json
from scaler.process_memory import release_free_memory
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
blocks = [bytes(2000) + bytes([i % 256]) for i in range(100_000)]  # 200 MB, malloc'd
kept = blocks[::100]  # one block in a hundred stays, between the freed ones
del blocks
gc.collect()
freed = rss()
print(json.dumps({"freed": freed, "released": release_free_memory(), "after": rss()}))
"""


def test_freed_memory_goes_back_to_the_system() -> None:
    run = subprocess.run(
        [sys.executable, "-c", TRIM], capture_output=True, text=True, check=True, timeout=60
    )
    figures = json.loads(run.stdout)
    assert figures["freed"] > 150  # MB: the C library kept what Python freed
    assert figures["released"] and figures["after"] < figures["freed"] - 100
