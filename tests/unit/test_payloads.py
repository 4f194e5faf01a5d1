"""Enqueue times out of each library's payloads, good and bad."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

import pytest

from brokers.payloads import (
    ABSURD,
    BAD_TYPE,
    FUTURE,
    MAX_PAYLOAD_BYTES,
    MAX_PAYLOAD_DEPTH,
    MAX_SKEW,
    MISSING_FIELD,
    NOT_JSON,
    TOO_DEEP,
    TOO_LARGE,
    UNPARSEABLE,
    Raw,
    Stamp,
    celery_stamp,
    checked_at,
    dramatiq_stamp,
    list_stamp,
    no_stamp,
    resque_stamp,
    rq_stamp,
    sidekiq_stamp,
    stamp_reader,
)

NOW = 1_760_000_000.0  # 2025-10-09T08:53:20Z
T = NOW - 42.25  # the enqueue time in every good payload below
T_ISO = datetime.fromtimestamp(T, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def sidekiq_job(**fields: object) -> str:
    job = {
        "retry": True,
        "queue": "default",
        "class": "HardJob",
        "args": [1, "two"],
        "jid": "b4a577edbccf1d805744efa9",
    }
    return json.dumps({**job, **fields})


def dramatiq_message(**fields: object) -> bytes:
    message = {
        "queue_name": "default",
        "actor_name": "send_email",
        "args": ["a@example.com"],
        "kwargs": {},
        "options": {"redis_message_id": "0f1c1e4e-6a52-4b0e-9f43-0d2f1e3b4c5d"},
        "message_id": "5f1b8a47-1c9e-4a4d-8b2a-2b8e4f7c9d10",
        "message_timestamp": int(T * 1000),
    }
    return json.dumps({**message, **fields}).encode()


GOOD: list[tuple[str, Raw, Stamp]] = [
    ("sidekiq 7 float s", sidekiq_job(created_at=T - 1, enqueued_at=T), Stamp(T, "enqueued_at")),
    (
        "sidekiq 8 int ms",
        sidekiq_job(created_at=int(T * 1000) - 5, enqueued_at=int(T * 1000)),
        Stamp(T, "enqueued_at"),
    ),
    ("sidekiq created_at only", sidekiq_job(created_at=T), Stamp(T, "created_at")),
    (
        "sidekiq enqueued_at null",
        sidekiq_job(enqueued_at=None, created_at=T),
        Stamp(T, "created_at"),
    ),
    ("sidekiq bytes", sidekiq_job(enqueued_at=T).encode(), Stamp(T, "enqueued_at")),
]


@pytest.mark.parametrize(
    ("raw", "expected"), [(r, e) for _, r, e in GOOD], ids=[n for n, _, _ in GOOD]
)
def test_sidekiq(raw: Raw, expected: Stamp) -> None:
    assert sidekiq_stamp(raw, NOW) == expected


@pytest.mark.parametrize(
    "raw",
    [
        T_ISO,
        T_ISO.encode(),
        datetime.fromtimestamp(T, UTC).isoformat(),  # +00:00
        datetime.fromtimestamp(T, UTC).astimezone().isoformat(),  # local offset
        datetime.fromtimestamp(T, UTC).replace(tzinfo=None).isoformat(),  # naive: UTC
    ],
)
def test_rq(raw: Raw) -> None:
    stamp = rq_stamp(raw, NOW)
    assert stamp.field == "enqueued_at" and stamp.warning is None
    assert stamp.enqueued_at == pytest.approx(T, abs=1e-6)


def test_rq_without_fraction() -> None:
    assert rq_stamp("2025-10-09T08:52:37Z", NOW) == Stamp(NOW - 43, "enqueued_at")


def test_dramatiq() -> None:
    assert dramatiq_stamp(dramatiq_message(), NOW) == Stamp(T, "message_timestamp")


LIST_GOOD: list[tuple[str, str, object]] = [
    ("s", "s", T),
    ("ms", "ms", T * 1000),
    ("iso", "iso", T_ISO),
    ("auto seconds", "auto", T),
    ("auto int seconds", "auto", int(T)),
    ("auto ms", "auto", int(T * 1000)),
    ("auto µs", "auto", int(T * 1_000_000)),
    ("auto iso", "auto", T_ISO),
    ("auto iso offset", "auto", "2025-10-09T10:52:37.75+02:00"),
    ("auto number as string", "auto", str(int(T * 1000))),
    ("s as string", "s", str(T)),
]


@pytest.mark.parametrize(
    ("unit", "value"), [(u, v) for _, u, v in LIST_GOOD], ids=[n for n, _, _ in LIST_GOOD]
)
def test_list_units(unit: str, value: object) -> None:
    raw = json.dumps({"id": 7, "meta": {"enqueued_at": value, "by": "api"}})
    stamp = list_stamp(raw, NOW, "meta.enqueued_at", unit)
    assert stamp.field == "meta.enqueued_at" and stamp.warning is None
    assert stamp.enqueued_at == pytest.approx(T, abs=1.0 if isinstance(value, int) else 1e-3)


def test_list_top_level_field() -> None:
    assert list_stamp(b'{"ts": 1759999957.75}', NOW, "ts", "s") == Stamp(T, "ts")


def test_list_without_field_reads_nothing_and_warns_nothing() -> None:
    assert list_stamp(b'{"ts": 1759999957.75}', NOW, None, "auto") == Stamp(None)


BAD: list[tuple[str, str, Raw, str]] = [
    ("sidekiq", "not json", b"HardJob,1,two", NOT_JSON),
    ("sidekiq", "truncated json", sidekiq_job(enqueued_at=T)[:40], NOT_JSON),
    ("sidekiq", "json list", b"[1, 2]", BAD_TYPE),
    ("sidekiq", "json string", b'"job"', BAD_TYPE),
    ("sidekiq", "no payload", None, MISSING_FIELD),
    ("sidekiq", "no time fields", sidekiq_job(), MISSING_FIELD),
    ("sidekiq", "time as string", sidekiq_job(enqueued_at="yesterday"), BAD_TYPE),
    ("sidekiq", "time as bool", sidekiq_job(enqueued_at=True), BAD_TYPE),
    ("sidekiq", "time as object", sidekiq_job(enqueued_at={"s": T}), BAD_TYPE),
    ("sidekiq", "int seconds read as ms", sidekiq_job(enqueued_at=int(T)), ABSURD),
    ("sidekiq", "float ms read as s", sidekiq_job(enqueued_at=T * 1000), ABSURD),
    ("sidekiq", "huge int", sidekiq_job(enqueued_at=10**400), ABSURD),
    ("sidekiq", "NaN", b'{"enqueued_at": NaN}', ABSURD),
    ("sidekiq", "Infinity", b'{"enqueued_at": Infinity}', ABSURD),
    ("sidekiq", "negative", sidekiq_job(enqueued_at=-1.0), ABSURD),
    ("sidekiq", "1999", sidekiq_job(enqueued_at=946_684_799.0), ABSURD),
    ("sidekiq", "an hour ahead", sidekiq_job(enqueued_at=NOW + 3600), ABSURD),
    ("rq", "no field", None, MISSING_FIELD),
    ("rq", "empty", b"", UNPARSEABLE),
    ("rq", "not a date", b"yesterday", UNPARSEABLE),
    ("rq", "epoch number", b"1759999957", UNPARSEABLE),
    ("rq", "bad month", b"2025-13-09T08:52:37.750000Z", UNPARSEABLE),
    ("rq", "year 1", b"0001-01-01T00:00:00+01:00", ABSURD),
    ("rq", "1999", b"1999-12-31T23:59:59Z", ABSURD),
    ("rq", "a day ahead", b"2025-10-10T08:53:20Z", ABSURD),
    ("rq", "not utf-8", b"\xff\xfe2025", UNPARSEABLE),
    ("dramatiq", "not json", b"\x80\x04\x95pickle", NOT_JSON),
    ("dramatiq", "no field", dramatiq_message(message_timestamp=None), MISSING_FIELD),
    ("dramatiq", "string time", dramatiq_message(message_timestamp="soon"), UNPARSEABLE),
    ("dramatiq", "seconds not ms", dramatiq_message(message_timestamp=int(T)), ABSURD),
]


@pytest.mark.parametrize(
    ("format_name", "raw", "warning"),
    [(f, r, w) for f, _, r, w in BAD],
    ids=[f"{f}: {n}" for f, n, _, _ in BAD],
)
def test_bad_payloads_are_unknown_with_a_warning(format_name: str, raw: Raw, warning: str) -> None:
    stamp = stamp_reader(format_name)(raw, NOW)
    assert stamp.enqueued_at is None
    assert stamp.warning == warning


LIST_BAD: list[tuple[str, str, str, str]] = [
    ("not json", "ts", "s", "ts=1759999957"),
    ("json array", "ts", "s", "[1759999957]"),
    ("missing field", "ts", "auto", '{"time": 1759999957}'),
    ("missing parent", "meta.ts", "auto", '{"ts": 1759999957}'),
    ("parent not an object", "meta.ts", "auto", '{"meta": "x"}'),
    ("null", "ts", "auto", '{"ts": null}'),
    ("list value", "ts", "auto", '{"ts": [1759999957]}'),
    ("bool value", "ts", "auto", '{"ts": false}'),
    ("number for iso", "ts", "iso", '{"ts": 1759999957}'),
    ("iso for s", "ts", "s", '{"ts": "2025-10-09T08:52:37Z"}'),
    ("bad iso", "ts", "auto", '{"ts": "09/10/2025 08:52"}'),
    ("ms read as s", "ts", "s", '{"ts": 1759999957750}'),
    ("s read as ms", "ts", "ms", '{"ts": 1759999957}'),
    ("zero", "ts", "auto", '{"ts": 0}'),
]
LIST_WARNINGS = {
    "not json": NOT_JSON,
    "json array": BAD_TYPE,
    "list value": BAD_TYPE,
    "bool value": BAD_TYPE,
    "number for iso": BAD_TYPE,
    "iso for s": UNPARSEABLE,
    "bad iso": UNPARSEABLE,
    "ms read as s": ABSURD,
    "s read as ms": ABSURD,
    "zero": ABSURD,
}


@pytest.mark.parametrize(
    ("name", "path", "unit", "raw"), LIST_BAD, ids=[name for name, *_ in LIST_BAD]
)
def test_bad_list_payloads(name: str, path: str, unit: str, raw: str) -> None:
    stamp = stamp_reader("list", path, unit)(raw, NOW)
    assert stamp == Stamp(None, path, LIST_WARNINGS.get(name, MISSING_FIELD))


@pytest.mark.parametrize("ahead", [0.001, 1.0, 299.0])
@pytest.mark.parametrize("format_name", ["sidekiq", "list"])
def test_clock_skew_clamps_the_age_to_zero(format_name: str, ahead: float) -> None:
    raw = json.dumps({"enqueued_at": NOW + ahead})
    stamp = stamp_reader(format_name, "enqueued_at", "s")(raw, NOW)
    assert stamp == Stamp(NOW, "enqueued_at", FUTURE)


def test_skew_limit_is_five_minutes() -> None:
    assert checked_at(Stamp(NOW + 301, "timestamp"), NOW).warning == ABSURD
    assert checked_at(Stamp(NOW + 299, "timestamp"), NOW).warning == FUTURE


def test_exactly_now_is_age_zero_without_warning() -> None:
    assert checked_at(Stamp(NOW, "timestamp"), NOW) == Stamp(NOW, "timestamp")


# --- Resque -------------------------------------------------------------------------------------


def resque_job(**fields: object) -> str:
    return json.dumps({"class": "ResizeImage", "args": [42, "large"], **fields})


@pytest.mark.parametrize(
    "value", [T, int(T * 1000), T_ISO], ids=["float s (Judoscale)", "int ms", "iso"]
)
def test_resque_timestamp(value: object) -> None:
    stamp = resque_stamp(resque_job(timestamp=value), NOW)
    assert stamp.field == "timestamp" and stamp.warning is None
    assert stamp.enqueued_at == pytest.approx(T, abs=1e-3)


@pytest.mark.parametrize("raw", [resque_job(), resque_job(timestamp=None)], ids=["absent", "null"])
def test_resque_without_timestamp_is_unknown_without_a_warning(raw: str) -> None:
    assert resque_stamp(raw, NOW) == Stamp(None)


RESQUE_BAD: list[tuple[str, Raw, Stamp]] = [
    ("not json", b"ResizeImage(42)", Stamp(None, warning=NOT_JSON)),
    ("json list", b'["ResizeImage", 42]', Stamp(None, warning=BAD_TYPE)),
    ("word", resque_job(timestamp="yesterday"), Stamp(None, "timestamp", UNPARSEABLE)),
    ("bool", resque_job(timestamp=True), Stamp(None, "timestamp", BAD_TYPE)),
    ("object", resque_job(timestamp={"s": T}), Stamp(None, "timestamp", BAD_TYPE)),
    ("1999", resque_job(timestamp=915_148_800.0), Stamp(None, "timestamp", ABSURD)),
    ("an hour ahead", resque_job(timestamp=NOW + 3600), Stamp(None, "timestamp", ABSURD)),
    ("a minute ahead", resque_job(timestamp=NOW + 60), Stamp(NOW, "timestamp", FUTURE)),
]


@pytest.mark.parametrize(
    ("raw", "expected"), [(r, e) for _, r, e in RESQUE_BAD], ids=[n for n, _, _ in RESQUE_BAD]
)
def test_resque_bad_timestamp_warns(raw: Raw, expected: Stamp) -> None:
    assert stamp_reader("resque")(raw, NOW) == expected


# --- Celery (kombu envelope) --------------------------------------------------------------------


def celery_envelope(
    headers: dict[str, object] | None = None, properties: dict[str, object] | None = None
) -> bytes:
    """A message as kombu's Redis transport stores it for Celery's protocol 2."""
    envelope = {
        "body": "W1s3XSwge30sIHsiY2FsbGJhY2tzIjogbnVsbH1d",
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": {
            "lang": "py",
            "task": "reports.render",
            "id": "19a00237-c984-4ae5-80cf-80a5ec266f7f",
            "eta": None,
            "retries": 0,
            **(headers or {}),
        },
        "properties": {
            "correlation_id": "19a00237-c984-4ae5-80cf-80a5ec266f7f",
            "delivery_mode": 2,
            "delivery_info": {"exchange": "", "routing_key": "reports"},
            "priority": 0,
            "body_encoding": "base64",
            "delivery_tag": "4af55f59-e66c-47e6-a326-f2081a66dd00",
            **(properties or {}),
        },
    }
    return json.dumps(envelope).encode()


def test_celery_without_publish_time_is_unknown_without_a_warning() -> None:
    assert celery_stamp(celery_envelope(), NOW) == Stamp(None)
    assert stamp_reader("celery")(celery_envelope(), NOW) == Stamp(None)


def test_celery_published_at_in_properties_then_headers() -> None:
    both = celery_envelope({"published_at": T - 5}, {"published_at": T})
    assert celery_stamp(both, NOW) == Stamp(T, "properties.published_at")
    in_headers = celery_envelope({"published_at": T})
    assert celery_stamp(in_headers, NOW) == Stamp(T, "headers.published_at")


def test_celery_timestamp_field_and_unit() -> None:
    run_at = celery_envelope({"run_at": T_ISO, "published_at": T - 5})
    reader = stamp_reader("celery", "headers.run_at", "iso")
    stamp = reader(run_at, NOW)
    assert stamp.field == "headers.run_at" and stamp.warning is None
    assert stamp.enqueued_at == pytest.approx(T, abs=1e-3)
    millis = celery_envelope(properties={"published_at": int(T * 1000)})
    assert celery_stamp(millis, NOW, unit="ms") == Stamp(T, "properties.published_at")
    assert celery_stamp(millis, NOW) == Stamp(T, "properties.published_at")  # auto


CELERY_BAD: list[tuple[str, Raw, str | None, Stamp]] = [
    ("not json", b"\x80\x05pickled", None, Stamp(None, warning=NOT_JSON)),
    (
        "published_at a word",
        celery_envelope(properties={"published_at": "soon"}),
        None,
        Stamp(None, "properties.published_at", UNPARSEABLE),
    ),
    (
        "published_at an hour ahead",
        celery_envelope(properties={"published_at": NOW + 3600}),
        None,
        Stamp(None, "properties.published_at", ABSURD),
    ),
    (
        "timestampField missing",
        celery_envelope(),
        "headers.run_at",
        Stamp(None, "headers.run_at", MISSING_FIELD),
    ),
]


@pytest.mark.parametrize(
    ("raw", "path", "expected"),
    [(r, p, e) for _, r, p, e in CELERY_BAD],
    ids=[n for n, *_ in CELERY_BAD],
)
def test_celery_bad_envelopes_warn(raw: Raw, path: str | None, expected: Stamp) -> None:
    assert stamp_reader("celery", path)(raw, NOW) == expected


# --- Huey ---------------------------------------------------------------------------------------


def test_huey_messages_carry_no_time() -> None:
    pickled = b"\x80\x05\x95\x1f\x00\x00\x00huey.registry.Message"
    assert no_stamp(pickled, NOW) == Stamp(None)
    assert stamp_reader("huey")(pickled, NOW) == Stamp(None)


def nested(depth: int) -> str:
    """A Sidekiq job whose ``args`` nest ``depth`` - 1 arrays, so the job is ``depth`` deep."""
    arrays = "[" * (depth - 1) + "]" * (depth - 1)
    return f'{{"class": "HardJob", "args": {arrays}, "enqueued_at": {T}}}'


@pytest.mark.parametrize("format_name", ["sidekiq", "list", "resque", "celery"])
@pytest.mark.parametrize("depth", [MAX_PAYLOAD_DEPTH + 1, 100_000])
def test_a_payload_nested_too_deep_is_skipped_with_a_warning(format_name: str, depth: int) -> None:
    raw = nested(depth)
    assert json.loads(nested(5))["args"] == [[[[]]]]  # the shape nested() builds
    reader = stamp_reader(format_name, "enqueued_at" if format_name != "sidekiq" else None)
    stamp = reader(raw, NOW)
    assert (stamp.enqueued_at, stamp.warning) == (None, TOO_DEEP)


def test_a_payload_at_the_depth_bound_is_read() -> None:
    assert sidekiq_stamp(nested(MAX_PAYLOAD_DEPTH), NOW) == Stamp(T, "enqueued_at")


@pytest.mark.parametrize("format_name", ["sidekiq", "list", "rq", "dramatiq"])
def test_a_payload_above_the_size_bound_is_skipped_with_a_warning(format_name: str) -> None:
    raw = sidekiq_job(args=["x" * MAX_PAYLOAD_BYTES])
    stamp = stamp_reader(format_name, "enqueued_at")(raw.encode(), NOW)
    assert (stamp.enqueued_at, stamp.warning) == (None, TOO_LARGE)


def test_a_stamp_read_without_a_clock_is_checked_at_each_use() -> None:
    unclocked = sidekiq_stamp(sidekiq_job(enqueued_at=NOW + 10), math.inf)
    assert unclocked == Stamp(NOW + 10, "enqueued_at")
    assert checked_at(unclocked, NOW) == Stamp(NOW, "enqueued_at", FUTURE)  # skew, clamped
    assert checked_at(unclocked, NOW + 20) == Stamp(NOW + 10, "enqueued_at")
    assert checked_at(unclocked, NOW - MAX_SKEW - 20).warning == ABSURD
    assert checked_at(Stamp(None, "enqueued_at", NOT_JSON), NOW) == Stamp(
        None, "enqueued_at", NOT_JSON
    )
