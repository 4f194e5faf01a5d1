"""Failing sources cost little, through the real gRPC server: a broker that accepts and never
answers does not slow another queue's answers, a source that keeps failing backs off instead of
being retried every sampleInterval, and its failures are logged once, not once per sample."""

from __future__ import annotations

import asyncio
import logging
import time

import grpc
import pytest
import redis.asyncio as aioredis

from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc
from scaler.server import RunningServer

pytestmark = pytest.mark.integration


class Listener:
    """A local TCP port that accepts connections, counts them, and either never answers or
    closes them at once."""

    def __init__(self, *, hang: bool) -> None:
        self.hang = hang
        self.connections = 0
        self._held: list[asyncio.StreamWriter] = []
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> Listener:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for writer in self._held:
            writer.close()
        assert self._server is not None
        self._server.close()

    @property
    def port(self) -> int:
        assert self._server is not None
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        if self.hang:
            self._held.append(writer)
        else:
            writer.close()


def trigger(url: str, queue: str, interval: str = "1s") -> pb.ScaledObjectRef:
    return pb.ScaledObjectRef(
        name=f"so-{queue}",
        namespace="shop",
        scalerMetadata={
            "url": url,
            "queue": queue,
            "format": "list",
            "workerThroughput": "1",
            "sampleInterval": interval,
        },
    )


async def test_a_broker_that_never_answers_does_not_delay_another_queue(
    scaler: RunningServer,
    stub: pb_grpc.ExternalScalerAsyncStub,
    redis_url: str,
    r: aioredis.Redis,
    token: str,
) -> None:
    await r.rpush(f"qas-healthy-{token}", "job")
    healthy = trigger(redis_url, f"qas-healthy-{token}")
    async with Listener(hang=True) as hung:
        stuck = trigger(f"redis://127.0.0.1:{hung.port}/0", "stuck")
        assert (await stub.IsActive(healthy)).result is True
        stuck_codes: list[grpc.StatusCode] = []

        async def ask_the_stuck_one() -> None:
            for _ in range(8):
                try:
                    await stub.IsActive(stuck)
                except grpc.aio.AioRpcError as error:
                    stuck_codes.append(error.code())
                await asyncio.sleep(0.5)

        stuck_calls = asyncio.create_task(ask_the_stuck_one())
        slowest = 0.0
        for _ in range(60):  # 6 s: the stuck queue's samples time out (2 s) meanwhile
            started = time.monotonic()
            active = await stub.IsActive(healthy)
            slowest = max(slowest, time.monotonic() - started)
            assert active.result is True
            await asyncio.sleep(0.1)
        await stuck_calls
        assert hung.connections >= 1  # the stuck queue was tried
    assert stuck_codes == [grpc.StatusCode.UNAVAILABLE] * 8
    # the healthy queue is answered from its cache: a wait on the stuck broker would be >= 1 s
    assert slowest < 0.5


async def test_a_failing_source_backs_off_and_logs_once(
    scaler: RunningServer, stub: pb_grpc.ExternalScalerAsyncStub, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="scaler.sampler")
    async with Listener(hang=False) as closing:
        so = trigger(f"redis://127.0.0.1:{closing.port}/0", "closed", interval="100ms")
        started = time.monotonic()
        codes: list[grpc.StatusCode] = []
        while time.monotonic() - started < 7.0:
            try:
                await stub.IsActive(so)
            except grpc.aio.AioRpcError as error:
                codes.append(error.code())
            await asyncio.sleep(0.25)
        tries = closing.connections
    assert set(codes) == {grpc.StatusCode.UNAVAILABLE}
    # every 100 ms would be 70 samples; backing off (0.2, 0.4, 0.8, 1.6, 3.2 s) makes 6, each
    # of which may connect twice (one immediate retry on a broken connection)
    assert 2 <= tries <= 14, tries
    warnings = [
        rec
        for rec in caplog.records
        if rec.levelno == logging.WARNING and "'closed'" in rec.getMessage()
    ]
    assert len(warnings) == 1, [rec.getMessage() for rec in warnings]
    assert warnings[0].exc_info is None  # an expected broker error: no traceback
