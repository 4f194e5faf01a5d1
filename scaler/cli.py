"""The ``queue-age-scaler`` command: ``serve``, ``probe``, ``check`` and ``simulate``.

The options before the command (``--log-level``, ``--log-format``, ``--connections-dir``) may
also follow it, so an image whose entrypoint is ``queue-age-scaler serve`` takes them as args.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from scaler import __version__, check, limits, logs
from scaler.connections import load_profiles
from scaler.errors import CannotListen, ScalerError
from scaler.probe import probe, render_table
from scaler.server import DEFAULT_GRACE, DEFAULT_METRICS_PORT, DEFAULT_PORT, ServerConfig, serve
from scaler.service import status_of
from scaler.simulate import command as simulate_command
from scaler.tls import TlsFiles

#: what ``queue-age-scaler --help`` says first (plain text: argparse shows it as it is)
DESCRIPTION = """\
A KEDA external scaler: it sizes job workers from the age of the oldest waiting
job, the time the backlog needs to drain, and the capacity of shared
dependencies, for queues on Redis and RabbitMQ.

--log-level, --log-format and --connections-dir may also follow the command
(queue-age-scaler serve --log-format json)."""


def _common_options(*, defaults: bool) -> argparse.ArgumentParser:
    """The options every command takes; after the command they keep the value given before it."""
    options = argparse.ArgumentParser(add_help=False)

    def default(value: object) -> object:
        return value if defaults else argparse.SUPPRESS

    options.add_argument(
        "--log-level",
        help="DEBUG logs every decision with its inputs (default INFO)",
        default=default("INFO"),
    )
    options.add_argument(
        "--log-format",
        choices=logs.FORMATS,
        help="text, or json: one object a line, with each decision's inputs as fields",
        default=default("text"),
    )
    options.add_argument(
        "--connections-dir",
        type=Path,
        help="a folder with one file per connection profile (its URL)",
        default=default(None),
    )
    return options


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="queue-age-scaler",
        description=DESCRIPTION,
        epilog="queue-age-scaler COMMAND --help shows the options of a command.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[_common_options(defaults=True)],
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    common = _common_options(defaults=False)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve_cmd = commands.add_parser("serve", help="run the gRPC server for KEDA", parents=[common])
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
    tls = serve_cmd.add_argument_group(
        "TLS", "PEM files, reloaded when they change (for cert-manager's rotation)"
    )
    tls.add_argument("--tls-cert", type=Path, help="serve TLS with this certificate chain")
    tls.add_argument("--tls-key", type=Path, help="the private key of --tls-cert")
    tls.add_argument(
        "--tls-client-ca", type=Path, help="mutual TLS: clients need a certificate from this CA"
    )
    bounds = serve_cmd.add_argument_group(
        "limits", "what one server takes from the triggers it serves (docs/operating.md, Tenants)"
    )
    for flag, default, meaning in (
        ("--max-metadata-keys", limits.MAX_METADATA_KEYS, "keys in one trigger's metadata"),
        ("--max-value-length", limits.MAX_VALUE_LENGTH, "characters in one key or value"),
        ("--max-metadata-chars", limits.MAX_METADATA_CHARS, "characters in one trigger's metadata"),
        ("--max-queues", limits.MAX_QUEUES, "queues sampled at once"),
        ("--max-queues-per-broker", limits.MAX_QUEUES_PER_BROKER, "queues sampled on one broker"),
        ("--max-streams", limits.MAX_STREAMS, "StreamIsActive streams open at once"),
        ("--max-trigger-series", limits.MAX_TRIGGER_SERIES, "triggers with metrics series"),
    ):
        bounds.add_argument(
            flag,
            type=_positive_int,
            default=default,
            metavar="N",
            help=f"most {meaning} (default {default})",
        )
    serve_cmd.add_argument(
        "--health-port",
        type=int,
        help="also serve grpc.health.v1 alone in plain text on this port, for kubelet's gRPC "
        "probes, which cannot use TLS",
    )

    probe_cmd = commands.add_parser(
        "probe", help="sample one queue and show its signals and decision", parents=[common]
    )
    probe_cmd.add_argument(
        "--duration", type=float, default=5.0, help="seconds to sample (default 5)"
    )
    probe_cmd.add_argument("--json", action="store_true", help="print one JSON object")
    probe_cmd.add_argument("metadata", nargs="+", metavar="KEY=VALUE", help="trigger metadata")

    check_cmd = commands.add_parser(
        "check",
        help="validate, offline, the triggers of ScaledObject and ScaledJob manifests that "
        "point at this scaler",
        description=check.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    check_cmd.add_argument(
        "files", nargs="+", type=Path, metavar="FILE", help="YAML manifests; - reads stdin"
    )
    check_cmd.add_argument(
        "--profile",
        action="append",
        default=[],
        metavar="NAME",
        help="a connection profile the scaler holds (repeat; also from --connections-dir and "
        "QUEUE_AGE_SCALER_CONNECTION_<NAME>)",
    )
    check_cmd.add_argument(
        "--scaler-address",
        action="append",
        default=[],
        metavar="HOST:PORT",
        help="check the external triggers with this scalerAddress (repeat); default: the "
        "external triggers whose metadata has one of this scaler's keys",
    )
    simulate_command.add_parser(commands)
    return parser


def _tls_files(parser: argparse.ArgumentParser, args: argparse.Namespace) -> TlsFiles | None:
    if args.tls_cert is None and args.tls_key is None:
        if args.tls_client_ca is not None:
            parser.error("--tls-client-ca needs --tls-cert and --tls-key")
        return None
    if args.tls_cert is None or args.tls_key is None:
        parser.error("--tls-cert and --tls-key go together")
    return TlsFiles(args.tls_cert, args.tls_key, args.tls_client_ca)


def _positive_int(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"{number} is below 1")
    return number


def _limits(args: argparse.Namespace) -> limits.Limits:
    return limits.Limits(
        max_metadata_keys=args.max_metadata_keys,
        max_value_length=args.max_value_length,
        max_metadata_chars=args.max_metadata_chars,
        max_queues=args.max_queues,
        max_queues_per_broker=args.max_queues_per_broker,
        max_streams=args.max_streams,
        max_trigger_series=args.max_trigger_series,
    )


def _metadata(pairs: list[str]) -> dict[str, str]:
    metadata: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"probe: {pair!r} is not KEY=VALUE (for example queue=default)")
        metadata[key] = value
    return metadata


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    logs.configure(args.log_level, args.log_format)
    if args.command == "simulate":
        return simulate_command.run(args)
    profiles = load_profiles(directory=args.connections_dir)
    if args.command == "check":
        return check.main(args.files, profiles, args.profile, args.scaler_address)
    if args.command == "serve":
        config = ServerConfig(
            host=args.host,
            port=args.port,
            metrics_port=None if args.no_metrics else args.metrics_port,
            grace=args.grace,
            profiles=profiles,
            tls=_tls_files(parser, args),
            health_port=args.health_port,
            limits=_limits(args),
        )
        try:
            asyncio.run(serve(config))
        except CannotListen as error:
            option = "--" + error.setting.replace("_", "-")
            hint = f"choose another with {option}" if error.in_use else f"check --host and {option}"
            print(f"serve: {error}; {hint}", file=sys.stderr)
            return 2
        except ScalerError as error:
            print(f"serve: {error}", file=sys.stderr)
            return 2
        return 0
    try:
        result = asyncio.run(probe(_metadata(args.metadata), profiles, args.duration))
    except ScalerError as error:
        code, message = status_of(error)  # what the server would answer KEDA
        print(f"probe: {code.name}: {message}", file=sys.stderr)
        return 2
    print(json.dumps(result) if args.json else render_table(result))
    return 0
