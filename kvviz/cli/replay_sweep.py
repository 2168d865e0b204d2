"""`kvviz replay ... --sweep-gpu H100,H200 --sweep-kv-dtype auto,fp8 ...`: one replay per setting of the swept
flags, one table (kvviz.deploy.traffic.sweep); each swept flag replaces its single flag (-tp, --kv-cache-dtype,
--max-num-seqs, the budget), which is refused beside it."""

from __future__ import annotations

import argparse
import json

from kvviz.base.errors import KvvizError, require


def _values(text: str, flag: str, parse) -> list:
    items = [x.strip() for x in text.split(",")]
    require(all(items) and len(items) <= 64, f"{flag} {text[:40]!r}: 1 to 64 comma-separated values")
    out = []
    for x in items:
        try:
            out.append(parse(x))
        except argparse.ArgumentTypeError as e:
            raise KvvizError(f"{flag} {x[:40]!r}: {e}") from None
    return out


def sweep_axes(args) -> dict:
    """The swept flags as kvviz.deploy.traffic.sweep's axes, each refused beside its single flag."""
    from kvviz.cli.replay_args import SWEEP_FLAGS
    from kvviz.cli.values import gib_value, int_in, nonempty
    from kvviz.options import KV_DTYPES

    def dtype(text: str) -> str:
        if text not in KV_DTYPES + ("auto",):
            raise argparse.ArgumentTypeError(f"choose from {', '.join(KV_DTYPES + ('auto',))}")
        return text

    parse = {
        "--sweep-budget-gib": ("budget_gib", gib_value, ("budget_gib", "budget_bytes", "gpu", "gpu_memory_gib")),
        "--sweep-gpu": ("gpu", nonempty("the GPU"), ("budget_gib", "budget_bytes", "gpu", "gpu_memory_gib")),
        "--sweep-tp": ("tensor_parallel_size", int_in(1, 1 << 16), ("tensor_parallel_size",)),
        "--sweep-kv-dtype": ("kv_dtype", dtype, ("kv_dtype",)),
        "--sweep-max-num-seqs": ("max_num_seqs", int_in(1, 1 << 20), ("max_num_seqs",)),
    }
    axes = {}
    for flag, (dest, _) in SWEEP_FLAGS.items():
        text = getattr(args, dest)
        if text is None:
            continue
        name, kind, single = parse[flag]
        clash = [d for d in single if getattr(args, d, None) is not None]
        require(not clash, f"{flag}: replaces --{clash[0].replace('_', '-') if clash else ''}; give one of them")
        axes[name] = _values(text, flag, kind)
    return axes


def run_sweep(args, figure) -> int:
    """Replay the traffic at every setting; print one table (--json, --markdown), draw it (--figure)."""
    from kvviz.cli.args import model_from_args, options_from_args
    from kvviz.cli.replay_args import traffic_args
    from kvviz.deploy.traffic import sweep

    axes = sweep_axes(args)
    require(args.prefix_caching is None, "--no-prefix-caching: not with --sweep-* flags (plan one setting at a time)")
    model = model_from_args(args)
    options = options_from_args(args)
    knobs = {k: getattr(options, k) for k in options.given()}
    budget = {
        k: getattr(args, k)
        for k in ("budget_gib", "budget_bytes", "gpu", "gpu_memory_gib", "gpu_memory_utilization")
        if getattr(args, k, None) is not None
    }
    budget |= {
        k: v
        for k, v in (
            ("weights_bytes", args.weights_bytes),
            ("checkpoint_dir", args.checkpoint),
            ("activation_bytes", args.activation_bytes),
        )
        if v is not None
    }
    require(
        budget or "budget_gib" in axes or "gpu" in axes, "replay: needs a budget: --budget-gib, --budget-bytes or --gpu"
    )
    reading = traffic_args(args)
    path = reading.pop("workload")
    result = sweep(model, path, trace=reading, max_num_seqs=args.max_num_seqs, **knobs, **budget, **axes)
    if figure is not None:
        from kvviz.views.query import save_figure
        from kvviz.views.staging import write_file

        fig = result.figure()
        write_file(figure, lambda tmp: save_figure(fig, tmp), what="--figure")
    if args.json:
        print(json.dumps(result.to_json()))
    elif args.markdown:
        print(result.markdown(), end="")
    else:
        print(result.title)
        print(result.table())
    return 0
