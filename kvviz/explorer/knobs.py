"""The explorer's knobs without the widgets: names, ranges, validation, planning and sweep tables.

A knob set is a plain dict (`default_knobs(model)`) holding the knobs that apply to its model:
the `kvviz.options.Options` fields its family declares (`Family.knobs_for`), the layer-mix knobs
its family can edit (DeepSeek V4: c4 / c128 / SWA-only layers; attention decoders: the number of
full-attention layers), the planner (one of the family's), the budget and the request length.
Nothing here asks which family a model is: every question goes to the model's family.
`kvviz.explorer.app` builds its controls from `KNOB_SPECS`; notebooks and scripts use this module
without ipywidgets.
"""

from __future__ import annotations

from functools import lru_cache

from kvviz.base.defaults import GPU_MEMORY_UTILIZATION, TENSOR_PARALLEL_SIZE
from kvviz.base.errors import KvvizError, require
from kvviz.base.formats import INDEXER_FORMATS, MAIN_FORMATS
from kvviz.base.inputs import Arg, checked, optional, short_repr
from kvviz.base.published import published_row
from kvviz.explorer.knob_spec import (
    MODEL_SOURCE,
    PRESET_NAME,
    Knob,
    deploys,
    has,
    knob_applies,
    mixes_full_layers,
    num_layers,
)
from kvviz.families import Model, load, load_preset, preset_names
from kvviz.families.deepseek_v4 import BACKENDS
from kvviz.options import KV_DTYPES, SSM_DTYPES

DEFAULT_MODEL = "deepseek-v4-pro"
# FlashMLA's budget in vLLM #48993's table (docs/published-numbers.md#the-published-table).
DEFAULT_BUDGET_GIB = published_row(DEFAULT_MODEL, "flashmla").budget_gib
AUTO = "auto"  # the engine's own choice (an Options field left None)
NO_GPU = "budget"  # the gpu knob's first choice: size the KV budget by budget_gib, not from a GPU


def _gpu_names() -> tuple[str, ...]:
    from kvviz.deploy.gpus import GPUS

    return tuple(GPUS)


# Block sizes offered; 8 and 64 are there on purpose: 8 is not a multiple of the attention kernels'
# 16-token block for hybrid models, and 64 is refused while DeepSeek V4 has c128 layers.
BLOCK_SIZES = (AUTO, 8, 16, 32, 64, 128, 256, 512, 1024)
TP_SIZES = (1, 2, 4, 8, 16)
PP_SIZES = (1, 2, 3, 4, 8)


KNOB_SPECS: tuple[Knob, ...] = (
    Knob(name="model", label="model", control="choice", choices=lambda m: tuple(preset_names())),
    # DeepSeek V4's dims (Options overrides) and layer mix
    Knob(
        name="head_dim",
        label="head_dim",
        control="count",
        model_knob=True,
        applies_to=knob_applies("head_dim"),
        option="head_dim",
    ),
    Knob(
        name="rope_dim",
        label="rope dims",
        control="count",
        model_knob=True,
        applies_to=knob_applies("rope_dim"),
        option="rope_dim",
    ),
    Knob(
        name="index_head_dim",
        label="index_head_dim",
        control="count",
        model_knob=True,
        applies_to=knob_applies("index_head_dim"),
        option="index_head_dim",
    ),
    Knob(
        name="main_format",
        label="main KV",
        control="choice",
        choices=lambda m: tuple(MAIN_FORMATS),
        applies_to=knob_applies("main_format"),
        option="main_format",
    ),
    Knob(
        name="indexer_format",
        label="indexer K",
        control="choice",
        choices=lambda m: tuple(INDEXER_FORMATS),
        applies_to=knob_applies("indexer_format"),
        option="indexer_format",
    ),
    Knob(
        name="backend",
        label="alignment",
        control="choice",
        choices=lambda m: tuple(BACKENDS),
        applies_to=knob_applies("backend"),
        option="backend",
    ),
    Knob(name="mtp", label="MTP layer", control="bool", model_knob=True, applies_to=knob_applies("mtp"), option="mtp"),
    Knob(
        name="c4",
        label="c4 layers",
        control="int",
        min=0,
        max=96,
        step=1,
        model_knob=True,
        applies_to=has("with_layer_mix"),
    ),
    Knob(
        name="c128",
        label="c128 layers",
        control="int",
        min=0,
        max=96,
        step=1,
        model_knob=True,
        applies_to=has("with_layer_mix"),
    ),
    Knob(
        name="swa",
        label="SWA-only layers",
        control="int",
        min=0,
        max=96,
        step=1,
        model_knob=True,
        applies_to=has("with_layer_mix"),
    ),
    # every model (where its family has the knob)
    Knob(
        name="kv_dtype",
        label="KV dtype",
        control="choice",
        choices=lambda m: (AUTO,) + KV_DTYPES,
        applies_to=knob_applies("kv_dtype"),
        option="kv_dtype",
        auto=True,
    ),
    Knob(
        name="block_size",
        label="block size",
        control="choice",
        choices=lambda m: BLOCK_SIZES,
        applies_to=knob_applies("block_size"),
        option="block_size",
        auto=True,
    ),
    Knob(
        name="sliding_window",
        label="sliding window",
        control="count",
        model_knob=True,
        applies_to=knob_applies("sliding_window"),
        option="sliding_window",
    ),
    Knob(
        name="full_layers",
        label="full-attn layers",
        control="int",
        min=0,
        max=96,
        step=1,
        model_knob=True,
        applies_to=mixes_full_layers,
        max_for=num_layers,
    ),
    Knob(
        name="mamba_ssm_dtype",
        label="SSM dtype",
        control="choice",
        choices=lambda m: (AUTO,) + SSM_DTYPES,
        applies_to=knob_applies("mamba_ssm_dtype"),
        option="mamba_ssm_dtype",
        auto=True,
    ),
    Knob(
        name="prefix_caching",
        label="prefix caching",
        control="bool",
        applies_to=knob_applies("prefix_caching"),
        option="prefix_caching",
    ),
    Knob(
        name="tensor_parallel_size",
        label="tensor parallel",
        control="choice",
        choices=lambda m: TP_SIZES,
        applies_to=knob_applies("tensor_parallel_size"),
        option="tensor_parallel_size",
    ),
    # vLLM's DCP reuses the TP ranks: a knob wherever TP is (kvviz.vllm.plan.check_dcp refuses what vLLM refuses)
    Knob(
        name="decode_context_parallel_size",
        label="decode CP",
        control="choice",
        choices=lambda m: TP_SIZES,
        applies_to=knob_applies("tensor_parallel_size"),
        option="decode_context_parallel_size",
    ),
    # past one GPU and one memory tier (docs/deploy.md): where TP applies, as kvviz.vllm.plan.check_knobs accepts them
    Knob(
        name="pipeline_parallel_size",
        label="pipeline parallel",
        control="choice",
        choices=lambda m: PP_SIZES,
        applies_to=deploys,
        option="pipeline_parallel_size",
        off=1,  # one stage: no pipeline parallel (Options None)
    ),
    Knob(
        name="kv_offloading_size",
        label="CPU offload GiB",
        control="float",
        step=1.0,
        applies_to=deploys,
        option="kv_offloading_size",
        off=0,
    ),
    # the explorer's own: replicas of the plan, each its own pool (kvviz.deploy.parallel.data_parallel)
    Knob(
        name="data_parallel_size",
        label="data parallel",
        control="choice",
        choices=lambda m: TP_SIZES,
        applies_to=deploys,
    ),
    Knob(name="planner", label="planner", control="choice", choices=lambda m: tuple(m.reader.planners)),
    Knob(name="context", label="max_model_len", control="count", model_knob=True, option="max_model_len"),
    Knob(name="budget_gib", label="KV budget GiB", control="float", step=0.01),
    # the budget from a GPU instead (kvviz.deploy.budget: vLLM's profile term by term, estimates labelled)
    Knob(name="gpu", label="GPU", control="choice", choices=lambda m: (NO_GPU,) + tuple(_gpu_names())),
    Knob(name="gpu_memory_utilization", label="GPU mem. util.", control="float", step=0.01),
)
KNOBS = tuple(k.name for k in KNOB_SPECS)
KNOB_BY_NAME = {k.name: k for k in KNOB_SPECS}


# The names a knob set holds (kvviz.base.inputs.checked; the other arguments' rules: kvviz.explorer.knob_spec).
KNOB_NAME = Arg(lambda v: isinstance(v, str) and v in KNOB_BY_NAME, "a knob name (kvviz.explorer.KNOBS)")
KNOB_NAMES = Arg(
    lambda v: isinstance(v, (list, tuple, set, frozenset, dict)) and all(isinstance(n, str) for n in v),
    "knob names (a list of strings)",
)
# Where a knob starts when the model does not set it (Options None = AUTO; booleans: vLLM's default).
DEPLOYMENT_DEFAULTS = {
    "kv_dtype": AUTO,
    "block_size": AUTO,
    "mamba_ssm_dtype": AUTO,
    "prefix_caching": True,
    "tensor_parallel_size": TENSOR_PARALLEL_SIZE,
    "decode_context_parallel_size": 1,
    "pipeline_parallel_size": 1,
    "kv_offloading_size": 0.0,
    "data_parallel_size": 1,
    "backend": "flashmla",
    "indexer_format": "mxfp4",
    "main_format": BACKENDS["flashmla"].default_main_format,
    "budget_gib": DEFAULT_BUDGET_GIB,
    "gpu": NO_GPU,
    "gpu_memory_utilization": GPU_MEMORY_UTILIZATION,
}


@checked(name=PRESET_NAME)
@lru_cache(maxsize=None)
def preset(name: str) -> Model:
    """A shipped preset, read once per process (models are frozen)."""
    return load_preset(name)


@checked(knobs_or_name=MODEL_SOURCE)
def model_of(knobs_or_name) -> Model:
    """The model a knob set (or a name / path / Model) names."""
    if isinstance(knobs_or_name, Model):
        return knobs_or_name
    require(
        not isinstance(knobs_or_name, dict) or "model" in knobs_or_name,
        "knobs: a knob set names its model; build one with kvviz.explorer.knobs.default_knobs(model)",
    )
    name = knobs_or_name["model"] if isinstance(knobs_or_name, dict) else knobs_or_name
    if isinstance(name, Model):
        return name
    return preset(name) if name in preset_names() else load(name)


@checked(model=MODEL_SOURCE)
def knobs_for(model) -> tuple[str, ...]:
    """The knobs that apply to a model, in `KNOBS` order."""
    m = model_of(model)
    return tuple(k.name for k in KNOB_SPECS if k.applies_to(m))


@checked(model=MODEL_SOURCE)
def preset_knobs(model) -> dict:
    """The model knobs the model sets: DeepSeek V4's dims, MTP and layer mix; an attention
    decoder's full-attention layers and sliding window; every model's max_model_len."""
    m = model_of(model)
    applies = set(knobs_for(m))
    out = {"context": m.max_model_len}
    c = m.config
    if "head_dim" in applies:
        out.update(
            head_dim=c.head_dim,
            rope_dim=c.qk_rope_head_dim,
            index_head_dim=c.index_head_dim,
            mtp=c.num_nextn_predict_layers > 0,
        )
    if "c4" in applies:
        out.update(c.layer_mix)
    if "full_layers" in applies:
        out["full_layers"] = m.reader.full_layer_count(m)
    if "sliding_window" in applies:
        out["sliding_window"] = c.sliding_window
    return out


@checked(names=KNOB_NAMES, model=optional(MODEL_SOURCE))
def check_names(names, model=None) -> None:
    """Every name is a knob and, given a model, one that applies to it (one-line error otherwise)."""
    unknown = set(names) - set(KNOBS)
    if unknown:
        raise KvvizError(f"{sorted(unknown)[0]}: not a knob; knobs are {', '.join(KNOBS)}")
    if model is not None:
        m = model_of(model)
        applies = knobs_for(m)
        for name in names:
            if name not in applies:
                raise KvvizError(
                    f"{name}: does not apply to {m.name} ({m.reader.title}); its knobs are {', '.join(applies)}"
                )


_CONTROL_TYPES = {
    "float": ((int, float), "a number"),
    "int": ((int,), "an integer"),
    "count": ((int,), "an integer"),
    "bool": ((bool,), "True or False"),
}


@checked(name=KNOB_NAME)
def check_value(name: str, value) -> None:
    """A knob's value is of its control's type (a number, an integer, True/False; a choice: one
    value, never a list or NaN); a KvvizError naming the knob otherwise. Whether the value is
    possible for the model is the planner's to say (the explorer shows that refusal)."""
    knob = KNOB_BY_NAME[name]
    types_, what = _CONTROL_TYPES.get(knob.control, ((object,), "one of its choices"))
    ok = isinstance(value, types_) and (knob.control == "bool" or not isinstance(value, bool))
    if knob.control == "choice":
        ok = isinstance(value, (str, int, float)) and not isinstance(value, bool) and value == value
    require(name == "model" or ok, f"{name}={short_repr(value)}: must be {what}")


@checked(model=MODEL_SOURCE)
def default_knobs(model=DEFAULT_MODEL, **changes) -> dict:
    """The knobs that apply to `model` as the explorer starts: the model's own knobs, the
    engine's defaults ('auto'), the family's default planner and FlashMLA's budget from vLLM
    #48993's table; `changes` replace any of them (model included). A knob that does not apply
    is refused."""
    model = changes.pop("model", model)
    m = model_of(model)
    check_names(changes, m)
    for name, value in changes.items():
        check_value(name, value)
    knobs = {
        "model": model if isinstance(model, str) else m.name,
        **DEPLOYMENT_DEFAULTS,
        **preset_knobs(m),
        "planner": m.reader.default_planner,
    }
    if "backend" in changes and "main_format" not in changes:  # as in the app: the backend's format
        knobs["main_format"] = BACKENDS[changes["backend"]].default_main_format
    knobs.update(changes)
    return {name: knobs[name] for name in knobs_for(m)}


@checked(model=MODEL_SOURCE)
def control_values(model=DEFAULT_MODEL, **changes) -> dict:
    """A value for every knob's control: `default_knobs(model, **changes)` for the knobs that
    apply; the others hold DeepSeek-V4-Pro's values (hidden until a model they apply to is picked)."""
    values = {
        **{k.name: None for k in KNOB_SPECS},
        **DEPLOYMENT_DEFAULTS,
        "full_layers": 0,
        "sliding_window": 1,
        **default_knobs(DEFAULT_MODEL),
        **default_knobs(model, **changes),
    }
    return {name: values[name] for name in KNOBS}
