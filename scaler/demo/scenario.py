"""What the demo plays: the phases of the traffic, the trigger, and KEDA's and the HPA's timings,
all given for a 3-minute run and compressed together by :class:`Timing` for a shorter one (the
jobs get shorter and the rates higher by the same factor: the same workers are needed)."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass

import redis.asyncio as aioredis

from scaler.demo.worker import queue_key
from scaler.simulate.scenario import Hpa, Keda

#: the length of the full demo, in seconds
FULL_LENGTH = 180.0
#: at full length: one job takes a worker this long, one at a time
JOB_SECONDS = 1.0
TARGET_AGE = 20.0
TARGET_DRAIN_TIME = 15.0
#: the dependency the workers share: 16 connections, 2 a worker
DEPENDENCY, DEPENDENCY_LIMIT, PER_WORKER = "database", 16, 2
CEILING = DEPENDENCY_LIMIT // PER_WORKER
MAX_REPLICAS = 20


@dataclass(frozen=True, slots=True)
class Phase:
    name: str
    #: seconds, at full length
    length: float
    #: jobs per second, at full length
    rate: float


PHASES = (
    Phase("quiet", 30.0, 0.5),
    Phase("burst", 30.0, 11.0),
    Phase("peak", 70.0, 6.0),
    Phase("end", 50.0, 0.0),
)


@dataclass(frozen=True, slots=True)
class Timing:
    """The full-length scenario compressed into ``duration`` seconds."""

    duration: float = FULL_LENGTH

    @property
    def factor(self) -> float:
        return self.duration / FULL_LENGTH

    def seconds(self, full_length: float) -> float:
        return full_length * self.factor

    def phase_at(self, elapsed: float) -> Phase:
        start = 0.0
        for phase in PHASES:
            start += self.seconds(phase.length)
            if elapsed < start:
                return phase
        return PHASES[-1]

    def phase_bounds(self) -> list[tuple[Phase, float, float]]:
        """Each phase with its start and end, in seconds of this run."""
        bounds, start = [], 0.0
        for phase in PHASES:
            end = start + self.seconds(phase.length)
            bounds.append((phase, start, end))
            start = end
        return bounds

    def arrivals_by(self, elapsed: float) -> float:
        """Jobs the scenario has sent by ``elapsed`` seconds (the integral of the rate)."""
        total = 0.0
        for phase, start, end in self.phase_bounds():
            if elapsed <= start:
                break
            total += (min(elapsed, end) - start) * phase.rate / self.factor
        return total

    @property
    def job_seconds(self) -> float:
        return self.seconds(JOB_SECONDS)

    @property
    def target_age(self) -> float:
        return self.seconds(TARGET_AGE)

    def metadata(self, redis_url: str, queue: str) -> dict[str, str]:
        """The ScaledObject trigger's metadata."""
        return {
            "scalerAddress": "queue-age-scaler:6000",
            "url": redis_url,
            "queue": queue,
            "format": "sidekiq",
            "targetAge": f"{self.target_age:.3g}s",
            "targetDrainTime": f"{self.seconds(TARGET_DRAIN_TIME):.3g}s",
            "jobDuration": f"{self.job_seconds:.3g}s",
            "workerConcurrency": "1",
            "dependencies": f"{DEPENDENCY}={DEPENDENCY_LIMIT}/{PER_WORKER}",
            "maxWorkers": str(MAX_REPLICAS),
            "sampleInterval": f"{max(0.1, self.seconds(0.5)):.3g}s",
            "rateWindow": f"{self.seconds(10.0):.3g}s",
        }

    @property
    def keda(self) -> Keda:
        """KEDA, quicker than a cluster's defaults (polling every 30 s, cooldown 5 min)."""
        return Keda(
            polling_interval=self.seconds(2.0),
            cooldown_period=self.seconds(20.0),
            min_replica_count=0,
            max_replica_count=MAX_REPLICAS,
        )

    @property
    def hpa(self) -> Hpa:
        """The HPA, quicker than its defaults (sync every 15 s, scale-down window 5 min)."""
        return Hpa(
            sync_period=self.seconds(3.0),
            scale_down_stabilization=self.seconds(20.0),
            scale_up_period=self.seconds(10.0),
        )


def sidekiq_job(queue: str, seconds: float) -> str:
    """A job as Sidekiq 7 pushes it: ``enqueued_at`` in float seconds."""
    now = time.time()
    return json.dumps(
        {
            "class": "DemoJob",
            "args": [seconds],
            "queue": queue,
            "jid": uuid.uuid4().hex[:24],
            "retry": True,
            "created_at": now,
            "enqueued_at": now,
        }
    )


class Producer:
    """Pushes the scenario's jobs as they fall due; :attr:`sent` counts them."""

    def __init__(self, client: aioredis.Redis, queue: str, timing: Timing) -> None:
        self.client = client
        self.queue = queue
        self.timing = timing
        self.sent = 0

    async def push_due(self, elapsed: float) -> None:
        due = int(self.timing.arrivals_by(elapsed))
        if due > self.sent:
            jobs = [
                sidekiq_job(self.queue, self.timing.job_seconds) for _ in range(due - self.sent)
            ]
            await self.client.lpush(queue_key(self.queue), *jobs)
            self.sent = due
