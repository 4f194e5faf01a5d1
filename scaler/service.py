"""KEDA's ExternalScaler service, answered from the samplers' cached snapshots.

This module is the one boundary where the project's errors become gRPC status codes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TypeVar

import grpc

from scaler.bounds import UNBOUNDED, Bounds
from scaler.ceilings.registry import ProbeRegistry
from scaler.decision_log import TriggerKey, decision_fields, decision_text
from scaler.errors import (
    InvalidMetadata,
    PermissionDenied,
    QueueMisconfigured,
    ResourceExhausted,
    ScalerError,
    Unavailable,
)
from scaler.evaluation import Evaluator, activity, metric_value
from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc
from scaler.limits import Limits
from scaler.metrics import Metrics
from scaler.policy import Decision
from scaler.profiles import Profile, as_profiles
from scaler.sampler import IDLE_AFTER, SamplerRegistry
from scaler.signals import QueueSignals
from scaler.spec import parse_metadata
from scaler.spec_cache import SpecCache, spec_key
from scaler.trigger_spec import TriggerSpec
from scaler.url_policy import OPEN_URLS, UrlPolicy

log = logging.getLogger(__name__)

#: how long the first request for a queue waits for its first sample
FIRST_SAMPLE_TIMEOUT = 1.0
#: while active, StreamIsActive repeats ``true`` this often
STREAM_REPEAT = 1.0

Request = TypeVar("Request")
Response = TypeVar("Response")


def status_of(error: Exception) -> tuple[grpc.StatusCode, str]:
    """The gRPC status for an error: the one place this mapping is made."""
    if isinstance(error, InvalidMetadata):
        return grpc.StatusCode.INVALID_ARGUMENT, f"invalid trigger metadata: {error}"
    if isinstance(error, PermissionDenied):
        return grpc.StatusCode.PERMISSION_DENIED, f"not allowed by the scaler's operator: {error}"
    if isinstance(error, QueueMisconfigured):
        return grpc.StatusCode.FAILED_PRECONDITION, str(error)
    if isinstance(error, ResourceExhausted):
        return grpc.StatusCode.RESOURCE_EXHAUSTED, str(error)
    if isinstance(error, Unavailable):
        return grpc.StatusCode.UNAVAILABLE, str(error)
    return grpc.StatusCode.INTERNAL, f"internal error: {error!r}"


def _answers(
    method: Callable[
        [ExternalScalerService, Request, grpc.aio.ServicerContext[Request, Response]],
        Awaitable[Response],
    ],
) -> Callable[
    [ExternalScalerService, Request, grpc.aio.ServicerContext[Request, Response]],
    Awaitable[Response],
]:
    """Turn the project's errors into gRPC statuses for a unary method."""

    @functools.wraps(method)
    async def wrapper(
        self: ExternalScalerService,
        request: Request,
        context: grpc.aio.ServicerContext[Request, Response],
    ) -> Response:
        try:
            return await method(self, request, context)
        except ScalerError as error:
            await self._abort(method.__name__, error, context)
            raise  # unreachable: abort raises

    return wrapper


@dataclass(slots=True)
class _Trigger:
    """What the service keeps per trigger between KEDA's calls."""

    asked: float
    #: the policy state and the last evaluation
    evaluator: Evaluator
    #: the last decision logged (reason, workers)
    logged: tuple[str, int] | None = None


class ExternalScalerService(pb_grpc.ExternalScalerServicer):
    def __init__(
        self,
        samplers: SamplerRegistry,
        metrics: Metrics,
        profiles: Mapping[str, Profile | str],
        *,
        first_sample_timeout: float = FIRST_SAMPLE_TIMEOUT,
        idle_after: float = IDLE_AFTER,
        limits: Limits | None = None,
        probes: ProbeRegistry | None = None,
        urls: UrlPolicy = OPEN_URLS,
        bounds: Bounds = UNBOUNDED,
    ) -> None:
        self._samplers = samplers
        #: the dependency probes (none: every probed dependency falls back)
        self._probes = probes
        self._limits = limits or Limits()
        #: StreamIsActive streams open now
        self._streams = 0
        self._metrics = metrics
        self._profiles = as_profiles(profiles)
        self._urls = urls
        self._bounds = bounds
        self._first_sample_timeout = first_sample_timeout
        #: triggers not asked about for this long are forgotten, with their metrics (a deleted
        #: ScaledObject, or a spec replaced by edited metadata)
        self._idle_after = idle_after
        self._triggers: dict[TriggerKey, _Trigger] = {}
        self._swept = time.monotonic()
        self.shutting_down = asyncio.Event()
        self._specs = SpecCache(self._parse_uncached)

    # -- the four RPCs ------------------------------------------------------------------------

    @_answers
    async def GetMetricSpec(
        self,
        request: pb.ScaledObjectRef,
        context: grpc.aio.ServicerContext[pb.ScaledObjectRef, pb.GetMetricSpecResponse],
    ) -> pb.GetMetricSpecResponse:
        spec = await self.spec_of(request)
        self._samplers.get(spec)  # start sampling now, so GetMetrics finds it warm
        if self._probes is not None:  # and reading the dependencies
            await self._probes.figures(spec, first_timeout=0.0)
        target = spec.metric_target
        return pb.GetMetricSpecResponse(
            metricSpecs=[
                pb.MetricSpec(
                    metricName=spec.metric_name,
                    targetSize=max(1, round(target)),
                    targetSizeFloat=target,
                )
            ]
        )

    @_answers
    async def GetMetrics(
        self,
        request: pb.GetMetricsRequest,
        context: grpc.aio.ServicerContext[pb.GetMetricsRequest, pb.GetMetricsResponse],
    ) -> pb.GetMetricsResponse:
        ref = request.scaledObjectRef
        spec = await self.spec_of(ref)
        if request.metricName and request.metricName != spec.metric_name:
            raise InvalidMetadata(
                "metricName",
                f"asked for metric {request.metricName!r}, but this trigger's metric is {spec.metric_name!r}",
            )
        _, decision = await self.evaluate(ref, spec)
        value = metric_value(spec, decision)
        return pb.GetMetricsResponse(
            metricValues=[
                pb.MetricValue(
                    metricName=spec.metric_name, metricValue=round(value), metricValueFloat=value
                )
            ]
        )

    @_answers
    async def IsActive(
        self,
        request: pb.ScaledObjectRef,
        context: grpc.aio.ServicerContext[pb.ScaledObjectRef, pb.IsActiveResponse],
    ) -> pb.IsActiveResponse:
        spec = await self.spec_of(request)
        _, decision = await self.evaluate(request, spec)
        return pb.IsActiveResponse(result=activity(spec, decision))

    async def StreamIsActive(
        self,
        request: pb.ScaledObjectRef,
        context: grpc.aio.ServicerContext[pb.ScaledObjectRef, pb.IsActiveResponse],
    ) -> AsyncIterator[pb.IsActiveResponse]:
        """The current state at once, then ``true`` within a sample of work appearing, repeated
        every second while active. Ends with OK when the server shuts down."""
        try:
            spec = await self.spec_of(request)
            self._check_stream_room()
            sampler = self._samplers.get(spec)
            with self._stream_open(), sampler.watched():
                last: bool | None = None
                last_sent = 0.0
                loop = asyncio.get_running_loop()
                while not self.shutting_down.is_set():
                    _, decision = await self.evaluate(request, spec)
                    active = activity(spec, decision)
                    now = loop.time()
                    if active != last or (active and now - last_sent >= STREAM_REPEAT):
                        yield pb.IsActiveResponse(result=active)
                        last, last_sent = active, now
                    await self._next_sample_or_shutdown(sampler.wait_for_sample(STREAM_REPEAT))
        except ScalerError as error:
            if not self.shutting_down.is_set():  # at shutdown the stream ends with OK
                await self._abort("StreamIsActive", error, context)

    # -- shared steps -------------------------------------------------------------------------

    def _check_stream_room(self) -> None:
        if self._streams >= self._limits.max_streams:
            raise ResourceExhausted(
                f"this scaler has {self._streams} StreamIsActive streams open, its limit "
                "(--max-streams); KEDA retries later, or the operator raises the limit"
            )

    @contextlib.contextmanager
    def _stream_open(self) -> Iterator[None]:
        """Counts one open stream while the block runs."""
        self._streams += 1
        try:
            yield
        finally:
            self._streams -= 1

    async def spec_of(self, ref: pb.ScaledObjectRef) -> TriggerSpec:
        self._limits.check_metadata(ref.scalerMetadata)  # before the cache keeps a large map
        # by namespace too: whether a profile may be used depends on it
        key = spec_key(ref.namespace, ref.scalerMetadata)
        spec = self._specs.cached(key)
        if spec is None:
            # metadata not seen before is parsed after the work already due, among it the calls
            # answered from cached specs: a flood of new maps does not hold those up
            await asyncio.sleep(0)
            spec = self._specs.parse(key, ref.namespace, ref.scalerMetadata)
        return spec

    def _parse_uncached(self, namespace: str, metadata: Mapping[str, str]) -> TriggerSpec:
        return parse_metadata(
            metadata, self._profiles, namespace=namespace, urls=self._urls, bounds=self._bounds
        )

    async def evaluate(
        self, ref: pb.ScaledObjectRef, spec: TriggerSpec
    ) -> tuple[QueueSignals, Decision]:
        """Signals and decision for one trigger, from the cached snapshots."""
        sampler = self._samplers.get(spec)
        history = await sampler.history(self._first_sample_timeout)
        figures = {} if self._probes is None else await self._probes.figures(spec)
        key = (ref.namespace, ref.name, spec)
        now = time.monotonic()
        self._forget_idle(now)
        trigger = self._triggers.get(key)
        if trigger is None:
            trigger = self._triggers[key] = _Trigger(now, Evaluator())
        trigger.asked = now
        evaluation = trigger.evaluator.evaluate(history, spec, sampler.arrivals, figures)
        signals, decision = evaluation.signals, evaluation.decision
        if evaluation.fresh:  # recorded and logged once per sample and probe figures
            self._metrics.record_decision(ref.namespace, ref.name, spec, signals, decision)
            self._log_decision(key, trigger, signals, decision)
        return signals, decision

    def _forget_idle(self, now: float) -> None:
        """Forget the triggers nobody asked about for ``idle_after``, and the metrics that only
        they had (checked at most every tenth of that time)."""
        if now - self._swept < self._idle_after / 10:
            return
        self._swept = now
        idle = [k for k, t in self._triggers.items() if now - t.asked > self._idle_after]
        for key in idle:
            del self._triggers[key]
        kept = {Metrics.trigger_labels(ns, name, spec) for ns, name, spec in self._triggers}
        for ns, name, spec in idle:
            labels = Metrics.trigger_labels(ns, name, spec)
            if labels not in kept:
                self._metrics.forget_trigger(labels)

    def _log_decision(
        self, key: TriggerKey, trigger: _Trigger, signals: QueueSignals, decision: Decision
    ) -> None:
        spec = key[2]
        summary = (decision.reason_label, decision.desired_workers)
        level = logging.INFO if trigger.logged != summary else logging.DEBUG
        trigger.logged = summary
        if log.isEnabledFor(level):
            fields = decision_fields(key[0], key[1], spec, signals, decision)
            log.log(level, "%s", decision_text(key, signals, decision), extra=fields)

    async def _next_sample_or_shutdown(self, sample: Awaitable[None]) -> None:
        shutdown = asyncio.ensure_future(self.shutting_down.wait())
        waiting = asyncio.ensure_future(sample)
        try:
            await asyncio.wait((shutdown, waiting), return_when=asyncio.FIRST_COMPLETED)
        finally:
            shutdown.cancel()
            waiting.cancel()

    async def _abort(
        self, method: str, error: ScalerError, context: grpc.aio.ServicerContext[Request, Response]
    ) -> None:
        code, message = status_of(error)
        self._metrics.record_rpc_error(method, code.name)
        log.debug("%s -> %s: %s", method, code.name, message)
        await context.abort(code, message)
