"""Format ``pgtable``: jobs waiting in a PostgreSQL table, the way a ``FOR UPDATE SKIP LOCKED``
worker keeps them. The table is the trigger's ``queue`` in the schema ``tableSchema`` (default
``public``)::

    CREATE TABLE jobs (
        id          bigserial PRIMARY KEY,               -- arrivals: the sequence's last value
        enqueued_at timestamptz NOT NULL DEFAULT now(),  -- the oldest waiting job's age
        started_at  timestamptz                          -- NULL while the job waits
    );

A worker sets ``started_at`` when it takes a job and deletes the row when the job is done, so
waiting rows are the depth, started rows the jobs in flight, and the id sequence counts every
job ever added. This module only describes the format (no client is imported here); the
adapter, :mod:`qas_example_format.adapter`, is imported when a queue of the format is first
sampled.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import SplitResult

from brokers.base import End, QueueSource
from brokers.format_api import BrokerInfo, FormatInfo, SnapshotModel, SourceContext

#: a PostgreSQL identifier as the adapter quotes it: at most 63 bytes (NAMEDATALEN - 1)
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]{0,62}$")


def check_postgres_url(url: str, parts: SplitResult) -> None:
    """A URL libpq can read (ValueError otherwise); the message never shows the URL."""
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict

    try:
        conninfo_to_dict(url)
    except ProgrammingError:
        raise ValueError(
            "libpq cannot read the URL; expected postgresql://user:password@host:port/database"
        ) from None


POSTGRES = BrokerInfo(
    name="postgres",
    title="PostgreSQL",
    schemes=("postgresql", "postgres"),
    default_format="pgtable",
    offline_url="postgresql://offline-check/postgres",
    url_form="postgresql://user:password@host:port/database",
    check_url=check_postgres_url,
)


@dataclass(frozen=True, slots=True)
class TableOptions:
    """Where the queue's table is: ``QueueSource.options`` of a pgtable trigger."""

    schema: str = "public"


def table_options(context: SourceContext) -> TableOptions:
    """``tableSchema``; the table (the trigger's ``queue``) must be a plain identifier too."""
    reader = context.reader
    schema = reader.get("tableSchema") or "public"
    if not _IDENTIFIER.match(schema):
        raise reader.fail(
            "tableSchema", "a PostgreSQL schema name: a letter or _, then letters, digits, _ or $"
        )
    if not _IDENTIFIER.match(reader.get("queue") or ""):
        raise reader.fail(
            "queue", "the table's name: a letter or _, then letters, digits, _ or $ (63 at most)"
        )
    return TableOptions(schema)


def table_model(info: FormatInfo, source: QueueSource) -> SnapshotModel:
    """In the simulator: the id sequence's counts, the enqueue time of every row."""
    return SnapshotModel("id-sequence", "enqueued_at", End.TAIL)


PGTABLE = FormatInfo(
    name="pgtable",
    broker=POSTGRES,
    key_prefix="",
    oldest_end=End.HEAD,
    reports_consumers=False,
    reports_in_flight=True,
    layout_keys=("tableSchema",),
    adapter="qas_example_format.adapter:TableAdapter",
    options=table_options,
    snapshot_model=table_model,
    summary="jobs in a PostgreSQL table (tableSchema; an example plugin)",
)
