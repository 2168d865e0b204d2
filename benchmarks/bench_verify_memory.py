"""Peak memory of kvviz.verify beyond its pool, on the CPU, for one model of every cache kind
(issue 20 item 8: goal < 25% of the pool for every kind).

Each measurement runs two child processes, each reporting its own peak resident set
(resource.getrusage(RUSAGE_SELF).ru_maxrss; tracemalloc does not see torch's allocations):

* baseline: imports kvviz.verify, plans the model and allocates (and touches) a Pool of the same
  size, nothing else;
* verify:   runs verify() on that many blocks.

peak beyond pool = verify's peak - the baseline's peak. Each line also gives what verify's fit
check counted for its working copies (kvviz.verify.guards.working_bytes), which must not be less
than what it measurably used.

    python benchmarks/bench_verify_memory.py [--mib 256] [--models deepseek-v4-pro,gemma-3-27b]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

# One model of every cache kind: MLA + indexer + compressor state (DeepSeek V4), attention with
# sliding windows (gpt-oss, Gemma 3), chunked attention (Llama 4), KV sharing (Gemma 3n), plain MLA
# (DeepSeek V3), Mamba (Jamba), Mamba2 (Nemotron-H), short convolutions (LFM2), gated delta net
# (Qwen3-Next) and KDA (Kimi Linear).
MODELS = (
    "deepseek-v4-pro",
    "gpt-oss-120b",
    "gemma-3-27b",
    "llama-4-scout",
    "gemma-3n-e4b",
    "deepseek-v3",
    "jamba-v0.1",
    "nemotron-nano-9b-v2",
    "lfm2-1.2b",
    "qwen3-next-80b-a3b",
    "kimi-linear",
)
GOAL = 0.25

CHILD = """
import json, resource, sys, torch
from kvviz.families import load_preset
from kvviz.pool import Pool
from kvviz.verify import verify
from kvviz.verify import batches as B, guards as G, samples as S
from kvviz.pool import BlockPool
from kvviz.vllm.plan import plan_model
mode, model, mib = sys.argv[1], sys.argv[2], int(sys.argv[3])
layouts = plan_model(load_preset(model)).pools
out = []
for layout in layouts:  # separate pools: each verified on its own, one after the other
    n = max(len(layout.groups), (mib << 20) // len(layouts) // layout.block_stride)
    if mode == "baseline":
        pool = Pool(layout, n, "cpu")
        pool.backing.fill_(1)  # touch every page, as verify's writes do
        del pool
    else:
        r = verify(layout, n, device="cpu")
        assert r.passed, "verify failed"
        dev = torch.device("cpu")
        item = B.item_bytes(dev, n * layout.block_stride)
        batches = B.layer_batches(layout, item)
        bp = BlockPool.assigned(n, len(layout.groups))
        firsts = tuple(int(bp.block_ids(g)[0]) for g in range(len(layout.groups)))
        kinds = S.choose_samples(layout, batches, firsts)
        out.append({"pool": n * layout.block_stride, "blocks": n,
                    "counted": G.working_bytes(layout, n, batches, item, S.sample_values(kinds))})
print(json.dumps({"peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "pools": out}))
"""


def child(mode: str, model: str, mib: int) -> dict:
    """Run one child and return what it printed (its peak RSS in bytes, and per pool its size)."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, mode, model, str(mib)], check=True, capture_output=True, text=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=256, help="pool size in MiB per model (default 256)")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated presets (default: one per kind)")
    args = ap.parse_args()
    worst = 0.0
    print(f"verify's peak memory beyond its pool, CPU, {args.mib} MiB pools (goal: < {GOAL:.2f} of the pool)")
    print(f"{'model':<22} {'pool MiB':>9} {'beyond MiB':>11} {'/ pool':>7} {'counted MiB':>12}")
    for model in args.models.split(","):
        base = child("baseline", model, args.mib)
        run = child("verify", model, args.mib)
        pool = sum(p["pool"] for p in run["pools"])
        counted = max(p["counted"] for p in run["pools"])
        extra = max(0, run["peak"] - base["peak"])
        worst = max(worst, extra / pool)
        print(
            f"{model:<22} {pool / 2**20:9.0f} {extra / 2**20:11.1f} {extra / pool:7.3f} {counted / 2**20:12.1f}"
            + ("" if extra <= counted else "  (more than counted)")
        )
    print(f"worst: {worst:.3f} of the pool (goal < {GOAL:.2f})")


if __name__ == "__main__":
    main()
