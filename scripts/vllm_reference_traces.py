"""More real-trace references (issue 38): windows of the published traces (Mooncake's conversation and synthetic
traces, Azure's 2023 code and conversation traces) replayed by vLLM 0.33's own scheduler on models and settings
the first four leave out: chunked local attention (Llama 4 Scout), MLA (DeepSeek-V2-Lite), Mamba hybrids
(Nemotron-Nano's Mamba-2, Jamba's Mamba-1), an fp8 KV cache and TP 2, at budgets that preempt.

Two steps, two venvs:

    # 1. the spec: each case's inputs and its workload, read from the trace rows by kvviz's own reader
    #    (kvviz.replay.read_trace: the rule of ../shared/data/vllm-0.33/replay-traces/README.md)
    PYTHONPATH=$PWD .venv/bin/python scripts/vllm_reference_traces.py spec --traces ../shared/traces \\
        --out spec.json [--kvviz]
    # 2. vLLM's scheduler on each case (scripts/vllm_reference_replay.py's functions, one fresh process each;
    #    TP 2 in two processes, one per rank, as vLLM's multiprocessing executor runs them)
    DATA=tests/data/vllm-0.33/replay-traces-more
    /root/vllm-ref/bin/python scripts/vllm_reference_traces.py run spec.json --configs $DATA/configs \\
        --out $DATA/trace-cases.json

The token streams are vllm_reference_replay._tokens': a hash chain's chunk is `hash_block_tokens` tokens of
one id per hash id, cut at prompt_len, then the request's own tokens (the shared README's rule: only token
equality reaches vLLM's chained block hashes). `--kvviz` replays each case with kvviz too and prints its
totals (to size a budget before vLLM runs it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MIB, GIB = 1 << 20, 1 << 30

# name -> (model, trace file, rows, inputs beyond the defaults)
CASES = {
    "llama-4-scout/mooncake-conv-6000": (
        "llama-4-scout",
        "mooncake_fast25_conversation_trace.jsonl",
        (6000, 6080),
        {"kv_budget": 6 * GIB, "max_model_len": 32768},
    ),
    "deepseek-v2-lite/mooncake-synth-2000": (
        "deepseek-v2-lite",
        "mooncake_fast25_synthetic_trace.jsonl",
        (2000, 2100),
        {"kv_budget": 1280 * MIB, "max_model_len": 40960},
    ),
    "nemotron-nano-9b-v2/mooncake-conv-1000": (
        "nemotron-nano-9b-v2",
        "mooncake_fast25_conversation_trace.jsonl",
        (1000, 1080),
        {"kv_budget": 6 * GIB, "max_model_len": 65536},
    ),
    "jamba-v0.1/azure-code-3000": (
        "jamba-v0.1",
        "azure_llm_2023_code.csv",
        (3000, 3150),
        {"kv_budget": 192 * MIB, "max_model_len": 8192},
    ),
    "llama-3.1-8b/azure-code-2000/fp8": (
        "llama-3.1-8b",
        "azure_llm_2023_code.csv",
        (2000, 2200),
        {"kv_budget": 576 * MIB, "max_model_len": 8192, "kv_cache_dtype": "fp8"},
    ),
    "llama-3.1-8b/azure-conv-12000/tp=2": (
        "llama-3.1-8b",
        "azure_llm_2023_conv.csv",
        (12000, 12200),
        {"kv_budget": 768 * MIB, "max_model_len": 8192, "tp": 2},
    ),
}


def spec(traces: Path, run_kvviz: bool) -> dict:
    """Each case's inputs and workload (kvviz's venv: the trace rows read by kvviz.replay.read_trace)."""
    from replay_more_spec import DEFAULT_INPUTS

    from kvviz.replay import read_trace

    cases = []
    for name, (model, file, rows, extra) in CASES.items():
        inputs = {"model": model, **DEFAULT_INPUTS, "seed": 0, "detail": False, **extra}
        trace = read_trace(traces / file, rows=rows, max_model_len=inputs["max_model_len"])
        inputs["workload_file"] = f"{file} rows {rows[0]}:{rows[1]} ({trace.describe()})"
        cases.append(
            {
                "case": name,
                "inputs": inputs,
                "demo_workload": f"{file} rows {rows[0]}:{rows[1]}",
                "trace": trace.to_json(),
                "workload": [r.to_json() for r in trace.requests],
            }
        )
        if run_kvviz:
            _kvviz(cases[-1])
    return {"cases": cases}


def _kvviz(case: dict) -> None:
    """kvviz's replay of a case and its totals, to size a budget (kvviz's venv)."""
    import kvviz

    i = case["inputs"]
    folder = HERE.parent / "tests" / "data" / "vllm-0.33" / "replay-traces-more" / "configs" / i["model"]
    knobs = {"max_model_len": i["max_model_len"]}
    if i["kv_cache_dtype"] != "auto":
        knobs["kv_dtype"] = i["kv_cache_dtype"]
    if i["tp"] != 1:
        knobs["tensor_parallel_size"] = i["tp"]
    t0 = time.perf_counter()
    plan = kvviz.plan(kvviz.load(str(folder / "config.json")), **knobs)
    r = kvviz.replay(plan, case["workload"], budget_bytes=i["kv_budget"])
    t = r.totals_dict()
    pc = t["prefix_cache"]
    print(
        f"{case['case']}: {len(case['workload'])} requests ({case['trace']['left_out_too_long']} left out), "
        f"{r.to_json()['kv_cache_config']['num_blocks']} blocks, {t['num_steps']} steps, {t['total_preemptions']} "
        f"preemptions, hits {pc['hits']}+{pc['preempted_hits']} of {pc['queries']}, peak running "
        f"{t['peak_running']}, concurrency {plan.capacity(i['kv_budget']).max_concurrency:.2f} "
        f"({time.perf_counter() - t0:.1f} s)",
        file=sys.stderr,
    )


# ---- vLLM's side (its venv only) --------------------------------------------------------------------
def _tp_patches(rank: int, port: int, tp: int) -> None:
    """Let vllm_reference_replay.replay_case build one rank of a TP group: its engine arguments carry the TP
    size, and vllm_model joins the gloo group as `rank` and gathers every rank's specs (the executor's
    get_kv_cache_specs), checking they are equal: rank 0's specs then stand for every worker, so planning
    them as one worker gives the KVCacheConfig all of them give (get_kv_cache_configs takes the least
    num_blocks over equal workers). Ranks other than 0 stop after the gather."""
    import contextlib

    import vllm_reference_replay as ref

    engine_kwargs, vllm_model = ref._engine_kwargs, ref.vllm_model

    def kwargs(inp: dict) -> dict:
        return engine_kwargs({**inp, "tp": 1}) | {"tensor_parallel_size": tp, "distributed_executor_backend": "mp"}

    @contextlib.contextmanager
    def model(folder, max_model_len=None, **kw):
        import torch.distributed as dist
        from vllm.distributed.parallel_state import get_world_group

        with vllm_model(folder, max_model_len, rank=rank, port=port, **kw) as m:
            every = [None] * tp
            dist.all_gather_object(every, {k: repr(v) for k, v in m.specs.items()}, group=get_world_group().cpu_group)
            if any(w != every[0] for w in every):
                raise RuntimeError("the TP ranks hold different KV cache specs")
            if rank != 0:
                raise SystemExit(0)
            yield m

    ref._engine_kwargs, ref.vllm_model = kwargs, model


def _one(case: dict, configs: Path, out: Path, rank: int, port: int) -> None:
    """One case in this process (one rank of it with TP)."""
    sys.path.insert(0, str(HERE))
    import vllm_reference_replay as ref

    tp = case["inputs"].get("tp", 1)
    if tp != 1:
        _tp_patches(rank, port, tp)
    ref._one(case, configs, out)


def run(spec_path: Path, configs: Path, out_path: Path, only: str | None) -> int:
    """vLLM's scheduler on every case of the spec, each in fresh processes; the cases file in the shape of
    ../shared/data/vllm-0.33/replay-traces/trace-cases.json."""
    sys.path.insert(0, str(HERE))
    import vllm
    from vllm_reference_plans import _free_port

    doc = json.loads(spec_path.read_text())
    cases, errors, t0 = [], {}, time.time()
    for c in doc["cases"]:
        if only and only not in c["case"]:
            continue
        keep = {k: c[k] for k in ("case", "inputs", "workload", "demo_workload") if k in c}
        tp, port = c["inputs"].get("tp", 1), _free_port()
        with tempfile.TemporaryDirectory() as tmp:
            cin, cout = Path(tmp) / "case.json", Path(tmp) / "out.json"
            cin.write_text(json.dumps(keep))
            argv = [sys.executable, __file__, "one", str(cin), "--configs", str(configs), "--out", str(cout)]
            procs = [
                subprocess.Popen(argv + ["--rank", str(r), "--port", str(port)], stderr=subprocess.PIPE, text=True)
                for r in range(tp)
            ]
            tails = [p.communicate(timeout=3600)[1] for p in procs]
            try:
                result = json.loads(cout.read_text())
            except (OSError, ValueError):
                result = {"failure": {"error": f"exited {procs[0].returncode}", "tail": tails[0].splitlines()[-14:]}}
        if "case" in result:
            r = result["case"]
            r["vllm_version"] = vllm.__version__
            r["trace"] = c.get("trace")
            cases.append(r)
            t = r["totals"]
            print(
                f"{c['case']}: {t['num_steps']} steps, {t['total_preemptions']} preemptions, hits "
                f"{t['prefix_cache']['hits']}+{t['prefix_cache']['preempted_hits']}, "
                f"{r['kv_cache_config']['num_blocks']} blocks, {r['timing']['replay_s']} s",
                file=sys.stderr,
            )
        else:
            errors[c["case"]] = dict(result["failure"], inputs=c["inputs"])
            print(f"{c['case']}: FAILED {result['failure']}", file=sys.stderr)
    out = {
        "vllm_version": vllm.__version__,
        "platform": "UnspecifiedPlatform, CudaPlatform's H200 (SM90) answers (vllm_reference_plans._h200_backends)",
        "how": "scripts/vllm_reference_traces.py: trace windows read by kvviz.replay.read_trace, then "
        "scripts/vllm_reference_replay.py's replay_case (vLLM's own KVCacheConfig and scheduler)",
        "errors": errors,
        "elapsed_s": round(time.time() - t0, 1),
        "cases": cases,
    }
    out_path.write_text(json.dumps(out) + "\n")
    return 1 if errors else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="step", required=True)
    s = sub.add_parser("spec")
    s.add_argument("--traces", required=True, type=Path, help="the folder of the published traces")
    s.add_argument("--out", required=True, type=Path)
    s.add_argument("--kvviz", action="store_true")
    r = sub.add_parser("run")
    r.add_argument("spec", type=Path)
    r.add_argument("--configs", required=True, type=Path)
    r.add_argument("--out", required=True, type=Path)
    r.add_argument("--only")
    o = sub.add_parser("one")
    o.add_argument("case", type=Path)
    o.add_argument("--configs", required=True, type=Path)
    o.add_argument("--out", required=True, type=Path)
    o.add_argument("--rank", type=int, default=0)
    o.add_argument("--port", type=int, default=0)
    ns = ap.parse_args(argv)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    if ns.step == "spec":
        sys.path.insert(0, str(HERE))
        ns.out.write_text(json.dumps(spec(ns.traces, ns.kvviz), indent=1) + "\n")
        return 0
    if ns.step == "run":
        return run(ns.spec, ns.configs.resolve(), ns.out, ns.only)
    _one(json.loads(ns.case.read_text()), ns.configs.resolve(), ns.out, ns.rank, ns.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
