"""Throughput of a real KV pool: fill + verify through the per-layer views vs a plain torch copy.

Builds a `kvviz.pool.Pool` of at least --gib GiB (default 1) for DeepSeek-V4-Pro's overlay layout
(kvviz.vllm.plan.plan_model(model, "overlay", Options(backend=..., indexer_format=...))), hands the
blocks round robin to the groups (group g holds blocks g, g+G, ...), and measures in one run:

* views:  every batch of layers' pages (seeded random bytes; the byte path does not care what they
          encode) copied into its strided uint8 view (fill), then compared with torch.equal against
          the expected bytes (verify): the byte path of `kvviz.verify`, without the codecs;
* plain:  the same number of bytes copied from one flat uint8 tensor into another, then compared
          with torch.equal: the yardstick;
* verify(): the whole `kvviz.verify.verify()` (source values, encode, write, read back, compare,
          decode, error bounds) on --verify-blocks blocks (default 64; -1 = the whole pool, slow
          on CPU; 0 = skip), counted in bytes written.

It prints GB/s (10^9 bytes per second) for each, best and median of the repeats, and the ratio
to the plain copy measured in the same repeat (min and median). No assertions.

    python benchmarks/bench_pool.py [--device cpu|auto|cuda] [--gib 1.0] [--verify-blocks 64]
                                    [--backend flashmla] [--indexer mxfp4]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from kvviz.base.defaults import GIB
from kvviz.families import load_preset
from kvviz.options import Options
from kvviz.pool import Pool, resolve_device
from kvviz.verify import layer_batches, verify
from kvviz.vllm.plan import plan_model

REPEATS = 5


def sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def once(fn, dev) -> float:
    """Seconds of one run of fn."""
    sync(dev)
    t0 = time.perf_counter()
    fn()
    sync(dev)
    return time.perf_counter() - t0


def gbs(nbytes: int, seconds: float) -> float:
    return nbytes / seconds / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--gib", type=float, default=1.0, help="pool size, at least this many GiB (default 1)")
    ap.add_argument("--backend", default="flashmla")
    ap.add_argument("--indexer", default="mxfp4")
    ap.add_argument(
        "--verify-blocks",
        type=int,
        default=64,
        help="blocks for the end-to-end verify() run (default 64; -1: the whole pool; 0: skip)",
    )
    ap.add_argument("--verify-repeats", type=int, default=3, help="verify() runs (default 3)")
    args = ap.parse_args()

    dev = resolve_device(args.device, "--device")
    layout = plan_model(
        load_preset("deepseek-v4-pro"), "overlay", Options(backend=args.backend, indexer_format=args.indexer)
    ).layout
    stride = layout.block_stride
    G = len(layout.groups)
    num_blocks = max(G, -(-int(args.gib * GIB) // stride))
    pool = Pool(layout, num_blocks, dev)
    print(
        f"pool: {num_blocks:,} blocks x {stride:,} B = {pool.nbytes:,} B ({pool.nbytes / GIB:.2f} GiB) on {dev}, "
        f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads"
    )

    gen = torch.Generator(device=dev).manual_seed(0)

    def pages_for(views):
        """Seeded random expected bytes for each view (the byte path does not care what they encode)."""
        return [(v, torch.randint(0, 256, tuple(v.shape), generator=gen, device=dev, dtype=torch.uint8)) for v in views]

    modes = {
        # one strided view per batch of layers (kvviz.verify.layer_batches: one format, equally
        # spaced offsets), as verify writes them
        "layer batches": pages_for(pool.stacked_view(b.names, slice(b.group, None, G)) for b in layer_batches(layout)),
        # one strided view per group (Pool.group_view: all its layers' columns of its blocks)
        "group views": pages_for(pool.group_view(g, slice(g, None, G)) for g in range(G)),
    }
    for mode, jobs in modes.items():
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
        # fill+verify and copy+equal alternate, so both see the same machine load
        views_t, plain_t = [], []
        once(lambda: (fill(), check()), dev)  # warm up
        once(lambda: (dst.copy_(src), torch.equal(dst, src)), dev)
        for _ in range(REPEATS):
            views_t.append(once(lambda: (fill(), check()), dev))
            plain_t.append(once(lambda: (dst.copy_(src), torch.equal(dst, src)), dev))
        ratios = sorted(p / v for v, p in zip(views_t, plain_t))
        print(f"{mode}: {nbytes:,} B per pass through {len(jobs)} strided views")
        print(
            f"  views fill+verify {gbs(nbytes, min(views_t)):7.2f} GB/s best, "
            f"{gbs(nbytes, statistics.median(views_t)):7.2f} median"
        )
        print(
            f"  plain copy+equal  {gbs(nbytes, min(plain_t)):7.2f} GB/s best, "
            f"{gbs(nbytes, statistics.median(plain_t)):7.2f} median"
        )
        print(
            f"  ratio views/plain, same repeat: min {ratios[0]:.2f}, median {statistics.median(ratios):.2f} "
            f"(goal >= 0.5)"
        )
        plain_best = gbs(nbytes, min(plain_t))
        del jobs, src, dst
    del modes, pool

    vblocks = num_blocks if args.verify_blocks < 0 else args.verify_blocks
    if vblocks:
        rates = []
        for _ in range(args.verify_repeats):
            sync(dev)
            t0 = time.perf_counter()
            report = verify(layout, max(G, vblocks), device=dev, seed=0)
            sync(dev)
            rates.append(report.bytes_written / (time.perf_counter() - t0) / 1e9)
        print(
            f"verify() end to end on {report.num_blocks:,} blocks ({report.bytes_written:,} B written, "
            f"{'clean' if report.ok else 'FAILED'}): {max(rates):.3f} GB/s best, {statistics.median(rates):.3f} "
            f"median of {len(rates)}; ratio to plain copy+equal: {max(rates) / plain_best:.4f} best"
        )


if __name__ == "__main__":
    main()
