"""The command line's arguments: flag types, the flags each subcommand shares, and what they build
(Options, a model, a budget, a plan)."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from kvviz.api import make_plan
from kvviz.base.errors import KvvizError, require
from kvviz.base.files import read_json
from kvviz.base.formats import INDEXER_FORMATS, MAIN_FORMATS
from kvviz.base.inputs import (
    MAX_CONTEXT_TOKENS,
    MAX_DIM,
    MAX_SLIDING_WINDOW,
    MAX_TOKENS_PER_BLOCK,
    printable,
    short_repr,
)
from kvviz.cli.budget_args import Budget, budget_from_args
from kvviz.cli.values import gib_value, int_in, nonempty
from kvviz.core.plan import Plan
from kvviz.families import load_path, load_preset, preset_names
from kvviz.families.deepseek_v4 import BACKENDS
from kvviz.options import KNOB_OPTIONS, KV_DTYPES, SSM_DTYPES, Options
from kvviz.vllm.grouping import load_groups
from kvviz.vllm.plan import PLANNERS, check_knobs, resolve_planner
from kvviz.vllm.planners import LAYOUT_PLANNERS, plan


class Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line (exit 2) instead of usage + error."""

    def error(self, message: str):  # noqa: D401
        head, sep, words = message.partition("unrecognized arguments: ")
        if sep and len(words.split()) > STRAY_SHOWN:  # 10,000 stray words: the first few and how many
            shown = " ".join(words.split()[:STRAY_SHOWN])
            message = f"{head}{sep}{shown} ... ({len(words.split()):,} in all)"
        raise KvvizError(message)


STRAY_SHOWN = 8  # stray arguments an error line shows


# ---- shared arguments ---------------------------------------------------------------------
def add_source_arguments(p: argparse.ArgumentParser, *, groups: bool = True) -> None:
    """Where the model comes from: a preset, a config.json, or (plan/render/verify) a groups file."""
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", type=nonempty("the model name"), help=f"a shipped preset ({', '.join(preset_names())})")
    src.add_argument(
        "--hf-config",
        metavar="PATH",
        type=nonempty("the config path"),
        help="a Hugging Face config.json, or a folder holding one (any architecture kvviz plans)",
    )
    src.add_argument(
        "--config", metavar="FILE", type=nonempty("the config path"), help="a config.json (the same as --hf-config)"
    )
    if groups:
        src.add_argument(
            "--groups",
            metavar="FILE",
            type=nonempty("the groups path"),
            help='arbitrary groups as JSON: {"groups": [{"name", "layers": [{"name", "page_bytes"}]}]}',
        )


def add_knob_arguments(p: argparse.ArgumentParser) -> None:
    """Every knob of kvviz.options.Options; each model's family says which apply (others are refused)."""
    dep = p.add_argument_group("deployment (vLLM's flags; any model)")
    dep.add_argument(
        "--tensor-parallel-size",
        "-tp",
        type=int_in(1, 1 << 16),
        metavar="N",
        help="plan one rank of N (KV heads and states split as vLLM splits them)",
    )
    dep.add_argument(
        "--decode-context-parallel-size",
        "-dcp",
        dest="decode_context_parallel_size",
        type=int_in(1, 1 << 16),
        metavar="N",
        help="vLLM's DCP: full-attention / MLA tokens split over N of the TP ranks (default 1)",
    )
    dep.add_argument(
        "--pipeline-parallel-size",
        "-pp",
        type=int_in(1, 1 << 16),
        metavar="N",
        help="N pipeline stages, each planning its own layers; every GPU keeps the smallest stage's blocks",
    )
    dep.add_argument(
        "--pp-layer-partition",
        type=_partition,
        metavar="A,B,...",
        help="layers of each stage (vLLM's VLLM_PP_LAYER_PARTITION; default: get_pp_indices' split)",
    )
    dep.add_argument(
        "--kv-offloading-size",
        type=gib_value,
        metavar="GiB",
        help="host memory for vLLM's native CPU offload (all ranks together); adds the host chunks it holds",
    )
    dep.add_argument(
        "--max-model-len",
        "--context",
        dest="max_model_len",
        type=_max_model_len,
        metavar="TOKENS",
        help="request length (default: the model's own maximum, as vLLM derives it; "
        "-1 or auto: the largest that fits the budget, as vLLM's -1 does)",
    )
    dep.add_argument(
        "--max-num-batched-tokens",
        type=int_in(1, MAX_CONTEXT_TOKENS),
        metavar="TOKENS",
        help="tokens per scheduler step (default 8,192, vLLM serve's on an H200)",
    )
    dep.add_argument(
        "--no-async-scheduling",
        dest="async_scheduling",
        action="store_const",
        const=False,
        help="one batch in flight instead of vLLM's two",
    )
    dep.add_argument(
        "--async-scheduling",
        dest="async_scheduling",
        action="store_const",
        const=True,
        help="two batches in flight, PP + 1 under pipeline parallel (vLLM 0.33's default)",
    )
    dep.add_argument(
        "--kv-dtype",
        "--kv-cache-dtype",
        dest="kv_dtype",
        choices=KV_DTYPES + ("auto",),
        help="attention KV dtype (default auto: the model's)",
    )
    dep.add_argument(
        "--block-size",
        type=int_in(1, MAX_TOKENS_PER_BLOCK),
        metavar="TOKENS",
        help="tokens per block (default: vLLM's for the model)",
    )
    dep.add_argument(
        "--mamba-ssm-dtype",
        "--mamba-ssm-cache-dtype",
        dest="mamba_ssm_dtype",
        choices=SSM_DTYPES,
        help="recurrent state dtype (default: the config's, else the model's)",
    )
    dep.add_argument(
        "--no-prefix-caching",
        dest="prefix_caching",
        action="store_const",
        const=False,
        help="vLLM 0.33 turns prefix caching on ('align' state mode); turn it off",
    )
    dep.add_argument(
        "--sliding-window",
        type=int_in(1, MAX_SLIDING_WINDOW),
        metavar="TOKENS",
        help="replace the config's sliding window",
    )
    dsv4 = p.add_argument_group("DeepSeek V4 knobs")
    dsv4.add_argument("--backend", type=nonempty("the backend"), help=f"page alignment ({', '.join(BACKENDS)})")
    dsv4.add_argument(
        "--main-format", type=nonempty("the format"), help=f"{', '.join(MAIN_FORMATS)} (default: the backend's)"
    )
    dsv4.add_argument(
        "--indexer",
        dest="indexer_format",
        type=nonempty("the format"),
        help=f"indexer K row: {', '.join(INDEXER_FORMATS)}",
    )
    dsv4.add_argument("--no-mtp", dest="mtp", action="store_const", const=False, help="leave out the MTP layer(s)")
    dsv4.add_argument("--head-dim", type=int_in(1, MAX_DIM), help="override the config's head_dim")
    dsv4.add_argument("--rope-dim", type=int_in(1, MAX_DIM), help="override qk_rope_head_dim")
    dsv4.add_argument("--index-head-dim", type=int_in(1, MAX_DIM), help="override index_head_dim")


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    """--model/--hf-config/--config/--groups, --planner and every knob."""
    add_source_arguments(p)
    p.add_argument(
        "--planner",
        choices=PLANNERS + ("overlay-by-spec",),
        help="vllm (default: what vLLM 0.33 does), overlay, bucketed (DeepSeek V4 and --groups), packed, separate",
    )
    add_knob_arguments(p)


def _partition(text: str) -> tuple[int, ...]:
    """--pp-layer-partition A,B,...: positive layer counts, one per stage."""
    try:
        values = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: give comma-separated layer counts, e.g. 12,20") from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: every stage needs a positive layer count")
    return values


_partition.__name__ = "partition"

AUTO_MAX_MODEL_LEN = -1  # --max-model-len -1: vLLM's auto-fit


def _max_model_len(text: str) -> int:
    if text.strip() in ("-1", "auto"):
        return AUTO_MAX_MODEL_LEN
    return int_in(1, MAX_CONTEXT_TOKENS)(text)


_max_model_len.__name__ = "max_model_len"


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
    try:
        return _load_config(path, what)
    except OSError as e:  # a path the system refuses (a name too long, a loop): one line naming the flag
        raise KvvizError(f"{what} {short_repr(printable(path))}: cannot read ({e.strerror or e})") from None


def _load_config(path: str, what: str):
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
    budget: Budget = Budget(None)  # the budget the flags give (kvviz.cli.budget_args), auto-fit included

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
        return Planned(None, groups_layout=plan(load_groups(args.groups), planner), budget=budget_from_args(args))
    model = model_from_args(args)
    refuse_knobs(model, options)
    planner = resolve_planner(model, args.planner)
    budget, options = auto_fitted(args, model, options, budget_from_args(args, model), planner)
    return Planned(make_plan(model, planner, options), model, options, budget=budget)


def auto_fitted(args, model, options: Options, budget: Budget, planner: str | None = None) -> tuple[Budget, Options]:
    """With --max-model-len -1, the request length fitted to the budget (vLLM 0.33's
    _auto_fit_max_model_len, kvviz.deploy.auto_fit), its record kept on the budget for the output;
    otherwise both as given."""
    if getattr(args, "max_model_len", None) != AUTO_MAX_MODEL_LEN:
        return budget, options
    from kvviz import deploy

    require(budget.bytes is not None, "--max-model-len -1: fits the request length to a budget; give one")
    fit = deploy.auto_fit(model, options, budget.bytes, planner=planner)
    return dataclasses.replace(budget, auto_fit=fit), options.with_(max_model_len=fit.max_model_len)


def is_utf8(text: str) -> bool:
    """Whether `text` can be written as UTF-8 (argv bytes that are not UTF-8 arrive as lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, e.g. from argv bytes that are not UTF-8
        return False
    return True


# ---- fit ----------------------------------------------------------------------------------
def int_list(text: str, option: str) -> tuple[int, ...]:
    """The comma-separated positive integers of `option` (blank items skipped); anything else is
    one KvvizError naming the option."""
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise KvvizError(f"{option} {text[:40]!r}: comma-separated integers") from None
    require(values and all(v > 0 for v in values), f"{option} {text[:40]!r}: positive integers")
    return values
