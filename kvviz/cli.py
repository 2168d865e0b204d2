"""`kvviz` console script (also `python -m kvviz`): the top floor.

Every subcommand lives here and no library module imports this one. The light commands
(`--help`, `models`, `plan`, `compare`) import neither torch nor matplotlib; a command that needs
one imports its module inside its run function (said there).

Every bad input ends with exit status 2 and one line `kvviz: error: ...`; Ctrl-C ends with the
line `kvviz: interrupted` and exit status 130, SIGTERM/SIGHUP with `kvviz: terminated` and
128 + N (kvviz.signals).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from pathlib import Path

from . import capacity, signals
from .config import config_from_dict, is_deepseek_v4, is_hybrid, load_any, load_model, model_names, preset_summary
from .defaults import CONTEXT_TOKENS, GIB, VERIFY_BLOCKS
from .errors import KvvizError, require
from .grouping import load_groups
from .inputs import DPI_RANGE, MAX_BLOCKS, MAX_BUDGET_BYTES, MAX_CONTEXT_TOKENS, MAX_DIM, MAX_SLIDING_WINDOW, MAX_TOKENS_PER_BLOCK, printable, read_json
from .planners import PLANNERS, compare_layouts, plan, plan_model
from . import hybrid
from .hybrid import HYBRID_PLANNERS, SeparatePools, plan_hybrid
from .hybrid_specs import KV_DTYPES, SSM_DTYPES, HybridOptions
from .layout import text_table
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
# The knobs of a hybrid model (docs/hybrid.md#hybrid-caches); refused with DeepSeek V4 and --groups.
HYBRID_KNOBS = (("kv_dtype", "--kv-dtype"), ("mamba_ssm_dtype", "--mamba-ssm-dtype"),
                ("no_prefix_caching", "--no-prefix-caching"), ("sliding_window", "--sliding-window"),
                ("context", "--context"))
# DeepSeek V4's planners, and the three layouts of a hybrid model (docs/hybrid.md#hybrid-planners).
# On DeepSeek V4, `vllm` is what vLLM 0.33 does (overlay-by-spec) and `packed` is vLLM #48993's
# overlay; `separate` is defined for hybrid models only.
DSV4_PLANNER_ALIASES = {"vllm": "overlay-by-spec", "packed": "overlay"}
DEFAULT_HYBRID_PLANNER = "vllm"


def add_source_arguments(p: argparse.ArgumentParser, *, groups: bool = True) -> None:
    """Where the model comes from: a preset, a config.json, or (plan/render/verify) a groups file."""
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", type=_nonempty("the model name"), help=f"a shipped preset ({', '.join(model_names())})")
    src.add_argument("--hf-config", metavar="PATH", type=_nonempty("the config path"),
                     help="a Hugging Face config.json, or a folder holding one (any hybrid model kvviz knows, "
                          "or DeepSeek V4)")
    if groups:
        src.add_argument("--config", metavar="FILE", type=_nonempty("the config path"),
                         help="an HF config.json of the DeepSeek V4 shape")
        src.add_argument("--groups", metavar="FILE", type=_nonempty("the groups path"),
                         help='arbitrary groups as JSON: {"groups": [{"name", "layers": [{"name", "page_bytes"}]}]}')


def add_hybrid_arguments(p: argparse.ArgumentParser) -> None:
    knobs = p.add_argument_group("hybrid model knobs (gpt-oss, Gemma 3, Llama 4, Qwen3-Next, any --hf-config)")
    knobs.add_argument("--kv-dtype", choices=KV_DTYPES, help="attention KV dtype (default: the model's, bf16)")
    knobs.add_argument("--mamba-ssm-dtype", choices=SSM_DTYPES,
                       help="linear-attention state dtype (default: the config's, else bf16)")
    knobs.add_argument("--no-prefix-caching", action="store_true",
                       help="vLLM 0.33 turns prefix caching on for hybrid models ('align' state mode); turn it off")
    knobs.add_argument("--sliding-window", type=_int_in(1, MAX_SLIDING_WINDOW), metavar="TOKENS",
                       help="replace the config's sliding window")
    knobs.add_argument("--context", type=_int_in(1, MAX_CONTEXT_TOKENS), metavar="TOKENS",
                       help=f"request length for admission and capacity (default {CONTEXT_TOKENS:,})")


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    """--model/--hf-config/--config/--groups and the knobs every layout-producing command takes."""
    d = _OPTION_DEFAULTS
    add_source_arguments(p)
    p.add_argument("--planner", choices=(*PLANNERS, *HYBRID_PLANNERS),
                   help=f"DeepSeek V4 and --groups: {', '.join(PLANNERS)} (default overlay; vllm = overlay-by-spec, "
                        f"packed = overlay); hybrid models: {', '.join(HYBRID_PLANNERS)} (default {DEFAULT_HYBRID_PLANNER})")
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
    add_hybrid_arguments(p)


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


def _given(args, knobs) -> list[str]:
    return [option for dest, option in knobs if getattr(args, dest, None) not in (None, False)]


def refuse_model_knobs_with_groups(args) -> None:
    if getattr(args, "groups", None) is None:
        return
    for option in _given(args, MODEL_KNOBS + HYBRID_KNOBS):
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
    if isinstance(raw, dict) and not is_deepseek_v4(raw) and "model_type" in raw:
        raise KvvizError(f"--config {path!r}: a {raw['model_type']!s:.40} config, not DeepSeek V4's; "
                         f"give it with --hf-config")
    return config_from_dict(raw, name=printable(Path(path).stem))


def _loaded_config(args):
    """The config --model, --hf-config or --config names: DeepSeek V4's ModelConfig or a hybrid
    model's HybridConfig."""
    if args.model is not None:
        return load_model(args.model)
    if getattr(args, "hf_config", None) is not None:
        return load_any(args.hf_config)
    return _load_config_file(args.config)


def _refuse_knobs(args, knobs, config, kind: str) -> None:
    for option in _given(args, knobs):
        raise KvvizError(f"{option}: does not apply to {config.name} (a {kind} model)")


def config_from_args(args):
    """The config the command's source names, with the knobs that apply to it; a knob of the other
    family of models is refused, not ignored."""
    config = _loaded_config(args)
    if is_hybrid(config):
        _refuse_knobs(args, [k for k in MODEL_KNOBS if k[0] != "block_size"], config, "hybrid")
        _refuse_hybrid_knobs_without_their_layers(args, config)
        return config
    _refuse_knobs(args, HYBRID_KNOBS, config, "DeepSeek V4")
    return config.with_overrides(head_dim=getattr(args, "head_dim", None),
                                 qk_rope_head_dim=getattr(args, "rope_dim", None),
                                 index_head_dim=getattr(args, "index_head_dim", None))


def _refuse_hybrid_knobs_without_their_layers(args, config) -> None:
    """A sliding window for a model with no sliding layers, a state dtype or prefix-caching mode
    for one with no linear-attention layers: refused, not ignored."""
    if getattr(args, "sliding_window", None) is not None and "sliding_attention" not in config.layer_types:
        raise KvvizError(f"--sliding-window: {config.name} has no sliding-window layers")
    if not config.has_linear_attention:
        for option in _given(args, (("mamba_ssm_dtype", "--mamba-ssm-dtype"),
                                    ("no_prefix_caching", "--no-prefix-caching"))):
            raise KvvizError(f"{option}: {config.name} has no linear-attention (state) layers")


def hybrid_options_from_args(args) -> HybridOptions:
    """HybridOptions from the knobs given; a knob not given keeps HybridOptions' default."""
    values = dict(kv_dtype=args.kv_dtype, mamba_ssm_dtype=args.mamba_ssm_dtype,
                  block_size=getattr(args, "block_size", None), sliding_window=args.sliding_window,
                  prefix_caching=False if args.no_prefix_caching else None)
    return HybridOptions(**{k: v for k, v in values.items() if v is not None})


def summary_from_args(args, layout, config, options, budget: int):
    """kvviz.hybrid.summarize at the command's context; separate pools split the budget by one
    request's need, and a pool whose share holds none of its blocks is an error naming it."""
    summary = hybrid.summarize(layout, config, options, budget_bytes=budget, context=context_from_args(args))
    for g in summary.groups:
        if g.num_blocks == 0:
            raise KvvizError(f"{_budget_option(args)}: the share of pool {g.name!r} in {budget:,} B (split by "
                             f"one request's need) holds none of its {g.block_bytes:,} B blocks")
    return summary


def require_context_is_used(args, used: bool) -> None:
    """--context sizes admission, requests and separate pools' budget split: refused where none is asked."""
    if getattr(args, "context", None) is not None and not used:
        raise KvvizError(f"--context: not used by {args.command} here (a request's length sizes admission, "
                         f"requests and separate pools' shares of a budget)")


def context_from_args(args) -> int:
    return CONTEXT_TOKENS if args.context is None else args.context


@dataclasses.dataclass(frozen=True)
class Planned:
    """What a layout-producing command planned: the layout (a `Layout`, or `SeparatePools` for a
    hybrid model's separate planner) and, for a model, its config and options."""

    layout: object
    config: object = None
    options: object = None

    @property
    def hybrid(self) -> bool:
        return self.config is not None and is_hybrid(self.config)


def _planner_for(args, hybrid: bool) -> str:
    planner = args.planner
    if hybrid:
        if planner is None:
            return DEFAULT_HYBRID_PLANNER
        require(planner in HYBRID_PLANNERS, f"--planner {planner}: a DeepSeek V4 planner; a hybrid model takes "
                                            f"{', '.join(HYBRID_PLANNERS)}")
        return planner
    if planner is None:
        return "overlay"
    require(planner != "separate", "--planner separate: defined for hybrid models only (one pool per cache kind)")
    return DSV4_PLANNER_ALIASES.get(planner, planner)


def plan_from_args(args) -> Planned:
    """The layout a command's source, knobs and --planner describe."""
    if getattr(args, "groups", None) is not None:
        refuse_model_knobs_with_groups(args)
        return Planned(plan(load_groups(args.groups), _planner_for(args, hybrid=False)))
    config = config_from_args(args)
    if is_hybrid(config):
        options = hybrid_options_from_args(args)
        return Planned(plan_hybrid(config, options, _planner_for(args, hybrid=True)), config, options)
    options = options_from_args(args)
    return Planned(plan_model(config, options, _planner_for(args, hybrid=False)), config, options)


_json_encode = json.JSONEncoder().encode  # the C encoder, as json.dumps(obj) uses it
_NESTED = (dict, list)


def readable_json(obj, indent: str = "") -> str:
    """JSON laid out for a reader: nested objects and lists one member a line, indented by two,
    and an object or list of plain values (a layer, a range) on one line, written by json's C
    encoder; `json.dumps(obj, indent=2)` runs its pure-Python encoder, several times slower on a
    layout of 100,000 layers."""
    inner = indent + "  "
    if type(obj) is dict:
        for v in obj.values():
            if isinstance(v, _NESTED):
                break
        else:
            return _json_encode(obj)
        body = ",\n".join([f"{inner}{_json_encode(k)}: {readable_json(v, inner)}" for k, v in obj.items()])
        return "{\n" + body + "\n" + indent + "}"
    if type(obj) is list:
        for v in obj:
            if isinstance(v, _NESTED):
                break
        else:
            return _json_encode(obj)
        return "[\n" + ",\n".join([inner + readable_json(v, inner) for v in obj]) + "\n" + indent + "]"
    return _json_encode(obj)


def _print_json(obj) -> None:
    print(readable_json(obj))


def _group_table(layouts) -> str:
    """One row per group of each layout (a separate-pools plan: of each pool)."""
    rows = [[g.name, len(g.layers), f"{lay.group_total(i):,}", f"{lay.group_unused(i):,}",
             "yes" if i == lay.binding_group else ""]
            for lay in layouts for i, g in enumerate(lay.groups)]
    return text_table(rows, ["group", "layers", "total B", "unused B", "binds"])


# ---- plan ---------------------------------------------------------------------------------
def _run_plan(args) -> int:
    planned = plan_from_args(args)
    if planned.hybrid:
        return _run_plan_hybrid(args, planned)
    layout = planned.layout
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
    print(_group_table((layout,)))
    print()
    print(layout.text_map())
    print()
    print(layout.explain(budget))
    return 0


def _run_plan_hybrid(args, planned: Planned) -> int:
    layout, config, options = planned.layout, planned.config, planned.options
    budget = budget_from_args(args)
    if budget is not None:
        require_budget_holds_a_block(args, budget, layout.block_stride)
    require_context_is_used(args, budget is not None)
    context = context_from_args(args)
    summary = None if budget is None else summary_from_args(args, layout, config, options, budget)
    if args.json:
        _print_json(hybrid.plan_json(layout, config, options, budget_bytes=budget, context=context))
        return 0
    print(config.describe())
    print(_group_table(layout.pools if isinstance(layout, SeparatePools) else (layout,)))
    print()
    print(layout.text_map())
    print()
    print("\n".join(layout.derivation))
    if summary is not None:
        print()
        print(hybrid.format_comparison((summary,)))
    return 0


# ---- compare ------------------------------------------------------------------------------
def _published_budget(args, before, after) -> dict | None:
    """vLLM #48993's published counts for this model and backend, and the budgets (bytes) that
    give exactly those counts: the published budget is rounded to 0.01 GiB
    (docs/published-numbers.md#budget-rounding)."""
    row = published_row(args.model, args.backend) if args.model is not None else None
    if row is None or args.no_mtp:  # the table counts the MTP layer
        return None
    common = capacity.common_budget_range([(before.block_stride, row.blocks_before),
                                           (after.block_stride, row.blocks_after)])
    return {"budget_gib": row.budget_gib, "blocks_before": row.blocks_before, "blocks_after": row.blocks_after,
            "budget_range_bytes": list(common) if common else None,
            "source": "docs/published-numbers.md#the-published-table"}


def _run_compare(args) -> int:
    config = _loaded_config(args)
    if is_hybrid(config):
        return _run_compare_hybrid(args, config)
    _refuse_knobs(args, HYBRID_KNOBS, config, "DeepSeek V4")
    require(args.backend is not None, "--backend: compare of a DeepSeek V4 model needs flashmla or flashinfer")
    before, after = compare_layouts(config, args.backend, mtp=not args.no_mtp,
                                    **({} if args.block_size is None else {"block_size": args.block_size}))
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
        out["model"], out["backend"] = config.name, args.backend
        out["published"] = published
        _print_json(out)
        return 0
    j = cmp.to_json()
    rows = [[name, f"{d['block_stride']:,}", f"{d['num_blocks']:,}", d["binding_group"], d["planner"]]
            for name, d in (("before", j["before"]), ("after", j["after"]))]
    given = f" ({args.budget_gib} GiB)" if args.budget_gib is not None else ""
    print(f"{config.name}, {args.backend}, budget {budget:,} B{given}")
    print(text_table(rows, ["", "block stride", "blocks", "binding group", "planner"]))
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


def _run_compare_hybrid(args, config) -> int:
    """The three layouts of a hybrid model side by side (docs/hybrid.md#hybrid-planners)."""
    for option in _given(args, (("backend", "--backend"), ("no_mtp", "--no-mtp"))):
        raise KvvizError(f"{option}: does not apply to {config.name} (a hybrid model)")
    options = hybrid_options_from_args(args)
    budget = budget_from_args(args)
    summaries = tuple(summary_from_args(args, plan_hybrid(config, options, p), config, options, budget)
                      for p in HYBRID_PLANNERS)  # hybrid.compare_hybrid, each summary checked
    for s in summaries:
        require_budget_holds_a_block(args, budget, s.bytes_per_block)
    if args.json:
        out = hybrid.comparison_json(summaries)
        out["budget_gib"] = args.budget_gib  # as given (None when given in bytes)
        _print_json(out)
        return 0
    print(hybrid.format_comparison(summaries))
    print("vllm: vLLM 0.33's hybrid manager (pages unified, groups overlaid); packed: state pages unpadded "
          "inside the block (vLLM does not do this today); separate: one pool per cache kind "
          "(docs/hybrid.md#separate-pools)")
    return 0


# ---- render -------------------------------------------------------------------------------
def _run_render(args) -> int:
    # kvviz.report draws with matplotlib: imported here to keep it off plan/compare/models.
    from . import report

    require(args.title is None or _is_utf8(args.title), f"--title {args.title!r}: is not valid Unicode")
    require_context_is_used(args, False)
    planned = plan_from_args(args)
    layout, before, after = planned.layout, None, None
    if args.groups is not None:
        source, setting = printable(Path(args.groups).name), f"{layout.planner} layout"
    elif isinstance(layout, SeparatePools):  # one report per pool below, no before/after
        source, setting = planned.config.name, "separate pools"
    elif planned.hybrid:
        source, setting = planned.config.name, f"{layout.planner} layout"
        # What vLLM 0.33 does next to the packed overlay it would take with unpadded state pages.
        before, after = (plan_hybrid(planned.config, planned.options, p) for p in ("vllm", "packed"))
    else:
        opts = planned.options
        source = args.model if args.model is not None else printable(Path(args.config or args.hf_config).stem)
        setting = f"{opts.backend}, {layout.planner} layout"
        # vLLM #48993's own before/after for this backend (its knobs: padding + FP8 indexer vs
        # overlay + MXFP4), whatever planner the main figure uses.
        before, after = compare_layouts(planned.config, opts.backend, mtp=opts.mtp, main_format=args.main_format,
                                        block_size=opts.block_size)
    out = report.prepare_out_dir(args.out, what="--out")  # after the layouts: bad input creates no folder
    title = args.title or f"{source}: {setting}"
    dpi = {} if args.dpi is None else {"dpi": args.dpi}
    # Separate pools (hybrid models): one report per pool, each in its own folder.
    pools = getattr(layout, "pools", None)
    targets = [(out, layout, title)] if pools is None else [
        (report.prepare_sub_dir(out, f"pool-{p.groups[0].name}", what="--out"), p, f"{title}: pool {p.groups[0].name}")
        for p in pools]
    written = []
    with report.Staged() as staged:  # every report written before any file takes its name
        for folder, one, heading in targets:
            both = {} if pools is not None else {"before": before, "after": after}
            written += report.render_report(folder, layout=one, title=heading, svg=not args.no_svg, staged=staged,
                                            **both, **dpi)
    for path in written:
        print(_printable(str(path)))
    return 0


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, e.g. from argv bytes that are not UTF-8
        return False
    return True


_printable = printable  # a path as stdout can take it (kvviz.inputs.printable)


# ---- models -------------------------------------------------------------------------------
def _run_models(args) -> int:
    for name in model_names():
        print(preset_summary(name))  # from the raw JSON: no transformers for the hybrid presets
    return 0


# ---- verify -------------------------------------------------------------------------------
def add_verify_parser(sub) -> None:
    """`kvviz verify`: write encoded data through a real pool's views, read it back (kvviz.verify).

    Builds the parser without importing kvviz.verify (torch): kvviz.verify checks --hazard and
    --assignment and names the choices when one is wrong."""
    p = sub.add_parser("verify", help="write encoded data through real pool views, read it back, show hazards")
    add_model_arguments(p)
    add_budget_arguments(p)
    p.add_argument("--blocks", type=_int_in(1, MAX_BLOCKS), default=None,
                   help=f"number of blocks (default {VERIFY_BLOCKS}; or give a budget: budget // block stride)")
    p.add_argument("--device", default="auto", help="auto (CUDA when available), cpu, cuda or cuda:N")
    p.add_argument("--seed", type=_int_in(0, 2**63 - 1), default=0, help="seed of the source values (default 0)")
    p.add_argument("--hazard", default=None, help="act out a known overlay hazard: shared-block, zeroer or misread")
    p.add_argument("--hazard-layer", default=None, help="the layer the zeroer/misread hazard acts on")
    p.add_argument("--assignment", default="round-robin",
                   help="how block ids go to groups: round-robin (default: block b to group b mod groups) or contiguous")
    p.add_argument("--json", action="store_true", help="machine-readable output, every victim listed")
    p.set_defaults(func=_run_verify)


def _run_verify(args) -> int:
    """0 when the check held (clean, or the hazard's damage showed), 1 otherwise."""
    from .verify import blocks_for_budget, verify  # torch: only when verify runs

    if args.hazard_layer is not None and args.hazard not in ("zeroer", "misread"):
        raise KvvizError("--hazard-layer: applies only with --hazard zeroer or --hazard misread")
    if args.blocks is not None and (args.budget_gib is not None or args.budget_bytes is not None):
        raise KvvizError("--blocks: give either --blocks or a budget (--budget-gib/--budget-bytes)")
    planned = plan_from_args(args)
    layout = planned.layout
    budget = budget_from_args(args)
    require_context_is_used(args, budget is not None and isinstance(layout, SeparatePools))
    # Separate pools (a hybrid model's `separate` planner): each pool is its own tensor with its own
    # blocks, so each is verified on its own; the budget is split as the pools' sizing rule says.
    pools = getattr(layout, "pools", None) or (layout,)
    shares = [budget] if budget is not None and len(pools) == 1 else None
    if budget is not None and shares is None:
        summary = summary_from_args(args, layout, planned.config, planned.options, budget)
        shares = [g.num_blocks * p.block_stride for g, p in zip(summary.groups, pools)]
    reports = []
    for i, pool_layout in enumerate(pools):
        if budget is not None:
            require_budget_holds_a_block(args, shares[i], pool_layout.block_stride)
        n = blocks_for_budget(pool_layout, shares[i]) if budget is not None else (
            VERIFY_BLOCKS if args.blocks is None else args.blocks)
        reports.append(verify(pool_layout, n, device=args.device, seed=args.seed, hazard=args.hazard,
                              assignment=args.assignment, hazard_layer=args.hazard_layer,
                              progress=not args.json and sys.stderr.isatty()))
    if args.json:
        _print_json(reports[0].to_json() if len(reports) == 1 else {"pools": [r.to_json() for r in reports],
                                                                     "ok": all(r.ok for r in reports)})
    else:
        print("\n\n".join(r.text() for r in reports))
    return 0 if all(r.ok for r in reports) else 1


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kvviz", description="Byte-exact views of packed KV-cache layouts.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("plan", help="plan one block and print the layout")
    add_model_arguments(p)
    add_budget_arguments(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_run_plan)

    p = sub.add_parser("compare", help="DeepSeek V4: vLLM #48993 before/after; hybrid models: vllm, packed "
                                       "and separate side by side")
    add_source_arguments(p, groups=False)
    p.add_argument("--backend", choices=("flashmla", "flashinfer"), help="DeepSeek V4 only (required there)")
    p.add_argument("--no-mtp", action="store_true", help="DeepSeek V4: leave out the MTP layer(s)")
    p.add_argument("--block-size", type=_int_in(1, MAX_TOKENS_PER_BLOCK), metavar="TOKENS",
                   help="hybrid models: tokens per attention block (default: vLLM's)")
    add_hybrid_arguments(p)
    add_budget_arguments(p, required=True)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_run_compare)

    p = sub.add_parser("models", help="list the shipped model presets")
    p.set_defaults(func=_run_models)
    add_verify_parser(sub)

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
        with signals.handled():  # SIGTERM/SIGHUP: as Ctrl-C, `kvviz: terminated`, 128 + N
            args = build_parser().parse_args(argv)
            return args.func(args)
    except KvvizError as e:
        print(f"kvviz: error: {_one_line(str(e))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except signals.Terminated as e:
        print("kvviz: terminated", file=sys.stderr)
        return e.exit_status
    except KeyboardInterrupt:
        print("kvviz: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # output piped into `head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
