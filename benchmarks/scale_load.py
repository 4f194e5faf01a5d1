"""KEDA's default polling of many ScaledObjects: the load generator of benchmarks/scale.py (a
child process: ``scale --worker``, its config on stdin, its result on stdout).

Each ScaledObject is polled on its own clock, as KEDA's goroutines poll it: every
``HPA_INTERVAL`` (15 s, the HPA's sync period) GetMetricSpec then GetMetrics for the name it
returned, and every ``POLLING_INTERVAL`` (30 s, KEDA's default ``pollingInterval``) IsActive, each
first at a random moment of its interval. The load is open: a slow answer does not slow the
others' clocks.

Where a ScaledObject's metric is the age of its oldest job (``metric: age``) and the benchmark
knows that job's enqueue time (it never leaves the queue), each GetMetrics answer tells how old
the sample it was computed from is: the answer is the age as of the sample, so
``(now - enqueued) - answer`` is the sample's age when the answer arrived.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from collections import Counter
from typing import Any, TextIO

import grpc

from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc

POLLING_INTERVAL = 30.0
HPA_INTERVAL = 15.0
CALL_TIMEOUT = 10.0
RPCS = ("GetMetricSpec", "GetMetrics", "IsActive")
_NAMES = re.compile(r"'[^']*'")
_FIGURES = re.compile(r"\d+(\.\d+)?")


class Record:
    """What the calls inside the window did."""

    def __init__(self, load_from: float, start_at: float, end_at: float) -> None:
        self.load_from, self.start_at, self.end_at = load_from, start_at, end_at
        self.latencies: dict[str, list[float]] = {rpc: [] for rpc in RPCS}
        #: the same, by the queue's class: "GetMetrics hot", "IsActive idle", ...
        self.by_class: dict[str, list[float]] = {}
        self.errors: Counter[str] = Counter()
        #: sample age at answer time (s), by the queue's class ("hot", "idle")
        self.freshness: dict[str, list[float]] = {"hot": [], "idle": []}

    def inside(self, started: float) -> bool:
        return self.start_at <= started < self.end_at

    def call(self, rpc: str, started: float, group: str) -> None:
        if self.inside(started):
            latency = (time.monotonic() - started) * 1000.0
            self.latencies[rpc].append(latency)
            self.by_class.setdefault(f"{rpc} {group}", []).append(latency)

    def error(self, rpc: str, started: float, error: grpc.aio.AioRpcError) -> None:
        """Counted by RPC, code and message, with the names and figures in it left out."""
        if self.inside(started):
            details = _NAMES.sub("'…'", error.details() or "")
            self.errors[f"{rpc} {error.code().name}: {_FIGURES.sub('N', details)[:120]}"] += 1


async def metrics_loop(
    stub: pb_grpc.ExternalScalerAsyncStub,
    ref: pb.ScaledObjectRef,
    known: dict[str, Any],
    record: Record,
    rng: random.Random,
) -> None:
    """The HPA's fetches: GetMetricSpec, then GetMetrics, every HPA_INTERVAL."""
    due = record.load_from + rng.random() * HPA_INTERVAL
    while due < record.end_at:
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        started = time.monotonic()
        due += HPA_INTERVAL
        rpc = "GetMetricSpec"
        try:
            spec = await stub.GetMetricSpec(ref, timeout=CALL_TIMEOUT)
            record.call(rpc, started, known["class"])
            rpc, started = "GetMetrics", time.monotonic()
            request = pb.GetMetricsRequest(
                scaledObjectRef=ref, metricName=spec.metricSpecs[0].metricName
            )
            reply = await stub.GetMetrics(request, timeout=CALL_TIMEOUT)
            record.call(rpc, started, known["class"])
        except grpc.aio.AioRpcError as error:
            record.error(rpc, started, error)
            continue
        enqueued = known.get("oldest")
        if enqueued is not None and record.inside(started):
            age = time.time() - enqueued - reply.metricValues[0].metricValueFloat
            record.freshness[known["class"]].append(age)


async def active_loop(
    stub: pb_grpc.ExternalScalerAsyncStub,
    ref: pb.ScaledObjectRef,
    known: dict[str, Any],
    record: Record,
    rng: random.Random,
) -> None:
    """KEDA's polling loop: IsActive every POLLING_INTERVAL."""
    due = record.load_from + rng.random() * POLLING_INTERVAL
    while due < record.end_at:
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        started = time.monotonic()
        due += POLLING_INTERVAL
        try:
            await stub.IsActive(ref, timeout=CALL_TIMEOUT)
            record.call("IsActive", started, known["class"])
        except grpc.aio.AioRpcError as error:
            record.error("IsActive", started, error)


async def worker(config: dict[str, Any]) -> dict[str, Any]:
    """Polls ``config["objects"]`` from ``load_from`` (at least one polling interval before the
    window, so every clock runs when it opens) until ``end_at``; only calls started in the
    window count."""
    record = Record(float(config["load_from"]), float(config["start_at"]), float(config["end_at"]))
    rng = random.Random(config.get("seed", 1))
    async with grpc.aio.insecure_channel(config["target"]) as channel:
        stub = pb_grpc.ExternalScalerStub(channel)
        objects = config["objects"]
        refs = [
            pb.ScaledObjectRef(
                name=o["name"], namespace=o["namespace"], scalerMetadata=o["metadata"]
            )
            for o in objects
        ]
        await asyncio.sleep(max(0.0, record.load_from - time.monotonic()))
        tasks = [
            asyncio.create_task(metrics_loop(stub, r, o, record, rng))
            for r, o in zip(refs, objects, strict=True)
        ]
        tasks += [
            asyncio.create_task(active_loop(stub, r, o, record, rng))
            for r, o in zip(refs, objects, strict=True)
        ]
        await asyncio.sleep(max(0.0, record.start_at - time.monotonic()))
        cpu_start = time.process_time()
        await asyncio.sleep(max(0.0, record.end_at - time.monotonic()))
        cpu = time.process_time() - cpu_start
        await asyncio.wait_for(asyncio.gather(*tasks), CALL_TIMEOUT * 3)
    return {
        "latencies_ms": record.latencies,
        "latencies_by_class_ms": record.by_class,
        "errors": dict(record.errors),
        "freshness_s": record.freshness,
        "cpu_s": cpu,
    }


def worker_main(stdin: TextIO, stdout: TextIO) -> int:
    result = asyncio.run(worker(json.load(stdin)))
    json.dump(result, stdout)
    stdout.flush()
    return 0
