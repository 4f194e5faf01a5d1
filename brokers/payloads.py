"""Enqueue times out of job payloads, per job library. Pure: no I/O, no clock reads.

A payload that is not what its format expects never raises: the result is an unknown time and
a warning kind (one of the string constants below), which the adapter passes on.

Payloads are bounded: one larger than :data:`MAX_PAYLOAD_BYTES` is not parsed (warning
``payload_too_large``; the adapters check the size in Redis and never fetch such a payload), and
one whose JSON nests deeper than :data:`MAX_PAYLOAD_DEPTH` is not read (``payload_too_deep``).
The time of such a job is unknown, and the scaler estimates the age from the arrival history.

A stamp read with ``now`` = infinity has no clock check yet; :func:`checked_at` adds it, so that
an adapter can keep the stamp of a job it has read and check it again at each sample.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

NOT_JSON = "not_json"
MISSING_FIELD = "missing_field"
BAD_TYPE = "bad_type"
UNPARSEABLE = "unparseable_timestamp"
FUTURE = "future_timestamp"
ABSURD = "absurd_timestamp"
TOO_LARGE = "payload_too_large"
TOO_DEEP = "payload_too_deep"

#: the largest payload read for its time (1 MiB); a larger job is skipped, with TOO_LARGE
MAX_PAYLOAD_BYTES = 1 << 20
#: the deepest nesting of JSON arrays and objects read; deeper is skipped, with TOO_DEEP
MAX_PAYLOAD_DEPTH = 64

#: how far in the future a time may be and still count as clock skew (age clamped to 0)
MAX_SKEW = 300.0
#: 2000-01-01T00:00:00Z: anything earlier is a unit or encoding mistake
EARLIEST = 946_684_800.0

Raw = bytes | str | None


@dataclass(frozen=True, slots=True)
class Stamp:
    """An enqueue time in unix seconds, the payload field it came from, and any warning.

    ``enqueued_at`` is None when unknown (``warning`` says why, unless no field was asked
    for). A time slightly in the future is clamped to ``now``, with warning ``FUTURE``.
    """

    enqueued_at: float | None
    field: str | None = None
    warning: str | None = None


StampReader = Callable[[Raw, float], Stamp]


def sidekiq_stamp(raw: Raw, now: float) -> Stamp:
    """Sidekiq job JSON: ``enqueued_at`` (else ``created_at``); a float is s (<= 7.x), an int ms (8.x)."""
    job = _json_object(raw)
    if isinstance(job, str):
        return Stamp(None, warning=job)
    for name in ("enqueued_at", "created_at"):
        value = job.get(name)
        if value is not None:
            break
    else:
        return Stamp(None, "enqueued_at", MISSING_FIELD)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return Stamp(None, name, BAD_TYPE)
    return _checked(_number(value) / (1000 if isinstance(value, int) else 1), name, now)


def rq_stamp(raw: Raw, now: float) -> Stamp:
    """The ``enqueued_at`` field of an RQ job hash: ``%Y-%m-%dT%H:%M:%S.%fZ`` UTC (any ISO 8601)."""
    if too_large(raw):
        return Stamp(None, "enqueued_at", TOO_LARGE)
    text = _text(raw)
    if text is None:
        return Stamp(None, "enqueued_at", MISSING_FIELD)
    return _from_iso(text, "enqueued_at", now)


def dramatiq_stamp(raw: Raw, now: float) -> Stamp:
    """A Dramatiq message (JSON, from the ``.msgs`` hash): ``message_timestamp`` in ms."""
    return list_stamp(raw, now, "message_timestamp", "ms")


def list_stamp(raw: Raw, now: float, path: str | None, unit: str) -> Stamp:
    """A JSON payload with the time at the dotted ``path`` (``meta.enqueued_at``), in ``unit``.

    ``unit`` is ``s``, ``ms``, ``iso`` or ``auto``: a number above 1e14 is µs, above 1e11 ms,
    else s; a string is ISO 8601 (or a number written as a string). Without a ``path`` there is
    nothing to read and no warning.
    """
    if path is None:
        return Stamp(None)
    job = _json_object(raw)
    if isinstance(job, str):
        return Stamp(None, path, job)
    value = _at_path(job, path)
    if value is None:
        return Stamp(None, path, MISSING_FIELD)
    return _from_value(value, path, unit, now)


def resque_stamp(raw: Raw, now: float) -> Stamp:
    """A Resque job JSON (``{"class", "args"}``): ``timestamp`` in s, where a producer adds it.

    Judoscale's Resque extension sets ``item["timestamp"] = Time.now.utc.to_f``; plain Resque
    stores no time, so a missing field is unknown without a warning.
    """
    job = _json_object(raw)
    if isinstance(job, str):
        return Stamp(None, warning=job)
    value = job.get("timestamp")
    if value is None:
        return Stamp(None)
    return _from_value(value, "timestamp", "auto", now)


#: where producers put a Celery message's publish time, when they do: Judoscale's
#: ``before_task_publish`` handler sets ``properties["published_at"] = time.time()``
CELERY_FIELDS = ("properties.published_at", "headers.published_at")


def celery_stamp(raw: Raw, now: float, path: str | None = None, unit: str = "auto") -> Stamp:
    """A kombu message envelope (JSON): its publish time, where a producer adds one.

    Celery's protocol 2 carries no publish time, so without ``path`` the first of
    :data:`CELERY_FIELDS` present is read, and none present is unknown without a warning. A
    ``path`` (``headers.run_at``, say: HireFire's macro, ISO) is read as :func:`list_stamp` does.
    """
    if path is not None:
        return list_stamp(raw, now, path, unit)
    envelope = _json_object(raw)
    if isinstance(envelope, str):
        return Stamp(None, warning=envelope)
    for field in CELERY_FIELDS:
        value = _at_path(envelope, field)
        if value is not None:
            return _from_value(value, field, unit, now)
    return Stamp(None)


def no_stamp(raw: Raw, now: float) -> Stamp:
    """Formats whose jobs carry no enqueue time (Huey's pickled messages): always unknown."""
    return Stamp(None)


def stamp_reader(format_name: str, path: str | None = None, unit: str = "auto") -> StampReader:
    """The reader for one format; ``path`` and ``unit`` apply to formats ``list`` and ``celery``."""
    readers: dict[str, StampReader] = {
        "sidekiq": sidekiq_stamp,
        "rq": rq_stamp,
        "dramatiq": dramatiq_stamp,
        "celery": lambda raw, now: celery_stamp(raw, now, path, unit),
        "resque": resque_stamp,
        "huey": no_stamp,
        "list": lambda raw, now: list_stamp(raw, now, path, unit),
    }
    return readers[format_name]


def checked_at(stamp: Stamp, now: float) -> Stamp:
    """``stamp``, read with ``now`` = infinity (no clock check), checked against ``now``."""
    if stamp.enqueued_at is None:
        return stamp
    return _checked(stamp.enqueued_at, stamp.field or "", now)


def _at_path(value: object, path: str) -> object | None:
    """The value at the dotted ``path`` in nested JSON objects; None when absent or null."""
    for part in path.split("."):
        if not isinstance(value, dict) or value.get(part) is None:
            return None
        value = value[part]
    return value


def _from_value(value: object, name: str, unit: str, now: float) -> Stamp:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return Stamp(None, name, BAD_TYPE)
    try:
        number = _number(value)
    except ValueError:  # a string that is not a number
        if unit in ("auto", "iso"):
            return _from_iso(str(value), name, now)
        return Stamp(None, name, UNPARSEABLE)
    if unit == "iso":
        return Stamp(None, name, BAD_TYPE)
    if unit == "auto":
        unit = "us" if number > 1e14 else "ms" if number > 1e11 else "s"
    return _checked(number / {"s": 1, "ms": 1e3, "us": 1e6}[unit], name, now)


def _from_iso(text: str, name: str, now: float) -> Stamp:
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        return Stamp(None, name, UNPARSEABLE)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return _checked(moment.timestamp(), name, now)


def _number(value: float | str) -> float:
    """A float; an integer too large for one becomes infinity (rejected later as absurd)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf


def _checked(seconds: float, name: str, now: float) -> Stamp:
    """Reject absurd times; clamp clock skew so that the age is never negative."""
    if not math.isfinite(seconds) or seconds < EARLIEST or seconds > now + MAX_SKEW:
        return Stamp(None, name, ABSURD)
    if seconds > now:
        return Stamp(now, name, FUTURE)
    return Stamp(seconds, name)


def _text(raw: Raw) -> str | None:
    if isinstance(raw, bytes):
        return raw.decode("utf-8", errors="replace")
    return raw


def _json_object(raw: Raw) -> dict[str, object] | str:
    """The payload as a JSON object, or the warning kind saying why it is not one."""
    if too_large(raw):
        return TOO_LARGE
    text = _text(raw)
    if text is None:
        return MISSING_FIELD
    try:
        value = json.loads(text)
    except RecursionError:  # nested past the interpreter's limit, far past MAX_PAYLOAD_DEPTH
        return TOO_DEEP
    except ValueError:
        return NOT_JSON
    if not isinstance(value, dict):
        return BAD_TYPE
    return value if _within_depth(value) else TOO_DEEP


def too_large(raw: Raw) -> bool:
    """Whether ``raw`` is above MAX_PAYLOAD_BYTES."""
    return raw is not None and len(raw) > MAX_PAYLOAD_BYTES


def _within_depth(value: dict[str, object]) -> bool:
    """Whether no array or object in ``value`` lies deeper than MAX_PAYLOAD_DEPTH (``value``
    itself is at depth 1). Level by level, not by recursion: a deep payload must not exhaust
    the stack."""
    level: list[object] = [value]
    for _ in range(MAX_PAYLOAD_DEPTH):
        level = [child for container in level for child in _children(container)]
        if not level:
            return True
    return False


def _children(container: object) -> list[object]:
    """The arrays and objects directly inside ``container``."""
    values: Iterable[object] = ()
    if isinstance(container, dict):
        values = container.values()
    elif isinstance(container, list):
        values = container
    return [value for value in values if isinstance(value, dict | list)]
