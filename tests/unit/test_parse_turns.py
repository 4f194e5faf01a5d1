"""New metadata is parsed one map per turn of the loop, first come first served, at most so many
a second, and past the limit a map is refused at once; a call cancelled while it waits or holds
the turn blocks nobody."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from scaler.errors import ResourceExhausted
from scaler.parse_turns import ParseTurns


async def test_one_map_per_turn_in_arrival_order_with_other_work_running_between() -> None:
    turns = ParseTurns(max_waiting=10, rate=1e6)
    events: list[str] = []

    async def parse(name: str) -> None:
        async with turns.turn():
            events.append(f"start {name}")
            await asyncio.sleep(0)  # a parse that yields must still hold the turn alone
            events.append(f"end {name}")

    async def other_work() -> None:  # a known trigger's calls, a sampler: one step per turn
        for _ in range(6):
            events.append("other")
            await asyncio.sleep(0)

    await asyncio.gather(parse("a"), parse("b"), parse("c"), other_work())
    parses = [e for e in events if e != "other"]
    assert parses == ["start a", "end a", "start b", "end b", "start c", "end c"]
    # the other work ran between the parses, not after all of them
    assert events.index("other", events.index("end a")) < events.index("start b")
    assert turns.waiting == 0


async def test_past_the_limit_a_map_is_refused_at_once_naming_the_flag() -> None:
    turns = ParseTurns(max_waiting=2, rate=1e6)
    release = asyncio.Event()

    async def hold() -> None:
        async with turns.turn():
            await release.wait()

    holders = [asyncio.create_task(hold()) for _ in range(2)]
    await asyncio.sleep(0.01)
    assert turns.waiting == 2
    with pytest.raises(ResourceExhausted, match="--max-new-metadata"):
        async with turns.turn():
            pass
    release.set()
    await asyncio.gather(*holders)
    async with turns.turn():  # room again
        assert turns.waiting == 1


async def test_a_call_cancelled_waiting_or_holding_the_turn_does_not_block_the_rest() -> None:
    turns = ParseTurns(max_waiting=10, rate=1e6)
    done: list[str] = []

    async def parse(name: str, forever: bool = False) -> None:
        async with turns.turn():
            if forever:
                await asyncio.Event().wait()
            done.append(name)

    holder = asyncio.create_task(parse("holder", forever=True))
    waiter = asyncio.create_task(parse("cancelled while waiting"))
    last = asyncio.create_task(parse("last"))
    await asyncio.sleep(0.01)
    waiter.cancel()
    holder.cancel()
    await asyncio.wait_for(last, 1.0)
    assert done == ["last"] and turns.waiting == 0
    assert holder.cancelled() and waiter.cancelled()


async def test_turns_begin_no_sooner_than_one_over_the_rate_apart() -> None:
    turns = ParseTurns(max_waiting=10, rate=50.0)  # 20 ms between the starts of two turns
    loop = asyncio.get_running_loop()
    starts: list[float] = []

    async def parse() -> None:
        async with turns.turn():
            starts.append(loop.time())

    await asyncio.gather(*(parse() for _ in range(4)))
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    assert len(gaps) == 3 and all(gap >= 0.02 - 1e-3 for gap in gaps), gaps
    # a map arriving once the spacing has passed is parsed at once, not after a further wait
    await asyncio.sleep(0.03)
    before = loop.time()
    await parse()
    assert starts[-1] - before < 0.01


def test_a_rate_of_zero_or_less_is_refused() -> None:
    with pytest.raises(ValueError, match="rate"):
        ParseTurns(max_waiting=10, rate=0.0)
