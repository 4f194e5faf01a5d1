"""Markdown tables of family scoreboards, for docs/simulator.md's before and after.

Run: ``.venv/bin/python -m benchmarks.family_report DIR`` on the JSON scoreboards that
``benchmarks.family_speed --out DIR`` (or ``simulate --family ... --json > DIR/NAME.json``)
wrote: per family, this scaler's share of scenarios meeting the goal and the checks it missed,
then a row per policy.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

OURS = "queue-age-scaler"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("folder", type=Path)
    args = parser.parse_args()
    for path in sorted(args.folder.glob("*.json")):
        print("\n".join(report(json.loads(path.read_text()))))
        print()


def report(board: dict[str, Any]) -> list[str]:
    count = board["count"]
    ours = board["policies"][OURS]
    missed = ", ".join(f"{name} {n}" for name, n in ours["missed"].items()) or "none"
    lines = [
        f"#### {board['family']} ({count} scenarios, seed {board['seed']})",
        "",
        f"Goal met by {OURS} on **{ours['goal_met']} of {count} ({ours['goal_met_share']:.1%})**; "
        f"above the ceiling on {ours['over_ceiling']}; checks missed: {missed}.",
        "",
        "| policy | goal met | above ceiling | over SLO s (median / p90 / worst) "
        "| over the best s (median / p90 / worst) | worker-s / the best's (median / p90 / worst) |",
        "|---|---|---|---|---|---|",
    ]
    for name, figures in board["policies"].items():
        label = f"**{name}**" if name == OURS else name
        lines.append(
            f"| {label} | {figures['goal_met_share']:.1%} | {figures['over_ceiling'] / count:.1%} "
            f"| {_spread(figures['slo_violation_s'], '{:.1f}')} "
            f"| {_spread(figures['slo_violation_over_best_s'], '{:.1f}')} "
            f"| {_spread(figures['worker_seconds_over_best'], '{:.2f}x')} |"
        )
    return lines


def _spread(values: dict[str, float], form: str) -> str:
    return " / ".join(form.format(values[key]) for key in ("median", "p90", "worst"))


if __name__ == "__main__":
    main()
