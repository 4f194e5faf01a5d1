"""SharedByKey: one value per key, opened by the first user and closed by the last."""

from __future__ import annotations

import asyncio

import pytest

from brokers.connections import MAX_CONNECTIONS_PER_BROKER, Connections
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


async def test_a_servers_connections_are_its_own_and_close_with_it() -> None:
    """Two holders (two servers in one process) share nothing; closing one closes what its
    adapters left open, and its kinds open with the holder's bound."""
    closed: list[str] = []

    async def close(value: str) -> None:
        closed.append(value)

    first, second = Connections(max_per_broker=3), Connections()
    one: SharedByKey[str, str] = first.kind(
        "redis", lambda url: f"{url} x{first.max_per_broker}", close
    )
    other: SharedByKey[str, str] = second.kind(
        "redis", lambda url: f"{url} x{second.max_per_broker}", close
    )
    assert first.kind("redis", lambda url: "another opener", close) is one
    assert one.acquire("redis://a") == "redis://a x3"
    assert other.acquire("redis://a") == f"redis://a x{MAX_CONNECTIONS_PER_BROKER}"
    assert (len(first), len(second)) == (1, 1)

    await first.aclose()  # a share never released: closed with the server all the same
    assert (closed, len(first), len(second)) == (["redis://a x3"], 0, 1)
    await other.release("redis://a")
    assert closed == ["redis://a x3", "redis://a x16"]


def test_the_bound_per_broker_is_at_least_one() -> None:
    with pytest.raises(ValueError, match="max_per_broker is 0; expected at least 1"):
        Connections(max_per_broker=0)
