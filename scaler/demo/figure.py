"""The figure of a demo run (matplotlib): the oldest age against the target, the workers against
the ceiling, the jobs waiting, and the arrivals and completions, with the phases shaded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scaler.demo.record import Recording
from scaler.demo.scenario import Timing

_SHADES = {"burst": "#fbe3d6", "peak": "#fdf1d0"}
#: legends right of the panels, off the data
_LEGEND: dict[str, Any] = {
    "loc": "upper left",
    "bbox_to_anchor": (1.01, 1.0),
    "fontsize": 9,
    "frameon": False,
}


def _rates(times: list[float], counts: list[int], window: float) -> list[float]:
    """Per second over the ``window`` before each time."""
    rates, first = [], 0
    for index, now in enumerate(times):
        while times[first] < now - window:
            first += 1
        span = now - times[first]
        rates.append((counts[index] - counts[first]) / span if span > 0 else 0.0)
    return rates


def write_figure(recording: Recording, timing: Timing, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = recording.samples
    times = [s.at for s in samples]
    fig, (age_ax, workers_ax, depth_ax, rate_ax) = plt.subplots(
        4, 1, figsize=(13, 10), sharex=True, gridspec_kw={"height_ratios": [3, 3, 2, 2]}
    )
    for phase, start, end in timing.phase_bounds():
        for ax in (age_ax, workers_ax, depth_ax, rate_ax):
            if phase.name in _SHADES:
                ax.axvspan(start, end, color=_SHADES[phase.name], zorder=0)
        age_ax.text((start + end) / 2, 1.01, phase.name, transform=age_ax.get_xaxis_transform(),
                    ha="center", va="bottom", fontsize=10, color="dimgrey")  # fmt: skip

    age_ax.plot(times, [s.oldest_age for s in samples], color="black", linewidth=2,
                label="oldest waiting job\n(its enqueued_at)")  # fmt: skip
    scaler_age = [s.scaler.age if s.scaler.age is not None else float("nan") for s in samples]
    age_ax.plot(times, scaler_age, color="tab:blue", linewidth=1, linestyle=":",
                label="as the scaler\nmeasured it")  # fmt: skip
    age_ax.axhline(recording.target_age, color="red", linestyle="--", label="targetAge")
    age_ax.set_ylabel("age (s)")
    age_ax.set_ylim(bottom=0)
    age_ax.legend(**_LEGEND)

    workers_ax.step(times, [s.alive for s in samples], where="post", color="black", linewidth=2,
                    label="worker processes\n(draining included)")  # fmt: skip
    desired = [s.scaler.desired if s.scaler.desired is not None else float("nan") for s in samples]
    workers_ax.step(times, desired, where="post", color="tab:green", linestyle=":",
                    label="the scaler's answer\n(desired workers)")  # fmt: skip
    workers_ax.axhline(recording.ceiling, color="red", linestyle="--",
                       label="ceiling\n(dependencies)")  # fmt: skip
    workers_ax.set_ylabel("workers")
    workers_ax.set_ylim(0, max(recording.ceiling, *_known(desired)) + 1.5)
    workers_ax.legend(**_LEGEND)

    depth_ax.fill_between(times, [s.depth for s in samples], step="post", color="grey")
    depth_ax.set_ylabel("jobs waiting")

    window = timing.seconds(5.0)
    rate_ax.plot(times, _rates(times, [s.sent for s in samples], window), color="tab:orange",
                 label="arrivals")  # fmt: skip
    rate_ax.plot(times, _rates(times, [s.done for s in samples], window), color="tab:purple",
                 label="completions")  # fmt: skip
    rate_ax.set_ylabel("jobs / s")
    rate_ax.set_xlabel("time (s)")
    rate_ax.legend(**_LEGEND)
    for ax in (age_ax, workers_ax, depth_ax, rate_ax):
        ax.grid(alpha=0.3)
        ax.set_xlim(0, max(timing.duration, times[-1] if times else 0.0))
    fig.suptitle("queue-age-scaler demo: KEDA and the HPA (emulated) scaling worker processes",
                 x=0.01, ha="left")  # fmt: skip
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _known(values: list[float]) -> list[float]:
    """The values that are not NaN, or [0]."""
    return [v for v in values if v == v] or [0.0]
