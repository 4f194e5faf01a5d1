"""A scenario of several Deployments on one shared dependency: each its own traffic, jobs,
fleet, trigger, KEDA and HPA, and one dependency they all use (format in docs/simulator.md,
"Several Deployments on one dependency").

The document has the single-Deployment keys that are common to all (``name``, ``description``,
``duration``, ``seed``, ``dependency``, ``slo``) and a list ``deployments``, each with the keys
of one Deployment (``name``, ``arrivals``, ``bursts``, ``jobs``, ``workers``, ``keda``, ``hpa``,
``trigger``, ``policies``, ``initialWorkers``, and ``perWorker``: the dependency's slots one of
its workers holds). Each Deployment is read as a single scenario of its own by
:func:`scaler.simulate.scenario_file.parse_scenario`, on the whole dependency: as KEDA would,
every trigger sees only itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scaler.simulate.scenario import Scenario, ScenarioError
from scaler.simulate.scenario_file import parse_scenario

#: keys of the whole document, and of each entry of ``deployments``
_TOP_KEYS = frozenset(
    {"name", "description", "duration", "seed", "dependency", "slo", "deployments"}
)
_DEPLOYMENT_KEYS = frozenset(
    {
        "name", "arrivals", "bursts", "jobs", "workers", "keda", "hpa", "trigger", "policies",
        "initialWorkers", "perWorker",
    }
)  # fmt: skip
#: Deployments in one scenario at most
MAX_DEPLOYMENTS = 8


@dataclass(frozen=True, slots=True)
class SharedScenario:
    name: str
    duration: float
    #: each Deployment as a scenario of its own, on the whole dependency (name ``SCENARIO/NAME``)
    deployments: tuple[Scenario, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(d.name.rsplit("/", 1)[-1] for d in self.deployments)

    @property
    def slots(self) -> float:
        """Slots the workers of every Deployment may hold in all: the capacity less the API's."""
        dependency = self.deployments[0].dependency
        return dependency.capacity - dependency.api_slots

    @property
    def target_age(self) -> float:
        return self.deployments[0].target_age


def is_shared(document: Mapping[str, Any]) -> bool:
    """Whether a scenario document describes several Deployments (``deployments``)."""
    return "deployments" in document


def parse_shared_scenario(document: Mapping[str, Any]) -> SharedScenario:
    for key in document:
        if key not in _TOP_KEYS:
            raise ScenarioError(
                f"{key}: unknown key of a scenario with deployments; expected one of "
                f"{', '.join(sorted(_TOP_KEYS))} (the others go in each deployment)"
            )
    items = document.get("deployments")
    if not isinstance(items, list) or not items or not all(isinstance(i, dict) for i in items):
        raise ScenarioError("deployments: expected a list of mappings, one per Deployment")
    if len(items) > MAX_DEPLOYMENTS:
        raise ScenarioError(f"deployments: {len(items)}; at most {MAX_DEPLOYMENTS}")
    dependency = document.get("dependency")
    if not isinstance(dependency, dict) or not dependency.get("capacity"):
        raise ScenarioError("dependency: expected a mapping with the shared capacity")
    name = str(document.get("name", ""))
    if not name:
        raise ScenarioError("name: missing")
    seen: set[str] = set()
    deployments = [_deployment(document, item, n, seen) for n, item in enumerate(items)]
    return SharedScenario(name, deployments[0].duration, tuple(deployments))


def _deployment(
    document: Mapping[str, Any], item: Mapping[str, Any], number: int, seen: set[str]
) -> Scenario:
    """One Deployment as a scenario of its own, on the whole dependency."""
    path = f"deployments[{number}]"
    unknown = sorted(set(item) - _DEPLOYMENT_KEYS)
    if unknown:
        raise ScenarioError(
            f"{path}.{unknown[0]}: unknown key; expected one of {', '.join(sorted(_DEPLOYMENT_KEYS))}"
        )
    own = str(item.get("name", ""))
    if not own or own in seen:
        raise ScenarioError(f"{path}.name: expected a name of its own")
    seen.add(own)
    single: dict[str, Any] = {k: v for k, v in item.items() if k != "perWorker"}
    single["name"] = f"{document['name']}/{own}"
    single["dependency"] = dict(document["dependency"])
    if "perWorker" in item:
        single["dependency"]["perWorker"] = item["perWorker"]
    for key in ("duration", "slo"):
        if key in document:
            single[key] = document[key]
    seed = document.get("seed", 1)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ScenarioError(f"seed: got {seed!r}; expected a whole number")
    single["seed"] = seed * 100 + number  # each Deployment its own jobs
    try:
        return parse_scenario(single)
    except ScenarioError as error:
        raise ScenarioError(f"{path}.{error}") from None
