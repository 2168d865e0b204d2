"""Throughput of kvviz.quant: encode + decode ~64 MiB of cache rows per format, vs a plain copy.

For the MXFP4 indexer rows and the fp8_ds_mla rows of DeepSeek-V4-Pro (head dims from the
shipped preset: 68 B rows of 128 values, 584 B rows of 512) it prints the GB/s (10^9 bytes per
second) of encode and decode, counted in cache-row bytes (what lands in the cache), next to a
plain torch copy of the same number of bytes measured in the same run, and the ratios; min and
median time over the repeats. No assertions: this is a yardstick, not a test.

    python benchmarks/bench_quant.py [--mib 64] [--repeats 5] [--threads N] [--device cpu|cuda]

The copy is ``src.clone()`` (it allocates its output, as encode and decode do). On a shared,
busy machine torch's intra-op threads can stall each other; ``--threads 1`` gives steadier
numbers there.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from kvviz import quant as q
from kvviz.tools.quant_parity import parity_cases

FORMATS = ("indexer_mxfp4", "fp8_ds_mla")


def timings(fn, dev: torch.device, repeats: int) -> list[float]:
    fn()  # warm up (tables, allocator)
    out = []
    for _ in range(repeats):
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        t0 = time.perf_counter()
        fn()
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        out.append(time.perf_counter() - t0)
    return out


def bench(name: str, dims: int, opts: dict, target_bytes: int, dev: torch.device, repeats: int) -> None:
    codec = q.get_codec(name)
    row = codec.row_format(dims, **opts)
    rows = max(1, target_bytes // row.row_bytes)
    nbytes = rows * row.row_bytes
    x = torch.randn(rows, dims, generator=torch.Generator().manual_seed(0)).to(dev)
    enc = codec.encode(x, **opts)
    src = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, generator=torch.Generator().manual_seed(1)).to(dev)

    t = {
        "encode": timings(lambda: codec.encode(x, **opts), dev, repeats),
        "decode": timings(lambda: codec.decode(enc), dev, repeats),
        "copy": timings(lambda: src.clone(), dev, repeats),
    }
    gbs = {k: (nbytes / min(v) / 1e9, nbytes / statistics.median(v) / 1e9) for k, v in t.items()}
    print(
        f"{name:>14}  {rows:>9,} rows x {row.row_bytes:>3} B = {nbytes / 2**20:6.1f} MiB "
        f"(fp32 input {x.numel() * 4 / 2**20:6.1f} MiB)"
    )
    for k in ("encode", "decode", "copy"):
        best, med = gbs[k]
        ratio = (
            ""
            if k == "copy"
            else (f"   {k}/copy {best / gbs['copy'][0]:.4f} (min)  {med / gbs['copy'][1]:.4f} (median)")
        )
        print(f"{'':>16}{k:>6}  {best:8.3f} GB/s min time  {med:8.3f} GB/s median time{ratio}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=float, default=64.0, help="cache-row MiB per format (default 64)")
    ap.add_argument("--repeats", type=int, default=5, help="timed runs per measurement (default 5)")
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    ap.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    dev = torch.device(args.device)
    target = int(args.mib * 2**20)
    where = torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    print(
        f"kvviz.quant on {where}, torch {torch.__version__}, {args.repeats} repeats (GB/s at the min and median time)"
    )
    cases: dict = {}
    for c in parity_cases():  # the first case of a codec is its default options at the model's dims
        cases.setdefault(c.codec, c)
    for name in FORMATS:
        c = cases[name]
        bench(name, c.dims, dict(c.opts), target, dev, args.repeats)


if __name__ == "__main__":
    main()
