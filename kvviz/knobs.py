"""The explorer's knobs without the widgets: names, ranges, validation, planning and sweep tables.

A knob set is a plain dict (`default_knobs(model)`) holding the knobs that apply to its model.
DeepSeek V4: `plan_pair(knobs)` plans it with the chosen planner and the bucketed baseline;
`sweep` / `compare_knobs` tabulate several knob sets. Hybrid models (gpt-oss, Gemma 3, Llama 4,
Qwen3-Next; docs/hybrid.md#hybrid-planners): `hybrid_config_for` / `hybrid_options_for` turn the
knobs into `kvviz.hybrid`'s inputs, `plan_hybrid_knobs` plans the chosen planner and
`hybrid_summaries` gives every planner's numbers at the budget and context.
`kvviz.explorer` builds its controls from `KNOB_SPECS`; notebooks and scripts use this module
without ipywidgets.

Each `Knob` says which models it applies to (`applies_to`); the explorer hides the controls of
knobs that do not apply to the chosen model, so a model family with other knobs adds its own
`Knob`s here without touching the widget code. A knob set names only the knobs that apply: a
DeepSeek knob given for a hybrid model (or the reverse) is refused, not ignored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import lru_cache

from . import capacity
from .config import ModelConfig, is_hybrid, load_model, model_names, with_layer_mix
from .defaults import BLOCK_SIZE, CONTEXT_TOKENS, MAX_NUM_BATCHED_TOKENS
from .errors import KvvizError, require
from .formats import INDEXER_FORMATS, MAIN_FORMATS
from .hf import FULL, SLIDING, HybridConfig
from .hybrid import HYBRID_PLANNERS, HybridSummary, plan_hybrid, separate_block_size, summarize
from .hybrid_specs import (KERNEL_BLOCK_ALIGNMENT, KV_DTYPES, SSM_DTYPES, HybridOptions, attention_block_size,
                           resolved_kv_dtype, resolved_ssm_dtype)
from .layout import Layout
from .planners import PLANNERS, plan_model
from .specs import BACKENDS, CacheOptions

DEFAULT_MODEL = "deepseek-v4-pro"
# FlashMLA's budget in vLLM #48993's table (docs/published-numbers.md#the-published-table).
DEFAULT_BUDGET_GIB = 26.09
# Block sizes offered; 64 is there on purpose: it is refused while the model has c128 layers.
BLOCK_SIZES = (64, 128, 256, 512, 1024)
# The planner the "change" line compares against (vLLM before #48993).
BASELINE_PLANNER = "bucketed"

# Hybrid models. "auto" is vLLM's own choice: cache_dtype 'auto' (the model dtype),
# mamba_ssm_cache_dtype 'auto' (the config's, else the model dtype), and the block size vLLM
# derives (`hybrid_specs.attention_block_size`). 8 is offered on purpose: it is not a multiple of
# the attention kernels' 16-token block, and is refused with that reason.
AUTO = "auto"
HYBRID_BLOCK_SIZES = (AUTO, KERNEL_BLOCK_ALIGNMENT // 2) + tuple(KERNEL_BLOCK_ALIGNMENT << i for i in range(7))
# The planner vLLM 0.33 itself uses for these models (the first of HYBRID_PLANNERS).
HYBRID_BASELINE_PLANNER = HYBRID_PLANNERS[0]


def _always(config) -> bool:
    return True


def _deepseek(config) -> bool:
    return not is_hybrid(config)


def _hybrid(config) -> bool:
    return is_hybrid(config)


def _has_sliding(config) -> bool:
    return is_hybrid(config) and SLIDING in config.layer_types


def _has_linear(config) -> bool:
    """Mamba-style state (gated delta net) layers: their state dtype and prefix caching's
    'align' mode change the layout (hybrid_specs.mamba_cache_mode)."""
    return is_hybrid(config) and config.has_linear_attention


def _num_layers(config) -> int:
    return config.num_hidden_layers


@dataclasses.dataclass(frozen=True, kw_only=True)
class Knob:
    """One knob: its control ("choice", "int", "count", "bool" or "float"), label and range.

    `model_knob`: a preset sets it (changing the model resets it). `applies_to(config)`: whether
    the knob means something for that model (others are hidden in the explorer). `max_for(config)`:
    a slider's upper end that depends on the model (e.g. its layer count). `unset`: the value
    the control holds while no preset of its family has set it (hidden until one does).
    "count" is an unbounded integer field: a value out of range is refused with a message,
    never clamped (a slider would clamp)."""

    name: str
    label: str
    control: str
    choices: Callable[[], tuple] | None = None
    min: float | None = None
    max: float | None = None
    step: float | None = None
    model_knob: bool = False
    applies_to: Callable[[object], bool] = _always
    max_for: Callable[[object], int] | None = None
    unset: object = None


KNOB_SPECS: tuple[Knob, ...] = (
    Knob(name="model", label="model", control="choice", choices=lambda: tuple(model_names())),
    # DeepSeek V4
    Knob(name="head_dim", label="head_dim", control="int", min=128, max=1024, step=32, model_knob=True,
         applies_to=_deepseek),
    Knob(name="rope_dim", label="rope dims", control="int", min=32, max=256, step=32, model_knob=True,
         applies_to=_deepseek),
    Knob(name="index_head_dim", label="index_head_dim", control="int", min=32, max=512, step=32, model_knob=True,
         applies_to=_deepseek),
    Knob(name="main_format", label="main KV", control="choice", choices=lambda: tuple(MAIN_FORMATS),
         applies_to=_deepseek),
    Knob(name="indexer_format", label="indexer K", control="choice", choices=lambda: tuple(INDEXER_FORMATS),
         applies_to=_deepseek),
    Knob(name="backend", label="alignment", control="choice", choices=lambda: tuple(BACKENDS), applies_to=_deepseek),
    Knob(name="block_size", label="block size", control="choice", choices=lambda: BLOCK_SIZES, applies_to=_deepseek),
    Knob(name="mtp", label="MTP layer", control="bool", model_knob=True, applies_to=_deepseek),
    Knob(name="c4", label="c4 layers", control="int", min=0, max=96, step=1, model_knob=True, applies_to=_deepseek),
    Knob(name="c128", label="c128 layers", control="int", min=0, max=96, step=1, model_knob=True,
         applies_to=_deepseek),
    Knob(name="swa", label="SWA-only layers", control="int", min=0, max=96, step=1, model_knob=True,
         applies_to=_deepseek),
    Knob(name="planner", label="planner", control="choice", choices=lambda: tuple(PLANNERS), applies_to=_deepseek),
    # hybrid models (docs/hybrid.md#hybrid-caches)
    Knob(name="kv_dtype", label="KV dtype", control="choice", choices=lambda: (AUTO,) + tuple(KV_DTYPES),
         applies_to=_hybrid),
    Knob(name="attn_block_size", label="block size", control="choice", choices=lambda: HYBRID_BLOCK_SIZES,
         applies_to=_hybrid),
    Knob(name="sliding_window", label="sliding window", control="count", model_knob=True, applies_to=_has_sliding,
         unset=1),
    Knob(name="full_layers", label="full-attn layers", control="int", min=0, max=96, step=1, model_knob=True,
         applies_to=_hybrid, max_for=_num_layers, unset=0),
    Knob(name="mamba_ssm_dtype", label="SSM dtype", control="choice", choices=lambda: (AUTO,) + tuple(SSM_DTYPES),
         applies_to=_has_linear),
    Knob(name="prefix_caching", label="prefix caching", control="bool", applies_to=_has_linear),
    Knob(name="hybrid_planner", label="planner", control="choice", choices=lambda: HYBRID_PLANNERS, applies_to=_hybrid),
    Knob(name="context", label="context tokens", control="count", applies_to=_hybrid),
    # every model
    Knob(name="budget_gib", label="KV budget GiB", control="float", step=0.01),
)
KNOBS = tuple(k.name for k in KNOB_SPECS)
KNOB_BY_NAME = {k.name: k for k in KNOB_SPECS}

# The deployment knobs as the explorer starts (a preset sets the model knobs).
DEEPSEEK_DEFAULTS = {"main_format": BACKENDS["flashmla"].default_main_format, "indexer_format": "mxfp4",
                     "backend": "flashmla", "block_size": BLOCK_SIZE, "planner": "overlay"}
HYBRID_DEFAULTS = {"kv_dtype": AUTO, "attn_block_size": AUTO, "mamba_ssm_dtype": AUTO,
                   "prefix_caching": HybridOptions().prefix_caching, "hybrid_planner": HYBRID_BASELINE_PLANNER,
                   "context": CONTEXT_TOKENS}


@lru_cache(maxsize=None)
def preset(name: str):
    """Shipped presets are read once per process (configs are frozen): a `ModelConfig` for
    DeepSeek V4, a `kvviz.hf.HybridConfig` for the hybrid models (read through transformers)."""
    return load_model(name)


def is_hybrid_model(model: str) -> bool:
    return is_hybrid(preset(model))


def knobs_for(model: str) -> tuple[str, ...]:
    """The knobs that apply to a model, in `KNOBS` order."""
    config = preset(model)
    return tuple(k.name for k in KNOB_SPECS if k.applies_to(config))


def preset_knobs(name: str) -> dict:
    """The model knobs a preset sets (formats, dtypes, planners, budget and context are left
    alone). DeepSeek V4: dims, MTP and the c4 / c128 / SWA mix; hybrid models: the number of
    full-attention layers and, with sliding layers, the window."""
    c = preset(name)
    if is_hybrid(c):
        out = {"full_layers": c.kind_counts.get(FULL, 0)}
        if _has_sliding(c):
            out["sliding_window"] = c.sliding_window
        return out
    return {"head_dim": c.head_dim, "rope_dim": c.qk_rope_head_dim, "index_head_dim": c.index_head_dim,
            "mtp": c.num_nextn_predict_layers > 0, **c.layer_mix}


def check_names(names, model: str | None = None) -> None:
    """Every name is a knob and, given a model, one that applies to it (one-line error otherwise)."""
    unknown = set(names) - set(KNOBS)
    if unknown:
        raise KvvizError(f"{sorted(unknown)[0]}: not a knob; knobs are {', '.join(KNOBS)}")
    if model is not None:
        applies = knobs_for(model)
        for name in names:
            if name not in applies:
                family = "a hybrid model" if is_hybrid_model(model) else "a DeepSeek V4 model"
                raise KvvizError(f"{name}: does not apply to {model} ({family}); its knobs are {', '.join(applies)}")


def default_knobs(model: str = DEFAULT_MODEL, **changes) -> dict:
    """The knobs that apply to `model` as the explorer starts: the preset's model knobs, then
    DeepSeek V4: FlashMLA with its fp8_ds_mla rows, the MXFP4 indexer, 256-token blocks, the
    overlay planner; hybrid models: vLLM's own ('auto') dtypes and block size, prefix caching on,
    vLLM's planner, a context of `defaults.CONTEXT_TOKENS`; and FlashMLA's budget from vLLM
    #48993's table. `changes` replace any of them (model included); a knob that does not apply
    to the model is refused."""
    model = changes.pop("model", model)
    check_names(changes, model)
    hybrid = is_hybrid_model(model)
    knobs = {"model": model, **preset_knobs(model), **(HYBRID_DEFAULTS if hybrid else DEEPSEEK_DEFAULTS),
             "budget_gib": DEFAULT_BUDGET_GIB}
    if "backend" in changes and "main_format" not in changes:  # as in the app: the backend's format
        knobs["main_format"] = BACKENDS[changes["backend"]].default_main_format
    knobs.update(changes)
    return {name: knobs[name] for name in knobs_for(model)}


def control_values(model: str = DEFAULT_MODEL, **changes) -> dict:
    """A value for every knob's control (the explorer's start): `default_knobs(model, **changes)`
    for the knobs that apply; the other family's knobs hold their start values (a DeepSeek
    preset's or `Knob.unset`) until a model of that family is picked."""
    other = {**{k.name: k.unset for k in KNOB_SPECS if k.unset is not None}, **HYBRID_DEFAULTS,
             **default_knobs(DEFAULT_MODEL)}
    values = {**other, **default_knobs(model, **changes)}
    return {name: values[name] for name in KNOBS}


def budget_bytes(knobs: dict) -> int:
    """The budget in bytes; a budget of 0 GiB or less is an error naming budget_gib (never clamped)."""
    return capacity.budget_bytes(gib=knobs["budget_gib"])


def knobs_are_hybrid(knobs: dict) -> bool:
    return is_hybrid_model(knobs["model"])


def config_for(knobs: dict) -> ModelConfig:
    """The DeepSeek V4 ModelConfig the knobs describe: the preset, its dims overridden, then the layer mix."""
    require(not knobs_are_hybrid(knobs), f"model {knobs['model']!r}: a hybrid model; use hybrid_config_for")
    config = preset(knobs["model"]).with_overrides(
        head_dim=knobs["head_dim"], qk_rope_head_dim=knobs["rope_dim"], index_head_dim=knobs["index_head_dim"])
    return with_layer_mix(config, c4=knobs["c4"], c128=knobs["c128"], swa=knobs["swa"])


def options_for(knobs: dict) -> CacheOptions:
    return CacheOptions(backend=knobs["backend"], main_format=knobs["main_format"],
                        indexer_format=knobs["indexer_format"], block_size=knobs["block_size"], mtp=knobs["mtp"])


def plan_pair(knobs: dict) -> tuple[Layout, Layout]:
    """(layout of the chosen planner, layout of the bucketed baseline) for DeepSeek V4 knobs.
    Raises KvvizError on an impossible combination."""
    config, options = config_for(knobs), options_for(knobs)
    layout = plan_model(config, options, knobs["planner"])
    baseline = layout if knobs["planner"] == BASELINE_PLANNER else plan_model(config, options, BASELINE_PLANNER)
    return layout, baseline


# ---- hybrid models ------------------------------------------------------------------------------
def full_layer_positions(num_layers: int, full: int) -> tuple[int, ...]:
    """Where `full` full-attention layers sit among `num_layers`, spread evenly: the k-th ends the
    k-th of `full` equal stretches (layer (k+1) x num_layers // full - 1). For the presets' own
    counts this is their pattern: every 2nd layer of 36 (gpt-oss), every 4th of 48 (Qwen3-Next,
    Llama 4)."""
    return tuple((k + 1) * num_layers // full - 1 for k in range(full))


def with_full_layers(config: HybridConfig, full: int) -> HybridConfig:
    """A hybrid config with `full` full-attention layers spread evenly (`full_layer_positions`);
    the other layers keep the preset's other kinds in their order (stretched over the new number
    of places when there are several). The preset itself when the count is its own (its own
    pattern kept, e.g. Gemma 3's 5 sliding then 1 full)."""
    n = config.num_hidden_layers
    require(isinstance(full, int) and not isinstance(full, bool) and 0 <= full <= n,
            f"full_layers={full!r}: must be an integer from 0 to {n} (the model's layers)")
    if full == config.kind_counts.get(FULL, 0):
        return config
    others = [k for k in config.layer_types if k != FULL]
    require(others or full == n, f"full_layers={full}: {config.name} has only full-attention layers; "
                                 f"no other kind to give the rest")
    is_full = set(full_layer_positions(n, full)) if full else set()
    rest = n - full
    kinds, j = [], 0
    for i in range(n):
        if i in is_full:
            kinds.append(FULL)
        else:
            kinds.append(others[j * len(others) // rest])
            j += 1
    return dataclasses.replace(config, name=f"{config.name} ({full} full)", layer_types=tuple(kinds),
                               kind_source=f"kvviz.knobs.with_full_layers({full}): full layers spread evenly")


def _auto(value):
    return None if value == AUTO else value


def hybrid_config_for(knobs: dict) -> HybridConfig:
    """The HybridConfig the knobs describe: the preset with its full-attention layers re-spread."""
    require(knobs_are_hybrid(knobs), f"model {knobs['model']!r}: a DeepSeek V4 model; use config_for")
    return with_full_layers(preset(knobs["model"]), knobs["full_layers"])


def hybrid_options_for(knobs: dict, *, max_num_batched_tokens: int = MAX_NUM_BATCHED_TOKENS) -> HybridOptions:
    """HybridOptions from the knobs ('auto' = vLLM's own choice = None); raises KvvizError with
    HybridOptions' one-line reason (e.g. a block size that is not a multiple of 16)."""
    config = preset(knobs["model"])
    return HybridOptions(kv_dtype=_auto(knobs["kv_dtype"]), block_size=_auto(knobs["attn_block_size"]),
                         mamba_ssm_dtype=_auto(knobs.get("mamba_ssm_dtype", AUTO)),
                         prefix_caching=knobs.get("prefix_caching", HYBRID_DEFAULTS["prefix_caching"]),
                         sliding_window=knobs["sliding_window"] if _has_sliding(config) else None,
                         max_num_batched_tokens=max_num_batched_tokens)


@lru_cache(maxsize=64)
def _plan_hybrid(config: HybridConfig, options: HybridOptions, planner: str):
    """plan_hybrid, cached (configs and options are frozen): the explorer's comparison plans
    all three planners on every change of layout."""
    return plan_hybrid(config, options, planner)


def plan_hybrid_knobs(knobs: dict, planner: str | None = None):
    """The hybrid layout of the knobs' planner (or `planner`): a `HybridLayout`, or `SeparatePools`
    for 'separate'. Raises KvvizError."""
    return _plan_hybrid(hybrid_config_for(knobs), hybrid_options_for(knobs), planner or knobs["hybrid_planner"])


def hybrid_summaries(knobs: dict, **kwargs) -> tuple[HybridSummary, ...]:
    """Every planner's `kvviz.hybrid.summarize` at the knobs' budget and context, in
    HYBRID_PLANNERS order (`compare_hybrid`, with the plans cached)."""
    return tuple(hybrid_summary(knobs, p, **kwargs) for p in HYBRID_PLANNERS)


def hybrid_summary(knobs: dict, planner: str | None = None, *,
                   max_num_batched_tokens: int = MAX_NUM_BATCHED_TOKENS) -> HybridSummary:
    """`kvviz.hybrid.summarize` of the knobs' planner (or `planner`) at their budget and context."""
    config = hybrid_config_for(knobs)
    options = hybrid_options_for(knobs, max_num_batched_tokens=max_num_batched_tokens)
    budget = budget_bytes(knobs)
    layout = _plan_hybrid(config, options, planner or knobs["hybrid_planner"])
    return summarize(layout, config, options, budget_bytes=budget, context=knobs["context"])


def layout_key(knobs: dict) -> tuple:
    """The knobs that decide the layout (all but the budget and the context)."""
    return tuple((k, v) for k, v in knobs.items() if k not in ("budget_gib", "context"))


def describe_knobs(knobs: dict) -> str:
    """One line naming a configuration, e.g. for the caption of the map still drawn."""
    if knobs_are_hybrid(knobs):
        return describe_hybrid_knobs(knobs)
    mix = f"c4 {knobs['c4']} / c128 {knobs['c128']} / SWA {knobs['swa']}"
    return (f"{knobs['model']}, head_dim {knobs['head_dim']}, rope {knobs['rope_dim']}, "
            f"index_head_dim {knobs['index_head_dim']}, {knobs['main_format']} main KV, "
            f"{knobs['indexer_format']} indexer, {knobs['backend']} alignment, {knobs['block_size']}-token blocks, "
            f"{'MTP' if knobs['mtp'] else 'no MTP'}, {mix}, {knobs['planner']} planner")


def _resolved(value, resolved) -> str:
    return f"{resolved} (auto)" if value == AUTO else str(value)


def describe_hybrid_knobs(knobs: dict) -> str:
    """One line naming a hybrid configuration; 'auto' values are shown with what they resolve to
    (when the knobs can be resolved)."""
    config = preset(knobs["model"])
    try:
        options = hybrid_options_for(knobs)
        mixed = hybrid_config_for(knobs)
        dtype = _resolved(knobs["kv_dtype"], resolved_kv_dtype(config, options))
        tokens = (separate_block_size(mixed, options) if knobs["hybrid_planner"] == "separate"
                  else attention_block_size(mixed, options))
        block = f"{tokens}-token blocks" + (" (auto)" if knobs["attn_block_size"] == AUTO else "")
        ssm = _resolved(knobs.get("mamba_ssm_dtype"), resolved_ssm_dtype(config, options))
    except KvvizError:  # an impossible combination is still named, as given
        dtype, block, ssm = knobs["kv_dtype"], f"block size {knobs['attn_block_size']}", knobs.get("mamba_ssm_dtype")
    other = ", ".join(f"{n} {k.replace('_attention', '')}"
                      for k, n in with_full_layers_counts(config, knobs["full_layers"]).items())
    parts = [knobs["model"], f"{knobs['full_layers']} full / {other} layers"]
    if "sliding_window" in knobs:
        parts.append(f"sliding window {knobs['sliding_window']}")
    parts += [f"{dtype} KV", block]
    if "mamba_ssm_dtype" in knobs:
        parts += [f"{ssm} SSM state", f"prefix caching {'on' if knobs['prefix_caching'] else 'off'}"]
    parts.append(f"{knobs['hybrid_planner']} planner")
    return ", ".join(str(p) for p in parts)


def with_full_layers_counts(config: HybridConfig, full) -> dict[str, int]:
    """Layers of each non-full kind once `full` layers are full (for naming; no validation)."""
    try:
        mixed = with_full_layers(config, full)
    except KvvizError:
        mixed = config
    return {k: n for k, n in mixed.kind_counts.items() if k != FULL}


def compare_knobs(variants, *, tokens: int = 131_072, max_num_batched_tokens: int = MAX_NUM_BATCHED_TOKENS,
                  **base):
    """One row per variant (a dict of knob changes on top of `default_knobs(**base)`): the knobs
    the variants change, block stride, binding group, blocks at the budget, blocks one request of
    `tokens` tokens holds (summed over groups, `capacity.group_blocks_for_request`), the requests
    the budget serves at once (`capacity.max_concurrency`) and their change against the first
    possible row. An impossible variant gets its one-line message in `note` instead of numbers.

    Hybrid models (the first variant's model decides the table): bytes and tokens per block,
    waste %, blocks, blocks per request, vLLM's admission bytes per request and the requests
    served, from `kvviz.hybrid.summarize` at a context of `tokens` (unless a variant sets
    `context`). A row of the other family is kept with a note; a knob that does not apply to a
    row's model raises KvvizError. Returns a pandas DataFrame."""
    import pandas as pd  # a table is asked for; pandas stays off the import of this module

    variants = list(variants)
    changed = list(dict.fromkeys(k for v in variants for k in v))
    model_of = [{**base, **v}.get("model", DEFAULT_MODEL) for v in variants]
    hybrid = bool(variants) and is_hybrid_model(model_of[0])
    rows, first = [], None
    for changes, model in zip(variants, model_of):
        given = {**base, **changes}
        if is_hybrid_model(model) != hybrid:
            rows.append({k: given.get(k) for k in changed} | {
                "note": f"model {model!r}: {'not ' if hybrid else ''}a hybrid model; compare it in its own table"})
            continue
        if hybrid and "context" not in given:
            given["context"] = tokens
        knobs = default_knobs(**given)  # a knob that is unknown or not the model's raises: a mistake, not a row
        row = {k: knobs.get(k) for k in changed}
        try:
            if hybrid:
                summary = hybrid_summary(knobs, max_num_batched_tokens=max_num_batched_tokens)
            else:
                budget = budget_bytes(knobs)
                layout = plan_pair(knobs)[0]
        except KvvizError as e:
            rows.append(row | {"note": str(e)})
            continue
        if hybrid:
            requests = summary.max_concurrency
            first = first or requests
            rows.append(row | {
                "bytes per block": summary.bytes_per_block, "tokens per block": summary.tokens_per_block,
                "waste %": round(summary.waste.waste_pct, 2), "blocks": summary.num_blocks,
                "blocks per request": summary.blocks_per_request,
                "admission B/request": summary.admission_bytes_per_request,
                "requests": round(requests, 2), "requests vs first %": round(100 * (requests - first) / first, 1),
                "note": ""})
            continue
        requests = capacity.max_concurrency(layout, budget, tokens, max_num_batched_tokens=max_num_batched_tokens)
        first = first or requests
        rows.append(row | {
            "block stride": layout.block_stride,
            "binding group": layout.binding_label,
            "blocks": capacity.num_blocks(layout, budget),
            "blocks per request": sum(capacity.group_blocks_for_request(
                layout, tokens, max_num_batched_tokens=max_num_batched_tokens)),
            "requests": round(requests, 2),
            "requests vs first %": round(100 * (requests - first) / first, 1),
            "note": "",
        })
    if hybrid:
        counts = ["bytes per block", "tokens per block", "blocks", "blocks per request", "admission B/request"]
        columns = changed + counts[:2] + ["waste %"] + counts[2:] + ["requests", "requests vs first %", "note"]
    else:
        counts = ["block stride", "blocks", "blocks per request"]
        columns = changed + counts[:1] + ["binding group"] + counts[1:] + ["requests", "requests vs first %", "note"]
    return pd.DataFrame.from_records(rows, columns=columns).astype({c: "Int64" for c in counts})


def sweep(knob: str, values, **kwargs):
    """`compare_knobs` over one knob's values, e.g. `sweep("block_size", [128, 256, 512])`."""
    require(knob in KNOBS, f"{knob}: not a knob; knobs are {', '.join(KNOBS)}")
    return compare_knobs([{knob: v} for v in values], **kwargs)
