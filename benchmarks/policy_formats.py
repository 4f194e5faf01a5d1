"""The shipped scenarios with only the trigger's ``format`` changed, in every simulated format.

Issue 10's goal: the policy meets the per-scenario goal on the eight shipped scenarios in every
format the simulator models (those with a snapshot model). The other policies do not read the
trigger, so they run once per scenario; this project's policy runs once per format. Prints one
line per scenario and format, and the share met.

Run: ``.venv/bin/python -m benchmarks.policy_formats [SCENARIO.yaml ...] [--formats a,b]
[--processes N] [--json]``; without files, the eight shipped scenarios.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from brokers import registry
from brokers.formats import FORMATS
from scaler.simulate.policies import POLICY_NAMES
from scaler.simulate.run import simulate
from scaler.simulate.scenario_file import parse_scenario
from scaler.simulate.scoreboard import OURS, Row, goal

SHIPPED = ("above-dependency", "burst", "diurnal", "io-bound-backlog", "mixed", "sporadic",
           "steady", "step")  # fmt: skip
SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


def simulated_formats() -> list[str]:
    """The built-in formats the simulator models (a plugin's are the plugin's business)."""
    return [name for name, info in FORMATS.items() if info.snapshot_model is not None]


def with_format(document: Mapping[str, Any], name: str) -> dict[str, Any]:
    """``document`` with its trigger in format ``name``: the layout keys the format does not
    take are left out, a stream gets a consumer group, RabbitMQ an ``amqp://`` URL."""
    info = registry.format_info(name)
    trigger = dict(document["trigger"])
    layout = {key for f in registry.formats().values() for key in f.layout_keys}
    for key in layout - set(info.layout_keys):
        trigger.pop(key, None)
    if "consumerGroup" in info.layout_keys:
        trigger.setdefault("consumerGroup", "workers")
    trigger["url"] = "amqp://sim/" if info.broker.name == "rabbitmq" else "redis://sim/0"
    trigger["format"] = name
    return {**document, "name": f"{document['name']}@{name}", "trigger": trigger}


def _run(job: tuple[dict[str, Any], tuple[str, ...]]) -> tuple[str, dict[str, Row]]:
    document, policies = job
    run = simulate(parse_scenario(document), list(policies))
    return run.scenario.name, run.rows


def _key(document: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()[:16]


def _load(cache: Path | None, documents: list[dict[str, Any]]) -> dict[str, dict[str, Row]]:
    found: dict[str, dict[str, Row]] = {}
    if cache is None:
        return found
    for doc in documents:
        path = cache / f"{_key(doc)}.json"
        if path.exists():
            found[doc["name"]] = json.loads(path.read_text())
    return found


def _save(
    cache: Path | None, documents: list[dict[str, Any]], results: dict[str, dict[str, Row]]
) -> None:
    if cache is None:
        return
    cache.mkdir(parents=True, exist_ok=True)
    for doc in documents:
        (cache / f"{_key(doc)}.json").write_text(json.dumps(results[doc["name"]]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("scenarios", nargs="*", type=Path)
    parser.add_argument("--formats", default=",".join(simulated_formats()))
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--json", action="store_true", help="one JSON object per run, a line")
    parser.add_argument(
        "--cache",
        type=Path,
        help="keep the other policies' rows here (they do not change with ours)",
    )
    args = parser.parse_args()
    paths = args.scenarios or [SCENARIOS / f"{name}.yaml" for name in SHIPPED]
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    documents = [yaml.safe_load(path.read_text()) for path in paths]
    others = tuple(p for p in POLICY_NAMES if p != OURS)
    cached = _load(args.cache, documents)
    jobs = [(doc, others) for doc in documents if doc["name"] not in cached]
    jobs += [(with_format(doc, name), (OURS,)) for doc in documents for name in formats]
    started = time.monotonic()
    with multiprocessing.Pool(args.processes) as pool:
        results = cached | dict(pool.imap_unordered(_run, jobs))
    _save(args.cache, documents, results)
    met = 0
    for doc in documents:
        for name in formats:
            key = f"{doc['name']}@{name}"
            rows = {OURS: results[key][OURS], **results[doc["name"]]}
            outcome = goal(rows)
            met += outcome.met
            ours = rows[OURS]
            if args.json:
                print(json.dumps({"scenario": key, "met": outcome.met, "policies": rows}))
                continue
            print(
                f"{'met   ' if outcome.met else 'MISSED'} {key:<32} "
                f"over SLO {ours['slo_violation_s']:>7} s  worker-s {ours['worker_seconds']:>7}  "
                f"scalings {ours['scale_events']:>4}  | {'; '.join(outcome.lines)}"
            )
    total = len(documents) * len(formats)
    print(
        f"policy_formats: goal met on {met} of {total} ({len(documents)} scenarios x "
        f"{len(formats)} formats) in {time.monotonic() - started:.0f} s"
    )


if __name__ == "__main__":
    main()
