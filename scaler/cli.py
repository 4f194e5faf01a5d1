"""The ``queue-age-scaler`` command: ``serve``, ``probe``, ``check`` and ``simulate``.

The options before the command (``--log-level``, ``--log-format``, ``--connections-dir``) may
also follow it, so an image whose entrypoint is ``queue-age-scaler serve`` takes them as args.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import uvloop

from brokers import registry
from brokers.connections import MAX_CONNECTIONS_PER_BROKER
from scaler import __version__, check, formats_command, limits, logs
from scaler.bounds import (
    DEFAULT_MAX_HISTORY_SAMPLES,
    DEFAULT_MAX_RATE_WINDOW,
    DEFAULT_MIN_SAMPLE_INTERVAL,
    MIN_SAMPLE_INTERVAL,
    Bounds,
)
from scaler.budget_registry import COOLDOWN as BUDGET_COOLDOWN
from scaler.budget_registry import HOLD as BUDGET_HOLD
from scaler.budget_registry import IDLE as BUDGET_IDLE
from scaler.ceilings.registry import MIN_PROBE_INTERVAL, REFRESH_INTERVAL
from scaler.cli_types import positive_float, positive_int
from scaler.connections import load_profiles
from scaler.durations import parse_duration
from scaler.errors import CannotListen, InvalidPlugin, ScalerError
from scaler.pool_spec import DEFAULT_MAX_POOL_QUEUES
from scaler.probe import probe, render_table
from scaler.sample_schedule import SLOW_INTERVAL
from scaler.server import DEFAULT_GRACE, DEFAULT_METRICS_PORT, DEFAULT_PORT, ServerConfig, serve
from scaler.service import status_of
from scaler.simulate import command as simulate_command
from scaler.tls import TlsFiles
from scaler.url_policy import UrlPolicy

#: what ``queue-age-scaler --help`` says first (plain text: argparse shows it as it is)
DESCRIPTION = """\
A KEDA external scaler: it sizes job workers from the age of the oldest waiting
job, the time the backlog needs to drain, and the capacity of shared
dependencies, for queues on Redis and RabbitMQ.

--log-level, --log-format and --connections-dir may also follow the command
(queue-age-scaler serve --log-format json)."""


#: the event loops ``serve`` can run on, by ``--event-loop`` name
EVENT_LOOPS: dict[str, Callable[[Coroutine[Any, Any, None]], None]] = {
    "uvloop": uvloop.run,
    "asyncio": asyncio.run,
}


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
        help="a folder with one file per connection profile (its URL, or a mapping of url, "
        "managementUrl and namespaces)",
        default=default(None),
    )
    return options


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _probe_interval(text: str) -> float:
    seconds = _duration(text)
    if seconds < MIN_PROBE_INTERVAL:
        raise argparse.ArgumentTypeError(
            f"{text} is below {MIN_PROBE_INTERVAL:g}s (each reading opens a connection)"
        )
    return seconds


def _slow_interval(text: str) -> float:
    seconds = _duration(text)
    if seconds < MIN_SAMPLE_INTERVAL:
        raise argparse.ArgumentTypeError(f"{text} is below {MIN_SAMPLE_INTERVAL:g}s")
    return seconds


def _tenant_options(*, open_urls_note: str) -> argparse.ArgumentParser:
    """What a trigger may make the scaler do: where its own URL may point, and its bounds."""
    options = argparse.ArgumentParser(add_help=False)
    group = options.add_argument_group(
        "tenants", "what a ScaledObject author may make the scaler do (docs/operating.md, Tenants)"
    )
    group.add_argument(
        "--allow-url",
        action="append",
        default=[],
        metavar="SCHEME://HOST[:PORT]",
        help="where a trigger's own url (and RabbitMQ management API) may point; repeat. HOST is "
        "a host glob (*.redis.svc), an IP or a CIDR (10.0.0.0/8); no PORT: any. " + open_urls_note,
    )
    group.add_argument(
        "--profiles-only",
        action="store_true",
        help="triggers may only name connection profiles: url, urlFromEnv and managementUrl "
        "are refused",
    )
    group.add_argument(
        "--min-sample-interval",
        type=_duration,
        default=DEFAULT_MIN_SAMPLE_INTERVAL,
        metavar="DURATION",
        help=f"the shortest sampleInterval a trigger may ask (default {DEFAULT_MIN_SAMPLE_INTERVAL:g}s, "
        f"at least {MIN_SAMPLE_INTERVAL * 1000:g}ms)",
    )
    group.add_argument(
        "--max-rate-window",
        type=_duration,
        default=DEFAULT_MAX_RATE_WINDOW,
        metavar="DURATION",
        help=f"the longest rateWindow a trigger may ask (default {DEFAULT_MAX_RATE_WINDOW:g}s; 0: "
        "no ceiling)",
    )
    group.add_argument(
        "--max-history-samples",
        type=int,
        default=DEFAULT_MAX_HISTORY_SAMPLES,
        metavar="N",
        help="the most samples a trigger's rateWindow may hold, rateWindow / sampleInterval, "
        f"and a queue's history keeps (default {DEFAULT_MAX_HISTORY_SAMPLES}: an hour at 1s)",
    )
    group.add_argument(
        "--max-pool-queues",
        type=int,
        default=DEFAULT_MAX_POOL_QUEUES,
        metavar="N",
        help="the most queues one pool trigger (queues) may have, listed or matched by its "
        f"globs (default {DEFAULT_MAX_POOL_QUEUES})",
    )
    return options


def _access(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[UrlPolicy, Bounds]:
    """The ``--allow-url``/``--profiles-only`` policy and the bounds, or exit naming the flag."""
    try:
        urls = UrlPolicy.of(args.allow_url, profiles_only=args.profiles_only)
        bounds = Bounds(
            args.min_sample_interval,
            args.max_rate_window or None,
            args.max_history_samples,
            args.max_pool_queues,
        )
    except ValueError as error:
        parser.error(str(error))
    return urls, bounds


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

    serve_cmd = commands.add_parser(
        "serve",
        help="run the gRPC server for KEDA",
        parents=[
            common,
            _tenant_options(
                open_urls_note="With neither this nor --profiles-only: anywhere, with a warning"
            ),
        ],
    )
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
        "--event-loop",
        choices=tuple(EVENT_LOOPS),
        default="uvloop",
        help="the event loop the server runs on: uvloop (default: 5-15%% more of KEDA's calls "
        "a second than asyncio's, benchmarks/README.md) or Python's own asyncio",
    )
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
        (
            "--max-new-metadata",
            limits.MAX_NEW_METADATA,
            "trigger metadata maps not seen before waiting to be parsed (one is parsed per turn "
            "of the event loop, at most --new-metadata-rate a second; past this, "
            "RESOURCE_EXHAUSTED)",
        ),
        (
            "--max-connections-per-broker",
            MAX_CONNECTIONS_PER_BROKER,
            "connections open to one broker (a Redis URL, a management API), shared by its "
            "queues; a sample that finds them all busy waits for one",
        ),
    ):
        bounds.add_argument(
            flag,
            type=positive_int,
            default=default,
            metavar="N",
            help=f"most {meaning} (default {default})",
        )
    bounds.add_argument(
        "--new-metadata-rate",
        type=positive_float,
        default=limits.NEW_METADATA_RATE,
        metavar="PER_SECOND",
        help="most trigger metadata maps not seen before parsed a second, so that a flood of "
        f"them leaves the server room for the triggers it knows (default {limits.NEW_METADATA_RATE:g})",
    )
    serve_cmd.add_argument(
        "--probe-interval",
        type=_probe_interval,
        default=REFRESH_INTERVAL,
        metavar="DURATION",
        help=f"how often each dependency probe reads its dependency (default "
        f"{REFRESH_INTERVAL:g}s, at least {MIN_PROBE_INTERVAL:g}s; docs/operating.md, Typed and "
        "probed ceilings)",
    )
    serve_cmd.add_argument(
        "--budget-idle",
        type=_duration,
        default=BUDGET_IDLE,
        metavar="DURATION",
        help=f"a pool (ScaledObject) that asked nothing for this long frees its share of the "
        f"dependency budgets it shares with others (default {BUDGET_IDLE:g}s)",
    )
    serve_cmd.add_argument(
        "--budget-hold",
        type=_duration,
        default=BUDGET_HOLD,
        metavar="DURATION",
        help="a pool told to scale in may run its old workers this long, the longest HPA "
        "scale-down stabilisation window of the ScaledObjects sharing a budget; others grow into "
        f"its slots only after (default {BUDGET_HOLD:g}s, the HPA's default)",
    )
    serve_cmd.add_argument(
        "--budget-cooldown",
        type=_duration,
        default=BUDGET_COOLDOWN,
        metavar="DURATION",
        help="a pool answered active may keep one worker this long after, the longest KEDA "
        f"cooldownPeriod of the ScaledObjects sharing a budget (default {BUDGET_COOLDOWN:g}s, "
        "KEDA's default)",
    )
    serve_cmd.add_argument(
        "--slow-sample-interval",
        type=_slow_interval,
        default=SLOW_INTERVAL,
        metavar="DURATION",
        help=f"the longest interval between two samples of a queue that is idle (default "
        f"{SLOW_INTERVAL:g}s; a steady one through which work flows at most a quarter of its "
        "rateWindow): a queue is read at its trigger's sampleInterval while a StreamIsActive "
        "watches it, it changes or KEDA asks after a pause, and when KEDA asks about it while "
        "its oldest job is near or over targetAge; a value at or below sampleInterval reads every queue at its "
        "sampleInterval always (docs/operating.md, Sampling)",
    )
    serve_cmd.add_argument(
        "--broker-command-budget",
        type=positive_float,
        default=None,
        metavar="N",
        help="at most N commands per second to each broker URL, as the scaler sends them (a "
        "script is one; Redis's INFO also counts the commands it runs): the least urgent queues "
        "are read less often first, up to --slow-sample-interval, then up to 120s (default: no "
        "budget)",
    )
    serve_cmd.add_argument(
        "--history-checkpoint",
        type=Path,
        default=None,
        metavar="DIR",
        help="write the queues' arrival histories to DIR/<host name>.json every 15s and at "
        "shutdown, and resume a queue's from the newest file there: on an emptyDir a restarted "
        "container, on a shared volume a replica taking over, estimates ages at once "
        "(docs/operating.md, Restarts and failover)",
    )
    serve_cmd.add_argument(
        "--health-port",
        type=int,
        help="also serve grpc.health.v1 alone in plain text on this port, for kubelet's gRPC "
        "probes, which cannot use TLS",
    )

    probe_cmd = commands.add_parser(
        "probe",
        help="sample one queue and show its signals and decision",
        parents=[
            common,
            _tenant_options(open_urls_note="Default: anywhere (probe runs as the operator)"),
        ],
    )
    probe_cmd.add_argument(
        "--namespace",
        help="check that a ScaledObject in this namespace may use the profile (default: not checked)",
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
        parents=[common, _tenant_options(open_urls_note="Give serve's flags to check as it would")],
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
    formats_command.add_parser(commands)
    return parser


def _tls_files(parser: argparse.ArgumentParser, args: argparse.Namespace) -> TlsFiles | None:
    if args.tls_cert is None and args.tls_key is None:
        if args.tls_client_ca is not None:
            parser.error("--tls-client-ca needs --tls-cert and --tls-key")
        return None
    if args.tls_cert is None or args.tls_key is None:
        parser.error("--tls-cert and --tls-key go together")
    return TlsFiles(args.tls_cert, args.tls_key, args.tls_client_ca)


def _limits(args: argparse.Namespace) -> limits.Limits:
    return limits.Limits(
        max_metadata_keys=args.max_metadata_keys,
        max_value_length=args.max_value_length,
        max_metadata_chars=args.max_metadata_chars,
        max_queues=args.max_queues,
        max_queues_per_broker=args.max_queues_per_broker,
        max_streams=args.max_streams,
        max_trigger_series=args.max_trigger_series,
        max_new_metadata=args.max_new_metadata,
        new_metadata_rate=args.new_metadata_rate,
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
    try:
        registry.formats()  # a broken format plugin stops every command here, named
    except InvalidPlugin as error:
        print(f"{args.command}: {error}", file=sys.stderr)
        return 2
    if args.command == "formats":
        return formats_command.run(args)
    if args.command == "simulate":
        return simulate_command.run(args)
    try:
        profiles = load_profiles(directory=args.connections_dir)
    except (ScalerError, OSError) as error:
        print(f"{args.command}: {error}", file=sys.stderr)
        return 2
    urls, bounds = _access(parser, args)
    if args.command == "check":
        return check.main(
            args.files, profiles, args.profile, args.scaler_address, urls=urls, bounds=bounds
        )
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
            urls=urls,
            min_sample_interval=bounds.min_sample_interval,
            max_rate_window=bounds.max_rate_window,
            max_history_samples=args.max_history_samples,
            max_pool_queues=bounds.max_pool_queues,
            probe_interval=args.probe_interval,
            max_connections_per_broker=args.max_connections_per_broker,
            budget_idle=args.budget_idle,
            budget_hold=args.budget_hold,
            budget_cooldown=args.budget_cooldown,
            slow_sample_interval=args.slow_sample_interval,
            broker_command_budget=args.broker_command_budget,
            history_checkpoint=args.history_checkpoint,
        )
        try:
            EVENT_LOOPS[args.event_loop](serve(config))
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
        result = asyncio.run(
            probe(
                _metadata(args.metadata),
                profiles,
                args.duration,
                namespace=args.namespace,
                urls=urls,
                bounds=bounds,
            )
        )
    except ScalerError as error:
        code, message = status_of(error)  # what the server would answer KEDA
        print(f"probe: {code.name}: {message}", file=sys.stderr)
        return 2
    print(json.dumps(result) if args.json else render_table(result))
    return 0
