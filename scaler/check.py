"""Validate, offline, the external triggers of ScaledObject and ScaledJob manifests that point
at this scaler.

Which triggers: those of type external or external-push whose scalerAddress is given with
--scaler-address; without that option, those whose metadata has at least one of this scaler's
keys (queue, connection, format, targetAge, ...; KEDA's own keys do not count).

Each such trigger's metadata goes through the scaler's own parser, and through KEDA's rules for
external triggers: every value a string, scalerAddress set, metricType fitting the metric
(workers: AverageValue, KEDA's default; age and drainTime: Value), a ScaledJob only with
metric workers, external-push only for ScaledObjects, and a ScaledObject's fallback only
covering AverageValue triggers.

Offline, two things cannot be known:
  - connection profiles. Known ones come from --connections-dir, QUEUE_AGE_SCALER_CONNECTION_<NAME>
    and --profile NAME. A profile not among them is a problem, unless none is known at all:
    then it is a warning, as the check cannot tell.
  - values of keys ending in FromEnv, which KEDA resolves from the workload's environment:
    a value they make invalid is a warning, not a problem.

Each finding names the file, the document (counted from 0), the trigger and key, and what to
set. Exit status 1 when there is a problem, 0 otherwise (warnings alone do not fail).
"""

from __future__ import annotations

import enum
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from brokers.formats import FORMATS
from scaler.bounds import SERVE_BOUNDS, Bounds
from scaler.errors import InvalidMetadata, PermissionDenied
from scaler.metadata_reader import FROM_ENV, VALUE_KEYS
from scaler.profiles import Profile
from scaler.spec import parse_metadata
from scaler.trigger_spec import Metric
from scaler.url_policy import OPEN_URLS, UrlPolicy

KINDS = ("ScaledObject", "ScaledJob")
TRIGGER_TYPES = ("external", "external-push")
#: stands in for a URL that only the scaler (a profile) or the workload (urlFromEnv) holds
PLACEHOLDER_URLS = {"redis": "redis://offline-check:6379/0", "rabbitmq": "amqp://offline-check/"}
#: stands in for a profile named by connectionFromEnv
PLACEHOLDER_PROFILE = "offline-check"
#: the profile a probed dependency names (``postgres=probe:orders-pg|100/5``)
PROBE_PROFILE = re.compile(r"=\s*probe:([A-Za-z0-9_.-]+)")
#: stands in for another key's value that KEDA resolves from the workload's environment
PLACEHOLDER_VALUE = "1"


class Severity(enum.StrEnum):
    PROBLEM = "problem"
    WARNING = "warning"


@dataclass(frozen=True, slots=True)
class Finding:
    file: str
    document: int | None
    #: "ScaledObject shop/orders", when the document got that far
    resource: str
    #: where in the document: "spec.triggers[0].metadata.targetAge"
    path: str
    message: str
    severity: Severity = Severity.PROBLEM

    def __str__(self) -> str:
        where = [self.file]
        if self.document is not None:
            where.append(
                f"document {self.document}" + (f" ({self.resource})" if self.resource else "")
            )
        if self.path:
            where.append(self.path)
        return f"{': '.join(where)}: {self.severity}: {self.message}"


@dataclass(frozen=True, slots=True)
class Report:
    findings: tuple[Finding, ...]
    triggers_checked: int

    @property
    def problems(self) -> int:
        return sum(f.severity is Severity.PROBLEM for f in self.findings)


@dataclass(frozen=True, slots=True)
class Rules:
    """What the scaler allows a trigger, as ``serve``'s flags set it."""

    urls: UrlPolicy = OPEN_URLS
    bounds: Bounds = SERVE_BOUNDS


def check_documents(
    documents: Iterable[object],
    file: str,
    profiles: Mapping[str, Profile | str],
    profile_names: Iterable[str] = (),
    scaler_addresses: Sequence[str] = (),
    rules: Rules = Rules(),
) -> Report:
    """Findings for the KEDA resources among ``documents`` (parsed YAML, in file order)."""
    findings: list[Finding] = []
    checked = 0
    for index, document in enumerate(documents):
        for resource in _resources(document):
            kind = resource.get("kind")
            if kind not in KINDS or not str(resource.get("apiVersion", "")).startswith("keda.sh/"):
                continue
            namespace = (resource.get("metadata") or {}).get("namespace")
            where = _Where(file, index, _describe(resource), namespace, rules)
            triggers = (resource.get("spec") or {}).get("triggers")
            if not isinstance(triggers, list):
                findings.append(where.problem("spec.triggers", "missing; a list of triggers"))
                continue
            fallback = kind == "ScaledObject" and bool(resource["spec"].get("fallback"))
            for position, trigger in enumerate(triggers):
                if _ours(trigger, scaler_addresses):
                    checked += 1
                    findings += _check_trigger(
                        where, kind, fallback, position, trigger, profiles, profile_names
                    )
    return Report(tuple(findings), checked)


def check_files(
    files: Iterable[Path],
    profiles: Mapping[str, Profile | str],
    profile_names: Iterable[str] = (),
    scaler_addresses: Sequence[str] = (),
    rules: Rules = Rules(),
) -> Report:
    findings: list[Finding] = []
    checked = 0
    for path in files:
        name = "<stdin>" if str(path) == "-" else str(path)
        try:
            text = sys.stdin.read() if str(path) == "-" else path.read_text()
            documents = list(yaml.safe_load_all(text))
        except (OSError, UnicodeDecodeError) as error:
            findings.append(Finding(name, None, "", "", f"cannot read it: {error}"))
            continue
        except yaml.YAMLError as error:
            findings.append(Finding(name, None, "", "", f"not valid YAML: {error}"))
            continue
        report = check_documents(documents, name, profiles, profile_names, scaler_addresses, rules)
        findings += report.findings
        checked += report.triggers_checked
    return Report(tuple(findings), checked)


def main(
    files: Sequence[Path],
    profiles: Mapping[str, Profile | str],
    profile_names: Sequence[str],
    scaler_addresses: Sequence[str],
    *,
    urls: UrlPolicy = OPEN_URLS,
    bounds: Bounds = SERVE_BOUNDS,
) -> int:
    """The ``check`` command: findings on stdout, one a line, then a summary; exit 1 on a problem."""
    report = check_files(files, profiles, profile_names, scaler_addresses, Rules(urls, bounds))
    for finding in report.findings:
        print(finding)
    warnings = len(report.findings) - report.problems
    print(
        f"check: {report.triggers_checked} trigger(s) checked in {len(files)} file(s): "
        f"{report.problems} problem(s), {warnings} warning(s)"
    )
    if report.triggers_checked == 0:
        print(
            "check: no trigger points at this scaler (type external or external-push, with "
            "this scaler's keys or a --scaler-address)"
        )
    return 1 if report.problems else 0


# -- one trigger ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Where:
    file: str
    document: int
    resource: str
    #: the resource's namespace, where the manifest gives it (else profiles' are not checked)
    namespace: str | None
    rules: Rules

    def problem(self, path: str, message: str) -> Finding:
        return Finding(self.file, self.document, self.resource, path, message)

    def warning(self, path: str, message: str) -> Finding:
        return Finding(self.file, self.document, self.resource, path, message, Severity.WARNING)


def _resources(document: object) -> Iterator[dict[str, Any]]:
    """The resource a YAML document holds, or the items of a ``kind: List``."""
    if not isinstance(document, dict):
        return
    if document.get("kind") == "List" and isinstance(document.get("items"), list):
        yield from (item for item in document["items"] if isinstance(item, dict))
    else:
        yield document


def _describe(resource: Mapping[str, Any]) -> str:
    meta = resource.get("metadata") or {}
    name = meta.get("name", "?")
    return (
        f"{resource['kind']} {meta['namespace']}/{name}"
        if meta.get("namespace")
        else f"{resource['kind']} {name}"
    )


def _our_key(key: str) -> bool:
    return key.removesuffix(FROM_ENV) in VALUE_KEYS


def _ours(trigger: object, scaler_addresses: Sequence[str]) -> bool:
    if not isinstance(trigger, dict) or trigger.get("type") not in TRIGGER_TYPES:
        return False
    metadata = trigger.get("metadata")
    if not isinstance(metadata, dict):
        return not scaler_addresses
    if scaler_addresses:
        return metadata.get("scalerAddress") in scaler_addresses
    return any(isinstance(key, str) and _our_key(key) for key in metadata)


def _check_trigger(
    where: _Where,
    kind: str,
    fallback: bool,
    position: int,
    trigger: Mapping[str, Any],
    profiles: Mapping[str, Profile | str],
    profile_names: Iterable[str],
) -> list[Finding]:
    at = f"spec.triggers[{position}]"
    metadata = trigger.get("metadata")
    if not isinstance(metadata, dict):
        return [where.problem(f"{at}.metadata", "missing; set this scaler's keys (queue, ...)")]
    findings = _keda_rules(where, at, metadata)
    findings += _metric_type_rules(where, kind, fallback, at, trigger, metadata)
    # a value that is not a string is a problem above; the parser sees it as quoting would make it
    strings = {str(k): v if isinstance(v, str) else _yaml_scalar(v) for k, v in metadata.items()}
    findings += _parse(where, at, strings, profiles, profile_names)
    return findings


def _keda_rules(where: _Where, at: str, metadata: Mapping[Any, Any]) -> list[Finding]:
    findings: list[Finding] = []
    for key, value in metadata.items():
        if not isinstance(value, str):
            findings.append(
                where.problem(
                    f"{at}.metadata.{key}",
                    f"got {value!r} (YAML {type(value).__name__}); trigger metadata values are "
                    f'strings: quote it ({key}: "{_yaml_scalar(value)}")',
                )
            )
    if not metadata.get("scalerAddress"):
        findings.append(
            where.problem(
                f"{at}.metadata.scalerAddress",
                "missing; set it to the scaler's HOST:PORT (queue-age-scaler.keda:6000, or "
                "localhost:6000 beside the KEDA operator)",
            )
        )
    return findings


def _metric_type_rules(
    where: _Where,
    kind: str,
    fallback: bool,
    at: str,
    trigger: Mapping[str, Any],
    metadata: Mapping[Any, Any],
) -> list[Finding]:
    findings: list[Finding] = []
    metric = metadata.get("metric", Metric.WORKERS.value)
    metric_type = trigger.get("metricType", "AverageValue")
    path = f"{at}.metricType"
    if metric_type == "Utilization":
        findings.append(
            where.problem(path, "KEDA rejects Utilization for external triggers; remove it")
        )
    elif kind == "ScaledJob":
        if metric != Metric.WORKERS.value:
            findings.append(
                where.problem(
                    f"{at}.metadata.metric",
                    f"got {metric!r}; a ScaledJob works only with AverageValue, which fits metric "
                    "workers: remove metric",
                )
            )
        if metric_type != "AverageValue":
            findings.append(
                where.problem(
                    path,
                    f"got {metric_type!r}; a ScaledJob reads only AverageValue: remove metricType",
                )
            )
        if trigger.get("type") == "external-push":
            findings.append(
                where.warning(
                    f"{at}.type",
                    "KEDA ignores pushed activity for a ScaledJob (it still polls); use type external",
                )
            )
    elif metric == Metric.WORKERS.value and metric_type != "AverageValue":
        findings.append(
            where.problem(
                path,
                f"got {metric_type!r}; metric workers is a worker count with target 1: remove "
                "metricType (AverageValue is the default)",
            )
        )
    elif metric in (Metric.AGE.value, Metric.DRAIN_TIME.value) and metric_type != "Value":
        findings.append(
            where.problem(
                path,
                f"got {metric_type!r}; metric {metric} reports seconds for the whole queue: set "
                "metricType: Value",
            )
        )
    if fallback and metric_type == "Value":
        findings.append(
            where.warning(
                path,
                "KEDA applies spec.fallback only to AverageValue triggers: this one gets none "
                "when the scaler answers with an error (metric workers would)",
            )
        )
    return findings


def _yaml_scalar(value: object) -> str:
    return str(yaml.safe_dump(value, default_flow_style=True)).strip().removesuffix("...").strip()


def _parse(
    where: _Where,
    at: str,
    metadata: Mapping[str, str],
    profiles: Mapping[str, Profile | str],
    profile_names: Iterable[str],
) -> list[Finding]:
    """The scaler's parser over the metadata, with what only run time knows stood in for."""
    findings: list[Finding] = []
    placeholder = PLACEHOLDER_URLS.get(_broker_of(metadata), PLACEHOLDER_URLS["redis"])
    known: dict[str, Profile | str] = {**dict.fromkeys(profile_names, placeholder), **profiles}
    values = dict(metadata)
    from_env = {key.removesuffix(FROM_ENV) for key in values if key.endswith(FROM_ENV)}
    for key in sorted(from_env):
        value = values.pop(key + FROM_ENV)
        if key not in VALUE_KEYS or key in values:
            values[key + FROM_ENV] = value  # the parser names the problem
        elif key == "url":
            values[key] = placeholder
        elif key == "connection":
            values[key] = PLACEHOLDER_PROFILE
            known[PLACEHOLDER_PROFILE] = placeholder
        else:
            values[key] = PLACEHOLDER_VALUE
    offline = not known
    connection = values.get("connection")
    if connection and "connection" not in from_env and connection not in known and not known:
        known[connection] = placeholder
        findings.append(
            where.warning(
                f"{at}.metadata.connection",
                f"profile {connection!r} not verified: no profile is known offline; pass "
                f"--profile {connection} or --connections-dir to check it",
            )
        )
    if offline and "dependencies" not in from_env:
        for probe in PROBE_PROFILE.findall(values.get("dependencies", "")):
            known[probe] = PLACEHOLDER_URLS["redis"]
            findings.append(
                where.warning(
                    f"{at}.metadata.dependencies",
                    f"probe profile {probe!r} not verified: no profile is known offline; pass "
                    f"--profile {probe} or --connections-dir to check it",
                )
            )
    rules = where.rules
    try:
        parse_metadata(
            values, known, namespace=where.namespace, urls=rules.urls, bounds=rules.bounds
        )
    except (InvalidMetadata, PermissionDenied) as error:
        message = str(error).removeprefix(f"{error.key}: ")
        path = f"{at}.metadata.{_source_key(error.key, metadata)}"
        # under --profiles-only, any url is refused, whatever value the environment gives
        refused_whatever = isinstance(error, PermissionDenied) and rules.urls.profiles_only
        if error.key in from_env and not refused_whatever:
            findings.append(
                where.warning(
                    path,
                    f"comes from the workload's environment, so it is not checked offline "
                    f"(with a stand-in value: {message})",
                )
            )
        else:
            findings.append(where.problem(path, message))
    return findings


def _broker_of(metadata: Mapping[str, str]) -> str:
    broker = metadata.get("broker")
    if broker:
        return broker
    info = FORMATS.get(metadata.get("format", ""))
    return info.broker if info is not None else "redis"


def _source_key(key: str, metadata: Mapping[str, str]) -> str:
    """The key as the manifest spells it (``urlFromEnv`` where the parser says ``url``)."""
    if key not in metadata and key + FROM_ENV in metadata:
        return key + FROM_ENV
    return key
