"""kombu's Redis layout: priority list names, unacked entries, bindings and routing."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from kombu.transport.redis import PRIORITY_STEPS as KOMBU_PRIORITY_STEPS
from kombu.transport.redis import Channel

from brokers.kombu_layout import (
    PRIORITY_STEPS,
    SEP,
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


def test_priority_lists_with_celerys_recipe_steps_and_sep() -> None:
    # Celery's docs: priority_steps=list(range(10)), sep=":"
    assert priority_lists("", "celery", range(10), ":") == (
        "celery",
        *(f"celery:{step}" for step in range(1, 10)),
    )
    assert priority_lists("app1:", "mail", (0, 5), "|") == ("app1:mail", "app1:mail|5")


def test_priority_lists_without_step_0_have_no_bare_name() -> None:
    assert priority_lists("", "mail", (1, 5), ":") == ("mail:1", "mail:5")


#: kombu's Redis ``Channel``, its methods called on a stand-in for an instance
KOMBU_CHANNEL: Any = Channel


def _kombu_channel(steps: list[int], sep: str) -> Any:
    """Just enough of a kombu Redis ``Channel`` for its naming methods (no connection)."""
    channel: Any = SimpleNamespace(priority_steps=steps, sep=sep)
    channel.priority = lambda n: KOMBU_CHANNEL.priority(channel, n)
    return channel


@pytest.mark.parametrize(
    ("steps", "sep"),
    [
        pytest.param(list(KOMBU_PRIORITY_STEPS), "\x06\x16", id="kombu's defaults"),
        pytest.param(list(range(10)), ":", id="Celery's recipe"),
        pytest.param([0, 5], "|", id="two steps"),
        pytest.param([2, 4, 8], ".", id="no step 0"),
    ],
)
def test_priority_lists_are_the_keys_kombu_sizes(steps: list[int], sep: str) -> None:
    # Channel._size reads _q_for_pri(queue, step) for each step: the keys must be those
    channel = _kombu_channel(steps, sep)
    expected = tuple(KOMBU_CHANNEL._q_for_pri(channel, "mail", step) for step in steps)
    assert priority_lists("", "mail", steps, sep) == expected


def test_defaults_are_kombus() -> None:
    assert tuple(KOMBU_PRIORITY_STEPS) == PRIORITY_STEPS
    assert Channel.sep == SEP
    assert priority_lists("", "mail") == priority_lists("", "mail", (0, 3, 6, 9), "\x06\x16")


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
        b"[" + b"[" * 100_000 + b"]" * 100_000 + b', "", "mail"]',
    ],
    ids=["not json", "object", "two items", "null exchange", "number routing key", "too deep"],
)
def test_parse_delivery_rejects_other_values(value: bytes) -> None:
    assert parse_delivery(value) is None


def test_parse_binding() -> None:
    assert parse_binding(b"mail\x06\x16\x06\x16mail") == Binding("mail", "", "mail")
    topic = b"reports.#\x06\x16^reports\\..*?$\x06\x16daily"
    assert parse_binding(topic) == Binding("reports.#", r"^reports\..*?$", "daily")
    assert parse_binding(b"mail") is None


def test_parse_binding_with_a_custom_sep() -> None:
    # Channel._queue_bind joins the member with the transport's sep, as get_table splits it
    assert parse_binding(b"mail::mail", ":") == Binding("mail", "", "mail")
    topic = b"reports.#:^reports\\..*?$:daily"
    assert parse_binding(topic, ":") == Binding("reports.#", r"^reports\..*?$", "daily")
    assert parse_binding(topic) is None  # read with kombu's default sep: not a binding
    assert parse_binding(b"mail\x06\x16\x06\x16mail", ":") is None
    # a sep that also occurs in a name splits the member in four: kombu cannot unpack it either
    assert parse_binding(b"a:b::mail", ":") is None


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
