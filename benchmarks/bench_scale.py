"""Layouts of 12,500 to 100,000 layers in three shapes: plan + text_map + json.dumps(to_json()).

Shapes (built directly from caches and groups, so no config bound applies):
* groups:     n one-layer groups (what `--groups` JSON can describe), planned by overlay;
* page sizes: n layers of n distinct page sizes in 8 groups, planned by bucketed;
* MTP layers: DeepSeek-V4-Pro's 61 layers plus n SWA-only MTP layers, grouped by vLLM's rules
              (kvviz.vllm.grouping.kv_cache_groups, its packed path) and planned by overlay-by-spec
              (kvviz.vllm.planners.plan_overlay_by_spec, what the 'vllm' planner runs).

Prints, per shape and n, the min and median time of a few runs (cyclic GC on) and the
growth per doubling of n: linear planning shows ~2x; a quadratic step would show ~4x. Goal:
every 100,000-layer layout in under 5 s on 2 cores. Times are process CPU seconds
(time.process_time): on a machine shared with other jobs, wall time mostly measures the others;
single-threaded CPU time is what the same run takes in wall time on an idle machine.

Run: PYTHONPATH=. python benchmarks/bench_scale.py   (about a minute on a shared 2-core machine)
"""

import json
import sys

from bench_plan import seconds  # this folder is on sys.path when a script here runs

from kvviz.base.defaults import BLOCK_SIZE
from kvviz.core.group import KVGroup
from kvviz.core.spec import custom_cache
from kvviz.families import load_preset
from kvviz.families.deepseek_v4 import CacheOptions, layer_caches, model_caches
from kvviz.vllm.grouping import kv_cache_groups
from kvviz.vllm.planners import plan_bucketed, plan_overlay, plan_overlay_by_spec

SIZES = (12_500, 25_000, 50_000, 100_000)
REPEAT = 3
PRO = load_preset("deepseek-v4-pro").config  # the DeepSeek V4 ModelConfig


def one_layer_groups(n: int):
    return tuple(
        KVGroup(name=f"g{i}", layers=(custom_cache(f"g{i}.0", 4096 * (1 + i % 7), tokens_per_block=BLOCK_SIZE),))
        for i in range(n)
    )


def distinct_page_sizes(n: int, groups: int = 8):
    caches = [custom_cache(f"l{i}", 1024 + i, tokens_per_block=BLOCK_SIZE) for i in range(n)]
    return tuple(KVGroup(name=f"g{k}", layers=tuple(caches[k::groups])) for k in range(groups))


def pro_with_mtp_layers(n: int):
    options = CacheOptions()
    mtp = [c for k in range(n) for c in layer_caches(PRO, PRO.num_hidden_layers + k, options)]
    return model_caches(PRO, CacheOptions(mtp=False)) + tuple(mtp)


SHAPES = {
    "groups": (one_layer_groups, plan_overlay),
    "page sizes": (distinct_page_sizes, plan_bucketed),
    "MTP layers": (
        pro_with_mtp_layers,
        lambda caches: plan_overlay_by_spec(kv_cache_groups(caches, block_outermost=True)),
    ),
}


def plan_print_json(planner, built) -> int:
    layout = planner(built)
    text = layout.text_map()
    blob = json.dumps(layout.to_json())
    return layout.num_layers + len(text) + len(blob)


def timed(fn, repeat=REPEAT):
    return seconds(fn, repeat)  # bench_plan's timer: min and median CPU seconds, from a collected heap


def main(shapes=tuple(SHAPES)):
    print(f"{'shape':<11} {'layers':>8} {'groups':>7} {'min cpu s':>9} {'med cpu s':>9} {'growth per doubling':>20}")
    for shape in shapes:
        build, planner = SHAPES[shape]
        previous = None
        for n in SIZES:
            built = build(n)
            layout = planner(built)
            t_min, t_med = timed(lambda: plan_print_json(planner, built))
            growth = "" if previous is None else f"{t_min / previous[0]:.2f}x / {t_med / previous[1]:.2f}x"
            print(
                f"{shape:<11} {layout.num_layers:>8,} {len(layout.groups):>7,} {t_min:>9.3f} {t_med:>9.3f}"
                f" {growth:>20}",
                flush=True,
            )
            previous = (t_min, t_med)
            del built, layout
    print("time = plan + text_map() + json.dumps(to_json()); growth = min / median over the previous n")


if __name__ == "__main__":
    main(tuple(sys.argv[1:]) or tuple(SHAPES))
