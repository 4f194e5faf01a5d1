"""amqps:// and https:// with a CA and a client certificate, through a TLS proxy in front of the
real RabbitMQ that demands a client certificate signed by the test CA."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from brokers.connections import Connections
from brokers.registry import open_adapter
from scaler.errors import UNREACHABLE, BrokerUnavailable
from tests.certs import Authority
from tests.integration.rabbit import Rabbit, rabbit, spec_for_profile, unique

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

PASSWORD = "guest"  # the test broker's; the point is the TLS path


@pytest.fixture
def helper(rabbitmq_url: str) -> Iterator[Rabbit]:
    with rabbit(rabbitmq_url) as made:
        yield made


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    ca = Authority()
    other = Authority("another CA")
    server_cert, server_key = ca.issue("localhost", server=True).write(tmp_path, "server")
    client_cert, client_key = ca.issue("queue-age-scaler", server=False).write(tmp_path, "client")
    ca_file, _ = ca.issued.write(tmp_path, "ca")
    other_ca, _ = other.issued.write(tmp_path, "other-ca")
    return {
        "ca": ca_file,
        "other_ca": other_ca,
        "server_cert": server_cert,
        "server_key": server_key,
        "client_cert": client_cert,
        "client_key": client_key,
    }


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError):
        pass
    finally:
        writer.close()


@contextlib.asynccontextmanager
async def tls_proxy(target: int, files: dict[str, Path]) -> AsyncIterator[int]:
    """A mutual-TLS listener on a free port, forwarding to 127.0.0.1:``target``."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(files["ca"]))
    context.load_cert_chain(files["server_cert"], files["server_key"])
    context.verify_mode = ssl.CERT_REQUIRED
    writers: list[asyncio.StreamWriter] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            writer.close()
            return
        writers.append(up_writer)
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=context)
    try:
        async with server:
            yield server.sockets[0].getsockname()[1]
    finally:
        for writer in writers:
            writer.close()
            with contextlib.suppress(ConnectionError, ssl.SSLError):
                await writer.wait_closed()


async def test_amqps_and_https_with_a_ca_and_a_client_certificate(
    connections: Connections, helper: Rabbit, rabbitmq_url: str, files: dict[str, Path]
) -> None:
    queue = helper.declare(unique("tls"))
    helper.publish(queue, 4)
    async with tls_proxy(5672, files) as amqps, tls_proxy(15672, files) as https:
        tls = f"cacertfile={files['ca']}&certfile={files['client_cert']}&keyfile={files['client_key']}"
        url = f"amqps://guest:{PASSWORD}@localhost:{amqps}/%2F?{tls}"
        # no user and no TLS options of its own: the AMQP URL's credentials and TLS files
        adapter = open_adapter(
            spec_for_profile(url, queue, f"https://localhost:{https}").source, connections
        )
        try:
            for _ in range(30):  # until the broker shows the new queue's figures
                snapshot = await adapter.sample()
                if not snapshot.warnings:
                    break
                await asyncio.sleep(0.5)
        finally:
            await adapter.aclose()
    assert (snapshot.depth, snapshot.in_flight, snapshot.arrivals_total) == (4, 0, 4)


async def test_a_server_certificate_from_another_ca_is_refused(
    connections: Connections, helper: Rabbit, files: dict[str, Path]
) -> None:
    queue = helper.declare(unique("tls-refused"))
    async with tls_proxy(5672, files) as amqps, tls_proxy(15672, files) as https:
        tls = f"cacertfile={files['other_ca']}&certfile={files['client_cert']}&keyfile={files['client_key']}"
        url = f"amqps://guest:{PASSWORD}@localhost:{amqps}/%2F?{tls}"
        adapter = open_adapter(
            spec_for_profile(url, queue, f"https://localhost:{https}").source, connections
        )
        try:
            with pytest.raises(BrokerUnavailable) as caught:
                await adapter.sample()
        finally:
            await adapter.aclose()
    assert str(caught.value) == f"rabbitmq queue {queue!r}: {UNREACHABLE}"
    logged = caught.value.logged  # what failed on each side goes to the server's log
    assert "AMQP" in logged and "management API" in logged
    assert f":{PASSWORD}@" not in logged and "amqps://" not in logged
