"""Time per plan for DeepSeek-V4-Pro (its shared-pool planners: bucketed, overlay and vllm, the old
overlay-by-spec) and synthetic models with 10x and 100x the layers (model.reader.with_layer_mix);
each plan is kvviz.vllm.plan.plan_model (caches -> groups -> Plan). Prints the growth ratio,
which should track the layer ratio (goal: 100x the layers in at most 110x the time).

Timed in process CPU time (time.process_time: steadier than wall time on a shared machine) with
the cyclic GC on, as a user runs it: a plan that keeps many objects alive makes the
collector's full passes more frequent and each one longer, a superlinear cost that belongs to the
plan. Also printed, per plan of each model: the gc-tracked objects the result keeps alive (what
every later full collection walks), the collections by generation a plan triggers and the CPU
time per plan spent in them (the part of the growth that is the collector's).

Run: PYTHONPATH=. python benchmarks/bench_plan.py   (a few seconds; min and median of repeats)
"""

import gc
import statistics
import time

from kvviz.families import load_preset
from kvviz.options import Options
from kvviz.vllm.plan import plan_model

# "vllm" is DeepSeek V4's old "overlay-by-spec"; the bucketed baseline keeps its FP8 indexer rows.
PLANNERS = (("bucketed", Options(indexer_format="fp8")), ("overlay", Options()), ("vllm", Options()))


def seconds(fn, repeat):
    """(min, median) CPU seconds of `repeat` calls, gc enabled, each from a collected heap."""
    times = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return min(times), statistics.median(times)


def gc_profile(fn, repeat):
    """(objects the result keeps alive, collections per call by generation, CPU seconds per call
    spent inside those collections) for `fn`."""
    gc.collect()
    before = len(gc.get_objects())
    kept = fn()
    alive = len(gc.get_objects()) - before - 1  # minus the list get_objects returned
    del kept
    collections = [0, 0, 0]
    in_gc = [0.0, 0.0]  # [seconds inside collections, start of the current one]

    def count(phase, info):
        if phase == "start":
            collections[info["generation"]] += 1
            in_gc[1] = time.process_time()
        else:
            in_gc[0] += time.process_time() - in_gc[1]

    gc.collect()
    gc.callbacks.append(count)
    try:
        for _ in range(repeat):
            fn()
    finally:
        gc.callbacks.remove(count)
    return alive, [c / repeat for c in collections], in_gc[0] / repeat


def main():
    pro = load_preset("deepseek-v4-pro")
    mix = pro.config.layer_mix
    with_layer_mix = pro.reader.with_layer_mix
    models = [
        ("pro", pro, 21),
        ("10x", with_layer_mix(pro, **{k: 10 * v for k, v in mix.items()}), 7),
        ("100x", with_layer_mix(pro, **{k: 100 * v for k, v in mix.items()}), 5),
    ]
    print(
        f"{'model':<5} {'layers':>6} {'planner':<16} {'caches':>7} {'min ms':>8} {'med ms':>8} {'growth':>15}"
        f" {'kept objs':>10} {'gc gen0/1/2 per plan':>21} {'gc ms':>6}"
    )
    for planner, options in PLANNERS:
        base = None
        for label, model, repeat in models:
            run = lambda: plan_model(model, planner, options)  # noqa: E731
            t_min, t_med = seconds(run, repeat)
            n = plan_model(model, planner, options).layout.num_layers
            alive, per_plan, gc_seconds = gc_profile(run, repeat)
            base = base or (t_min, t_med, n)
            growth = f"{t_min / base[0]:.0f}x/{t_med / base[1]:.0f}x" if base[2] != n else "1x"
            layers = model.config.num_hidden_layers
            print(
                f"{label:<5} {layers:>6} {planner:<16} {n:>7} {t_min * 1e3:>8.2f} {t_med * 1e3:>8.2f}"
                f" {growth:>9} ({n / base[2]:.1f}x)  {alive:>9,} {'/'.join(f'{c:.2f}' for c in per_plan):>21}"
                f" {gc_seconds * 1e3:>6.2f}"
            )
    print(
        "growth = min/median time over pro's; (Nx) = the cache ratio; goal at 100x: <= 110x;"
        " gc ms = CPU time per plan inside the collections counted"
    )


if __name__ == "__main__":
    main()
