"""Key names and list ends of the list formats whose layout needs no server to check."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from brokers.formats import End
from brokers.redis_bullmq import count_workers, worker_names
from brokers.redis_queues import huey_name, layout_for
from brokers.redis_resque import alive, serves
from scaler.spec import parse_metadata


def layout(format_name: str, queue: str, **keys: str) -> tuple[str, End]:
    # a whole trigger, as the server parses it; only its source is used
    metadata = {"url": "redis://localhost", "queue": queue, "format": format_name, **keys}
    found = layout_for(parse_metadata(metadata | {"workerThroughput": "1"}).source)
    return found.list_key, found.oldest_end


@pytest.mark.parametrize(
    ("format_name", "queue", "keys", "expected"),
    [
        ("resque", "images", {}, ("resque:queue:images", End.HEAD)),
        ("resque", "images", {"keyPrefix": "myapp"}, ("myapp:queue:images", End.HEAD)),
        ("huey", "my-app.v2", {}, ("huey.redis.myappv2", End.TAIL)),
        ("huey", "reports_2", {"keyPrefix": "staging"}, ("staging.reports_2", End.TAIL)),
        ("huey", "reports", {"keyPrefix": ""}, ("reports", End.TAIL)),
    ],
)
def test_list_key_and_oldest_end(
    format_name: str, queue: str, keys: dict[str, str], expected: tuple[str, End]
) -> None:
    assert layout(format_name, queue, **keys) == expected


def test_huey_name_keeps_what_huey_keeps() -> None:
    assert huey_name("My App: reports-v2.1_x") == "MyAppreportsv21_x"


# --- the workers' registries ------------------------------------------------------------------


def test_bullmq_workers_are_the_connections_named_for_the_queue() -> None:
    listing = "\n".join(
        [
            "id=1 addr=127.0.0.1:5 name=bull:ZW1haWxz fd=8",  # an unnamed Worker of "emails"
            "id=2 addr=127.0.0.1:6 name=bull:ZW1haWxz:w:mailer-1 fd=9",  # a named one
            "id=3 addr=127.0.0.1:7 name= fd=10",  # the Queue's own connection: unnamed
            "id=4 addr=127.0.0.1:8 name=bull:ZW1haWxzMg== fd=11",  # "emails2"
            "id=5 addr=127.0.0.1:9 name=bull:ZW1haWxz:qe fd=12",  # QueueEvents, not a Worker
            "id=6 addr=127.0.0.1:9 name=other:ZW1haWxz fd=13",  # another prefix
        ]
    )
    assert count_workers(listing, "bull", "emails") == 2
    assert worker_names("bull", "emails") == ("bull:ZW1haWxz", "bull:ZW1haWxz:w:")


@pytest.mark.parametrize(
    ("worker_id", "serves_images"),
    [
        ("web-1:101:images", True),
        ("web-1:101:mail,images", True),
        ("web-1:101:*", True),
        ("web-1:101:im*", True),
        ("web-1:101:im?ges", True),
        ("web-1:101:mail", False),
        ("web-1:101:*,!images", False),
        ("web-1:101:!images,*", False),
        ("host:101:images:x", False),  # split at the first two colons, as Resque does: "images:x"
    ],
)
def test_resque_worker_queues_match_as_resque_does(worker_id: str, serves_images: bool) -> None:
    assert serves(worker_id, "images") is serves_images


def test_resque_heartbeat_within_the_prune_interval() -> None:
    now = 1_800_000_000.0
    beat = datetime.fromtimestamp(now - 299, UTC).isoformat()
    assert alive(beat, now)
    assert not alive(datetime.fromtimestamp(now - 301, UTC).isoformat(), now)
    assert alive("", now)  # Resque before heartbeats: counted while registered
