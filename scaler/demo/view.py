"""The demo on screen: a live panel (rich) on a terminal, or a line every few seconds."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Protocol

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from scaler.demo.record import Recording, Sample
from scaler.demo.scenario import Timing

_BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float], top: float) -> str:
    """One character a value, from ▁ (0) to █ (``top`` or more)."""
    if top <= 0:
        return ""
    return "".join(_BARS[min(len(_BARS) - 1, int(v / top * (len(_BARS) - 1)))] for v in values)


def _per_second(value: float | None) -> str:
    return "—" if value is None else f"{value:5.1f}/s"


class View(Protocol):
    def show(self, recording: Recording) -> None: ...


class LiveView:
    """A panel redrawn at every sample."""

    def __init__(self, timing: Timing, live: Live) -> None:
        self.timing = timing
        self.live = live

    def show(self, recording: Recording) -> None:
        if recording.samples:
            self.live.update(self.render(recording, recording.samples[-1]))

    def render(self, recording: Recording, now: Sample) -> Panel:
        timing, scaler = self.timing, now.scaler
        window = timing.seconds(3.0)
        history = recording.samples[-48:]
        target, ceiling = recording.target_age, recording.ceiling
        over = now.oldest_age > target
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold", min_width=18)
        grid.add_column(min_width=34)
        grid.add_column()
        grid.add_row(
            "oldest job's age",
            Text(f"{now.oldest_age:5.1f} s  of target {target:.3g} s", style="red" if over else ""),
            ProgressBar(
                total=target,
                completed=min(now.oldest_age, target),
                width=30,
                complete_style="red" if over else "green",
            ),
        )
        grid.add_row(
            "",
            Text(f"scaler sees {scaler.age:5.1f} s" if scaler.age is not None else ""),
            Text(sparkline([s.oldest_age for s in history], max(target, 1e-9)), style="cyan"),
        )
        draining = now.alive - now.workers
        grid.add_row(
            "workers",
            Text(
                f"{now.workers:3d} running{f' (+{draining} draining)' if draining else ''}"
                f" of ceiling {ceiling}"
            ),
            ProgressBar(total=ceiling, completed=min(now.alive, ceiling), width=30),
        )
        grid.add_row(
            "",
            Text("scaler wants " + ("—" if scaler.desired is None else f"{scaler.desired:g}")),
            Text(sparkline([float(s.alive) for s in history], ceiling), style="cyan"),
        )
        grid.add_row("jobs waiting", Text(f"{now.depth:5d}"), "")
        grid.add_row(
            "arrivals",
            Text(_per_second(recording.rate("sent", window))),
            Text(f"scaler measures {_per_second(scaler.arrivals)}", style="dim"),
        )
        grid.add_row(
            "completions",
            Text(_per_second(recording.rate("done", window))),
            Text(f"scaler measures {_per_second(scaler.completions)}", style="dim"),
        )
        grid.add_row("decision", Text(scaler.reason or "—", style="bold yellow"), "")
        grid.add_row("jobs", Text(f"{now.sent} sent, {now.done} done"), "")
        phase = timing.phase_at(now.at)
        title = (
            f"queue-age-scaler demo · {phase.name} ({phase.rate / timing.factor:.3g} jobs/s) · "
            f"{now.at:4.0f} s of {timing.duration:g} s"
        )
        recent = Text("\n".join(recording.scaling[-4:]) or "KEDA has not scaled yet", style="dim")
        progress = ProgressBar(total=timing.duration, completed=min(now.at, timing.duration))
        return Panel(Group(progress, grid, Text(""), recent), title=title, title_align="left")


class LineView:
    """A line every ``every`` seconds, and a line for each change of replicas."""

    def __init__(self, every: float) -> None:
        self.every = every
        self.next_line = 0.0
        self.scaling_shown = 0

    def show(self, recording: Recording) -> None:
        for line in recording.scaling[self.scaling_shown :]:
            print(f"  {line}", flush=True)
        self.scaling_shown = len(recording.scaling)
        if not recording.samples or recording.samples[-1].at < self.next_line:
            return
        now = recording.samples[-1]
        self.next_line = now.at + self.every
        print(
            f"{now.at:5.1f}s {now.phase:5s} age {now.oldest_age:5.1f}s/{recording.target_age:.3g}s"
            f" workers {now.alive}/{recording.ceiling} waiting {now.depth}"
            f" done {now.done}/{now.sent} decision: {now.scaler.reason or '-'}",
            flush=True,
        )


@contextlib.contextmanager
def open_view(timing: Timing, *, live: bool) -> Iterator[View]:
    """The live panel when ``live`` and stdout is a terminal; else lines."""
    console = Console()
    if live and sys.stdout.isatty():
        with Live(console=console, refresh_per_second=4, transient=False) as panel:
            yield LiveView(timing, panel)
    else:
        yield LineView(every=timing.seconds(10.0))
