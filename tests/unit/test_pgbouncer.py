"""The PgBouncer probe without a server: what its URL names, and the pool's arithmetic."""

from __future__ import annotations

import pytest

from scaler.ceilings import pgbouncer
from scaler.ceilings.headroom import ProbeFailed
from scaler.ceilings.pgbouncer import Pool, Target
from scaler.spec import parse_metadata


def test_the_url_names_the_console_the_database_and_the_pools_user() -> None:
    assert pgbouncer.target(
        "pgbouncer://stats:pw@bouncer/orders?pool_user=app&sslmode=require"
    ) == Target("postgresql://stats:pw@bouncer:6432/pgbouncer?sslmode=require", "orders", "app")
    # without pool_user the login is the workers' own
    assert pgbouncer.target("pgbouncer://app@bouncer:7432/orders").pool_user == "app"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("pgbouncer://stats@bouncer:6432", "names no database"),
        ("pgbouncer://bouncer:6432/orders", "names no user"),
    ],
)
def test_a_url_that_names_no_pool_is_refused(url: str, message: str) -> None:
    with pytest.raises(ProbeFailed, match=message):
        pgbouncer.target(url)


def test_a_pgbouncer_profile_picks_the_pgbouncer_probe() -> None:
    metadata = {"url": "redis://localhost", "queue": "q", "format": "rq"}
    profiles = {"bouncer": "pgbouncer://stats@bouncer/orders"}
    spec = parse_metadata(metadata | {"dependencies": "pool=probe:bouncer/1"}, profiles)
    assert spec.dependencies[0].probe_kind == "pgbouncer"


def test_the_pool_size_bounds_the_workers_and_waiting_clients_take_free_slots() -> None:
    reading = pgbouncer.headroom("orders", "app", 20, 0, 0, [Pool("app", 9, 9, 0)])
    assert (reading.usable, reading.free) == (20, 11)
    # a full pool: clients wait, nothing is free, the ceiling stays the pool's size
    reading = pgbouncer.headroom("orders", "app", 20, 0, 0, [Pool("app", 20, 20, 7)])
    assert (reading.usable, reading.free) == (20, 0)
    assert reading.detail == "pool orders/app: pool_size 20; 20 active, 7 clients waiting"


def test_other_users_pools_take_from_max_db_connections() -> None:
    pools = [Pool("app", 3, 2, 0), Pool("reports", 8, 8, 0), Pool("etl", 4, 1, 0)]
    reading = pgbouncer.headroom("orders", "app", 20, 25, 0, pools)
    assert (reading.usable, reading.free) == (13, 11)
    assert (
        "max_db_connections 25 - 12 busy server connections of other users = 13" in reading.detail
    )
    # max_user_connections is tighter still; a database full of others' servers gives 0
    assert pgbouncer.headroom("orders", "app", 20, 25, 5, pools).usable == 5
    assert pgbouncer.headroom("orders", "app", 20, 10, 0, pools).usable == 0


def test_the_answers_of_the_admin_console_become_the_figures() -> None:
    where = Target("postgresql://x@h:6432/pgbouncer", "orders", "app")
    databases = [{"name": "orders", "pool_size": 7, "max_connections": 0}]
    config = {"default_pool_size": "20", "max_db_connections": "9", "max_user_connections": "0"}
    servers = {"sv_active": 1, "sv_idle": 1, "sv_used": 1, "sv_tested": 1, "sv_login": 1}
    pools = [
        {"database": "orders", "user": "app", "cl_waiting": 1} | servers,
        {"database": "orders", "user": "other", "cl_waiting": 0} | servers | {"sv_active": 2},
        {"database": "pgbouncer", "user": "pgbouncer", "cl_waiting": 0} | servers,
    ]
    # max_db_connections 9 (SHOW CONFIG) less the other pool's 4 busy servers (its idle ones
    # PgBouncer would close for this pool) = 5, below pool_size 7 (SHOW DATABASES)
    reading = pgbouncer.headroom_of(where, databases, config, pools)
    assert (reading.usable, reading.free) == (5, 3)
    # a database PgBouncer has not listed yet (the * entry, no client so far): the defaults
    reading = pgbouncer.headroom_of(where, [], config | {"max_db_connections": "0"}, [])
    assert (reading.usable, reading.free) == (20, 20)
