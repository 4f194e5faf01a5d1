"""The split of a shared dependency budget (scaler/shared_budget.py): weighted max-min fairness,
floors, and the transition that never lets the pools hold more than the limit."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.shared_budget import EPSILON, PoolAsk, allocate, grant, shares


def test_a_pool_that_needs_little_leaves_the_rest_to_the_other() -> None:
    # postgres=100/5 in two ScaledObjects: 20 workers in all
    asks = [PoolAsk("shop/mailer", need=3, per_worker=5), PoolAsk("shop/orders", 40, 5)]
    assert allocate(100, asks) == {"shop/mailer": 3, "shop/orders": 17}


def test_two_pools_that_both_need_more_split_evenly() -> None:
    asks = [PoolAsk("a", need=30, per_worker=5), PoolAsk("b", 25, 5)]
    assert allocate(100, asks) == {"a": 10, "b": 10}


def test_every_need_that_fits_is_met() -> None:
    asks = [PoolAsk("a", need=8, per_worker=5), PoolAsk("b", 12, 5)]
    assert allocate(100, asks) == {"a": 8, "b": 12}


def test_weights_split_contested_slots_in_proportion() -> None:
    # weight 3 against 1 of 100 slots: 75 and 25 slots, 15 and 5 workers
    asks = [PoolAsk("a", need=40, per_worker=5, weight=3), PoolAsk("b", 40, 5, weight=1)]
    assert allocate(100, asks) == {"a": 15, "b": 5}


def test_water_filling_over_three_pools_with_different_worker_sizes() -> None:
    # 60 slots; a needs 2 workers of 4 (8 slots), b and c want far more: the 52 left are split
    # evenly in slots, 26 each: b 13 workers of 2, c 8 workers of 3 (24 slots), and the 2
    # slots left go to b, whose worker fits: 14
    asks = [PoolAsk("a", need=2, per_worker=4), PoolAsk("b", 50, 2), PoolAsk("c", 50, 3)]
    assert allocate(60, asks) == {"a": 2, "b": 14, "c": 8}


def test_floors_come_first() -> None:
    # minWorkers 6 of 5 slots each: 30 slots before the other pool's need is shared
    asks = [PoolAsk("a", need=20, per_worker=5, floor=6), PoolAsk("b", 20, 5)]
    assert allocate(50, asks) == {"a": 6, "b": 4}
    # floors alone that do not fit are themselves shared fairly
    asks = [PoolAsk("a", need=20, per_worker=5, floor=8), PoolAsk("b", 20, 5, floor=8)]
    assert allocate(50, asks) == {"a": 5, "b": 5}


def test_a_second_pool_waits_until_the_first_has_scaled_in() -> None:
    # orders ran 20 of 20 alone; mailer arrives needing 10: the fair split is 10 and 10, but
    # orders still holds 20 workers (its HPA keeps them for its stabilisation window)
    asks = [PoolAsk("orders", need=20, per_worker=5, held=20), PoolAsk("mailer", 10, 5)]
    split = shares(100, asks)
    assert (split["orders"].allotted, split["orders"].granted) == (10, 10)
    assert (split["mailer"].allotted, split["mailer"].granted) == (10, 0)
    # orders down to 14: mailer may take the 6 workers' slots freed, no more
    asks = [PoolAsk("orders", 20, 5, held=14), PoolAsk("mailer", 10, 5)]
    assert shares(100, asks)["mailer"].granted == 6
    # orders at its share: mailer gets all of its own
    asks = [PoolAsk("orders", 20, 5, held=10), PoolAsk("mailer", 10, 5, held=6)]
    assert {p: s.granted for p, s in shares(100, asks).items()} == {"orders": 10, "mailer": 10}


def test_no_pool_grows_while_the_pools_hold_more_than_a_fallen_limit() -> None:
    # a probed limit fell from 100 to 60 slots while 12 + 4 workers of 5 run
    asks = [PoolAsk("a", need=12, per_worker=5, held=12), PoolAsk("b", 12, 5, held=4)]
    assert allocate(60, asks) == {"a": 6, "b": 6}
    granted = {p: s.granted for p, s in shares(60, asks).items()}
    assert granted == {"a": 6, "b": 4}  # a shrinks; b, below its share, keeps what it runs
    asks = [PoolAsk("a", need=12, per_worker=5, held=6), PoolAsk("b", 12, 5, held=4)]
    assert shares(60, asks)["b"].granted == 6  # a has shrunk: b grows


pools = st.lists(
    st.builds(
        PoolAsk,
        pool=st.text("abcdefgh", min_size=1, max_size=3),
        need=st.integers(0, 60),
        per_worker=st.sampled_from([1.0, 2.0, 2.5, 3.0, 5.0, 10.0]),
        weight=st.sampled_from([0.5, 1.0, 2.0, 3.0]),
        floor=st.integers(0, 5),
        held=st.integers(0, 60),
    ),
    min_size=1,
    max_size=6,
    unique_by=lambda a: a.pool,
)


@settings(max_examples=400, deadline=None)
@given(limit=st.integers(1, 300).map(float), asks=pools)
def test_allocation_is_within_the_limit_and_max_min_fair(limit: float, asks: list[PoolAsk]) -> None:
    allotted = allocate(limit, asks)
    used = sum(a.per_worker * allotted[a.pool] for a in asks)
    assert used <= limit + EPSILON
    left = limit - used
    for ask in asks:
        assert 0 <= allotted[ask.pool] <= ask.need
        if allotted[ask.pool] == ask.need:
            continue
        # an unmet pool: one more worker does not fit, and no pool of workers its size above its
        # own floor holds a worker whose move would leave it more slots per weight than this
        # one would get (workers of other sizes cannot be traded one for one)
        assert ask.per_worker > left - EPSILON
        level = (allotted[ask.pool] + 1) * ask.per_worker / ask.weight
        for other in asks:
            mine = allotted[other.pool]
            if mine > min(other.floor, other.need) and other.per_worker == ask.per_worker:
                assert (mine - 1) * other.per_worker / other.weight < level + EPSILON


@settings(max_examples=400, deadline=None)
@given(limit=st.integers(1, 300).map(float), asks=pools)
def test_grants_never_take_the_pools_above_the_limit(limit: float, asks: list[PoolAsk]) -> None:
    allotted = allocate(limit, asks)
    granted = grant(limit, asks, allotted)
    held = sum(a.per_worker * a.held for a in asks)
    after = sum(a.per_worker * max(a.held, granted[a.pool]) for a in asks)
    # what the pools may run once they follow the grants (a pool that shrinks may still run
    # what it holds): never above the limit, nor above what they held when that was already more
    assert after <= max(limit, held) + EPSILON
    if held > limit:
        assert after == held  # nobody grows while the pools hold more than the limit
    for ask in asks:
        assert granted[ask.pool] <= allotted[ask.pool]


@settings(max_examples=200, deadline=None)
@given(limit=st.integers(1, 300).map(float), asks=pools, rounds=st.integers(1, 8))
def test_pools_that_follow_their_grants_reach_their_allotments_under_the_limit(
    limit: float, asks: list[PoolAsk], rounds: int
) -> None:
    """Each round every pool runs what it was granted (those that shrink at once): the slots
    in use never pass the limit once below it, and after two rounds every pool has its share."""
    current = asks
    start = sum(a.per_worker * a.held for a in asks)
    for number in range(max(rounds, 2)):
        split = shares(limit, current)
        current = [
            PoolAsk(a.pool, a.need, a.per_worker, a.weight, a.floor, split[a.pool].granted)
            for a in current
        ]
        used = sum(a.per_worker * a.held for a in current)
        assert used <= max(limit, start) + EPSILON
        if number >= 1:
            assert all(split[a.pool].granted == split[a.pool].allotted for a in current)


def test_a_pool_behind_its_target_gets_more_of_contested_slots_up_to_half_again() -> None:
    # 100 slots, both need more: on time, 10 and 10 workers
    on_time = [PoolAsk("a", need=30, per_worker=5, lateness=0.5), PoolAsk("b", 30, 5)]
    assert allocate(100, on_time) == {"a": 10, "b": 10}
    # b's oldest job is 1.25 times its target: 1.25 against 1, 11 and 9 workers
    late = [PoolAsk("a", need=30, per_worker=5, lateness=0.5), PoolAsk("b", 30, 5, lateness=1.25)]
    assert allocate(100, late) == {"a": 9, "b": 11}
    # however late, at most 1.5 times its weight: a weight of 1.5 on time holds its own
    later = [PoolAsk("a", 30, 5, weight=1.5), PoolAsk("b", 30, 5, lateness=9.0)]
    assert allocate(100, later) == {"a": 10, "b": 10}
    # and a weight of 2 on time still gets more than it
    assert allocate(100, [PoolAsk("a", 30, 5, weight=2), PoolAsk("b", 30, 5, lateness=9.0)]) == {
        "a": 12, "b": 8,
    }  # fmt: skip
    # a pool that needs little still gets its need beside a late one
    small = [PoolAsk("a", need=2, per_worker=5), PoolAsk("b", 30, 5, lateness=9.0)]
    assert allocate(100, small) == {"a": 2, "b": 18}
