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


SURVIVORS = """
import gc, json
from scaler.process_memory import freeze_collection_survivors, full_pass

class Node:
    def __init__(self):
        self.other = self  # a cycle: only the cyclic collector frees it

freeze_collection_survivors()
kept = [Node() for _ in range(10_000)]  # what a server keeps: samplers, histories
gc.collect(1)  # a collection of the middle generation: what it kept is frozen
after_middle = gc.get_freeze_count()
walked = len(gc.get_objects())  # what the next full collection walks
kept.clear()  # frozen objects that became cyclic garbage
freed_by_full = gc.collect()  # a full collection does not walk them
print(json.dumps({
    "threshold": gc.get_threshold(), "after_middle": after_middle, "walked": walked,
    "freed_by_full": freed_by_full, "freed_by_pass": full_pass(),
}))
"""


def test_what_a_middle_collection_keeps_is_frozen_and_a_full_pass_still_frees_it() -> None:
    run = subprocess.run(
        [sys.executable, "-c", SURVIVORS], capture_output=True, text=True, check=True, timeout=60
    )
    figures = json.loads(run.stdout)
    assert figures["threshold"][1] == 3  # the middle one after every fourth young collection
    assert figures["after_middle"] >= 10_000  # the kept nodes among what was frozen
    assert figures["walked"] < 1_000  # the next full collection walks none of them ...
    assert figures["freed_by_full"] < 10_000  # ... nor frees them once they are garbage
    assert figures["freed_by_pass"] >= 10_000  # the pass over everything does


def test_a_full_pass_is_due_once_the_blocks_in_use_grew_a_quarter_and_a_minute_passed() -> None:
    from scaler.process_memory import full_pass_due

    assert not full_pass_due(blocks=124_000, after_last=100_000, since_last=50.0)
    assert not full_pass_due(blocks=124_000, after_last=100_000, since_last=120.0)  # grew 24%
    assert not full_pass_due(blocks=200_000, after_last=100_000, since_last=30.0)  # too soon
    assert full_pass_due(blocks=126_000, after_last=100_000, since_last=60.0)
    assert full_pass_due(blocks=100_000, after_last=100_000, since_last=600.0)  # the latest


AFTER_PASS = """
import gc, json
from scaler.process_memory import freeze_collection_survivors, full_pass

kept = [[i] for i in range(200_000)]  # what a server at thousands of queues keeps
freeze_collection_survivors()
gc.collect()
full_pass()
frozen = gc.get_freeze_count()
walks = []
gc.callbacks.insert(0, lambda phase, info: phase == "start" and walks.append(
    len(gc.get_objects(0)) + len(gc.get_objects(1)) + len(gc.get_objects(2))))
made = [[i] for i in range(20_000)]  # new objects that live on, a tenth of the kept ones
print(json.dumps({"newly_frozen": gc.get_freeze_count() - frozen, "walks": walks}))
"""


def test_what_lives_on_after_a_full_pass_is_frozen_a_few_collections_at_a_time() -> None:
    """After a pass over everything (200,000 objects), the new objects that live on are frozen
    by the middle collections as they come: no automatic collection walks them all at once."""
    run = subprocess.run(
        [sys.executable, "-c", AFTER_PASS], capture_output=True, text=True, check=True, timeout=60
    )
    figures = json.loads(run.stdout)
    assert figures["newly_frozen"] >= 15_000  # most of the 20,000, by the middle collections
    assert figures["walks"] and max(figures["walks"]) < 5_000


def test_a_pass_that_found_little_waits_longer_for_the_next() -> None:
    from scaler.process_memory import full_pass_due, next_spacing

    # the memory grew because the server keeps more (queues, histories): little freed
    assert next_spacing(60.0, blocks=900_000, freed=430) == 120.0
    assert next_spacing(480.0, blocks=900_000, freed=430) == 600.0  # never past the latest
    assert not full_pass_due(blocks=200_000, after_last=100_000, since_last=90.0, spacing=120.0)
    assert full_pass_due(blocks=200_000, after_last=100_000, since_last=120.0, spacing=120.0)
    # a flood's refused calls left garbage among them: the next pass may come a minute after
    assert next_spacing(480.0, blocks=900_000, freed=50_000) == 60.0
