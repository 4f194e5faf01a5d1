"""KEDA's polling load: ScaledObjects over the queues, and the load generator (a child process:
``keda_poll --worker``, config on stdin, result on stdout) whose clients poll them as KEDA does."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any, TextIO

import grpc

from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc

NAMESPACE = "bench"
#: a load generator that has not reported this long after the window closed is killed
WORKER_GRACE = 60.0


def scaled_objects(
    prefix: str, queues: Sequence[str], per_queue: int, url: str
) -> list[dict[str, Any]]:
    """``per_queue`` ScaledObjects per queue, interleaved so neighbours name different queues."""
    objects = []
    for k in range(per_queue):
        for q, queue in enumerate(queues):
            metadata = {
                "url": url,
                "queue": queue,
                "format": "sidekiq",
                "workerThroughput": "1",
                "targetAge": f"{30 + 15 * k}s",
            }
            objects.append({"name": f"{prefix}-so-q{q:02d}-{k}", "metadata": metadata})
    return objects


def refs_for(objects: Sequence[dict[str, Any]], address: str) -> list[pb.ScaledObjectRef]:
    """As KEDA sends them: every trigger metadata key, ``scalerAddress`` included."""
    return [
        pb.ScaledObjectRef(
            name=o["name"],
            namespace=NAMESPACE,
            scalerMetadata={"scalerAddress": address, **o["metadata"]},
        )
        for o in objects
    ]


async def keda_sequence(stub: pb_grpc.ExternalScalerAsyncStub, ref: pb.ScaledObjectRef) -> None:
    """One poll, as KEDA makes it: GetMetricSpec, GetMetrics for the returned name, IsActive."""
    spec = await stub.GetMetricSpec(ref)
    name = spec.metricSpecs[0].metricName
    await stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=ref, metricName=name))
    await stub.IsActive(ref)


async def client_loop(
    stub: pb_grpc.ExternalScalerAsyncStub,
    refs: Sequence[pb.ScaledObjectRef],
    start_at: float,
    end_at: float,
    latencies: list[float],
    errors: Counter[str],
) -> None:
    """KEDA's pattern for one client's ScaledObjects, until the window closes.

    GetMetricsRequest is rebuilt only when the metric name changes: KEDA builds it every time,
    but here the client's CPU is the server's CPU (2 cores), so the client does as little as it can.
    """
    requests: dict[int, tuple[str, pb.GetMetricsRequest]] = {}
    i = 0
    while True:
        started = time.monotonic()
        if started >= end_at:
            return
        index = i % len(refs)
        ref = refs[index]
        i += 1
        try:
            spec = await stub.GetMetricSpec(ref)
            name = spec.metricSpecs[0].metricName
            cached = requests.get(index)
            if cached is None or cached[0] != name:
                cached = requests[index] = (
                    name,
                    pb.GetMetricsRequest(scaledObjectRef=ref, metricName=name),
                )
            await stub.GetMetrics(cached[1])
            await stub.IsActive(ref)
        except grpc.aio.AioRpcError as error:
            if started >= start_at:
                errors[f"{error.code().name}: {(error.details() or '')[:120]}"] += 1
            continue
        ended = time.monotonic()
        if started >= start_at and ended <= end_at:
            latencies.append((ended - started) * 1000.0)


async def worker(config: dict[str, Any]) -> dict[str, Any]:
    start_at, end_at = float(config["start_at"]), float(config["end_at"])
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    async with grpc.aio.insecure_channel(config["target"]) as channel:
        await asyncio.wait_for(channel.channel_ready(), max(1.0, start_at - time.monotonic()))
        stub = pb_grpc.ExternalScalerStub(channel)
        clients = [refs_for(objects, config["address"]) for objects in config["clients"]]
        loaded_at = time.monotonic()
        tasks = [
            asyncio.create_task(client_loop(stub, refs, start_at, end_at, latencies, errors))
            for refs in clients
            if refs
        ]
        await asyncio.sleep(max(0.0, start_at - time.monotonic()))
        cpu_start = time.process_time()
        await asyncio.sleep(max(0.0, end_at - time.monotonic()))
        cpu_end = time.process_time()
        await asyncio.wait_for(asyncio.gather(*tasks), WORKER_GRACE / 2)
    return {
        "latencies_ms": latencies,
        "errors": dict(errors),
        "cpu_s": cpu_end - cpu_start,
        "late": loaded_at > start_at,
    }


def worker_main(stdin: TextIO, stdout: TextIO) -> int:
    config = json.load(stdin)
    result = asyncio.run(worker(config))
    json.dump(result, stdout)
    stdout.flush()
    return 0
