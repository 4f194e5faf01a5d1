"""KEDA and the HPA emulated against a real server over gRPC, scaling real worker processes.

Every ``pollingInterval`` KEDA calls ``GetMetricSpec``, ``GetMetrics`` and ``IsActive`` and moves
the replicas between 0 and 1 (:class:`~scaler.simulate.keda.KedaLoop`); every ``syncPeriod`` the
HPA reads the metric and sets the replicas with its own maths
(:class:`~scaler.simulate.keda.HorizontalPodAutoscaler`): the simulator's code, driven by the
server's answers. An RPC that fails changes nothing, as with KEDA without a fallback: the error
is kept in :attr:`EmulatedKeda.errors`. Used by ``scripts/demo`` and the real-loop test.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping

import grpc

from scaler.demo.processes import WorkerFleet
from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc
from scaler.simulate.keda import (
    HorizontalPodAutoscaler,
    KedaLoop,
    MetricType,
    PodCounts,
    replicas_for,
)
from scaler.simulate.scenario import Hpa, Keda


class EmulatedKeda:
    """One ScaledObject (``AverageValue``, KEDA's default) over ``fleet``."""

    def __init__(
        self,
        stub: pb_grpc.ExternalScalerAsyncStub,
        metadata: Mapping[str, str],
        fleet: WorkerFleet,
        keda: Keda,
        hpa: Hpa,
        *,
        name: str = "workers",
        namespace: str = "demo",
        tick: float = 0.25,
    ) -> None:
        self.stub = stub
        self.ref = pb.ScaledObjectRef(name=name, namespace=namespace, scalerMetadata=metadata)
        self.fleet = fleet
        self.keda_config = keda
        self.hpa_config = hpa
        self.tick = tick
        self.replicas = 0
        #: the metric's last value and target (the desired workers, against 1 by default)
        self.metric: tuple[float, float] | None = None
        #: what it did, one line per change of replicas
        self.log: list[str] = []
        #: RPCs that failed: "method: CODE details"
        self.errors: list[str] = []

    async def run(self, until: asyncio.Event) -> None:
        """Poll and sync until ``until`` is set; scales the fleet as the replicas change."""
        keda = KedaLoop(self.keda_config)
        hpa = HorizontalPodAutoscaler(
            self.hpa_config, self.keda_config.min_replica_count, self.keda_config.max_replica_count
        )
        started = time.monotonic()
        while not until.is_set():
            now = time.monotonic() - started
            if keda.due(now):
                await self._read_metric()
                active = await self._is_active()
                self._apply(now, keda.poll(now, active, self.replicas), "KEDA")
            if hpa.due(now) and self.replicas:
                recommendation = None
                if await self._read_metric() and self.metric is not None:
                    value, target = self.metric
                    pods = PodCounts(self.replicas, self.fleet.ready)
                    recommendation = replicas_for(
                        MetricType.AVERAGE_VALUE, value, target, pods, self.hpa_config.tolerance
                    )
                self._apply(now, hpa.desired(now, recommendation, self.replicas), "HPA")
            self.fleet.watch()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(until.wait(), self.tick)

    def _apply(self, now: float, replicas: int, by: str) -> None:
        if replicas != self.replicas:
            self.log.append(f"{now:5.1f}s {by}: {self.replicas} -> {replicas} workers")
        self.replicas = replicas
        if replicas != self.fleet.ready:
            self.fleet.scale(replicas)

    async def _read_metric(self) -> bool:
        """GetMetricSpec and GetMetrics, as KEDA and the HPA call them; False on an error."""
        try:
            spec = (await self.stub.GetMetricSpec(self.ref)).metricSpecs[0]
            request = pb.GetMetricsRequest(scaledObjectRef=self.ref, metricName=spec.metricName)
            answer = await self.stub.GetMetrics(request)
        except grpc.aio.AioRpcError as error:
            self._failed("GetMetrics", error)
            return False
        self.metric = (answer.metricValues[0].metricValueFloat, spec.targetSizeFloat)
        return True

    async def _is_active(self) -> bool | None:
        try:
            return bool((await self.stub.IsActive(self.ref)).result)
        except grpc.aio.AioRpcError as error:
            self._failed("IsActive", error)
            return None

    def _failed(self, method: str, error: grpc.aio.AioRpcError) -> None:
        self.errors.append(f"{method}: {error.code().name} {error.details()}")
