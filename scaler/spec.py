"""Trigger metadata -> a frozen :class:`TriggerSpec`.

Every problem is an :class:`~scaler.errors.InvalidMetadata` whose message names the key, the
value, what was expected and, for an unknown key, the nearest valid one.
"""

from __future__ import annotations

from collections.abc import Mapping

from brokers.registry import format_info
from scaler.bounds import UNBOUNDED, Bounds
from scaler.capacity_metadata import (
    parse_capacity,
    parse_dependencies,
    parse_dependency_scope,
    parse_learn_knee,
)
from scaler.errors import InvalidMetadata
from scaler.metadata_reader import MetadataReader, resolve_keys
from scaler.pool_metadata import parse_pool
from scaler.profiles import Profile, as_profiles
from scaler.source_metadata import parse_source
from scaler.trigger_spec import (
    DEFAULT_RATE_WINDOW,
    DEFAULT_SAMPLE_INTERVAL,
    DEFAULT_TARGET_AGE,
    Metric,
    TriggerSpec,
)
from scaler.url_policy import OPEN_URLS, UrlPolicy

#: ``dependencyWeight`` at most: a pool's share of contested slots is at most this many times
#: another's
MAX_DEPENDENCY_WEIGHT = 1000
#: the longest ``slowSampleInterval`` a trigger may ask (a sampler nobody asks about for 10
#: minutes stops; a sample is answered from for three intervals)
MAX_SLOW_SAMPLE_INTERVAL = 600.0


def parse_metadata(
    metadata: Mapping[str, str],
    profiles: Mapping[str, Profile | str] | None = None,
    *,
    namespace: str | None = None,
    urls: UrlPolicy = OPEN_URLS,
    bounds: Bounds = UNBOUNDED,
) -> TriggerSpec:
    """Parse KEDA's ``scalerMetadata`` into a spec, or raise :class:`InvalidMetadata` (or
    :class:`~scaler.errors.PermissionDenied`, for what the operator does not allow).

    ``profiles`` are the scaler's connection profiles (a bare URL stands for a profile usable
    from every namespace); ``namespace`` the ScaledObject's, checked against a profile's
    ``namespaces`` (None: not checked). ``urls`` says where a trigger's own URL may point, and
    ``bounds`` what it may ask of the samplers. The server, ``probe``, ``check`` and the
    simulator all parse with this, so they accept and refuse the same triggers with the same
    messages.
    """
    values = resolve_keys(metadata)
    reader = MetadataReader(values)
    known = as_profiles(profiles or {})
    source = parse_source(reader, known, namespace, urls)

    metric = reader.choice("metric", [m.value for m in Metric], Metric.WORKERS.value)
    target_age = reader.duration("targetAge", DEFAULT_TARGET_AGE, positive=True)
    throughput, concurrency = parse_capacity(reader)
    spec = TriggerSpec(
        source=source,
        metric=Metric(metric),
        target_age=target_age,
        target_drain_time=reader.duration("targetDrainTime", target_age, positive=True),
        worker_throughput=throughput,
        worker_concurrency=concurrency,
        min_workers=reader.integer("minWorkers", 0, minimum=0) or 0,
        max_workers=reader.integer("maxWorkers", None, minimum=1),
        dependencies=parse_dependencies(reader.get("dependencies"), known, namespace),
        activation_age=reader.duration("activationAge", 0.0),
        activation_depth=reader.integer("activationDepth", 0, minimum=0) or 0,
        rate_window=reader.duration("rateWindow", DEFAULT_RATE_WINDOW, positive=True),
        sample_interval=_parse_sample_interval(reader, bounds),
        slow_sample_interval=_parse_slow_interval(reader),
        grace_period=_parse_grace_period(reader),
        learn_knee=parse_learn_knee(reader),
        dependency_scope=parse_dependency_scope(reader),
        dependency_weight=_parse_dependency_weight(reader),
        pool=parse_pool(reader, format_info(source.format), bounds.max_pool_queues),
    )
    _check_consistency(spec, values)
    bounds.check_rate_window(
        values.get("rateWindow", "60s (the default)"), spec.rate_window, spec.sample_interval
    )
    return spec


def _parse_dependency_weight(reader: MetadataReader) -> float:
    weight = reader.number("dependencyWeight")
    if weight is None:
        return 1.0
    if weight > MAX_DEPENDENCY_WEIGHT:
        raise reader.fail(
            "dependencyWeight", f"a number above zero, at most {MAX_DEPENDENCY_WEIGHT}"
        )
    return weight


def _parse_slow_interval(reader: MetadataReader) -> float | None:
    if reader.get("slowSampleInterval") is None:
        return None  # the server's --slow-sample-interval
    return reader.duration("slowSampleInterval", 0.0, positive=True)


def _parse_grace_period(reader: MetadataReader) -> float | None:
    if reader.get("gracePeriod") is None:
        return None
    return reader.duration("gracePeriod", 0.0)


def _parse_sample_interval(reader: MetadataReader, bounds: Bounds) -> float:
    seconds = reader.duration("sampleInterval", DEFAULT_SAMPLE_INTERVAL)
    bounds.check_sample_interval(reader.values.get("sampleInterval", ""), seconds)
    return seconds


def _check_consistency(spec: TriggerSpec, values: Mapping[str, str]) -> None:
    info = format_info(spec.source.format)
    ceiling, limiter = spec.ceiling
    if spec.max_workers is not None and spec.min_workers > spec.max_workers:
        raise InvalidMetadata(
            "minWorkers",
            f"got {spec.min_workers}; expected at most maxWorkers ({spec.max_workers})",
        )
    if ceiling is not None and spec.min_workers > ceiling:
        raise InvalidMetadata(
            "minWorkers",
            f"got {spec.min_workers}; the dependency {limiter!r} allows at most {ceiling} workers",
        )
    slow = spec.slow_sample_interval
    if slow is not None and not spec.sample_interval <= slow <= MAX_SLOW_SAMPLE_INTERVAL:
        raise InvalidMetadata(
            "slowSampleInterval",
            f"got {values.get('slowSampleInterval')!r}; expected at least sampleInterval "
            f"({spec.sample_interval:g}s) and at most {MAX_SLOW_SAMPLE_INTERVAL:g}s",
        )
    if spec.rate_window < 2 * spec.sample_interval:
        raise InvalidMetadata(
            "rateWindow",
            f"got {values.get('rateWindow', '60s (the default)')!r}; expected at least two sampleIntervals ({2 * spec.sample_interval:g}s)",
        )
    if spec.metric is not Metric.WORKERS and spec.has_ceiling and not info.reports_consumers:
        limiter = limiter if ceiling is not None else spec.dependencies[0].name
        raise InvalidMetadata(
            "metric",
            f"metric {spec.metric.value} with a ceiling ({limiter}) needs the observed worker count, which "
            f"format {spec.source.format} does not report; use metric workers (the ceiling then applies "
            "directly), or drop maxWorkers/dependencies and set the ScaledObject's maxReplicaCount",
        )
    if spec.pool is not None:
        _check_pool(spec)
    if spec.learn_knee and any(dep.name == "knee" for dep in spec.dependencies):
        raise InvalidMetadata(
            "dependencies",
            "'knee' names the learned knee's part of the ceiling with learnKnee; name the "
            "dependency otherwise",
        )
    if (
        spec.dependency_scope is not None or "dependencyWeight" in values
    ) and not spec.dependencies:
        key = "dependencyScope" if spec.dependency_scope is not None else "dependencyWeight"
        raise InvalidMetadata(
            key,
            "applies to the limits of dependencies, and this trigger names none; set dependencies or drop it",
        )
    if spec.learn_knee and not info.reports_consumers:
        raise InvalidMetadata(
            "learnKnee",
            f"format {spec.source.format} does not report attached workers, so the throughput "
            "knee cannot be learned; drop learnKnee, or type the limit found by measurement in "
            "dependencies",
        )
    if (
        spec.metric is Metric.WORKERS
        and spec.worker_throughput is None
        and not info.reports_consumers
    ):
        raise InvalidMetadata(
            "workerThroughput",
            f"missing; format {spec.source.format} does not report attached workers, so per-worker throughput "
            "cannot be learned. Set workerThroughput (jobs per second one worker completes), or jobDuration "
            "and workerConcurrency",
        )


def _check_pool(spec: TriggerSpec) -> None:
    if spec.metric is not Metric.WORKERS:
        raise InvalidMetadata(
            "metric",
            f"metric {spec.metric.value} applies to a single queue; a pool trigger (queues) "
            "reports the workers the whole pool needs: use metric workers (the default)",
        )
    if spec.learn_knee:
        raise InvalidMetadata(
            "learnKnee",
            "applies to a single queue; a pool's queues share their workers, so no one queue's "
            "completions show the knee: type the limit found by measurement in dependencies",
        )
