"""How long a family of one-hour scenarios takes with every policy, as users run it.

Goal (issue 10): 300 one-hour scenarios of a family, all policies, under 10 minutes on a 2-core
machine. Run: ``.venv/bin/python -m benchmarks.family_speed`` (``--count 300`` by default, every
shipped family; ``--families broad,formats``, ``--jobs J``, ``--out DIR`` to keep each family's
JSON scoreboard). It runs ``queue-age-scaler simulate --family ... --json`` as a user does and
prints, per family, the wall time, the CPU time of the processes, the jobs simulated and the
share of scenarios where this scaler meets the goal. The wall time depends on what else the
machine runs: the CPU time over the cores is the figure for an idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

FAMILIES = Path(__file__).resolve().parent.parent / "scenarios" / "families"
#: issue 10's goal for 300 scenarios
GOAL_SECONDS = 600.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--families", help="comma-separated family names (default: all shipped)")
    parser.add_argument("--out", type=Path, help="write each family's JSON scoreboard here")
    args = parser.parse_args()
    names = (
        args.families.split(",")
        if args.families
        else sorted(p.stem for p in FAMILIES.glob("*.yaml"))
    )
    goal = GOAL_SECONDS * args.count / 300
    for name in names:
        wall, cpu, report = _run(FAMILIES / f"{name}.yaml", args)
        ours = report["policies"]["queue-age-scaler"]
        jobs = sum(s["policies"]["queue-age-scaler"]["completed"] for s in report["scenarios"])
        print(
            f"family_speed: {name}: {args.count} scenarios x {len(report['policies'])} policies "
            f"on {args.jobs} processes: {wall:.0f} s wall ({'within' if wall <= goal else 'OVER'} "
            f"the goal of {goal:.0f} s), {cpu:.0f} s of CPU ({cpu / args.jobs:.0f} s per core); "
            f"{jobs} jobs completed by queue-age-scaler; goal met on "
            f"{ours['goal_met']}/{args.count} ({ours['goal_met_share']:.1%})",
            flush=True,
        )
        if args.out is not None:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / f"{name}.json").write_text(json.dumps(report))


def _run(path: Path, args: argparse.Namespace) -> tuple[float, float, dict[str, Any]]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    command = [
        sys.executable, "-m", "scaler", "simulate", "--family", str(path),
        "--count", str(args.count), "--seed", str(args.seed), "--jobs", str(args.jobs), "--json",
    ]  # fmt: skip
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    report: dict[str, Any] = json.loads(done.stdout)
    return wall, cpu, report


if __name__ == "__main__":
    main()
