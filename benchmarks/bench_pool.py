"""Throughput of a real KV pool: fill + verify through the per-layer views vs a plain torch copy.

Builds a `kvviz.pool.Pool` of at least --gib GiB (default 1) for DeepSeek-V4-Pro, hands the
blocks round robin to the groups (group g holds blocks g, g+G, ...), and measures in one run:

* views:  every layer's pages (seeded random bytes; the byte path does not care what they encode)
          copied into its strided uint8 page view (fill), then compared with torch.equal against
          the expected bytes (verify): the byte path of `kvviz.verify`, without the codecs;
* plain:  the same number of bytes copied from one flat uint8 tensor into another, then compared
          with torch.equal: the yardstick;
* verify(): the whole `kvviz.verify.verify()` (source values, encode, write, read back, compare,
          decode, error bounds) on --verify-blocks blocks (default 64; -1 = the whole pool, slow
          on CPU; 0 = skip), counted in bytes written.

It prints GB/s (10^9 bytes per second) for each and the ratio to the plain copy. No assertions.

    python benchmarks/bench_pool.py [--device cpu|auto|cuda] [--gib 1.0] [--verify-blocks 64]
                                    [--backend flashmla] [--indexer mxfp4]
"""

from __future__ import annotations

import argparse
import time

import torch

from kvviz.capacity import GIB
from kvviz.config import load_model
from kvviz.planners import plan_model
from kvviz.pool import Pool, resolve_device
from kvviz.specs import CacheOptions
from kvviz.verify import verify

REPEATS = 5


def sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def best(fn, dev) -> float:
    fn()  # warm up
    times = []
    for _ in range(REPEATS):
        sync(dev)
        t0 = time.perf_counter()
        fn()
        sync(dev)
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--gib", type=float, default=1.0, help="pool size, at least this many GiB (default 1)")
    ap.add_argument("--backend", default="flashmla")
    ap.add_argument("--indexer", default="mxfp4")
    ap.add_argument("--verify-blocks", type=int, default=64,
                    help="blocks for the end-to-end verify() run (default 64; -1: the whole pool; 0: skip)")
    args = ap.parse_args()

    dev = resolve_device(args.device)
    layout = plan_model(load_model("deepseek-v4-pro"), CacheOptions(backend=args.backend, indexer_format=args.indexer))
    stride = layout.block_stride
    G = len(layout.groups)
    num_blocks = max(G, -(-int(args.gib * GIB) // stride))
    pool = Pool(layout, num_blocks, dev)
    print(f"pool: {num_blocks:,} blocks x {stride:,} B = {pool.nbytes:,} B ({pool.nbytes / GIB:.2f} GiB) on {dev}, "
          f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads")

    # Expected pages of every layer for its group's blocks.
    gen = torch.Generator(device=dev).manual_seed(0)
    jobs = []
    for p in layout.placements:
        n = len(range(p.group, num_blocks, G))
        pages = torch.randint(0, 256, (n, p.page_bytes), generator=gen, device=dev, dtype=torch.uint8)
        jobs.append((pool.page_view(p.name)[p.group::G], pages))
    nbytes = sum(pages.numel() for _, pages in jobs)

    def fill():
        for view, pages in jobs:
            view.copy_(pages)

    def check():
        ok = True
        for view, pages in jobs:
            ok &= torch.equal(view, pages)
        return ok

    fill()
    assert check(), "the pool did not read back what was written"
    src = torch.randint(0, 256, (nbytes,), generator=gen, device=dev, dtype=torch.uint8)
    dst = torch.empty_like(src)

    t_fill = best(fill, dev)
    t_check = best(check, dev)
    t_copy = best(lambda: dst.copy_(src), dev)
    t_equal = best(lambda: torch.equal(dst, src), dev)

    def gbs(t):
        return nbytes / t / 1e9

    views, plain = t_fill + t_check, t_copy + t_equal
    print(f"bytes moved per pass: {nbytes:,} ({len(jobs)} layer views)")
    print(f"views  fill {gbs(t_fill):7.2f} GB/s  verify {gbs(t_check):7.2f} GB/s  fill+verify {gbs(views):7.2f} GB/s")
    print(f"plain  copy {gbs(t_copy):7.2f} GB/s  equal  {gbs(t_equal):7.2f} GB/s  copy+equal  {gbs(plain):7.2f} GB/s")
    print(f"ratio views/plain (fill+verify): {plain / views:.2f}")
    del jobs, src, dst, pool

    vblocks = num_blocks if args.verify_blocks < 0 else args.verify_blocks
    if vblocks:
        sync(dev)
        t0 = time.perf_counter()
        report = verify(layout, max(G, vblocks), device=dev, seed=0)
        sync(dev)
        t = time.perf_counter() - t0
        rate = report.bytes_written / t / 1e9
        timings = dict(report.timings)
        print(f"verify() end to end on {report.num_blocks:,} blocks: {report.bytes_written:,} B in {t:.2f} s = "
              f"{rate:.3f} GB/s (write {timings['write']:.2f} s, check {timings['check']:.2f} s), "
              f"{'clean' if report.ok else 'FAILED'}; ratio to plain copy+equal: {rate / gbs(plain):.4f}")


if __name__ == "__main__":
    main()
