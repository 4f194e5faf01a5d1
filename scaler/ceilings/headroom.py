"""What a probe reads from a dependency, and what the registry knows of it at a moment."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlsplit

from scaler.errors import Unavailable


class ProbeFailed(Unavailable):
    """A probe could not read its dependency (down, refused, no permission, no headers)."""


def probe_failed(kind: str, message: str, url: str) -> ProbeFailed:
    """A :class:`ProbeFailed` whose message holds nothing secret of ``url``: a driver's message
    may quote the URL, and the URL may hold a password or an API key (in its query)."""
    secrets = {url}
    try:
        parts = urlsplit(url)
        secrets |= {parts.password or "", unquote(parts.password or ""), parts.query}
        secrets |= {value for _, value in parse_qsl(parts.query)}
    except ValueError:
        pass
    for secret in sorted((s for s in secrets if len(s) >= 3), key=len, reverse=True):
        message = message.replace(secret, "<hidden>")
    return ProbeFailed(f"{kind}: {message}")


@dataclass(frozen=True, slots=True)
class Headroom:
    """Slots of one dependency, in its own unit (connections; requests per second for an API).

    ``usable`` is what the workers may hold in all, what they hold now included: the dependency's
    limits less what *others* hold. ``None`` where the dependency cannot tell the workers' use
    from others' (Redis: every client alike); then only ``free`` is known, and the workers' own
    share is counted from the workers that run.
    """

    #: slots nobody holds now (what the workers could add); None where only ``usable`` means
    #: anything (an API's rate: the workers' continuing use is in it)
    free: float | None
    #: slots the workers may hold in all, theirs included; None: not told apart (see above)
    usable: float | None
    #: how the figure was made, for people: the limits and the counts read
    detail: str
    #: the unit of the figures, for messages: "slots" (connections) or "requests/s"
    unit: str = "slots"

    def summary(self) -> str:
        """``37 free slots``, ``40 slots, 37 free`` or ``1.5 requests/s``: for the reason."""
        if self.usable is None:
            return f"{_number(self.free or 0.0)} free {self.unit}"
        if self.free is None:
            return f"{_number(self.usable)} {self.unit}"
        return f"{_number(self.usable)} {self.unit}, {_number(self.free)} free"


def _number(value: float) -> str:
    return f"{value:.0f}" if value == int(value) else f"{value:.2f}"


class FigureSource(enum.StrEnum):
    """Where the ceiling of a probed dependency comes from at a moment."""

    #: a reading younger than the probe's interval allows (within ``STALE_AFTER``)
    LIVE = "live"
    #: the probe fails; its last good reading, younger than ``STALE_AFTER``
    LAST_GOOD = "last good"
    #: no reading young enough: the static limit the trigger gave (``probe:NAME|LIMIT``)
    FALLBACK = "fallback"
    #: no reading young enough and no static limit: the ceiling is the workers that run now
    HOLD = "hold"


@dataclass(frozen=True, slots=True)
class ProbeFigure:
    """A probe's state as the policy reads it: the newest good reading, how old, and the last
    error since (``None`` when the newest attempt succeeded)."""

    kind: str
    reading: Headroom | None
    #: seconds since ``reading`` was taken; None without one
    age: float | None
    error: str | None = None
