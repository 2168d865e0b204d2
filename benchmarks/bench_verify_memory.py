"""Peak memory of kvviz.verify beyond its pool, on the CPU (issue 12: goal < 25% of the pool, or
< 256 MiB).

Runs in two child processes, one after the other, and reads each one's peak resident set
(resource.getrusage(RUSAGE_CHILDREN).ru_maxrss; tracemalloc does not see torch's allocations):

* baseline: imports kvviz.verify and allocates (and touches) a Pool of the same size, nothing else;
* verify:   runs verify() on that many blocks.

The layout is DeepSeek-V4-Pro's overlay one (kvviz.vllm.plan.plan_model(model, "overlay", ...)).

peak beyond pool = verify's peak - the baseline's peak. Prints pool size, the extra and the ratio.

    python benchmarks/bench_verify_memory.py [--gib 1.0] [--backend flashmla] [--indexer mxfp4]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys

from kvviz.defaults import GIB

CHILD = """
import sys, torch
from kvviz.families import load_preset
from kvviz.options import Options
from kvviz.pool import Pool
from kvviz.verify import verify
from kvviz.vllm.plan import plan_model
mode, n, backend, indexer = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
layout = plan_model(load_preset("deepseek-v4-pro"), "overlay", Options(backend=backend, indexer_format=indexer)).layout
if mode == "baseline":
    pool = Pool(layout, n, "cpu")
    pool.backing.fill_(1)  # touch every page, as verify's writes do
else:
    r = verify(layout, n, device="cpu")
    assert r.ok, "verify failed"
"""


def peak_kib(args: list[str]) -> int:
    """ru_maxrss (KiB on Linux) of one child; RUSAGE_CHILDREN keeps the max over children, so the
    children run in increasing order of expected peak."""
    subprocess.run([sys.executable, "-c", CHILD, *args], check=True)
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=1.0, help="pool size in GiB (default 1)")
    ap.add_argument("--backend", default="flashmla")
    ap.add_argument("--indexer", default="mxfp4")
    args = ap.parse_args()
    from kvviz.families import load_preset
    from kvviz.options import Options
    from kvviz.vllm.plan import plan_model

    layout = plan_model(load_preset("deepseek-v4-pro"), "overlay",
                        Options(backend=args.backend, indexer_format=args.indexer)).layout
    n = max(len(layout.groups), int(args.gib * GIB) // layout.block_stride)
    pool = n * layout.block_stride
    base = peak_kib(["baseline", str(n), args.backend, args.indexer]) * 1024
    peak = peak_kib(["verify", str(n), args.backend, args.indexer]) * 1024
    extra = peak - base
    print(f"pool: {n:,} blocks x {layout.block_stride:,} B = {pool:,} B ({pool / GIB:.2f} GiB) on cpu")
    print(f"baseline peak (imports + pool): {base / 2**20:,.0f} MiB; verify peak: {peak / 2**20:,.0f} MiB")
    print(f"peak beyond the pool: {extra / 2**20:,.0f} MiB = {extra / pool:.3f} of the pool "
          f"(goal: < 0.25, or < 256 MiB)")


if __name__ == "__main__":
    main()
