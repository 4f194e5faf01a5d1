"""The ``queue-age-scaler`` command: ``serve`` and ``probe``."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from pathlib import Path

from scaler.connections import load_profiles
from scaler.errors import ScalerError
from scaler.probe import probe, render_table
from scaler.server import DEFAULT_GRACE, DEFAULT_METRICS_PORT, DEFAULT_PORT, ServerConfig, serve


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="queue-age-scaler", description=__doc__)
    parser.add_argument(
        "--log-level", default="INFO", help="DEBUG logs every decision with its inputs"
    )
    parser.add_argument(
        "--connections-dir",
        type=Path,
        help="a folder with one file per connection profile (its URL)",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    serve_cmd = commands.add_parser("serve", help="run the gRPC server for KEDA")
    serve_cmd.add_argument("--host", default="[::]", help="address to bind (default all)")
    serve_cmd.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help="gRPC port (default 6000)"
    )
    serve_cmd.add_argument(
        "--metrics-port",
        type=int,
        default=DEFAULT_METRICS_PORT,
        help="Prometheus /metrics port; 0 picks one",
    )
    serve_cmd.add_argument("--no-metrics", action="store_true", help="do not serve /metrics")
    serve_cmd.add_argument(
        "--grace", type=float, default=DEFAULT_GRACE, help="seconds running RPCs get on shutdown"
    )

    probe_cmd = commands.add_parser(
        "probe", help="sample one queue and show its signals and decision"
    )
    probe_cmd.add_argument(
        "--duration", type=float, default=5.0, help="seconds to sample (default 5)"
    )
    probe_cmd.add_argument("--json", action="store_true", help="print one JSON object")
    probe_cmd.add_argument("metadata", nargs="+", metavar="KEY=VALUE", help="trigger metadata")
    return parser


def _metadata(pairs: list[str]) -> dict[str, str]:
    metadata: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"probe: {pair!r} is not KEY=VALUE (for example queue=default)")
        metadata[key] = value
    return metadata


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    profiles = load_profiles(directory=args.connections_dir)
    if args.command == "serve":
        config = ServerConfig(
            host=args.host,
            port=args.port,
            metrics_port=None if args.no_metrics else args.metrics_port,
            grace=args.grace,
            profiles=profiles,
        )
        asyncio.run(serve(config))
        return 0
    try:
        result = asyncio.run(probe(_metadata(args.metadata), profiles, args.duration))
    except ScalerError as error:
        print(f"probe: {error}", file=sys.stderr)
        return 2
    print(json.dumps(result) if args.json else render_table(result))
    return 0
