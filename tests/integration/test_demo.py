"""scripts/demo's code path, compressed: a 30-second run (``python -m scaler.demo``, what
scripts/demo runs once .venv is there) with its private redis-server, the real server, the
workers and KEDA emulated; and Ctrl-C in the middle of a run.

The demo runs in a session of its own, which every process it starts stays in (none of them
calls setsid): after the demo exits, no process may be left in that session.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from scaler.demo.scenario import CEILING

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _start(out: Path, duration: float) -> subprocess.Popen[str]:
    """The demo in a session (and process group) of its own, as a shell runs a foreground
    command in a process group of its own."""
    command = [sys.executable, "-m", "scaler.demo", "--duration", str(duration), "--no-live",
               "--out", str(out)]  # fmt: skip
    process = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    return process


def _in_session(session: int) -> list[str]:
    """The processes (pid and command line) of ``session``, zombies left out."""
    found: list[str] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue  # gone meanwhile
        state, _ppid, _pgrp, sid = stat.rsplit(")", 1)[1].split()[:4]
        if int(sid) == session and state != "Z":
            found.append(f"{entry.name}: {command}")
    return found


def _end(process: subprocess.Popen[str]) -> None:
    """After a failure: SIGTERM to the demo, then SIGKILL to whatever is left of its session."""
    if process.poll() is None:
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(20)
    for line in _in_session(process.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(line.split(":")[0]), signal.SIGKILL)


def _one_run(out: Path) -> Path:
    runs = list(out.iterdir())
    assert len(runs) == 1, runs
    return runs[0]


def _assert_png(path: Path) -> None:
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(path) as image:
        image.verify()
    with Image.open(path) as image:
        assert image.size[0] > 600 and image.size[1] > 600, image.size


@pytest.mark.timeout(120)
def test_a_short_demo_scales_up_for_the_burst_within_the_ceiling(tmp_path: Path) -> None:
    process = _start(tmp_path, 30.0)
    try:
        output, _ = process.communicate(timeout=100)
    finally:
        _end(process)
    assert process.returncode == 0, output
    assert _in_session(process.pid) == [], output

    run = _one_run(tmp_path)
    data = json.loads((run / "run.json").read_text())
    samples = data["samples"]
    by_phase: dict[str, list[dict[str, Any]]] = {}
    for sample in samples:
        by_phase.setdefault(str(sample["phase"]), []).append(sample)
    assert list(by_phase) == ["quiet", "burst", "peak", "end"], output

    def most(phase: str) -> int:
        return max(int(s["alive"]) for s in by_phase[phase])

    assert most("quiet") <= 2, output
    assert most("burst") >= 4, output  # the HPA's first step up, during the burst itself
    assert max(most("burst"), most("peak")) == CEILING, output
    assert max(int(s["alive"]) for s in samples) <= CEILING, output
    desired = [s["scaler"]["desired"] for s in samples if s["scaler"]["desired"] is not None]
    assert max(desired) <= CEILING, output
    reasons = {s["scaler"]["reason"] for s in samples}
    assert "clamped by database" in reasons, reasons

    summary = data["summary"]
    assert summary["done"] == summary["sent"] > 500, summary
    assert summary["peak_workers"] == CEILING
    assert f"demo: max age {summary['max_age']:.1f} s" in output
    assert f"demo: figure {run / 'run.png'}" in output
    _assert_png(run / "run.png")


@pytest.mark.timeout(90)
def test_ctrl_c_mid_run_stops_everything_the_demo_started(tmp_path: Path) -> None:
    process = _start(tmp_path, 120.0)
    lines = []
    try:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if "KEDA: 0 -> 1 workers" in line:
                break
        # the demo, redis-server, the server, a worker
        assert len(_in_session(process.pid)) >= 4, lines
        os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C does to the foreground group
        rest, _ = process.communicate(timeout=60)
    finally:
        _end(process)
    output = "".join(lines) + rest
    assert process.returncode == 130, output
    assert _in_session(process.pid) == [], output
    assert "demo: interrupted: max age" in output
    _assert_png(_one_run(tmp_path) / "run.png")
