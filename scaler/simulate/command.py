"""``queue-age-scaler simulate SCENARIO.yaml [...] [--policies a,b] [--out DIR] [--json]``, and
``simulate --family FILE --count N --seed S`` (:mod:`scaler.simulate.family_command`)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from scaler.simulate import family_command
from scaler.simulate.policies import POLICY_NAMES
from scaler.simulate.run import ScenarioRun, simulate
from scaler.simulate.scenario import Scenario, ScenarioError
from scaler.simulate.scenario_file import load_scenario
from scaler.simulate.scoreboard import KEYS, OURS, goal, verdict

_HEADERS = ("p50 s", "p99 s", "max s", "over SLO s", "worker-s", "scalings", "over ceil s",
            "API p99 s", "dups", "completed")  # fmt: skip


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "simulate",
        help="simulate scenarios with this scaler and the usual alternatives side by side",
    )
    parser.add_argument("scenarios", nargs="*", type=Path, metavar="SCENARIO.yaml")
    parser.add_argument(
        "--policies",
        default=",".join(POLICY_NAMES),
        help=f"comma-separated, from: {', '.join(POLICY_NAMES)} (default all)",
    )
    parser.add_argument("--out", type=Path, help="write one PNG per scenario into this folder")
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object per scenario (one a line)"
    )
    family_command.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    if (args.family is None) == (not args.scenarios):
        print(
            "simulate: give scenario files, or --family FILE (not both): "
            "queue-age-scaler simulate scenarios/step.yaml, or "
            "queue-age-scaler simulate --family scenarios/families/broad.yaml --count 300",
            file=sys.stderr,
        )
        return 2
    if args.family is not None:
        if args.out is not None:
            print(
                "simulate: --out draws figures of scenario files; with --family, write the worst "
                "scenarios out (--worst-out DIR) and simulate those with --out",
                file=sys.stderr,
            )
            return 2
        return family_command.run(args, policies)
    try:
        scenarios = [load_scenario(path) for path in args.scenarios]
    except (OSError, ScenarioError) as error:
        print(f"simulate: {error}", file=sys.stderr)
        return 2
    for scenario in scenarios:
        started = time.monotonic()
        try:
            result = simulate(scenario, policies, _Progress(scenario.name))
        except ScenarioError as error:
            print(f"simulate: {scenario.name}: {error}", file=sys.stderr)
            return 2
        print(
            f"simulate: {scenario.name}: {len(policies)} policies in {time.monotonic() - started:.1f} s",
            file=sys.stderr,
        )
        print(json.dumps(result.json()) if args.json else render(result))
        if args.out is not None:
            from scaler.simulate.plot import write_figure

            print(f"simulate: wrote {write_figure(result, args.out)}", file=sys.stderr)
    return 0


class _Progress:
    """Progress on stderr, for runs long enough to need it."""

    def __init__(self, scenario: str) -> None:
        self.scenario = scenario
        self.started = time.monotonic()

    def __call__(self, policy: str, share: float) -> None:
        if share < 1 and time.monotonic() - self.started < 2:
            return
        print(f"simulate: {self.scenario}: {policy} {share:.0%}", file=sys.stderr, flush=True)


def render(result: ScenarioRun) -> str:
    rows = result.rows
    scenario = result.scenario
    width = max(len(name) for name in rows)
    lines = [
        f"{scenario.name}: {scenario.duration:g} s, SLO {scenario.target_age:g} s, "
        f"ceiling {_ceiling_text(scenario)}",
        " " * width + "  " + "  ".join(f"{h:>11}" for h in _HEADERS),
    ]
    for name, figures in rows.items():
        cells = "  ".join(f"{figures[key]:>11}" for key in KEYS)
        lines.append(f"{name:<{width}}  {cells}")
    if OURS in rows:
        outcome = verdict(rows)
        lines.append(f"goal {'met' if outcome.met else 'missed'}: " + "; ".join(outcome.lines))
        family = goal(rows)
        lines.append(f"family goal {'met' if family.met else 'missed'}: " + "; ".join(family.lines))
    return "\n".join(lines)


def _ceiling_text(scenario: Scenario) -> str:
    """``22``, or ``22, 12 from 300 s`` where another service's sessions change it, and the
    knee of a USL curve (``knee 25.6``)."""
    dependency = scenario.dependency
    if scenario.ceiling is None:
        return "none"
    text = str(scenario.ceiling)
    for step in dependency.others:
        if step.at > 0:
            text += f", {dependency.ceiling_at(step.at)} from {step.at:g} s"
    if scenario.knee is not None:
        text += f"; knee {scenario.knee:.1f} workers"
    return text
