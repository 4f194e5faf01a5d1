"""The workers the answers let go, while they may drain (scaler.draining), and the ceiling the
policy keeps beside them."""

from __future__ import annotations

from brokers.base import Precision
from scaler.draining import (
    BOOT_HORIZON,
    DRAIN_HORIZON,
    HPA_STABILIZATION,
    Released,
    after_answer,
    consumers_count_draining,
    drain_horizon,
    room,
    settle,
)
from scaler.policy import PolicyState, Reason, decide
from scaler.signals import Figure, QueueSignals
from scaler.spec import parse_metadata
from scaler.trigger_spec import TriggerSpec


def spec_of(fmt: str, **metadata: str) -> TriggerSpec:
    base = {"url": "redis://localhost", "queue": "q", "format": fmt, "workerConcurrency": "4"}
    return parse_metadata(base | {"jobDuration": "2s", "dependencies": "postgres=40/4"} | metadata)


def signals_of(
    *,
    depth: int,
    in_flight: int | None = None,
    consumers: int | None = None,
    slots: int | None = None,
    at: float = 0.0,
) -> QueueSignals:
    rate = Figure(1.0, Precision.EXACT, "test")
    return QueueSignals(
        observed_at=at,
        depth=depth,
        in_flight=in_flight,
        consumers=consumers,
        oldest_age=Figure(1.0, Precision.EXACT, "test"),
        arrival_rate=rate,
        completion_rate=rate,
        time_to_drain=Figure.unknown("rates"),
        rate_span=60.0,
        slots=slots,
    )


def answered(*answers: tuple[float, int], seen: int | None = None) -> Released:
    released = Released()
    for when, desired in answers:
        released = after_answer(released, desired, when, seen)
    return released


def test_a_scale_in_lets_workers_go_once_the_hpa_window_no_longer_holds_the_larger_answer() -> None:
    # 10, then 6: the HPA holds 10 for its stabilisation window, then lets 4 go
    held = answered((0.0, 10), (10.0, 6), (HPA_STABILIZATION, 6))
    assert (held.held, held.entries) == (10, ())
    gone = after_answer(held, 6, HPA_STABILIZATION + 1, None)
    assert (gone.held, gone.entries) == (6, ((HPA_STABILIZATION + 1, 4),))
    # a ceiling of 10 leaves 6 beside them; never under the answer that holds now
    assert room(gone, 10, 6) == 6
    assert room(gone, 10, 8) == 8
    # a rise within the window lets nothing go
    assert answered((0.0, 10), (10.0, 6), (20.0, 12), (400.0, 12)).entries == ()


def test_the_workers_the_broker_shows_before_the_first_answer_are_what_the_hpa_holds() -> None:
    first = after_answer(Released(), 3, 0.0, 9)
    assert first.held == 9
    assert after_answer(first, 3, HPA_STABILIZATION + 1, 9).entries == ((HPA_STABILIZATION + 1, 6),)


def test_no_more_drain_than_the_jobs_in_flight_the_first_let_go_gone_first() -> None:
    released = Released(entries=((10.0, 3), (20.0, 4)))
    spec = spec_of("celery")
    settled = settle(released, signals_of(depth=0, in_flight=5), spec, 30.0)
    assert settled.entries == ((10.0, 1), (20.0, 4))
    assert settle(released, signals_of(depth=0, in_flight=0), spec, 30.0).entries == ()


def test_where_consumers_count_draining_workers_they_show_when_they_are_gone() -> None:
    assert consumers_count_draining(spec_of("rq").source)
    assert not consumers_count_draining(spec_of("sidekiq").source)
    assert not consumers_count_draining(spec_of("huey").source)
    spec = spec_of("rq")
    # 10 workers take jobs, then 4 are let go: at least 6 still take jobs
    clean = settle(Released(), signals_of(depth=0, in_flight=40, consumers=10), spec, 0.0)
    assert clean.ready_floor == 10
    released = after_answer(after_answer(clean, 10, 0.0, 10), 6, HPA_STABILIZATION + 1, 10)
    assert (released.entries, released.ready_floor) == (((HPA_STABILIZATION + 1, 4),), 6)
    # 9 seen: 3 of the 4 still drain; 6 seen: none (pods still booting do not show)
    later = HPA_STABILIZATION + 20
    still = settle(released, signals_of(depth=5, in_flight=30, consumers=9), spec, later)
    assert still.workers == 3
    assert settle(still, signals_of(depth=5, in_flight=24, consumers=6), spec, later).workers == 0


def test_once_every_pod_the_hpa_holds_is_up_the_consumers_beyond_them_drain() -> None:
    spec = spec_of("rq")
    # 2 counted as let go though the broker's floor could not tell (it went to 0)
    released = Released(entries=((0.0, 2),), answers=((0.0, 8),), ready_floor=0, grown_at=0.0)
    seen = signals_of(depth=0, in_flight=20, consumers=8, at=BOOT_HORIZON - 1)
    assert settle(released, seen, spec, BOOT_HORIZON - 1).workers == 2  # pods may still boot
    assert settle(released, seen, spec, BOOT_HORIZON).workers == 0


def test_a_quiet_sidekiq_process_shows_in_the_jobs_in_flight_beyond_the_serving_threads() -> None:
    spec = spec_of("sidekiq")
    released = Released(entries=((0.0, 2),))
    # 16 threads serve and jobs wait, so all 16 are busy: the 18th and 19th job run elsewhere
    busy = signals_of(depth=4, in_flight=18, consumers=2, slots=16)
    assert settle(released, busy, spec, 10.0).workers == 2
    done = signals_of(depth=4, in_flight=16, consumers=2, slots=16)
    assert settle(released, done, spec, 10.0).workers == 0
    # while nothing waits, free threads say nothing: at most the jobs in flight
    assert settle(released, signals_of(depth=0, in_flight=1, consumers=2), spec, 10.0).workers == 1


def test_celery_once_the_hpa_replicas_are_up_jobs_beyond_their_slots_drain() -> None:
    spec = spec_of("celery")
    released = Released(entries=((0.0, 3),), answers=((0.0, 5),), grown_at=0.0)
    # 5 workers x 4 slots, all busy while jobs wait: 22 in flight leaves 2 on draining ones
    waiting = signals_of(depth=3, in_flight=22)
    assert settle(released, waiting, spec, BOOT_HORIZON).workers == 2
    assert settle(released, signals_of(depth=3, in_flight=20), spec, BOOT_HORIZON).workers == 0


def test_where_the_broker_shows_no_workers_a_pod_let_go_drains_for_the_horizon() -> None:
    short, long = spec_of("huey"), spec_of("huey", jobDuration="2m")
    assert (drain_horizon(short), drain_horizon(long)) == (DRAIN_HORIZON, 1200.0)
    released = Released(entries=((0.0, 3),))
    quiet = signals_of(depth=0)
    assert settle(released, quiet, short, DRAIN_HORIZON - 1).workers == 3
    assert settle(released, quiet, short, DRAIN_HORIZON).workers == 0
    assert settle(released, quiet, long, DRAIN_HORIZON).workers == 3


def test_the_policy_keeps_the_ceiling_beside_the_workers_it_let_go() -> None:
    # Huey shows no workers: the answer fell from 10 to 4 (6 let go, grace unknown), so a
    # backlog under a ceiling of 10 gets 4 more, not 6; after the horizon the whole ceiling
    spec = spec_of("huey")
    state = PolicyState(last_desired=4, released=Released(entries=((900.0, 6),)))
    backlog = signals_of(depth=5000, at=1000.0)
    decision, after = decide(backlog, spec, 1000.0, state)
    assert (decision.desired_workers, decision.reason) == (4, Reason.CLAMPED)
    assert after.released.workers == 6
    later = signals_of(depth=5000, at=900.0 + DRAIN_HORIZON)
    decision, _ = decide(later, spec, 900.0 + DRAIN_HORIZON, after)
    assert (decision.desired_workers, decision.reason) == (10, Reason.CLAMPED)
