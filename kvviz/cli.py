"""`kvviz` console script (also `python -m kvviz`).

Every bad input ends with exit status 2 and one line naming the problem.
"""

from __future__ import annotations

import argparse
import json
import sys

from . import capacity
from .config import load_config, load_model, model_names
from .defaults import VERIFY_BLOCKS
from .errors import KvvizError
from .grouping import load_groups
from .planners import PLANNERS, compare_layouts, plan, plan_model
from .specs import BACKENDS, CacheOptions

EXIT_BAD_INPUT = 2


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line (exit 2) instead of usage + error."""

    def error(self, message: str):  # noqa: D401
        raise KvvizError(message)


# ---- shared arguments ---------------------------------------------------------------------
def add_model_arguments(p: argparse.ArgumentParser, *, planner_default: str = "overlay") -> None:
    """--model/--config/--groups and the knobs every layout-producing command takes."""
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", help=f"a shipped preset ({', '.join(model_names())})")
    src.add_argument("--config", help="an HF config.json of the DeepSeek V4 shape")
    src.add_argument("--groups", help='arbitrary groups as JSON: {"groups": [{"name", "layers": [{"name", "page_bytes"}]}]}')
    p.add_argument("--backend", default="flashmla", help=f"page alignment ({', '.join(BACKENDS)}); default flashmla")
    p.add_argument("--main-format", default=None, help="fp8_ds_mla, fp8 or bf16 (default: the backend's)")
    p.add_argument("--indexer", default="mxfp4", help="indexer K row: fp8 (132 B) or mxfp4 (68 B); default mxfp4")
    p.add_argument("--planner", default=planner_default, help=f"{', '.join(PLANNERS)}; default {planner_default}")
    p.add_argument("--no-mtp", action="store_true", help="leave out the MTP layer(s)")
    p.add_argument("--block-size", type=int, default=256, help="tokens per block of the main caches (default 256)")
    p.add_argument("--head-dim", type=int, default=None, help="override the config's head_dim")
    p.add_argument("--rope-dim", type=int, default=None, help="override qk_rope_head_dim")
    p.add_argument("--index-head-dim", type=int, default=None, help="override index_head_dim")


def add_budget_arguments(p: argparse.ArgumentParser, *, required: bool = False) -> None:
    b = p.add_mutually_exclusive_group(required=required)
    b.add_argument("--budget-gib", type=float, help="KV budget in GiB (1 GiB = 2^30 B)")
    b.add_argument("--budget-bytes", type=int, help="KV budget in bytes")


def budget_from_args(args) -> int | None:
    if args.budget_gib is None and args.budget_bytes is None:
        return None
    return capacity.budget_bytes(gib=args.budget_gib, num_bytes=args.budget_bytes)


def options_from_args(args, **overrides) -> CacheOptions:
    values = dict(backend=args.backend, main_format=args.main_format, indexer_format=args.indexer,
                  block_size=args.block_size, mtp=not args.no_mtp)
    values.update(overrides)
    return CacheOptions(**values)


def config_from_args(args):
    config = load_model(args.model) if args.model else load_config(args.config)
    return config.with_overrides(head_dim=args.head_dim, qk_rope_head_dim=args.rope_dim,
                                 index_head_dim=args.index_head_dim)


def layout_from_args(args):
    """The Layout a command's --model/--config/--groups and knobs describe."""
    if args.groups:
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
    blocks = capacity.num_blocks(layout, budget) if budget else None
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
def _run_compare(args) -> int:
    config = load_model(args.model)
    if args.backend not in ("flashmla", "flashinfer"):
        raise KvvizError(f"--backend {args.backend!r}: compare needs flashmla or flashinfer")
    before, after = compare_layouts(config, args.backend, mtp=not args.no_mtp)
    budget = budget_from_args(args)
    cmp = capacity.Comparison(before, after, budget)
    estimate = capacity.admission_estimate_per_block(after)
    if args.json:
        out = cmp.to_json()
        out["admission_estimate_per_block"] = estimate
        out["model"], out["backend"] = args.model, args.backend
        _print_json(out)
        return 0
    j = cmp.to_json()
    rows = [[name, f"{d['block_stride']:,}", f"{d['num_blocks']:,}", d["binding_group"], d["planner"]]
            for name, d in (("before", j["before"]), ("after", j["after"]))]
    print(f"{args.model}, {args.backend}, budget {budget:,} B ({budget / capacity.GIB:.2f} GiB)")
    print(_fmt_table(rows, ["", "block stride", "blocks", "binding group", "planner"]))
    print(f"stride {cmp.stride_change_pct:+.2f}%, blocks {cmp.blocks_change_pct:+.2f}%")
    print(f"vLLM's admission estimate after the change: {estimate:,} B per block (real stride {after.block_stride:,})")
    return 0


# ---- models -------------------------------------------------------------------------------
def _run_models(args) -> int:
    for name in model_names():
        c = load_model(name)
        mix = c.layer_mix
        print(f"{name}: {c.num_hidden_layers} layers (+{c.num_nextn_predict_layers} MTP): "
              f"{mix['c4']} c4, {mix['c128']} c128, {mix['swa']} SWA-only; "
              f"head_dim {c.head_dim}, index_head_dim {c.index_head_dim}")
    return 0


# ---- verify -------------------------------------------------------------------------------
def add_verify_parser(sub) -> None:
    """`kvviz verify`: write encoded data through a real pool's views, read it back (kvviz.verify).

    Builds the parser without importing kvviz.verify (torch): kvviz.verify checks --hazard and
    --assignment and names the choices when one is wrong."""
    p = sub.add_parser("verify", help="write encoded data through real pool views, read it back, show hazards")
    add_model_arguments(p)
    add_budget_arguments(p)
    p.add_argument("--blocks", type=int, default=None,
                   help=f"number of blocks (default {VERIFY_BLOCKS}; or give a budget: budget // block stride)")
    p.add_argument("--device", default="auto", help="auto (CUDA when available), cpu, cuda or cuda:N")
    p.add_argument("--seed", type=int, default=0, help="seed of the source values (default 0)")
    p.add_argument("--hazard", default=None, help="act out a known overlay hazard: shared-block, zeroer or misread")
    p.add_argument("--hazard-layer", default=None, help="the layer the zeroer/misread hazard acts on")
    p.add_argument("--assignment", default="round-robin",
                   help="how block ids go to groups: round-robin (default: block b to group b mod groups) or contiguous")
    p.add_argument("--json", action="store_true", help="machine-readable output, every victim listed")
    p.set_defaults(func=_run_verify)


def _run_verify(args) -> int:
    """0 when the check held (clean, or the hazard's damage showed), 1 otherwise."""
    from . import verify  # torch: only when verify runs

    layout = layout_from_args(args)
    budget = budget_from_args(args)
    if budget is not None:
        if args.blocks is not None:
            raise KvvizError("--blocks: give either --blocks or a budget (--budget-gib/--budget-bytes)")
        n = verify.blocks_for_budget(layout, budget)
    else:
        n = VERIFY_BLOCKS if args.blocks is None else args.blocks
        if n <= 0:
            raise KvvizError(f"--blocks={n}: must be a positive integer")
    report = verify.verify(layout, n, device=args.device, seed=args.seed, hazard=args.hazard,
                           assignment=args.assignment, hazard_layer=args.hazard_layer,
                           progress=not args.json and sys.stderr.isatty())
    if args.json:
        _print_json(report.to_json())
    else:
        print(report.text())
    return 0 if report.ok else 1


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kvviz", description="Byte-exact views of packed KV-cache layouts.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("plan", help="plan one block and print the layout")
    add_model_arguments(p)
    add_budget_arguments(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_run_plan)

    p = sub.add_parser("compare", help="vLLM #48993 before/after table")
    p.add_argument("--model", required=True)
    p.add_argument("--backend", required=True, help="flashmla or flashinfer")
    p.add_argument("--no-mtp", action="store_true")
    add_budget_arguments(p, required=True)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_run_compare)

    p = sub.add_parser("models", help="list the shipped model presets")
    p.set_defaults(func=_run_models)
    add_verify_parser(sub)

    for module in _extensions():
        module.register(sub)
    return parser


def _extensions():
    """Subcommands that live next to their library code (verify, render)."""
    import importlib

    out = []
    for name in ("kvviz.report",):
        try:
            out.append(importlib.import_module(name))
        except ModuleNotFoundError as e:
            if e.name != name:
                raise
    return out


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return args.func(args)
    except KvvizError as e:
        print(f"kvviz: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # output piped into `head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
