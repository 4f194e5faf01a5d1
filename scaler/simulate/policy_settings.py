"""A policy's overrides from a scenario's ``policies`` section, read with the policy's
defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scaler.durations import parse_duration
from scaler.simulate.scenario import Scenario, ScenarioError


@dataclass(frozen=True)
class PolicySettings:
    """A policy's overrides from the scenario, read with the policy's defaults."""

    policy: str
    values: Mapping[str, Any]

    def _get(self, key: str) -> Any:
        return self.values.get(key)

    def fail(self, key: str, expected: str) -> ScenarioError:
        return ScenarioError(
            f"policies.{self.policy}.{key}: got {self.values.get(key)!r}; expected {expected}"
        )

    def number(self, key: str, default: float) -> float:
        value = self._get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise self.fail(key, "a number above zero")
        return float(value)

    def integer(self, key: str, default: int) -> int:
        value = self._get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.fail(key, "a whole number, at least 0")
        return value

    def duration(self, key: str, default: float) -> float:
        value = self._get(key)
        if value is None:
            return default
        try:
            return parse_duration(str(value))
        except ValueError:
            raise self.fail(key, "a duration such as 30, 90s or 5m") from None


def depth_target(scenario: Scenario) -> float:
    """Jobs one worker gets through within the SLO: AWS's "acceptable latency / processing time"."""
    return max(1.0, round(scenario.target_age * scenario.worker_throughput))
