"""How long the simulator takes for a one-hour scenario of about 200,000 jobs, every policy.

Goal (issue 5): under 30 s on one core. Run: ``.venv/bin/python -m benchmarks.simulate_speed``
(``--policies a,b`` for fewer, ``--profile`` to print the top of a cProfile).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from typing import Any

from scaler.simulate.policies import POLICY_NAMES
from scaler.simulate.run import simulate
from scaler.simulate.scenario_file import parse_scenario

#: 55 jobs/s for an hour (about 198,000 jobs) of 1 s database jobs, with a step and a burst
SCENARIO: dict[str, Any] = {
    "name": "speed",
    "duration": "1h",
    "seed": 11,
    "initialWorkers": 15,
    "arrivals": [{"at": 0, "rate": 50}, {"at": "20m", "rate": 65}, {"at": "40m", "rate": 50}],
    "bursts": [{"at": "30m", "jobs": 2000}],
    "jobs": [{"share": 1, "duration": {"median": "1s", "p99": "4s"}, "usesDependency": True}],
    "workers": {"concurrency": 4, "bootSeconds": "30s", "drain": True, "cpuPerJob": 0.2},
    "dependency": {"name": "postgres", "capacity": 150, "perWorker": 4, "apiShare": 0.2},
    "slo": {"targetAge": "60s"},
    "trigger": {
        "url": "redis://sim/0", "queue": "jobs", "format": "rq", "targetAge": "60s",
        "jobDuration": "1.1s", "workerConcurrency": "4", "dependencies": "postgres=120/4",
    },
}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--policies", default=",".join(POLICY_NAMES))
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    scenario = parse_scenario(SCENARIO)
    policies = args.policies.split(",")
    profiler = cProfile.Profile() if args.profile else None
    started = time.process_time()
    if profiler is not None:
        profiler.enable()
    run = simulate(scenario, policies)
    if profiler is not None:
        profiler.disable()
    seconds = time.process_time() - started
    jobs = len(run.results[policies[0]].waits)
    print(
        f"simulate_speed: {jobs} jobs over {scenario.duration:g} s, {len(policies)} policies: "
        f"{seconds:.1f} s of CPU (goal: under 30 s)"
    )
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(15)


if __name__ == "__main__":
    main()
