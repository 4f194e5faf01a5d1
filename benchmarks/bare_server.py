"""Reference ExternalScaler servers for benchmarks/keda_poll.py.

``python -m benchmarks.bare_server PORT`` answers KEDA's messages with constants: one MetricSpec,
one MetricValue, ``IsActive`` true. It is the ceiling a grpc.aio server in Python can reach on
this machine: whatever it costs is gRPC and protobuf, not the scaler's own work.

``python -m benchmarks.bare_server PORT --keda-redis redis://127.0.0.1:6379/0`` does what KEDA's
built-in Redis Lists scaler does (kedacore/keda ``pkg/scalers/redis_scaler.go``): on every
``GetMetrics`` and every ``IsActive`` it runs one ``EVAL`` of a Lua script that reads the key's
``TYPE`` and then its length with ``ZCARD``, ``SCARD``, ``HLEN`` or ``LLEN`` (a missing key reads
as an empty list), or ``XLEN`` for a stream (KEDA's Redis Streams scaler reads one such figure per
call too). The key is the trigger's ``listName`` or, as in the Sidekiq layout, ``queue:``
followed by the trigger's ``queue``. ``GetMetricSpec`` does not touch Redis, as in KEDA.

Both serve on 127.0.0.1 by default and stop on SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a path: make the project importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc
import redis.asyncio as aioredis

from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc

#: KEDA's script, in substance: the key's type picks the command that measures it
KEDA_LENGTH_SCRIPT = """
local key = KEYS[1]
local kind = redis.call('TYPE', key).ok
local command = {zset = 'ZCARD', set = 'SCARD', list = 'LLEN', hash = 'HLEN', stream = 'XLEN',
                 none = 'LLEN'}
return redis.call(command[kind], key)
"""
#: KEDA's default ``listLength`` (the HPA target) and ``activationListLength``
KEDA_LIST_LENGTH = 5
KEDA_ACTIVATION_LENGTH = 0

BARE_METRIC = "bare"
_BARE_SPEC = pb.GetMetricSpecResponse(
    metricSpecs=[pb.MetricSpec(metricName=BARE_METRIC, targetSize=1, targetSizeFloat=1.0)]
)
_BARE_VALUES = pb.GetMetricsResponse(
    metricValues=[pb.MetricValue(metricName=BARE_METRIC, metricValue=1, metricValueFloat=1.0)]
)
_BARE_ACTIVE = pb.IsActiveResponse(result=True)

Context = grpc.aio.ServicerContext[Any, Any]


class BareScaler(pb_grpc.ExternalScalerServicer):
    """Constant answers: the cost of gRPC alone."""

    async def GetMetricSpec(
        self, request: pb.ScaledObjectRef, context: Context
    ) -> pb.GetMetricSpecResponse:
        return _BARE_SPEC

    async def GetMetrics(
        self, request: pb.GetMetricsRequest, context: Context
    ) -> pb.GetMetricsResponse:
        return _BARE_VALUES

    async def IsActive(self, request: pb.ScaledObjectRef, context: Context) -> pb.IsActiveResponse:
        return _BARE_ACTIVE

    async def StreamIsActive(
        self, request: pb.ScaledObjectRef, context: Context
    ) -> AsyncIterator[pb.IsActiveResponse]:
        yield _BARE_ACTIVE


def list_key(metadata: dict[str, str] | Any) -> str:
    """The Redis key a trigger names: ``listName``, else Sidekiq's ``queue:<queue>``."""
    name = metadata.get("listName")
    return str(name) if name else f"queue:{metadata.get('queue', '')}"


class KedaRedisScaler(pb_grpc.ExternalScalerServicer):
    """KEDA's built-in Redis scaler as an external scaler: one EVAL per GetMetrics and IsActive."""

    def __init__(self, client: aioredis.Redis) -> None:
        self._redis = client

    async def _length(self, ref: pb.ScaledObjectRef, context: Context) -> int:
        try:
            return int(await self._redis.eval(KEDA_LENGTH_SCRIPT, 1, list_key(ref.scalerMetadata)))
        except aioredis.RedisError as error:
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"redis: {error}")
            raise  # unreachable: abort raises

    async def GetMetricSpec(
        self, request: pb.ScaledObjectRef, context: Context
    ) -> pb.GetMetricSpecResponse:
        target = int(request.scalerMetadata.get("listLength", KEDA_LIST_LENGTH))
        return pb.GetMetricSpecResponse(
            metricSpecs=[
                pb.MetricSpec(
                    metricName=f"redis-{list_key(request.scalerMetadata)}",
                    targetSize=target,
                    targetSizeFloat=float(target),
                )
            ]
        )

    async def GetMetrics(
        self, request: pb.GetMetricsRequest, context: Context
    ) -> pb.GetMetricsResponse:
        length = await self._length(request.scaledObjectRef, context)
        name = request.metricName or f"redis-{list_key(request.scaledObjectRef.scalerMetadata)}"
        return pb.GetMetricsResponse(
            metricValues=[
                pb.MetricValue(metricName=name, metricValue=length, metricValueFloat=float(length))
            ]
        )

    async def IsActive(self, request: pb.ScaledObjectRef, context: Context) -> pb.IsActiveResponse:
        length = await self._length(request, context)
        return pb.IsActiveResponse(result=length > KEDA_ACTIVATION_LENGTH)

    async def StreamIsActive(
        self, request: pb.ScaledObjectRef, context: Context
    ) -> AsyncIterator[pb.IsActiveResponse]:
        """Not used by the benchmark (KEDA calls it only for external-push): one answer."""
        yield await self.IsActive(request, context)


async def serve(host: str, port: int, keda_redis: str | None) -> None:
    client = aioredis.Redis.from_url(keda_redis) if keda_redis else None
    servicer: pb_grpc.ExternalScalerServicer = (
        KedaRedisScaler(client) if client is not None else BareScaler()
    )
    server = grpc.aio.server()
    pb_grpc.add_ExternalScalerServicer_to_server(servicer, server)
    bound = server.add_insecure_port(f"{host}:{port}")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await server.start()
    mode = "keda-redis" if client is not None else "bare"
    print(f"{mode} scaler serving on {host}:{bound}", file=sys.stderr, flush=True)
    try:
        await stop.wait()
    finally:
        await server.stop(0.5)
        if client is not None:
            with contextlib.suppress(aioredis.RedisError):
                await client.aclose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("port", type=int, help="gRPC port (0 picks one)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument(
        "--keda-redis",
        metavar="URL",
        help="act like KEDA's built-in Redis scaler against this Redis (one EVAL per call)",
    )
    args = parser.parse_args(argv)
    asyncio.run(serve(args.host, args.port, args.keda_redis))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
