"""`probe` against a real Redis with a steady producer and consumer: the rates it reports are the
ones the producer and consumer counted, within 15%, and its JSON has the documented keys."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import grpc
import pytest
import redis.asyncio as aioredis

from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc
from scaler.probe import probe

pytestmark = pytest.mark.integration
REQUIRED_KEYS = {
    "depth", "in_flight", "oldest_age_seconds", "age_precision", "arrival_rate", "completion_rate",
    "time_to_drain_seconds", "consumers", "desired_workers", "ceiling", "reason",
}  # fmt: skip


async def steady_load(
    client: aioredis.Redis, key: str, arrive: float, take: float, seconds: float
) -> tuple[int, int]:
    """Sidekiq layout: LPUSH new jobs, RPOP the oldest, each at a steady rate; returns the counts."""
    pushed = popped = 0
    start = time.monotonic()

    async def producer() -> None:
        nonlocal pushed
        while time.monotonic() - start < seconds:
            job = {
                "jid": uuid.uuid4().hex,
                "class": "W",
                "args": [],
                "enqueued_at": int(time.time() * 1000),
            }
            await client.lpush(key, json.dumps(job))
            pushed += 1
            await asyncio.sleep(max(0.0, start + pushed / arrive - time.monotonic()))

    async def consumer() -> None:
        nonlocal popped
        while time.monotonic() - start < seconds:
            if await client.rpop(key) is not None:
                popped += 1
            await asyncio.sleep(max(0.0, start + popped / take - time.monotonic()))

    await asyncio.gather(producer(), consumer())
    return pushed, popped


async def test_probe_reports_rates_within_15_percent(redis_url: str) -> None:
    queue = f"qas-probe-{uuid.uuid4().hex[:8]}"
    key = f"queue:{queue}"
    client = aioredis.Redis.from_url(redis_url)
    # a backlog first, so the consumer never finds the list empty nor reaches the new jobs
    await client.lpush(
        key,
        *[
            json.dumps(
                {
                    "jid": f"old{i}",
                    "class": "W",
                    "args": [],
                    "enqueued_at": int((time.time() - 40) * 1000),
                }
            )
            for i in range(1000)
        ],
    )
    try:
        metadata = {
            "url": redis_url,
            "queue": queue,
            "format": "sidekiq",
            "workerThroughput": "5",
            "sampleInterval": "0.5s",
            "rateWindow": "30s",
        }
        load = asyncio.create_task(steady_load(client, key, arrive=40.0, take=60.0, seconds=6.0))
        await asyncio.sleep(0.3)
        report = await probe(metadata, {}, duration=5.0)
        await load
    finally:
        await client.delete(key)
        await client.aclose()
    assert report.keys() >= REQUIRED_KEYS
    assert report["arrival_rate"] == pytest.approx(40.0, rel=0.15)
    assert report["completion_rate"] == pytest.approx(60.0, rel=0.15)
    assert report["arrival_rate_precision"] == "exact"
    assert report["completion_rate_precision"] == "exact"
    assert report["arrival_rate_source"] == "list-marker"
    assert report["age_source"] == "payload:enqueued_at"
    assert report["age_precision"] == "exact"
    assert report["oldest_age_seconds"] == pytest.approx(40.0 + 5.3, abs=1.5)
    # 40/s arriving at 5/s per worker needs 8, plus the backlog: depth / 60 s / 5
    expected = 40.0 / 5 + report["depth"] / 60.0 / 5
    assert report["desired_workers"] == pytest.approx(expected, abs=2)
    assert report["in_flight"] is None and report["consumers"] is None  # Sidekiq shows neither


def test_probe_cli_prints_json_and_fails_clearly_on_bad_input(redis_url: str) -> None:
    exe = str(Path(sys.executable).parent / "queue-age-scaler")
    ok = subprocess.run(
        [
            exe,
            "probe",
            "--duration",
            "1.2",
            "--json",
            f"url={redis_url}",
            "queue=qas-empty-probe",
            "format=rq",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert ok.returncode == 0, ok.stderr
    report = json.loads(ok.stdout)
    assert report["depth"] == 0 and report["reason"] == "idle" and report["desired_workers"] == 0
    assert report["oldest_age_seconds"] == 0.0 and report["age_precision"] == "exact"
    bad = subprocess.run(
        [exe, "probe", "--duration", "1", f"url={redis_url}", "queue=q", "format=sidekik"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert bad.returncode == 2
    assert "format" in bad.stderr and "did you mean 'sidekiq'" in bad.stderr


@pytest.mark.parametrize(
    "metadata",
    [
        pytest.param({"format": "celery"}, id="celery without workerThroughput"),
        pytest.param({"format": "rq", "tragetAge": "30s"}, id="a misspelt key"),
        pytest.param({"format": "rq", "targetAge": "soon"}, id="a bad duration"),
        pytest.param({"format": "rq", "minWorkers": "5", "maxWorkers": "2"}, id="bounds crossed"),
    ],
)
async def test_probe_refuses_what_the_server_refuses_with_the_same_message(
    redis_url: str, stub: pb_grpc.ExternalScalerAsyncStub, metadata: dict[str, str]
) -> None:
    metadata = {"url": redis_url, "queue": "qas-probe-refused"} | metadata
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stub.GetMetricSpec(
            pb.ScaledObjectRef(name="refused", namespace="default", scalerMetadata=metadata)
        )
    exe = str(Path(sys.executable).parent / "queue-age-scaler")
    pairs = [f"{key}={value}" for key, value in metadata.items()]
    done = subprocess.run(
        [exe, "probe", "--duration", "1", *pairs], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 2, done.stdout
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert done.stderr == f"probe: INVALID_ARGUMENT: {refused.value.details()}\n"
