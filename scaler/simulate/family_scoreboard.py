"""The family scoreboard: every policy's scoreboard rows on every drawn scenario, summed up.

Per scenario, :func:`~scaler.simulate.scoreboard.goal` is checked for every policy, and each
policy is compared with the scenario's **best policy**: of the policies under the ceiling (the
fixed fleet excluded), those within 5% or 5 s of the fewest violation seconds, the cheapest.
Per policy the family scoreboard gives the share of scenarios where the goal is met, the share
above the ceiling, and the median, p90 and worst of its SLO-violation seconds, of those over
the best policy's, and of its worker-seconds over the best policy's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scaler.simulate.scoreboard import FIXED, OURS, Goal, Row, goal, safe, violation_slack


@dataclass(frozen=True, slots=True)
class ScenarioScore:
    """One drawn scenario: its document (to write out), its rows, each policy's goal."""

    index: int
    document: Mapping[str, Any]
    rows: Mapping[str, Row]
    goals: Mapping[str, Goal]
    #: the scenario's best policy (None when every policy goes over the ceiling)
    best: str | None

    @property
    def name(self) -> str:
        return str(self.document["name"])

    def excess_violation_s(self, policy: str) -> float:
        """SLO-violation seconds over the best policy's."""
        if self.best is None:
            return 0.0
        best = self.rows[self.best]["slo_violation_s"]
        return round(self.rows[policy]["slo_violation_s"] - best, 1)

    def cost_ratio(self, policy: str) -> float:
        """Worker-seconds over the best policy's."""
        if self.best is None:
            return 1.0
        return round(
            self.rows[policy]["worker_seconds"] / max(self.rows[self.best]["worker_seconds"], 1), 3
        )


def score(index: int, document: Mapping[str, Any], rows: Mapping[str, Row]) -> ScenarioScore:
    return ScenarioScore(
        index, document, rows, {name: goal(rows, name) for name in rows}, best_policy(rows)
    )


def best_policy(rows: Mapping[str, Row]) -> str | None:
    """Of the policies under the ceiling, the fixed fleet excluded, those within 5% or 5 s of
    the fewest violation seconds: the cheapest (ties: the first in order)."""
    candidates = {n: r for n, r in safe(rows).items() if n != FIXED}
    if not candidates:
        return None
    fewest = min(r["slo_violation_s"] for r in candidates.values())
    near = [
        n for n, r in candidates.items() if r["slo_violation_s"] <= fewest + violation_slack(fewest)
    ]
    return min(near, key=lambda n: candidates[n]["worker_seconds"])


@dataclass(frozen=True, slots=True)
class Spread:
    median: float
    p90: float
    worst: float

    def json(self) -> dict[str, float]:
        return {"median": self.median, "p90": self.p90, "worst": self.worst}


def spread(values: Sequence[float]) -> Spread:
    """Median, 90th percentile (nearest rank) and the largest of ``values``."""
    ordered = sorted(values)
    if not ordered:
        return Spread(0.0, 0.0, 0.0)
    return Spread(_rank(ordered, 0.5), _rank(ordered, 0.9), ordered[-1])


def _rank(ordered: Sequence[float], q: float) -> float:
    """The nearest-rank quantile: the smallest value with at least ``q`` of them at or under it."""
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


@dataclass(frozen=True, slots=True)
class PolicySummary:
    met: int
    over_ceiling: int
    #: how many scenarios missed each check of the goal, by name
    missed: Mapping[str, int]
    violation_s: Spread
    excess_violation_s: Spread
    cost_ratio: Spread

    def json(self, count: int) -> dict[str, Any]:
        return {
            "goal_met": self.met,
            "goal_met_share": round(self.met / max(count, 1), 4),
            "over_ceiling": self.over_ceiling,
            "missed": dict(self.missed),
            "slo_violation_s": self.violation_s.json(),
            "slo_violation_over_best_s": self.excess_violation_s.json(),
            "worker_seconds_over_best": self.cost_ratio.json(),
        }


def summarise(scores: Sequence[ScenarioScore], policy: str) -> PolicySummary:
    missed: dict[str, int] = {}
    for s in scores:
        for check in s.goals[policy].missed:
            missed[check] = missed.get(check, 0) + 1
    return PolicySummary(
        met=sum(1 for s in scores if s.goals[policy].met),
        over_ceiling=sum(1 for s in scores if s.rows[policy]["over_ceiling_s"] > 0),
        missed=missed,
        violation_s=spread([float(s.rows[policy]["slo_violation_s"]) for s in scores]),
        excess_violation_s=spread([s.excess_violation_s(policy) for s in scores]),
        cost_ratio=spread([s.cost_ratio(policy) for s in scores]),
    )


def worst(scores: Sequence[ScenarioScore], count: int, policy: str = OURS) -> list[ScenarioScore]:
    """The ``count`` scenarios where ``policy`` does worst: the goal missed first, above the
    ceiling before the rest, then the most violation seconds over the best policy's, then the
    highest cost over it."""
    return sorted(
        scores,
        key=lambda s: (
            s.goals[policy].met,
            s.goals[policy].under_ceiling,
            -s.excess_violation_s(policy),
            -s.cost_ratio(policy),
            s.index,
        ),
    )[:count]


_GROUPS = ("goal", "above", "over the SLO, s", "over the best, s", "worker-s / the best")
_NAMES = ("met", "ceiling", "median", "p90", "worst") + ("median", "p90", "worst") * 2
_CELL = 8


def render(
    family: str, seed: int, scores: Sequence[ScenarioScore], policies: Sequence[str]
) -> list[str]:
    count = max(len(scores), 1)
    summaries = {p: summarise(scores, p) for p in policies}
    width = max(len(p) for p in (*policies, "policy"))
    lines = [f"family {family}: {len(scores)} scenarios (seed {seed})"]
    if OURS in summaries:
        ours = summaries[OURS]
        missed = ", ".join(f"{name} {n}" for name, n in ours.missed.items()) or "none"
        lines.append(
            f"goal met by {OURS} on {ours.met} of {len(scores)} ({ours.met / count:.1%}); "
            f"above the ceiling on {ours.over_ceiling}; checks missed: {missed}"
        )
    spans = (1, 1, 3, 3, 3)
    groups = "".join(
        f"{title:<{span * (_CELL + 1)}}" for title, span in zip(_GROUPS, spans, strict=True)
    )
    lines.append(" " * (width + 1) + groups.rstrip())
    lines.append(f"{'policy':<{width}} " + " ".join(f"{n:>{_CELL}}" for n in _NAMES))
    for name, summary in summaries.items():
        cells = [f"{summary.met / count:.1%}", f"{summary.over_ceiling / count:.1%}"]
        for values, form in (
            (summary.violation_s, "{:.1f}"),
            (summary.excess_violation_s, "{:.1f}"),
            (summary.cost_ratio, "{:.2f}x"),
        ):
            cells += [form.format(v) for v in (values.median, values.p90, values.worst)]
        lines.append(f"{name:<{width}} " + " ".join(f"{c:>{_CELL}}" for c in cells))
    return lines


def json_report(
    family: str, seed: int, scores: Sequence[ScenarioScore], policies: Sequence[str]
) -> dict[str, Any]:
    return {
        "family": family,
        "seed": seed,
        "count": len(scores),
        "policies": {p: summarise(scores, p).json(len(scores)) for p in policies},
        "scenarios": [
            {
                "name": s.name,
                "description": s.document.get("description", ""),
                "best": s.best,
                "goal": {p: {"met": g.met, "missed": list(g.missed)} for p, g in s.goals.items()},
                "policies": dict(s.rows),
                "document": dict(s.document),
            }
            for s in scores
        ],
    }
