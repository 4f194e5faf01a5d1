"""The operator's bounds on what one trigger may ask of the scaler's samplers: how often a
queue is read (``sampleInterval``), how much history is kept (``rateWindow``, and the samples
that make it up). Triggers on one queue share its sampler, so without these one namespace could
make another's broker busy, or the scaler's memory grow."""

from __future__ import annotations

import math
from dataclasses import dataclass

from scaler.durations import format_duration
from scaler.errors import InvalidMetadata
from scaler.pool_spec import DEFAULT_MAX_POOL_QUEUES

#: the parser's own floor: no operator flag goes below it
MIN_SAMPLE_INTERVAL = 0.1
#: ``serve``'s defaults
DEFAULT_MIN_SAMPLE_INTERVAL = 1.0
DEFAULT_MAX_RATE_WINDOW = 3600.0
DEFAULT_MAX_HISTORY_SAMPLES = 3600


@dataclass(frozen=True, slots=True)
class Bounds:
    """The floor on ``sampleInterval``, the ceiling on ``rateWindow`` and on the samples one
    ``rateWindow`` holds (``rateWindow / sampleInterval``). ``Bounds()`` is ``serve``'s default;
    :data:`UNBOUNDED` only the parser's own floor."""

    min_sample_interval: float = DEFAULT_MIN_SAMPLE_INTERVAL
    #: None: no ceiling
    max_rate_window: float | None = DEFAULT_MAX_RATE_WINDOW
    #: None: no ceiling
    max_history_samples: int | None = DEFAULT_MAX_HISTORY_SAMPLES
    #: the most queues one pool trigger may have, listed or matched by its globs
    max_pool_queues: int = DEFAULT_MAX_POOL_QUEUES

    def __post_init__(self) -> None:
        if self.min_sample_interval < MIN_SAMPLE_INTERVAL:
            raise ValueError(
                f"--min-sample-interval: at least {format_duration(MIN_SAMPLE_INTERVAL)}"
            )
        if self.max_rate_window is not None and self.max_rate_window < 2 * self.min_sample_interval:
            raise ValueError(
                "--max-rate-window: at least two --min-sample-interval (a rate needs two samples)"
            )
        if self.max_history_samples is not None and self.max_history_samples < 2:
            raise ValueError("--max-history-samples: at least 2 (a rate needs two samples)")
        if self.max_pool_queues < 1:
            raise ValueError("--max-pool-queues: at least 1")

    def check_sample_interval(self, given: str, seconds: float) -> None:
        if seconds < self.min_sample_interval:
            raise InvalidMetadata(
                "sampleInterval",
                f"got {given!r}; expected at least {format_duration(self.min_sample_interval)}, "
                "the floor the scaler's operator sets (serve --min-sample-interval): one sampler "
                "reads a queue for all its triggers, as often as the shortest sampleInterval asks",
            )

    def check_rate_window(self, given: str, rate_window: float, sample_interval: float) -> None:
        if self.max_rate_window is not None and rate_window > self.max_rate_window:
            raise InvalidMetadata(
                "rateWindow",
                f"got {given!r}; expected at most {format_duration(self.max_rate_window)}, the "
                "ceiling the scaler's operator sets (serve --max-rate-window)",
            )
        samples = math.ceil(rate_window / sample_interval - 1e-9)
        if self.max_history_samples is not None and samples > self.max_history_samples:
            raise InvalidMetadata(
                "rateWindow",
                f"got {given!r}; at sampleInterval {format_duration(sample_interval)} it keeps "
                f"{samples} samples, more than the {self.max_history_samples} the scaler's "
                "operator allows (serve --max-history-samples): shorten rateWindow or lengthen "
                "sampleInterval",
            )


#: ``serve``'s default bounds
SERVE_BOUNDS = Bounds()
#: the parser's floor alone, for tools that are not the server (the operator's probe) and tests
UNBOUNDED = Bounds(MIN_SAMPLE_INTERVAL, None, None)
