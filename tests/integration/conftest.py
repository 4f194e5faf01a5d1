"""Integration fixtures: the real Redis the tests run against."""

from __future__ import annotations

import os

import pytest
import redis

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


@pytest.fixture(scope="session")
def redis_url() -> str:
    """REDIS_URL (default 127.0.0.1:6379/0). Fails, never skips, when Redis does not answer."""
    url = os.environ.get("REDIS_URL", DEFAULT_REDIS_URL)
    try:
        with redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2) as client:
            client.ping()
    except (redis.exceptions.RedisError, OSError) as exc:
        pytest.fail(
            f"Redis is not reachable at REDIS_URL ({type(exc).__name__}: {exc}). Start it "
            "(scripts/services does) or point REDIS_URL at one; integration tests never skip.",
            pytrace=False,
        )
    return url
