"""kvviz.replay's speed: steps per second on each reference case against vLLM 0.33's own scheduler
on the same case, and a 100,000-request generated trace replayed several times (min and median wall time).

vLLM's steps per second: with --vllm-python (the throwaway venv of ../shared/tools/README.md, never a kvviz
dependency), measured in this run by scripts/vllm_reference_replay.py, vLLM's real Scheduler stepped on
the same case on this machine; without it, the `timing.steps_per_s` the reference file recorded when it
was made (another run, so the ratio also carries the machine's drift between the two).

    PYTHONPATH=. python benchmarks/bench_replay.py [--runs 3] [--requests 100000] [--trace-runs N]
        [--vllm-python /root/vllm-ref/bin/python] [--more]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import kvviz
from kvviz.replay import chat, replay

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "vllm-0.33" / "replay"
MORE = ROOT / "tests" / "data" / "vllm-0.33" / "replay-more"


def vllm_now(folder: Path, python: str) -> dict[str, float]:
    """vLLM 0.33's own scheduler's steps per second on each case of `folder`, measured now on this machine."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        script = ROOT / "scripts" / "vllm_reference_replay.py"
        spec, configs = folder / "scheduler-cases.json", folder / "configs"
        # a case the script cannot run (the TP 2 case: it builds one rank) is missing from the output
        subprocess.run([python, str(script), str(spec), "--configs", str(configs), "--out", str(out)], check=False)
        return {c["case"]: c["timing"]["steps_per_s"] for c in json.loads(out.read_text())["cases"]}


def cases(runs: int, folder: Path, vllm_python: str | None) -> None:
    doc = json.loads((folder / "scheduler-cases.json").read_text())
    measured = vllm_now(folder, vllm_python) if vllm_python else {}
    source = "measured in this run" if vllm_python else "recorded in the reference file"
    print(
        f"{folder.name}: {runs} runs per case; kvviz's steps/s at its fastest (min) and its median run by wall "
        f"time, against vLLM's ({source}); the last column by CPU time (the process's own)"
    )
    print(
        f"{'case':38} {'steps':>6} {'kvviz min':>10} {'kvviz median':>13} {'vLLM steps/s':>13} "
        f"{'ratio min':>10} {'ratio median':>13} {'ratio CPU':>10}"
    )
    worst = []
    for case in doc["cases"]:
        if "timing" not in case:
            continue  # a refused budget: no steps
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
        times, cpu = [], []
        for _ in range(runs):
            t, c = time.perf_counter(), time.process_time()
            r = replay(plan, case["workload"], budget_bytes=inp["kv_budget"], async_scheduling=async_, **limits)
            times.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
        best, med = r.num_steps / min(times), r.num_steps / statistics.median(times)
        ref = measured.get(case["case"]) if vllm_python else case["timing"]["steps_per_s"]
        if not ref:
            print(f"{case['case']:38} not measured: vLLM's run of this case failed (its stderr says why)")
            continue
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
    ap.add_argument("--vllm-python", default=None, help="a Python with vllm==0.33.0: measure vLLM in this run")
    ap.add_argument("--more", action="store_true", help="also the cases of tests/data/vllm-0.33/replay-more")
    a = ap.parse_args()
    for folder in (DATA, MORE) if a.more else (DATA,):
        cases(a.runs, folder, a.vllm_python)
    big_trace(a.requests, a.trace_runs or a.runs)


if __name__ == "__main__":
    main()
