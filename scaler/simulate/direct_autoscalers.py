"""The alternatives that scale a fleet without KEDA: EC2 Auto Scaling target tracking on
backlog per instance, Judoscale's queue-time range, and a fixed fleet."""

from __future__ import annotations

import collections
import math

from scaler.simulate.autoscaler import Observation
from scaler.simulate.policy_settings import PolicySettings, depth_target
from scaler.simulate.scenario import Scenario


class BacklogPerInstance:
    """EC2 Auto Scaling target tracking on backlog per instance (waiting messages / in service)."""

    def __init__(self, scenario: Scenario, settings: PolicySettings) -> None:
        self.target = settings.number("targetBacklogPerInstance", depth_target(scenario))
        self.period = settings.duration("period", 60.0)
        self.out_points = settings.integer("scaleOutDatapoints", 3)
        self.in_points = settings.integer("scaleInDatapoints", 15)
        self.in_ratio = settings.number("scaleInRatio", 0.9)
        self.min = settings.integer("minCapacity", max(1, scenario.keda.min_replica_count))
        self.max = scenario.keda.max_replica_count
        self.initial = max(self.min, scenario.initial_workers)
        self.points: collections.deque[float] = collections.deque(
            maxlen=max(self.out_points, self.in_points)
        )
        self.next = self.period

    def initial_replicas(self) -> int:
        return self.initial

    def step(self, obs: Observation, replicas: int) -> int:
        if obs.now + 1e-9 < self.next:
            return replicas
        self.next = obs.now + self.period
        if obs.ready == 0:
            return replicas  # no instance in service: the metric has no data
        self.points.append(obs.depth / obs.ready)
        points = list(self.points)
        wanted = math.ceil(obs.depth / self.target - 1e-9)
        desired = replicas
        if len(points) >= self.out_points and all(
            p > self.target for p in points[-self.out_points :]
        ):
            desired = max(replicas, wanted)
        elif len(points) >= self.in_points and all(
            p < self.in_ratio * self.target for p in points[-self.in_points :]
        ):
            desired = min(replicas, wanted)
        return min(max(desired, self.min), self.max)


class Judoscale:
    """A queue-time range: up by ``upscaleJumps`` after a cool-down, down by one per delay."""

    def __init__(self, scenario: Scenario, settings: PolicySettings) -> None:
        target = scenario.target_age
        self.high = settings.duration("upscaleThreshold", target / 2)
        self.low = settings.duration("downscaleThreshold", target / 10)
        self.cooldown = settings.duration("upscaleCooldown", 180.0)
        self.delay = settings.duration("downscaleDelay", 600.0)
        self.jumps = settings.integer("upscaleJumps", 1)
        self.period = settings.duration("checkInterval", 10.0)
        self.min = settings.integer("minDynos", max(1, scenario.keda.min_replica_count))
        self.max = scenario.keda.max_replica_count
        self.initial = max(self.min, scenario.initial_workers)
        self.next = self.period
        self.last_up = -math.inf
        self.last_down = -math.inf
        self.recent: collections.deque[tuple[float, float]] = collections.deque()

    def initial_replicas(self) -> int:
        return self.initial

    def step(self, obs: Observation, replicas: int) -> int:
        if obs.now + 1e-9 < self.next:
            return replicas
        self.next = obs.now + self.period
        now = obs.now
        queue_time = 0.0 if obs.oldest_enqueued_at is None else now - obs.oldest_enqueued_at
        self.recent.append((now, queue_time))
        while self.recent[0][0] < now - self.delay:
            self.recent.popleft()
        if queue_time > self.high and replicas < self.max and now - self.last_up >= self.cooldown:
            self.last_up = now
            return min(self.max, replicas + self.jumps)
        covered = self.recent[0][0] <= now - self.delay + self.period
        quiet = covered and all(q < self.low for _, q in self.recent)
        if quiet and replicas > self.min and now - max(self.last_down, self.last_up) >= self.delay:
            self.last_down = now
            return replicas - 1
        return replicas


class Fixed:
    def __init__(self, replicas: int) -> None:
        self.replicas = replicas

    def initial_replicas(self) -> int:
        return self.replicas

    def step(self, obs: Observation, replicas: int) -> int:
        return self.replicas
