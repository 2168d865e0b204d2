"""`kvviz compare`: the model's layouts side by side at one budget (every planner; DeepSeek V4: vLLM #48993's
before/after with the published table), the engines (`--engines`, kvviz.cli.engines), or two configurations
(`A -- B`, kvviz.cli.review), as text, `--markdown` or `--json`.

Planners that give one model the same layout (a model of one cache kind: Kimi-K2, GLM-4.5-Air, MiniMax-M2) are one
row, labelled with every planner's name ('vllm = packed = separate'), and a line says why
(kvviz.core.sidebyside.why_same)."""

from __future__ import annotations

from kvviz.api import make_plan
from kvviz.base.errors import KvvizError, require
from kvviz.cli.args import auto_fitted, model_from_args, options_from_args, refuse_knobs
from kvviz.cli.budget_args import budget_from_args
from kvviz.cli.engines import run_compare_engines
from kvviz.cli.output import (
    CAPACITY_HEADER,
    capacity_rows,
    print_json,
    require_shares_hold_blocks,
)
from kvviz.cli.review import SEPARATOR, run_side_by_side
from kvviz.core.layout import text_table
from kvviz.core.sidebyside import same_layouts, why_same
from kvviz.core.tables import markdown_table
from kvviz.vllm.plan import planned_setting


def run_compare(args, argv: list[str], parser) -> int:
    """`kvviz compare` in the mode its flags ask for (module docstring); `argv` as given and the
    `parser` that read it (side B of `A -- B` is parsed again)."""
    if SEPARATOR in (argv[argv.index("compare") + 1 :] if "compare" in argv else []):
        return run_side_by_side(args, argv, parser)
    if args.vs:  # words that are no flag, without `--`: what argparse says of them
        parser.error(f"unrecognized arguments: {' '.join(args.vs)}")
    if args.engines is not None:
        require(not args.markdown, "--markdown: the engines' rows are text or --json")
        return run_compare_engines(args)
    if args.figure is not None:
        raise KvvizError(
            "--figure: applies with --engines (the engines figure) or `A -- B` (two configurations); "
            "`kvviz render` draws the plans"
        )
    require(args.planner is None, "--planner: every planner is a row here; give it to `A -- B`")
    return _run_planners(args)


def _run_planners(args) -> int:
    model = model_from_args(args)
    options = options_from_args(args)
    refuse_knobs(model, options)
    given, options = auto_fitted(args, model, options, budget_from_args(args, model))
    budget = given.bytes
    plans = [
        (label, make_plan(model, planner, opts)) for label, planner, opts in model.reader.comparisons(model, options)
    ]
    for _, p in plans:
        require_shares_hold_blocks(args, p, budget)
    same = [labels for labels in same_layouts(plans) if len(labels) > 1]
    merged = {labels[0]: " = ".join(labels) for labels in same}  # one row for one layout
    kept = [(merged.get(label, label), p) for label, p in plans if not _merged_away(label, same)]
    caps = [(label, p.capacity(budget)) for label, p in kept]
    whys = [(labels, why_same(dict(plans)[labels[0]])) for labels in same]
    notes = model.reader.compare_notes(model, options, plans, budget)
    if args.json:
        out = {
            "model": model.name,
            "family": model.family,
            "budget_bytes": budget,
            "budget_gib": args.budget_gib,
            "max_model_len": plans[0][1].max_model_len,
            "knobs": dict(plans[0][1].knobs),
            "layouts": [
                {"label": label, "same_as": _same_as(label, same), **p.capacity(budget).to_json()} for label, p in plans
            ],
            "same_layouts": [{"planners": labels, "why": why} for labels, why in whys],
        }
        out.update({k: v for k, v in notes.get("json", {}).items() if k not in out})  # what was given stays
        print_json(out | given.to_json())
        return 0
    gib = f" ({args.budget_gib} GiB)" if args.budget_gib is not None else ""
    head = (
        f"{model.name} ({planned_setting(model, options)}): budget {budget:,} B{gib}, requests of "
        f"{plans[0][1].max_model_len:,} tokens"
    )
    rows = capacity_rows(caps, [p for _, p in kept])
    lines = [f"{label}: {c.line}" for label, c in caps]
    lines += [f"{' = '.join(labels)}: one layout: {why}" for labels, why in whys]
    if len(kept) > 1:  # the family's words on how its planners differ, where they do
        lines += list(notes.get("lines", ()))
    lines += given.lines()
    if args.markdown:
        print(f"### {head}\n\n{markdown_table(rows, CAPACITY_HEADER)}\n" + "".join(f"\n{line}  " for line in lines))
        return 0
    print(head)
    print(text_table(rows, CAPACITY_HEADER))
    for line in lines:
        print(line)
    return 0


def _merged_away(label: str, same: list[list[str]]) -> bool:
    return any(label in labels[1:] for labels in same)


def _same_as(label: str, same: list[list[str]]) -> str | None:
    """The first planner whose layout `label`'s is, when it is another's."""
    return next((labels[0] for labels in same if label in labels[1:]), None)
