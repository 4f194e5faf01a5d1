"""A pool trigger's metadata (``queues``, ``queueOrder``, ``queueTargetAges``): what parses, and
what is refused with a message naming the entry and the fix."""

from __future__ import annotations

import pytest

from scaler.bounds import Bounds
from scaler.errors import InvalidMetadata
from scaler.pool_policy import member_spec
from scaler.pool_spec import PoolEntry, PoolQueue, ServingOrder
from scaler.spec import parse_metadata
from scaler.trigger_spec import TriggerSpec


def parsed(
    format_: str = "sidekiq", url: str = "redis://localhost", **metadata: str
) -> TriggerSpec:
    return parse_metadata({"url": url, "format": format_, "workerThroughput": "1"} | metadata)


def refused(**metadata: str) -> InvalidMetadata:
    with pytest.raises(InvalidMetadata) as caught:
        parsed(**metadata)
    return caught.value


def test_a_list_with_weights_globs_and_targets() -> None:
    spec = parsed(
        queues=" critical:5, default:3 ,low-*",
        queueOrder="weighted",
        queueTargetAges="critical=10s,low-*=10m",
    )
    assert spec.pool is not None
    assert spec.pool.entries == (
        PoolEntry("critical", 5, 10.0),
        PoolEntry("default", 3, None),
        PoolEntry("low-*", 1, 600.0),
    )
    assert spec.pool.order is ServingOrder.WEIGHTED
    assert spec.metric_name == "queue-age-workers-pool-critical-default-low"
    # the glob's matches are served at its place, in name order; an exact name is not matched
    assert spec.pool.resolve(["low-b", "critical", "low-a", "other"]) == (
        PoolQueue("critical", 5, 10.0),
        PoolQueue("default", 3, None),
        PoolQueue("low-a", 1, 600.0),
        PoolQueue("low-b", 1, 600.0),
    )


def test_the_default_order_is_strict() -> None:
    spec = parsed(queues="high,default,low")
    assert spec.pool is not None and spec.pool.order is ServingOrder.STRICT


def test_a_member_is_the_pools_source_on_its_queue_without_the_pools_bounds() -> None:
    spec = parsed(queues="a,b", maxWorkers="9", minWorkers="1", dependencies="pg=10/1")
    single = parsed(queue="b", maxWorkers="9")
    assert spec.pool is not None
    member = member_spec(spec, spec.pool.resolve()[1])
    assert member.source == single.source  # the samplers of both are one
    assert (member.max_workers, member.min_workers, member.dependencies) == (None, 0, ())


def test_a_single_queue_trigger_has_no_pool() -> None:
    assert parsed(queue="default").pool is None


@pytest.mark.parametrize(
    ("metadata", "key", "words"),
    [
        ({"queues": "a:5,b"}, "queues", "only queueOrder weighted uses"),
        ({"queues": "a:0,b", "queueOrder": "weighted"}, "queues", "not a whole number"),
        ({"queues": "a:1.5", "queueOrder": "weighted"}, "queues", "not a whole number"),
        ({"queues": "a,b", "queueOrder": "strictly"}, "queueOrder", "did you mean 'strict'"),
        ({"queues": "a,,b"}, "queues", "entry 2 of 'a,,b' is empty"),
        ({"queues": "a,b,a"}, "queues", "'a' is listed twice"),
        ({"queues": ""}, "queues", "empty"),
        ({"queues": "a", "queue": "a"}, "queues", "not both"),
        ({"queueOrder": "strict", "queue": "a"}, "queueOrder", "pool trigger only"),
        ({"queues": "a,b", "queueTargetAges": "c=1m"}, "queueTargetAges", "not an entry"),
        ({"queues": "a,b", "queueTargetAges": "a=0s"}, "queueTargetAges", "above zero"),
        ({"queues": "a,b", "queueTargetAges": "a"}, "queueTargetAges", "QUEUE=DURATION"),
        ({"queues": "a,b", "metric": "age"}, "metric", "use metric workers"),
        ({"queues": "a,b", "learnKnee": "true"}, "learnKnee", "applies to a single queue"),
    ],
)
def test_refused(metadata: dict[str, str], key: str, words: str) -> None:
    error = refused(**metadata)
    assert error.key == key
    assert words in str(error)


def test_a_glob_on_a_format_that_cannot_list_its_queues() -> None:
    with pytest.raises(InvalidMetadata) as caught:
        parsed("rq", queues="high,low-*")
    assert "'low-*' is a glob, but format rq cannot list its queues" in str(caught.value)
    assert "sidekiq, amqp" in str(caught.value)


def test_rabbitmq_globs_parse() -> None:
    spec = parsed("amqp", "amqp://guest:guest@localhost:5672/%2F", queues="emails,reports.*")
    assert spec.pool is not None and spec.pool.has_globs


def test_the_cap_on_listed_queues() -> None:
    with pytest.raises(InvalidMetadata) as caught:
        parse_metadata(
            {"url": "redis://localhost", "format": "sidekiq", "queues": "a,b,c"},
            bounds=Bounds(max_pool_queues=2),
        )
    assert "lists 3 queues; a pool may have at most 2 (the scaler's --max-pool-queues)" in str(
        caught.value
    )
