"""Key names and list ends of the list formats whose layout needs no server to check."""

from __future__ import annotations

import pytest

from brokers.formats import End
from brokers.redis_queues import huey_name, layout_for
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
