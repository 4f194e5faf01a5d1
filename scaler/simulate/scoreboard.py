"""The scoreboard: one row of figures per policy, and the goals checked on it: issue 5's
(:func:`verdict`, the shipped scenarios) and issue 10's (:func:`goal`, every scenario of a
family, for any policy)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scaler.simulate.run_result import RunResult

OURS = "queue-age-scaler"
#: violation seconds closer than this count as equal
EQUAL_VIOLATIONS_S = 1.0
#: our worker-seconds may be at most this times those of the cheapest policy that does as well
COST_FACTOR = 1.2
#: issue 10: violation seconds may exceed the best safe policy's by this share of them, or by
#: VIOLATION_SLACK_S if more
VIOLATION_SLACK_SHARE = 0.05
VIOLATION_SLACK_S = 5.0
#: issue 10: a safe policy better on both violations and worker-seconds by more than this share
#: dominates
DOMINANCE_SHARE = 0.05
#: the fleet that never changes: not a reference for the violations a policy should reach
FIXED = "fixed"

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


def verdict(rows: Mapping[str, Row]) -> Verdict:
    """Never above the ceiling; the fewest violation seconds of the policies that stay under it;
    at most 1.2x the worker-seconds of the cheapest policy with equal or fewer violations."""
    ours = rows[OURS]
    lines: list[str] = []
    under = ours["over_ceiling_s"] == 0
    lines.append(
        "never above the ceiling" if under else f"above the ceiling for {ours['over_ceiling_s']} s"
    )
    violations = ours["slo_violation_s"]
    under_rows = {n: r for n, r in rows.items() if r["over_ceiling_s"] == 0}
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


@dataclass(frozen=True, slots=True)
class Goal:
    """Issue 10's goal for one policy on one scenario; each check with a line saying why."""

    under_ceiling: bool
    near_best_violations: bool
    not_dominated: bool
    cheap_enough: bool
    lines: tuple[str, ...]
    #: the policies each check compared with: the best other safe policy (fixed excluded), the
    #: safe ones better on both, the cheapest with as few violations
    best: str | None = None
    dominating: tuple[str, ...] = ()
    cheapest: str | None = None

    @property
    def met(self) -> bool:
        return (
            self.under_ceiling
            and self.near_best_violations
            and self.not_dominated
            and self.cheap_enough
        )

    @property
    def missed(self) -> tuple[str, ...]:
        """The names of the checks missed, in order."""
        checks = ("under_ceiling", "near_best_violations", "not_dominated", "cheap_enough")
        return tuple(name for name in checks if not getattr(self, name))


def violation_slack(violations: float) -> float:
    """How far over ``violations`` still counts as near them: 5% of them or 5 s, the larger."""
    return max(VIOLATION_SLACK_SHARE * violations, VIOLATION_SLACK_S)


def safe(rows: Mapping[str, Row]) -> dict[str, Row]:
    """The policies never above the ceiling."""
    return {n: r for n, r in rows.items() if r["over_ceiling_s"] == 0}


def goal(rows: Mapping[str, Row], policy: str = OURS) -> Goal:
    """Never above the ceiling; SLO-violation seconds at most those of the best policy under the
    ceiling (the fixed fleet excluded) plus 5% or 5 s; no policy under the ceiling better on both
    violations and worker-seconds by more than 5% (violations within 1 s count as equal, as in
    :func:`verdict`); worker-seconds at most 1.2x the cheapest policy (any) with as few
    violations (within 1 s)."""
    ours = rows[policy]
    violations, cost = ours["slo_violation_s"], ours["worker_seconds"]
    others = {n: r for n, r in rows.items() if n != policy}
    under = ours["over_ceiling_s"] == 0
    lines = [
        "never above the ceiling" if under else f"above the ceiling for {ours['over_ceiling_s']} s"
    ]
    references = {n: r["slo_violation_s"] for n, r in safe(others).items() if n != FIXED}
    best = min(references.items(), key=lambda item: item[1]) if references else None
    near = best is None or violations <= best[1] + violation_slack(best[1])
    if best is None:
        lines.append(f"{violations} s over the target; no other policy stays under the ceiling")
    else:
        lines.append(
            f"{violations} s over the target, "
            f"{'within' if near else 'more than'} 5% or 5 s of {best[0]} ({best[1]} s)"
        )
    margin = max(DOMINANCE_SHARE * violations, EQUAL_VIOLATIONS_S)
    dominating = {
        n: r["slo_violation_s"]
        for n, r in safe(others).items()
        if r["slo_violation_s"] < violations - margin
        and r["worker_seconds"] < (1 - DOMINANCE_SHARE) * cost
    }
    lines.append(
        "no policy under the ceiling better on both violations and worker-seconds"
        if not dominating
        else f"dominated (fewer violations and worker-seconds) by {_named(dominating)}"
    )
    peers = {
        n: r["worker_seconds"]
        for n, r in others.items()
        if r["slo_violation_s"] <= violations + EQUAL_VIOLATIONS_S
    }
    cheapest = min(peers.items(), key=lambda item: item[1]) if peers else None
    cheap = cheapest is None or cost <= COST_FACTOR * cheapest[1]
    if cheapest is None:
        lines.append("no other policy has as few violations")
    else:
        lines.append(
            f"{cost / max(cheapest[1], 1):.2f}x the worker-seconds of {cheapest[0]}, "
            "the cheapest with as few violations"
        )
    return Goal(
        under,
        near,
        not dominating,
        cheap,
        tuple(lines),
        best=best[0] if best else None,
        dominating=tuple(sorted(dominating, key=dominating.__getitem__)),
        cheapest=cheapest[0] if cheapest else None,
    )
