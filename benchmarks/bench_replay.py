"""kvviz.replay's speed: steps per second on each reference case against vLLM 0.33's own scheduler
on the same case (the reference records vLLM's `timing.steps_per_s`, its real Scheduler on CPU), and a
100,000-request generated trace replayed several times (min and median wall time).

    PYTHONPATH=. python benchmarks/bench_replay.py [--runs 3] [--requests 100000] [--trace-runs N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import kvviz
from kvviz.replay import chat, replay

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "vllm-0.33" / "replay"


def cases(runs: int) -> None:
    doc = json.loads((DATA / "scheduler-cases.json").read_text())
    print(
        f"{runs} runs per case; kvviz's steps/s at its fastest (min) and its median run by wall time, against "
        f"vLLM's recorded; the last column by CPU time (the process's own, whatever else shares the machine)"
    )
    print(
        f"{'case':38} {'steps':>6} {'kvviz min':>10} {'kvviz median':>13} {'vLLM steps/s':>13} "
        f"{'ratio min':>10} {'ratio median':>13} {'ratio CPU':>10}"
    )
    worst = []
    for case in doc["cases"]:
        inp = case["inputs"]
        knobs = {"max_model_len": inp["max_model_len"]}
        if inp["tp"] != 1:
            knobs["tensor_parallel_size"] = inp["tp"]
        async_ = inp["async_scheduling"] != "off"
        if not async_:
            knobs["async_scheduling"] = False
        plan = kvviz.plan(kvviz.load(str(DATA / "configs" / inp["model"] / "config.json")), **knobs)
        times, cpu = [], []
        for _ in range(runs):
            t, c = time.perf_counter(), time.process_time()
            r = replay(plan, case["workload"], budget_bytes=inp["kv_budget"], async_scheduling=async_)
            times.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
        best, med = r.num_steps / min(times), r.num_steps / statistics.median(times)
        ref = case["timing"]["steps_per_s"]
        by_cpu = r.num_steps / min(cpu) / ref
        worst.append((best / ref, med / ref, by_cpu))
        print(
            f"{case['case']:38} {r.num_steps:>6} {best:>10,.0f} {med:>13,.0f} {ref:>13,.1f} "
            f"{best / ref:>9.1f}x {med / ref:>12.1f}x {by_cpu:>9.1f}x"
        )
    print(
        f"lowest ratio over the cases: {min(w[0] for w in worst):.1f}x (min), {min(w[1] for w in worst):.1f}x "
        f"(median), {min(w[2] for w in worst):.1f}x (CPU)"
    )


def big_trace(n: int, runs: int) -> None:
    plan = kvviz.plan("llama-3.1-8b", max_model_len=8192)
    work = chat(n, seed=1, mean_gap=0.05)
    times, cpu = [], []
    for _ in range(runs):
        t, c = time.perf_counter(), time.process_time()
        r = replay(plan, work, budget_bytes=40 * 2**30)
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    tot = r.totals_dict()
    print(
        f"{n:,}-request chat trace on llama-3.1-8b, 40 GiB: {tot['num_steps']:,} steps, {tot['num_finished']:,} "
        f"finished, {tot['total_preemptions']:,} preemptions; wall min {min(times):.2f} s, median "
        f"{statistics.median(times):.2f} s; CPU min {min(cpu):.2f} s, median {statistics.median(cpu):.2f} s "
        f"over {runs} runs"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--trace-runs", type=int, default=None, help="runs of the big trace (default: --runs)")
    a = ap.parse_args()
    cases(a.runs)
    big_trace(a.requests, a.trace_runs or a.runs)


if __name__ == "__main__":
    main()
