"""The demo's pure parts: the scenario and its compression, the trigger it sends, the /metrics
reader, the recording's figures and the summary."""

from __future__ import annotations

import math

import pytest

from scaler.demo.record import Recording, Sample, ScalerView, read_metrics
from scaler.demo.scenario import CEILING, PHASES, Timing
from scaler.demo.view import sparkline
from scaler.spec import parse_metadata

FULL_JOBS = sum(p.length * p.rate for p in PHASES)


@pytest.mark.parametrize("duration", [180.0, 30.0])
def test_a_compressed_scenario_sends_the_same_jobs_with_jobs_as_much_shorter(
    duration: float,
) -> None:
    timing = Timing(duration)
    assert timing.arrivals_by(duration) == pytest.approx(FULL_JOBS)
    assert timing.arrivals_by(duration + 60) == pytest.approx(FULL_JOBS)
    assert timing.job_seconds == pytest.approx(duration / 180)
    # quiet, then the burst: at 1/6 of the length the rate is 6 times higher
    quiet, burst = PHASES[0], PHASES[1]
    start = timing.seconds(quiet.length)
    assert timing.phase_at(start - 0.01).name == "quiet"
    assert timing.phase_at(start + 0.01).name == "burst"
    sent = timing.arrivals_by(start + 1.0) - timing.arrivals_by(start)
    assert sent == pytest.approx(burst.rate * 180 / duration)
    assert timing.phase_at(duration + 5).name == "end"


def test_the_trigger_is_one_the_scaler_takes_with_the_dependency_as_ceiling() -> None:
    timing = Timing(30.0)
    spec = parse_metadata(timing.metadata("redis://127.0.0.1:6390/0", "demo-q"))
    assert spec.ceiling == (CEILING, "database")
    assert spec.source.format == "sidekiq"
    assert spec.target_age == pytest.approx(timing.target_age, rel=0.01)
    assert spec.sample_interval == pytest.approx(0.1)  # the scaler's shortest, not 1/6 of 0.5 s
    assert spec.worker_throughput == pytest.approx(1 / timing.job_seconds, rel=0.01)


def test_read_metrics_takes_the_trigger_figures_and_the_reason_of_the_decision() -> None:
    text = "\n".join(
        [
            "# TYPE queue_age_scaler_desired_workers gauge",
            'queue_age_scaler_desired_workers{metric="workers",namespace="demo",queue="q",scaled_object="w"} 8.0',
            "# TYPE queue_age_scaler_ceiling_workers gauge",
            'queue_age_scaler_ceiling_workers{metric="workers",namespace="demo",queue="q",scaled_object="w"} NaN',
            "# TYPE queue_age_scaler_decision gauge",
            'queue_age_scaler_decision{metric="workers",namespace="demo",queue="q",reason="keeping up",scaled_object="w"} 0.0',
            'queue_age_scaler_decision{metric="workers",namespace="demo",queue="q",reason="clamped by database",scaled_object="w"} 1.0',
            "# TYPE queue_age_scaler_queue_oldest_age_seconds gauge",
            'queue_age_scaler_queue_oldest_age_seconds{broker="redis",format="sidekiq",queue="q"} 12.5',
            "",
        ]
    )
    view = read_metrics(text)
    assert view == ScalerView(desired=8.0, ceiling=None, reason="clamped by database", age=12.5)
    assert read_metrics("") == ScalerView()


def _sample(at: float, age: float, alive: int, sent: int, done: int) -> Sample:
    return Sample(at, "burst", 0, age, alive, alive, sent, done, ScalerView())


def test_the_recording_counts_seconds_over_target_rates_and_the_summary() -> None:
    recording = Recording(target_age=10.0, ceiling=8)
    ages = [0.0, 5.0, 11.0, 15.0, 9.0, 12.0, 0.0]
    for second, age in enumerate(ages):
        recording.samples.append(_sample(float(second), age, second, 10 * second, 8 * second))
    # over the target from 2 to 4 and from 5 to 6
    assert recording.seconds_over_target() == pytest.approx(3.0)
    assert recording.rate("sent", 2.0) == pytest.approx(10.0)
    assert recording.rate("done", 2.0) == pytest.approx(8.0)
    summary = recording.summary(60, [1.0, 14.5, 3.0], interrupted=False)
    assert (summary.max_age, summary.peak_workers, summary.sent, summary.done) == (15.0, 6, 60, 3)
    assert summary.line() == (
        "max age 15.0 s (target 10 s), 3 s over target, peak 6 workers (ceiling 8), "
        "3/60 jobs done, longest wait 14.5 s"
    )
    empty = Recording(10.0, 8).summary(0, [], interrupted=True)
    assert empty.line().startswith("interrupted: max age 0.0 s")
    assert empty.max_wait is None


def test_sparkline_runs_from_the_lowest_to_the_highest_bar() -> None:
    assert sparkline([0.0, 5.0, 10.0, 25.0], 10.0) == "▁▄██"
    assert sparkline([math.inf], 0.0) == ""
