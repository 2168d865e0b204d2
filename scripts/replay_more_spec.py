"""The spec of tests/data/vllm-0.33/replay-more: each case's inputs and its workload from kvviz's own
generators (kvviz/replay/generators.py), for scripts/vllm_reference_replay.py to run through vLLM 0.33's
scheduler. Runs with kvviz's venv (it imports kvviz; the vLLM script does not).

usage: PYTHONPATH=$PWD .venv/bin/python scripts/replay_more_spec.py --out SPEC.json [--kvviz] [--refused]
       (--kvviz: also replay each case with kvviz and print its totals, to size a case before vLLM runs it;
        --refused: the cases vLLM refuses to start on, whose errors the reference keeps)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kvviz.replay import generators

MIB = 1 << 20
GIB = 1 << 30

# name -> (model, generator, generator kwargs, inputs beyond the defaults)
CASES = {
    "gpt-oss-20b/chat": ("gpt-oss-20b", "chat", {"n": 48, "seed": 1}, {"kv_budget": 112 * MIB, "max_model_len": 2048}),
    "deepseek-v3/documents": (
        "deepseek-v3",
        "documents",
        {"n": 40, "seed": 2, "num_documents": 3, "document": (1500, 2500)},
        {"kv_budget": 640 * MIB},
    ),
    "jamba-v0.1/chat": ("jamba-v0.1", "chat", {"n": 40, "seed": 3}, {"kv_budget": 256 * MIB}),
    "nemotron-nano-9b-v2/agentic": (
        "nemotron-nano-9b-v2",
        "agentic",
        {"n": 32, "seed": 4, "tool_prompt": 2600},
        {"kv_budget": 3 * GIB},
    ),
    "lfm2-1.2b/multi-turn": (
        "lfm2-1.2b",
        "multi_turn",
        {"sessions": 10, "turns": 3, "seed": 5},
        {"kv_budget": 40 * MIB, "max_model_len": 2048},
    ),
    "qwen3-next-80b-a3b/multi-turn": (
        "qwen3-next-80b-a3b",
        "multi_turn",
        {"sessions": 10, "turns": 3, "seed": 6, "first": (600, 1500)},
        {"kv_budget": 768 * MIB},
    ),
    "llama-3.1-8b/chat/fp8": (
        "llama-3.1-8b",
        "chat",
        {"n": 48, "seed": 7},
        {"kv_budget": 256 * MIB, "kv_cache_dtype": "fp8", "max_model_len": 2048},
    ),
    "nemotron-nano-9b-v2/burst/async=off": (
        "nemotron-nano-9b-v2",
        "burst",
        {"n": 16, "seed": 8, "prompt": (800, 2400), "output": (50, 300)},
        {"kv_budget": 1 * GIB, "async_scheduling": "off"},
    ),
    "gemma-3-27b-text/documents/async=off": (
        "gemma-3-27b-text",
        "documents",
        {"n": 32, "seed": 9, "num_documents": 2, "document": (900, 1400)},
        {"kv_budget": 1280 * MIB, "async_scheduling": "off", "max_model_len": 2048},
    ),
    "llama-3.1-8b/chat/max_num_seqs=4": (
        "llama-3.1-8b",
        "chat",
        {"n": 32, "seed": 10, "mean_gap": 1.0},
        {"kv_budget": 384 * MIB, "max_num_seqs": 4, "max_model_len": 2048},
    ),
    "gemma-3-27b-text/burst/mnbt=1024": (
        "gemma-3-27b-text",
        "burst",
        {"n": 16, "seed": 11, "prompt": (400, 1000), "output": (300, 900)},
        {"kv_budget": 1280 * MIB, "max_num_batched_tokens": 1024, "max_model_len": 2048},
    ),
    "qwen3-next-80b-a3b/agentic/mnbt=1024": (
        "qwen3-next-80b-a3b",
        "agentic",
        {"n": 24, "seed": 12, "tool_prompt": 2000, "suffix": (100, 900)},
        {"kv_budget": 1536 * MIB, "max_num_batched_tokens": 1024},
    ),
}
# vLLM refuses to start on these (one max_model_len request does not fit): its error is the reference
REFUSED = {
    "gpt-oss-20b/refused": ("gpt-oss-20b", "chat", {"n": 1, "seed": 1}, {"kv_budget": 96 * MIB}),
}
DEFAULT_INPUTS = {  # max_model_len: vLLM refuses a budget below one max_model_len request
    "kv_budget": None,
    "max_model_len": 8192,
    "tp": 1,
    "kv_cache_dtype": "auto",
    "prefix_caching": "default",
    "max_num_batched_tokens": 8192,
    "max_num_seqs": None,
    "async_scheduling": "default",
    "max_steps": 200000,
}


def spec(refused: bool = False) -> dict:
    cases = []
    for name, (model, gen, kwargs, extra) in (REFUSED if refused else CASES).items():
        work = getattr(generators, gen)(**kwargs)
        inputs = dict(DEFAULT_INPUTS, model=model, **extra)
        cases.append(
            {
                "case": name,
                "demo_workload": f"kvviz.replay.generators.{gen}(**{json.dumps(kwargs)})",
                "inputs": inputs,
                "workload": [
                    {
                        "id": r.id,
                        "arrival_step": r.arrival_step,
                        "prompt_len": r.prompt_len,
                        "output_len": r.output_len,
                        "prefix_group": r.prefix_group,
                        "prefix_len": r.prefix_len,
                    }
                    for r in work
                ],
            }
        )
    return {"cases": cases}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--kvviz", action="store_true")
    ap.add_argument("--refused", action="store_true", help="the cases vLLM refuses to start on")
    ns = ap.parse_args(argv)
    s = spec(ns.refused)
    Path(ns.out).write_text(json.dumps(s, indent=1) + "\n")
    if ns.kvviz:
        import kvviz
        from kvviz.replay import replay

        root = Path(__file__).resolve().parent.parent / "tests" / "data" / "vllm-0.33" / "replay-more" / "configs"
        for c in s["cases"]:
            i = c["inputs"]
            knobs = {"max_model_len": i["max_model_len"], "max_num_batched_tokens": i["max_num_batched_tokens"]}
            if i["kv_cache_dtype"] != "auto":
                knobs["kv_dtype"] = i["kv_cache_dtype"]
            async_ = i["async_scheduling"] != "off"
            if not async_:
                knobs["async_scheduling"] = False
            plan = kvviz.plan(kvviz.load(str(root / i["model"] / "config.json")), **knobs)
            r = replay(
                plan,
                c["workload"],
                budget_bytes=i["kv_budget"],
                max_num_batched_tokens=i["max_num_batched_tokens"],
                max_num_seqs=i["max_num_seqs"],
                async_scheduling=async_,
            )
            t = r.totals_dict()
            conc = plan.capacity(i["kv_budget"]).max_concurrency  # vLLM refuses below 1 (one max_model_len request)
            pc = t["prefix_cache"]
            print(
                f"{c['case']}: {r.to_json()['kv_cache_config']['num_blocks']} blocks, {t['num_steps']} steps, "
                f"{t['total_preemptions']} preemptions, hits {pc['hits']}+{pc['preempted_hits']} of {pc['queries']}, "
                f"peak running {t['peak_running']}, never {t['never_admitted']}, concurrency {conc:.2f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
