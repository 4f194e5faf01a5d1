"""New metadata is parsed one map per turn of the loop, first come first served, and past the
limit a map is refused at once; a call cancelled while it waits or holds the turn blocks nobody."""

from __future__ import annotations

import asyncio

import pytest

from scaler.errors import ResourceExhausted
from scaler.parse_turns import ParseTurns


async def test_one_map_per_turn_in_arrival_order_with_other_work_running_between() -> None:
    turns = ParseTurns(max_waiting=10)
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
    turns = ParseTurns(max_waiting=2)
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
    turns = ParseTurns(max_waiting=10)
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
