"""Time per plan for DeepSeek-V4-Pro (all planners) and synthetic models with 10x and 100x the
layers; prints the growth ratio, which should track the layer ratio (linear planning).

The second column times the same plan with Python's cyclic GC paused: at 100x the layers the
collector's full passes over the larger heap add a superlinear share that is not the planner's."""

import gc
import statistics
import time

from kvviz.config import load_model, with_layer_mix
from kvviz.planners import plan_model
from kvviz.specs import CacheOptions


def median_seconds(fn, repeat, *, pause_gc=False):
    times = []
    for _ in range(repeat):
        gc.collect()
        if pause_gc:
            gc.disable()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        gc.enable()
    return statistics.median(times)


def main():
    pro = load_model("deepseek-v4-pro")
    models = [("pro (61 layers)", pro, 21),
              ("10x (610 layers)", with_layer_mix(pro, c4=300, c128=310, swa=0), 7),
              ("100x (6100 layers)", with_layer_mix(pro, c4=3000, c128=3100, swa=0), 3)]
    print(f"{'model':<20} {'planner':<16} {'caches':>7} {'ms/plan':>9} {'growth':>8} {'no-GC ms':>9} {'growth':>7}")
    for planner, options in (("bucketed", CacheOptions(indexer_format="fp8")), ("overlay", CacheOptions()),
                             ("overlay-by-spec", CacheOptions())):
        base = None
        for label, cfg, repeat in models:
            t = median_seconds(lambda: plan_model(cfg, options, planner), repeat)
            t_nogc = median_seconds(lambda: plan_model(cfg, options, planner), repeat, pause_gc=True)
            n = plan_model(cfg, options, planner).num_layers
            base = base or (t, t_nogc, n)
            print(f"{label:<20} {planner:<16} {n:>7} {t * 1e3:>9.2f} {t / base[0]:>7.1f}x"
                  f" {t_nogc * 1e3:>9.2f} {t_nogc / base[1]:>6.1f}x  (caches {n / base[2]:.0f}x)")


if __name__ == "__main__":
    main()
