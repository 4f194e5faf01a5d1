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

Across the files, ScaledObjects whose triggers share a dependency budget are checked together:
limits that disagree, and what KEDA does that the scaler cannot count (minReplicaCount, a
cooldown or HPA scale-down longer than serve's --budget-cooldown and --budget-hold, scale-down
policies).

Each finding names the file, the document (counted from 0), the trigger and key, and what to
set. Exit status 1 when there is a problem, 0 otherwise (warnings alone do not fail).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from scaler.bounds import SERVE_BOUNDS, Bounds
from scaler.check_budgets import BudgetUse, budget_findings, budget_uses
from scaler.check_findings import Finding, Report, Rules, Where
from scaler.check_keda_rules import keda_rules, metric_type_rules, yaml_scalar
from scaler.check_offline_parse import parse_offline
from scaler.metadata_reader import FROM_ENV, value_keys
from scaler.profiles import Profile
from scaler.url_policy import OPEN_URLS, UrlPolicy

KINDS = ("ScaledObject", "ScaledJob")
TRIGGER_TYPES = ("external", "external-push")
#: what ``serve`` allows by default
DEFAULT_RULES = Rules()


def check_documents(
    documents: Iterable[object],
    file: str,
    profiles: Mapping[str, Profile | str],
    profile_names: Iterable[str] = (),
    scaler_addresses: Sequence[str] = (),
    rules: Rules = DEFAULT_RULES,
    budgets: list[BudgetUse] | None = None,
) -> Report:
    """Findings for the KEDA resources among ``documents`` (parsed YAML, in file order); the
    dependency budgets their triggers share are added to ``budgets`` (checked across files by
    :func:`check_files`), else checked here."""
    findings: list[Finding] = []
    uses: list[BudgetUse] = [] if budgets is None else budgets
    checked = 0
    for index, document in enumerate(documents):
        for resource in _resources(document):
            kind = resource.get("kind")
            if kind not in KINDS or not str(resource.get("apiVersion", "")).startswith("keda.sh/"):
                continue
            namespace = (resource.get("metadata") or {}).get("namespace")
            where = Where(file, index, _describe(resource), namespace, rules)
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
                    uses += _budget_uses(where, position, resource, trigger)
    if budgets is None:
        findings += budget_findings(uses)
    return Report(tuple(findings), checked)


def check_files(
    files: Iterable[Path],
    profiles: Mapping[str, Profile | str],
    profile_names: Iterable[str] = (),
    scaler_addresses: Sequence[str] = (),
    rules: Rules = DEFAULT_RULES,
) -> Report:
    findings: list[Finding] = []
    uses: list[BudgetUse] = []
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
        report = check_documents(
            documents, name, profiles, profile_names, scaler_addresses, rules, uses
        )
        findings += report.findings
        checked += report.triggers_checked
    findings += budget_findings(uses)
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
    return key.removesuffix(FROM_ENV) in value_keys()


def _ours(trigger: object, scaler_addresses: Sequence[str]) -> bool:
    if not isinstance(trigger, dict) or trigger.get("type") not in TRIGGER_TYPES:
        return False
    metadata = trigger.get("metadata")
    if not isinstance(metadata, dict):
        return not scaler_addresses
    if scaler_addresses:
        return metadata.get("scalerAddress") in scaler_addresses
    return any(isinstance(key, str) and _our_key(key) for key in metadata)


def _budget_uses(
    where: Where, position: int, resource: Mapping[str, Any], trigger: Mapping[str, Any]
) -> list[BudgetUse]:
    metadata = trigger.get("metadata")
    if not isinstance(metadata, dict):
        return []
    strings = {str(k): v for k, v in metadata.items() if isinstance(v, str)}
    return budget_uses(where, f"spec.triggers[{position}]", resource, strings)


def _check_trigger(
    where: Where,
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
    findings = keda_rules(where, at, metadata)
    findings += metric_type_rules(where, kind, fallback, at, trigger, metadata)
    # a value that is not a string is a problem above; the parser sees it as quoting would make it
    strings = {str(k): v if isinstance(v, str) else yaml_scalar(v) for k, v in metadata.items()}
    findings += parse_offline(where, at, strings, profiles, profile_names)
    return findings
