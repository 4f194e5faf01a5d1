"""``queue-age-scaler formats``: the formats a trigger may name, built-in and from plugins."""

from __future__ import annotations

import argparse
import json

from brokers import registry


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    command = commands.add_parser(
        "formats",
        help="list the queue formats a trigger may name: the built-in ones and the plugins' "
        f"(entry points of {registry.ENTRY_POINTS})",
    )
    command.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    infos = list(registry.formats().values())
    origins = registry.origins()
    if args.json:
        rows = [
            {
                "format": info.name,
                "broker": info.broker.name,
                "from": origins.get(info.name, "built-in"),
                "keys": list(info.layout_keys),
                "simulated": info.snapshot_model is not None,
                #: whether a pool trigger's globs can be resolved (the format lists its queues)
                "lists_queues": bool(info.queue_lister),
                "summary": info.summary,
            }
            for info in infos
        ]
        print(json.dumps({"formats": rows}))
        return 0
    width = max(len(info.name) for info in infos)
    broker_width = max(len(info.broker.name) for info in infos)
    for info in infos:
        origin = origins.get(info.name, "built-in")
        shown = "" if origin == "built-in" else f" [plugin: {origin}]"
        print(f"{info.name:<{width}}  {info.broker.name:<{broker_width}}  {info.summary}{shown}")
    return 0
