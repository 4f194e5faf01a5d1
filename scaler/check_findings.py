"""What ``check`` reports: findings (problems and warnings), where in a manifest each is, and
the rules (``serve``'s flags) a trigger is checked against."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from scaler.bounds import SERVE_BOUNDS, Bounds
from scaler.url_policy import OPEN_URLS, UrlPolicy


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


@dataclass(frozen=True, slots=True)
class Where:
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
