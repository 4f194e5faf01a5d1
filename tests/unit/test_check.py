"""`queue-age-scaler check`: offline validation of the triggers that point at this scaler."""

from __future__ import annotations

import io
import textwrap
from pathlib import Path

import pytest
import yaml

from scaler.check import check_documents
from scaler.check_findings import Severity
from scaler.cli import main

SO_HEAD = """\
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: orders, namespace: shop}
spec:
  scaleTargetRef: {name: orders-workers}
  triggers:
"""
GOOD_TRIGGER = """\
    - type: external
      metadata:
        scalerAddress: queue-age-scaler.keda:6000
        connection: orders-redis
        queue: default
        format: sidekiq
        workerThroughput: "2"
"""
PROFILES = {"orders-redis": "redis://redis.shop:6379/0"}


def write(tmp_path: Path, text: str, name: str = "so.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    code = main(["check", *args])
    return code, capsys.readouterr().out.splitlines()


def test_a_good_manifest_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QUEUE_AGE_SCALER_CONNECTION_ORDERS_REDIS", "redis://redis:6379/0")
    code, out = run(capsys, str(write(tmp_path, SO_HEAD + GOOD_TRIGGER)))
    assert code == 0
    assert out == ["check: 1 trigger(s) checked in 1 file(s): 0 problem(s), 0 warning(s)"]


def test_a_problem_names_file_document_trigger_key_and_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = "---\napiVersion: v1\nkind: Service\nmetadata: {name: x}\n---\n"
    bad = GOOD_TRIGGER.replace('workerThroughput: "2"', "tragetAge: 30s")
    path = write(tmp_path, other + SO_HEAD + GOOD_TRIGGER + bad)
    code, out = run(capsys, "--profile", "orders-redis", str(path))
    assert code == 1
    assert out[0] == (
        f"{path}: document 1 (ScaledObject shop/orders): spec.triggers[1].metadata.tragetAge: "
        "problem: unknown key (value '30s'); did you mean 'targetAge'? Valid keys: "
        + out[0].split("Valid keys: ")[1]
    )
    assert out[-1] == "check: 2 trigger(s) checked in 1 file(s): 1 problem(s), 0 warning(s)"


def findings(
    text: str, profiles: dict[str, str] = PROFILES, profile_names: tuple[str, ...] = ()
) -> list[tuple[str, str, Severity]]:
    documents = list(yaml.safe_load_all(textwrap.dedent(text)))
    report = check_documents(documents, "f.yaml", profiles, profile_names)
    return [(f.path, f.message, f.severity) for f in report.findings]


def test_keda_rules_for_external_triggers() -> None:
    text = SO_HEAD + textwrap.indent(
        textwrap.dedent("""\
        - type: external
          metadata: {connection: orders-redis, queue: a, format: sidekiq, workerThroughput: 2}
        - type: external
          metricType: Value
          metadata: {scalerAddress: s:6000, connection: orders-redis, queue: b, format: sidekiq,
                     workerThroughput: "2"}
        - type: external
          metadata: {scalerAddress: s:6000, connection: orders-redis, queue: c, format: sidekiq,
                     metric: age}
        - type: external
          metricType: Value
          metadata: {scalerAddress: s:6000, connection: orders-redis, queue: d, format: sidekiq,
                     metric: drainTime, workerThroughput: "1"}
        """),
        "    ",
    )
    found = findings(text)
    paths = [path for path, _, _ in found]
    assert paths == [
        "spec.triggers[0].metadata.workerThroughput",
        "spec.triggers[0].metadata.scalerAddress",
        "spec.triggers[1].metricType",
        "spec.triggers[2].metricType",
    ]
    assert 'quote it (workerThroughput: "2")' in found[0][1]
    assert "remove metricType" in found[2][1]
    assert "set metricType: Value" in found[3][1]


def test_a_scaled_job_takes_only_metric_workers() -> None:
    text = """\
    apiVersion: keda.sh/v1alpha1
    kind: ScaledJob
    metadata: {name: reports}
    spec:
      jobTargetRef: {template: {spec: {containers: [{name: w, image: w}]}}}
      triggers:
        - type: external-push
          metadata: {scalerAddress: s:6000, connection: orders-redis, queue: q, format: rq,
                     metric: age}
    """
    found = findings(text)
    assert [(p, s) for p, _, s in found] == [
        ("spec.triggers[0].metadata.metric", Severity.PROBLEM),
        ("spec.triggers[0].type", Severity.WARNING),
    ]


def test_unknown_profiles_are_a_warning_only_when_no_profile_is_known() -> None:
    text = SO_HEAD + GOOD_TRIGGER
    assert findings(text, profiles={}) == [
        (
            "spec.triggers[0].metadata.connection",
            "profile 'orders-redis' not verified: no profile is known offline; pass "
            "--profile orders-redis or --connections-dir to check it",
            Severity.WARNING,
        )
    ]
    assert findings(text, profiles={}, profile_names=("orders-redis",)) == []
    (found,) = findings(text, profiles={}, profile_names=("payments-redis",))
    assert found[0] == "spec.triggers[0].metadata.connection"
    assert "no such connection profile" in found[1] and found[2] is Severity.PROBLEM


def test_values_from_the_environment_are_stood_in_for() -> None:
    trigger = """\
        - type: external
          metadata:
            scalerAddress: s:6000
            urlFromEnv: REDIS_URL
            queue: default
            format: sidekiq
            workerThroughputFromEnv: THROUGHPUT
    """
    assert findings(SO_HEAD + trigger) == []
    found = findings(SO_HEAD + trigger.replace("format: sidekiq", "formatFromEnv: FORMAT"))
    assert [(p, s) for p, _, s in found] == [
        ("spec.triggers[0].metadata.formatFromEnv", Severity.WARNING)
    ]
    both = findings(
        SO_HEAD + trigger.replace("queue: default", "queue: a\n            queueFromEnv: Q")
    )
    assert [(p, s) for p, _, s in both] == [
        ("spec.triggers[0].metadata.queueFromEnv", Severity.PROBLEM)
    ]


def test_which_triggers_point_at_this_scaler() -> None:
    text = SO_HEAD + textwrap.indent(
        textwrap.dedent("""\
        - type: redis
          metadata: {address: r:6379, listName: q, queue: x}
        - type: external
          metadata: {scalerAddress: other-scaler:6000, threshold: "3"}
        - type: external
          metadata: {scalerAddress: mine:6000, quue: typo}
        """),
        "    ",
    )
    documents = list(yaml.safe_load_all(text))
    assert check_documents(documents, "f", PROFILES).triggers_checked == 0
    report = check_documents(documents, "f", PROFILES, scaler_addresses=["mine:6000"])
    assert report.triggers_checked == 1
    assert report.findings[0].path == "spec.triggers[2].metadata.quue"


def test_a_list_and_unreadable_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    listed = write(
        tmp_path,
        "apiVersion: v1\nkind: List\nitems:\n- "
        + textwrap.indent(SO_HEAD + GOOD_TRIGGER, "  ").lstrip(),
        "list.yaml",
    )
    broken = write(tmp_path, "a: [unclosed\n", "broken.yaml")
    code, out = run(capsys, "--profile", "orders-redis", str(listed), str(broken))
    assert code == 1
    assert out[0].startswith(f"{broken}: problem: not valid YAML")
    assert out[-1] == "check: 1 trigger(s) checked in 2 file(s): 1 problem(s), 0 warning(s)"


def test_fallback_does_not_cover_value_triggers() -> None:
    text = SO_HEAD.replace(
        "  triggers:\n", "  fallback: {failureThreshold: 3, replicas: 4}\n  triggers:\n"
    )
    text += """\
    - type: external
      metricType: Value
      metadata: {scalerAddress: s:6000, connection: orders-redis, queue: q, format: rq,
                 metric: age}
    """
    (found,) = findings(text)
    assert found[0] == "spec.triggers[0].metricType" and found[2] is Severity.WARNING
    assert "fallback only to AverageValue" in found[1]
    assert (
        findings(
            SO_HEAD.replace(
                "  triggers:\n", "  fallback: {failureThreshold: 3, replicas: 4}\n  triggers:\n"
            )
            + GOOD_TRIGGER
        )
        == []
    )


def test_manifests_from_stdin(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(SO_HEAD + GOOD_TRIGGER.replace("2", "zero")))
    code, out = run(capsys, "--profile", "orders-redis", "-")
    assert code == 1
    assert out[0].startswith(
        "<stdin>: document 0 (ScaledObject shop/orders): "
        "spec.triggers[0].metadata.workerThroughput: problem: got 'zero'; expected a number"
    )


def test_probe_profiles_are_checked_as_connection_profiles_are() -> None:
    text = SO_HEAD + GOOD_TRIGGER + "        dependencies: postgres=probe:orders-pg|100/5\n"
    assert findings(text, profiles=PROFILES | {"orders-pg": "postgresql://w@db/orders"}) == []
    (found,) = findings(text, profiles=PROFILES)
    assert found[0] == "spec.triggers[0].metadata.dependencies"
    assert "probe:orders-pg: got 'orders-pg'; the scaler has no such connection profile" in found[1]
    assert found[2] is Severity.PROBLEM
    assert [(p, m) for p, m, _ in findings(text, profiles={})][1] == (
        "spec.triggers[0].metadata.dependencies",
        "probe profile 'orders-pg' not verified: no profile is known offline; pass "
        "--profile orders-pg or --connections-dir to check it",
    )
