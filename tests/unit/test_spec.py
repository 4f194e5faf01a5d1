"""Trigger metadata -> TriggerSpec, and every way metadata can be wrong."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

import pytest
from redis.asyncio.connection import ConnectionPool

from brokers.base import QueueSource
from brokers.formats import End
from brokers.redis_options import CeleryLayout, ListLayout
from scaler.errors import InvalidMetadata
from scaler.spec import parse_metadata
from scaler.trigger_spec import Dependency, Metric, TriggerSpec

URL = "redis://localhost:6379/0"
SECRET = "hunter2"
SECRET_URL = f"redis://:{SECRET}@redis.internal:6379/0"


def _source(queue: str, fmt: str, prefix: str, end: End, url: str = URL) -> QueueSource:
    return QueueSource(
        broker="redis", url=url, queue=queue, format=fmt, options=ListLayout(prefix, end)
    )


def _invalid(
    metadata: Mapping[str, str], profiles: Mapping[str, str] | None = None
) -> InvalidMetadata:
    with pytest.raises(InvalidMetadata) as info:
        parse_metadata(metadata, profiles)
    return info.value


# --- valid triggers ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        pytest.param(
            {"url": URL, "queue": "default", "format": "sidekiq", "workerThroughput": "5"},
            TriggerSpec(source=_source("default", "sidekiq", "", End.TAIL), worker_throughput=5.0),
            id="sidekiq",
        ),
        pytest.param(
            {"url": URL, "queue": "high", "format": "rq"},
            TriggerSpec(source=_source("high", "rq", "rq", End.HEAD)),
            id="rq without capacity keys",
        ),
        pytest.param(
            {"url": URL, "queue": "emails", "format": "bullmq", "workerThroughput": "2.5"},
            TriggerSpec(
                source=_source("emails", "bullmq", "bull", End.TAIL), worker_throughput=2.5
            ),
            id="bullmq",
        ),
        pytest.param(
            {"url": URL, "queue": "default", "format": "dramatiq", "jobDuration": "500ms"},
            TriggerSpec(
                source=_source("default", "dramatiq", "dramatiq", End.HEAD), worker_throughput=2.0
            ),
            id="dramatiq with jobDuration",
        ),
        pytest.param(
            {"url": URL, "queue": "jobs", "workerThroughput": "1"},
            TriggerSpec(source=_source("jobs", "list", "", End.TAIL), worker_throughput=1.0),
            id="list is the redis default",
        ),
        pytest.param(
            {
                "url": URL,
                "queue": "jobs",
                "format": "list",
                "keyPrefix": "app:",
                "timestampField": "created_at",
                "timestampUnit": "ms",
                "oldestEnd": "head",
                "workerThroughput": "1",
            },
            TriggerSpec(
                source=QueueSource(
                    broker="redis",
                    url=URL,
                    queue="jobs",
                    format="list",
                    options=ListLayout("app:", End.HEAD, "created_at", "ms"),
                ),
                worker_throughput=1.0,
            ),
            id="list with its layout keys",
        ),
        pytest.param(
            {
                "url": URL,
                "queue": "default",
                "format": "sidekiq",
                "keyPrefix": "myapp:",
                "workerThroughput": "1",
            },
            TriggerSpec(
                source=_source("default", "sidekiq", "myapp:", End.TAIL), worker_throughput=1.0
            ),
            id="sidekiq accepts keyPrefix",
        ),
        pytest.param(
            {
                "url": "rediss://redis.example:6380",
                "broker": "redis",
                "queue": "q",
                "format": "rq",
                "metric": "age",
                "targetAge": "2m",
                "targetDrainTime": "5m",
                "workerThroughput": "4",
                "workerConcurrency": "8",
                "minWorkers": "1",
                "maxWorkers": "30",
                "dependencies": "postgres=100/5",
                "activationAge": "10s",
                "activationDepth": "3",
                "rateWindow": "2m",
                "sampleInterval": "2s",
            },
            TriggerSpec(
                source=_source("q", "rq", "rq", End.HEAD, url="rediss://redis.example:6380"),
                metric=Metric.AGE,
                target_age=120.0,
                target_drain_time=300.0,
                worker_throughput=4.0,
                worker_concurrency=8,
                min_workers=1,
                max_workers=30,
                dependencies=(Dependency("postgres", 100.0, 5.0),),
                activation_age=10.0,
                activation_depth=3,
                rate_window=120.0,
                sample_interval=2.0,
            ),
            id="rq with every key set",
        ),
    ],
)
def test_valid_trigger(metadata: dict[str, str], expected: TriggerSpec) -> None:
    assert parse_metadata(metadata) == expected


def test_defaults() -> None:
    spec = parse_metadata({"url": URL, "queue": "q", "format": "rq"})
    assert spec.metric is Metric.WORKERS
    assert spec.target_age == 60.0
    assert spec.target_drain_time == 60.0
    assert spec.rate_window == 60.0
    assert spec.sample_interval == 1.0
    assert spec.min_workers == 0
    assert spec.max_workers is None
    assert spec.dependencies == ()
    assert spec.activation_age == 0.0
    assert spec.activation_depth == 0
    assert spec.worker_throughput is None
    assert spec.ceiling == (None, "maxWorkers")


def test_target_drain_time_defaults_to_target_age() -> None:
    spec = parse_metadata({"url": URL, "queue": "q", "format": "rq", "targetAge": "90s"})
    assert spec.target_age == 90.0
    assert spec.target_drain_time == 90.0


def test_spec_is_frozen() -> None:
    spec = parse_metadata({"url": URL, "queue": "q", "format": "rq"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.target_age = 1.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.source.queue = "other"  # type: ignore[misc]


def test_keda_own_keys_are_accepted_and_ignored() -> None:
    plain = {"url": URL, "queue": "q", "format": "rq"}
    with_keda = plain | {
        "scalerAddress": "queue-age-scaler.keda:6000",
        "enableTLS": "false",
        "unsafeSsl": "true",
    }
    assert parse_metadata(with_keda) == parse_metadata(plain)


def test_from_env_forms_are_accepted() -> None:
    plain = parse_metadata({"url": URL, "queue": "q", "format": "rq"})
    from_env = parse_metadata({"urlFromEnv": URL, "queueFromEnv": "q", "format": "rq"})
    assert from_env == plain


@pytest.mark.parametrize(
    ("metadata", "key"),
    [
        pytest.param(
            {"url": URL, "urlFromEnv": URL, "queue": "q", "format": "rq"}, "url", id="url"
        ),
        pytest.param(
            {"url": URL, "queue": "q", "queueFromEnv": "q", "format": "rq"}, "queue", id="queue"
        ),
    ],
)
def test_plain_and_from_env_forms_at_once_are_refused(metadata: dict[str, str], key: str) -> None:
    err = _invalid(metadata)
    assert f"{key!r}" in str(err)
    assert f"{key + 'FromEnv'!r}" in str(err)
    assert "set only one" in str(err)


# --- connection profiles -------------------------------------------------------------------------

PROFILES = {"main": SECRET_URL, "reports": "redis://reports:6379/1"}


def test_connection_profile_resolves_to_its_url() -> None:
    spec = parse_metadata({"connection": "main", "queue": "q", "format": "rq"}, PROFILES)
    assert spec.source.url == SECRET_URL
    assert spec.source.broker == "redis"
    assert SECRET not in repr(spec)


def test_unknown_connection_profile_names_no_other_profile_and_no_url() -> None:
    err = _invalid({"connection": "backup", "queue": "q", "format": "rq"}, profiles=PROFILES)
    message = str(err)
    assert err.key == "connection"
    assert message.startswith(
        "connection: got 'backup'; the scaler has no such connection profile."
    )
    assert "QUEUE_AGE_SCALER_CONNECTION_<NAME>" in message and "--connections-dir" in message
    assert "main" not in message
    assert "reports" not in message
    assert SECRET not in message
    assert "redis://" not in message
    # the same answer whether profiles exist or not
    none = _invalid({"connection": "backup", "queue": "q", "format": "rq"})
    assert str(none) == message


@pytest.mark.parametrize("key", ["url", "urlFromEnv"])
def test_url_beside_a_connection_is_refused_as_the_profiles(key: str) -> None:
    err = _invalid({"connection": "main", key: URL, "queue": "q"}, profiles=PROFILES)
    assert err.key == "url"
    assert "belongs in the connection profile" in str(err)


# --- capacity, ceiling, metric -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "throughput", "concurrency"),
    [
        pytest.param({"workerThroughput": "3.5"}, 3.5, None, id="workerThroughput"),
        pytest.param({"jobDuration": "2s", "workerConcurrency": "4"}, 2.0, 4, id="2s x 4"),
        pytest.param({"jobDuration": "250ms"}, 4.0, None, id="jobDuration alone"),
        pytest.param({}, None, None, id="rq may omit capacity"),
    ],
)
def test_capacity(extra: dict[str, str], throughput: float | None, concurrency: int | None) -> None:
    spec = parse_metadata({"url": URL, "queue": "q", "format": "rq"} | extra)
    assert spec.worker_throughput == pytest.approx(throughput)
    assert spec.worker_concurrency == concurrency


@pytest.mark.parametrize(
    ("dependencies", "max_workers", "ceiling"),
    [
        pytest.param("postgres=100/5,payments-api=20/2", None, (10, "payments-api"), id="two"),
        pytest.param("postgres=100/5", None, (20, "postgres"), id="one"),
        pytest.param("postgres=100/5", 12, (12, "maxWorkers"), id="maxWorkers lower"),
        pytest.param("postgres=100/5", 20, (20, "maxWorkers"), id="tie keeps maxWorkers"),
        pytest.param("postgres=100/5", 40, (20, "postgres"), id="dependency lower"),
        pytest.param("api=10/3", None, (3, "api"), id="rounds down"),
        pytest.param("pool=0.6/0.2", None, (3, "pool"), id="fractions without float error"),
        pytest.param(" redis_pool=50/10 , s3.quota=7/1 ", None, (5, "redis_pool"), id="blanks"),
    ],
)
def test_dependencies_ceiling(
    dependencies: str, max_workers: int | None, ceiling: tuple[int, str]
) -> None:
    metadata = {"url": URL, "queue": "q", "format": "rq", "dependencies": dependencies}
    if max_workers is not None:
        metadata["maxWorkers"] = str(max_workers)
    assert parse_metadata(metadata).ceiling == ceiling


def test_dependencies_are_parsed_in_order() -> None:
    spec = parse_metadata(
        {
            "url": URL,
            "queue": "q",
            "format": "rq",
            "dependencies": "postgres=100/5,payments-api=20/2",
        }
    )
    assert spec.dependencies == (
        Dependency("postgres", 100.0, 5.0),
        Dependency("payments-api", 20.0, 2.0),
    )
    assert [d.max_workers for d in spec.dependencies] == [20, 10]


def test_metric_age_on_rq_with_ceiling_is_allowed() -> None:
    spec = parse_metadata(
        {"url": URL, "queue": "q", "format": "rq", "metric": "age", "maxWorkers": "10"}
    )
    assert spec.metric is Metric.AGE
    assert spec.ceiling == (10, "maxWorkers")


def test_metric_name_is_stable_and_keda_safe() -> None:
    metadata = {"url": URL, "queue": "Orders.High", "format": "rq", "metric": "drainTime"}
    name = parse_metadata(metadata).metric_name
    assert name == parse_metadata(dict(metadata)).metric_name
    assert re.fullmatch(r"[a-z0-9-]+", name), name
    assert name == "queue-age-drain-time-orders-high"


@pytest.mark.parametrize(
    ("queue", "metric", "name"),
    [
        pytest.param("default", "workers", "queue-age-workers-default", id="workers"),
        pytest.param("default", "age", "queue-age-age-default", id="age"),
        pytest.param("mail:out/EU", "workers", "queue-age-workers-mail-out-eu", id="punctuation"),
        pytest.param("émails", "workers", "queue-age-workers-mails", id="non-ascii dropped"),
        pytest.param("::", "workers", "queue-age-workers-queue", id="nothing left"),
    ],
)
def test_metric_name(queue: str, metric: str, name: str) -> None:
    spec = parse_metadata({"url": URL, "queue": queue, "format": "rq", "metric": metric})
    assert spec.metric_name == name
    assert re.fullmatch(r"[a-z0-9-]+", spec.metric_name)


def test_metric_name_is_bounded() -> None:
    spec = parse_metadata({"url": URL, "queue": "q" * 500, "format": "rq"})
    assert len(spec.metric_name) <= 200
    assert re.fullmatch(r"[a-z0-9-]+", spec.metric_name)


@pytest.mark.parametrize(
    ("metric", "target"),
    [
        pytest.param("workers", 1.0, id="workers"),
        pytest.param("age", 90.0, id="age -> targetAge"),
        pytest.param("drainTime", 120.0, id="drainTime -> targetDrainTime"),
    ],
)
def test_metric_target(metric: str, target: float) -> None:
    spec = parse_metadata(
        {
            "url": URL,
            "queue": "q",
            "format": "rq",
            "metric": metric,
            "targetAge": "90s",
            "targetDrainTime": "2m",
        }
    )
    assert spec.metric_target == target


# --- errors --------------------------------------------------------------------------------------

RQ = {"url": URL, "queue": "q", "format": "rq"}
SIDEKIQ = {"url": URL, "queue": "q", "format": "sidekiq", "workerThroughput": "1"}
#: a format that shows no workers (Celery over Redis keeps no record of them)
CELERY = {"url": URL, "queue": "q", "format": "celery", "workerThroughput": "1"}


@pytest.mark.parametrize(
    ("metadata", "key", "fragments"),
    [
        pytest.param(
            RQ | {"tragetAge": "60s"},
            "tragetAge",
            ["unknown key", "'60s'", "did you mean 'targetAge'"],
            id="unknown key with typo hint",
        ),
        pytest.param(
            RQ | {"worker_through-put": "1"},
            "worker_through-put",
            ["unknown key", "did you mean 'workerThroughput'"],
            id="typo hint for a key with separators",
        ),
        pytest.param(
            RQ | {"targetAge": "soon"},
            "targetAge",
            ["'soon'", "a duration such as 30, 500ms, 90s, 5m or 1h"],
            id="bad duration",
        ),
        pytest.param(
            RQ | {"targetAge": "0"}, "targetAge", ["'0'", "above zero"], id="zero targetAge"
        ),
        pytest.param(
            RQ | {"targetDrainTime": "-5m"},
            "targetDrainTime",
            ["'-5m'", "duration"],
            id="negative targetDrainTime",
        ),
        pytest.param(
            RQ | {"rateWindow": "5x"}, "rateWindow", ["'5x'", "duration"], id="bad rateWindow"
        ),
        pytest.param(
            RQ | {"maxWorkers": "ten"},
            "maxWorkers",
            ["'ten'", "a whole number, at least 1"],
            id="bad integer",
        ),
        pytest.param(
            RQ | {"maxWorkers": "2.5"},
            "maxWorkers",
            ["'2.5'", "a whole number"],
            id="fractional integer",
        ),
        pytest.param(
            RQ | {"maxWorkers": "0"}, "maxWorkers", ["'0'", "at least 1"], id="maxWorkers 0"
        ),
        pytest.param(
            RQ | {"minWorkers": "-1"}, "minWorkers", ["'-1'", "at least 0"], id="negative min"
        ),
        pytest.param(
            RQ | {"activationDepth": "many"},
            "activationDepth",
            ["'many'", "whole number"],
            id="bad activationDepth",
        ),
        pytest.param(
            RQ | {"minWorkers": "5", "maxWorkers": "3"},
            "minWorkers",
            ["got 5", "at most maxWorkers (3)"],
            id="minWorkers above maxWorkers",
        ),
        pytest.param(
            RQ | {"minWorkers": "25", "dependencies": "postgres=100/5"},
            "minWorkers",
            ["got 25", "'postgres'", "at most 20"],
            id="minWorkers above dependency ceiling",
        ),
        pytest.param(
            RQ | {"workerThroughput": "fast"},
            "workerThroughput",
            ["'fast'", "a number above zero"],
            id="throughput not a number",
        ),
        pytest.param(
            RQ | {"workerThroughput": "0"},
            "workerThroughput",
            ["'0'", "above zero"],
            id="throughput zero",
        ),
        pytest.param(
            RQ | {"workerThroughput": "nan"},
            "workerThroughput",
            ["'nan'", "above zero"],
            id="throughput nan",
        ),
        pytest.param(
            RQ | {"workerThroughput": "inf"},
            "workerThroughput",
            ["'inf'", "above zero"],
            id="throughput inf",
        ),
        pytest.param(
            RQ | {"workerThroughput": "2", "jobDuration": "1s"},
            "jobDuration",
            ["workerThroughput", "jobDuration", "set one"],
            id="throughput and jobDuration",
        ),
        pytest.param(
            RQ | {"jobDuration": "0s"}, "jobDuration", ["'0s'", "above zero"], id="jobDuration 0"
        ),
        pytest.param(
            RQ | {"jobDuration": "2s", "workerConcurrency": "0"},
            "workerConcurrency",
            ["'0'", "at least 1"],
            id="workerConcurrency 0",
        ),
        pytest.param(
            RQ | {"metric": "latency"},
            "metric",
            ["'latency'", "one of workers, age, drainTime"],
            id="unknown metric",
        ),
        pytest.param(
            RQ | {"rateWindow": "1s"},
            "rateWindow",
            ["'1s'", "at least two sampleIntervals (2s)"],
            id="rateWindow shorter than two samples",
        ),
        pytest.param(
            RQ | {"rateWindow": "10s", "sampleInterval": "6s"},
            "rateWindow",
            ["'10s'", "(12s)"],
            id="rateWindow shorter than two custom samples",
        ),
        pytest.param(
            {"url": URL, "format": "rq"},
            "queue",
            ["missing", "queue name"],
            id="missing queue",
        ),
        pytest.param(
            {"url": URL, "queue": "  ", "format": "rq"}, "queue", ["missing"], id="blank queue"
        ),
        pytest.param(
            {"queue": "q", "format": "rq"},
            "url",
            ["missing", "connection", "urlFromEnv"],
            id="missing url",
        ),
        pytest.param(
            {"url": "http://localhost:6379", "queue": "q"},
            "url",
            ["scheme 'http'", "redis://"],
            id="unknown scheme",
        ),
        pytest.param(
            {"url": "localhost:6379", "queue": "q"},
            "url",
            ["not known", "redis://"],
            id="no scheme",
        ),
        pytest.param(
            {"url": URL, "broker": "rabbitmq", "queue": "q"},
            "broker",
            ["'rabbitmq'", "redis://"],
            id="broker does not match url",
        ),
        pytest.param(
            {"url": URL, "broker": "kafka", "queue": "q"},
            "broker",
            ["'kafka'", "redis or rabbitmq"],
            id="unknown broker",
        ),
        pytest.param(
            {"url": "amqp://guest@rabbit:5672/?verify=verify_none", "queue": "q"},
            "url",
            ["TLS options need amqps://"],
            id="TLS options on plain amqp",
        ),
        pytest.param(
            {"url": "amqps://guest@rabbit/?heartbeat=5", "queue": "q"},
            "url",
            ["unknown query parameter", "heartbeat", "cacertfile"],
            id="unknown amqp query parameter",
        ),
        pytest.param(
            {"url": "amqps://guest@rabbit/?verify=maybe", "queue": "q"},
            "url",
            ["'maybe'", "verify_peer or verify_none"],
            id="bad verify",
        ),
        pytest.param(
            {"url": "amqp://guest@rabbit/", "queue": "q", "managementUrl": "rabbit:15672"},
            "managementUrl",
            ["not http or https"],
            id="managementUrl without a scheme",
        ),
        pytest.param(
            {"url": URL, "queue": "events", "format": "stream", "workerThroughput": "1"},
            "consumerGroup",
            ["missing", "format stream needs the consumer group"],
            id="stream without a consumer group",
        ),
        pytest.param(
            {"url": URL, "queue": "q", "format": "sidekik"},
            "format",
            ["'sidekik'", "did you mean 'sidekiq'"],
            id="format typo",
        ),
        pytest.param(
            SIDEKIQ | {"timestampField": "enqueued_at"},
            "timestampField",
            ["does not apply to format sidekiq", "applies to format list"],
            id="timestampField only for list",
        ),
        pytest.param(
            RQ | {"oldestEnd": "head"},
            "oldestEnd",
            ["does not apply to format rq", "applies to format list"],
            id="oldestEnd only for list",
        ),
        pytest.param(
            {"url": URL, "queue": "q", "consumerGroup": "workers", "workerThroughput": "1"},
            "consumerGroup",
            ["does not apply to format list"],
            id="consumerGroup not for list",
        ),
        pytest.param(
            {"url": URL, "queue": "q", "timestampUnit": "days", "workerThroughput": "1"},
            "timestampUnit",
            ["'days'", "auto, s, ms, iso"],
            id="bad timestampUnit",
        ),
        pytest.param(
            {"url": URL, "queue": "q", "oldestEnd": "middle", "workerThroughput": "1"},
            "oldestEnd",
            ["'middle'", "head, tail"],
            id="bad oldestEnd",
        ),
        pytest.param(
            CELERY | {"metric": "age", "maxWorkers": "10"},
            "metric",
            ["metric age", "maxWorkers", "celery", "metric workers", "maxReplicaCount"],
            id="metric age with ceiling on celery",
        ),
        pytest.param(
            CELERY | {"metric": "drainTime", "dependencies": "postgres=100/5"},
            "metric",
            ["metric drainTime", "postgres", "metric workers"],
            id="metric drainTime with dependency on celery",
        ),
        pytest.param(
            {"url": URL, "queue": "q", "format": "celery"},
            "workerThroughput",
            ["missing", "celery", "workerThroughput", "jobDuration", "workerConcurrency"],
            id="celery without capacity",
        ),
        pytest.param(
            {"url": URL, "queue": "q", "format": "huey"},
            "workerThroughput",
            ["missing", "huey", "jobDuration"],
            id="huey without capacity",
        ),
    ],
)
def test_invalid_metadata(metadata: dict[str, str], key: str, fragments: list[str]) -> None:
    err = _invalid(metadata)
    assert err.key == key
    message = str(err)
    assert message.startswith(f"{key}: ")
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def test_no_typo_hint_for_what_is_no_word_but_the_valid_keys() -> None:
    message = str(_invalid(RQ | {"target Age\x00": "60s"}))
    assert "did you mean" not in message and "Valid keys: activationAge" in message
    assert "did you mean 'targetAge'" in str(_invalid(RQ | {"target-age": "60s"}))


@pytest.mark.parametrize(
    ("dependencies", "fragments"),
    [
        pytest.param("postgres", ["'postgres'", "NAME=LIMIT/PER_WORKER"], id="no limit"),
        pytest.param("postgres=100", ["'postgres=100'", "NAME=LIMIT/PER_WORKER"], id="no slash"),
        pytest.param("postgres=100/", ["'postgres=100/'"], id="no per-worker"),
        pytest.param("=100/5", ["'=100/5'"], id="no name"),
        pytest.param("postgres=a/5", ["'postgres=a/5'"], id="limit not a number"),
        pytest.param("postgres=1..0/5", ["'postgres=1..0/5'"], id="limit malformed number"),
        pytest.param("postgres=-100/5", ["'postgres=-100/5'"], id="negative limit"),
        pytest.param("postgres=100/5,", ["''"], id="trailing comma"),
        pytest.param("postgres=100/0", ["'postgres=100/0'", "above zero"], id="per-worker 0"),
        pytest.param("postgres=0/5", ["'postgres=0/5'", "above zero"], id="limit 0"),
        pytest.param(
            "postgres=100/5,api=4/5", ["'api=4/5'", "allows no worker"], id="allows 0 workers"
        ),
        pytest.param(
            "postgres=100/5,postgres=50/5",
            ["'postgres'", "appears twice"],
            id="duplicate name",
        ),
    ],
)
def test_bad_dependencies(dependencies: str, fragments: list[str]) -> None:
    err = _invalid(RQ | {"dependencies": dependencies})
    assert err.key == "dependencies"
    for fragment in fragments:
        assert fragment in str(err), f"{fragment!r} not in {str(err)!r}"


@pytest.mark.parametrize(
    "metadata",
    [
        pytest.param({"url": SECRET_URL, "format": "rq"}, id="missing queue"),
        pytest.param({"url": SECRET_URL, "queue": "q", "format": "stream"}, id="no consumer group"),
        pytest.param({"url": SECRET_URL, "queue": "q", "broker": "rabbitmq"}, id="mismatch"),
        pytest.param({"url": SECRET_URL, "queue": "q", "broker": "kafka"}, id="bad broker"),
        pytest.param({"url": SECRET_URL, "urlFromEnv": SECRET_URL, "queue": "q"}, id="both"),
        pytest.param({"url": SECRET_URL, "queue": "q", "format": "celery"}, id="no capacity"),
        pytest.param({"url": f"http://:{SECRET}@redis:6379", "queue": "q"}, id="unknown scheme"),
        pytest.param(
            {"url": f"amqp://guest:{SECRET}@rabbit:5672/?keyfile=k", "queue": "q"}, id="rabbitmq"
        ),
        pytest.param(
            {"url": f"amqp://guest:{SECRET}@rabbit/", "managementUrl": f"ftp://a:{SECRET}@m"},
            id="bad managementUrl",
        ),
        pytest.param(
            {"url": SECRET_URL, "managementUrl": f"http://admin:{SECRET}@rabbit:15672"},
            id="managementUrl not applying",
        ),
        pytest.param({"urll": SECRET_URL, "queue": "q"}, id="typo of url"),
        pytest.param({"urlFromEnvironment": SECRET_URL, "queue": "q"}, id="typo of urlFromEnv"),
        pytest.param({"uri": SECRET_URL, "queue": "q", "format": "rq"}, id="uri instead of url"),
        pytest.param(
            {"connection": SECRET_URL, "queue": "q", "format": "rq"},
            id="url given as connection",
        ),
    ],
)
def test_password_never_appears_in_errors(metadata: dict[str, str]) -> None:
    err = _invalid(metadata, profiles={"main": SECRET_URL})
    assert SECRET not in str(err)
    assert SECRET not in repr(err)
    assert all(SECRET not in str(arg) for arg in err.args)


def test_known_scheme_is_required_even_when_broker_is_set() -> None:
    # broker=redis must not make an http:// URL acceptable: the redis client cannot use it
    err = _invalid(
        {"url": "http://localhost:6379", "broker": "redis", "queue": "q", "format": "rq"}
    )
    assert err.key == "url"
    assert "'http'" in str(err)


def test_malformed_url_is_invalid_metadata() -> None:
    # urlsplit raises ValueError on an unclosed IPv6 bracket; callers expect InvalidMetadata
    err = _invalid({"url": f"redis://:{SECRET}@[::1:6379", "queue": "q", "format": "rq"})
    assert err.key == "url"
    assert SECRET not in str(err)


def test_rate_window_error_shows_the_value_in_force() -> None:
    # rateWindow left at its default (60s) and a sampleInterval of 40s: the message must not
    # say the value was None
    err = _invalid(RQ | {"sampleInterval": "40s"})
    assert err.key == "rateWindow"
    assert "None" not in str(err)
    assert "60" in str(err)


def test_a_trigger_may_bound_its_queues_slow_interval_within_sampleinterval_and_ten_minutes() -> (
    None
):
    assert parse_metadata(RQ).slow_sample_interval is None  # the server's
    assert parse_metadata(RQ | {"slowSampleInterval": "5s"}).slow_sample_interval == 5.0
    assert parse_metadata(RQ | {"slowSampleInterval": "10m"}).slow_sample_interval == 600.0
    for value, shown in (("500ms", "at least sampleInterval (1s)"), ("11m", "at most 600s")):
        err = _invalid(RQ | {"slowSampleInterval": value})
        assert err.key == "slowSampleInterval" and shown in str(err), str(err)
    assert _invalid(RQ | {"slowSampleInterval": "soon"}).key == "slowSampleInterval"


# --- kombu's priority steps and separator (format celery) ----------------------------------------

CELERY = {"url": URL, "queue": "celery", "format": "celery", "workerThroughput": "1"}
CELERY_DOCS_STEPS = tuple(range(10))  # Celery's recipe: priority_steps=list(range(10))


def test_celery_defaults_are_kombus_priority_steps_and_sep() -> None:
    source = parse_metadata(CELERY).source
    assert source.options_as(CeleryLayout).priority_steps == (0, 3, 6, 9)
    assert source.options_as(CeleryLayout).priority_separator == "\x06\x16"


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        pytest.param("0,1,2,3,4,5,6,7,8,9", CELERY_DOCS_STEPS, id="list(range(10)) spelt out"),
        pytest.param("0-9", CELERY_DOCS_STEPS, id="range"),
        pytest.param(" 0 - 9 ", CELERY_DOCS_STEPS, id="range with blanks"),
        pytest.param("0,3,6,9", (0, 3, 6, 9), id="kombu's default spelt out"),
        pytest.param("9, 0 ,3", (0, 3, 9), id="sorted"),
        pytest.param("0-2,5,7-8", (0, 1, 2, 5, 7, 8), id="ranges and steps mixed"),
        pytest.param("4", (4,), id="one step"),
        pytest.param("5-5", (5,), id="one-step range"),
        pytest.param("0,10,255", (0, 10, 255), id="above 9"),
    ],
)
def test_priority_steps(steps: str, expected: tuple[int, ...]) -> None:
    assert (
        parse_metadata(CELERY | {"prioritySteps": steps})
        .source.options_as(CeleryLayout)
        .priority_steps
        == expected
    )


@pytest.mark.parametrize(
    ("separator", "expected"),
    [
        pytest.param(":", ":", id="Celery's recipe"),
        pytest.param("\x06\x16", "\x06\x16", id="kombu's default"),
        pytest.param(" | ", " | ", id="taken as is, blanks included"),
    ],
)
def test_priority_separator(separator: str, expected: str) -> None:
    source = parse_metadata(CELERY | {"prioritySeparator": separator}).source
    assert source.options_as(CeleryLayout).priority_separator == expected


def test_celery_docs_recipe_as_trigger_metadata() -> None:
    recipe = CELERY | {"prioritySteps": "0-9", "prioritySeparator": ":", "keyPrefix": "app1:"}
    source = parse_metadata(recipe).source
    assert (
        source.options_as(CeleryLayout).priority_steps,
        source.options_as(CeleryLayout).priority_separator,
    ) == (CELERY_DOCS_STEPS, ":")
    assert source.options_as(CeleryLayout).key_prefix == "app1:"
    # part of the sampler's identity: a queue read with other steps is another source
    assert source != parse_metadata(CELERY | {"keyPrefix": "app1:"}).source
    env = parse_metadata(
        CELERY
        | {"prioritySeparatorFromEnv": ":", "priorityStepsFromEnv": "0-9", "keyPrefix": "app1:"}
    )
    assert env.source == source


@pytest.mark.parametrize(
    ("steps", "fragments"),
    [
        pytest.param("0,3,x", ["'0,3,x'", "'x' is neither", "0,3,6,9", "0-9"], id="not a number"),
        pytest.param("-1,3", ["'-1,3'", "'-1' is neither", "at least 0"], id="negative"),
        pytest.param("0,1.5", ["'0,1.5'", "'1.5' is neither", "whole numbers"], id="fraction"),
        pytest.param("0,,3", ["'0,,3'", "'' is neither"], id="empty item"),
        pytest.param("0,3,", ["'0,3,'", "'' is neither"], id="trailing comma"),
        pytest.param("", ["''", "priority_steps"], id="empty"),
        pytest.param("0-", ["'0-'", "'0-' is neither"], id="open range"),
        pytest.param("0..9", ["'0..9'", "FIRST-LAST"], id="dots for a range"),
        pytest.param("[0, 3, 6, 9]", ["'[0, 3, 6, 9]'", "'[0' is neither"], id="python list"),
        pytest.param("9-0", ["'9-0'", "the range '9-0' runs backwards"], id="backwards range"),
        pytest.param("0,3,3,9", ["'0,3,3,9'", "each step once", "repeated: 3"], id="duplicate"),
        pytest.param("0-5,3-9", ["each step once", "repeated: 3, 4, 5"], id="overlapping ranges"),
        pytest.param("0-1000000000", ["'0-1000000000'", "at most 256 steps"], id="too many"),
    ],
)
def test_bad_priority_steps(steps: str, fragments: list[str]) -> None:
    err = _invalid(CELERY | {"prioritySteps": steps})
    assert err.key == "prioritySteps"
    message = str(err)
    assert message.startswith("prioritySteps: got ")
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def test_priority_separator_must_not_be_empty() -> None:
    err = _invalid(CELERY | {"prioritySeparator": ""})
    assert err.key == "prioritySeparator"
    for fragment in ["got ''", "at least one character", "':'", "\\x06\\x16"]:
        assert fragment in str(err), f"{fragment!r} not in {str(err)!r}"


@pytest.mark.parametrize("key", ["prioritySteps", "prioritySeparator"])
@pytest.mark.parametrize(
    "metadata",
    [
        pytest.param(SIDEKIQ, id="sidekiq"),
        pytest.param({"url": URL, "queue": "q", "workerThroughput": "1"}, id="list"),
        pytest.param(RQ, id="rq"),
        pytest.param({"url": "amqp://guest@rabbit:5672/", "queue": "celery"}, id="amqp"),
    ],
)
def test_priority_keys_apply_only_to_celery(metadata: dict[str, str], key: str) -> None:
    fmt = metadata.get("format", "amqp" if metadata["url"].startswith("amqp") else "list")
    err = _invalid(metadata | {key: ":" if key == "prioritySeparator" else "0-9"})
    assert err.key == key
    assert (
        str(err)
        == f"{key}: does not apply to format {fmt}; remove it (it applies to format celery)"
    )


# --- Redis URLs: checked as redis-py reads them, before any sample -------------------------------

#: Redis URLs redis-py takes with the options the scaler passes; each must parse unchanged
GOOD_REDIS_URLS = [
    pytest.param(SECRET_URL, id="password"),
    pytest.param(f"redis://default:{SECRET}@redis.internal:6379/3", id="user and password"),
    pytest.param(f"redis://:{SECRET}@[::1]:6379/0", id="IPv6 host"),
    pytest.param("redis://redis.internal", id="no port, no db"),
    pytest.param("redis://redis.internal:6379/", id="empty path"),
    pytest.param("redis://redis.internal:6379/15/", id="db with a trailing slash"),
    pytest.param("redis://redis.internal:6379?db=4", id="db in the query"),
    pytest.param("redis://redis.internal:6379/2?db=4", id="db in path and query (query wins)"),
    pytest.param("redis://redis.internal:/0", id="empty port"),
    pytest.param(
        "redis://redis.internal:6379/0?socket_timeout=5&socket_connect_timeout=1.5"
        "&health_check_interval=30&client_name=queue-age-scaler&socket_keepalive=false",
        id="client options",
    ),
    pytest.param(f"redis://redis.internal:6379/0?password={SECRET}", id="password in the query"),
    pytest.param(
        f"rediss://scaler:{SECRET}@redis.example:6380/0?ssl_cert_reqs=required"
        "&ssl_ca_certs=/tls/ca.pem&ssl_certfile=/tls/client.pem&ssl_keyfile=/tls/client.key",
        id="rediss with a CA and a client certificate",
    ),
    pytest.param(
        f"rediss://:{SECRET}@redis.example:6380?ssl_cert_reqs=none", id="rediss without checks"
    ),
    pytest.param(
        "rediss://redis.example:6380/1?ssl_check_hostname=false&ssl_cert_reqs=optional",
        id="rediss without the host name check",
    ),
    pytest.param("unix:///var/run/redis/redis.sock?db=2", id="unix socket with db"),
    pytest.param(
        f"unix:///var/run/redis/redis.sock?db=2&password={SECRET}", id="unix socket, password"
    ),
    pytest.param("unix:///var/run/redis/redis.sock", id="unix socket"),
]


def _names_local_resources(param: object) -> bool:
    """A URL with a socket or a TLS file: a profile's alone (tests/unit/test_tenants.py)."""
    url = str(getattr(param, "values")[0])  # noqa: B009 - pytest's ParameterSet
    return url.startswith("unix:") or "ssl_ca_certs" in url


@pytest.mark.parametrize("url", GOOD_REDIS_URLS)
def test_good_redis_urls_are_accepted_in_a_profile(url: str) -> None:
    spec = parse_metadata({"connection": "orders", "queue": "q", "format": "rq"}, {"orders": url})
    assert spec.source.url == url
    assert spec.source.broker == "redis"


@pytest.mark.parametrize("url", [p for p in GOOD_REDIS_URLS if not _names_local_resources(p)])
def test_good_redis_urls_are_accepted_from_a_trigger(url: str) -> None:
    spec = parse_metadata({"url": url, "queue": "q", "format": "rq"})
    assert spec.source.url == url


@pytest.mark.parametrize("url", GOOD_REDIS_URLS)
def test_good_redis_urls_are_ones_redis_py_takes(url: str) -> None:
    # what the parser accepts, redis-py's client builds a connection from (no I/O)
    pool = ConnectionPool.from_url(url, socket_timeout=2.0, socket_connect_timeout=2.0)
    pool.make_connection()  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated


BAD_REDIS_URLS = [
    pytest.param(
        f"redis://:{SECRET}@redis.internal:6379/0?foo=1",
        ["query option 'foo'", "not one redis-py takes", "client_name"],
        id="unknown query option",
    ),
    pytest.param(
        "redis://redis.internal:6379/0?clientname=scaler",
        ["'clientname'", "did you mean 'client_name'"],
        id="query option typo",
    ),
    pytest.param(
        f"redis://:{SECRET}@redis.internal:6379?db=abc",
        ["?db=", "'abc'", "whole number"],
        id="db in the query not a number",
    ),
    pytest.param(
        "redis://redis.internal:6379?db=-1",
        ["?db=", "'-1'", "at least 0"],
        id="negative db in the query",
    ),
    pytest.param(
        f"redis://:{SECRET}@redis.internal/abc",
        ["path '/abc'", "database number", "/DB"],
        id="db in the path not a number",
    ),
    pytest.param("redis://redis.internal:6379/-1", ["path '/-1'"], id="negative db in the path"),
    pytest.param("redis://redis.internal:6379/1/2", ["path '/1/2'"], id="two path segments"),
    pytest.param(
        f"redis://:{SECRET}@redis.internal:0/0",
        ["port 0", "1 to 65535"],
        id="port 0 (redis-py would use 6379)",
    ),
    pytest.param(
        f"redis://:{SECRET}@redis.internal:99999/0", ["cannot be parsed", "port"], id="port 99999"
    ),
    pytest.param(
        f"redis://:{SECRET}@redis.internal:63x9/0", ["cannot be parsed", "port"], id="port 63x9"
    ),
    pytest.param(
        f"redis://:{SECRET}@redis.internal:6379/0?socket_timeout=soon",
        ["?socket_timeout=", "'soon'", "a number"],
        id="option value redis-py cannot read",
    ),
    pytest.param(
        "redis://redis.internal:6379/0?timeout=3",
        ["'timeout'", "not one redis-py takes"],
        id="timeout: parsed by redis-py, taken by no connection",
    ),
    pytest.param(
        f"redis://:{SECRET}@redis.internal:6379/0?ssl_cert_reqs=none",
        ["'ssl_cert_reqs'", "rediss://"],
        id="TLS option on redis://",
    ),
    pytest.param(
        "unix:///var/run/redis.sock?ssl_ca_certs=/tls/ca.pem",
        ["'ssl_ca_certs'", "rediss://"],
        id="TLS option on unix://",
    ),
    pytest.param(
        f"rediss://:{SECRET}@redis.example:6380/0?ssl_cert_reqs=maybe",
        ["?ssl_cert_reqs=", "'maybe'", "none, optional or required"],
        id="bad ssl_cert_reqs",
    ),
    pytest.param(
        "redis://redis.internal:6379/0?decode_responses=false",
        ["'decode_responses'", "does not take from a URL"],
        id="option redis-py takes only from code",
    ),
    pytest.param(
        "redis://redis.internal:6379/0?retry=3", ["'retry'", "does not take from a URL"], id="retry"
    ),
    pytest.param(
        "redis://redis.internal:6379/0?encoding=latin-1",
        ["'encoding'", "does not take from a URL", "encoded"],
        id="encoding",
    ),
    pytest.param(
        "redis://redis.internal:6379/0?protocol=5",
        ["redis-py cannot use", "protocol"],
        id="value redis-py refuses when it builds a connection",
    ),
    pytest.param(
        f"unix://:{SECRET}@?db=2",
        ["unix://", "socket's path"],
        id="unix socket without a path",
    ),
]


@pytest.mark.parametrize(
    ("url", "fragments"), [p for p in BAD_REDIS_URLS if not _names_local_resources(p)]
)
def test_bad_redis_urls_are_invalid_metadata(url: str, fragments: list[str]) -> None:
    err = _invalid({"url": url, "queue": "q", "format": "rq"})
    assert err.key == "url"
    message = str(err)
    assert message.startswith("url: ")
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    assert SECRET not in message
    assert url not in message


@pytest.mark.parametrize(("url", "fragments"), BAD_REDIS_URLS)
def test_bad_redis_url_of_a_profile_names_the_profile(url: str, fragments: list[str]) -> None:
    err = _invalid({"connection": "orders", "queue": "q", "format": "rq"}, {"orders": url})
    assert err.key == "connection"
    message = str(err)
    assert message.startswith("connection: the URL of connection profile 'orders': ")
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    assert SECRET not in message


def test_bad_redis_url_from_env_is_named_url() -> None:
    err = _invalid({"urlFromEnv": "redis://redis.internal/0?foo=1", "queue": "q", "format": "rq"})
    assert err.key == "url"


@pytest.mark.parametrize(
    "url",
    [
        # a '/', '?' or '#' left in a password ends the host part early: what urllib then takes
        # for a port, a path or an option is a piece of the password
        pytest.param(f"redis://scaler:{SECRET}/x@redis.internal:6379/0", id="'/' in password"),
        pytest.param(f"redis://:{SECRET}#x@redis.internal:6379/0", id="'#' in password"),
        pytest.param(f"redis://:x/{SECRET}@redis.internal:6379/0", id="path is the password"),
        pytest.param(f"redis://:x?{SECRET}=1@redis.internal:6379/0", id="option is the password"),
        pytest.param(f"redis://scaler:123/{SECRET}@redis.internal:6379/0", id="path after a port"),
        pytest.param(f"redis://scaler:123?{SECRET}=1@redis.internal/0", id="option after a port"),
    ],
)
def test_password_with_unencoded_characters_is_not_shown(url: str) -> None:
    err = _invalid({"url": url, "queue": "q", "format": "rq"})
    assert err.key == "url"
    assert SECRET not in str(err)
    assert "percent-encode" in str(err)


# --- sampleInterval ------------------------------------------------------------------------------


@pytest.mark.parametrize("interval", ["0.001", "1ms", "99ms", "0.05s"])
def test_sample_interval_below_the_minimum_is_refused(interval: str) -> None:
    err = _invalid(RQ | {"sampleInterval": interval})
    assert err.key == "sampleInterval"
    message = str(err)
    assert message.startswith(f"sampleInterval: got {interval!r}; ")
    assert "at least 100ms" in message


@pytest.mark.parametrize(("interval", "seconds"), [("100ms", 0.1), ("0.1", 0.1), ("250ms", 0.25)])
def test_sample_interval_at_or_above_the_minimum_is_accepted(interval: str, seconds: float) -> None:
    assert parse_metadata(RQ | {"sampleInterval": interval}).sample_interval == seconds


# --- connection profile names match as QUEUE_AGE_SCALER_CONNECTION_<NAME> does -------------------


@pytest.mark.parametrize(
    "name", ["orders-redis", "orders_redis", "ORDERS_REDIS", "Orders-Redis", "orders.redis"]
)
def test_connection_name_matches_ignoring_case_and_separators(name: str) -> None:
    # load_profiles names QUEUE_AGE_SCALER_CONNECTION_ORDERS_REDIS's profile orders-redis
    profiles = {"orders-redis": SECRET_URL, "reports": "redis://reports:6379/1"}
    spec = parse_metadata({"connection": name, "queue": "q", "format": "rq"}, profiles)
    assert spec.source.url == SECRET_URL


def test_connection_name_exact_match_wins() -> None:
    profiles = {"orders-redis": SECRET_URL, "orders_redis": "redis://other:6379/0"}
    spec = parse_metadata({"connection": "orders_redis", "queue": "q", "format": "rq"}, profiles)
    assert spec.source.url == "redis://other:6379/0"


def test_connection_name_matching_several_profiles_is_refused() -> None:
    profiles = {"orders-redis": SECRET_URL, "orders_redis": "redis://other:6379/0"}
    err = _invalid({"connection": "Orders.Redis", "queue": "q", "format": "rq"}, profiles)
    assert err.key == "connection"
    assert "'orders-redis'" in str(err)
    assert "'orders_redis'" in str(err)
    assert SECRET not in str(err)


def test_unknown_connection_profile_says_how_names_match() -> None:
    err = _invalid({"connection": "orders-rabbit", "queue": "q"}, profiles=PROFILES)
    assert "main" not in str(err)
    assert "whatever their case, with '-', '.' and '_' alike" in str(err)


def test_parsing_redis_urls_reads_redis_pys_package_metadata_at_most_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # redis-py reads its version from its installed metadata (a file on disk) for each
    # connection it makes unless told it; the check of each new trigger's URL makes one
    import importlib.metadata

    reads: list[str] = []
    read = importlib.metadata.version

    def counted(name: str) -> str:
        reads.append(name)
        return read(name)

    monkeypatch.setattr(importlib.metadata, "version", counted)
    for n in range(20):
        parse_metadata({**SIDEKIQ, "url": f"redis://127.0.0.1:{6000 + n}/0", "queue": f"q{n}"})
    assert reads.count("redis") <= 1
