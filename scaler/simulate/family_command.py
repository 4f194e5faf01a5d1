"""``queue-age-scaler simulate --family FILE --count N --seed S [--jobs J]``: draw N scenarios of a
family, run every policy on each in J processes, print the family scoreboard, and write out the
worst scenarios as scenario files that replay with ``queue-age-scaler simulate FILE``."""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

from scaler.cli_types import positive_int
from scaler.simulate.family import Family, load_family
from scaler.simulate.family_scoreboard import ScenarioScore, json_report, render, score, worst
from scaler.simulate.policies import build
from scaler.simulate.run import simulate
from scaler.simulate.scenario import ScenarioError
from scaler.simulate.scenario_file import parse_scenario
from scaler.simulate.scoreboard import OURS, Row


def add_arguments(parser: argparse.ArgumentParser) -> None:
    family = parser.add_argument_group("families (docs/simulator.md#scenario-families)")
    family.add_argument(
        "--family", type=Path, metavar="FILE", help="draw scenarios from this family file"
    )
    family.add_argument(
        "--count", type=positive_int, default=100, help="scenarios to draw (default 100)"
    )
    family.add_argument("--seed", type=int, default=1, help="the draws' seed (default 1)")
    family.add_argument(
        "--jobs",
        type=positive_int,
        default=os.cpu_count() or 1,
        help="processes that run scenarios (default: the CPU count)",
    )
    family.add_argument(
        "--worst-out",
        type=Path,
        metavar="DIR",
        help="write the scenarios where this scaler does worst into DIR, for replay",
    )
    family.add_argument(
        "--reuse",
        type=Path,
        metavar="FILE.json",
        help="take every other policy's rows from this earlier --json scoreboard of the same "
        "draws, and run only queue-age-scaler (for tuning its policy)",
    )
    family.add_argument(
        "--worst",
        type=positive_int,
        default=5,
        help="how many worst scenarios --worst-out writes (default 5)",
    )


def run(args: argparse.Namespace, policies: Sequence[str]) -> int:
    started = time.monotonic()
    try:
        family = load_family(args.family)
        # the policies checked on the first draw before any process starts
        first = parse_scenario(family.document(args.seed, 0))
        for name in policies:
            build(name, first)
    except (OSError, ScenarioError) as error:
        print(f"simulate: {error}", file=sys.stderr)
        return 2
    try:
        scores = list(_scores(family, args, policies))
    except ScenarioError as error:
        print(f"simulate: {family.name}: {error}", file=sys.stderr)
        return 2
    elapsed = time.monotonic() - started
    print(
        f"simulate: family {family.name}: {len(scores)} scenarios x {len(policies)} policies "
        f"in {elapsed:.1f} s on {min(args.jobs, len(scores))} processes",
        file=sys.stderr,
    )
    if args.json:
        print(json.dumps(json_report(family.name, args.seed, scores, policies)))
    else:
        print("\n".join(render(family.name, args.seed, scores, policies)))
    if args.worst_out is not None and OURS in policies:
        for written in write_worst(scores, args.worst_out, args.worst, family, args.seed):
            print(f"simulate: wrote {written}", file=sys.stderr)
    return 0


def _scores(
    family: Family, args: argparse.Namespace, policies: Sequence[str]
) -> Iterator[ScenarioScore]:
    reused = _reused(args.reuse) if args.reuse is not None else {}
    tasks = [
        (args.family, args.seed, index, tuple(policies), reused.get(index))
        for index in range(args.count)
    ]
    every = max(1, args.count // 20)
    if args.jobs == 1 or args.count == 1:
        results: Iterator[tuple[int, dict[str, Any], dict[str, Row]]] = map(_run_one, tasks)
        yield from _reported(results, args.count, every)
        return
    with concurrent.futures.ProcessPoolExecutor(max_workers=min(args.jobs, args.count)) as pool:
        yield from _reported(pool.map(_run_one, tasks), args.count, every)


def _reported(
    results: Iterator[tuple[int, dict[str, Any], dict[str, Row]]], count: int, every: int
) -> Iterator[ScenarioScore]:
    for done, (index, document, rows) in enumerate(results, 1):
        if done % every == 0:
            print(f"simulate: {done}/{count} scenarios", file=sys.stderr, flush=True)
        yield score(index, document, rows)


#: the family each process has read, by path (a process reads its file once)
_FAMILIES: dict[Path, Family] = {}


#: one scenario's document and rows from an earlier scoreboard (``--reuse``)
Reused = tuple[dict[str, Any], dict[str, Row]]


def _reused(path: Path) -> dict[int, Reused]:
    """The drawn documents and rows of an earlier ``--json`` family scoreboard, by index."""
    try:
        board = json.loads(path.read_text())
        return {
            index: (entry["document"], entry["policies"])
            for index, entry in enumerate(board["scenarios"])
        }
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ScenarioError(
            f"--reuse {path}: not a family scoreboard of simulate --family --json ({error})"
        ) from None


def _run_one(
    task: tuple[Path, int, int, tuple[str, ...], Reused | None],
) -> tuple[int, dict[str, Any], dict[str, Row]]:
    path, seed, index, policies, reused = task
    if path not in _FAMILIES:
        _FAMILIES[path] = load_family(path)
    document = _FAMILIES[path].document(seed, index)
    kept: dict[str, Row] = {}
    if reused is not None:
        if reused[0] != document:
            raise ScenarioError(
                f"--reuse: {document['name']} was drawn otherwise there (another family file, "
                "seed or version); run without --reuse"
            )
        kept = {name: row for name, row in reused[1].items() if name != OURS}
    rows = simulate(parse_scenario(document), [p for p in policies if p not in kept]).rows
    return index, document, {name: rows[name] if name in rows else kept[name] for name in policies}


def write_worst(
    scores: Sequence[ScenarioScore], folder: Path, count: int, family: Family, seed: int
) -> list[Path]:
    """The ``count`` scenarios where this scaler does worst, as scenario files in ``folder``,
    each headed by how it was drawn and how the goal went."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for s in worst(scores, count):
        path = folder / f"{s.name}.yaml"
        outcome = s.goals[OURS]
        header = [
            f"# drawn from family {family.name}, seed {seed}, scenario {s.index}",
            f"# family goal {'met' if outcome.met else 'missed'}: " + "; ".join(outcome.lines),
            f"# replay: queue-age-scaler simulate {path}",
        ]
        path.write_text(
            "\n".join(header) + "\n" + yaml.safe_dump(dict(s.document), sort_keys=False, width=100)
        )
        written.append(path)
    return written
