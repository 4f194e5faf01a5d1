"""TLS and mutual TLS on the gRPC port, with real certificates, a real Redis queue behind the
answers, and certificate rotation while the server runs."""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import pytest
import redis
from grpc_health.v1 import health_pb2, health_pb2_grpc

from scaler.errors import InvalidTlsFiles
from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc
from scaler.server import RunningServer, ServerConfig, running_server
from scaler.tls import TlsFiles
from tests.certs import Authority, Issued, served_certificate

pytestmark = pytest.mark.integration

#: every channel makes its own connection (and handshake), never one shared by another channel
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]


class Pki:
    """A CA, a server certificate laid out as a Kubernetes Secret volume, a client certificate."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.ca = Authority()
        self.ca_file = root / "ca.crt"
        self.ca_file.write_bytes(self.ca.issued.cert_pem)
        self.client = self.ca.issue("keda-operator", server=False)
        self.client_files = self.client.write(root / "client", "tls")
        self.volume = root / "volume"
        self.volume.mkdir()
        self.generation = 0
        self.server = self.rotate()
        for name in ("tls.crt", "tls.key", "ca.crt"):
            (self.volume / name).symlink_to(Path("..data") / name)

    def rotate(self, issued: Issued | None = None) -> Issued:
        """Swap in a new server certificate as the kubelet updates a Secret volume: write a new
        timestamped folder, then atomically repoint the ``..data`` symlink at it."""
        issued = issued or self.ca.issue(f"scaler-{self.generation}", server=True)
        self.generation += 1
        folder = self.volume / f"..{self.generation}"
        issued.write(folder, "tls")
        (folder / "ca.crt").write_bytes(self.ca.issued.cert_pem)
        link = self.volume / "..data_tmp"
        link.symlink_to(folder.name)
        os.replace(link, self.volume / "..data")
        return issued

    def files(self, *, mutual: bool) -> TlsFiles:
        return TlsFiles(
            self.volume / "tls.crt",
            self.volume / "tls.key",
            self.volume / "ca.crt" if mutual else None,
        )

    def credentials(self, *, client: Issued | None = None) -> grpc.ChannelCredentials:
        if client is None:
            return grpc.ssl_channel_credentials(self.ca.issued.cert_pem)
        return grpc.ssl_channel_credentials(
            self.ca.issued.cert_pem, client.key_pem, client.cert_pem
        )


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki(tmp_path)


@pytest.fixture
async def mtls_server(pki: Pki) -> AsyncIterator[RunningServer]:
    config = ServerConfig(
        host="127.0.0.1",
        port=0,
        metrics_port=None,
        grace=1.0,
        tls=pki.files(mutual=True),
        health_port=0,
    )
    async with running_server(config) as server:
        yield server


@pytest.fixture
def sidekiq_queue(redis_url: str) -> Iterator[str]:
    queue = f"qas-tls-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(redis_url)
    stamp = int(time.time() * 1000) - 30_000
    client.lpush(f"queue:{queue}", json.dumps({"jid": "a", "enqueued_at": stamp}))
    yield queue
    client.delete(f"queue:{queue}")
    client.close()


def trigger(redis_url: str, queue: str) -> pb.ScaledObjectRef:
    metadata = {
        "scalerAddress": "localhost:6000",
        "enableTLS": "true",
        "url": redis_url,
        "queue": queue,
        "format": "sidekiq",
        "workerThroughput": "1",
    }
    return pb.ScaledObjectRef(name="workers", namespace="shop", scalerMetadata=metadata)


async def health(port: int, credentials: grpc.ChannelCredentials | None) -> int:
    target = f"127.0.0.1:{port}"
    channel = (
        grpc.aio.insecure_channel(target, options=OWN_CONNECTION)
        if credentials is None
        else grpc.aio.secure_channel(target, credentials, options=OWN_CONNECTION)
    )
    async with channel:
        response = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=5
        )
    return int(response.status)


async def test_mutual_tls_answers_a_client_with_a_valid_certificate(
    pki: Pki, mtls_server: RunningServer, redis_url: str, sidekiq_queue: str
) -> None:
    target = f"127.0.0.1:{mtls_server.port}"
    credentials = pki.credentials(client=pki.client)
    async with grpc.aio.secure_channel(target, credentials, options=OWN_CONNECTION) as channel:
        stub = pb_grpc.ExternalScalerStub(channel)
        ref = trigger(redis_url, sidekiq_queue)
        spec = await stub.GetMetricSpec(ref, timeout=5)
        name = spec.metricSpecs[0].metricName
        values = await stub.GetMetrics(
            pb.GetMetricsRequest(scaledObjectRef=ref, metricName=name), timeout=5
        )
        active = await stub.IsActive(ref, timeout=5)
    assert name == f"queue-age-workers-{sidekiq_queue}"
    assert values.metricValues[0].metricValueFloat >= 1
    assert active.result is True


@pytest.mark.parametrize("client", ["none", "other CA", "plain text"])
async def test_mutual_tls_refuses_a_client_without_a_valid_certificate(
    pki: Pki, mtls_server: RunningServer, client: str
) -> None:
    if client == "plain text":
        credentials = None
    elif client == "none":
        credentials = pki.credentials()
    else:
        stranger = Authority("another CA").issue("keda-operator", server=False)
        credentials = pki.credentials(client=stranger)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await health(mtls_server.port, credentials)
    assert refused.value.code() is grpc.StatusCode.UNAVAILABLE


async def test_the_plain_health_port_serves_kubelet_probes_under_mutual_tls(
    mtls_server: RunningServer,
) -> None:
    assert mtls_server.health_port is not None
    assert await health(mtls_server.health_port, None) == health_pb2.HealthCheckResponse.SERVING
    async with grpc.aio.insecure_channel(f"127.0.0.1:{mtls_server.health_port}") as channel:
        with pytest.raises(grpc.aio.AioRpcError) as unknown:
            await pb_grpc.ExternalScalerStub(channel).IsActive(pb.ScaledObjectRef(), timeout=5)
    assert unknown.value.code() is grpc.StatusCode.UNIMPLEMENTED


async def test_tls_without_a_client_ca_needs_no_client_certificate(pki: Pki) -> None:
    config = ServerConfig(
        host="127.0.0.1", port=0, metrics_port=None, grace=1.0, tls=pki.files(mutual=False)
    )
    async with running_server(config) as server:
        assert (
            await health(server.port, pki.credentials()) == health_pb2.HealthCheckResponse.SERVING
        )
        with pytest.raises(grpc.aio.AioRpcError):
            await health(server.port, None)


async def test_a_rotated_certificate_is_served_from_the_next_connection(
    pki: Pki, mtls_server: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    port, client = mtls_server.port, pki.client_files
    assert (
        served_certificate(port, pki.ca_file, client).serial_number == pki.server.cert.serial_number
    )

    renewed = pki.rotate()
    assert served_certificate(port, pki.ca_file, client).serial_number == renewed.cert.serial_number
    credentials = pki.credentials(client=pki.client)
    assert await health(port, credentials) == health_pb2.HealthCheckResponse.SERVING

    # a key that does not match its certificate is not served: the current certificate stays
    mismatched = Issued(
        pki.ca.issue("broken", server=True).cert, pki.ca.issue("x", server=True).key
    )
    with caplog.at_level(logging.WARNING, logger="scaler.tls"):
        pki.rotate(mismatched)
        assert (
            served_certificate(port, pki.ca_file, client).serial_number
            == renewed.cert.serial_number
        )
        assert await health(port, credentials) == health_pb2.HealthCheckResponse.SERVING
    assert "keeping the current certificate" in caplog.text

    fixed = pki.rotate()
    assert served_certificate(port, pki.ca_file, client).serial_number == fixed.cert.serial_number


async def test_unreadable_or_mismatched_files_stop_the_server_at_start(pki: Pki) -> None:
    other_key = pki.ca.issue("other", server=True).key_pem
    (pki.root / "other.key").write_bytes(other_key)
    for files in (
        TlsFiles(pki.root / "missing.crt", pki.volume / "tls.key"),
        TlsFiles(pki.volume / "tls.crt", pki.root / "other.key"),
        TlsFiles(pki.volume / "tls.crt", pki.volume / "tls.key", pki.volume / "tls.key"),
    ):
        config = ServerConfig(host="127.0.0.1", port=0, metrics_port=None, tls=files)
        with pytest.raises(InvalidTlsFiles):
            async with running_server(config):
                pass
