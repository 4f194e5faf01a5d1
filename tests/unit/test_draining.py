"""The workers the answers let go, while they may drain (scaler.draining), and the ceiling the
policy keeps beside them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from brokers.base import Precision
from scaler.draining import (
    BOOT_HORIZON,
    DELETE_LAG,
    DRAIN_HORIZON,
    DRAIN_JOBS,
    HPA_STABILIZATION,
    KEDA_COOLDOWN,
    Released,
    after_answer,
    consumers_count_draining,
    drain_horizon,
    held_up,
    hpa_holds,
    room,
    settle,
)
from scaler.errors import InvalidMetadata
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


def test_where_the_broker_shows_what_runs_a_pod_let_go_drains_until_it_shows_it_gone() -> None:
    # Celery shows the jobs that run, not the workers: a pod let go 20 minutes ago still counts
    # while the jobs in flight may include its own (broad-185: a pod let go drained a
    # 20-minute job, and a burst's fleet at the ceiling beside it was 654 s above it)
    spec = spec_of("celery", workerConcurrency="1", jobDuration="20s")
    released = Released(entries=((0.0, 1),), answers=((1190.0, 2),))
    busy = settle(released, signals_of(depth=0, in_flight=3), spec, 1200.0)
    assert (busy.workers, room(busy, 10, 2)) == (1, 9)
    # none running: it is gone
    assert settle(released, signals_of(depth=0, in_flight=0), spec, 1200.0).workers == 0
    # with the grace period the trigger gives, Kubernetes ends the drain then
    graced = spec_of("celery", workerConcurrency="1", jobDuration="20s", gracePeriod="60s")
    assert settle(released, signals_of(depth=0, in_flight=3), graced, 1200.0).workers == 0


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
    # let go a minute after the last scale-up, so still within the drain horizon once it is up
    released = Released(entries=((60.0, 3),), answers=((0.0, 5),), grown_at=0.0)
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


def test_inactive_answers_for_keda_s_cooldown_let_every_held_replica_go() -> None:
    # KEDA scales to zero after its cooldown, past the HPA's window that still holds 5
    held = answered((0.0, 5))
    quiet = after_answer(held, 0, 10.0, None, inactive=True)
    assert (quiet.held, quiet.entries, quiet.inactive_since) == (5, (), 10.0)
    still = after_answer(quiet, 0, 10.0 + KEDA_COOLDOWN - 1, None, inactive=True)
    assert (still.held, still.entries) == (5, ())
    gone = after_answer(still, 0, 10.0 + KEDA_COOLDOWN, None, inactive=True)
    assert (gone.held, gone.entries) == (0, ((10.0 + KEDA_COOLDOWN, 5),))
    # an inactive answer that asks for workers is scaled to zero all the same
    asked = after_answer(after_answer(held, 2, 10.0, None, True), 2, 290.0, None, True)
    assert (asked.held, asked.entries) == (0, ((290.0, 5),))
    # an active answer within the cooldown: KEDA keeps the Deployment, the count starts again
    back = after_answer(quiet, 0, 100.0, None, inactive=False)
    assert back.inactive_since is None
    again = after_answer(back, 0, 110.0, None, inactive=True)
    assert after_answer(again, 0, 10.0 + KEDA_COOLDOWN, None, inactive=True).entries == ()


def test_within_its_tolerance_the_hpa_may_run_fewer_replicas_than_the_answer_it_holds() -> None:
    # it runs 11 for an answer of 12 (12/11 is within 10%), but 10 would be scaled up; at
    # exact 10% steps the HPA's floating point reads past its tolerance: 10 for 11 scales up
    assert [held_up(n) for n in (0, 1, 5, 10, 11, 12, 22, 33)] == [0, 1, 5, 10, 11, 11, 21, 31]
    assert hpa_holds(35, 32) and not hpa_holds(11, 10) and not hpa_holds(3, 0)
    spec = spec_of("dramatiq")
    released = Released(entries=((0.0, 3),), answers=((0.0, 12),), ready_floor=11, grown_at=0.0)
    # 14 consumers: 11 that take jobs and 3 that drain, not 12 and 2
    seen = signals_of(depth=9, in_flight=40, consumers=14, at=BOOT_HORIZON)
    assert settle(released, seen, spec, BOOT_HORIZON).workers == 3


def test_workers_that_drain_filling_the_ceiling_make_the_queue_inactive() -> None:
    # RQ shows its workers: 10 let go still drain under a ceiling of 10. Answering active
    # would make KEDA keep a replica beside them, so the answer is 0 and inactive
    spec = spec_of("rq")
    state = PolicyState(last_desired=0, released=Released(entries=((900.0, 10),), ready_floor=0))
    full = signals_of(depth=50, in_flight=10, consumers=10, at=1000.0)
    decision, _ = decide(full, spec, 1000.0, state)
    assert (decision.desired_workers, decision.reason, decision.active) == (
        0,
        Reason.CLAMPED,
        False,
    )
    # once one is gone there is room for one worker: active again
    fewer = signals_of(depth=50, in_flight=9, consumers=9, at=1001.0)
    decision, _ = decide(fewer, spec, 1001.0, state)
    assert (decision.desired_workers, decision.active) == (1, True)


def test_where_nothing_shows_what_runs_only_a_recent_release_makes_the_queue_inactive() -> None:
    # Huey: 10 let go under a ceiling of 10 (2 s jobs). Within DRAIN_JOBS jobs of the release
    # they likely drain; after that, only the horizon's guess keeps them, which caps the
    # answer but does not stop KEDA's one replica
    spec = spec_of("huey")
    state = PolicyState(last_desired=0, released=Released(entries=((1000.0, 10),)))
    soon = 1000.0 + DRAIN_JOBS * 2.0 - 1
    decision, _ = decide(signals_of(depth=50, at=soon), spec, soon, state)
    assert (decision.desired_workers, decision.active) == (0, False)
    later = 1000.0 + DRAIN_JOBS * 2.0
    decision, _ = decide(signals_of(depth=50, at=later), spec, later, state)
    assert (decision.desired_workers, decision.reason, decision.active) == (0, Reason.CLAMPED, True)


def test_the_grace_period_a_trigger_gives_bounds_the_drain_where_no_workers_show() -> None:
    # Kubernetes kills a pod its grace period after deleting it: 30 s, not the 10-minute guess
    spec = spec_of("huey", gracePeriod="30s")
    assert (spec.grace_period, drain_horizon(spec)) == (30.0, 30.0 + DELETE_LAG)
    released = Released(entries=((0.0, 3),))
    quiet = signals_of(depth=0)
    assert settle(released, quiet, spec, 30.0 + DELETE_LAG - 1).workers == 3
    assert settle(released, quiet, spec, 30.0 + DELETE_LAG).workers == 0
    # within it, the pods let go fill a ceiling of 3 (postgres=12/4): inactive, as where jobs show
    tight = spec_of("huey", gracePeriod="30s", dependencies="postgres=12/4")
    state = PolicyState(last_desired=0, released=released)
    decision, _ = decide(signals_of(depth=50, at=40.0), tight, 40.0, state)
    assert (decision.desired_workers, decision.active) == (0, False)
    # where the broker shows the workers, they tell when the pods are gone, not the clock
    rq = spec_of("rq", gracePeriod="30s")
    held = Released(entries=((0.0, 3),), ready_floor=5)
    seen = signals_of(depth=0, in_flight=8, consumers=8)
    assert settle(held, seen, rq, 100.0).workers == 3


def test_a_grace_period_is_a_duration_of_zero_or_more() -> None:
    assert spec_of("huey", gracePeriod="0").grace_period == 0.0
    assert spec_of("huey").grace_period is None
    with pytest.raises(InvalidMetadata, match="gracePeriod: got '-5s'; expected a duration"):
        spec_of("huey", gracePeriod="-5s")


def test_a_last_worker_whose_drain_would_fill_the_ceiling_past_the_target_is_kept() -> None:
    # Huey shows nothing of its workers; 2-minute jobs drain for up to 20 minutes unseen. One
    # worker let go already may drain under a ceiling of 2: letting the last one go too would
    # leave no room for a worker when the next job comes, for 20 minutes (`mixes-202`: 200
    # jobs waited 15 minutes beside a pod that drained one job). One is kept, and active
    spec = spec_of("huey", jobDuration="2m", dependencies="postgres=8/4")
    state = PolicyState(
        last_desired=1, released=Released(entries=((0.0, 1),), answers=((100.0, 1),))
    )
    idle = replace(
        signals_of(depth=0, at=500.0),
        arrival_rate=Figure(0.0, Precision.EXACT, "test"),
        completion_rate=Figure(0.0, Precision.EXACT, "test"),
    )
    decision, _ = decide(idle, spec, 500.0, state)
    assert (decision.desired_workers, decision.reason, decision.active) == (
        1,
        Reason.KEEPING_ROOM,
        True,
    )
    # with room left beside the one that drains (a ceiling of 3), the last one goes
    roomy = spec_of("huey", jobDuration="2m", dependencies="postgres=12/4")
    decision, _ = decide(idle, roomy, 500.0, state)
    assert (decision.desired_workers, decision.reason, decision.active) == (0, Reason.IDLE, False)
    # where the grace period ends the drain within the target, the room comes back in time
    graced = spec_of("huey", jobDuration="2m", dependencies="postgres=8/4", gracePeriod="20s")
    decision, _ = decide(idle, graced, 500.0, state)
    assert (decision.desired_workers, decision.active) == (0, False)


def test_an_answer_within_the_hpa_s_tolerance_leaves_the_replicas_it_runs() -> None:
    # ceilings-105: 10 replicas, then 9 asked for 5 minutes (within 10% of 10: the HPA keeps
    # 10), then 8: the HPA lets 2 go, not 1, and both may drain beside a scale-up
    released = answered((0.0, 10), (100.0, 9), (400.0, 9))
    assert (released.held, released.entries) == (10, ())
    later = after_answer(released, 8, 700.0, None)
    assert later.entries == () and later.held == 10  # held 5 minutes from the last 9
    gone = after_answer(later, 8, 1001.0, None)
    assert (gone.held, gone.entries) == (8, ((1001.0, 2),))
    # past the tolerance, the answer is what it runs: 8 of 10 lets 2 go once it leaves the window
    assert after_answer(answered((0.0, 10), (100.0, 8)), 8, 401.0, None).entries == ((401.0, 2),)


def test_an_active_answer_of_0_holds_the_replica_keda_keeps_where_no_workers_show() -> None:
    # Huey under a ceiling, the scaler's first sample: no rate yet, so the queue is active
    # (its first window) with an answer of 0. KEDA keeps one replica meanwhile; once the
    # answers have been inactive for KEDA's cooldown it goes, and is counted as let go
    spec = spec_of("huey")
    unknown = Figure.unknown("no rate yet")
    first = replace(
        signals_of(depth=0), arrival_rate=unknown, completion_rate=unknown, rate_span=0.0
    )
    decision, state = decide(first, spec, 0.0, PolicyState())
    assert (decision.desired_workers, decision.active) == (0, True)
    assert state.released.answers == ((0.0, 1),)
    quiet = replace(
        signals_of(depth=0, at=100.0),
        arrival_rate=Figure(0.0, Precision.EXACT, "test"),
        completion_rate=Figure(0.0, Precision.EXACT, "test"),
    )
    decision, state = decide(quiet, spec, 100.0, state)
    assert (decision.desired_workers, decision.active, state.released.entries) == (0, False, ())
    later = 100.0 + KEDA_COOLDOWN
    _, state = decide(replace(quiet, observed_at=later), spec, later, state)
    assert state.released.entries == ((later, 1),)
    # Celery shows what runs but not the workers: nothing runs, and the window is held too
    decision, _ = decide(replace(first, in_flight=0), spec_of("celery"), 0.0, PolicyState())
    assert (decision.desired_workers, decision.active) == (0, True)
    # without a dependency the first window is not held: inactive, and no replica is held
    free = replace(spec, dependencies=())
    decision, state = decide(first, free, 0.0, PolicyState())
    assert (decision.active, state.released.answers) == (False, ((0.0, 0),))
