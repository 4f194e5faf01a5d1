"""Fixtures shared by the integration and smoke tests: a running scaler server and a stub."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator

import grpc
import pytest

from scaler.generated import externalscaler_pb2_grpc as pb_grpc
from scaler.server import RunningServer, ServerConfig, running_server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
async def scaler() -> AsyncIterator[RunningServer]:
    config = ServerConfig(host="127.0.0.1", port=0, metrics_port=0, grace=2.0)
    async with running_server(config) as server:
        yield server


@pytest.fixture
async def channel(scaler: RunningServer) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{scaler.port}") as chan:
        yield chan


@pytest.fixture
def stub(channel: grpc.aio.Channel) -> pb_grpc.ExternalScalerStub:
    return pb_grpc.ExternalScalerStub(channel)
