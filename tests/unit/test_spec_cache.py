"""The spec cache: a repeated map costs one parse, refused or not; a flood of distinct refused
maps does not push the healthy specs out; both kinds are bounded; the service answers calls
from cached specs before it parses maps it has not seen."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping

import pytest

from scaler.errors import InvalidMetadata, PermissionDenied
from scaler.generated import externalscaler_pb2 as pb
from scaler.metrics import Metrics
from scaler.sampler import SamplerRegistry
from scaler.service import ExternalScalerService
from scaler.spec import parse_metadata
from scaler.spec_cache import SpecCache, spec_key
from scaler.trigger_spec import TriggerSpec

GOOD = {"url": "redis://127.0.0.1:6379/0", "queue": "orders", "format": "sidekiq",
        "workerThroughput": "1"}  # fmt: skip


class Counted:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, namespace: str, metadata: Mapping[str, str]) -> TriggerSpec:
        self.calls += 1
        if namespace == "denied":
            raise PermissionDenied("connection", "profile 'p' is not for namespace 'denied'")
        return parse_metadata(metadata)


def test_a_repeated_refusal_costs_one_parse_and_says_the_same() -> None:
    parse = Counted()
    cache = SpecCache(parse)
    broken = {**GOOD, "targetAeg": "30s"}
    raised = []
    for _ in range(3):
        with pytest.raises(InvalidMetadata, match="did you mean 'targetAge'") as caught:
            cache.get("shop", broken)
        raised.append(caught.value)
    with pytest.raises(PermissionDenied, match="not for namespace 'denied'"):
        cache.get("denied", GOOD)
    with pytest.raises(PermissionDenied, match="not for namespace 'denied'"):
        cache.get("denied", GOOD)
    assert parse.calls == 2
    first, *later = raised
    assert all(str(e) == str(first) and e.key == first.key == "targetAeg" for e in later)
    assert len({id(e) for e in raised}) == 3  # each raise has its own traceback
    assert cache.get("shop", GOOD) is cache.get("shop", GOOD) and parse.calls == 3


def test_the_key_is_a_small_digest_of_namespace_and_metadata_in_any_order() -> None:
    big = {**GOOD, "note": "x" * 4000}
    key = spec_key("team-a", big)
    assert len(key) == 32  # a 4 KB map is kept under 32 bytes, not its text
    assert key == spec_key("team-a", dict(reversed(list(big.items()))))  # order does not count
    assert key != spec_key("team-b", big)  # a profile's namespaces: the namespace counts
    # where one string ends and the next begins counts: no two distinct maps share a key
    assert spec_key("", {"ab": "c"}) != spec_key("", {"a": "bc"})
    assert spec_key("a", {"b": "c"}) != spec_key("", {"ab": "c"})
    assert spec_key("", {"a": "b", "c": "d"}) != spec_key("", {"a": "bcd"})


def test_distinct_refusals_do_not_push_the_specs_out_and_both_are_bounded() -> None:
    parse = Counted()
    cache = SpecCache(parse, specs=8, refusals=16)
    healthy = [{**GOOD, "queue": f"q{i}"} for i in range(8)]
    for metadata in healthy:
        cache.get("shop", metadata)
    for i in range(1000):
        with pytest.raises(InvalidMetadata):
            cache.get("fuzz", {**GOOD, f"junk{i}": "x"})
    assert (len(cache.specs), len(cache.refusals)) == (8, 16)
    calls = parse.calls
    for metadata in healthy:
        cache.get("shop", metadata)
    assert parse.calls == calls  # all eight still cached
    cache.get("shop", {**GOOD, "queue": "ninth"})
    cache.get("shop", healthy[7])
    assert parse.calls == calls + 1
    cache.get("shop", healthy[0])  # the least recently used made room for the ninth
    assert parse.calls == calls + 2


async def test_calls_for_parsed_triggers_go_before_the_parses_of_new_maps() -> None:
    def no_adapter(source: object) -> object:
        raise AssertionError("spec_of starts no sampler")

    metrics = Metrics()
    service = ExternalScalerService(SamplerRegistry(no_adapter, metrics), metrics, {})  # type: ignore[arg-type]
    healthy = pb.ScaledObjectRef(name="orders", namespace="shop", scalerMetadata=GOOD)
    await service.spec_of(healthy)
    done: list[str] = []

    async def call(ref: pb.ScaledObjectRef, label: str) -> None:
        with contextlib.suppress(InvalidMetadata):
            await service.spec_of(ref)
        done.append(label)

    flood = [
        pb.ScaledObjectRef(name="fuzz", namespace="x", scalerMetadata={**GOOD, f"junk{i}": "1"})
        for i in range(50)
    ]  # all due before the healthy call, which arrives last
    await asyncio.gather(*(call(ref, "new") for ref in flood), call(healthy, "cached"))
    assert done.index("cached") == 0 and len(done) == 51
