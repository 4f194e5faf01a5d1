"""Markdown tables of family scoreboards, for docs/simulator.md's before and after.

Run: ``.venv/bin/python -m benchmarks.family_report DIR`` on the JSON scoreboards that
``benchmarks.family_speed --out DIR`` (or ``simulate --family ... --json > DIR/NAME.json``)
wrote: per family, this scaler's share of scenarios meeting the goal and the checks it missed,
then a row per policy, then where it misses: the policies that beat it on each check, and its
misses by format and by traffic shape (or shipped scenario).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from scaler.simulate.scoreboard import OURS, goal


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
    return [*lines, "", *misses(board)]


def misses(board: dict[str, Any]) -> list[str]:
    """Who beats this scaler where it misses, and its misses by format and by shape."""
    beaten: dict[str, Counter[str]] = {
        "near_best_violations": Counter(), "not_dominated": Counter(), "cheap_enough": Counter()
    }  # fmt: skip
    formats: dict[str, list[int]] = {}
    shapes: dict[str, list[int]] = {}
    for scenario in board["scenarios"]:
        outcome = goal(scenario["policies"])
        if not outcome.near_best_violations and outcome.best is not None:
            beaten["near_best_violations"][outcome.best] += 1
        if not outcome.not_dominated:
            beaten["not_dominated"].update(outcome.dominating)
        if not outcome.cheap_enough and outcome.cheapest is not None:
            beaten["cheap_enough"][outcome.cheapest] += 1
        document = scenario.get("document")
        if document is not None:
            fmt = str(document["trigger"].get("format", "list"))
            shape = scenario["description"].split(": ")[1].split(",")[0].split(" ")[0]
            for table, key in ((formats, fmt), (shapes, shape)):
                table.setdefault(key, [0, 0])[0] += not outcome.met
                table[key][1] += 1
    lines = []
    titles = {
        "near_best_violations": "fewer violations by more than 5% or 5 s",
        "not_dominated": "better on both by more than 5%",
        "cheap_enough": "cheaper by more than 1.2x with as few violations",
    }
    for check, counts in beaten.items():
        if counts:
            named = ", ".join(f"{name} {n}" for name, n in counts.most_common())
            lines.append(f"- {titles[check]}: {named}")
    for title, table in (("by format", formats), ("by shape or scenario", shapes)):
        if table:
            cells = ", ".join(f"{k} {m}/{n}" for k, (m, n) in sorted(table.items()))
            lines.append(f"- missed {title}: {cells}")
    return lines


def _spread(values: dict[str, float], form: str) -> str:
    return " / ".join(form.format(values[key]) for key in ("median", "p90", "worst"))


if __name__ == "__main__":
    main()
