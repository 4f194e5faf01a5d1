"""The figures of benchmarks/keda_poll.py from its runs, and their rendering as text."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from benchmarks.keda_poll_run import Options, Run, merge

#: KEDA's defaults: pollingInterval 30 s; the HPA asks for metrics every 15 s (no useCachedMetrics)
KEDA_POLLING_INTERVAL = 30.0
HPA_SYNC_PERIOD = 15.0
#: issue 16: the KEDA call path at least this share of bare grpc.aio's throughput
CALL_PATH_GOAL = 0.9


def ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator > 0 else None


def figures(
    rounds: Sequence[dict[str, Run]], options: Options, background: float
) -> dict[str, Any]:
    runs = {kind: merge([r[kind] for r in rounds]) for kind in rounds[0]}
    objects = options.queues * options.per_queue
    real_rate = objects * (1.0 / KEDA_POLLING_INTERVAL + 1.0 / HPA_SYNC_PERIOD)
    result: dict[str, Any] = {
        "setup": {
            "duration_s": options.duration,
            "rounds": len(rounds),
            "pinned": options.pin,
            "redis": "private" if options.private_redis else options.redis_url,
            "clients": options.clients,
            "load_generator_processes": options.procs,
            "queues": options.queues,
            "jobs_per_queue": f"{options.jobs}..{options.jobs + 40}",
            "scaled_objects": objects,
            "cpus": os.cpu_count(),
            "redis_background_cmds_per_s": round(background, 1),
        },
        "servers": {kind: run.summary() for kind, run in runs.items()},
    }
    ours, bare, keda = runs.get("ours"), runs.get("bare"), runs.get("keda")
    if ours and bare:
        result["throughput_ratio_ours_over_bare"] = ratio(ours.per_second, bare.per_second)
        result["throughput_ratio_per_round"] = [
            round(r["ours"].per_second / r["bare"].per_second, 3)
            for r in rounds
            if r["bare"].per_second > 0
        ]
    if ours and keda and keda.sequences:
        per_seq = keda.redis_per_sequence
        fixed = ours.idle_redis_per_second or ours.redis_per_second
        # KEDA's built-in scaler itself runs one EVAL per poll (GetMetricsAndActivity): the
        # commands of one EVAL, where an external scaler runs one on GetMetrics and on IsActive
        evals = keda.redis_calls.get("eval", 0) / keda.sequences
        per_poll = per_seq / evals if evals else per_seq
        result["redis"] = {
            "keda_cmds_per_sequence": round(per_seq, 3),
            "ours_cmds_per_s": round(ours.redis_per_second, 1),
            "ours_idle_cmds_per_s": None if ours.idle_redis_per_second is None else round(fixed, 1),
            "ratio_at_same_rate": ratio(ours.redis_per_second, per_seq * ours.per_second),
            "keda_evals_per_sequence": round(evals, 3),
            "ratio_at_same_rate_vs_one_eval_per_poll": ratio(
                ours.redis_per_second, per_poll * ours.per_second
            ),
            "keda_default_load_sequences_per_s": round(real_rate, 2),
            "ratio_at_keda_default_load": ratio(fixed, per_seq * real_rate),
            "ratio_at_keda_default_load_vs_one_eval_per_poll": ratio(fixed, per_poll * real_rate),
            "break_even_sequences_per_s": ratio(fixed, per_seq),
        }
    return result


def render(result: dict[str, Any]) -> str:
    setup = result["setup"]
    placement = "server pinned to CPU 0, load on the rest" if setup["pinned"] else "unpinned"
    lines = [
        f"{setup['scaled_objects']} ScaledObjects over {setup['queues']} Sidekiq queues "
        f"({setup['jobs_per_queue']} jobs each); {setup['clients']} clients in "
        f"{setup['load_generator_processes']} load generator process(es); "
        f"{setup['duration_s']:g}s per server x {setup['rounds']} round(s); "
        f"{setup['cpus']} CPUs, {placement}; Redis: {setup['redis']}",
        f"Redis commands from other clients before the runs: "
        f"{setup['redis_background_cmds_per_s']:g}/s"
        + (
            " -- the Redis figures below include them; leave out --redis-url for a private Redis"
            if setup["redis_background_cmds_per_s"] > 0
            else ""
        ),
        "",
        f"{'server':<6} {'seq/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7} "
        f"{'srv CPU':>8} {'gen CPU':>8} {'other':>6} {'redis cmd/s':>12} {'cmd/seq':>8} "
        f"{'redis CPU':>9}",
    ]
    for kind, s in result["servers"].items():
        lines.append(
            f"{kind:<6} {s['sequences_per_s']:>8.1f} {s['p50_ms']:>8.2f} {s['p99_ms']:>8.2f} "
            f"{sum(s['errors'].values()):>7} {s['server_cpu_pct']:>7.0f}% "
            f"{s['loadgen_cpu_pct']:>7.0f}% {s['other_cpu_pct']:>5.0f}% "
            f"{s['redis_cmds_per_s']:>12.1f} {s['redis_cmds_per_sequence']:>8.3f} "
            f"{s['redis_cpu_pct']:>8.1f}%"
        )
    lines.append(
        "(CPU in % of one core over the window; 'other' is busy CPU no process of the benchmark "
        "used: other work on the machine, and kernel time for loopback traffic)"
    )
    for kind, s in result["servers"].items():
        by_command = ", ".join(f"{k} {v:g}" for k, v in s["redis_cmds_per_s_by_command"].items())
        lines.append(f"  {kind} Redis commands/s: {by_command or 'none'}")
        for error, count in s["errors"].items():
            lines.append(f"  {kind} error x{count}: {error}")
        if s["late_load_generators"]:
            lines.append(f"  {kind}: {s['late_load_generators']} load generator(s) started late")
    lines.append("")
    share = result.get("throughput_ratio_ours_over_bare")
    if share is not None:
        verdict = "meets" if share >= CALL_PATH_GOAL else "BELOW"
        per_round = ", ".join(f"{x:.2f}" for x in result["throughput_ratio_per_round"])
        lines.append(
            f"throughput ours/bare: {share:.3f} ({verdict} the goal of >= {CALL_PATH_GOAL}); "
            f"per round: {per_round}"
        )
    redis = result.get("redis")
    if redis:
        ours = result["servers"]["ours"]
        same = redis["ratio_at_same_rate"]
        verdict = "meets" if same is not None and same <= 0.1 else "MISSES"
        keda_load = redis["keda_cmds_per_sequence"] * redis["keda_default_load_sequences_per_s"]
        lines += [
            f"Redis, ours vs KEDA's pattern at ours' rate ({ours['sequences_per_s']:.0f} seq/s): "
            f"{redis['ours_cmds_per_s']:g} / ({redis['keda_cmds_per_sequence']:g} x "
            f"{ours['sequences_per_s']:.0f}) = {same:.4f} ({verdict} the goal of <= 0.1); "
            f"vs one EVAL per poll, as KEDA's built-in scaler runs: "
            f"{redis['ratio_at_same_rate_vs_one_eval_per_poll']:.4f}",
            f"Redis at KEDA's default load for {setup['scaled_objects']} ScaledObjects "
            f"({redis['keda_default_load_sequences_per_s']:g} seq/s: pollingInterval 30 s + HPA "
            f"every 15 s): ours {redis['ours_idle_cmds_per_s']} cmds/s, fixed (the samplers; "
            f"measured with no RPCs) vs KEDA's pattern {keda_load:g} cmds/s => ratio "
            f"{redis['ratio_at_keda_default_load']:.2f}; vs one EVAL per poll: "
            f"{redis['ratio_at_keda_default_load_vs_one_eval_per_poll']:.2f}. Ours issues "
            f"fewer commands only above {redis['break_even_sequences_per_s']:.0f} seq/s",
        ]
    return "\n".join(lines)
