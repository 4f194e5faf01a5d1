"""``check`` across ScaledObjects that share a dependency budget: limits that disagree, and
what KEDA does to a pool that the scaler cannot count where the format shows no workers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from scaler.check import check_files
from scaler.check_findings import Severity

PROFILES = {"orders-redis": "redis://redis.shop.svc:6379/0"}


def scaled_object(name: str, dependencies: str, *, fmt: str = "celery", namespace: str = "shop",
                  **spec: Any) -> dict[str, Any]:  # fmt: skip
    metadata = {
        "scalerAddress": "queue-age-scaler.keda:6000", "connection": "orders-redis",
        "queue": name, "format": fmt, "jobDuration": "1s", "dependencies": dependencies,
    }  # fmt: skip
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"scaleTargetRef": {"name": name}, "triggers": [
            {"type": "external", "metadata": metadata}]} | spec,
    }  # fmt: skip


def check(tmp_path: Path, *files: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    paths = []
    for number, documents in enumerate(files):
        path = tmp_path / f"{number}.yaml"
        path.write_text(yaml.safe_dump_all(documents))
        paths.append(path)
    report = check_files(paths, PROFILES)
    assert all(f.severity is Severity.WARNING for f in report.findings), report.findings
    return [(f.resource, f.path, f.message) for f in report.findings]


def test_limits_that_disagree_across_files_are_named(tmp_path: Path) -> None:
    findings = check(
        tmp_path,
        [scaled_object("orders", "postgres=100/5")],
        [scaled_object("mailer", "postgres=80/5")],
    )
    ((resource, path, message),) = findings
    assert resource == "ScaledObject shop/orders"
    assert path == "spec.triggers[0].metadata.dependencies"
    assert "other limits: 100 (ScaledObject shop/orders), 80 (ScaledObject shop/mailer)" in message
    assert "keeps to the smallest (80)" in message


def test_only_triggers_that_share_are_compared(tmp_path: Path) -> None:
    assert check(
        tmp_path,
        [
            scaled_object("orders", "postgres=100/5"),
            scaled_object("mailer", "postgres=80/5", namespace="mail"),  # another namespace
            scaled_object("reports", "other=80/5"),  # another dependency
            scaled_object("alone", "postgres=80/5", minReplicaCount=2),  # shares: warned below
        ],
    ) == [
        (
            "ScaledObject shop/orders",
            "spec.triggers[0].metadata.dependencies",
            "'postgres' shares one budget with other ScaledObjects, which name other limits: "
            "100 (ScaledObject shop/orders), 80 (ScaledObject shop/alone); the scaler keeps to "
            "the smallest (80). Give them all the same LIMIT, or, if they are different "
            "dependencies, each its own dependencyScope",
        ),
        (
            "ScaledObject shop/alone",
            "spec.minReplicaCount",
            "2: KEDA keeps these workers whatever the shared budget allots, and it shares "
            "'postgres' with ScaledObject shop/orders; set minReplicaCount 0 and minWorkers 2 "
            "in the trigger (the split counts it)",
        ),
    ]


def test_what_keda_keeps_beyond_the_budgets_count(tmp_path: Path) -> None:
    behavior = {"scaleDown": {"stabilizationWindowSeconds": 600,
                              "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}}  # fmt: skip
    slow = scaled_object(
        "mailer", "postgres=100/5", cooldownPeriod=900,
        advanced={"horizontalPodAutoscalerConfig": {"behavior": behavior}},
    )  # fmt: skip
    paths = [p for _, p, _ in check(tmp_path, [scaled_object("orders", "postgres=100/5"), slow])]
    assert paths == [
        "spec.cooldownPeriod",
        "spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleDown",
        "spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleDown.policies",
    ]
    # a format that shows its workers is counted by them: nothing to warn about
    shown = scaled_object(
        "mailer", "postgres=100/5", fmt="rq", minReplicaCount=2, cooldownPeriod=900
    )
    assert check(tmp_path, [scaled_object("orders", "postgres=100/5"), shown]) == []


def test_dependency_scope_none_shares_with_nobody(tmp_path: Path) -> None:
    mailer = scaled_object("mailer", "postgres=80/5", minReplicaCount=2)
    mailer["spec"]["triggers"][0]["metadata"]["dependencyScope"] = "none"
    assert check(tmp_path, [scaled_object("orders", "postgres=100/5"), mailer]) == []
