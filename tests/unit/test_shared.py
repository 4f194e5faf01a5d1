"""SharedByKey: one value per key, opened by the first user and closed by the last."""

from __future__ import annotations

import asyncio

from brokers.shared import SharedByKey


async def test_the_first_acquire_opens_and_the_last_release_closes() -> None:
    opened: list[str] = []
    closed: list[str] = []

    async def close(value: str) -> None:
        closed.append(value)

    def open_(key: str) -> str:
        opened.append(key)
        return f"client of {key}"

    pool: SharedByKey[str, str] = SharedByKey(open_, close)
    assert pool.acquire("a") == pool.acquire("a") == "client of a"
    assert pool.acquire("b") == "client of b"
    assert (opened, len(pool)) == (["a", "b"], 2)

    await pool.release("a")
    assert closed == []  # one user of a is left
    await pool.release("a")
    await pool.release("b")
    assert (closed, len(pool)) == (["client of a", "client of b"], 0)

    assert pool.acquire("a") == "client of a"  # reopened after the last release
    assert opened == ["a", "b", "a"]


def test_a_value_is_shared_on_its_own_loop_only() -> None:
    """A share left unreleased on a loop that is gone is never handed to a user on another."""
    opened: list[str] = []

    async def close(value: str) -> None:
        pass

    def open_(key: str) -> str:
        opened.append(key)
        return f"client {len(opened)} of {key}"

    pool: SharedByKey[str, str] = SharedByKey(open_, close)

    async def use() -> str:
        return pool.acquire("a")  # and never released: a close cut short

    first = asyncio.run(use())
    second = asyncio.run(use())
    assert (first, second) == ("client 1 of a", "client 2 of a")
