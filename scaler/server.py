"""The gRPC server: KEDA's ExternalScaler, grpc.health.v1, reflection, and /metrics over HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from brokers.registry import open_adapter
from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc
from scaler.metrics import Metrics
from scaler.sampler import IDLE_AFTER, AdapterFactory, SamplerRegistry
from scaler.service import FIRST_SAMPLE_TIMEOUT, ExternalScalerService
from scaler.tls import TlsFiles, server_credentials

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


@dataclass(frozen=True)
class ServerConfig:
    host: str = "[::]"
    port: int = DEFAULT_PORT
    #: None: no metrics endpoint
    metrics_port: int | None = DEFAULT_METRICS_PORT
    grace: float = DEFAULT_GRACE
    profiles: Mapping[str, str] = field(default_factory=dict)
    idle_after: float = IDLE_AFTER
    first_sample_timeout: float = FIRST_SAMPLE_TIMEOUT
    #: None: plain text; else TLS (mutual TLS with a client CA), reloaded when the files change
    tls: TlsFiles | None = None
    #: a plain-text port with grpc.health.v1 alone, for kubelet's gRPC probes (they cannot use TLS)
    health_port: int | None = None


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
    """Serve until the block exits, then shut down gracefully within ``config.grace``."""
    metrics = Metrics()
    samplers = SamplerRegistry(open_adapter_, metrics, idle_after=config.idle_after)
    service = ExternalScalerService(
        samplers,
        metrics,
        config.profiles,
        first_sample_timeout=config.first_sample_timeout,
        idle_after=config.idle_after,
    )
    health_servicer = health.aio.HealthServicer()  # type: ignore[attr-defined]
    server = grpc.aio.server()
    pb_grpc.add_ExternalScalerServicer_to_server(service, server)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = (SCALER_SERVICE, health.SERVICE_NAME, reflection.SERVICE_NAME)
    reflection.enable_server_reflection(names, server)
    address = f"{config.host}:{config.port}"
    if config.tls is None:
        port = server.add_insecure_port(address)
    else:
        port = server.add_secure_port(address, server_credentials(config.tls))
    health_server, health_port = None, None
    if config.health_port is not None:
        health_server = grpc.aio.server()
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, health_server)
        health_port = health_server.add_insecure_port(f"{config.host}:{config.health_port}")
    http_server = None
    metrics_port = None
    if config.metrics_port is not None:
        http_server, metrics_port = metrics.serve_http(
            config.host.strip("[]") or "::", config.metrics_port
        )
    await server.start()
    if health_server is not None:
        await health_server.start()
    for name in ("", SCALER_SERVICE):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    log.info(
        "serving %s on port %d (metrics on %s, plain-text health on %s)",
        "plain text" if config.tls is None else "TLS" if config.tls.client_ca is None else "mutual TLS",
        port, metrics_port, health_port,
    )  # fmt: skip
    try:
        yield RunningServer(port, metrics_port, service, metrics, samplers, health_port)
    finally:
        await _shut_down(
            config.grace, server, health_server, health_servicer, service, samplers, http_server
        )


async def _shut_down(
    grace: float,
    server: grpc.aio.Server,
    health_server: grpc.aio.Server | None,
    health_servicer: health.aio.HealthServicer,  # type: ignore[name-defined]
    service: ExternalScalerService,
    samplers: SamplerRegistry,
    http_server: WSGIServer | None,
) -> None:
    """Stop everything within ``grace``: health says NOT_SERVING, StreamIsActive streams end with
    OK at once, running RPCs get the grace, the samplers stop meanwhile (each within the grace,
    whatever it waits on), and the metrics port closes last, whatever happened before."""
    log.info("shutting down: no new RPCs, %gs for running ones", grace)
    try:
        await health_servicer.enter_graceful_shutdown()
        service.shutting_down.set()
        servers = [server] if health_server is None else [server, health_server]
        await asyncio.gather(*(_stop_grpc(s, grace) for s in servers), samplers.aclose(grace))
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


async def serve(config: ServerConfig) -> None:
    """Run until SIGTERM or SIGINT, then stop within the grace; a process still running
    ``FORCE_EXIT_AFTER_GRACE`` seconds after the grace exits with status ``EXIT_STUCK``."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with running_server(config):
        await stop.wait()
        _exit_after(config.grace + FORCE_EXIT_AFTER_GRACE)
