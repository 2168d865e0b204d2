"""Median build and render (PNG) time of each kvviz figure, for DeepSeek-V4-Pro and a model ten
times its size (`model.reader.with_layer_mix(model, c4=300, c128=310, swa=0)`), and the layer-plane
figure of Qwen3-Next's shared pool. The layouts are
vLLM #48993's: "after" = overlay + MXFP4 indexer, "before" = bucketed + FP8 indexer (flashmla).
Target: the Pro block map builds and renders in under 300 ms. Prints one line per figure; no
assertions. "data ms" is the figure's `kvviz.views` data object alone (no matplotlib); "build ms"
is data and drawing together.

    .venv/bin/python benchmarks/bench_plot.py [--repeat N]
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from kvviz import views as plot  # noqa: E402
from kvviz.core.kinds import CacheKind  # noqa: E402
from kvviz.families import load_preset  # noqa: E402
from kvviz.options import Options  # noqa: E402
from kvviz.vllm.plan import plan_model  # noqa: E402


def compare_layouts(model, backend: str = "flashmla"):
    """vLLM #48993's (before, after) Layouts: bucketed + FP8 indexer vs overlay + MXFP4."""
    before = plan_model(model, "bucketed", Options(backend=backend, indexer_format="fp8")).layout
    after = plan_model(model, "overlay", Options(backend=backend, indexer_format="mxfp4")).layout
    return before, after


def _render(fig) -> None:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=plot.DEFAULT_DPI)


def measure(build, repeat: int) -> tuple[float, float, float, float]:
    """Median ms: build (wall), render (wall), both (wall), both (CPU time of this process; the
    wall time of a shared machine also counts other processes)."""
    builds, renders, cpus = [], [], []
    _render(build())  # warm the font cache and imports
    for _ in range(repeat):
        c0 = time.process_time()
        t0 = time.perf_counter()
        fig = build()
        t1 = time.perf_counter()
        _render(fig)
        t2 = time.perf_counter()
        cpus.append(time.process_time() - c0)
        builds.append(t1 - t0)
        renders.append(t2 - t1)
    both = [b + r for b, r in zip(builds, renders)]
    return tuple(1e3 * statistics.median(v) for v in (builds, renders, both, cpus))


def median_ms(fn, repeat: int) -> float:
    """Median wall ms of fn() over `repeat` calls (after one warm-up call)."""
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def pool_bytes(layout, blocks: int = 4) -> tuple[np.ndarray, list[int]]:
    """A small pool: block b owned by group b % groups, its pages filled with random bytes."""
    rng = np.random.default_rng(0)
    data = np.zeros((blocks, layout.block_stride), np.uint8)
    owners = [b % len(layout.groups) for b in range(blocks)]
    for b, g in enumerate(owners):
        for p in layout.group_placements(g):
            data[b, p.offset : p.offset + p.cache.content_bytes] = rng.integers(
                1, 256, p.cache.content_bytes, dtype=np.uint8
            )
    return data, owners


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    pro = load_preset("deepseek-v4-pro")
    models = {
        "deepseek-v4-pro": pro,
        "10x pro (c4=300, c128=310)": pro.reader.with_layer_mix(pro, c4=300, c128=310, swa=0),
    }
    print(
        f"{'model':<28} {'figure':<13} {'layers':>6} {'data ms':>8} {'build ms':>9} {'render ms':>10} "
        f"{'total ms':>9} {'cpu ms':>7}"
    )
    for name, model in models.items():
        after = plan_model(model, "overlay", Options(backend="flashmla", indexer_format="mxfp4")).layout
        before, after_pr = compare_layouts(model, "flashmla")
        main_c4 = next(p.cache for p in after.placements if p.cache.kind is CacheKind.MAIN_C4)
        data, owners = pool_bytes(after)
        victim = after.group_placements(0)[1]
        victims = [{"block": 0, "start": victim.offset, "end": victim.end, "layer": victim.name}]
        figures = {  # figure: (its data object alone, data and drawing)
            "block_map": (lambda: plot.block_map_data(after), lambda: plot.block_map(after)),
            "before_after": (
                lambda: plot.before_after_data(before, after_pr),
                lambda: plot.before_after(before, after_pr),
            ),
            "page_anatomy": (lambda: plot.page_anatomy_data(main_c4), lambda: plot.page_anatomy(main_c4)),
            "live_bytes": (
                lambda: plot.live_bytes_data(after, data, owners, victims=victims),
                lambda: plot.live_bytes(after, data, owners, victims=victims),
            ),
        }
        for fig_name, (data_of, build) in figures.items():
            d = median_ms(data_of, args.repeat)
            b, r, t, c = measure(build, args.repeat)
            print(f"{name:<28} {fig_name:<13} {after.num_layers:>6} {d:>8.1f} {b:>9.1f} {r:>10.1f} {t:>9.1f} {c:>7.1f}")
    # The layer-plane figure is of a hybrid model's shared pool (as the report draws it): one row
    # per tensor, the report's small pool with every block's pages drawn.
    hybrid = plan_model(load_preset("qwen3-next-80b-a3b"), "vllm", Options()).layout
    blocks = plot.PLANE_PAGES_MAX_BLOCKS
    d = median_ms(lambda: plot.pool_planes_data(hybrid, blocks), args.repeat)
    b, r, t, c = measure(lambda: plot.pool_planes(hybrid, blocks), args.repeat)
    print(
        f"{'qwen3-next-80b-a3b':<28} {'pool_planes':<13} {hybrid.num_layers:>6} {d:>8.1f} {b:>9.1f} {r:>10.1f} "
        f"{t:>9.1f} {c:>7.1f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
