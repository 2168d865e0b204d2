"""Throughput of kvviz.quant on CPU: encode + decode ~64 MiB of cache rows per format.

For MXFP4 indexer rows (68 B, head_dim 128) and fp8_ds_mla rows (584 B, head_dim 512) it
prints the GB/s of encode and decode, counted in cache-row bytes (what lands in the cache),
next to a plain torch copy of the same number of bytes measured in the same run, and the ratio.
No assertions: this is a yardstick, not a test.

    python benchmarks/bench_quant.py [--mib 64] [--threads N]

The copy is ``src.clone()`` (it allocates its output, as encode and decode do). On a shared,
busy machine torch's intra-op threads can stall each other; ``--threads 1`` gives steadier
numbers there.
"""

from __future__ import annotations

import argparse
import time

import torch

from kvviz import quant as q

REPEATS = 3


def best_seconds(fn) -> float:
    fn()  # warm up
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def bench(name: str, dims: int, target_bytes: int) -> None:
    codec = q.get_codec(name)
    p, f = codec.row_bytes(dims)
    row = p + f
    rows = max(1, target_bytes // row)
    nbytes = rows * row
    x = torch.randn(rows, dims, generator=torch.Generator().manual_seed(0))
    enc = codec.encode(x)

    t_enc = best_seconds(lambda: codec.encode(x))
    t_dec = best_seconds(lambda: codec.decode(enc))
    src = torch.randint(0, 256, (nbytes,), dtype=torch.uint8)
    t_copy = best_seconds(lambda: src.clone())

    gbs = lambda t: nbytes / t / 1e9  # noqa: E731
    print(
        f"{name:>14}  {rows:>9,} rows x {row:>3} B = {nbytes / 2**20:6.1f} MiB "
        f"(fp32 input {x.numel() * 4 / 2**20:6.1f} MiB) | "
        f"encode {gbs(t_enc):6.3f} GB/s  decode {gbs(t_dec):6.3f} GB/s  copy {gbs(t_copy):6.2f} GB/s | "
        f"encode/copy {t_copy / t_enc:.4f}  decode/copy {t_copy / t_dec:.4f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=float, default=64.0, help="cache-row MiB per format (default 64)")
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    target = int(args.mib * 2**20)
    print(f"kvviz.quant on CPU, torch {torch.__version__}, {torch.get_num_threads()} threads, best of {REPEATS}")
    bench("indexer_mxfp4", 128, target)
    bench("fp8_ds_mla", 512, target)


if __name__ == "__main__":
    main()
