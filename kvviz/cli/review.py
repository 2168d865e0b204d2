"""`kvviz compare A -- B`: two configurations side by side for a review (kvviz.api.side_by_side's table).

The flags before `--` are side A, complete (a model and a budget, as `kvviz compare` takes them); the flags after
`--` are what side B changes: B is A with them applied, later flags winning, so

    kvviz compare --model llama-3.1-8b --budget-gib 40 -- --kv-cache-dtype fp8     # bf16 vs fp8
    kvviz compare --model qwen3-next-80b-a3b --gpu H200 -tp 2 -- -tp 4           # TP 2 vs TP 4
    kvviz compare --model llama-3.1-8b --budget-gib 40 -- --model mistral-7b-v0.1  # one model vs another

A source flag after `--` (--model, --hf-config, --config) replaces A's source, and a budget flag replaces A's
budget (each side's budget is then its own: on a GPU, its weights at its TP). The output flags (--json,
--markdown, --figure) come before `--` and apply to the review. The text names what differs, then one row per
quantity with A's value, B's and B against A.
"""

from __future__ import annotations

import argparse

from kvviz.api import budget_record
from kvviz.base.errors import require
from kvviz.base.inputs import printable
from kvviz.cli.args import plan_from_args
from kvviz.cli.output import print_json, require_shares_hold_blocks
from kvviz.core.sidebyside import Side, SideBySide
from kvviz.views.staging import write_file

SEPARATOR = "--"
SOURCE_FLAGS = ("--model", "--hf-config", "--config")
BUDGET_FLAGS = (
    "--budget-gib",
    "--budget-bytes",
    "--kv-cache-memory-bytes",
    "--gpu",
    "--gpu-memory-gib",
    "--gpu-memory-utilization",
    "--weights-bytes",
    "--checkpoint",
    "--activation-bytes",
)
OUTPUT_FLAGS = ("--json", "--markdown", "--figure", "--engines")


def sides(argv: list[str]) -> tuple[list[str], list[str]]:
    """(A's flags, B's changes): `argv` after `compare`, split at the first `--`."""
    rest = argv[argv.index("compare") + 1 :]
    cut = rest.index(SEPARATOR)
    return rest[:cut], rest[cut + 1 :]


def _flag(arg: str) -> str:
    return arg.split("=", 1)[0]


def _drop(argv: list[str], flags: tuple[str, ...], takes_value: dict[str, bool]) -> list[str]:
    """`argv` without the flags of `flags` (and the value each takes)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        if _flag(arg) in flags:
            skip = takes_value.get(arg, False)  # `--flag value`; `--flag=value` is one word
            continue
        out.append(arg)
    return out


def _takes_value(parser: argparse.ArgumentParser) -> dict[str, bool]:
    """Each option string of the compare command: whether it takes a value (argparse keeps no public table)."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["compare"]
    return {s: a.nargs != 0 for a in sub._actions for s in a.option_strings}


def side_b_argv(parser: argparse.ArgumentParser, a_argv: list[str], b_argv: list[str]) -> list[str]:
    """B's whole command line: A's flags less its output flags (the review's), less its source when B names one
    and its budget when B gives one, then B's changes."""
    given = {_flag(a) for a in b_argv if a.startswith("-")}
    wrong = sorted(given & set(OUTPUT_FLAGS))
    require(not wrong, f"{wrong[0] if wrong else ''}: an output flag of the review; give it before `--`")
    takes = _takes_value(parser)
    drop = OUTPUT_FLAGS
    drop += SOURCE_FLAGS if given & set(SOURCE_FLAGS) else ()
    drop += BUDGET_FLAGS if given & set(BUDGET_FLAGS) else ()
    return _drop(a_argv, drop, takes) + b_argv


def _side(label: str, args) -> Side:
    planned = plan_from_args(args)
    plan, budget = planned.plan, planned.budget.bytes  # compare takes no --groups: always a model's plan
    require_shares_hold_blocks(args, plan, budget)
    record = budget_record(budget, planned.budget.derived, budget_gib=planned.budget.gib)
    return Side(label, plan, plan.capacity(budget), record)


def run_side_by_side(args, argv: list[str], parser: argparse.ArgumentParser) -> int:
    """`kvviz compare A -- B` (module docstring): the review as text, --markdown, --json, and --figure."""
    from kvviz.cli.engines import figure_path

    require(args.engines is None, "--engines: compares engines on one configuration; give it without `--`")
    figure = figure_path(args.figure)
    a_argv, b_argv = sides(argv)
    require(b_argv, "--: give what side B changes after it, e.g. `-- --kv-cache-dtype fp8`")
    args_b = parser.parse_args(["compare", *side_b_argv(parser, a_argv, b_argv)])
    review = SideBySide(_side("A", args), _side("B", args_b))
    if figure is not None:
        _write_review_figure(figure, review)
    if args.json:
        print_json(review.to_json())
    elif args.markdown:
        print(review.markdown(), end="")
    else:
        print(review.text())
    if figure is not None and not args.json:
        print(f"figure: {printable(str(figure))}")
    return 0


def _write_review_figure(figure, review: SideBySide) -> None:
    from kvviz.views.query import save_figure
    from kvviz.views.sidebyside import side_by_side as draw

    fig = draw(review)
    write_file(figure, lambda tmp: save_figure(fig, tmp), what="--figure")
