"""An HTTP API's headroom: the request rate its rate-limit headers allow now.

The probe sends ``GET`` to the profile's URL (an endpoint that answers cheaply with the API's
rate-limit headers, with the workers' credentials in the URL or its query) and reads, whichever
are present:

- the IETF fields ``RateLimit`` and ``RateLimit-Policy`` (draft-ietf-httpapi-ratelimit-headers):
  the list form (``"default";r=50;t=30`` with ``"default";q=100;w=60``) or the older dictionary
  form (``limit=100, remaining=50, reset=30`` with ``100;w=60``);
- ``RateLimit-Limit``, ``RateLimit-Remaining``, ``RateLimit-Reset`` (early drafts; the limit may
  carry policies, ``100, 100;w=60``);
- the common ``X-RateLimit-Limit``, ``X-RateLimit-Remaining``, ``X-RateLimit-Reset`` (the reset
  as seconds, or as a Unix time, as GitHub sends it).

Each quota gives a rate, ``remaining / reset`` requests per second (what may be spent from now
until the window ends, the workers' own continuing use included), capped at ``limit / window``
where the window is known; the smallest over the quotas is the figure. A 429 answer with
``Retry-After`` is a rate of 0. A quota without a reset time or a window gives no rate: the probe
fails rather than guess.
"""

from __future__ import annotations

import decimal
import time
from dataclasses import dataclass
from typing import Any

import http_sf
import httpx

from scaler.ceilings.headroom import Headroom, ProbeFailed, probe_failed

#: a reset above this is a Unix time, not a number of seconds
UNIX_TIME_FROM = 1_000_000_000
UNIT = "requests/s"


@dataclass(frozen=True, slots=True)
class Quota:
    remaining: float
    #: seconds until the window ends; None if not said
    reset: float | None = None
    limit: float | None = None
    #: the window's length in seconds; None if not said
    window: float | None = None

    def rate(self) -> float | None:
        """Requests per second this quota allows from now on; None if it cannot tell."""
        cap = None if self.limit is None or not self.window else self.limit / self.window
        if self.reset is not None:
            rate = self.remaining / max(self.reset, 1.0)
            return rate if cap is None else min(rate, cap)
        if cap is not None:
            return cap if self.remaining > 0 else 0.0
        return None


async def read(url: str, timeout: float) -> Headroom:
    """Read the rate the API at ``url`` allows now, from its answer's headers."""
    try:
        async with httpx.AsyncClient(timeout=timeout, follow_redirects=True) as client:
            response = await client.get(url)
    except (httpx.HTTPError, httpx.InvalidURL) as error:
        raise probe_failed("http", f"{type(error).__name__}: {error}", url) from None
    return headroom(response.status_code, response.headers, time.time())


def headroom(status: int, headers: httpx.Headers, now: float) -> Headroom:
    """The rate the headers of one answer allow; ProbeFailed if they tell none."""
    if status == 429 and "retry-after" in headers:
        return Headroom(
            free=None, usable=0.0, unit=UNIT, detail=f"429, Retry-After {headers['retry-after']}"
        )
    if status >= 400 and status != 429:
        raise ProbeFailed(f"http: the endpoint answered {status}")
    try:
        quotas = quotas_of(headers, now)
    except (ValueError, TypeError) as error:
        raise ProbeFailed(f"http: unreadable rate-limit header ({error})") from None
    rates = [(rate, quota) for quota in quotas if (rate := quota.rate()) is not None]
    if not rates:
        found = "no rate-limit header" if not quotas else "no reset time nor window"
        raise ProbeFailed(
            f"http: {found} in the answer (expected RateLimit/RateLimit-Policy, "
            "RateLimit-Limit/-Remaining/-Reset or X-RateLimit-*)"
        )
    rate, quota = min(rates, key=lambda pair: pair[0])
    return Headroom(free=None, usable=rate, unit=UNIT, detail=_describe(quota))


def _describe(quota: Quota) -> str:
    parts = [f"{quota.remaining:g} left"]
    if quota.limit is not None:
        parts[0] += f" of {quota.limit:g}"
    if quota.window:
        parts.append(f"per {quota.window:g}s")
    if quota.reset is not None:
        parts.append(f"resets in {quota.reset:g}s")
    return ", ".join(parts)


def quotas_of(headers: httpx.Headers, now: float) -> list[Quota]:
    """Every quota the headers state, whichever convention they follow."""
    policies = _policies(headers.get("ratelimit-policy"))
    if "ratelimit" in headers:
        return _ietf(headers["ratelimit"], policies)
    for prefix in ("ratelimit-", "x-ratelimit-"):
        if f"{prefix}remaining" in headers:
            return [_separate(headers, prefix, now)]
    return []


def _parse(value: str, kind: str) -> Any:
    try:
        return http_sf.parse(value.encode(), tltype=kind)
    except http_sf.StructuredFieldError as error:
        raise ValueError(f"{value!r}: {error}") from None


def _policies(value: str | None) -> dict[object, tuple[float | None, float | None]]:
    """``RateLimit-Policy`` by name (list form) or by position (older form): (quota, window)."""
    if value is None:
        return {}
    found: dict[object, tuple[float | None, float | None]] = {}
    for index, (item, params) in enumerate(_parse(value, "list")):
        if isinstance(item, str):  # "name";q=100;w=60
            found[item] = (_num(params.get("q")), _num(params.get("w")))
        else:  # 100;w=60
            found[index] = (_num(item), _num(params.get("w")))
    return found


def _ietf(value: str, policies: dict[object, tuple[float | None, float | None]]) -> list[Quota]:
    if "=" in value.split(";", 1)[0]:  # limit=100, remaining=50, reset=30 (older drafts)
        fields = {key: item for key, (item, _) in _parse(value, "dictionary").items()}
        limit, window = policies.get(0, (None, None))
        return [
            Quota(
                remaining=float(fields["remaining"]),
                reset=_num(fields.get("reset")),
                limit=_num(fields.get("limit")) if fields.get("limit") is not None else limit,
                window=window,
            )
        ]
    quotas = []
    for index, (name, params) in enumerate(_parse(value, "list")):
        limit, window = policies.get(name, policies.get(index, (None, None)))
        quotas.append(
            Quota(
                remaining=float(params["r"]),
                reset=_num(params.get("t")),
                limit=limit,
                window=window,
            )
        )
    return quotas


def _separate(headers: httpx.Headers, prefix: str, now: float) -> Quota:
    """``<prefix>Limit``, ``-Remaining`` and ``-Reset`` (seconds, or a Unix time)."""
    limit, window = None, None
    if f"{prefix}limit" in headers:
        members = _parse(headers[f"{prefix}limit"], "list")
        limit = _num(members[0][0])
        windows = [_num(params.get("w")) for item, params in members[1:] if _num(item) == limit]
        window = windows[0] if windows else None
    reset = None
    if f"{prefix}reset" in headers:
        reset = float(headers[f"{prefix}reset"])
        if reset > UNIX_TIME_FROM:
            reset = max(0.0, reset - now)
    return Quota(
        remaining=float(headers[f"{prefix}remaining"]), reset=reset, limit=limit, window=window
    )


def _num(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | decimal.Decimal):
        raise ValueError(f"expected a number, got {value!r}")
    return float(value)
