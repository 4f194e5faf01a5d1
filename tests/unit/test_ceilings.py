"""Probed dependency ceilings without a server: the syntax, the arithmetic of each probe, the
rate-limit header conventions, and the rules for a probe that cannot read."""

from __future__ import annotations

import httpx
import pytest

from scaler.ceilings import http, mysql, postgres, redis
from scaler.ceilings.headroom import (
    FigureSource,
    Headroom,
    ProbeFailed,
    ProbeFigure,
    probe_failed,
)
from scaler.ceilings.limit import STALE_AFTER, dependency_ceiling, trigger_ceiling
from scaler.errors import InvalidMetadata, PermissionDenied
from scaler.metrics import Metrics
from scaler.policy import PolicyState, Reason, decide
from scaler.probe import render_table
from scaler.profiles import Profile
from scaler.spec import parse_metadata
from scaler.trigger_spec import Dependency, TriggerSpec
from tests.unit.test_policy import NOW, signals_of

PG_URL = "postgresql://workers:secret@db:5432/orders"
PROFILES = {"orders-pg": PG_URL, "quota": "https://api.example/limits", "mq": "amqp://x@h/"}


def spec_of(dependencies: str, **metadata: str) -> TriggerSpec:
    base = {"url": "redis://localhost", "queue": "q", "format": "rq"}
    return parse_metadata(base | metadata | {"dependencies": dependencies}, PROFILES)


# -- the syntax ---------------------------------------------------------------------------------


def test_a_probe_names_a_connection_profile_and_hides_its_url() -> None:
    (dep,) = spec_of("postgres=probe:Orders_PG/5").dependencies
    assert dep == Dependency("postgres", None, 5.0, "orders-pg", PG_URL, "postgres")
    assert "secret" not in repr(dep)
    assert dep.max_workers is None


def test_a_static_fallback_follows_the_profile() -> None:
    spec = spec_of("postgres=probe:orders-pg|100/5,api=probe:quota/0.5,cache=40/4")
    pg, api, _ = spec.dependencies
    assert (pg.limit, pg.max_workers, pg.probe_kind) == (100.0, 20, "postgres")
    assert (api.limit, api.probe_kind) == (None, "http")
    # the spec's own ceiling is the static part: probed ones come from their readings
    assert spec.ceiling == (10, "cache")
    assert spec.has_ceiling


@pytest.mark.parametrize(
    ("dependencies", "message"),
    [
        ("postgres=probe:orders-db/5", "probe:orders-db: got 'orders-db'; the scaler has no such connection profile"),
        ("rabbit=probe:mq/1", "'rabbit': the URL of connection profile 'mq': scheme amqp:// has no probe"),
        ("postgres=probe:orders-pg|2/5", "a LIMIT below PER_WORKER allows no worker at all"),
        ("postgres=probe:orders-pg|0/5", "LIMIT and PER_WORKER must be above zero"),
        ("postgres=probe:/5", "expected NAME=LIMIT/PER_WORKER or NAME=probe:PROFILE[|LIMIT]/PER_WORKER"),
        ("postgres=probe:orders-pg", "expected NAME=LIMIT/PER_WORKER or NAME=probe:PROFILE"),
    ],
)  # fmt: skip
def test_bad_probes_are_named(dependencies: str, message: str) -> None:
    with pytest.raises(InvalidMetadata, match=r"^dependencies: ") as raised:
        spec_of(dependencies)
    assert message in str(raised.value)


def test_age_metric_with_a_probe_needs_the_observed_workers() -> None:
    with pytest.raises(InvalidMetadata, match=r"^metric: metric age with a ceiling \(postgres\)"):
        spec_of("postgres=probe:orders-pg/5", format="celery", metric="age")


# -- the arithmetic of each probe ------------------------------------------------------------


def test_postgres_takes_the_smallest_limit_less_other_roles() -> None:
    # 100 - 3 reserved - 2 (16+) - 60 of other roles = 35; role limit 50; database 40 - 20 = 20
    reading = postgres.headroom(100, 3, 2, 50, 40, 60, 6, 20, "workers")
    assert (reading.usable, reading.free) == (20, 14)
    assert "database CONNECTION LIMIT 40 - 20 sessions of other roles = 20" in reading.detail
    # no role or database limit (-1): the server's slots
    reading = postgres.headroom(100, 3, 0, -1, -1, 60, 6, 20, "workers")
    assert (reading.usable, reading.free) == (37, 31)
    # a full server: nothing, never below zero
    assert postgres.headroom(100, 3, 0, -1, -1, 99, 2, 0, "w").free == 0


def test_mysql_takes_the_user_limits_and_leaves_the_probe_out() -> None:
    # 151 - (30 threads - 4 own - the probe) = 126; global 0 (none); the account's 10
    reading = mysql.headroom(151, 0, 10, 30, 4, "workers")
    assert (reading.usable, reading.free) == (10, 6)
    reading = mysql.headroom(20, 8, None, 16, 2, "workers")  # 20 - 13 others = 7 < 8
    assert (reading.usable, reading.free) == (7, 5)


def test_redis_tells_free_clients_only() -> None:
    reading = redis.headroom(maxclients=100, connected_clients=31)
    assert (reading.usable, reading.free) == (None, 70)
    assert reading.summary() == "70 free slots"


# -- rate-limit header fields ------------------------------------------------------------------


def rate(headers: dict[str, str], status: int = 200, now: float = 0.0) -> float | None:
    return http.headroom(status, httpx.Headers(headers), now).usable


def test_ietf_list_form_takes_the_tightest_quota() -> None:
    headers = {
        "RateLimit-Policy": '"minute";q=100;w=60, "day";q=5000;w=86400',
        "RateLimit": '"minute";r=50;t=30, "day";r=100;t=3600',
    }
    # minute: min(50/30, 100/60) = 1.67/s; day: min(100/3600, ...) = 0.028/s
    assert rate(headers) == pytest.approx(100 / 3600)


def test_ietf_dictionary_form_and_its_policy() -> None:
    headers = {"RateLimit": "limit=100, remaining=10, reset=20", "RateLimit-Policy": "100;w=60"}
    assert rate(headers) == pytest.approx(10 / 20)
    assert rate({"RateLimit": "limit=100, remaining=90, reset=30"}) == pytest.approx(3.0)


def test_separate_fields_with_a_policy_in_the_limit() -> None:
    headers = {
        "RateLimit-Limit": "100, 100;w=60",
        "RateLimit-Remaining": "99",
        "RateLimit-Reset": "10",
    }
    assert rate(headers) == pytest.approx(100 / 60)


def test_x_ratelimit_reset_in_seconds_or_as_a_unix_time() -> None:
    relative = {"X-RateLimit-Remaining": "30", "X-RateLimit-Reset": "15"}
    assert rate(relative) == pytest.approx(2.0)
    absolute = {"X-RateLimit-Remaining": "30", "X-RateLimit-Reset": "1700000015"}
    assert rate(absolute, now=1_700_000_000.0) == pytest.approx(2.0)


def test_decimal_figures_and_a_429() -> None:
    assert rate({"RateLimit": '"q";r=3;t=1.5'}) == pytest.approx(2.0)
    assert rate({"Retry-After": "30"}, status=429) == 0.0


@pytest.mark.parametrize(
    ("status", "headers", "message"),
    [
        (200, {}, "no rate-limit header in the answer"),
        (200, {"X-RateLimit-Remaining": "30"}, "no reset time nor window"),
        (200, {"RateLimit": '"q";r=abc'}, "unreadable rate-limit header"),
        (503, {"RateLimit": '"q";r=3;t=1'}, "the endpoint answered 503"),
    ],
)
def test_answers_that_give_no_rate_fail_the_probe(
    status: int, headers: dict[str, str], message: str
) -> None:
    with pytest.raises(ProbeFailed, match=message):
        rate(headers, status)


# -- a probe that cannot read -------------------------------------------------------------------

PG = spec_of("postgres=probe:orders-pg/5").dependencies[0]
PG_FALLBACK = spec_of("postgres=probe:orders-pg|100/5").dependencies[0]
CACHE = spec_of("cache=probe:quota/2").dependencies[0]
READING = Headroom(free=20, usable=37, detail="test")


def figure(
    age: float | None, error: str | None = None, reading: Headroom | None = READING
) -> ProbeFigure:
    return ProbeFigure("postgres", reading, age, error)


def test_a_live_reading_sets_the_ceiling() -> None:
    ceiling = dependency_ceiling(PG, figure(3.0), workers_now=4)
    assert (ceiling.workers, ceiling.source, ceiling.note) == (
        7,
        FigureSource.LIVE,
        "live: 37 slots, 20 free",
    )


def test_free_slots_alone_add_to_the_workers_that_run() -> None:
    reading = Headroom(free=9, usable=None, detail="test")
    assert dependency_ceiling(CACHE, figure(1.0, reading=reading), workers_now=4).workers == 8
    # none known to run: the free slots alone (never more)
    assert dependency_ceiling(CACHE, figure(1.0, reading=reading), workers_now=None).workers == 4


def test_a_failing_probe_keeps_its_last_good_reading_for_a_while() -> None:
    ceiling = dependency_ceiling(PG, figure(STALE_AFTER, "postgres: refused"), workers_now=2)
    assert (ceiling.workers, ceiling.source) == (7, FigureSource.LAST_GOOD)
    assert (
        ceiling.note
        == "probe failing (postgres: refused); last good reading, 300s old: 37 slots, 20 free"
    )


def test_then_falls_back_to_the_static_limit() -> None:
    stale = figure(STALE_AFTER + 1, "postgres: refused")
    ceiling = dependency_ceiling(PG_FALLBACK, stale, workers_now=2)
    assert (ceiling.workers, ceiling.source) == (20, FigureSource.FALLBACK)
    assert (
        ceiling.note
        == "probe's last good reading is 301s old (postgres: refused); static fallback 100"
    )


def test_else_holds_the_workers_that_run() -> None:
    ceiling = dependency_ceiling(PG, figure(None, "postgres: refused", None), workers_now=3)
    assert (ceiling.workers, ceiling.source) == (3, FigureSource.HOLD)
    assert (
        ceiling.note
        == "probe has no reading (postgres: refused), no static fallback: holding the 3 workers that run"
    )
    unknown = dependency_ceiling(PG, None, workers_now=None)
    assert (unknown.workers, unknown.source) == (None, FigureSource.HOLD)


def test_the_smallest_limit_sets_the_trigger_ceiling() -> None:
    spec = spec_of("postgres=probe:orders-pg/5,api=10/1", maxWorkers="9")
    ceiling = trigger_ceiling(spec, {"orders-pg": figure(1.0)}, workers_now=2)
    assert (ceiling.workers, ceiling.limited_by) == (7, "postgres")
    assert [(c.name, c.workers, str(c.source)) for c in ceiling.each] == [
        ("maxWorkers", 9, "static"), ("postgres", 7, "live"), ("api", 10, "static"),
    ]  # fmt: skip
    unknown = trigger_ceiling(spec, {}, workers_now=None)
    assert unknown.workers is None
    assert unknown.unknown is not None and "dependency 'postgres' is unknown" in unknown.unknown


# -- in the policy ----------------------------------------------------------------------------


def test_the_decision_says_where_the_ceiling_comes_from() -> None:
    spec = spec_of("postgres=probe:orders-pg/5", workerThroughput="1")
    signals = signals_of(depth=6000, consumers=4, age=30.0, arrivals=0.0, completions=4.0)
    decision, _ = decide(signals, spec, NOW, PolicyState(), {"orders-pg": figure(2.0)})
    assert (decision.desired_workers, decision.reason) == (7, Reason.CLAMPED)
    assert decision.reason_text == "clamped by postgres (live: 37 slots, 20 free)"
    assert decision.reason_label == "clamped by postgres"
    assert decision.ceiling_warnings == ()

    # the probe fails past STALE_AFTER, no fallback: hold the 4 workers the broker shows
    stale = figure(STALE_AFTER + 5, "postgres: refused")
    decision, _ = decide(signals, spec, NOW, PolicyState(), {"orders-pg": stale})
    assert (decision.desired_workers, decision.ceiling) == (4, 4)
    assert decision.ceiling_warnings == (
        "postgres: probe's last good reading is 305s old (postgres: refused), no static "
        "fallback: holding the 4 workers that run",
    )


def test_no_answer_when_the_ceiling_is_unknown() -> None:
    spec = spec_of("postgres=probe:orders-pg/5", workerThroughput="1", format="sidekiq")
    signals = signals_of(depth=60, age=30.0, arrivals=0.0, completions=1.0)
    decision, state = decide(signals, spec, NOW, PolicyState(), {})
    assert decision.metric_value is None
    assert decision.ceiling_unknown is not None
    assert state.last_desired is None  # no answer given: nothing to hold on to later
    # once an answer was given, it is what is held
    decision, _ = decide(signals, spec, NOW, PolicyState(last_desired=2), {})
    assert (decision.desired_workers, decision.metric_value) == (1, 1.0)


def test_metrics_keep_one_series_per_dependency_under_its_current_source() -> None:
    metrics = Metrics()
    spec = spec_of("postgres=probe:orders-pg|100/5", workerThroughput="1")
    signals = signals_of(depth=6000, consumers=4, age=30.0, arrivals=0.0, completions=4.0)
    labels = {"namespace": "shop", "scaled_object": "orders", "queue": "q", "metric": "workers"}

    def value(source: str) -> float | None:
        return metrics.registry.get_sample_value(
            "queue_age_scaler_dependency_ceiling_workers",
            labels | {"dependency": "postgres", "source": source},
        )

    live, _ = decide(signals, spec, NOW, PolicyState(), {"orders-pg": figure(2.0)})
    metrics.record_decision("shop", "orders", spec, signals, live)
    assert value("live") == 7
    stale = figure(STALE_AFTER + 1, "postgres: refused")
    fallback, _ = decide(signals, spec, NOW, PolicyState(), {"orders-pg": stale})
    metrics.record_decision("shop", "orders", spec, signals, fallback)
    assert (value("live"), value("fallback")) == (None, 20)
    assert metrics.registry.get_sample_value(
        "queue_age_scaler_decision", labels | {"reason": "clamped by postgres"}
    ) == 1  # fmt: skip
    metrics.forget_trigger(Metrics.trigger_labels("shop", "orders", spec))
    assert value("fallback") is None

    metrics.record_probe("orders-pg", "postgres", READING, lambda: 4.0)
    probe = {"dependency": "orders-pg", "probe": "postgres"}
    slots = "queue_age_scaler_dependency_slots"
    assert metrics.registry.get_sample_value(slots, probe | {"figure": "usable"}) == 37
    assert metrics.registry.get_sample_value(
        "queue_age_scaler_dependency_reading_age_seconds", probe
    ) == 4.0  # fmt: skip
    metrics.forget_probe("orders-pg", "postgres")
    assert metrics.registry.get_sample_value(slots, probe | {"figure": "usable"}) is None


def test_a_probe_error_never_holds_the_urls_secrets() -> None:
    url = "https://user:p%40ss@api.example/quota?api_key=k3y-123&region=eu"
    error = probe_failed("http", f"InvalidURL: {url} and p@ss and k3y-123", url)
    assert str(error) == "http: InvalidURL: <hidden> and <hidden> and <hidden>"


async def test_a_redis_url_redis_py_refuses_fails_the_probe_without_its_password() -> None:
    with pytest.raises(ProbeFailed) as raised:
        await redis.read("redis://:s3cret@localhost:notaport/0", 1.0)
    assert "s3cret" not in str(raised.value) and str(raised.value).startswith("redis: ")


def test_the_probe_table_shows_each_dependency_on_a_line() -> None:
    table = render_table(
        {
            "ceiling": 10,
            "dependencies": [
                {"name": "postgres", "ceiling": 19, "source": "live", "per_worker": 5.0,
                 "limit": None, "note": "live: 97 slots, 97 free"},
                {"name": "cache", "ceiling": 10, "source": "static", "per_worker": 3.0,
                 "limit": 30.0},
            ],
            "warnings": [],
        }
    )  # fmt: skip
    assert table.splitlines() == [
        "ceiling       10",
        "dependencies  postgres: 19 workers, live (live: 97 slots, 97 free)",
        "              cache: 10 workers, static (30/3)",
        "warnings      none",
    ]


def test_a_probe_profile_scoped_to_namespaces_is_refused_elsewhere() -> None:
    profiles = {"orders-pg": Profile("orders-pg", PG_URL, namespaces=("shop", "team-*"))}
    metadata = {"url": "redis://localhost", "queue": "q", "format": "rq",
                "dependencies": "postgres=probe:orders-pg/5"}  # fmt: skip
    for allowed in ("shop", "team-a"):
        (dep,) = parse_metadata(metadata, profiles, namespace=allowed).dependencies
        assert dep.probe_url == PG_URL
    with pytest.raises(PermissionDenied) as raised:
        parse_metadata(metadata, profiles, namespace="billing")
    assert str(raised.value) == (
        "dependencies: probe:orders-pg: connection profile 'orders-pg' may not be used from "
        "namespace 'billing': the profile's namespaces do not include it (ask the scaler's operator)"
    )
