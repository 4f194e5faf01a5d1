"""kombu's Redis layout: priority list names, unacked entries, bindings and routing."""

from __future__ import annotations

import json

import pytest

from brokers.kombu_layout import (
    Binding,
    Delivery,
    binding_key,
    parse_binding,
    parse_delivery,
    priority_lists,
    routes_to,
)

MESSAGE = {"body": "W1s3XSwge30sIHt9XQ==", "headers": {"task": "reports.render"}, "properties": {}}


def test_priority_lists_bare_name_first_then_steps_3_6_9() -> None:
    assert priority_lists("", "mail") == (
        "mail",
        "mail\x06\x163",
        "mail\x06\x166",
        "mail\x06\x169",
    )
    assert priority_lists("app1:", "mail")[0:2] == ("app1:mail", "app1:mail\x06\x163")


def test_binding_key_is_prefixed_as_is() -> None:
    assert binding_key("app1:", "events") == "app1:_kombu.binding.events"


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ([MESSAGE, "", "mail"], Delivery("", "mail")),
        ([MESSAGE, "events", "reports.daily"], Delivery("events", "reports.daily")),
        ([MESSAGE, "", None], Delivery("", "")),
    ],
    ids=["anonymous exchange", "named exchange", "no routing key"],
)
def test_parse_delivery(entry: list[object], expected: Delivery) -> None:
    assert parse_delivery(json.dumps(entry).encode()) == expected


@pytest.mark.parametrize(
    "value",
    [
        b"\x80\x05pickled",
        json.dumps({"exchange": "", "routing_key": "mail"}).encode(),
        json.dumps([MESSAGE, ""]).encode(),
        json.dumps([MESSAGE, None, "mail"]).encode(),
        json.dumps([MESSAGE, "", 7]).encode(),
    ],
    ids=["not json", "object", "two items", "null exchange", "number routing key"],
)
def test_parse_delivery_rejects_other_values(value: bytes) -> None:
    assert parse_delivery(value) is None


def test_parse_binding() -> None:
    assert parse_binding(b"mail\x06\x16\x06\x16mail") == Binding("mail", "", "mail")
    topic = b"reports.#\x06\x16^reports\\..*?$\x06\x16daily"
    assert parse_binding(topic) == Binding("reports.#", r"^reports\..*?$", "daily")
    assert parse_binding(b"mail") is None


DIRECT = [Binding("rk.mail", "", "mail"), Binding("rk.sms", "", "sms")]
TOPIC = [
    Binding("reports.#", r"^reports\..*?$", "daily"),
    Binding("audit.*", r"^audit\.[^\.]+$", "audit"),
]


@pytest.mark.parametrize(
    ("delivery", "queue", "bindings", "expected"),
    [
        (Delivery("", "mail"), "mail", [], True),
        (Delivery("", "mail"), "sms", [], False),
        (Delivery("", "mail"), "sms", [Binding("mail", "", "sms")], False),  # anon: no bindings
        (Delivery("direct", "rk.mail"), "mail", DIRECT, True),
        (Delivery("direct", "rk.mail"), "sms", DIRECT, False),
        (Delivery("direct", "mail"), "mail", DIRECT, False),
        (Delivery("direct", "rk.mail"), "mail", [], False),  # no binding set: nowhere
        (Delivery("events", "reports.daily.eu"), "daily", TOPIC, True),
        (Delivery("events", "reports.daily.eu"), "audit", TOPIC, False),
        (Delivery("events", "audit.login.eu"), "audit", TOPIC, False),
        (Delivery("events", "audit.login"), "audit", TOPIC, True),
        (Delivery("events", "x"), "broken", [Binding("x", "(", "broken")], False),
    ],
)
def test_routes_to_as_kombu_routes(
    delivery: Delivery, queue: str, bindings: list[Binding], expected: bool
) -> None:
    assert routes_to(delivery, queue, bindings) is expected
