"""The real `queue-age-scaler serve` with mutual TLS and JSON logs, driven by the real grpcurl:
a client certificate gets answers, no certificate gets none; kubelet's plain health port
answers; each decision is one JSON log line with its inputs as fields."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
import redis
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.certs import Authority
from tests.conftest import free_port

pytestmark = pytest.mark.integration
BIN = Path(sys.executable).parent


@dataclass
class TlsServer:
    address: str
    process: subprocess.Popen[bytes]
    ca: Path
    client_cert: Path
    client_key: Path


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[TlsServer]:
    ca = Authority()
    ca_file = tmp_path / "ca.crt"
    ca_file.write_bytes(ca.issued.cert_pem)
    server_cert, server_key = ca.issue("queue-age-scaler", server=True).write(tmp_path, "server")
    client_cert, client_key = ca.issue("keda-operator", server=False).write(tmp_path, "client")
    port, health_port = free_port(), free_port()
    process = subprocess.Popen(
        [
            str(BIN / "queue-age-scaler"),
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-metrics",
            "--tls-cert",
            str(server_cert),
            "--tls-key",
            str(server_key),
            "--tls-client-ca",
            str(ca_file),
            "--health-port",
            str(health_port),
            "--log-format",
            "json",
            "--log-level",
            "DEBUG",
        ],
        stderr=subprocess.PIPE,
    )
    wait_until_serving(f"127.0.0.1:{health_port}", process)
    yield TlsServer(f"127.0.0.1:{port}", process, ca_file, client_cert, client_key)
    if process.poll() is None:
        process.kill()
    process.communicate()


def wait_until_serving(address: str, process: subprocess.Popen[bytes]) -> None:
    """Poll the plain health port, as kubelet's gRPC probe does."""
    deadline = time.monotonic() + 20
    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while True:
            try:
                status = stub.Check(health_pb2.HealthCheckRequest(), timeout=1).status
                if status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                _, log = process.communicate()
                raise AssertionError(f"the server did not start: {log.decode()}")
            time.sleep(0.1)


def grpcurl(
    server: TlsServer, *args: str, client_cert: bool = True
) -> subprocess.CompletedProcess[str]:
    tls = ["-cacert", str(server.ca)]
    if client_cert:
        tls += ["-cert", str(server.client_cert), "-key", str(server.client_key)]
    return subprocess.run(
        [str(BIN / "grpcurl"), *tls, *args],
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_grpcurl_over_mutual_tls_and_json_logs(tls_server: TlsServer, redis_url: str) -> None:
    queue = f"qas-tls-smoke-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(redis_url)
    stamp = int(time.time() * 1000) - 10_000
    client.lpush(f"queue:{queue}", json.dumps({"jid": "a", "enqueued_at": stamp}))
    address = tls_server.address
    try:
        listed = grpcurl(tls_server, address, "list")
        assert listed.returncode == 0, listed.stderr
        assert "externalscaler.ExternalScaler" in listed.stdout

        health = grpcurl(tls_server, "-d", "{}", address, "grpc.health.v1.Health/Check")
        assert '"status": "SERVING"' in health.stdout, health.stderr

        ref = {
            "name": "workers",
            "namespace": "shop",
            "scalerMetadata": {
                "scalerAddress": address, "enableTLS": "true", "url": redis_url,
                "queue": queue, "format": "sidekiq", "workerThroughput": "1",
            },
        }  # fmt: skip
        spec = grpcurl(
            tls_server,
            "-d",
            json.dumps(ref),
            address,
            "externalscaler.ExternalScaler/GetMetricSpec",
        )
        assert f'"metricName": "queue-age-workers-{queue}"' in spec.stdout, spec.stderr
        request = {"scaledObjectRef": ref, "metricName": f"queue-age-workers-{queue}"}
        values = grpcurl(
            tls_server,
            "-d",
            json.dumps(request),
            address,
            "externalscaler.ExternalScaler/GetMetrics",
        )
        assert '"metricValueFloat": 1' in values.stdout, values.stderr

        refused = grpcurl(tls_server, address, "list", client_cert=False)
        assert refused.returncode != 0
        assert "SERVING" not in refused.stdout
        assert "externalscaler" not in refused.stdout
    finally:
        client.delete(f"queue:{queue}")
        client.close()

    tls_server.process.send_signal(signal.SIGTERM)
    _, stderr = tls_server.process.communicate(timeout=15)
    assert tls_server.process.returncode == 0
    entries = [json.loads(line) for line in stderr.decode().splitlines() if line.startswith("{")]
    assert any("mutual TLS" in e["message"] for e in entries)
    decision = next(e for e in entries if e.get("queue") == queue and "desired_workers" in e)
    assert decision["logger"] == "scaler.service"
    assert decision["desired_workers"] == 1
    assert decision["namespace"] == "shop" and decision["scaled_object"] == "workers"
    assert decision["depth"] == 1
    assert decision["oldest_age_seconds"] >= 10
    assert decision["oldest_age_precision"] == "exact"
    assert decision["reason"] and decision["target_age_seconds"] == 60
