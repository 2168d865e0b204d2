"""The subcommands' run functions (plan, compare, render, fit, models, verify). A command that needs
torch or matplotlib imports its module inside its run function, so the light commands stay light."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kvviz.api import make_plan
from kvviz.base.defaults import VERIFY_BLOCKS
from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import printable
from kvviz.cli.args import (
    int_list,
    is_utf8,
    model_from_args,
    plan_from_args,
)
from kvviz.cli.budget_args import require_budget_holds_a_block, weights_sources
from kvviz.cli.deploy_views import deploy_views
from kvviz.cli.engines import run_plan_engine
from kvviz.cli.output import (
    CAPACITY_HEADER,
    capacity_rows,
    group_table_text,
    print_json,
    require_shares_hold_blocks,
)
from kvviz.core.layout import text_table
from kvviz.core.sidebyside import layout_key, why_same
from kvviz.families import preset_names, preset_summary


def run_plan(args) -> int:
    """`kvviz plan`: the plan of a model or a --groups file, as text, --markdown or --json
    (another --engine's plan through kvviz.cli.engines)."""
    if args.engine != "vllm":
        require(not args.markdown, "--markdown: the vllm engine's plan only; give --json for another engine's")
        return run_plan_engine(args)
    planned = plan_from_args(args)
    budget = planned.budget.bytes
    require(not (args.json and args.markdown), "--markdown: give --json or --markdown, not both")
    if planned.plan is None:  # a groups file: a layout, no model to count requests with
        require(not args.markdown, "--markdown: a --groups layout has no model; give --json")
        layout = planned.groups_layout
        blocks = None
        if budget is not None:
            require_budget_holds_a_block(args, budget, layout.block_stride)
            blocks = layout.num_blocks(budget)
        if args.json:
            out = layout.to_json(num_blocks=blocks)
            out["budget_bytes"] = budget
            print_json(out)
            return 0
        print(group_table_text((layout,)))
        print()
        print(layout.text_map())
        print()
        print(layout.explain(budget))
        return 0
    p = planned.plan
    if budget is not None:
        require_shares_hold_blocks(args, p, budget)
    views = deploy_views(args, planned, budget)  # PP refusal, offload, transfer, fp8 (cli/deploy_views.py)
    if args.json:
        print_json(p.to_json(budget_bytes=budget) | planned.budget.to_json() | views.json)
        return 0
    if args.markdown:  # the header, the group table and the capacity line; the budget's terms and views below
        print(p.to_markdown(budget))
        for line in [*planned.budget.lines(), *views.lines]:
            print(f"{line}  ")
        return 0
    print(p.describe)
    print(p.group_table())
    print()
    print(p.text_map())
    print()
    print(p.explain(budget))
    if budget is not None:
        cap = p.capacity(budget)
        print()
        print(text_table(capacity_rows([(p.model, cap)], [p]), CAPACITY_HEADER))
        for line in planned.budget.lines():
            print(line)
        print(cap.line)
    for line in views.lines:
        print(line)
    return 0


# ---- render -------------------------------------------------------------------------------
def run_render(args) -> int:
    """`kvviz render`: the report figure (the plan's byte map; before/after where a planner changes it)."""
    # kvviz.views.report draws with matplotlib: imported here to keep it off plan/compare/models.
    from kvviz.views import report

    require(args.title is None or is_utf8(args.title), f"--title {args.title!r}: is not valid Unicode")
    planned = plan_from_args(args)
    budget = planned.budget.bytes
    before = after = note = None
    if planned.plan is None:
        source, setting, pools = (
            printable(Path(args.groups).name),
            f"{planned.groups_layout.planner} layout",
            planned.pools,
        )
    else:
        p, model = planned.plan, planned.model
        if budget is not None:
            require_shares_hold_blocks(args, p, budget)
        # the header says what was planned: KV dtype, TP and every knob given (Plan.setting)
        source, setting, pools = model.name, f"{p.planner} layout ({p.setting})", p.pools
        pair = model.reader.comparisons(model, planned.options)
        if len(pools) == 1 and not p.separate:
            ba = [(pl, o) for _, pl, o in pair if pl != "separate"][:2]
            if len(ba) == 2:
                pb, pa = (make_plan(model, pl, o) for pl, o in ba)
                if layout_key(pb) == layout_key(pa):  # the same panels twice say nothing: say why instead
                    note = f"no before/after: {pa.planner} gives {pb.planner}'s layout here ({why_same(pb)})"
                else:
                    before, after = pb.layout, pa.layout
    out = report.prepare_out_dir(args.out, what="--out")  # after the layouts: bad input creates no folder
    title = args.title or f"{source}: {setting}"
    if budget is not None and planned.plan is not None:
        title += f" ({planned.plan.capacity(budget).line})"
    dpi = {} if args.dpi is None else {"dpi": args.dpi}
    # Separate pools: one report per pool, each in its own folder.
    targets = (
        [(out, pools[0], title)]
        if len(pools) == 1
        else [
            (
                report.prepare_sub_dir(out, f"pool-{pl.groups[0].name}", what="--out"),
                pl,
                f"{title}: pool {pl.groups[0].name}",
            )
            for pl in pools
        ]
    )
    written = []
    with report.Staged() as staged:  # every report written before any file takes its name
        for folder, one, heading in targets:
            both = {} if len(pools) > 1 else {"before": before, "after": after, "note": note}
            written += report.render_report(
                folder, layout=one, title=heading, svg=not args.no_svg, staged=staged, **both, **dpi
            )
    if note is not None:
        print(note)
    for path in written:
        print(printable(str(path)))
    return 0


def run_fit(args) -> int:
    """Requests that fit against context length for one model on a few GPUs and TP sizes."""
    from kvviz.deploy import fit
    from kvviz.deploy import gpus as gpus_module

    model = model_from_args(args)
    knobs = {} if args.kv_dtype in (None, "auto") else {"kv_dtype": args.kv_dtype}
    extra = weights_sources(args)
    if args.gpu_memory_utilization is not None:
        extra["gpu_memory_utilization"] = args.gpu_memory_utilization
    gpus = tuple(g.strip() for g in args.gpus.split(",") if g.strip())
    for g in gpus:
        gpus_module.gpu_spec(g)  # an unknown name: one line listing the known
    contexts = fit.DEFAULT_CONTEXTS if args.contexts is None else int_list(args.contexts, "--contexts")
    table = fit.fit_table(
        model, gpus=gpus, tp_sizes=int_list(args.tp, "--tp"), contexts=contexts, planner=args.planner, **extra, **knobs
    )
    if args.out is not None:
        from kvviz import views as plot
        from kvviz.views import report

        out = report.prepare_out_dir(args.out, what="--out")
        report.write_file(out / "fit.png", plot.to_png_bytes(fit.fit_figure(table)))
    if args.json:
        print_json(table.to_json())
    else:
        print("\n".join(table.lines()))
    return 0


# ---- models -------------------------------------------------------------------------------
def run_models(args) -> int:
    """`kvviz models`: one summary line per shipped preset, or `--architectures` (vLLM's registry)."""
    if getattr(args, "architectures", False):
        return _run_architectures(args)
    if getattr(args, "json", False):
        raise KvvizError("--json: applies only with --architectures")
    for name in preset_names():
        print(preset_summary(name))  # from the raw JSON: no transformers
    return 0


def _run_architectures(args) -> int:
    """vLLM 0.33's registry with kvviz's status of each architecture: the table of docs/models.md."""
    from kvviz.families.catalog import architecture_status, models_table, table_counts
    from kvviz.families.refused import vllm_registry

    registry = vllm_registry()
    if not args.json:
        print(models_table(registry), end="")
        return 0
    tables = {
        table: [
            dict(
                row,
                status=architecture_status(row["architecture"])[0],
                detail=architecture_status(row["architecture"])[1],
            )
            for row in rows
        ]
        for table, rows in registry["tables"].items()
    }
    counts = {t: {"planned": p, "total": n} for t, (p, n) in table_counts(registry, architecture_status).items()}
    print(json.dumps({"vllm_version": registry["vllm_version"], "counts": counts, "tables": tables}, indent=2))
    return 0


def run_verify(args) -> int:
    """0 when the check held (clean, or the hazard's damage showed), 1 otherwise."""
    from kvviz.verify import blocks_for_budget, verify  # torch: only when verify runs

    if args.hazard_layer is not None and args.hazard not in ("zeroer", "misread"):
        raise KvvizError("--hazard-layer: applies only with --hazard zeroer or --hazard misread")
    if args.blocks is not None and (args.budget_gib is not None or args.budget_bytes is not None):
        raise KvvizError("--blocks: give either --blocks or a budget (--budget-gib/--budget-bytes)")
    planned = plan_from_args(args)
    pools = planned.pools
    budget = planned.budget.bytes
    shares = None
    require(
        not isinstance(budget, tuple),
        "--gpu: with --pipeline-parallel-size each stage has its own budget; verify writes one pool: give "
        "--budget-bytes, or --blocks without --gpu",
    )
    if budget is not None:
        if planned.plan is not None:
            require_shares_hold_blocks(args, planned.plan, budget)
            shares = planned.plan.split_budget(budget)
        else:
            require_budget_holds_a_block(args, budget, pools[0].block_stride)
            shares = [budget]
    # Separate pools: each pool is its own tensor with its own blocks, so each is verified on its own.
    reports = []
    for i, pool_layout in enumerate(pools):
        n = (
            blocks_for_budget(pool_layout, shares[i])
            if shares is not None
            else (VERIFY_BLOCKS if args.blocks is None else args.blocks)
        )
        reports.append(
            verify(
                pool_layout,
                n,
                device=args.device,
                seed=args.seed,
                hazard=args.hazard,
                assignment=args.assignment,
                hazard_layer=args.hazard_layer,
                progress=not args.json and sys.stderr.isatty(),
            )
        )
    if args.json:
        print_json(
            reports[0].to_json()
            if len(reports) == 1
            else {"pools": [r.to_json() for r in reports], "ok": all(r.passed for r in reports)}
        )
    else:
        print("\n\n".join(r.text() for r in reports))
    return 0 if all(r.passed for r in reports) else 1
