"""The replay's outputs over many generated runs, as digests, to show a change to the engine changes no output:
the reference models (tests/data/vllm-0.33/replay*, configs beside the references) x the five generators x two
budgets x async scheduling on and off, each with record_blocks=True (the time-lapse log) and
check_invariants=True. `--write FILE` records the digests (run it on the code before the change), `--check FILE`
replays again and compares run by run (on the code after it). Runs with kvviz's venv.

usage: PYTHONPATH=$PWD .venv/bin/python scripts/replay_equivalence.py (--write | --check) DIGESTS.json
           [--only SUBSTR] [--fast on|off]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path

import kvviz
from kvviz.replay import agentic, burst, chat, documents, multi_turn, replay

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "vllm-0.33"
MODELS = {  # model -> the reference folder holding its config
    "llama-3.1-8b": "replay",
    "gemma-3-27b-text": "replay",
    "deepseek-v2-lite": "replay",
    "qwen3-next-80b-a3b": "replay",
    "gpt-oss-20b": "replay-more",
    "deepseek-v3": "replay-more",
    "jamba-v0.1": "replay-more",
    "nemotron-nano-9b-v2": "replay-more",
    "lfm2-1.2b": "replay-more",
    "llama-4-scout": "replay-chunked",
}
WORKLOADS = {
    "chat": lambda: chat(48, seed=21),
    "documents": lambda: documents(32, seed=22, num_documents=3, document=(1200, 2600)),
    "multi_turn": lambda: multi_turn(8, 3, seed=23),
    "agentic": lambda: agentic(24, seed=24, tool_prompt=2000),
    "burst": lambda: burst(16, seed=25, prompt=(600, 2400), output=(50, 500)),
}
MAX_MODEL_LEN = 4096


def runs(only: str | None):
    """(name, plan, workload, budget, async) of every run, in a fixed order."""
    for model, folder in MODELS.items():
        for async_ in (True, False):
            knobs = {"max_model_len": MAX_MODEL_LEN}
            if not async_:
                knobs["async_scheduling"] = False
            plan = kvviz.plan(kvviz.load(str(DATA / folder / "configs" / model / "config.json")), **knobs)
            one = plan.capacity(plan.block_stride * 1024)
            per_request = 1024 / one.max_concurrency  # blocks one max_model_len request needs
            for tight, factor in (("tight", 1.5), ("roomy", 5.0)):
                budget = plan.block_stride * int(per_request * factor + 2)
                for wname, make in WORKLOADS.items():
                    name = f"{model}/{wname}/{tight}/async={'on' if async_ else 'off'}"
                    if only and only not in name:
                        continue
                    yield name, plan, make(), budget, async_


def digest(r) -> str:
    """One hash of everything a Replay holds: its JSON (inputs, config, every step, every request, totals) and
    the time-lapse block log."""
    h = hashlib.sha256(json.dumps(r.to_json(), sort_keys=True).encode())
    h.update(repr(r.block_log).encode())
    return h.hexdigest()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--write")
    g.add_argument("--check")
    ap.add_argument("--only")
    ap.add_argument("--fast", choices=("on", "off"), default=None, help="replay(..., fast=...) when it has the knob")
    ns = ap.parse_args(argv)
    extra = {} if ns.fast is None else {"fast": ns.fast == "on"}
    want = json.loads(Path(ns.check).read_text()) if ns.check else {}
    got, bad, t0 = {}, [], time.time()
    for name, plan, work, budget, async_ in runs(ns.only):
        r = replay(
            plan, work, budget_bytes=budget, async_scheduling=async_, record_blocks=True, check_invariants=True, **extra
        )
        got[name] = digest(r)
        if ns.check and want.get(name) != got[name]:
            bad.append(name)
            print(f"DIFFERS: {name}", flush=True)
    if ns.write:
        Path(ns.write).write_text(json.dumps(got, indent=1) + "\n")
    print(f"{len(got)} runs in {time.time() - t0:.0f} s" + (f", {len(bad)} differ" if ns.check else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
