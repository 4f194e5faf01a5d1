"""The gRPC server: KEDA's ExternalScaler, grpc.health.v1, reflection, and /metrics over HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import signal
import socket
import threading
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from brokers import registry
from brokers.base import AdapterFactory
from brokers.connections import MAX_CONNECTIONS_PER_BROKER, Connections
from brokers.registry import open_adapter
from scaler.bounds import (
    DEFAULT_MAX_HISTORY_SAMPLES,
    DEFAULT_MAX_RATE_WINDOW,
    DEFAULT_MIN_SAMPLE_INTERVAL,
    Bounds,
)
from scaler.budget_registry import COOLDOWN as BUDGET_COOLDOWN
from scaler.budget_registry import HOLD as BUDGET_HOLD
from scaler.budget_registry import IDLE as BUDGET_IDLE
from scaler.budget_registry import BudgetRegistry
from scaler.ceilings.registry import REFRESH_INTERVAL, ProbeRegistry
from scaler.errors import CannotListen
from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc
from scaler.history_checkpoint import Checkpoints
from scaler.limits import Limits
from scaler.metrics import Metrics
from scaler.pool_spec import DEFAULT_MAX_POOL_QUEUES
from scaler.process_memory import (
    freeze_collection_survivors,
    freeze_startup_objects,
    full_passes,
    release_free_memory_every,
)
from scaler.profiles import Profile, as_profiles
from scaler.sample_schedule import SLOW_INTERVAL
from scaler.sampler import IDLE_AFTER, SamplerRegistry
from scaler.service import FIRST_SAMPLE_TIMEOUT, ExternalScalerService
from scaler.tls import TlsFiles, server_credentials
from scaler.url_policy import OPEN_URLS, UrlPolicy

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

log = logging.getLogger(__name__)

SCALER_SERVICE = pb.DESCRIPTOR.services_by_name["ExternalScaler"].full_name
DEFAULT_PORT = 6000
DEFAULT_METRICS_PORT = 8080
DEFAULT_GRACE = 10.0
#: how long stopping the gRPC server may take past its grace before it is left behind
STOP_MARGIN = 0.5
#: a process still running this long after the grace exits anyway, with EXIT_STUCK
FORCE_EXIT_AFTER_GRACE = 1.5
EXIT_STUCK = 1
#: seconds the server waits, after the samplers stopped, for connections they left open to close
CLOSE_LEFTOVERS = 1.0
#: gRPC sets SO_REUSEPORT by default, so a second server on a port in use would start and split
#: KEDA's calls with the first: off, a taken port is an error
GRPC_OPTIONS = (("grpc.so_reuseport", 0),)


@dataclass(frozen=True)
class ServerConfig:
    host: str = "[::]"
    port: int = DEFAULT_PORT
    #: None: no metrics endpoint
    metrics_port: int | None = DEFAULT_METRICS_PORT
    grace: float = DEFAULT_GRACE
    profiles: Mapping[str, Profile | str] = field(default_factory=dict)
    #: where triggers' own URLs may point (serve --allow-url, --profiles-only); default anywhere
    urls: UrlPolicy = OPEN_URLS
    #: the operator's bounds on a trigger (serve --min-sample-interval, --max-rate-window,
    #: --max-history-samples); a rate window of None: no ceiling. The history bound is also
    #: the most snapshots a sampler keeps (SamplerRegistry's max_history)
    min_sample_interval: float = DEFAULT_MIN_SAMPLE_INTERVAL
    max_rate_window: float | None = DEFAULT_MAX_RATE_WINDOW
    max_history_samples: int = DEFAULT_MAX_HISTORY_SAMPLES
    #: the most queues a pool trigger may have (serve --max-pool-queues)
    max_pool_queues: int = DEFAULT_MAX_POOL_QUEUES
    idle_after: float = IDLE_AFTER
    first_sample_timeout: float = FIRST_SAMPLE_TIMEOUT
    #: None: plain text; else TLS (mutual TLS with a client CA), reloaded when the files change
    tls: TlsFiles | None = None
    #: a plain-text port with grpc.health.v1 alone, for kubelet's gRPC probes (they cannot use TLS)
    health_port: int | None = None
    #: what the server takes from triggers: metadata size, queues, streams
    limits: Limits = field(default_factory=Limits)
    #: how often each dependency probe reads its dependency
    probe_interval: float = REFRESH_INTERVAL
    #: connections to one broker (one Redis URL, one management endpoint) at most, shared by
    #: every sampler there (serve --max-connections-per-broker)
    max_connections_per_broker: int = MAX_CONNECTIONS_PER_BROKER
    #: a pool that asked nothing for this long frees its share of a shared budget
    #: (serve --budget-idle)
    budget_idle: float = BUDGET_IDLE
    #: a pool may run what it was answered this long ago: its HPA's scale-down stabilisation
    #: (serve --budget-hold)
    budget_hold: float = BUDGET_HOLD
    #: a pool answered active may run a worker this long after: KEDA's cooldownPeriod
    #: (serve --budget-cooldown)
    budget_cooldown: float = BUDGET_COOLDOWN
    #: the slow bound on a queue's sample interval while it is idle or steady (serve
    #: --slow-sample-interval; None: always the trigger's sampleInterval)
    slow_sample_interval: float | None = SLOW_INTERVAL
    #: commands per second per broker URL the samplers keep to (serve --broker-command-budget;
    #: None: no budget)
    broker_command_budget: float | None = None
    #: where the arrival histories are checkpointed and resumed from (serve
    #: --history-checkpoint; None: nowhere)
    history_checkpoint: Path | None = None


@dataclass
class RunningServer:
    port: int
    metrics_port: int | None
    service: ExternalScalerService
    metrics: Metrics
    samplers: SamplerRegistry
    health_port: int | None = None


@contextlib.asynccontextmanager
async def running_server(
    config: ServerConfig, open_adapter_: AdapterFactory = open_adapter
) -> AsyncIterator[RunningServer]:
    """Serve until the block exits, then shut down gracefully within ``config.grace``.

    Raises :class:`~scaler.errors.InvalidPlugin` before anything starts if a format plugin
    cannot be used."""
    registry.formats()
    bounds = Bounds(
        config.min_sample_interval,
        config.max_rate_window,
        config.max_history_samples,
        config.max_pool_queues,
    )
    profiles = as_profiles(config.profiles)
    metrics = Metrics(max_trigger_series=config.limits.max_trigger_series)
    # the server's own connections: passed to every adapter, closed when the server stops
    connections = Connections(max_per_broker=config.max_connections_per_broker)
    samplers = SamplerRegistry(
        open_adapter_,
        metrics,
        idle_after=config.idle_after,
        limits=config.limits,
        max_history=config.max_history_samples,
        connections=connections,
        slow_interval=config.slow_sample_interval,
        broker_budget=config.broker_command_budget,
        checkpoints=None
        if config.history_checkpoint is None
        else Checkpoints(config.history_checkpoint),
    )
    metrics.watch_traffic(connections.traffic_by_broker)
    probes = ProbeRegistry(metrics, interval=config.probe_interval, idle_after=config.idle_after)
    service = ExternalScalerService(
        samplers,
        metrics,
        profiles,
        budgets=BudgetRegistry(
            idle=config.budget_idle, hold=config.budget_hold, cooldown=config.budget_cooldown
        ),
        first_sample_timeout=config.first_sample_timeout,
        idle_after=config.idle_after,
        limits=config.limits,
        probes=probes,
        urls=config.urls,
        bounds=bounds,
    )
    health_servicer = health.aio.HealthServicer()  # type: ignore[attr-defined]
    server = grpc.aio.server(options=GRPC_OPTIONS)
    pb_grpc.add_ExternalScalerServicer_to_server(service, server)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = (SCALER_SERVICE, health.SERVICE_NAME, reflection.SERVICE_NAME)
    reflection.enable_server_reflection(names, server)
    credentials = None if config.tls is None else server_credentials(config.tls)
    health_server, health_port, http_server, metrics_port = None, None, None, None
    try:
        port = _bind(server, "port", config.host, config.port, credentials)
        if config.health_port is not None:
            health_server = grpc.aio.server(options=GRPC_OPTIONS)
            health_pb2_grpc.add_HealthServicer_to_server(health_servicer, health_server)
            health_port = _bind(health_server, "health_port", config.host, config.health_port)
        if config.metrics_port is not None:
            host = config.host.strip("[]") or "::"
            try:
                http_server, metrics_port = metrics.serve_http(host, config.metrics_port)
            except OSError as error:
                raise _cannot_listen("metrics_port", host, config.metrics_port, error) from None
    except CannotListen:
        for unstarted in (server, health_server):
            if unstarted is not None:
                await unstarted.stop(None)
        await connections.aclose()
        raise
    await server.start()
    if health_server is not None:
        await health_server.start()
    for name in ("", SCALER_SERVICE):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    log.info("%s", _listening(config.tls, port, metrics_port, health_port))
    _warn_about_open_access(config.urls, profiles)
    try:
        yield RunningServer(port, metrics_port, service, metrics, samplers, health_port)
    finally:
        await _shut_down(
            config.grace,
            server,
            health_server,
            health_servicer,
            service,
            samplers,
            probes,
            http_server,
        )
        # what a close cut short left open (nothing, after a clean stop): bounded, as the rest
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(connections.aclose(), CLOSE_LEFTOVERS)


async def _shut_down(
    grace: float,
    server: grpc.aio.Server,
    health_server: grpc.aio.Server | None,
    health_servicer: health.aio.HealthServicer,  # type: ignore[name-defined]
    service: ExternalScalerService,
    samplers: SamplerRegistry,
    probes: ProbeRegistry,
    http_server: WSGIServer | None,
) -> None:
    """Stop everything within ``grace``: health says NOT_SERVING, StreamIsActive streams end with
    OK at once, running RPCs get the grace, the samplers and the dependency probes stop meanwhile
    (each within the grace, whatever it waits on), and the metrics port closes last, whatever
    happened before."""
    log.info("shutting down: no new RPCs, %gs for running ones", grace)
    try:
        await health_servicer.enter_graceful_shutdown()
        service.shutting_down.set()
        servers = [server] if health_server is None else [server, health_server]
        await asyncio.gather(
            *(_stop_grpc(s, grace) for s in servers), samplers.aclose(grace), probes.aclose(grace)
        )
    finally:
        if http_server is not None:
            http_server.shutdown()
            http_server.server_close()
    log.info("stopped")


async def _stop_grpc(server: grpc.aio.Server, grace: float) -> None:
    """``server.stop(grace)``, and not a moment longer than the grace and a margin."""
    try:
        async with asyncio.timeout(grace + STOP_MARGIN):
            await server.stop(grace)
    except TimeoutError:
        log.warning("the gRPC server did not stop within %gs of the grace", STOP_MARGIN)


def _exit_after(seconds: float) -> None:
    """The last resort: unless the process has ended ``seconds`` from now (something ignored
    its cancellation, a thread never returned), log it and exit with ``EXIT_STUCK``."""

    def force() -> None:
        log.error("shutdown did not end within %gs; exiting with status %d", seconds, EXIT_STUCK)
        for handler in logging.getLogger().handlers:
            handler.flush()
        os._exit(EXIT_STUCK)

    timer = threading.Timer(seconds, force)
    timer.daemon = True  # does not keep a process that ended in time
    timer.start()


def _warn_about_open_access(urls: UrlPolicy, profiles: Mapping[str, Profile]) -> None:
    """One warning for each way a ScaledObject author can reach more than a namespace should."""
    if urls.open:
        log.warning(
            "triggers may make the scaler connect to any host and port it can reach with their "
            "own url: restrict them with --allow-url, or --profiles-only (docs/operating.md, "
            "Tenants)"
        )
    unscoped = sorted(name for name, profile in profiles.items() if profile.namespaces is None)
    if unscoped:
        log.warning(
            "connection profile(s) %s have no namespaces: ScaledObjects in every namespace may "
            "use them; list the namespaces in each profile (docs/operating.md, Tenants)",
            ", ".join(unscoped),
        )


def _listening(
    tls: TlsFiles | None, port: int, metrics_port: int | None, health_port: int | None
) -> str:
    """What the server listens on, for people: the ports it has, none it has not."""
    mode = "plain text" if tls is None else "TLS" if tls.client_ca is None else "mutual TLS"
    loop = (
        "uvloop" if type(asyncio.get_running_loop()).__module__.startswith("uvloop") else "asyncio"
    )
    parts = [f"serving gRPC ({mode}, {loop} event loop) on port {port}"]
    if metrics_port is not None:
        parts.append(f"/metrics on port {metrics_port}")
    if health_port is not None:
        parts.append(f"plain-text health on port {health_port}")
    return ", ".join(parts)


def _bind(
    server: grpc.aio.Server,
    setting: str,
    host: str,
    port: int,
    credentials: grpc.ServerCredentials | None = None,
) -> int:
    """Bind ``host:port`` for ``server``; the bound port, or :class:`CannotListen`."""
    if port:  # a port in use or not permitted, found before gRPC logs its own error about it
        refused = _bind_error(host, port)
        if refused is not None and refused.errno in (errno.EADDRINUSE, errno.EACCES):
            raise _cannot_listen(setting, host, port, refused)
    address = f"{host}:{port}"
    try:
        if credentials is None:
            bound = server.add_insecure_port(address)
        else:
            bound = server.add_secure_port(address, credentials)
    except RuntimeError:  # gRPC says only "Failed to bind"
        bound = 0
    if not bound:
        raise _cannot_listen(setting, host, port, _bind_error(host, port))
    return bound


def _bind_error(host: str, port: int) -> OSError | None:
    """What binding ``host:port`` with a plain socket says (gRPC tells no reason)."""
    try:
        found = socket.getaddrinfo(
            host.strip("[]") or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as error:
        return error
    for family, kind, protocol, _, address in found:
        with socket.socket(family, kind, protocol) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC does
            try:
                probe.bind(address)
            except OSError as error:
                return error
    return None


def _cannot_listen(setting: str, host: str, port: int, error: OSError | None) -> CannotListen:
    if error is not None and error.errno == errno.EADDRINUSE:
        return CannotListen(setting, f"port {port} is already in use", in_use=True)
    reason = f" ({error.strerror})" if error is not None and error.strerror else ""
    return CannotListen(setting, f"cannot listen on {host}:{port}{reason}", in_use=False)


async def serve(config: ServerConfig) -> None:
    """Run until SIGTERM or SIGINT, then stop within the grace; a process still running
    ``FORCE_EXIT_AFTER_GRACE`` seconds after the grace exits with status ``EXIT_STUCK``."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with running_server(config):
        log.debug(
            "%d objects made at start left out of garbage collection", freeze_startup_objects()
        )
        freeze_collection_survivors()
        trimming = asyncio.create_task(release_free_memory_every())
        collecting = asyncio.create_task(full_passes())
        await stop.wait()
        trimming.cancel()
        collecting.cancel()
        _exit_after(config.grace + FORCE_EXIT_AFTER_GRACE)
