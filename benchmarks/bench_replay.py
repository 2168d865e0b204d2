"""kvviz.replay's speed against vLLM 0.33's own scheduler loop, measured in one run on the same cases, and the
big traces.

* Every reference case (tests/data/vllm-0.33/replay, replay-more, replay-traces, replay-chunked): vLLM's own
  scheduler loop with its recording switched off (scripts/vllm_reference_replay.py --timing RUNS, in the
  throwaway venv of ../shared/tools/README.md, never a kvviz dependency: fresh schedulers stepped through the
  workload, no per-step or per-request records) and kvviz's `replay` on the same case, RUNS times each, by
  each process's own CPU time (on a shared machine wall time mostly measures the neighbours). Per case: the
  ratio of kvviz's steps per second to vLLM's at each side's fastest run (min time) and at each side's median
  run; over the cases: their median and the slowest case.
* A generated chat trace of 100,000 and of 1,000,000 requests (`chat(n, seed=1, mean_gap=0.05)` on
  Llama 3.1 8B at 40 GiB), each replayed in a fresh process: CPU time and peak RSS (the process's maxrss).
* One request arriving at step 10**9: CPU time.

    PYTHONPATH=. python benchmarks/bench_replay.py --vllm-python /root/vllm-ref/bin/python [--runs 3]
        [--trace-runs 3] [--requests 100000 1000000] [--only SUBSTR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "vllm-0.33"
FOLDERS = {"replay": "scheduler-cases.json", "replay-more": "scheduler-cases.json"}
FOLDERS |= {"replay-traces": "trace-cases.json", "replay-chunked": "scheduler-cases.json"}


def vllm_timing(folder: Path, cases_file: str, python: str, runs: int, only: str | None) -> dict[str, list[float]]:
    """vLLM 0.33's own scheduler loop, recording off, on each case of `folder`: case -> CPU time of each run (s)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        argv = [python, str(ROOT / "scripts" / "vllm_reference_replay.py"), str(folder / cases_file)]
        argv += ["--configs", str(folder / "configs"), "--out", str(out), "--timing", str(runs), "--in-process"]
        if only:
            argv += ["--only", only]
        # a case the script cannot run (the TP 2 case: it builds one rank) is missing from the output
        subprocess.run(argv, check=False, capture_output=True)
        if not out.exists():
            return {}
        return {c["case"]: c["timing"]["runs_cpu_s"] for c in json.loads(out.read_text())["cases"]}


def kvviz_times(folder: Path, case: dict, runs: int) -> tuple[list[float], int]:
    """kvviz's replay of one reference case, `runs` times: CPU times (s) and steps."""
    import kvviz
    from kvviz.replay import replay
    from kvviz.replay.workload import check

    inp = case["inputs"]
    knobs = {"max_model_len": inp["max_model_len"]}
    if inp["tp"] != 1:
        knobs["tensor_parallel_size"] = inp["tp"]
    async_ = inp["async_scheduling"] != "off"
    if not async_:
        knobs["async_scheduling"] = False
    if inp.get("kv_cache_dtype", "auto") != "auto":
        knobs["kv_dtype"] = inp["kv_cache_dtype"]
    plan = kvviz.plan(kvviz.load(str(folder / "configs" / inp["model"] / "config.json")), **knobs)
    limits = {"max_num_batched_tokens": inp.get("max_num_batched_tokens", 8192)}
    if inp.get("max_num_seqs"):
        limits["max_num_seqs"] = inp["max_num_seqs"]
    if inp.get("prefix_caching") == "off":
        limits["enable_prefix_caching"] = False
    work = check(case["workload"])  # the workload as the CLI reads it (vLLM's tokens are made before its clock)
    times = []
    for _ in range(runs):
        t = time.process_time()
        r = replay(plan, work, budget_bytes=inp["kv_budget"], async_scheduling=async_, **limits)
        times.append(time.process_time() - t)
    return times, r.num_steps


def cases(runs: int, python: str, only: str | None) -> None:
    print(
        f"{'case':52} {'steps':>6} {'kvviz min':>10} {'median':>8} {'vLLM min':>9} {'median':>8} "
        f"{'ratio min':>10} {'ratio median':>13}"
    )
    ratios = []
    for name, cases_file in FOLDERS.items():
        folder = DATA / name
        vllm = vllm_timing(folder, cases_file, python, runs, only)
        for case in json.loads((folder / cases_file).read_text())["cases"]:
            if only and only not in case["case"]:
                continue
            label = f"{name}: {case['case']}"
            if case["case"] not in vllm:
                print(f"{label:52} not measured: vLLM's script cannot run it (the TP 2 case: it builds one rank)")
                continue
            mine, steps = kvviz_times(folder, case, runs)
            theirs = vllm[case["case"]]
            best = min(theirs) / min(mine)
            med = statistics.median(theirs) / statistics.median(mine)
            ratios.append((best, med, label))
            print(
                f"{label:52} {steps:>6} {steps / min(mine):>10,.0f} {steps / statistics.median(mine):>8,.0f} "
                f"{steps / min(theirs):>9,.0f} {steps / statistics.median(theirs):>8,.0f} "
                f"{best:>9.1f}x {med:>12.1f}x"
            )
    if ratios:
        print(
            f"over {len(ratios)} cases (steps per second; ratio = kvviz's over vLLM's): median ratio "
            f"{statistics.median(r[0] for r in ratios):.1f}x (min times), "
            f"{statistics.median(r[1] for r in ratios):.1f}x (median times); slowest case "
            f"{min(ratios)[0]:.1f}x (min times, {min(ratios)[2]}), "
            f"{min(ratios, key=lambda r: r[1])[1]:.1f}x (median times, {min(ratios, key=lambda r: r[1])[2]})"
        )


_TRACE = """
import resource, sys, time
import kvviz
from kvviz.replay import chat, replay
n = int(sys.argv[1])
plan = kvviz.plan("llama-3.1-8b", max_model_len=8192)
work = chat(n, seed=1, mean_gap=0.05)
t, c = time.perf_counter(), time.process_time()
r = replay(plan, work, budget_bytes=40 * 2**30)
wall, cpu = time.perf_counter() - t, time.process_time() - c
tot = r.totals_dict()
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB
print(tot["num_steps"], tot["num_finished"], tot["total_preemptions"], wall, cpu, rss)
"""


def big_trace(n: int, runs: int) -> None:
    got = []
    for _ in range(runs):
        p = subprocess.run([sys.executable, "-c", _TRACE, str(n)], capture_output=True, text=True, check=True)
        got.append(p.stdout.split())
    steps, finished, preempted = (int(x) for x in got[0][:3])
    wall, cpu, rss = ([float(g[k]) for g in got] for k in (3, 4, 5))
    print(
        f"{n:,}-request chat trace on llama-3.1-8b, 40 GiB: {steps:,} steps, {finished:,} finished, {preempted:,} "
        f"preemptions; CPU min {min(cpu):.2f} s, median {statistics.median(cpu):.2f} s; wall min {min(wall):.2f} s, "
        f"median {statistics.median(wall):.2f} s; peak RSS max {max(rss):.2f} GiB over {runs} runs (fresh processes)"
    )


def far_arrival(runs: int) -> None:
    import kvviz
    from kvviz.replay import WorkloadRequest, replay

    plan = kvviz.plan("llama-3.1-8b", max_model_len=8192)
    cpu = []
    for _ in range(runs):
        c = time.process_time()
        r = replay(plan, [WorkloadRequest("late", 10**9, 1000, 100)], budget_bytes=2**30)
        cpu.append(time.process_time() - c)
    print(
        f"one request arriving at step 10**9: {r.num_steps:,} steps ({r.totals_dict()['num_idle_steps']:,} idle); "
        f"CPU min {min(cpu) * 1000:.1f} ms, median {statistics.median(cpu) * 1000:.1f} ms over {runs} runs"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--trace-runs", type=int, default=3)
    ap.add_argument("--requests", type=int, nargs="*", default=[100_000, 1_000_000])
    ap.add_argument("--vllm-python", default=None, help="a Python with vllm==0.33.0: the cases against vLLM's loop")
    ap.add_argument("--only", default=None, help="only the cases whose name holds this")
    a = ap.parse_args()
    if a.vllm_python:
        cases(a.runs, a.vllm_python, a.only)
    for n in a.requests:
        big_trace(n, a.trace_runs)
    far_arrival(a.runs)


if __name__ == "__main__":
    main()
