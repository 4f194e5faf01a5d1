"""Fixtures for the Redis format tests: a unique token per test, and a client that deletes every
key holding that token afterwards (never FLUSHALL: other tests share the server)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis


@pytest.fixture
def token() -> str:
    return uuid.uuid4().hex[:10]


@pytest.fixture
async def r(redis_url: str, token: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url)
    yield client
    keys = [key async for key in client.scan_iter(match=f"*{token}*", count=1000)]
    if keys:
        await client.delete(*keys)
    await client.aclose()
