"""``check`` across manifests: the ScaledObjects whose triggers share a dependency budget
(:mod:`scaler.budget_registry`), and what in them the scaler cannot see or keep to.

- triggers sharing one budget that name different limits: the scaler keeps to the smallest;
- where the trigger's format does not show the attached workers (the scaler then counts a
  pool's workers from its own answers): ``minReplicaCount`` above 0 (KEDA keeps those workers
  whatever the budget says; ``minWorkers`` is counted in the split), a ``cooldownPeriod`` or an
  HPA scale-down window longer than ``serve --budget-cooldown`` / ``--budget-hold`` by default
  (300 s), or HPA scale-down policies (rate limits): the pool then runs workers the scaler does
  not count.

Only budgets that two ScaledObjects among the files share are looked at (with one, nothing is
shared); a manifest without a namespace counts as the namespace it will be applied in, which is
taken to be the same for every such manifest.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from brokers import registry
from scaler.budget_registry import COOLDOWN, HOLD
from scaler.check_findings import Finding, Where
from scaler.trigger_spec import NOT_SHARED

#: NAME=LIMIT/PER_WORKER or NAME=probe:PROFILE[|LIMIT]/PER_WORKER, loosely: the parser has
#: already said what is wrong with one that does not match
_DEPENDENCY = re.compile(
    r"^\s*([A-Za-z0-9_.-]+)=(?:probe:([A-Za-z0-9_.-]+)(?:\|([0-9.]+))?|([0-9.]+))/[0-9.]+\s*$"
)


@dataclass(frozen=True, slots=True)
class BudgetUse:
    """One trigger's dependency, as ``check`` found it."""

    where: Where
    at: str
    resource: Mapping[str, Any]
    #: the budget: ("namespace", NAMESPACE, SCOPE, NAME) or ("profile", PROFILE)
    key: tuple[str, ...]
    limit: float | None
    dependency: str
    #: whether the trigger's format shows the attached workers (the scaler then counts them)
    shows_workers: bool


def budget_uses(
    where: Where, at: str, resource: Mapping[str, Any], metadata: Mapping[str, str]
) -> list[BudgetUse]:
    """The budgets a trigger's dependencies share (none with ``dependencyScope: none``)."""
    scope = metadata.get("dependencyScope", "").strip() or None
    if scope == NOT_SHARED:
        return []
    broker = registry.brokers().get(metadata.get("broker", ""))
    default = broker.default_format if broker is not None else "list"
    info = registry.formats().get(metadata.get("format", default))
    shows = info is not None and info.reports_consumers
    uses = []
    for part in metadata.get("dependencies", "").split(","):
        match = _DEPENDENCY.match(part)
        if not match:
            continue
        name, probe, fallback, limit = match.groups()
        if probe is not None and scope is None:
            key: tuple[str, ...] = ("profile", probe)
        else:
            key = ("namespace", where.namespace or "", scope or "", name)
        given = fallback if probe is not None else limit
        limit_given = float(given) if given else None
        uses.append(BudgetUse(where, at, resource, key, limit_given, name, shows))
    return uses


def budget_findings(uses: list[BudgetUse]) -> list[Finding]:
    by_key: dict[tuple[str, ...], list[BudgetUse]] = defaultdict(list)
    for use in uses:
        by_key[use.key].append(use)
    findings: list[Finding] = []
    for shared in by_key.values():
        if len({use.where.resource for use in shared}) < 2:
            continue  # one ScaledObject: nothing is shared
        findings += _limits_disagree(shared)
        seen: set[str] = set()
        for use in shared:
            if use.where.resource not in seen and not use.shows_workers:
                seen.add(use.where.resource)
                findings += _unseen_workers(use, shared)
    return findings


def _limits_disagree(shared: list[BudgetUse]) -> list[Finding]:
    limits = {use.limit for use in shared if use.limit is not None}
    if len(limits) < 2:
        return []
    smallest = min(limits)
    others = ", ".join(
        sorted({f"{u.limit:g} ({u.where.resource})" for u in shared if u.limit is not None})
    )
    return [
        use.where.warning(
            f"{use.at}.metadata.dependencies",
            f"{use.dependency!r} shares one budget with other ScaledObjects, which name other "
            f"limits: {others}; the scaler keeps to the smallest ({smallest:g}). Give them all "
            "the same LIMIT, or, if they are different dependencies, each its own "
            "dependencyScope",
        )
        for use in shared
        if use.limit != smallest
    ]


def _unseen_workers(use: BudgetUse, shared: list[BudgetUse]) -> list[Finding]:
    spec = use.resource.get("spec") or {}
    others = sorted({u.where.resource for u in shared} - {use.where.resource})
    with_whom = f"it shares {use.dependency!r} with {', '.join(others)}"
    findings = []
    floor = spec.get("minReplicaCount")
    if isinstance(floor, int) and floor > 0:
        findings.append(
            use.where.warning(
                "spec.minReplicaCount",
                f"{floor}: KEDA keeps these workers whatever the shared budget allots, and "
                f"{with_whom}; set minReplicaCount 0 and minWorkers {floor} in the trigger "
                "(the split counts it)",
            )
        )
    cooldown = spec.get("cooldownPeriod")
    if isinstance(cooldown, int | float) and cooldown > COOLDOWN:
        findings.append(
            use.where.warning(
                "spec.cooldownPeriod",
                f"{cooldown:g} s, longer than serve's --budget-cooldown default "
                f"({COOLDOWN:g} s), and {with_whom}: run the scaler with --budget-cooldown "
                f"{cooldown:g}s or more",
            )
        )
    behavior = (
        ((spec.get("advanced") or {}).get("horizontalPodAutoscalerConfig") or {}).get("behavior")
        or {}
    ).get("scaleDown") or {}
    window = behavior.get("stabilizationWindowSeconds")
    if isinstance(window, int | float) and window > HOLD:
        findings.append(
            use.where.warning(
                "spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleDown",
                f"stabilizationWindowSeconds {window:g}, longer than serve's --budget-hold "
                f"default ({HOLD:g} s), and {with_whom}: run the scaler with --budget-hold "
                f"{window:g}s or more",
            )
        )
    if behavior.get("policies"):
        findings.append(
            use.where.warning(
                "spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleDown.policies",
                f"scale-down policies slow the HPA's scale-in past its window, and {with_whom}: "
                "the scaler counts a pool's old workers for --budget-hold after its last larger "
                "answer (longer only where the format shows the workers), so drop the policies "
                "or raise --budget-hold by the time they take",
            )
        )
    return findings
