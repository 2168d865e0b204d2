"""The spec of tests/data/vllm-0.33/replay-more (and, with --set chunked, of replay-chunked): each case's
inputs and its workload from kvviz's own generators (kvviz/replay/generators.py; `chained_sessions` here),
for scripts/vllm_reference_replay.py to run through vLLM 0.33's scheduler. Runs with kvviz's venv (it
imports kvviz; the vLLM script does not).

usage: PYTHONPATH=$PWD .venv/bin/python scripts/replay_more_spec.py --out SPEC.json [--kvviz] [--refused]
           [--set more|chunked]
       (--kvviz: also replay each case with kvviz and print its totals, to size a case before vLLM runs it;
        --refused: the cases vLLM refuses to start on, whose errors the reference keeps)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kvviz.replay import WorkloadRequest, generators

MIB = 1 << 20
GIB = 1 << 30


def chained_sessions(sessions=5, turns=3, *, seed=0, first=(3000, 9000), turn=(1000, 4000), output=(300, 1500), gap=3):
    """Multi-turn sessions in the hash-chain form (Mooncake's): each turn's prompt is the previous turn's
    512-token chunks (its ids), then new ids for the answer and the next user turn; a session's first ids
    are new too, except a shared 2-chunk system prompt (ids 0, 1) that every session starts with. A turn's
    prompt ends inside its last chunk (a partial chunk), so its successor shares that chunk only in part."""
    import random

    rng = random.Random(seed)
    next_id = 2
    out = []
    for s in range(sessions):
        step, prompt, ids = s * gap, rng.randint(*first), [0, 1]
        for t in range(turns):
            while len(ids) * 512 < prompt:
                ids.append(next_id)
                next_id += 1
            gen = rng.randint(*output)
            out.append(WorkloadRequest(f"c{s:02d}-t{t}", step, prompt, gen, hash_ids=tuple(ids), hash_block_tokens=512))
            step += gen + 30
            # the next prompt: this one's whole chunks, then the rest (its tail, the answer, the user turn) new
            ids = ids[: prompt // 512]
            prompt += gen + rng.randint(*turn)
    out.sort(key=lambda r: r.arrival_step)
    return out


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
# tests/data/vllm-0.33/replay-chunked: Llama 4 Scout's chunked local attention (8,192-token chunks) beside
# its full-attention layers, on prompts that cross chunk boundaries, share prefixes and preempt
CHUNKED = {
    "llama-4-scout/documents": (
        "llama-4-scout",
        "documents",
        {
            "n": 24,
            "seed": 13,
            "num_documents": 3,
            "document": (7000, 15000),
            "question": (100, 4000),
            "output": (50, 1200),
            "mean_gap": 3.0,
        },
        {"kv_budget": 5 * GIB, "max_model_len": 24576},
    ),
    "llama-4-scout/chained-sessions/async=off/mnbt=2048": (
        "llama-4-scout",
        "chained_sessions",
        {"sessions": 5, "turns": 3, "seed": 14},
        {"kv_budget": 5000 * MIB, "max_model_len": 24576, "async_scheduling": "off", "max_num_batched_tokens": 2048},
    ),
    "llama-4-scout/chained-sessions": (
        "llama-4-scout",
        "chained_sessions",
        {"sessions": 5, "turns": 3, "seed": 14},
        {"kv_budget": 6500 * MIB, "max_model_len": 24576},
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


SETS = {"more": CASES, "chunked": CHUNKED}


def spec(refused: bool = False, which: str = "more") -> dict:
    cases = []
    for name, (model, gen, kwargs, extra) in (REFUSED if refused else SETS[which]).items():
        if gen == "chained_sessions":
            work, where = chained_sessions(**kwargs), "scripts/replay_more_spec.py chained_sessions"
        else:
            work, where = getattr(generators, gen)(**kwargs), f"kvviz.replay.generators.{gen}"
        inputs = dict(DEFAULT_INPUTS, model=model, **extra)
        cases.append(
            {
                "case": name,
                "demo_workload": f"{where}(**{json.dumps(kwargs)})",
                "inputs": inputs,
                "workload": [r.to_json() for r in work],
            }
        )
    return {"cases": cases}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--kvviz", action="store_true")
    ap.add_argument("--refused", action="store_true", help="the cases vLLM refuses to start on")
    ap.add_argument("--set", default="more", choices=sorted(SETS), help="replay-more or replay-chunked")
    ns = ap.parse_args(argv)
    s = spec(ns.refused, ns.set)
    Path(ns.out).write_text(json.dumps(s, indent=1) + "\n")
    if ns.kvviz:
        import kvviz
        from kvviz.replay import replay

        root = Path(__file__).resolve().parent.parent / "tests" / "data" / "vllm-0.33" / f"replay-{ns.set}" / "configs"
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
