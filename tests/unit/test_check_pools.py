"""`check` on pool triggers: each broken pool (a bad list, an unknown order, weights without
weighted, a glob the format cannot list, a queue listed twice) is a finding naming the key."""

from __future__ import annotations

import pytest
import yaml

from scaler.check import check_documents
from scaler.check_findings import Severity

PROFILES = {"orders-redis": "redis://redis.shop:6379/0"}


def manifest(**metadata: str) -> object:
    base = {
        "scalerAddress": "queue-age-scaler.keda:6000",
        "connection": "orders-redis",
        "format": "sidekiq",
        "workerThroughput": "2",
    }
    return yaml.safe_load(
        yaml.safe_dump(
            {
                "apiVersion": "keda.sh/v1alpha1",
                "kind": "ScaledObject",
                "metadata": {"name": "orders", "namespace": "shop"},
                "spec": {
                    "scaleTargetRef": {"name": "orders-workers"},
                    "triggers": [{"type": "external", "metadata": base | metadata}],
                },
            }
        )
    )


def test_a_good_pool_passes() -> None:
    good = manifest(
        queues="critical:5,default:3,low-*",
        queueOrder="weighted",
        queueTargetAges="critical=10s",
    )
    report = check_documents([good], "so.yaml", PROFILES)
    assert (report.findings, report.triggers_checked) == ((), 1)


@pytest.mark.parametrize(
    ("metadata", "words"),
    [
        ({"queues": "critical,,low"}, "entry 2 of 'critical,,low' is empty"),
        ({"queues": "a,b", "queueOrder": "priority"}, "one of strict, weighted, roundRobin"),
        ({"queues": "critical:5,low"}, "only queueOrder weighted uses"),
        ({"queues": "a,b", "format": "resque"}, None),
        ({"queues": "high,low-*", "format": "resque"}, "format resque cannot list its queues"),
        ({"queues": "a,b,a"}, "'a' is listed twice"),
    ],
)
def test_a_broken_pool_is_a_problem(metadata: dict[str, str], words: str | None) -> None:
    report = check_documents([manifest(**metadata)], "so.yaml", PROFILES)
    if words is None:
        assert report.findings == ()
        return
    (finding,) = report.findings
    assert finding.severity is Severity.PROBLEM
    assert finding.path.endswith(("metadata.queues", "metadata.queueOrder"))
    assert words in finding.message
