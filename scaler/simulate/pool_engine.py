"""A pool's fleet: one set of workers serving several FIFO queues, a job-level discrete-event
simulation of one autoscaler on one pool scenario.

Each queue is a FIFO of its own; a free job slot (the one idle longest) takes the next job of the
queue the serving order picks among those with jobs waiting: ``strict``, the first in the list
(Sidekiq's strict ordering, RQ); ``weighted``, queue *i* with probability ``w_i / Σ w`` of the
queues with jobs (Sidekiq's weighted random fetch: a shuffle weighted by the weights, then the
first queue with a job); ``roundRobin``, the first with jobs in a cycle that moves the queue served
to its end (kombu's ``round_robin_cycle``, which Celery's worker reads its queues with).

Workers boot, drain and are killed as in :mod:`scaler.simulate.engine`. The dependency is a
ceiling on the workers (the time above it is counted); unlike the single-queue engine, its
slowdown past its slots is not modelled. Violation seconds are counted per queue, against the
queue's own target, and summed.
"""

from __future__ import annotations

import collections
import heapq
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from scaler.pool_spec import ServingOrder
from scaler.simulate.autoscaler import Observation
from scaler.simulate.fleet import Fleet
from scaler.simulate.pods import Pod, PodState
from scaler.simulate.pool_scenario import PoolScenario
from scaler.simulate.run_result import RunResult, Series
from scaler.simulate.workload import Workload


@dataclass(frozen=True, slots=True)
class PoolObservation:
    """The pool at one control tick: each queue as a single-queue autoscaler would see it
    (the fleet's pods in each), and all queues together (depths, rates and jobs summed, the
    oldest job of any queue)."""

    queues: tuple[Observation, ...]
    total: Observation

    @property
    def now(self) -> float:
        return self.total.now


class PoolAutoscaler:
    """One policy on a pool: the replicas it starts with, and its answer at every tick."""

    def initial_replicas(self) -> int:
        raise NotImplementedError

    def step(self, obs: PoolObservation, replicas: int) -> int:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class PoolRunResult:
    result: RunResult
    #: violation seconds of each queue, against its own target
    queue_violations: tuple[float, ...]
    #: each queue's waits (enqueue to first start; jobs still waiting count their wait so far)
    queue_waits: tuple[list[float], ...]
    #: jobs of each queue completed
    queue_completed: tuple[int, ...]


class PoolSimulation(Fleet):
    def __init__(
        self,
        pool: PoolScenario,
        workloads: Sequence[Workload],
        autoscaler: PoolAutoscaler,
        *,
        tick: float,
    ) -> None:
        ceiling = pool.base.ceiling
        super().__init__(pool.base.workers, ceiling if ceiling is not None else math.inf)
        self.pool = pool
        self.autoscaler = autoscaler
        self.tick = tick
        self.k = len(pool.queues)
        # jobs numbered across the queues: queue q's are [offset[q], offset[q] + jobs)
        self.times = [w.arrivals for w in workloads]
        offsets = [0]
        for w in workloads:
            offsets.append(offsets[-1] + w.jobs)
        self.offset = offsets
        self.dur = [d for w in workloads for d in w.durations]
        self.cpu = [c for w in workloads for c in w.cpu_milli]
        total = offsets[-1]
        self.attempt = [0] * total
        self.job_pod: list[Pod | None] = [None] * total
        self.target = [q.target_age for q in pool.queues]
        self.weights = [q.weight for q in pool.queues]
        self.order = pool.order
        self.cycle = list(range(self.k))
        self.rng = random.Random(f"{pool.base.seed}:serving")
        self.na = [0] * self.k
        self.qhead = [0] * self.k
        self.retry: list[collections.deque[int]] = [collections.deque() for _ in range(self.k)]
        self.head_since = [0.0] * self.k
        self.viol = [0.0] * self.k
        self.waits: list[list[float]] = [[] for _ in range(self.k)]
        self.busy = [0] * self.k
        self.starts = [0] * self.k
        self.done = [0] * self.k
        self.heap: list[tuple[float, int, int]] = []
        self.cpu_m = 0
        self.now = 0.0
        self.duplicates = 0

    def run(self) -> PoolRunResult:
        self._start_fleet(self.autoscaler.initial_replicas())
        duration = self.pool.duration
        ticks = math.ceil(duration / self.tick - 1e-9)
        for k in range(1, ticks + 1):
            t = min(k * self.tick, duration)
            self._advance(t)
            self._account(t)
            self._fleet(t)
            desired = self.autoscaler.step(self._observe(t), self.replicas)
            if desired != self.replicas:
                self._scale(desired, t)
        return self._finish()

    # -- jobs ---------------------------------------------------------------------------------

    def _waiting(self, q: int) -> bool:
        return bool(self.retry[q]) or self.qhead[q] < self.na[q]

    def _pick(self) -> int:
        """The queue the next free slot takes a job from; -1 when none has one."""
        if self.order is ServingOrder.STRICT:
            for q in range(self.k):
                if self._waiting(q):
                    return q
            return -1
        if self.order is ServingOrder.ROUND_ROBIN:
            for index, q in enumerate(self.cycle):
                if self._waiting(q):
                    self.cycle.append(self.cycle.pop(index))
                    return q
            return -1
        candidates = [q for q in range(self.k) if self._waiting(q)]
        if not candidates:
            return -1
        draw = self.rng.random() * sum(self.weights[q] for q in candidates)
        for q in candidates:
            draw -= self.weights[q]
            if draw < 0:
                return q
        return candidates[-1]

    def _start(self, q: int) -> None:
        now = self.now
        if self.retry[q]:
            g = self.retry[q].popleft()
            enqueued = self.times[q][g - self.offset[q]]
        else:
            j = self.qhead[q]
            self.qhead[q] += 1
            g, enqueued = self.offset[q] + j, self.times[q][j]
        over = enqueued + self.target[q]
        if now > over:
            self.viol[q] += now - max(self.head_since[q], over)
        self.head_since[q] = now
        pod = self.free.popleft()
        while pod.state != PodState.READY:
            pod = self.free.popleft()
        self.free_slots -= 1
        if not self.attempt[g]:
            self.waits[q].append(now - enqueued)
        self.attempt[g] += 1
        pod.jobs.add(g)
        self.job_pod[g] = pod
        self.busy[q] += 1
        self.starts[q] += 1
        self.cpu_m += self.cpu[g]
        heapq.heappush(self.heap, (now + self.dur[g], g, self.attempt[g]))

    def _queue_of(self, g: int) -> int:
        q = 0
        while g >= self.offset[q + 1]:
            q += 1
        return q

    def _advance(self, until: float) -> None:
        heap = self.heap
        while True:
            while self.free_slots:
                q = self._pick()
                if q < 0:
                    break
                self._start(q)
            t_next, kind = math.inf, -1
            for q in range(self.k):
                t = self.times[q][self.na[q]]
                if t < t_next:
                    t_next, kind = t, q
            if heap and heap[0][0] < t_next:
                t_next, kind = heap[0][0], self.k
            if t_next > until:
                break
            self.now = t_next
            if kind < self.k:
                if not self._waiting(kind):
                    self.head_since[kind] = t_next
                self.na[kind] += 1
                continue
            _, g, a = heapq.heappop(heap)
            pod = self.job_pod[g]
            if pod is None or self.attempt[g] != a:
                continue  # the job's worker was killed; it runs again
            q = self._queue_of(g)
            pod.jobs.discard(g)
            self.job_pod[g] = None
            self.busy[q] -= 1
            self.done[q] += 1
            self.cpu_m -= self.cpu[g]
            if pod.state == PodState.READY:
                self.free.append(pod)
                self.free_slots += 1
        self.now = until

    # -- the fleet (scaler.simulate.fleet) ---------------------------------------------------

    def _kill(self, pod: Pod, t: float) -> None:
        """Stop a pod's running jobs; each goes back to the head of its queue."""
        jobs = sorted(pod.jobs)
        pod.jobs.clear()
        self.duplicates += len(jobs)
        for g in reversed(jobs):
            q = self._queue_of(g)
            self.job_pod[g] = None
            self.busy[q] -= 1
            self.cpu_m -= self.cpu[g]
            if self._waiting(q):  # the oldest waiting job stops being the oldest
                over = self._oldest(q) + self.target[q]
                if t > over:
                    self.viol[q] += t - max(self.head_since[q], over)
            self.retry[q].appendleft(g)
            self.head_since[q] = t

    # -- what the autoscalers see -------------------------------------------------------------

    def _oldest(self, q: int) -> float:
        if self.retry[q]:
            return self.times[q][self.retry[q][0] - self.offset[q]]
        return self.times[q][self.qhead[q]]

    def _observe(self, t: float) -> PoolObservation:
        counts = [0, 0, 0, 0]
        draining_cpu = 0
        for pod in self.pods:
            counts[pod.state] += 1
            if pod.state == PodState.DRAINING:
                draining_cpu += sum(self.cpu[g] for g in pod.jobs)
        booting, ready, draining = counts[0], counts[1], counts[2]
        cpu = (self.cpu_m - draining_cpu) / 1000
        queues = []
        for q in range(self.k):
            waiting = self._waiting(q)
            queues.append(
                Observation(
                    now=t,
                    depth=len(self.retry[q]) + self.na[q] - self.qhead[q],
                    in_flight=self.busy[q],
                    oldest_enqueued_at=self._oldest(q) if waiting else None,
                    arrivals_total=self.na[q],
                    starts_total=self.starts[q],
                    completions_total=self.done[q],
                    booting=booting,
                    ready=ready,
                    draining=draining,
                    cpu_ready=cpu,
                    queue_head=self.qhead[q],
                    requeued=tuple(g - self.offset[q] for g in self.retry[q]),
                    arrival_times=self.times[q],
                )
            )
        oldest = [o.oldest_enqueued_at for o in queues if o.oldest_enqueued_at is not None]
        total = Observation(
            now=t,
            depth=sum(o.depth for o in queues),
            in_flight=sum(self.busy),
            oldest_enqueued_at=min(oldest) if oldest else None,
            arrivals_total=sum(self.na),
            starts_total=sum(self.starts),
            completions_total=sum(self.done),
            booting=booting,
            ready=ready,
            draining=draining,
            cpu_ready=cpu,
            queue_head=0,
            requeued=(),
            arrival_times=(),
        )
        return PoolObservation(tuple(queues), total)

    def _finish(self) -> PoolRunResult:
        end = self.pool.duration
        for q in range(self.k):
            if self._waiting(q):
                over = self._oldest(q) + self.target[q]
                if end > over:
                    self.viol[q] += end - max(self.head_since[q], over)
            times = self.times[q]
            waiting = [g - self.offset[q] for g in self.retry[q]]
            waiting += list(range(self.qhead[q], self.na[q]))
            self.waits[q].extend(
                end - times[j] for j in waiting if not self.attempt[self.offset[q] + j]
            )
        result = RunResult(
            waits=[w for waits in self.waits for w in waits],
            slo_violation_s=sum(self.viol),
            worker_seconds=self.worker_seconds,
            scale_events=self.scale_events,
            over_ceiling_s=self.over_ceiling_s,
            api_waits={},
            duplicates=self.duplicates,
            completed=sum(self.done),
            series=Series(),
        )
        return PoolRunResult(result, tuple(self.viol), tuple(self.waits), tuple(self.done))
