"""A format from a plugin, served end to end: the example plugin's ``pgtable`` (a job table on
the real PostgreSQL), through KEDA's calls over gRPC, as a built-in format is."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator

import grpc
import psycopg
import pytest

from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc
from tests.integration.dependencies import DEFAULT_POSTGRES_URL
from tests.integration.test_keda_protocol import keda_sequence, ref

pytestmark = pytest.mark.integration

POSTGRES_URL = os.environ.get("POSTGRES_URL", DEFAULT_POSTGRES_URL)


@pytest.fixture
def table() -> Iterator[tuple[psycopg.Connection[tuple[object, ...]], str]]:
    """A pgtable queue of this test's own: waiting rows have no ``started_at``."""
    try:
        connection = psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as error:
        pytest.fail(
            f"PostgreSQL is not reachable at POSTGRES_URL ({error}). Start it (scripts/services "
            "does) or point POSTGRES_URL at one; integration tests never skip.",
            pytrace=False,
        )
    name = f"qas_jobs_{uuid.uuid4().hex[:10]}"
    connection.execute(
        f"CREATE TABLE {name} (id bigserial PRIMARY KEY, "
        "enqueued_at timestamptz NOT NULL DEFAULT now(), started_at timestamptz)"
    )
    try:
        yield connection, name
    finally:
        connection.execute(f"DROP TABLE IF EXISTS {name}")
        connection.close()


def trigger(name: str, **changes: str) -> pb.ScaledObjectRef:
    return ref(
        {
            "url": POSTGRES_URL,
            "queue": name,
            "format": "pgtable",
            "workerThroughput": "0.5",
            "targetAge": "60s",
            "sampleInterval": "200ms",
            **changes,
        }
    )


async def test_a_plugin_format_is_served_through_keda_s_calls(
    stub: pb_grpc.ExternalScalerAsyncStub,
    table: tuple[psycopg.Connection[tuple[object, ...]], str],
) -> None:
    connection, name = table
    connection.execute(
        f"INSERT INTO {name} (enqueued_at) SELECT now() - interval '2 minutes' FROM generate_series(1, 40)"
    )
    connection.execute(f"INSERT INTO {name} (started_at) VALUES (now()), (now())")
    so = trigger(name)
    await asyncio.sleep(0.5)  # a few samples: rates from the id sequence (nothing arrives)
    metric, value, active = await keda_sequence(stub, so)
    assert metric.metricName == f"queue-age-workers-{name.replace('_', '-')}"
    assert metric.targetSizeFloat == 1.0
    # 40 jobs to drain within targetDrainTime (60 s) at 0.5 jobs/s per worker: 2 workers
    assert value.metricValueFloat == 2.0
    assert active is True

    connection.execute(f"DELETE FROM {name}")  # the workers took and finished every job
    for _ in range(50):
        if not (await stub.IsActive(so)).result:
            break
        await asyncio.sleep(0.2)
    assert (await stub.IsActive(so)).result is False


async def test_a_wrong_plugin_key_or_a_missing_table_is_refused(
    stub: pb_grpc.ExternalScalerAsyncStub,
    table: tuple[psycopg.Connection[tuple[object, ...]], str],
) -> None:
    _, name = table
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.GetMetricSpec(trigger(name, tableSchema="no such schema"))
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details() == (
        "invalid trigger metadata: tableSchema: got 'no such schema'; expected a PostgreSQL "
        "schema name: a letter or _, then letters, digits, _ or $"
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.IsActive(trigger(name, tableSchema="qas_nowhere"))
    assert caught.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert caught.value.details() == (
        f"postgres queue {name!r} (pgtable): the table or one of its columns (id, enqueued_at, "
        "started_at) does not exist; create it as the format describes, or fix queue and "
        "tableSchema"
    )
