"""One figure per scenario: oldest age against the target, workers against the ceiling, and the
arrivals, every policy on the same axes. Needs matplotlib (the ``simulate`` extra)."""

from __future__ import annotations

from pathlib import Path

from scaler.simulate.run import ScenarioRun
from scaler.simulate.scoreboard import OURS

#: one colour per policy, ours drawn last, thick and black
_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")


def write_figure(run: ScenarioRun, directory: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scenario = run.scenario
    minutes = scenario.duration > 1200
    scale = 60.0 if minutes else 1.0
    unit = "min" if minutes else "s"
    fig, (age_ax, workers_ax, rate_ax) = plt.subplots(
        3, 1, figsize=(13, 10), sharex=True, gridspec_kw={"height_ratios": [3, 3, 1.4]}
    )
    names = [n for n in run.results if n != OURS] + ([OURS] if OURS in run.results else [])
    highest_age = scenario.target_age * 3
    for index, name in enumerate(names):
        series = run.results[name].series
        times = [t / scale for t in series.times]
        ours = name == OURS
        style = {
            "color": "black" if ours else _COLOURS[index % len(_COLOURS)],
            "linewidth": 2.6 if ours else 1.2,
            "alpha": 1.0 if ours else 0.8,
            "zorder": 10 if ours else 2,
            "label": name,
        }
        age_ax.plot(times, series.oldest_age, **style)
        workers_ax.step(times, series.workers, where="post", **style)
        if ours:
            highest_age = max(highest_age, max(series.oldest_age, default=0.0) * 1.1)
    age_ax.axhline(
        scenario.target_age, color="red", linestyle="--", linewidth=1.5, label="SLO target"
    )
    age_ax.set_ylim(0, highest_age)
    age_ax.set_ylabel("oldest waiting job's age (s)")
    age_ax.set_title(f"{scenario.name}: oldest age (clipped at {highest_age:.0f} s)", loc="left")
    dependency = scenario.dependency
    if dependency.others:  # another service's sessions move the ceiling
        times_s = run.results[names[0]].series.times
        workers_ax.step(
            [t / scale for t in times_s], [dependency.ceiling_at(t) for t in times_s],
            where="post", color="red", linestyle="--", linewidth=1.5, label="ceiling",
        )  # fmt: skip
    elif scenario.ceiling is not None:
        workers_ax.axhline(
            scenario.ceiling, color="red", linestyle="--", linewidth=1.5, label="ceiling"
        )
    if scenario.knee is not None:
        workers_ax.axhline(
            scenario.knee, color="purple", linestyle=":", linewidth=1.5, label="knee (USL)"
        )
    workers_ax.set_ylabel("workers (ready + draining)")
    workers_ax.set_title("workers against the dependency's ceiling", loc="left")
    steps = run.results[names[0]].series.times[: len(run.arrival_rate)]
    rate_ax.fill_between(
        [t / scale for t in steps], run.arrival_rate[: len(steps)], step="pre", color="grey"
    )
    rate_ax.set_ylabel("arrivals / s")
    rate_ax.set_xlabel(f"time ({unit})")
    for ax in (age_ax, workers_ax, rate_ax):
        ax.grid(alpha=0.3)
    handles, labels = workers_ax.get_legend_handles_labels()
    target_handle = age_ax.get_legend_handles_labels()[0][-1]
    fig.legend(
        [*handles, target_handle],
        [*labels, "SLO target"],
        loc="center right",
        fontsize=10,
        frameon=False,
    )
    fig.tight_layout(rect=(0, 0, 0.8, 1))
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{scenario.name}.png"
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path
