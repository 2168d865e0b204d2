"""`kvviz` console script (also `python -m kvviz`): the top floor.

Every subcommand lives here and no library module imports this one. The light commands
(`--help`, `models`, `plan`, `compare`) import neither torch nor matplotlib; a command that needs
one imports its module inside its run function (said there).

Every bad input ends with exit status 2 and one line `kvviz: error: ...`; Ctrl-C ends with the
line `kvviz: interrupted` and exit status 130.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from . import capacity
from .config import config_from_dict, load_model, model_names
from .defaults import GIB
from .errors import KvvizError, require
from .grouping import load_groups
from .inputs import DPI_RANGE, MAX_BUDGET_BYTES, MAX_DIM, MAX_TOKENS_PER_BLOCK, read_json
from .planners import PLANNERS, compare_layouts, plan, plan_model
from .published import published_row
from .specs import BACKENDS, CacheOptions

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a command ended by Ctrl-C
_OPTION_DEFAULTS = CacheOptions()  # the knobs' defaults live in CacheOptions; help text reads them


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line (exit 2) instead of usage + error."""

    def error(self, message: str):  # noqa: D401
        raise KvvizError(message)


# ---- option types: each refuses what it cannot use, with the bound in the message ----------
def _int_in(low: int, high: int):
    def parse(text: str) -> int:
        digits = text.strip().lstrip("+-").lstrip("0")
        if digits.isdigit() and len(digits) > len(str(high)):  # before int(): it refuses 4,301 digits
            raise argparse.ArgumentTypeError(f"a {len(digits):,}-digit number is out of range: "
                                             f"must be from {low:,} to {high:,}")
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value:,} is out of range: must be from {low:,} to {high:,}")
        return value

    parse.__name__ = "integer"
    return parse


def _gib(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number") from None
    high = MAX_BUDGET_BYTES / GIB
    if not (math.isfinite(value) and 0 < value <= high):
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is out of range: must be above 0 and at most {high:,.0f}")
    return value


def _nonempty(what: str):
    def parse(text: str) -> str:
        if not text:
            raise argparse.ArgumentTypeError(f"{what} is empty")
        return text

    parse.__name__ = what
    return parse


# ---- shared arguments ---------------------------------------------------------------------
# The knobs that describe a DeepSeek V4 model's caches; a --groups file has its own page sizes,
# so giving one of these with --groups is refused rather than ignored. (dest, option)
MODEL_KNOBS = (("backend", "--backend"), ("main_format", "--main-format"), ("indexer", "--indexer"),
               ("no_mtp", "--no-mtp"), ("block_size", "--block-size"), ("head_dim", "--head-dim"),
               ("rope_dim", "--rope-dim"), ("index_head_dim", "--index-head-dim"))


def add_model_arguments(p: argparse.ArgumentParser, *, planner_default: str = "overlay") -> None:
    """--model/--config/--groups and the knobs every layout-producing command takes."""
    d = _OPTION_DEFAULTS
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", help=f"a shipped preset ({', '.join(model_names())})")
    src.add_argument("--config", metavar="FILE", help="an HF config.json of the DeepSeek V4 shape")
    src.add_argument("--groups", metavar="FILE",
                     help='arbitrary groups as JSON: {"groups": [{"name", "layers": [{"name", "page_bytes"}]}]}')
    p.add_argument("--planner", default=planner_default, choices=PLANNERS, help=f"default {planner_default}")
    knobs = p.add_argument_group("model knobs (with --model or --config; refused with --groups)")
    knobs.add_argument("--backend", type=_nonempty("the backend"), help=f"page alignment ({', '.join(BACKENDS)}); default {d.backend}")
    knobs.add_argument("--main-format", type=_nonempty("the format"), help="fp8_ds_mla, fp8 or bf16 (default: the backend's)")
    knobs.add_argument("--indexer", type=_nonempty("the format"), help=f"indexer K row: fp8 (132 B) or mxfp4 (68 B); default {d.indexer_format}")
    knobs.add_argument("--no-mtp", action="store_true", help="leave out the MTP layer(s)")
    knobs.add_argument("--block-size", type=_int_in(1, MAX_TOKENS_PER_BLOCK), metavar="TOKENS",
                       help=f"tokens per block of the main caches (default {d.block_size})")
    knobs.add_argument("--head-dim", type=_int_in(1, MAX_DIM), help="override the config's head_dim")
    knobs.add_argument("--rope-dim", type=_int_in(1, MAX_DIM), help="override qk_rope_head_dim")
    knobs.add_argument("--index-head-dim", type=_int_in(1, MAX_DIM), help="override index_head_dim")


def add_budget_arguments(p: argparse.ArgumentParser, *, required: bool = False) -> None:
    b = p.add_mutually_exclusive_group(required=required)
    b.add_argument("--budget-gib", type=_gib, metavar="GIB", help="KV budget in GiB (1 GiB = 2^30 B)")
    b.add_argument("--budget-bytes", type=_int_in(1, MAX_BUDGET_BYTES), metavar="BYTES", help="KV budget in bytes")


def budget_from_args(args) -> int | None:
    if args.budget_gib is None and args.budget_bytes is None:
        return None
    return capacity.budget_bytes(gib=args.budget_gib, num_bytes=args.budget_bytes)


def _budget_option(args) -> str:
    return f"--budget-gib {args.budget_gib}" if args.budget_gib is not None else f"--budget-bytes {args.budget_bytes}"


def require_budget_holds_a_block(args, budget: int, stride: int) -> None:
    """A budget that holds no block is an error, before anything is printed."""
    require(budget >= stride, f"{_budget_option(args)}: {budget:,} B is smaller than one block stride ({stride:,} B)")


def refuse_model_knobs_with_groups(args) -> None:
    if args.groups is None:
        return
    for dest, option in MODEL_KNOBS:
        if getattr(args, dest) not in (None, False):
            raise KvvizError(f"{option}: a model knob; it does not apply to --groups (the file gives the page sizes)")


def options_from_args(args, **overrides) -> CacheOptions:
    """CacheOptions from the knobs given; a knob not given keeps CacheOptions' default."""
    values = dict(backend=args.backend, main_format=args.main_format, indexer_format=args.indexer,
                  block_size=args.block_size, mtp=False if args.no_mtp else None)
    values.update(overrides)
    return CacheOptions(**{k: v for k, v in values.items() if v is not None})


def _load_config_file(path: str):
    raw = read_json(path, what="--config")
    if isinstance(raw, dict) and "groups" in raw and "num_hidden_layers" not in raw:
        raise KvvizError(f"--config {path!r}: this is a groups file, not a model config; give it with --groups")
    return config_from_dict(raw, name=Path(path).stem)


def config_from_args(args):
    config = load_model(args.model) if args.model is not None else _load_config_file(args.config)
    return config.with_overrides(head_dim=args.head_dim, qk_rope_head_dim=args.rope_dim,
                                 index_head_dim=args.index_head_dim)


def layout_from_args(args):
    """The Layout a command's --model/--config/--groups and knobs describe."""
    if args.groups is not None:
        refuse_model_knobs_with_groups(args)
        return plan(load_groups(args.groups), args.planner)
    return plan_model(config_from_args(args), options_from_args(args), args.planner)


def _print_json(obj) -> None:
    print(json.dumps(obj, indent=2))


def _fmt_table(rows: list[list], header: list[str]) -> str:
    cells = [header] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.rjust(w) if j else c.ljust(w) for j, (c, w) in enumerate(zip(r, widths))) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# ---- plan ---------------------------------------------------------------------------------
def _run_plan(args) -> int:
    layout = layout_from_args(args)
    budget = budget_from_args(args)
    blocks = None
    if budget is not None:
        require_budget_holds_a_block(args, budget, layout.block_stride)
        blocks = capacity.num_blocks(layout, budget)
    if args.json:
        out = layout.to_json(num_blocks=blocks)
        out["budget_bytes"] = budget
        _print_json(out)
        return 0
    rows = [[g.name, len(g.layers), f"{layout.group_total(i):,}", f"{layout.group_unused(i):,}",
             "yes" if i == layout.binding_group else ""]
            for i, g in enumerate(layout.groups)]
    print(_fmt_table(rows, ["group", "layers", "total B", "unused B", "binds"]))
    print()
    print(layout.text_map())
    print()
    print(layout.explain(budget))
    return 0


# ---- compare ------------------------------------------------------------------------------
def _published_budget(args, before, after) -> dict | None:
    """vLLM #48993's published counts for this model and backend, and the budgets (bytes) that
    give exactly those counts: the published budget is rounded to 0.01 GiB
    (docs/published-numbers.md#budget-rounding)."""
    row = published_row(args.model, args.backend)
    if row is None or args.no_mtp:  # the table counts the MTP layer
        return None
    common = capacity.common_budget_range([(before.block_stride, row.blocks_before),
                                           (after.block_stride, row.blocks_after)])
    return {"budget_gib": row.budget_gib, "blocks_before": row.blocks_before, "blocks_after": row.blocks_after,
            "budget_range_bytes": list(common) if common else None,
            "source": "docs/published-numbers.md#the-published-table"}


def _run_compare(args) -> int:
    config = load_model(args.model)
    before, after = compare_layouts(config, args.backend, mtp=not args.no_mtp)
    budget = budget_from_args(args)
    require_budget_holds_a_block(args, budget, max(before.block_stride, after.block_stride))
    cmp = capacity.Comparison(before, after, budget)
    estimate = capacity.admission_estimate_per_block(after)
    published = _published_budget(args, before, after)
    if args.json:
        out = cmp.to_json()
        out["budget_bytes"] = budget
        out["budget_gib"] = args.budget_gib  # as given (None when given in bytes), not budget / 2^30
        out["admission_estimate_per_block"] = estimate
        out["model"], out["backend"] = args.model, args.backend
        out["published"] = published
        _print_json(out)
        return 0
    j = cmp.to_json()
    rows = [[name, f"{d['block_stride']:,}", f"{d['num_blocks']:,}", d["binding_group"], d["planner"]]
            for name, d in (("before", j["before"]), ("after", j["after"]))]
    given = f" ({args.budget_gib} GiB)" if args.budget_gib is not None else ""
    print(f"{args.model}, {args.backend}, budget {budget:,} B{given}")
    print(_fmt_table(rows, ["", "block stride", "blocks", "binding group", "planner"]))
    print(f"stride {cmp.stride_change_pct:+.2f}%, blocks {cmp.blocks_change_pct:+.2f}%")
    print(f"vLLM's admission estimate after the change: {estimate:,} B per block (real stride {after.block_stride:,})")
    if published is not None:
        counts = f"{published['blocks_before']:,} -> {published['blocks_after']:,} blocks"
        if published["budget_range_bytes"] is None:
            print(f"Published (vLLM #48993): {counts} at {published['budget_gib']} GiB; no single budget gives both.")
        else:
            lo, hi = published["budget_range_bytes"]
            print(f"Published (vLLM #48993): {counts} at {published['budget_gib']} GiB, a budget rounded to "
                  f"0.01 GiB; exactly those counts come from budgets {lo:,}..{hi:,} B.")
    return 0


# ---- render -------------------------------------------------------------------------------
def _run_render(args) -> int:
    # kvviz.report draws with matplotlib: imported here to keep it off plan/compare/models.
    from . import report

    require(args.title is None or _is_utf8(args.title), f"--title {args.title!r}: is not valid Unicode")
    layout = layout_from_args(args)
    before = after = None
    if args.groups is not None:
        source = Path(args.groups).name
    else:
        config = config_from_args(args)
        source = args.model if args.model is not None else Path(args.config).stem
        # vLLM #48993's own before/after for this backend (its knobs: padding + FP8 indexer vs
        # overlay + MXFP4), whatever planner the main figure uses.
        opts = options_from_args(args)
        before, after = compare_layouts(config, opts.backend, mtp=opts.mtp, main_format=args.main_format,
                                        block_size=opts.block_size)
    out = report.prepare_out_dir(args.out, what="--out")  # after the layouts: bad input creates no folder
    setting = f"{layout.planner} layout" if args.groups is not None else f"{opts.backend}, {layout.planner} layout"
    title = args.title or f"{source}: {setting}"
    dpi = {} if args.dpi is None else {"dpi": args.dpi}
    for path in report.render_report(out, layout=layout, before=before, after=after, title=title,
                                     svg=not args.no_svg, **dpi):
        print(_printable(str(path)))
    return 0


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, e.g. from argv bytes that are not UTF-8
        return False
    return True


def _printable(text: str) -> str:
    """A path as stdout can take it: bytes that were not UTF-8 shown as \\x escapes."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


# ---- models -------------------------------------------------------------------------------
def _run_models(args) -> int:
    for name in model_names():
        c = load_model(name)
        mix = c.layer_mix
        print(f"{name}: {c.num_hidden_layers} layers (+{c.num_nextn_predict_layers} MTP): "
              f"{mix['c4']} c4, {mix['c128']} c128, {mix['swa']} SWA-only; "
              f"head_dim {c.head_dim}, index_head_dim {c.index_head_dim}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kvviz", description="Byte-exact views of packed KV-cache layouts.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("plan", help="plan one block and print the layout")
    add_model_arguments(p)
    add_budget_arguments(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_run_plan)

    p = sub.add_parser("compare", help="vLLM #48993 before/after table")
    p.add_argument("--model", required=True, choices=model_names())
    p.add_argument("--backend", required=True, choices=("flashmla", "flashinfer"))
    p.add_argument("--no-mtp", action="store_true", help="leave out the MTP layer(s)")
    add_budget_arguments(p, required=True)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_run_compare)

    p = sub.add_parser("models", help="list the shipped model presets")
    p.set_defaults(func=_run_models)

    p = sub.add_parser("render", help="write the figures (PNG + SVG) and a self-contained report.html")
    add_model_arguments(p)
    p.add_argument("--out", required=True, type=_nonempty("the output folder"), metavar="DIR",
                   help="output folder (created when missing)")
    p.add_argument("--title", default=None, help="report title (default: model, backend, planner)")
    p.add_argument("--dpi", type=_int_in(*DPI_RANGE), help="PNG resolution (default: kvviz.plot.DEFAULT_DPI, 100)")
    p.add_argument("--no-svg", action="store_true", help="write PNGs only")
    p.set_defaults(func=_run_render)

    return parser


def _one_line(message: str) -> str:
    """argparse quotes some arguments raw ("unrecognized arguments: a<newline>b"): escape every
    character that is not printable (line breaks, lone surrogates) so the error stays one line."""
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in message)


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return args.func(args)
    except KvvizError as e:
        print(f"kvviz: error: {_one_line(str(e))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("kvviz: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # output piped into `head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
