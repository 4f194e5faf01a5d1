"""The workers a dependency allows, from its static limit or its probe's figure (pure)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from scaler.ceilings.headroom import FigureSource, ProbeFigure
from scaler.trigger_spec import Dependency, TriggerSpec

#: a failing probe's last good reading is used for this long, then the fallback rule applies
STALE_AFTER = 300.0
#: the source of a static dependency's ceiling and of ``maxWorkers``
STATIC = "static"


@dataclass(frozen=True, slots=True)
class DependencyCeiling:
    """The workers one dependency (or ``maxWorkers``) allows now, and how that was found."""

    name: str
    #: None: a probe with no figure, no fallback and no known workers to hold
    workers: int | None
    #: ``static``, or a :class:`FigureSource` value
    source: str
    #: for the reason: ``live: 40 slots, 37 free``; None for a static limit
    note: str | None = None
    #: the figure used (slots, or requests/s), None for a static limit or when none is known
    slots: float | None = None


@dataclass(frozen=True, slots=True)
class Ceiling:
    """The ceiling of a trigger: the smallest of its limits, and every limit."""

    workers: int | None
    limited_by: str
    note: str | None
    each: tuple[DependencyCeiling, ...]
    #: why the ceiling is unknown (a probe with nothing to go on), else None
    unknown: str | None = None


def trigger_ceiling(
    spec: TriggerSpec, figures: Mapping[str, ProbeFigure], workers_now: int | None
) -> Ceiling:
    """``maxWorkers`` and every dependency's ceiling; the smallest sets the trigger's (the first
    named on a tie, ``maxWorkers`` before the dependencies)."""
    each = [DependencyCeiling("maxWorkers", spec.max_workers, STATIC)]
    for dep in spec.dependencies:
        figure = figures.get(dep.probe) if dep.probe is not None else None
        each.append(dependency_ceiling(dep, figure, workers_now))
    unknown = [c for c in each if c.workers is None and c.source == FigureSource.HOLD]
    if unknown:
        return Ceiling(
            None,
            unknown[0].name,
            unknown[0].note,
            tuple(each),
            unknown=f"the ceiling of dependency {unknown[0].name!r} is unknown: {unknown[0].note}",
        )
    best: DependencyCeiling | None = None
    for ceiling in each:
        if ceiling.workers is not None and (best is None or ceiling.workers < (best.workers or 0)):
            best = ceiling
    if best is None:
        return Ceiling(None, "maxWorkers", None, tuple(each))
    return Ceiling(best.workers, best.name, best.note, tuple(each))


def dependency_ceiling(
    dep: Dependency, figure: ProbeFigure | None, workers_now: int | None
) -> DependencyCeiling:
    """The workers ``dep`` allows: from its limit, or from its probe's figure while that is
    younger than :data:`STALE_AFTER`; then from its static fallback, else the workers that run
    now (``workers_now``): a probe that cannot read never raises the ceiling."""
    if dep.probe is None:
        return DependencyCeiling(dep.name, dep.max_workers, STATIC)
    reading = figure.reading if figure is not None else None
    age = figure.age if figure is not None else None
    if figure is not None and reading is not None and age is not None and age <= STALE_AFTER:
        if reading.usable is not None:
            workers = math.floor(reading.usable / dep.per_worker + 1e-9)
            slots = reading.usable
        else:  # only free slots are known: the workers' own are those they hold now
            held = workers_now or 0
            workers = held + math.floor((reading.free or 0.0) / dep.per_worker + 1e-9)
            slots = (reading.free or 0.0) + held * dep.per_worker
        if figure.error is None:
            return DependencyCeiling(
                dep.name, workers, FigureSource.LIVE, f"live: {reading.summary()}", slots
            )
        note = (
            f"probe failing ({figure.error}); last good reading, {age:.0f}s old: "
            f"{reading.summary()}"
        )
        return DependencyCeiling(dep.name, workers, FigureSource.LAST_GOOD, note, slots)
    why = _no_figure(figure)
    if dep.limit is not None:
        note = f"{why}; static fallback {dep.limit:g}"
        return DependencyCeiling(dep.name, dep.max_workers, FigureSource.FALLBACK, note, dep.limit)
    if workers_now is None:
        note = f"{why}, no static fallback, and the workers that run are not known"
        return DependencyCeiling(dep.name, None, FigureSource.HOLD, note)
    note = f"{why}, no static fallback: holding the {workers_now} workers that run"
    return DependencyCeiling(dep.name, workers_now, FigureSource.HOLD, note)


def _no_figure(figure: ProbeFigure | None) -> str:
    if figure is None:
        return "probe not read yet"
    error = f" ({figure.error})" if figure.error else ""
    if figure.reading is None or figure.age is None:
        return f"probe has no reading{error}"
    return f"probe's last good reading is {figure.age:.0f}s old{error}"
