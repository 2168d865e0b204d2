"""Speed of kvviz.verify against the machine's own yardsticks, on the same bytes (issue 17).

For each model a pool of --mib MiB, and, alternating so that all see the same machine load:

* copy_:    a plain copy_ of the pool's bytes into a warm tensor of the same size (the bandwidth);
* equal:    torch.equal of two such tensors viewed as int64 words;
* fresh:    a copy_ into a newly allocated torch tensor (its first-touch page faults included: what
            a run that allocates its pool with torch pays; verify's CPU pool sits on huge pages,
            kvviz.pool.host_zeros, and pays only the kernel's zero fill);
* verify(): the whole run (allocate the pool, write, read back, compare, decode the sample).

Prints verify's ratio to each yardstick (yardstick time / verify time; 1 = as fast), min and
median over --repeats runs. On the CPU both sides run with torch.set_num_threads(1).
Goal (issue 17): verify() at least 0.2 of copy_ for DeepSeek-V4-Pro, Gemma 3 27B and Qwen3-Next.

    python benchmarks/bench_verify.py [--device cpu|auto|cuda] [--mib 256] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics

import torch
from bench_pool import once  # this folder is on sys.path when a script here runs

from kvviz.families import load_preset
from kvviz.pool import resolve_device
from kvviz.verify import verify
from kvviz.vllm.plan import plan_model

MODELS = ("deepseek-v4-pro", "gemma-3-27b", "qwen3-next-80b-a3b")
GOAL = 0.2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--models", default=",".join(MODELS))
    args = ap.parse_args()
    dev = resolve_device(args.device, "--device")
    if dev.type == "cpu":
        torch.set_num_threads(1)
    print(
        f"verify vs yardsticks on {dev}, {args.mib} MiB pools, {args.repeats} runs "
        f"(ratio = yardstick time / verify time; goal >= {GOAL} of copy_)"
    )
    for model in args.models.split(","):
        layout = plan_model(load_preset(model)).pools[0]
        n = max(len(layout.groups), (args.mib << 20) // layout.block_stride)
        nbytes = n * layout.block_stride
        src = torch.empty(nbytes, dtype=torch.uint8, device=dev).fill_(1)
        dst = torch.empty_like(src).fill_(2)
        words_a, words_b = src[: nbytes // 8 * 8].view(torch.int64), dst[: nbytes // 8 * 8].view(torch.int64)
        t = {"copy_": [], "equal": [], "fresh": [], "verify": []}
        for _ in range(args.repeats):
            t["copy_"].append(once(lambda: dst.copy_(src), dev))
            t["equal"].append(once(lambda: torch.equal(words_a, words_b), dev))
            t["fresh"].append(once(lambda: torch.empty_like(src).copy_(src), dev))
            report = {}
            t["verify"].append(once(lambda: report.setdefault("r", verify(layout, n, device=dev)), dev))
            assert report["r"].passed, report["r"].text()
        v = t["verify"]
        print(
            f"{model}: {n:,} blocks x {layout.block_stride:,} B = {nbytes / 2**20:.0f} MiB; verify "
            f"{min(v) * 1e3:.0f} ms best, {statistics.median(v) * 1e3:.0f} ms median"
        )
        for name in ("copy_", "equal", "fresh"):
            y = t[name]
            best = min(y) / min(v)
            med = statistics.median(y) / statistics.median(v)
            print(
                f"  vs {name:<6} {min(y) * 1e3:6.0f} ms: ratio {best:.3f} (min) {med:.3f} (median)"
                + (f"  goal {GOAL}: {'met' if best >= GOAL else 'NOT met'}" if name == "copy_" else "")
            )
        del src, dst


if __name__ == "__main__":
    main()
