"""Connection profiles from QUEUE_AGE_SCALER_CONNECTION_<NAME> variables and --connections-dir."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from scaler.connections import ENV_PREFIX, env_name, load_profiles
from scaler.profiles import Profile, profile_key
from scaler.spec import parse_metadata

URL = "redis://:s3cret@orders.internal:6379/0"


@pytest.mark.parametrize(
    "name", ["orders-redis", "orders_redis", "ORDERS_REDIS", "Orders-Redis", "orders.redis"]
)
def test_env_name(name: str) -> None:
    assert env_name(name) == "QUEUE_AGE_SCALER_CONNECTION_ORDERS_REDIS"
    assert profile_key(name) == profile_key("orders-redis")


@pytest.mark.parametrize(
    "name", ["orders-redis", "orders_redis", "ORDERS_REDIS", "Orders-Redis", "orders.redis"]
)
def test_trigger_finds_the_profile_of_its_env_variable(name: str) -> None:
    profiles = load_profiles({env_name("orders-redis"): URL, "HOME": "/root"})
    spec = parse_metadata({"connection": name, "queue": "q", "format": "rq"}, profiles)
    assert spec.source.url == URL


def test_env_profiles_are_named_in_lower_case_with_dashes() -> None:
    environ = {
        ENV_PREFIX + "ORDERS_REDIS": f" {URL} ",
        ENV_PREFIX + "JOBS_RABBITMQ": "amqp://rabbit/",
        ENV_PREFIX + "EMPTY": "  ",
        "QUEUE_AGE_SCALER_OTHER": "redis://x",
    }
    assert load_profiles(environ) == {
        "jobs-rabbitmq": Profile("jobs-rabbitmq", "amqp://rabbit/"),
        "orders-redis": Profile("orders-redis", URL),
    }


def test_a_file_wins_over_a_variable_of_the_same_profile(tmp_path: Path) -> None:
    (tmp_path / "orders.redis").write_text("redis://from-file:6379/0\n")
    (tmp_path / ".hidden").write_text("redis://hidden:6379/0")
    profiles = load_profiles({ENV_PREFIX + "ORDERS_REDIS": URL}, tmp_path)
    assert profiles == {"orders.redis": Profile("orders.redis", "redis://from-file:6379/0")}
    spec = parse_metadata({"connection": "orders-redis", "queue": "q", "format": "rq"}, profiles)
    assert spec.source.url == "redis://from-file:6379/0"


def test_variables_naming_one_profile_twice_keep_one_and_warn(
    caplog: pytest.LogCaptureFixture,
) -> None:
    environ = {ENV_PREFIX + "ORDERS_REDIS": URL, ENV_PREFIX + "orders_redis": "redis://other/0"}
    with caplog.at_level(logging.WARNING, logger="scaler.connections"):
        profiles = load_profiles(environ)
    assert profiles == {"orders-redis": Profile("orders-redis", URL)}
    assert ENV_PREFIX + "orders_redis" in caplog.text
    assert ENV_PREFIX + "ORDERS_REDIS" in caplog.text
    assert "s3cret" not in caplog.text
