"""The simulated fleet's pods, as the engines share them: boot, the free job slots, scale-out
and scale-in as a ReplicaSet does it, drain and kill, worker-seconds and the time above the
ceiling. An engine keeps the jobs and says what a kill does to them (:meth:`Fleet._kill`)."""

from __future__ import annotations

import collections

from scaler.simulate.pods import Pod, PodState
from scaler.simulate.scenario import Workers


class Fleet:
    def __init__(self, workers: Workers, ceiling: float) -> None:
        self.workers = workers
        self.concurrency = workers.concurrency
        #: the most workers the dependency serves (``math.inf`` without one)
        self.ceiling = ceiling
        # job slots: one entry per free slot of a ready pod (stale entries are skipped)
        self.free: collections.deque[Pod] = collections.deque()
        self.free_slots = 0
        self.pods: list[Pod] = []
        self.replicas = 0
        self.scale_events = 0
        self.worker_seconds = 0.0
        self.over_ceiling_s = 0.0
        self._accounted_to = 0.0

    def _start_fleet(self, initial: int) -> None:
        """The fleet at the start: ``initial`` pods, ready at once."""
        for _ in range(initial):
            pod = Pod(0.0)
            self.pods.append(pod)
            self._ready(pod)
        self.replicas = initial

    def _kill(self, pod: Pod, t: float) -> None:
        """Stop a pod's running jobs; they run again (the engine puts them back)."""
        raise NotImplementedError

    def _account(self, t: float) -> None:
        """Worker-seconds and time over the ceiling for the tick that ends at ``t``."""
        span = t - self._accounted_to
        self._accounted_to = t
        working = sum(1 for p in self.pods if p.state in (PodState.READY, PodState.DRAINING))
        self.worker_seconds += len(self.pods) * span
        if working > self.ceiling:
            self.over_ceiling_s += span

    def _fleet(self, t: float) -> None:
        """Pods that finished booting take jobs; drained pods go; a drain past its time kills."""
        keep: list[Pod] = []
        for pod in self.pods:
            if pod.state == PodState.BOOTING and pod.ready_at <= t + 1e-9:
                self._ready(pod)
            elif pod.state == PodState.DRAINING:
                if pod.jobs and pod.deadline <= t + 1e-9:
                    self._kill(pod, t)
                if not pod.jobs:
                    pod.state = PodState.GONE
                    continue
            keep.append(pod)
        self.pods = keep

    def _ready(self, pod: Pod) -> None:
        pod.state = PodState.READY
        self.free.extend([pod] * self.concurrency)
        self.free_slots += self.concurrency

    def _scale(self, desired: int, t: float) -> None:
        self.scale_events += 1
        if desired > self.replicas:
            boot = self.workers.boot_seconds
            for _ in range(desired - self.replicas):
                pod = Pod(t + boot)
                self.pods.append(pod)
                if boot <= 0:
                    self._ready(pod)
            self.replicas = desired
            return
        # the ReplicaSet deletes pods that are not ready first, then the newest
        victims = [p for p in reversed(self.pods) if p.state == PodState.BOOTING]
        victims += [p for p in reversed(self.pods) if p.state == PodState.READY]
        drain = self.workers.drain_seconds
        for pod in victims[: self.replicas - desired]:
            if pod.state == PodState.READY:
                self.free_slots -= self.concurrency - len(pod.jobs)
            if pod.jobs and drain <= 0:
                self._kill(pod, t)
            pod.state = PodState.DRAINING if pod.jobs else PodState.GONE
            pod.deadline = t + drain
        self.pods = [p for p in self.pods if p.state != PodState.GONE]
        self.replicas = desired
