"""KEDA's ExternalScaler service, answered from the samplers' cached snapshots.

This module is the one boundary where the project's errors become gRPC status codes.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import TypeVar, cast

import grpc
from google.protobuf.message import Message

from brokers.base import QueueSnapshot
from scaler.bounds import UNBOUNDED, Bounds
from scaler.budget_registry import BudgetRegistry
from scaler.ceilings.headroom import ProbeFigure
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
from scaler.parse_turns import ParseTurns
from scaler.policy import Decision
from scaler.pool_evaluation import PoolEvaluator, QueueHistory
from scaler.pool_policy import PoolDecision, member_spec, with_total
from scaler.pool_queues import PoolQueues
from scaler.profiles import Profile, as_profiles
from scaler.routes import ASK_REPEAT, Route, Routes, Trigger
from scaler.sampler import IDLE_AFTER, Sampler, SamplerRegistry
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

#: what a unary method returns beside an error status (gRPC sends the status, KEDA reads only it)
_REFUSED: dict[str, Message] = {
    "GetMetricSpec": pb.GetMetricSpecResponse(),
    "GetMetrics": pb.GetMetricsResponse(),
    "IsActive": pb.IsActiveResponse(),
}
_ACTIVE = pb.IsActiveResponse(result=True)
_INACTIVE = pb.IsActiveResponse(result=False)
_NO_FIGURES: Mapping[str, ProbeFigure] = {}

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
            self._refuse(method.__name__, error, context)
            return cast(Response, _REFUSED[method.__name__])

    return wrapper


def _pool_signals(pool: PoolDecision) -> QueueSignals:
    """The driving queue's signals, with the pool's workers: the sum of its queues' shares
    (unknown where any is)."""
    shares = [queue.signals.consumers for queue in pool.queues]
    workers = None if any(w is None for w in shares) else sum(w or 0 for w in shares)
    return dataclasses.replace(_driving_signals(pool), consumers=workers)


def _driving_signals(pool: PoolDecision) -> QueueSignals:
    """The signals of the queue that drives a pool's decision (the first while none does)."""
    for queue in pool.queues:
        if queue.name == pool.driving:
            return queue.signals
    return pool.queues[0].signals


async def _any_sample(samplers: list[Sampler], timeout: float) -> None:
    """Return after the next sample of any of ``samplers``, or after ``timeout``."""
    waits = [asyncio.ensure_future(sampler.wait_for_sample(timeout)) for sampler in samplers]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


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
        budgets: BudgetRegistry | None = None,
    ) -> None:
        self._samplers = samplers
        #: the dependency budgets shared between the pools that ask this server
        self._budgets = budgets if budgets is not None else BudgetRegistry()
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
        self._triggers: dict[TriggerKey, Trigger] = {}
        self._routes = Routes()
        self._swept = time.monotonic()
        self.shutting_down = asyncio.Event()
        self._specs = SpecCache(self._parse_uncached)
        #: the queues of pool triggers, their globs resolved
        self._pools = PoolQueues(samplers.connections, max_queues=bounds.max_pool_queues)
        self._parse_turns = ParseTurns(
            self._limits.max_new_metadata, self._limits.new_metadata_rate
        )

    # -- the four RPCs ------------------------------------------------------------------------

    @_answers
    async def GetMetricSpec(
        self,
        request: pb.ScaledObjectRef,
        context: grpc.aio.ServicerContext[pb.ScaledObjectRef, pb.GetMetricSpecResponse],
    ) -> pb.GetMetricSpecResponse:
        route = self.known_route(request) or await self._new_route(request)
        spec = route.spec
        await self._samplers_of(route)  # start sampling now, so GetMetrics finds it warm
        if self._probes is not None and spec.dependencies:  # and reading the dependencies
            await self._probes.figures(spec, first_timeout=0.0)
        if route.metric_spec is None:
            target = spec.metric_target
            route.metric_spec = pb.GetMetricSpecResponse(
                metricSpecs=[
                    pb.MetricSpec(
                        metricName=spec.metric_name,
                        targetSize=max(1, round(target)),
                        targetSizeFloat=target,
                    )
                ]
            )
        return route.metric_spec

    @_answers
    async def GetMetrics(
        self,
        request: pb.GetMetricsRequest,
        context: grpc.aio.ServicerContext[pb.GetMetricsRequest, pb.GetMetricsResponse],
    ) -> pb.GetMetricsResponse:
        ref = request.scaledObjectRef
        route = self.known_route(ref) or await self._new_route(ref)
        spec = route.spec
        if request.metricName and request.metricName != spec.metric_name:
            raise InvalidMetadata(
                "metricName",
                f"asked for metric {request.metricName!r}, but this trigger's metric is {spec.metric_name!r}",
            )
        _, decision = self.evaluate_now(ref, spec, route) or await self.evaluate(ref, spec, route)
        if route.answered is decision and route.metric_values is not None:
            return route.metric_values  # the same decision as the last call's
        value = metric_value(spec, decision)
        route.metric_values = pb.GetMetricsResponse(
            metricValues=[
                pb.MetricValue(
                    metricName=spec.metric_name, metricValue=round(value), metricValueFloat=value
                )
            ]
        )
        route.answered = decision
        return route.metric_values

    @_answers
    async def IsActive(
        self,
        request: pb.ScaledObjectRef,
        context: grpc.aio.ServicerContext[pb.ScaledObjectRef, pb.IsActiveResponse],
    ) -> pb.IsActiveResponse:
        route = self.known_route(request) or await self._new_route(request)
        spec = route.spec
        _, decision = self.evaluate_now(request, spec, route) or await self.evaluate(
            request, spec, route
        )
        return _ACTIVE if activity(spec, decision) else _INACTIVE

    async def StreamIsActive(
        self,
        request: pb.ScaledObjectRef,
        context: grpc.aio.ServicerContext[pb.ScaledObjectRef, pb.IsActiveResponse],
    ) -> AsyncIterator[pb.IsActiveResponse]:
        """The current state at once, then ``true`` within a sample of work appearing, repeated
        every second while active. Ends with OK when the server shuts down."""
        try:
            route = self.known_route(request) or await self._new_route(request)
            spec = route.spec
            self._check_stream_room()
            samplers = await self._samplers_of(route)
            with self._stream_open(), contextlib.ExitStack() as watching:
                for sampler in samplers:
                    watching.enter_context(sampler.watched())
                last: bool | None = None
                last_sent = 0.0
                loop = asyncio.get_running_loop()
                while not self.shutting_down.is_set():
                    _, decision = await self.evaluate(request, spec, route)
                    active = activity(spec, decision)
                    now = loop.time()
                    if active != last or (active and now - last_sent >= STREAM_REPEAT):
                        yield _ACTIVE if active else _INACTIVE
                        last, last_sent = active, now
                    await self._next_sample_or_shutdown(_any_sample(samplers, STREAM_REPEAT))
        except ScalerError as error:
            if not self.shutting_down.is_set():  # at shutdown the stream ends with OK
                self._refuse("StreamIsActive", error, context)

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

    def known_route(self, ref: pb.ScaledObjectRef) -> Route | None:
        """The route of a ref seen before, by one lookup (scaler.routes); else None."""
        return self._routes.get(Routes.wire(ref))

    async def _new_route(self, ref: pb.ScaledObjectRef) -> Route:
        """The route of a ref :meth:`known_route` did not find: its spec parsed (or the
        refusal raised), kept for the next call."""
        spec = await self.spec_of(ref)
        route = Route(spec, (ref.namespace, ref.name, spec))
        self._routes.put(Routes.wire(ref), route)
        return route

    async def spec_of(self, ref: pb.ScaledObjectRef) -> TriggerSpec:
        self._limits.check_metadata(ref.scalerMetadata)  # before the cache keeps a large map
        # by namespace too: whether a profile may be used depends on it
        key = spec_key(ref.namespace, ref.scalerMetadata)
        spec = self._specs.cached(key)
        if spec is None:
            # metadata not seen before is parsed one map per turn of the loop, after the work
            # already due (among it the calls answered from cached specs): a flood of new maps
            # does not hold those up (scaler.parse_turns)
            async with self._parse_turns.turn():
                spec = self._specs.cached(key)  # parsed while this call waited
                if spec is None:
                    spec = self._specs.parse(key, ref.namespace, ref.scalerMetadata)
        return spec

    def _parse_uncached(self, namespace: str, metadata: Mapping[str, str]) -> TriggerSpec:
        return parse_metadata(
            metadata, self._profiles, namespace=namespace, urls=self._urls, bounds=self._bounds
        )

    async def _samplers_of(self, route: Route) -> list[Sampler]:
        """The samplers of the trigger's queue, or of each queue of its pool, started if need
        be."""
        spec = route.spec
        if spec.pool is None:
            return [self._sampler_of(spec, route)]
        queues = await self._pools.resolve(spec)
        return [self._samplers.get(member_spec(spec, queue)) for queue in queues]

    def _sampler_of(self, spec: TriggerSpec, route: Route | None) -> Sampler:
        """A single-queue trigger's sampler, kept on its route: the registry's lookup is
        skipped while the sampler the route holds still samples."""
        if route is None:
            return self._samplers.get(spec)
        known, now = route.sampler, time.monotonic()
        if known is not None and known.registered and now - route.asked_at < ASK_REPEAT:
            return known
        sampler = route.sampler = self._samplers.get(spec, known)
        route.asked_at = now
        return sampler

    async def evaluate_pool(
        self, ref: pb.ScaledObjectRef, spec: TriggerSpec, route: Route | None = None
    ) -> PoolDecision:
        """A pool trigger's decision, from each of its queues' cached snapshots."""
        queues = await self._pools.resolve(spec)
        samplers = [self._samplers.get(member_spec(spec, queue)) for queue in queues]
        histories = await asyncio.gather(
            *(sampler.history(self._first_sample_timeout) for sampler in samplers)
        )
        figures = await self._figures(spec)
        key, trigger = self._trigger(ref, spec, route)
        evaluator = trigger.pool = trigger.pool or PoolEvaluator()
        each = [
            QueueHistory(queue, history, sampler.arrivals)
            for queue, history, sampler in zip(queues, histories, samplers, strict=True)
        ]
        evaluation = evaluator.evaluate(each, spec, figures)
        pool = evaluation.pool
        _, within = self._within_budgets(
            key, trigger, _pool_signals(pool), pool.decision, pool, evaluation.fresh
        )
        assert within is not None
        return within

    async def _figures(self, spec: TriggerSpec) -> Mapping[str, ProbeFigure]:
        """The trigger's dependencies' probe figures (none to read: no wait)."""
        if self._probes is None or not spec.dependencies:
            return _NO_FIGURES
        return await self._probes.figures(spec)

    def _trigger(
        self, ref: pb.ScaledObjectRef, spec: TriggerSpec, route: Route | None
    ) -> tuple[TriggerKey, Trigger]:
        """What is kept for the trigger, noted as asked now: one lookup where the route already
        holds it."""
        now = time.monotonic()
        self._forget_idle(now)
        key = (ref.namespace, ref.name, spec) if route is None else route.key
        trigger = None if route is None else route.trigger
        if trigger is None or trigger.forgotten:
            trigger = self._triggers.get(key)
            if trigger is None:
                trigger = self._triggers[key] = Trigger(now, Evaluator())
            if route is not None:
                route.trigger = trigger
        trigger.asked = now
        return key, trigger

    async def evaluate(
        self, ref: pb.ScaledObjectRef, spec: TriggerSpec, route: Route | None = None
    ) -> tuple[QueueSignals, Decision]:
        """Signals and decision for one trigger, from the cached snapshots (for a pool, the
        signals of the queue that drives its decision)."""
        if spec.pool is not None:
            pool = await self.evaluate_pool(ref, spec, route)
            return _driving_signals(pool), pool.decision
        sampler = self._sampler_of(spec, route)
        history = await sampler.history(self._first_sample_timeout)
        figures = _NO_FIGURES if not spec.dependencies else await self._figures(spec)
        return self._evaluated(ref, spec, route, sampler, history, figures)

    def evaluate_now(
        self, ref: pb.ScaledObjectRef, spec: TriggerSpec, route: Route
    ) -> tuple[QueueSignals, Decision] | None:
        """:meth:`evaluate`, where it needs no wait: a single queue, fresh, with no
        dependency to read; else None."""
        if spec.pool is not None or spec.dependencies:
            return None
        sampler = self._sampler_of(spec, route)
        history = sampler.history_now()
        if history is None:
            return None
        return self._evaluated(ref, spec, route, sampler, history, _NO_FIGURES)

    def _evaluated(
        self,
        ref: pb.ScaledObjectRef,
        spec: TriggerSpec,
        route: Route | None,
        sampler: Sampler,
        history: tuple[QueueSnapshot, ...],
        figures: Mapping[str, ProbeFigure],
    ) -> tuple[QueueSignals, Decision]:
        key, trigger = self._trigger(ref, spec, route)
        evaluation = trigger.evaluator.evaluate(history, spec, sampler.arrivals, figures)
        signals = evaluation.signals
        decision, _ = self._within_budgets(
            key, trigger, signals, evaluation.decision, None, evaluation.fresh
        )
        return signals, decision

    def _within_budgets(
        self,
        key: TriggerKey,
        trigger: Trigger,
        signals: QueueSignals,
        decision: Decision,
        pool: PoolDecision | None,
        fresh: bool,
    ) -> tuple[Decision, PoolDecision | None]:
        """The trigger's decision within its pool's share of the dependencies it shares with
        other ScaledObjects (and a pool trigger's queues' allotments of it); recorded and logged
        once per sample and probe figures (``fresh``), and whenever the budgets change it."""
        namespace, name, spec = key
        if spec.dependencies:  # none: nothing shared, no budget to apply
            lateness = None if pool is None else pool.lateness
            decision = self._budgets.apply(
                namespace, name, key, spec, signals, decision, time.monotonic(), lateness
            )
        if pool is not None:
            pool = with_total(pool, decision)
            decision = pool.decision
        if fresh or (decision is not trigger.recorded and decision != trigger.recorded):
            trigger.recorded = decision
            self._metrics.record_decision(namespace, name, spec, signals, decision)
            if pool is not None:
                self._metrics.record_pool(namespace, name, spec, pool)
            self._log_decision(key, trigger, signals, decision, pool)
            for budget in self._budgets.touched(namespace, spec):
                self._metrics.record_budget(budget)
        return decision, pool

    def _forget_idle(self, now: float) -> None:
        """Forget the triggers nobody asked about for ``idle_after``, and the metrics that only
        they had (checked at most every tenth of that time)."""
        if now - self._swept < self._idle_after / 10:
            return
        self._swept = now
        idle = [k for k, t in self._triggers.items() if now - t.asked > self._idle_after]
        for key in idle:
            self._triggers.pop(key).forgotten = True
        self._metrics.keep_budgets(self._budgets.snapshot(now))
        if not idle:
            return
        kept = {Metrics.trigger_labels(ns, name, spec) for ns, name, spec in self._triggers}
        for ns, name, spec in idle:
            labels = Metrics.trigger_labels(ns, name, spec)
            if labels not in kept:
                self._metrics.forget_trigger(labels)

    def _log_decision(
        self,
        key: TriggerKey,
        trigger: Trigger,
        signals: QueueSignals,
        decision: Decision,
        pool: PoolDecision | None = None,
    ) -> None:
        spec = key[2]
        summary = (decision.reason_label, decision.desired_workers)
        level = logging.INFO if trigger.logged != summary else logging.DEBUG
        trigger.logged = summary
        if log.isEnabledFor(level):
            fields = decision_fields(key[0], key[1], spec, signals, decision, pool)
            log.log(level, "%s", decision_text(key, signals, decision), extra=fields)

    async def _next_sample_or_shutdown(self, sample: Awaitable[None]) -> None:
        shutdown = asyncio.ensure_future(self.shutting_down.wait())
        waiting = asyncio.ensure_future(sample)
        try:
            await asyncio.wait((shutdown, waiting), return_when=asyncio.FIRST_COMPLETED)
        finally:
            shutdown.cancel()
            waiting.cancel()

    def _refuse(
        self, method: str, error: ScalerError, context: grpc.aio.ServicerContext[Request, Response]
    ) -> None:
        """End the call with the error's status. Set on the context, not raised with
        ``context.abort``: its exception's traceback and gRPC's frames form a cycle per refused
        call, which only the cyclic collector frees (scaler.process_memory)."""
        code, message = status_of(error)
        self._metrics.record_rpc_error(method, code.name)
        log.debug("%s -> %s: %s", method, code.name, message)
        context.set_code(code)
        context.set_details(message)
