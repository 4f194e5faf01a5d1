"""The scoreboard: one row of figures per policy, and the goal of issue 5 checked on it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scaler.simulate.run_result import RunResult

OURS = "queue-age-scaler"
#: violation seconds closer than this count as equal
EQUAL_VIOLATIONS_S = 1.0
#: our worker-seconds may be at most this times those of the cheapest policy that does as well
COST_FACTOR = 1.2

KEYS = (
    "wait_p50_s",
    "wait_p99_s",
    "wait_max_s",
    "slo_violation_s",
    "worker_seconds",
    "scale_events",
    "over_ceiling_s",
    "api_wait_p99_s",
    "duplicates",
    "completed",
)

Row = dict[str, float | int]


def row(result: RunResult, duration: float) -> Row:
    waits = sorted(result.waits)
    return {
        "wait_p50_s": round(_quantile(waits, 0.5), 3),
        "wait_p99_s": round(_quantile(waits, 0.99), 3),
        "wait_max_s": round(waits[-1] if waits else 0.0, 3),
        "slo_violation_s": round(result.slo_violation_s, 1),
        "worker_seconds": round(result.worker_seconds),
        "scale_events": result.scale_events,
        "over_ceiling_s": round(result.over_ceiling_s, 1),
        "api_wait_p99_s": round(_time_quantile(result.api_waits, duration, 0.99), 4),
        "duplicates": result.duplicates,
        "completed": result.completed,
    }


def _quantile(ordered: list[float], q: float) -> float:
    """Linear interpolation between the closest ranks; 0 for no data."""
    if not ordered:
        return 0.0
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _time_quantile(seconds_at: Mapping[float, float], total: float, q: float) -> float:
    """The ``q`` quantile of a value held over time; the time not in ``seconds_at`` is at 0."""
    remaining = total * (1 - q)
    for value in sorted(seconds_at, reverse=True):
        remaining -= seconds_at[value]
        if remaining < 0:
            return value
    return 0.0


@dataclass(frozen=True, slots=True)
class Verdict:
    """Issue 5's goal for our policy on one scenario; each ``*_ok`` with a line saying why."""

    under_ceiling: bool
    fewest_violations: bool
    cheap_enough: bool
    lines: tuple[str, ...]

    @property
    def met(self) -> bool:
        return self.under_ceiling and self.fewest_violations and self.cheap_enough


def verdict(rows: Mapping[str, Row], ceiling: str = "over_ceiling_s") -> Verdict:
    """Never above the ceiling; the fewest violation seconds of the policies that stay under it;
    at most 1.2x the worker-seconds of the cheapest policy with equal or fewer violations.
    ``ceiling``: the figure of the time above it (``over_shared_ceiling_s``: the ceiling that
    several Deployments share)."""
    ours = rows[OURS]
    lines: list[str] = []
    under = ours[ceiling] == 0
    lines.append("never above the ceiling" if under else f"above the ceiling for {ours[ceiling]} s")
    violations = ours["slo_violation_s"]
    under_rows = {n: r for n, r in rows.items() if r[ceiling] == 0}
    better = {
        n: r["slo_violation_s"]
        for n, r in under_rows.items()
        if r["slo_violation_s"] < violations - EQUAL_VIOLATIONS_S
    }
    fewest = not better
    lines.append(
        f"fewest SLO-violation seconds under the ceiling ({violations} s)"
        if fewest
        else f"{violations} s over the target, more than {_named(better)}"
    )
    peers = {
        n: r["worker_seconds"]
        for n, r in rows.items()
        if n != OURS and r["slo_violation_s"] <= violations + EQUAL_VIOLATIONS_S
    }
    cheapest = min(peers.items(), key=lambda item: item[1]) if peers else None
    cheap = cheapest is None or ours["worker_seconds"] <= COST_FACTOR * cheapest[1]
    if cheapest is None:
        lines.append("no other policy has as few violations")
    else:
        ratio = ours["worker_seconds"] / max(cheapest[1], 1)
        lines.append(
            f"{ratio:.2f}x the worker-seconds of {cheapest[0]}, the cheapest with as few violations"
        )
    return Verdict(under, fewest, cheap, tuple(lines))


def _named(values: Mapping[str, float | int]) -> str:
    return ", ".join(
        f"{name} ({value} s)" for name, value in sorted(values.items(), key=lambda i: i[1])
    )
