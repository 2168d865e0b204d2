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

from . import signals
from .core import capacity
from .core.layout import text_table
from .core.plan import Plan
from .defaults import DPI, GIB, GPU_MEMORY_UTILIZATION, SEED, TENSOR_PARALLEL_SIZE, VERIFY_BLOCKS
from .errors import KvvizError, require
from .families import load_path, load_preset, preset_names, preset_summary
from .families.deepseek_v4 import BACKENDS
from .formats import INDEXER_FORMATS, MAIN_FORMATS
from .inputs import (DPI_RANGE, MAX_BLOCKS, MAX_BUDGET_BYTES, MAX_CONTEXT_TOKENS, MAX_DIM, MAX_SLIDING_WINDOW,
                     MAX_TOKENS_PER_BLOCK, printable, read_json)
from .options import KNOB_OPTIONS, KV_DTYPES, SSM_DTYPES, Options
from .vllm.grouping import load_groups
from .vllm.plan import PLANNERS, check_knobs, plan_model, resolve_planner
from .vllm.planners import LAYOUT_PLANNERS, plan

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a command ended by Ctrl-C


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
def add_source_arguments(p: argparse.ArgumentParser, *, groups: bool = True) -> None:
    """Where the model comes from: a preset, a config.json, or (plan/render/verify) a groups file."""
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", type=_nonempty("the model name"), help=f"a shipped preset ({', '.join(preset_names())})")
    src.add_argument("--hf-config", metavar="PATH", type=_nonempty("the config path"),
                     help="a Hugging Face config.json, or a folder holding one (any architecture kvviz plans)")
    src.add_argument("--config", metavar="FILE", type=_nonempty("the config path"),
                     help="a config.json (the same as --hf-config)")
    if groups:
        src.add_argument("--groups", metavar="FILE", type=_nonempty("the groups path"),
                         help='arbitrary groups as JSON: {"groups": [{"name", "layers": [{"name", "page_bytes"}]}]}')


def add_knob_arguments(p: argparse.ArgumentParser) -> None:
    """Every knob of kvviz.options.Options; each model's family says which apply (others are refused)."""
    dep = p.add_argument_group("deployment (vLLM's flags; any model)")
    dep.add_argument("--tensor-parallel-size", "-tp", type=_int_in(1, 1 << 16), metavar="N",
                     help="plan one rank of N (KV heads and states split as vLLM splits them)")
    dep.add_argument("--decode-context-parallel-size", "-dcp", dest="decode_context_parallel_size",
                     type=_int_in(1, 1 << 16), metavar="N",
                     help="vLLM's DCP: full-attention / MLA tokens split over N of the TP ranks (default 1)")
    dep.add_argument("--max-model-len", "--context", dest="max_model_len", type=_max_model_len,
                     metavar="TOKENS", help="request length (default: the model's own maximum, as vLLM derives it; "
                                            "-1 or auto: the largest that fits the budget, as vLLM's -1 does)")
    dep.add_argument("--max-num-batched-tokens", type=_int_in(1, MAX_CONTEXT_TOKENS), metavar="TOKENS",
                     help="tokens per scheduler step (default 8,192, vLLM serve's on an H200)")
    dep.add_argument("--no-async-scheduling", dest="async_scheduling", action="store_const", const=False,
                     help="one batch in flight instead of vLLM's two")
    dep.add_argument("--async-scheduling", dest="async_scheduling", action="store_const", const=True,
                     help="two batches in flight (vLLM 0.33's default)")
    dep.add_argument("--kv-dtype", "--kv-cache-dtype", dest="kv_dtype", choices=KV_DTYPES + ("auto",),
                     help="attention KV dtype (default auto: the model's)")
    dep.add_argument("--block-size", type=_int_in(1, MAX_TOKENS_PER_BLOCK), metavar="TOKENS",
                     help="tokens per block (default: vLLM's for the model)")
    dep.add_argument("--mamba-ssm-dtype", "--mamba-ssm-cache-dtype", dest="mamba_ssm_dtype", choices=SSM_DTYPES,
                     help="recurrent state dtype (default: the config's, else the model's)")
    dep.add_argument("--no-prefix-caching", dest="prefix_caching", action="store_const", const=False,
                     help="vLLM 0.33 turns prefix caching on ('align' state mode); turn it off")
    dep.add_argument("--sliding-window", type=_int_in(1, MAX_SLIDING_WINDOW), metavar="TOKENS",
                     help="replace the config's sliding window")
    dsv4 = p.add_argument_group("DeepSeek V4 knobs")
    dsv4.add_argument("--backend", type=_nonempty("the backend"), help=f"page alignment ({', '.join(BACKENDS)})")
    dsv4.add_argument("--main-format", type=_nonempty("the format"), help=f"{', '.join(MAIN_FORMATS)} (default: the backend's)")
    dsv4.add_argument("--indexer", dest="indexer_format", type=_nonempty("the format"),
                      help=f"indexer K row: {', '.join(INDEXER_FORMATS)}")
    dsv4.add_argument("--no-mtp", dest="mtp", action="store_const", const=False, help="leave out the MTP layer(s)")
    dsv4.add_argument("--head-dim", type=_int_in(1, MAX_DIM), help="override the config's head_dim")
    dsv4.add_argument("--rope-dim", type=_int_in(1, MAX_DIM), help="override qk_rope_head_dim")
    dsv4.add_argument("--index-head-dim", type=_int_in(1, MAX_DIM), help="override index_head_dim")


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    """--model/--hf-config/--config/--groups, --planner and every knob."""
    add_source_arguments(p)
    p.add_argument("--planner", choices=PLANNERS + ("overlay-by-spec",),
                   help="vllm (default: what vLLM 0.33 does), overlay, bucketed (DeepSeek V4 and --groups), "
                        "packed, separate")
    add_knob_arguments(p)


AUTO_MAX_MODEL_LEN = -1  # --max-model-len -1: vLLM's auto-fit


def _max_model_len(text: str) -> int:
    if text.strip() in ("-1", "auto"):
        return AUTO_MAX_MODEL_LEN
    return _int_in(1, MAX_CONTEXT_TOKENS)(text)


_max_model_len.__name__ = "max_model_len"


def add_budget_arguments(p: argparse.ArgumentParser, *, required: bool = False) -> None:
    """Add the budget flags to `p`: --budget-gib / --budget-bytes (vLLM's --kv-cache-memory-bytes), or a GPU's
    budget (--gpu, --gpu-memory-gib, --gpu-memory-utilization, --weights-bytes, --checkpoint, --activation-
    bytes); `required` makes a command refuse to run without one."""
    b = p.add_mutually_exclusive_group(required=False)
    b.add_argument("--budget-gib", type=_gib, metavar="GIB", help="KV budget in GiB (1 GiB = 2^30 B)")
    b.add_argument("--budget-bytes", "--kv-cache-memory-bytes", dest="budget_bytes", type=_int_in(1, MAX_BUDGET_BYTES),
                   metavar="BYTES", help="KV budget in bytes (vLLM's --kv-cache-memory-bytes: the exact path)")
    g = p.add_argument_group("the budget from a GPU (vLLM's profile, term by term; estimates are labelled)")
    g.add_argument("--gpu", type=_nonempty("the GPU"), help="a GPU of kvviz.deploy.GPUS (H100, H200, B200, ...)")
    g.add_argument("--gpu-memory-gib", type=_gib, metavar="GIB", help="a device of this much memory instead")
    g.add_argument("--gpu-memory-utilization", type=float, default=None, metavar="F",
                   help=f"vLLM's --gpu-memory-utilization (default {GPU_MEMORY_UTILIZATION})")
    g.add_argument("--weights-bytes", type=_int_in(0, MAX_BUDGET_BYTES), metavar="BYTES",
                   help="the checkpoint's weights (whole model; default: its safetensors index, else an estimate)")
    g.add_argument("--checkpoint", metavar="DIR", help="a checkpoint folder (model.safetensors.index.json: exact weights)")
    g.add_argument("--activation-bytes", type=_int_in(0, MAX_BUDGET_BYTES), metavar="BYTES",
                   help="activation / CUDA-graph allowance (default: kvviz.deploy's stated estimate)")
    p.set_defaults(budget_required=required)


def budget_from_args(args, model=None) -> int | None:
    """The KV budget: --budget-gib / --budget-bytes, or one rank's share of a GPU (kvviz.deploy),
    whose terms are kept in args.kv_budget for the output."""
    if getattr(args, "gpu", None) is not None or getattr(args, "gpu_memory_gib", None) is not None:
        from . import deploy

        require(args.budget_gib is None, "--budget-gib: give either a budget or --gpu / --gpu-memory-gib")
        require(model is not None, "--gpu: sizes a model's budget; a --groups file has no weights")
        util = GPU_MEMORY_UTILIZATION if args.gpu_memory_utilization is None else args.gpu_memory_utilization
        b = deploy.kv_budget(model, gpu=args.gpu, gpu_memory_gib=args.gpu_memory_gib, gpu_memory_utilization=util,
                             tensor_parallel_size=args.tensor_parallel_size or TENSOR_PARALLEL_SIZE, weights_bytes=args.weights_bytes,
                             checkpoint_dir=args.checkpoint, activation_bytes=args.activation_bytes,
                             kv_cache_memory_bytes=args.budget_bytes)
        args.kv_budget = b
        return b.available_bytes
    for option, dest in (("--gpu-memory-utilization", "gpu_memory_utilization"), ("--weights-bytes", "weights_bytes"),
                         ("--checkpoint", "checkpoint"), ("--activation-bytes", "activation_bytes")):
        if getattr(args, dest, None) is not None:
            raise KvvizError(f"{option}: applies only with --gpu or --gpu-memory-gib")
    if args.budget_gib is None and args.budget_bytes is None:
        require(not getattr(args, "budget_required", False),
                f"{args.command}: needs a budget: --budget-gib, --budget-bytes (--kv-cache-memory-bytes) or --gpu")
        return None
    return capacity.budget_bytes(gib=args.budget_gib, num_bytes=args.budget_bytes)


def _budget_option(args) -> str:
    return f"--budget-gib {args.budget_gib}" if args.budget_gib is not None else f"--budget-bytes {args.budget_bytes}"


def require_budget_holds_a_block(args, budget: int, stride: int, what: str = "one block stride") -> None:
    """A budget that holds no block is an error, before anything is printed."""
    require(budget >= stride, f"{_budget_option(args)}: {budget:,} B is smaller than {what} ({stride:,} B)")


def options_from_args(args) -> Options:
    """The Options the knobs given describe (a knob not given: None, the engine's default;
    --max-model-len -1 is resolved against the budget by `plan_from_args`)."""
    values = {name: getattr(args, name, None) for name in Options.__dataclass_fields__}
    if values.get("max_model_len") == AUTO_MAX_MODEL_LEN:
        values["max_model_len"] = None
    if values.get("kv_dtype") == "auto":
        values["kv_dtype"] = None
    return Options(**values)


def _given_options(options: Options) -> list[str]:
    return [KNOB_OPTIONS[name] for name in options.given()]


def _load_config_file(path: str, what: str):
    raw = read_json(path, what=what) if not Path(path).is_dir() else None
    if isinstance(raw, dict) and "groups" in raw and "num_hidden_layers" not in raw:
        raise KvvizError(f"{what} {path!r}: this is a groups file, not a model config; give it with --groups")
    return load_path(path, what=what)


def model_from_args(args):
    """The model --model, --hf-config or --config names."""
    if args.model is not None:
        return load_preset(args.model)
    if getattr(args, "hf_config", None) is not None:
        return _load_config_file(args.hf_config, "--hf-config")
    return _load_config_file(args.config, "--config")


def refuse_knobs(model, options: Options) -> None:
    """A knob the model's family says does not apply is refused (kvviz.vllm.plan.check_knobs,
    before anything is planned); the message names the flag (`_as_flags`)."""
    check_knobs(model, options)


@dataclasses.dataclass(frozen=True)
class Planned:
    """What a layout-producing command planned: a `Plan` (None for a groups file) or a layout."""

    plan: Plan | None
    model: object = None
    options: Options | None = None
    groups_layout: object = None

    @property
    def pools(self):
        """The planned pools: the plan's, or the one layout of a groups file."""
        return self.plan.pools if self.plan is not None else (self.groups_layout,)


GROUPS_PLANNERS = {"vllm": "overlay-by-spec", "packed": "overlay", None: "overlay"}


def plan_from_args(args) -> Planned:
    """The plan a command's source, knobs and --planner describe."""
    options = options_from_args(args)
    if getattr(args, "groups", None) is not None:
        for option in _given_options(options):
            raise KvvizError(f"{option}: a model knob; it does not apply to --groups (the file gives the page sizes)")
        planner = GROUPS_PLANNERS.get(args.planner, args.planner)
        require(planner in LAYOUT_PLANNERS, f"--planner {planner}: --groups takes vllm, overlay, bucketed")
        args.budget = budget_from_args(args)
        return Planned(None, groups_layout=plan(load_groups(args.groups), planner))
    model = model_from_args(args)
    refuse_knobs(model, options)
    planner = resolve_planner(model, args.planner)
    args.budget = budget_from_args(args, model)
    if getattr(args, "max_model_len", None) == AUTO_MAX_MODEL_LEN:
        from . import deploy

        require(args.budget is not None, "--max-model-len -1: fits the request length to a budget; give one")
        args.auto_fit = deploy.auto_fit(model, options, args.budget, planner=planner)
        options = options.with_(max_model_len=args.auto_fit.max_model_len)
    return Planned(plan_model(model, planner, options), model, options)


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


def _capacity_rows(caps, plans=None) -> list[list]:
    binds = [p.pools[0].binding_label if len(p.pools) == 1 else "none (separate pools)" for p in plans] if plans else \
        ["" for _ in caps]
    return [[label, c.planner, f"{c.tokens_per_block or '-'}", f"{c.bytes_per_block:,}", f"{c.num_groups}", b,
             f"{c.waste.waste_pct:.2f}", f"{c.num_blocks:,}", f"{c.blocks_per_request:,}",
             f"{c.requests_fit:,} ({c.max_concurrency:.2f})", f"{c.kv_cache_tokens:,}"] for (label, c), b in zip(caps, binds)]


CAPACITY_HEADER = ["", "planner", "tokens/block", "bytes/block", "groups", "binding group", "waste %", "blocks",
                   "blocks/request", "requests", "KV tokens"]


def require_shares_hold_blocks(args, planned: Plan, budget: int) -> None:
    """Every pool's share of the budget holds at least one of its blocks."""
    if len(planned.pools) == 1:
        require_budget_holds_a_block(args, budget, planned.block_stride)
        return
    for share, p in zip(planned.split_budget(budget), planned.pools):
        if share < p.block_stride:
            raise KvvizError(f"{_budget_option(args)}: the share of pool {p.groups[0].name!r} in {budget:,} B (split by "
                             f"one request's need) holds none of its {p.block_stride:,} B blocks")


# ---- plan ---------------------------------------------------------------------------------
def _budget_json(args) -> dict:
    out = {}
    if getattr(args, "kv_budget", None) is not None:
        out["kv_budget"] = args.kv_budget.to_json()
    if getattr(args, "auto_fit", None) is not None:
        out["auto_fit"] = {"max_model_len": args.auto_fit.max_model_len, "log_line": args.auto_fit.log_line}
    return out


def _budget_lines(args) -> list[str]:
    lines = []
    if getattr(args, "kv_budget", None) is not None:
        lines += list(args.kv_budget.lines())
    if getattr(args, "auto_fit", None) is not None:
        lines.append(args.auto_fit.log_line)
    return lines


def _run_plan(args) -> int:
    if args.engine != "vllm":
        return _run_plan_engine(args)
    planned = plan_from_args(args)
    budget = args.budget
    if planned.plan is None:  # a groups file: a layout, no model to count requests with
        layout = planned.groups_layout
        blocks = None
        if budget is not None:
            require_budget_holds_a_block(args, budget, layout.block_stride)
            blocks = layout.num_blocks(budget)
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
    p = planned.plan
    if budget is not None:
        require_shares_hold_blocks(args, p, budget)
    if args.json:
        _print_json(p.to_json(budget_bytes=budget) | _budget_json(args))
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
        print(text_table(_capacity_rows([(p.model, cap)], [p]), CAPACITY_HEADER))
        for line in _budget_lines(args):
            print(line)
        print(cap.line)
    return 0


def _engine_inputs(args):
    """(model, options, budget) of an SGLang / TensorRT-LLM plan: a model and a budget, no planner."""
    which = f"--engine {args.engine}" if getattr(args, "engine", None) else "--engines"
    require(getattr(args, "groups", None) is None, f"{which}: plans a model, not a --groups file")
    require(getattr(args, "planner", None) is None, f"--planner: vLLM's planners; {which} sizes each engine's own pools")
    model = model_from_args(args)
    options = options_from_args(args)
    refuse_knobs(model, options)
    require((options.decode_context_parallel_size or 1) == 1,
            f"--decode-context-parallel-size: vLLM's decode context parallelism; {which} sizes SGLang's / "
            f"TensorRT-LLM's pools without it")
    budget = budget_from_args(args, model)
    require(budget is not None, f"{which}: sizes pools from a KV budget: give --budget-gib, "
                                f"--kv-cache-memory-bytes or --gpu")
    return model, options, budget


def _run_plan_engine(args) -> int:
    """One model's pools as SGLang or TensorRT-LLM sizes them (kvviz.engines)."""
    from . import engines

    model, options, budget = _engine_inputs(args)
    own = _engine_own_budgets(args, model, (args.engine,))
    if own:
        budget = own[args.engine].kv_budget_bytes
    p = engines.plan_engine(args.engine, model, options, kv_budget_bytes=budget, knobs=_engine_knobs(args))
    if args.json:
        _print_json(p.to_json() | _budget_json(args))
    else:
        print(p.describe())
        for line in _budget_lines(args):
            print(line)
        _print_engine_budget_lines(args, own)
    return 0


def _engine_own_budgets(args, model, names) -> dict:
    """On the --gpu path (no --kv-cache-memory-bytes), each engine's own budget
    (kvviz.engines.budget); else {} and every engine gets the one budget given."""
    b = getattr(args, "kv_budget", None)
    if b is None or b.exact_pool:
        return {}
    from .engines.budget import engine_budgets

    return engine_budgets(model, b, names)


def _print_engine_budget_lines(args, own) -> None:
    if own:
        print("each engine's own KV budget on this device (docs/engines.md#one-budget-meaning):")
        for b in own.values():
            for line in b.lines:
                print(f"  {line}" + ("  [estimate]" if b.estimate else ""))
    elif getattr(args, "kv_budget", None) is not None:
        print("engines: --kv-cache-memory-bytes is every engine's KV memory as given; no engine's fraction applies")


def _run_compare_engines(args) -> int:
    """The same model and budget through each engine, side by side (kvviz.engines)."""
    from . import engines

    names = tuple(e.strip() for e in args.engines.split(",") if e.strip())
    for e in names:
        require(e in engines.ENGINES, f"--engines: {e!r}: unknown; choose from {', '.join(engines.ENGINES)}")
    model, options, budget = _engine_inputs(args)
    knobs = _engine_knobs(args)
    own = _engine_own_budgets(args, model, names)
    rows_ = engines.compare_rows(model, names, options, kv_budget_bytes=budget, knobs=knobs,
                                 budgets={e: b.kv_budget_bytes for e, b in own.items()})
    if args.json:
        _print_json({"model": model.name, "budget_bytes": budget,
                     "engines": [r.plan.to_json() if r.plan else {"engine": r.engine, "refusal": r.refusal}
                                 for r in rows_]} | _budget_json(args))
        return 0
    rows = [[r.engine, r.plan.version, f"{r.plan.kv_budget_bytes:,}", r.plan.token_capacity_name,
             f"{r.plan.token_capacity:,}", f"{r.plan.request_bound:,}", f"{r.plan.max_model_len:,}",
             f"{r.plan.waste_bytes:,}"] if r.plan else
            [r.engine, "-", f"{(own[r.engine].kv_budget_bytes if r.engine in own else budget):,}", "not planned",
             "-", "-", "-", "-"] for r in rows_]
    print(f"{model.name}: " + ("each engine's own KV budget on this device" if own else f"KV budget {budget:,} B"))
    print(text_table(rows, ["engine", "version", "KV budget B", "capacity", "tokens", "requests at once", "of tokens",
                            "waste B"]))
    for r in rows_:
        print(f"{r.engine}: {r.plan.log_line if r.plan else r.refusal}")
    for line in _budget_lines(args):
        print(line)
    _print_engine_budget_lines(args, own)
    if getattr(args, "figure", None):
        from .engines.figure import compare_figure

        compare_figure(rows_, model=model.name, budget_bytes=budget).savefig(args.figure)
        print(f"figure: {args.figure}")
    return 0


def _engine_knobs(args):
    """kvviz.engines.EngineKnobs from --max-attention-window / --enable-unified-memory."""
    from .engines import EngineKnobs

    window = getattr(args, "max_attention_window", None)
    if window is not None:
        try:
            window = tuple(int(w) for w in window.split(","))
        except ValueError:
            raise KvvizError(f"--max-attention-window: {window!r}: comma-separated token counts") from None
    try:
        return EngineKnobs(max_attention_window=window, unified_memory=bool(getattr(args, "unified_memory", False)))
    except KvvizError as err:
        raise KvvizError(f"--max-attention-window: {err}") from None


def _group_table(layouts) -> str:
    rows = [[g.name, len(g.layers), f"{lay.group_total(i):,}", f"{lay.group_unused(i):,}",
             "yes" if i == lay.binding_group else ""]
            for lay in layouts for i, g in enumerate(lay.groups)]
    return text_table(rows, ["group", "layers", "total B", "unused B", "binds"])


# ---- compare ------------------------------------------------------------------------------
def _run_compare(args) -> int:
    """The layouts the model's family compares, side by side at one budget (every planner; DeepSeek
    V4: vLLM #48993's before/after with the published table)."""
    if args.engines is not None:
        return _run_compare_engines(args)
    model = model_from_args(args)
    options = options_from_args(args)
    refuse_knobs(model, options)
    budget = budget_from_args(args, model)
    if getattr(args, "max_model_len", None) == AUTO_MAX_MODEL_LEN:
        from . import deploy

        args.auto_fit = deploy.auto_fit(model, options, budget)
        options = options.with_(max_model_len=args.auto_fit.max_model_len)
    plans = [(label, plan_model(model, planner, opts)) for label, planner, opts in
             model.reader.comparisons(model, options)]
    for _, p in plans:
        require_shares_hold_blocks(args, p, budget)
    caps = [(label, p.capacity(budget)) for label, p in plans]
    notes = model.reader.compare_notes(model, options, plans, budget)
    if args.json:
        out = {"model": model.name, "family": model.family, "budget_bytes": budget, "budget_gib": args.budget_gib,
               "max_model_len": plans[0][1].max_model_len,
               "layouts": [{"label": label, **c.to_json()} for label, c in caps]}
        out.update({k: v for k, v in notes.get("json", {}).items() if k not in out})  # what was given stays
        _print_json(out | _budget_json(args))
        return 0
    given = f" ({args.budget_gib} GiB)" if args.budget_gib is not None else ""
    print(f"{model.name}: budget {budget:,} B{given}, requests of {plans[0][1].max_model_len:,} tokens")
    print(text_table(_capacity_rows(caps, [p for _, p in plans]), CAPACITY_HEADER))
    for label, c in caps:
        print(f"{label}: {c.line}")
    for line in notes.get("lines", ()):
        print(line)
    for line in _budget_lines(args):
        print(line)
    return 0


# ---- render -------------------------------------------------------------------------------
def _run_render(args) -> int:
    # kvviz.report draws with matplotlib: imported here to keep it off plan/compare/models.
    from . import report

    require(args.title is None or _is_utf8(args.title), f"--title {args.title!r}: is not valid Unicode")
    planned = plan_from_args(args)
    budget = args.budget
    before = after = None
    if planned.plan is None:
        source, setting, pools = printable(Path(args.groups).name), f"{planned.groups_layout.planner} layout", planned.pools
    else:
        p, model = planned.plan, planned.model
        if budget is not None:
            require_shares_hold_blocks(args, p, budget)
        given = [str(getattr(planned.options, k)) for k in ("backend", "main_format", "indexer_format", "kv_dtype")
                 if getattr(planned.options, k) is not None]
        source, setting, pools = model.name, ", ".join(given + [f"{p.planner} layout"]), p.pools
        pair = model.reader.comparisons(model, planned.options)
        if len(pools) == 1 and not p.separate:
            ba = [(pl, o) for _, pl, o in pair if pl != "separate"][:2]
            if len(ba) == 2:
                before, after = (plan_model(model, pl, o).layout for pl, o in ba)
    out = report.prepare_out_dir(args.out, what="--out")  # after the layouts: bad input creates no folder
    title = args.title or f"{source}: {setting}"
    if budget is not None and planned.plan is not None:
        title += f" ({planned.plan.capacity(budget).line})"
    dpi = {} if args.dpi is None else {"dpi": args.dpi}
    # Separate pools: one report per pool, each in its own folder.
    targets = [(out, pools[0], title)] if len(pools) == 1 else [
        (report.prepare_sub_dir(out, f"pool-{pl.groups[0].name}", what="--out"), pl, f"{title}: pool {pl.groups[0].name}")
        for pl in pools]
    written = []
    with report.Staged() as staged:  # every report written before any file takes its name
        for folder, one, heading in targets:
            both = {} if len(pools) > 1 else {"before": before, "after": after}
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


# ---- fit ----------------------------------------------------------------------------------
def _int_list(text: str, option: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise KvvizError(f"{option} {text[:40]!r}: comma-separated integers") from None
    require(values and all(v > 0 for v in values), f"{option} {text[:40]!r}: positive integers")
    return values


def _run_fit(args) -> int:
    """Requests that fit against context length for one model on a few GPUs and TP sizes."""
    from . import deploy, fit

    model = model_from_args(args)
    knobs = {} if args.kv_dtype in (None, "auto") else {"kv_dtype": args.kv_dtype}
    extra = {k: v for k, v in (("gpu_memory_utilization", args.gpu_memory_utilization),
                               ("weights_bytes", args.weights_bytes), ("checkpoint_dir", args.checkpoint)) if v is not None}
    gpus = tuple(g.strip() for g in args.gpus.split(",") if g.strip())
    for g in gpus:
        deploy.gpu_spec(g)  # an unknown name: one line listing the known
    contexts = fit.DEFAULT_CONTEXTS if args.contexts is None else _int_list(args.contexts, "--contexts")
    table = fit.fit_table(model, gpus=gpus, tp_sizes=_int_list(args.tp, "--tp"), contexts=contexts,
                          planner=args.planner, **extra, **knobs)
    if args.out is not None:
        from . import plot, report

        out = report.prepare_out_dir(args.out, what="--out")
        report.write_file(out / "fit.png", plot.to_png_bytes(fit.fit_figure(table)))
    if args.json:
        _print_json(table.to_json())
    else:
        print("\n".join(table.lines()))
    return 0


# ---- models -------------------------------------------------------------------------------
def _run_models(args) -> int:
    for name in preset_names():
        print(preset_summary(name))  # from the raw JSON: no transformers
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
    p.add_argument("--seed", type=_int_in(0, 2**63 - 1), default=SEED, help=f"seed of the source values (default {SEED})")
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
    pools = planned.pools
    budget = args.budget
    shares = None
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
        n = blocks_for_budget(pool_layout, shares[i]) if shares is not None else (
            VERIFY_BLOCKS if args.blocks is None else args.blocks)
        reports.append(verify(pool_layout, n, device=args.device, seed=args.seed, hazard=args.hazard,
                              assignment=args.assignment, hazard_layer=args.hazard_layer,
                              progress=not args.json and sys.stderr.isatty()))
    if args.json:
        _print_json(reports[0].to_json() if len(reports) == 1 else {"pools": [r.to_json() for r in reports],
                                                                     "ok": all(r.passed for r in reports)})
    else:
        print("\n\n".join(r.text() for r in reports))
    return 0 if all(r.passed for r in reports) else 1


def _engine_knob_arguments(p) -> None:
    p.add_argument("--max-attention-window", default=None, metavar="W,W",
                   help="TensorRT-LLM KvCacheConfig.max_attention_window (a per-layer pattern; docs/engines.md)")
    p.add_argument("--enable-unified-memory", dest="unified_memory", action="store_true",
                   help="SGLang --enable-unified-memory: one buffer for a hybrid-SWA model's pools")


def build_parser() -> argparse.ArgumentParser:
    """The `kvviz` argument parser: plan, compare, render, fit, models and verify, each with its flags."""
    parser = _Parser(prog="kvviz", description="Byte-exact views of LLM serving engines' KV-cache layouts.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("plan", help="plan one block and print the layout (and, with a budget, vLLM's capacity line)")
    add_model_arguments(p)
    add_budget_arguments(p)
    p.add_argument("--engine", choices=("vllm", "sglang", "trtllm"), default="vllm",
                   help="whose pools: vLLM's (default, every planner), SGLang's or TensorRT-LLM's (docs/engines.md#sglang)")
    _engine_knob_arguments(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_run_plan)

    p = sub.add_parser("compare", help="the planners side by side at one budget (DeepSeek V4: vLLM #48993's "
                                       "before/after)")
    add_source_arguments(p, groups=False)
    add_knob_arguments(p)
    add_budget_arguments(p, required=True)
    p.add_argument("--engines", default=None, metavar="E,E",
                   help="engines side by side instead of planners: any of vllm,sglang,trtllm")
    _engine_knob_arguments(p)
    p.add_argument("--figure", default=None, metavar="PNG", help="with --engines: also write the engines figure")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_run_compare)

    p = sub.add_parser("fit", help="what fits: requests against context length on a few GPUs and TP sizes")
    add_source_arguments(p, groups=False)
    p.add_argument("--planner", choices=PLANNERS, help="the planner (default vllm)")
    p.add_argument("--gpus", default="H100,H200,B200", help="GPUs of kvviz.deploy.GPUS, comma-separated")
    p.add_argument("--tp", default="1,2,4,8", help="tensor-parallel sizes, comma-separated")
    p.add_argument("--contexts", default=None, help="request lengths, comma-separated (default 4k to 1M)")
    p.add_argument("--kv-dtype", dest="kv_dtype", choices=KV_DTYPES + ("auto",), help="attention KV dtype")
    p.add_argument("--gpu-memory-utilization", type=float, default=None, metavar="F")
    p.add_argument("--weights-bytes", type=_int_in(0, MAX_BUDGET_BYTES), metavar="BYTES")
    p.add_argument("--checkpoint", metavar="DIR")
    p.add_argument("--out", default=None, metavar="DIR", help="also write the figure (fit.png) here")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_run_fit)

    p = sub.add_parser("models", help="list the shipped model presets")
    p.set_defaults(func=_run_models)
    add_verify_parser(sub)

    p = sub.add_parser("render", help="write the figures (PNG + SVG) and a self-contained report.html")
    add_model_arguments(p)
    add_budget_arguments(p)
    p.add_argument("--out", required=True, type=_nonempty("the output folder"), metavar="DIR",
                   help="output folder (created when missing)")
    p.add_argument("--title", default=None, help="report title (default: model, planner)")
    p.add_argument("--dpi", type=_int_in(*DPI_RANGE), help=f"PNG resolution (default {DPI})")
    p.add_argument("--no-svg", action="store_true", help="write PNGs only")
    p.set_defaults(func=_run_render)

    return parser


# kvviz.verify's and kvviz.pool's arguments -> the verify flags that set them
VERIFY_FLAGS = {"seed": "--seed", "hazard": "--hazard", "hazard_layer": "--hazard-layer",
                "assignment": "--assignment", "device": "--device"}


def _as_flags(message: str) -> str:
    """The library names Python arguments (`backend='x': ...`); the CLI says which flag set it."""
    field, sep, rest = message.partition("=")
    if sep and field in VERIFY_FLAGS:
        return f"{VERIFY_FLAGS[field]}: {field}={rest}"
    if sep and field in KNOB_OPTIONS:
        return f"{KNOB_OPTIONS[field]}: {field}={rest}"
    field, sep, rest = message.partition(": ")
    if sep and field in KNOB_OPTIONS:  # "kv_dtype: does not apply to ..." names the flag, and its knobs the flags
        if "; its knobs are " in rest:
            head, knobs = rest.split("; its knobs are ", 1)
            rest = f"{head}; its knobs: " + ", ".join(KNOB_OPTIONS.get(k, k) for k in knobs.split(", "))
        return f"{KNOB_OPTIONS[field]}: {rest}"
    return message


def _one_line(message: str) -> str:
    """argparse quotes some arguments raw ("unrecognized arguments: a<newline>b"): escape every
    character that is not printable (line breaks, lone surrogates) so the error stays one line."""
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in message)


def main(argv: list[str] | None = None) -> int:
    """Run `kvviz` on `argv` (None: sys.argv) and return the exit status: 0, 2 on bad input (one line naming the
    flag), 130 on Ctrl-C, 128 + N on SIGTERM / SIGHUP."""
    try:
        with signals.handled():  # SIGTERM/SIGHUP: as Ctrl-C, `kvviz: terminated`, 128 + N
            args = build_parser().parse_args(argv)
            return args.func(args)
    except KvvizError as e:
        print(f"kvviz: error: {_one_line(_as_flags(str(e)))}", file=sys.stderr)
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
