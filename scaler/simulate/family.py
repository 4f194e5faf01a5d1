"""A scenario family: distributions instead of values, and the scenarios drawn from them.

A family file (format in docs/simulator.md) either generates whole scenarios (traffic shape,
job classes, workers, dependency ceiling, trigger) or starts from shipped scenario files
(``scenarios:``) and draws only their trigger (format, ``jobDuration``). Drawing scenario
``index`` of seed ``seed`` gives an ordinary scenario document, the mapping a scenario file
holds, read by :func:`~scaler.simulate.scenario_file.parse_scenario`: written out as YAML it
replays as it was drawn. Every key is drawn from its own random stream (``seed:index:key``), so
one scenario does not depend on how many are drawn, nor one key on the others.
"""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brokers import registry
from brokers.formats import FORMATS
from scaler.simulate.distributions import (
    Choice,
    Distribution,
    Fixed,
    Integer,
    Uniform,
    check_options,
    parse,
    seconds,
)
from scaler.simulate.scenario import Dependency, JobClass, Scenario, ScenarioError, Segment
from scaler.simulate.scenario_file import parse_scenario, read_mapping

SHAPES = ("steady", "steps", "sine", "bursts", "onoff", "ramp")
CEILINGS = ("none", "loose", "binding")
GIVEN = ("exact", "misestimated", "absent")
#: the built-in formats the simulator can show a queue as (``format: all``)
SIMULATED_FORMATS = tuple(name for name, info in FORMATS.items() if info.snapshot_model)

#: every key a generating family may set, with its default, in the family file's notation;
#: ``True`` after a default: the key is a duration
_GENERATED: dict[str, dict[str, tuple[Any, bool]]] = {
    "": {
        "duration": ("1h", True),
        "targetAge": ({"choice": ["15s", "30s", "1m", "2m", "5m"]}, True),
        "initialWorkers": ("warm", False),
    },
    "arrivals": {
        "shape": ({"choice": list(SHAPES)}, False),
        "peakWorkers": ({"logUniform": [1, 60]}, False),
        "maxJobs": (100_000, False),
    },
    "arrivals.steps": {
        "levels": ({"integer": [2, 5]}, False),
        "low": ({"uniform": [0.1, 0.6]}, False),
    },
    "arrivals.sine": {
        "period": ({"logUniform": ["10m", "2h"]}, True),
        "amplitude": ({"uniform": [0.2, 1.0]}, False),
    },
    "arrivals.bursts": {
        "count": ({"integer": [1, 4]}, False),
        "size": ({"logUniform": ["1m", "15m"]}, True),
        "base": ({"uniform": [0.05, 0.5]}, False),
    },
    "arrivals.onoff": {
        "on": ({"logUniform": ["1m", "15m"]}, True),
        "off": ({"logUniform": ["1m", "20m"]}, True),
        "low": (0.0, False),
    },
    "arrivals.ramp": {
        "direction": ({"choice": ["up", "down"]}, False),
        "from": ({"uniform": [0.0, 0.3]}, False),
        "over": ({"uniform": [0.3, 1.0]}, False),
        "step": ("1m", True),
    },
    "jobs": {
        "classes": ({"integer": [1, 3]}, False),
        "median": ({"logUniform": ["10ms", "30m"]}, True),
        "tail": ({"logUniform": [1.5, 30]}, False),
        "share": ({"logUniform": [0.02, 1.0]}, False),
        "usesDependency": ({"choice": {True: 3, False: 1}}, False),
        "cpuPerJob": ({"uniform": [0.02, 0.5]}, False),
    },
    "workers": {
        "concurrency": ({"logInteger": [1, 50]}, False),
        "bootSeconds": ({"logUniform": ["5s", "180s"]}, True),
        "drain": ({"choice": [True, "grace"]}, False),
        "grace": ({"logUniform": ["10s", "5m"]}, True),
    },
    "dependency": {
        "ceiling": ({"choice": list(CEILINGS)}, False),
        "loose": ({"uniform": [1.3, 3.0]}, False),
        "binding": ({"uniform": [0.4, 0.9]}, False),
        "apiShare": ({"uniform": [0.0, 0.3]}, False),
        "name": ("postgres", False),
    },
    "trigger": {
        "format": ("all", False),
        "jobDuration": ({"choice": {"exact": 1, "misestimated": 2, "absent": 1}}, False),
        "misestimate": ({"uniform": [-0.3, 0.3]}, False),
        "timestamps": ({"choice": [True, False]}, False),
        "gracePeriod": ({"choice": {"given": 1, "absent": 1}}, False),
    },
}
#: the trigger keys a family of shipped scenarios may draw (each kept from the file if absent)
_BASED = {
    key: _GENERATED["trigger"][key]
    for key in ("format", "jobDuration", "misestimate", "timestamps")
}
#: the trigger keys that belong to one format's layout, dropped when the format is redrawn
_LAYOUT_KEYS = frozenset(key for info in FORMATS.values() for key in info.layout_keys) | {
    "managementUrl"
}
#: sections passed through to the scenario, each value drawn (literals kept)
_PASSED = ("keda", "hpa")
_TOP = frozenset({"family", "description", "scenarios", "every", "seeds", *_PASSED}) | {
    section.split(".")[0] or key for section, keys in _GENERATED.items() for key in keys
}

Draws = dict[str, Distribution]


@dataclass(frozen=True)
class Family:
    name: str
    description: str
    #: the distribution of every key, by its path (``workers.bootSeconds``)
    draws: Draws
    #: the scenario documents a family of shipped scenarios starts from, by file stem
    bases: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    #: the ``keda`` and ``hpa`` sections, each key a distribution
    passed: Mapping[str, Draws] | None = None
    #: walk the files and trigger.format's options in turn instead of drawing them
    every: bool = False
    #: keep each file's seed (its very jobs) instead of drawing one
    keep_seeds: bool = False

    def document(self, seed: int, index: int) -> dict[str, Any]:
        """Scenario ``index`` of ``seed``: a scenario document, as a scenario file holds it."""
        draw = _Drawer(self.draws, f"{seed}:{index}")
        name = f"{self.name}-{index:03d}"
        if self.bases:
            return _from_base(self, draw, name, index)
        return _generated(self, draw, name)

    def scenario(self, seed: int, index: int) -> Scenario:
        return parse_scenario(self.document(seed, index))


class _Drawer:
    """Draws each key from its own stream: ``draw(key)``, or the ``n``th draw of a key."""

    def __init__(self, draws: Draws, stem: str) -> None:
        self.draws = draws
        self.stem = stem
        self.streams: dict[str, random.Random] = {}

    def rng(self, key: str) -> random.Random:
        if key not in self.streams:
            self.streams[key] = random.Random(f"{self.stem}:{key}")
        return self.streams[key]

    def __call__(self, key: str) -> Any:
        return self.draws[key].draw(self.rng(key))

    def seconds(self, key: str) -> float:
        return seconds(self(key), key)

    def has(self, key: str) -> bool:
        return key in self.draws


def load_family(path: Path) -> Family:
    document = read_mapping(path, "family")
    try:
        return parse_family(document, path.parent)
    except ScenarioError as error:
        raise ScenarioError(f"{path}: {error}") from None


def parse_family(document: Mapping[str, Any], folder: Path) -> Family:
    """The family in ``document``; ``scenarios`` paths are relative to ``folder``."""
    for key in document:
        if key not in _TOP:
            raise ScenarioError(f"{key}: unknown key; expected one of {', '.join(sorted(_TOP))}")
    name = document.get("family")
    if not isinstance(name, str) or not name:
        raise ScenarioError("family: missing; expected the family's name (family: broad)")
    description = str(document.get("description", "")).strip()
    if "scenarios" in document:
        return _parse_based(document, folder, name, description)
    return _parse_generated(document, name, description)


def _parse_generated(document: Mapping[str, Any], name: str, description: str) -> Family:
    for key in ("every", "seeds"):
        if key in document:
            raise ScenarioError(f"{key}: only with scenarios (a family of scenario files)")
    draws: Draws = {}
    for section, keys in _GENERATED.items():
        values = _mapping(document, section)
        for key in values if section else ():  # the top level's keys are checked above
            if key not in keys and not (section == "arrivals" and key in SHAPES):
                raise ScenarioError(
                    f"{_path(section, key)}: unknown key; expected one of {_known(section)}"
                )
        for key, (default, is_duration) in keys.items():
            path = _path(section, key)
            value = values.get(key, default)
            if section == "jobs" and key != "classes" and isinstance(value, list) and value:
                # one distribution per class, in order; the last one for the classes after
                for i, item in enumerate(value):
                    draws[f"{path}[{i}]"] = parse(item, f"{path}[{i}]", duration=is_duration)
                value = value[-1]
            draws[path] = parse(value, path, duration=is_duration)
    _check_generated(draws)
    passed = {s: _passed(document, s) for s in _PASSED}
    return Family(name, description, draws, passed=passed)


def _parse_based(document: Mapping[str, Any], folder: Path, name: str, description: str) -> Family:
    extra = set(document) - {"family", "description", "scenarios", "trigger", "every", "seeds"}
    if extra:
        raise ScenarioError(
            f"{sorted(extra)[0]}: not with scenarios; a family of scenario files draws only "
            "trigger.format, .timestamps, .jobDuration and .misestimate (drop scenarios to "
            "generate whole scenarios)"
        )
    paths = document["scenarios"]
    if not isinstance(paths, list) or not paths or not all(isinstance(p, str) for p in paths):
        raise ScenarioError(
            f"scenarios: got {paths!r}; expected a list of scenario files (../steady.yaml)"
        )
    trigger = _mapping(document, "trigger")
    for key in trigger:
        if key not in _BASED:
            raise ScenarioError(f"trigger.{key}: unknown key; expected one of {', '.join(_BASED)}")
    bases = []
    for i, text in enumerate(paths):
        path = folder / text
        try:
            base = read_mapping(path, "scenario")
            parse_scenario(base)  # checked now: a bad file fails before any draw
            bases.append((path.stem, base))
        except OSError as error:
            raise ScenarioError(
                f"scenarios[{i}]: cannot read {path}: {error.strerror}; the paths are relative "
                "to the family file's folder"
            ) from None
        except ScenarioError as error:
            raise ScenarioError(f"scenarios[{i}]: {error}") from None
    draws = {
        f"trigger.{key}": parse(trigger[key], f"trigger.{key}", duration=_BASED[key][1])
        for key in trigger
    }
    if "trigger.misestimate" not in draws:
        draws["trigger.misestimate"] = parse(_BASED["misestimate"][0], "trigger.misestimate")
    _check_trigger(draws)
    every = document.get("every", False)
    if not isinstance(every, bool):
        raise ScenarioError(f"every: got {every!r}; expected true or false")
    fmt = draws.get("trigger.format")
    if every and fmt is not None and not isinstance(fmt, Choice | Fixed):
        raise ScenarioError("every: walks trigger.format's options; give it a choice or a value")
    seeds = document.get("seeds", "drawn")
    if seeds not in ("drawn", "kept"):
        raise ScenarioError(
            f"seeds: got {seeds!r}; expected drawn (new jobs for every scenario) or kept (each "
            "file's own seed)"
        )
    return Family(name, description, draws, tuple(bases), every=every, keep_seeds=seeds == "kept")


def _mapping(document: Mapping[str, Any], section: str) -> Mapping[str, Any]:
    value: Any = document
    for part in section.split(".") if section else ():
        value = value.get(part, {})
        if not isinstance(value, dict):
            raise ScenarioError(f"{section}: got {value!r}; expected a mapping")
    mapping: Mapping[str, Any] = value
    return mapping


def _passed(document: Mapping[str, Any], section: str) -> Draws:
    return {
        key: parse(value, f"{section}.{key}") for key, value in _mapping(document, section).items()
    }


def _path(section: str, key: str) -> str:
    return f"{section}.{key}" if section else key


def _known(section: str) -> str:
    keys = list(_GENERATED[section])
    if section == "arrivals":
        keys += list(SHAPES)
    return ", ".join(keys)


def _check_generated(draws: Draws) -> None:
    check_options(draws["arrivals.shape"], "arrivals.shape", SHAPES)
    check_options(draws["dependency.ceiling"], "dependency.ceiling", CEILINGS)
    check_options(draws["arrivals.ramp.direction"], "arrivals.ramp.direction", ("up", "down"))
    check_options(draws["trigger.timestamps"], "trigger.timestamps", (True, False))
    for path in _with_classes(draws, "jobs.usesDependency"):
        check_options(draws[path], path, (True, False))
    for path in _with_classes(draws, "jobs.median"):
        _positive_durations(draws[path], path)
    _bounded(draws, "jobs.classes", 1, 3)
    initial = draws["initialWorkers"]
    if isinstance(initial, Fixed | Choice):
        for option in initial.values:
            if option != "warm" and (isinstance(option, bool) or not isinstance(option, int)):
                raise ScenarioError(
                    f"initialWorkers: got {option!r}; expected warm (the workers the first "
                    "rate needs) or a whole number"
                )
    _bounded(draws, "workers.concurrency", 1, 1000)
    _bounded(draws, "arrivals.peakWorkers", 1e-6, 10_000)
    _bounded(draws, "arrivals.maxJobs", 1, 10_000_000)
    _bounded(draws, "arrivals.steps.levels", 1, 100)
    _bounded(draws, "arrivals.bursts.count", 0, 100)
    _bounded(draws, "jobs.tail", 1, 1e6)
    _bounded(draws, "jobs.share", 1e-9, 1e9)
    _bounded(draws, "dependency.apiShare", 0, 0.9)
    _bounded(draws, "dependency.loose", 1, 100)
    _bounded(draws, "dependency.binding", 0.01, 1)
    for key in (
        "steps.low",
        "bursts.base",
        "onoff.low",
        "ramp.from",
        "ramp.over",
        "sine.amplitude",
    ):
        _bounded(draws, f"arrivals.{key}", 0, 1)
    drain = draws["workers.drain"]
    if isinstance(drain, Fixed | Choice):  # a range: a drawn grace period
        for option in drain.values:
            if option not in (True, False, "grace"):
                seconds(option, "workers.drain")
    _check_trigger(draws)


def _check_trigger(draws: Draws) -> None:
    if "trigger.format" in draws:
        fmt = draws["trigger.format"]
        if isinstance(fmt, Fixed) and fmt.value == "all":
            draws["trigger.format"] = parse({"choice": list(SIMULATED_FORMATS)}, "trigger.format")
        else:
            simulated = [n for n, f in registry.formats().items() if f.snapshot_model]
            check_options(fmt, "trigger.format", simulated)
    if "trigger.jobDuration" in draws:
        check_options(draws["trigger.jobDuration"], "trigger.jobDuration", GIVEN)
    if "trigger.gracePeriod" in draws:
        check_options(draws["trigger.gracePeriod"], "trigger.gracePeriod", ("given", "absent"))
    _bounded(draws, "trigger.misestimate", -0.9, 10)


def _bounded(draws: Draws, key: str, low: float, high: float) -> None:
    for path in _with_classes(draws, key):
        for value in _ends(draws[path]):
            if not _is_number(value) or not low <= value <= high:
                raise ScenarioError(
                    f"{path}: got {value!r}; expected numbers from {low:g} to {high:g}"
                )


def _ends(dist: Distribution) -> tuple[Any, ...]:
    """A range's two ends, or every value a fixed value or a choice can take."""
    return (dist.low, dist.high) if isinstance(dist, Uniform | Integer) else dist.values


def _is_number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float)


def _positive_durations(dist: Distribution, key: str) -> None:
    if any(seconds(value, key) <= 0 for value in _ends(dist)):
        raise ScenarioError(f"{key}: expected durations above zero")


def _with_classes(draws: Draws, key: str) -> list[str]:
    """``key`` and the per-class ``key[i]`` the family lists."""
    return [key, *(k for k in draws if k.startswith(f"{key}["))]


# -- drawing ----------------------------------------------------------------------------------


def _sig(value: float, digits: int = 3) -> float:
    """``value`` to ``digits`` significant figures: readable YAML, exact on the way back."""
    return float(f"{value:.{digits}g}")


def _generated(family: Family, draw: _Drawer, name: str) -> dict[str, Any]:
    duration = draw.seconds("duration")
    target = draw.seconds("targetAge")
    workers = _workers(draw)
    concurrency = workers["concurrency"]
    classes = _classes(draw)
    mean = _mean_seconds(classes)
    peak = draw("arrivals.peakWorkers") * concurrency / mean
    shape = draw("arrivals.shape")
    arrivals, bursts = _SHAPES[shape](draw, peak, duration)
    # the simulation's budget: rates and bursts scale down to at most maxJobs expected jobs
    expected = _expected(arrivals, bursts, duration)
    budget = draw("arrivals.maxJobs")
    if expected > budget:
        scale = budget / expected
        arrivals = [
            {**s, "rate": _sig(s["rate"] * scale), **_amplitude(s, scale)} for s in arrivals
        ]
        bursts = [{**b, "jobs": max(1, int(b["jobs"] * scale))} for b in bursts]
        peak *= scale
    peak_workers = peak * mean / concurrency
    document: dict[str, Any] = {
        "name": name,
        "description": (
            f"{family.name} #{name.rsplit('-', 1)[1]}: {shape}, {len(classes)} job "
            f"class{'es' if len(classes) > 1 else ''}, about {peak_workers:.3g} busy workers at "
            "the peak"
        ),
        "duration": duration,
        "seed": draw.rng("seed").randrange(2**31),
        "arrivals": arrivals,
    }
    if bursts:
        document["bursts"] = bursts
    document["jobs"] = classes
    document["workers"] = workers
    dependency, dependencies = _dependency(draw, concurrency, peak_workers)
    if dependency:
        document["dependency"] = dependency
    ceiling = _ceiling(dependency, workers)
    start_rate = arrivals[0]["rate"]
    drawn = draw("initialWorkers")
    initial = math.ceil(start_rate * mean / concurrency) if drawn == "warm" else int(drawn)
    max_replicas = 100
    for section in _PASSED:
        values = {
            k: d.draw(draw.rng(f"{section}.{k}")) for k, d in (family.passed or {})[section].items()
        }
        if values:
            document[section] = values
            if section == "keda":
                max_replicas = int(values.get("maxReplicaCount", max_replicas))
    document["initialWorkers"] = int(min(initial, ceiling or initial, max_replicas))
    document["trigger"] = _trigger(draw, target, concurrency, mean, dependencies)
    drain = workers["drain"]
    if not isinstance(drain, bool) and draw("trigger.gracePeriod") == "given":
        document["trigger"]["gracePeriod"] = drain  # the Deployment's, as its user knows it
    return document


def _amplitude(segment: Mapping[str, Any], scale: float) -> dict[str, Any]:
    return {"amplitude": _sig(segment["amplitude"] * scale)} if "amplitude" in segment else {}


def _workers(draw: _Drawer) -> dict[str, Any]:
    drain = draw("workers.drain")
    if drain == "grace":
        drain = _sig(draw.seconds("workers.grace"))
    elif not isinstance(drain, bool):
        drain = seconds(drain, "workers.drain")
    return {
        "concurrency": int(draw("workers.concurrency")),
        "bootSeconds": _sig(draw.seconds("workers.bootSeconds")),
        "drain": drain,
    }


def _classes(draw: _Drawer) -> list[dict[str, Any]]:
    classes = []
    for i in range(int(draw("jobs.classes"))):

        def key(name: str, i: int = i) -> str:
            """The class's own distribution where the family lists one per class."""
            own = f"jobs.{name}[{i}]"
            return own if draw.has(own) else f"jobs.{name}"

        median = _sig(draw.seconds(key("median")))
        classes.append(
            {
                "name": f"class{i + 1}",
                "share": _sig(draw(key("share"))),
                "duration": {"median": median, "p99": _sig(median * draw(key("tail")))},
                "usesDependency": bool(draw(key("usesDependency"))),
                "cpuPerJob": _sig(draw(key("cpuPerJob"))),
            }
        )
    return classes


def _mean_seconds(classes: list[dict[str, Any]]) -> float:
    total = sum(c["share"] for c in classes)
    return float(
        sum(
            c["share"] * JobClass(1, c["duration"]["median"], c["duration"]["p99"], True, 0).mean
            for c in classes
        )
        / total
    )


def _steady(draw: _Drawer, peak: float, duration: float) -> tuple[list[Any], list[Any]]:
    return [{"at": 0.0, "rate": _sig(peak)}], []


def _steps(draw: _Drawer, peak: float, duration: float) -> tuple[list[Any], list[Any]]:
    n = int(draw("arrivals.steps.levels"))
    low = draw("arrivals.steps.low")
    rng = draw.rng("arrivals.steps.level")
    levels = [rng.uniform(low, 1.0) for _ in range(n)]
    levels[rng.randrange(n)] = 1.0  # one level is the peak
    return [
        {"at": round(k * duration / n), "rate": _sig(peak * level)}
        for k, level in enumerate(levels)
    ], []


def _sine(draw: _Drawer, peak: float, duration: float) -> tuple[list[Any], list[Any]]:
    amplitude = draw("arrivals.sine.amplitude")
    mean = peak / (1 + amplitude)
    period = _sig(draw.seconds("arrivals.sine.period"))
    return [
        {"at": 0.0, "rate": _sig(mean), "amplitude": _sig(mean * amplitude), "period": period}
    ], []


def _bursts(draw: _Drawer, peak: float, duration: float) -> tuple[list[Any], list[Any]]:
    base = draw("arrivals.bursts.base")
    rng = draw.rng("arrivals.bursts.at")
    bursts = []
    for _ in range(int(draw("arrivals.bursts.count"))):
        size = draw.seconds("arrivals.bursts.size")
        bursts.append(
            {"at": round(rng.uniform(0, 0.8 * duration)), "jobs": max(1, round(peak * size))}
        )
    return [{"at": 0.0, "rate": _sig(peak * base)}], sorted(bursts, key=lambda b: b["at"])


def _onoff(draw: _Drawer, peak: float, duration: float) -> tuple[list[Any], list[Any]]:
    low = draw("arrivals.onoff.low")
    segments: list[dict[str, Any]] = []
    t, on = 0.0, True
    while t < duration:
        segments.append({"at": float(round(t)), "rate": _sig(peak if on else peak * low)})
        t = round(t + draw.seconds("arrivals.onoff.on" if on else "arrivals.onoff.off"))
        on = not on
    return segments, []


def _ramp(draw: _Drawer, peak: float, duration: float) -> tuple[list[Any], list[Any]]:
    start = draw("arrivals.ramp.from")
    over = max(draw("arrivals.ramp.over") * duration, 1.0)
    step = max(draw.seconds("arrivals.ramp.step"), 1.0)
    up = draw("arrivals.ramp.direction") == "up"
    segments = []
    t = 0.0
    while t < duration:
        share = min(1.0, (t + step / 2) / over)  # the ramp's rate at the middle of the step
        level = start + (1 - start) * share if up else 1 - (1 - start) * share
        segments.append({"at": float(round(t)), "rate": _sig(peak * level)})
        if t >= over:
            break  # held from here on
        t += step
    return segments, []


_SHAPES: dict[str, Callable[[_Drawer, float, float], tuple[list[Any], list[Any]]]] = {
    "steady": _steady,
    "steps": _steps,
    "sine": _sine,
    "bursts": _bursts,
    "onoff": _onoff,
    "ramp": _ramp,
}


def _expected(
    arrivals: list[dict[str, Any]], bursts: list[dict[str, Any]], duration: float
) -> float:
    """The jobs ``arrivals`` and ``bursts`` bring in ``duration``, as ``Scenario.expected_jobs``
    counts them (a sine integrated on a 1 s grid)."""
    segments = [
        Segment(s["at"], s["rate"], s.get("amplitude", 0.0), s.get("period", 0.0)) for s in arrivals
    ]
    ends = [s.at for s in segments[1:]] + [duration]
    total = 0.0
    for segment, end in zip(segments, ends, strict=True):
        if segment.period:
            total += sum(
                segment.rate_at(t + 0.5) for t in range(int(segment.at), int(min(end, duration)))
            )
        else:
            total += segment.rate * (min(end, duration) - segment.at)
    return total + sum(int(b["jobs"]) for b in bursts)


def _dependency(
    draw: _Drawer, concurrency: int, peak_workers: float
) -> tuple[dict[str, Any] | None, str | None]:
    kind = draw("dependency.ceiling")
    if kind == "none":
        return None, None
    ratio = draw(f"dependency.{kind}")
    ceiling = max(
        1, math.ceil(ratio * peak_workers) if kind == "loose" else math.floor(ratio * peak_workers)
    )
    api = _sig(draw("dependency.apiShare"), 2)
    name = str(draw("dependency.name"))
    capacity = math.ceil(ceiling * concurrency / (1 - api) - 1e-9)
    section = {"name": name, "capacity": capacity, "perWorker": concurrency, "apiShare": api}
    true_ceiling = Dependency(name, capacity, float(concurrency), api).ceiling or 1
    return section, f"{name}={true_ceiling * concurrency}/{concurrency}"


def _ceiling(dependency: Mapping[str, Any] | None, workers: Mapping[str, Any]) -> int | None:
    if dependency is None:
        return None
    return Dependency(
        dependency["name"],
        dependency["capacity"],
        float(dependency["perWorker"]),
        dependency["apiShare"],
    ).ceiling


def _trigger(
    draw: _Drawer, target: float, concurrency: int, mean: float, dependencies: str | None
) -> dict[str, Any]:
    fmt = str(draw("trigger.format"))
    trigger: dict[str, Any] = {
        "url": _url(fmt),
        "queue": "jobs",
        "format": fmt,
    }
    trigger.update(_format_keys(fmt, bool(draw("trigger.timestamps"))))
    trigger["targetAge"] = target
    duration = _job_duration(draw, fmt, mean)
    if duration is not None:
        trigger["jobDuration"] = duration
    trigger["workerConcurrency"] = concurrency
    if dependencies:
        trigger["dependencies"] = dependencies
    return trigger


def _url(fmt: str) -> str:
    broker = registry.format_info(fmt).broker
    if broker.name == "rabbitmq":
        return "amqp://sim/"
    return "redis://sim/0" if broker.name == "redis" else f"{broker.schemes[0]}://sim/"


def _format_keys(fmt: str, timestamps: bool) -> dict[str, Any]:
    """The layout keys a simulated queue of ``fmt`` needs: a stream's consumer group, and
    where the format takes one and ``timestamps`` says so, the producer's enqueue time field."""
    info = registry.format_info(fmt)
    keys: dict[str, Any] = {}
    if "consumerGroup" in info.layout_keys:
        keys["consumerGroup"] = "workers"
    if timestamps and "timestampField" in info.layout_keys:
        keys["timestampField"] = "enqueued_at"
    return keys


def _job_duration(draw: _Drawer, fmt: str, mean: float) -> float | None:
    """``jobDuration``: the true mean, the mean off by the drawn misestimate, or none where
    the format shows the workers, so the scaler learns their throughput (elsewhere an absent
    draw is misestimated instead)."""
    given = draw("trigger.jobDuration")
    if given == "absent" and registry.format_info(fmt).reports_consumers:
        return None
    if given == "exact":
        return _sig(mean)
    return _sig(mean * (1 + draw("trigger.misestimate")))


def _default_format(trigger: Mapping[str, Any]) -> str:
    url = str(trigger.get("url", "redis://"))
    return "amqp" if url.startswith(("amqp://", "amqps://")) else "list"


def _reformatted(trigger: Mapping[str, Any], fmt: str, draw: _Drawer) -> dict[str, Any]:
    """A file's trigger in another format: the old format's layout keys go, but for the
    producer's enqueue time field, which stays where the new format reads one (unless the
    family draws ``timestamps`` false); the new format's own keys and URL come in."""
    takes = registry.format_info(fmt).layout_keys
    stamped = "timestampField" in trigger
    timestamps = bool(draw("trigger.timestamps")) if draw.has("trigger.timestamps") else stamped
    stamp = ("timestampField", "timestampUnit") if timestamps else ()
    kept = {
        k: v
        for k, v in trigger.items()
        if (k not in _LAYOUT_KEYS and k != "url") or (k in stamp and k in takes)
    }
    return {
        "url": _url(fmt),
        **kept,
        "format": fmt,
        **_format_keys(fmt, timestamps and not stamped),
    }


def _from_base(family: Family, draw: _Drawer, name: str, index: int) -> dict[str, Any]:
    files = len(family.bases)
    if family.every:
        stem, base = family.bases[index % files]
    else:
        stem, base = family.bases[draw.rng("scenario").randrange(files)]
    document = copy.deepcopy(dict(base))
    trigger = dict(document.get("trigger", {}))
    notes = []
    if draw.has("trigger.format"):
        formats = family.draws["trigger.format"]
        if family.every and isinstance(formats, Choice | Fixed):
            fmt = str(formats.values[index // files % len(formats.values)])
        else:
            fmt = str(draw("trigger.format"))
        if fmt != trigger.get("format", _default_format(trigger)):
            trigger = _reformatted(trigger, fmt, draw)
        notes.append(f"as {fmt}")
    if draw.has("trigger.jobDuration"):
        mean = parse_scenario(base).mean_job_seconds
        duration = _job_duration(draw, str(trigger.get("format", "list")), mean)
        trigger.pop("jobDuration", None)
        if duration is None:
            notes.append("jobDuration learned")
        else:
            trigger["jobDuration"] = duration
            notes.append(f"jobDuration {duration:g} s for a mean of {mean:.3g} s")
    document["name"] = name
    document["description"] = f"{family.name} #{name.rsplit('-', 1)[1]}: {stem} {', '.join(notes)}"
    if not family.keep_seeds:
        document["seed"] = draw.rng("seed").randrange(2**31)
    document["trigger"] = trigger
    return document
