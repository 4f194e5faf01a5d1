"""The fleet: a job-level discrete-event simulation of one autoscaler on one workload.

Jobs wait in one FIFO queue and run on the free job slots of ready workers, the slot idle longest
first (as blocked consumers are served). Workers boot for ``bootSeconds`` before they take jobs;
a worker that is scaled in stops taking jobs and finishes its running ones within the drain time,
or is killed and its jobs run again (duplicates). Jobs that use the dependency hold one of its
slots while they run; the API keeps ``apiShare`` of them busy, another service's sessions hold
some (``otherSessions``). Over the slots every operation waits its turn (processor sharing), so
each one, jobs and the API's alike, takes ``demand / slots`` times as long; with a USL curve
(``usl``) the running ones slow with contention too (``scaler.simulate.pods.usl_rate``).

Job events (arrivals, completions) are exact; fleet changes and the autoscaler run on a control
tick (1 s, or the trigger's ``sampleInterval`` if shorter). The hot loop keeps its state in
locals: it runs a few million times per scenario.
"""

from __future__ import annotations

import collections
import heapq
import math
from collections.abc import Callable

from scaler.simulate.autoscaler import Autoscaler, Observation
from scaler.simulate.fleet import Fleet
from scaler.simulate.pods import Pod, PodState, usl_rate
from scaler.simulate.run_result import RunResult, Series
from scaler.simulate.scenario import Scenario
from scaler.simulate.workload import Workload


class Simulation(Fleet):
    def __init__(
        self,
        scenario: Scenario,
        workload: Workload,
        autoscaler: Autoscaler,
        *,
        tick: float,
        series_step: float,
        progress: Callable[[float], None] | None = None,
    ) -> None:
        ceiling = scenario.ceiling
        super().__init__(scenario.workers, ceiling if ceiling is not None else math.inf)
        self.scenario = scenario
        self.autoscaler = autoscaler
        self.tick = tick
        self.series_step = series_step
        self.progress = progress
        self.arr = workload.arrivals
        self.dur = workload.durations
        self.dep = workload.uses_dependency
        self.cpu = workload.cpu_milli
        jobs = workload.jobs
        self.attempt = [0] * jobs
        self.job_pod: list[Pod | None] = [None] * jobs
        self.target = scenario.target_age
        dependency = scenario.dependency
        self.dependency = dependency
        #: slots the jobs and the API may hold now (the capacity less others' sessions)
        self.capacity = float(dependency.slots_at(0.0))
        self.api_slots = dependency.api_slots
        self.api_op = dependency.api_operation_seconds
        # the speed of operations at a demand on a USL curve; None: flat past the slots
        sigma, kappa = dependency.sigma, dependency.kappa
        curve = lambda demand: usl_rate(demand, self.capacity, sigma, kappa)  # noqa: E731
        self.curve: Callable[[float], float] | None = curve if dependency.curved else None
        # the queue: jobs [qhead, na) in arrival order, behind the requeued ones
        self.na = 0
        self.qhead = 0
        self.retry: collections.deque[int] = collections.deque()
        self.head_since = 0.0
        self.heap: list[tuple[float, int, int]] = []
        # jobs on the dependency finish at a virtual time that runs at ``rate``
        self.dep_heap: list[tuple[float, int, int]] = []
        self.n_dep = 0
        self.vtime = 0.0
        self.v_at = 0.0
        self.rate = 1.0
        self.rate_since = 0.0
        self.api_waits: dict[float, float] = {}
        self.busy = 0
        self.cpu_m = 0
        self.done = 0
        self.starts = 0
        self.waits: list[float] = []
        self.viol = 0.0
        self.now = 0.0
        self.duplicates = 0
        self._every = 1
        self._report = 1
        self.series = Series()

    # -- the run ------------------------------------------------------------------------------

    def run(self) -> RunResult:
        for k in range(1, self.start() + 1):
            self.step(k)
        return self._finish()

    @property
    def ticks(self) -> int:
        """Control ticks in the run."""
        return math.ceil(self.scenario.duration / self.tick - 1e-9)

    def start(self) -> int:
        """The initial fleet; returns the ticks to :meth:`step` through, 1 to that number."""
        self._start_fleet(self.autoscaler.initial_replicas())
        self._every = max(1, round(self.series_step / self.tick))
        self._report = max(1, self.ticks // 10)
        self._sample_series(0.0)
        return self.ticks

    def step(self, k: int) -> None:
        """Control tick ``k``: the jobs up to its time, the fleet, the autoscaler's answer."""
        t = min(k * self.tick, self.scenario.duration)
        self._advance(t)
        self._account(t)
        if self.dependency.others:
            self._slots(t)
        self._fleet(t)
        desired = self.autoscaler.step(self._observe(t), self.replicas)
        if desired != self.replicas:
            self._scale(desired, t)
        if k % self._every == 0:
            self._sample_series(t)
        if self.progress is not None and k % self._report == 0:
            self.progress(k / self.ticks)

    def finish(self) -> RunResult:
        """The figures, once every tick has run."""
        return self._finish()

    @property
    def working(self) -> int:
        """Workers that take or finish jobs now (ready and draining)."""
        return sum(1 for p in self.pods if p.state in (PodState.READY, PodState.DRAINING))

    def share_dependency(self, others: float, t: float) -> None:
        """Jobs of other fleets on the same dependency at ``t``: they load it as the API does,
        so this fleet's operations there run at the speed of the whole demand."""
        self.api_slots = self.dependency.api_slots + others
        self._set_dependency_jobs(self.n_dep, t)

    def _advance(self, until: float) -> None:  # noqa: C901 - the hot loop, kept in one frame
        """Run job events up to ``until``: arrivals, starts on free slots, completions."""
        arr, dur, dep, cpu = self.arr, self.dur, self.dep, self.cpu
        attempt, job_pod, retry, free = self.attempt, self.job_pod, self.retry, self.free
        heap, dep_heap, waits = self.heap, self.dep_heap, self.waits
        na, qhead, free_slots, busy = self.na, self.qhead, self.free_slots, self.busy
        cpu_m, done, starts, n_dep = self.cpu_m, self.done, self.starts, self.n_dep
        vtime, v_at, rate, rate_since = self.vtime, self.v_at, self.rate, self.rate_since
        viol, head_since, target, now = self.viol, self.head_since, self.target, self.now
        capacity, api, api_op, api_waits = (
            self.capacity,
            self.api_slots,
            self.api_op,
            self.api_waits,
        )
        push, pop, ready, curve = heapq.heappush, heapq.heappop, PodState.READY, self.curve
        while True:
            while free_slots and (retry or qhead < na):
                if retry:
                    j = retry.popleft()
                else:
                    j = qhead
                    qhead += 1
                over = arr[j] + target
                if now > over:
                    viol += now - (head_since if head_since > over else over)
                head_since = now
                pod = free.popleft()
                while pod.state != ready:
                    pod = free.popleft()
                free_slots -= 1
                a = attempt[j]
                if not a:
                    waits.append(now - arr[j])
                a += 1
                attempt[j] = a
                pod.jobs.add(j)
                job_pod[j] = pod
                busy += 1
                starts += 1
                cpu_m += cpu[j]
                if dep[j]:
                    vtime += (now - v_at) * rate
                    v_at = now
                    n_dep += 1
                    demand = n_dep + api
                    if curve is None:
                        new_rate = 1.0 if demand <= capacity else capacity / demand
                    else:
                        new_rate = curve(demand)
                    if new_rate != rate:
                        if rate < 1.0:
                            key = round(api_op * (1 / rate - 1), 4)
                            api_waits[key] = api_waits.get(key, 0.0) + now - rate_since
                        rate, rate_since = new_rate, now
                    push(dep_heap, (vtime + dur[j], j, a))
                else:
                    push(heap, (now + dur[j], j, a))
            t_next = arr[na]
            kind = 0
            if heap and heap[0][0] < t_next:
                t_next = heap[0][0]
                kind = 1
            if dep_heap:
                t_dep = v_at + (dep_heap[0][0] - vtime) / rate
                if t_dep < t_next:
                    t_next = t_dep
                    kind = 2
            if t_next > until:
                break
            now = t_next
            if kind == 0:
                if not retry and qhead == na:
                    head_since = now
                na += 1
                continue
            _, j, a = pop(heap) if kind == 1 else pop(dep_heap)
            pod_or_none = job_pod[j]
            if pod_or_none is None or attempt[j] != a:
                continue  # the job's worker was killed; it runs again
            pod = pod_or_none
            pod.jobs.discard(j)
            job_pod[j] = None
            busy -= 1
            cpu_m -= cpu[j]
            done += 1
            if pod.state == ready:
                free.append(pod)
                free_slots += 1
            if kind == 2:
                vtime += (now - v_at) * rate
                v_at = now
                n_dep -= 1
                demand = n_dep + api
                if curve is None:
                    new_rate = 1.0 if demand <= capacity else capacity / demand
                else:
                    new_rate = curve(demand)
                if new_rate != rate:
                    if rate < 1.0:
                        key = round(api_op * (1 / rate - 1), 4)
                        api_waits[key] = api_waits.get(key, 0.0) + now - rate_since
                    rate, rate_since = new_rate, now
        self.na, self.qhead, self.free_slots, self.busy = na, qhead, free_slots, busy
        self.cpu_m, self.done, self.starts, self.n_dep = cpu_m, done, starts, n_dep
        self.vtime, self.v_at, self.rate, self.rate_since = vtime, v_at, rate, rate_since
        self.viol, self.head_since, self.now = viol, head_since, until

    # -- the fleet (once per tick: scaler.simulate.fleet) -------------------------------------

    def _kill(self, pod: Pod, t: float) -> None:
        """Stop a pod's running jobs; they go back to the head of the queue and run again."""
        jobs = sorted(pod.jobs, key=self.arr.__getitem__)
        pod.jobs.clear()
        for j in jobs:
            self.job_pod[j] = None
            self.busy -= 1
            self.cpu_m -= self.cpu[j]
            if self.dep[j]:
                self._set_dependency_jobs(self.n_dep - 1, t)
        self.duplicates += len(jobs)
        if self.retry or self.qhead < self.na:
            # the current oldest waiting job stops being the oldest: close its interval
            head = self.retry[0] if self.retry else self.qhead
            over = self.arr[head] + self.target
            if t > over:
                self.viol += t - max(self.head_since, over)
        self.retry.extendleft(reversed(jobs))
        self.head_since = t

    def _set_dependency_jobs(self, count: int, t: float) -> None:
        self.vtime += (t - self.v_at) * self.rate
        self.v_at = t
        self.n_dep = count
        demand = count + self.api_slots
        if self.curve is not None:
            rate = self.curve(demand)
        else:
            rate = 1.0 if demand <= self.capacity else self.capacity / demand
        if rate != self.rate:
            self._close_rate(t)
            self.rate = rate

    def _slots(self, t: float) -> None:
        """Another service's sessions at ``t``: the slots left and the ceiling they allow."""
        if (slots := float(self.dependency.slots_at(t))) != self.capacity:
            self.capacity, self.ceiling = slots, self.dependency.ceiling_at(t) or 0
            self._set_dependency_jobs(self.n_dep, t)

    def _close_rate(self, t: float) -> None:
        if self.rate < 1.0:
            key = round(self.api_op * (1 / self.rate - 1), 4)
            self.api_waits[key] = self.api_waits.get(key, 0.0) + t - self.rate_since
        self.rate_since = t

    # -- what the autoscalers and the figures see ---------------------------------------------

    def _observe(self, t: float) -> Observation:
        counts = [0, 0, 0, 0]
        draining_cpu = 0
        for pod in self.pods:
            counts[pod.state] += 1
            if pod.state == PodState.DRAINING:
                draining_cpu += sum(self.cpu[j] for j in pod.jobs)
        return Observation(
            now=t,
            depth=len(self.retry) + self.na - self.qhead,
            in_flight=self.busy,
            oldest_enqueued_at=self._oldest(),
            arrivals_total=self.na,
            starts_total=self.starts,
            completions_total=self.done,
            booting=counts[PodState.BOOTING],
            ready=counts[PodState.READY],
            draining=counts[PodState.DRAINING],
            cpu_ready=(self.cpu_m - draining_cpu) / 1000,
            dependency_slots=self.capacity - self.dependency.api_slots,
            queue_head=self.qhead,
            requeued=tuple(self.retry),
            arrival_times=self.arr,
        )

    def _oldest(self) -> float | None:
        if self.retry:
            return self.arr[self.retry[0]]
        if self.qhead < self.na:
            return self.arr[self.qhead]
        return None

    def _sample_series(self, t: float) -> None:
        oldest = self._oldest()
        series = self.series
        series.times.append(t)
        series.oldest_age.append(0.0 if oldest is None else t - oldest)
        series.workers.append(
            sum(1 for p in self.pods if p.state in (PodState.READY, PodState.DRAINING))
        )

    def _finish(self) -> RunResult:
        end = self.scenario.duration
        oldest = self._oldest()
        if oldest is not None and end > oldest + self.target:
            self.viol += end - max(self.head_since, oldest + self.target)
        waiting = list(self.retry) + list(range(self.qhead, self.na))
        self.waits.extend(end - self.arr[j] for j in waiting if not self.attempt[j])
        self._close_rate(end)
        return RunResult(
            waits=self.waits,
            slo_violation_s=self.viol,
            worker_seconds=self.worker_seconds,
            scale_events=self.scale_events,
            over_ceiling_s=self.over_ceiling_s,
            api_waits=self.api_waits,
            duplicates=self.duplicates,
            completed=self.done,
            series=self.series,
        )
