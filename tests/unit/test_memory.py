"""The server's start leaves what it imported out of every later garbage collection (in a
process of its own: freezing the test runner's objects would keep them for its whole run)."""

from __future__ import annotations

import json
import subprocess
import sys

PROGRAM = """
import gc, json, sys
import scaler.server  # what `serve` has imported when it freezes
from scaler.memory import freeze_startup_objects
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
