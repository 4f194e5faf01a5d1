"""Samples a pgtable queue in one round trip: waiting and started rows, the oldest waiting
row's ``enqueued_at``, and the id sequence's last value (every job ever added).

PostgreSQL's errors become the adapter contract's (:mod:`brokers.errors`): no answer is
``BrokerUnreachable``, a refused login ``BrokerRefused``, a missing table or column
``QueueMisconfigured``, anything else ``BrokerUnavailable``; what PostgreSQL said goes to the
error's ``detail`` (the server's log), with the URL's password taken out.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
from psycopg import errors, sql

from brokers.base import Precision, QueueSnapshot, QueueSource
from brokers.connections import Connections
from brokers.errors import (
    BrokerRefused,
    BrokerUnavailable,
    BrokerUnreachable,
    QueueMisconfigured,
    ScalerError,
    logged_detail,
)
from qas_example_format import TableOptions

CONNECT_TIMEOUT = 2
#: SQLSTATE classes of a refused login: invalid authorization, insufficient privilege
REFUSED_STATES = ("28", "42501")

_SAMPLE = sql.SQL(
    "SELECT count(*) FILTER (WHERE started_at IS NULL),"
    " count(*) FILTER (WHERE started_at IS NOT NULL),"
    " extract(epoch FROM min(enqueued_at) FILTER (WHERE started_at IS NULL))::float8,"
    " coalesce(pg_sequence_last_value(pg_get_serial_sequence({table}, 'id')), 0)"
    " FROM {name}"
)


class TableAdapter:
    """One pgtable queue, through a connection of its own (opened again after a failure): it
    takes none of the server's shared ``connections``."""

    broker = "postgres"

    def __init__(self, source: QueueSource, connections: Connections) -> None:
        self.queue = source.queue
        self._source = source
        schema = source.options_as(TableOptions).schema
        self._query = _SAMPLE.format(
            table=sql.Literal(f'"{schema}"."{source.queue}"'),
            name=sql.Identifier(schema, source.queue),
        )
        self._connection: psycopg.AsyncConnection[tuple[Any, ...]] | None = None

    async def sample(self) -> QueueSnapshot:
        try:
            if self._connection is None or self._connection.closed:
                self._connection = await psycopg.AsyncConnection.connect(
                    self._source.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT
                )
            cursor = await self._connection.execute(self._query)
            row = await cursor.fetchone()
        except psycopg.Error as error:
            await self.aclose()
            raise self._failure(error) from None
        observed_at = time.time()
        assert row is not None  # an aggregate answers one row
        waiting, started, oldest, added = (int(row[0]), int(row[1]), row[2], int(row[3]))
        return QueueSnapshot(
            observed_at=observed_at,
            depth=waiting,
            in_flight=started,
            oldest_enqueued_at=float(oldest) if oldest is not None else None,
            oldest_precision=Precision.EXACT if oldest is not None else Precision.UNKNOWN,
            oldest_source="enqueued_at" if oldest is not None else "",
            arrivals_total=added,
            completions_total=added - waiting - started,  # a done job's row is deleted
            counts_source="id-sequence",
        )

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()

    def _failure(self, error: psycopg.Error) -> ScalerError:
        broker, queue = self.broker, self.queue
        detail = logged_detail(error, self._source.url)
        state = error.sqlstate or ""
        if isinstance(error, errors.UndefinedTable | errors.UndefinedColumn):
            return QueueMisconfigured(
                f"{self._source.describe()}: the table or one of its columns (id, enqueued_at, "
                "started_at) does not exist; create it as the format describes, or fix queue "
                "and tableSchema",
                detail=detail,
            )
        if state.startswith(REFUSED_STATES):
            return BrokerRefused(broker, queue, detail=detail)
        if isinstance(error, psycopg.OperationalError) and not state:
            return BrokerUnreachable(broker, queue, detail=detail)
        return BrokerUnavailable(
            broker, queue, f"PostgreSQL answered {state or 'an error'}", detail=detail
        )
