"""The explorer's knobs without the widgets: names, ranges, validation, planning and sweep tables.

A knob set is a plain dict (`default_knobs()`); `plan_pair(knobs)` plans it with the chosen
planner and the bucketed baseline; `sweep` / `compare_knobs` tabulate several knob sets.
`kvviz.explorer` builds its controls from `KNOB_SPECS`; notebooks and scripts use this module
without ipywidgets.

Each `Knob` says which models it applies to (`applies_to`); the explorer hides the controls of
knobs that do not apply to the chosen model, so a model family with other knobs adds its own
`Knob`s here without touching the widget code.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import lru_cache

from . import capacity
from .config import ModelConfig, load_model, model_names, with_layer_mix
from .defaults import MAX_NUM_BATCHED_TOKENS
from .errors import KvvizError, require
from .formats import INDEXER_FORMATS, MAIN_FORMATS
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


def _always(config: ModelConfig) -> bool:
    return True


@dataclasses.dataclass(frozen=True, kw_only=True)
class Knob:
    """One knob: its control ("choice", "int", "bool" or "float"), label and range.

    `model_knob`: a preset sets it (changing the model resets it). `applies_to(config)`: whether
    the knob means something for that model (others are hidden in the explorer)."""

    name: str
    label: str
    control: str
    choices: Callable[[], tuple] | None = None
    min: float | None = None
    max: float | None = None
    step: float | None = None
    model_knob: bool = False
    applies_to: Callable[[ModelConfig], bool] = _always


KNOB_SPECS: tuple[Knob, ...] = (
    Knob(name="model", label="model", control="choice", choices=lambda: tuple(model_names())),
    Knob(name="head_dim", label="head_dim", control="int", min=128, max=1024, step=32, model_knob=True),
    Knob(name="rope_dim", label="rope dims", control="int", min=32, max=256, step=32, model_knob=True),
    Knob(name="index_head_dim", label="index_head_dim", control="int", min=32, max=512, step=32, model_knob=True),
    Knob(name="main_format", label="main KV", control="choice", choices=lambda: tuple(MAIN_FORMATS)),
    Knob(name="indexer_format", label="indexer K", control="choice", choices=lambda: tuple(INDEXER_FORMATS)),
    Knob(name="backend", label="alignment", control="choice", choices=lambda: tuple(BACKENDS)),
    Knob(name="block_size", label="block size", control="choice", choices=lambda: BLOCK_SIZES),
    Knob(name="mtp", label="MTP layer", control="bool", model_knob=True),
    Knob(name="c4", label="c4 layers", control="int", min=0, max=96, step=1, model_knob=True),
    Knob(name="c128", label="c128 layers", control="int", min=0, max=96, step=1, model_knob=True),
    Knob(name="swa", label="SWA-only layers", control="int", min=0, max=96, step=1, model_knob=True),
    Knob(name="planner", label="planner", control="choice", choices=lambda: tuple(PLANNERS)),
    Knob(name="budget_gib", label="KV budget GiB", control="float", step=0.01),
)
KNOBS = tuple(k.name for k in KNOB_SPECS)
KNOB_BY_NAME = {k.name: k for k in KNOB_SPECS}


@lru_cache(maxsize=None)
def preset(name: str) -> ModelConfig:
    """Shipped presets are read once per process (configs are frozen)."""
    return load_model(name)


def knobs_for(model: str) -> tuple[str, ...]:
    """The knobs that apply to a model, in `KNOBS` order."""
    config = preset(model)
    return tuple(k.name for k in KNOB_SPECS if k.applies_to(config))


def preset_knobs(name: str) -> dict:
    """The model knobs a preset sets (formats, backend, planner and budget are left alone)."""
    c = preset(name)
    return {"head_dim": c.head_dim, "rope_dim": c.qk_rope_head_dim, "index_head_dim": c.index_head_dim,
            "mtp": c.num_nextn_predict_layers > 0, **c.layer_mix}


def check_names(names) -> None:
    unknown = set(names) - set(KNOBS)
    if unknown:
        raise KvvizError(f"{sorted(unknown)[0]}: not a knob; knobs are {', '.join(KNOBS)}")


def default_knobs(model: str = DEFAULT_MODEL, **changes) -> dict:
    """Every knob as the explorer starts: the preset's model knobs, FlashMLA with its
    fp8_ds_mla rows, the MXFP4 indexer, 256-token blocks, the overlay planner and FlashMLA's
    budget from vLLM #48993's table; `changes` replace any of them."""
    check_names(changes)
    knobs = {"model": model, **preset_knobs(model), "main_format": BACKENDS["flashmla"].default_main_format,
             "indexer_format": "mxfp4", "backend": "flashmla", "block_size": 256, "planner": "overlay",
             "budget_gib": DEFAULT_BUDGET_GIB}
    if "backend" in changes and "main_format" not in changes:  # as in the app: the backend's format
        knobs["main_format"] = BACKENDS[changes["backend"]].default_main_format
    knobs.update(changes)
    return {name: knobs[name] for name in KNOBS}


def budget_bytes(knobs: dict) -> int:
    """The budget in bytes; a budget of 0 GiB or less is an error naming budget_gib (never clamped)."""
    return capacity.budget_bytes(gib=knobs["budget_gib"])


def config_for(knobs: dict) -> ModelConfig:
    """The ModelConfig the knobs describe: the preset, its dims overridden, then the layer mix."""
    config = preset(knobs["model"]).with_overrides(
        head_dim=knobs["head_dim"], qk_rope_head_dim=knobs["rope_dim"], index_head_dim=knobs["index_head_dim"])
    return with_layer_mix(config, c4=knobs["c4"], c128=knobs["c128"], swa=knobs["swa"])


def options_for(knobs: dict) -> CacheOptions:
    return CacheOptions(backend=knobs["backend"], main_format=knobs["main_format"],
                        indexer_format=knobs["indexer_format"], block_size=knobs["block_size"], mtp=knobs["mtp"])


def plan_pair(knobs: dict) -> tuple[Layout, Layout]:
    """(layout of the chosen planner, layout of the bucketed baseline) for the knobs.
    Raises KvvizError on an impossible combination."""
    config, options = config_for(knobs), options_for(knobs)
    layout = plan_model(config, options, knobs["planner"])
    baseline = layout if knobs["planner"] == BASELINE_PLANNER else plan_model(config, options, BASELINE_PLANNER)
    return layout, baseline


def layout_key(knobs: dict) -> tuple:
    """The knobs that decide the layout (all but the budget)."""
    return tuple(v for k, v in knobs.items() if k != "budget_gib")


def describe_knobs(knobs: dict) -> str:
    """One line naming a configuration, e.g. for the caption of the map still drawn."""
    mix = f"c4 {knobs['c4']} / c128 {knobs['c128']} / SWA {knobs['swa']}"
    return (f"{knobs['model']}, head_dim {knobs['head_dim']}, rope {knobs['rope_dim']}, "
            f"index_head_dim {knobs['index_head_dim']}, {knobs['main_format']} main KV, "
            f"{knobs['indexer_format']} indexer, {knobs['backend']} alignment, {knobs['block_size']}-token blocks, "
            f"{'MTP' if knobs['mtp'] else 'no MTP'}, {mix}, {knobs['planner']} planner")


def compare_knobs(variants, *, tokens: int = 131_072, max_num_batched_tokens: int = MAX_NUM_BATCHED_TOKENS,
                  **base):
    """One row per variant (a dict of knob changes on top of `default_knobs(**base)`): the knobs
    the variants change, block stride, binding group, blocks at the budget, blocks one request of
    `tokens` tokens holds (summed over groups, `capacity.group_blocks_for_request`), the requests
    the budget serves at once (`capacity.max_concurrency`) and their change against the first
    possible row. An impossible variant gets its one-line message in `note` instead of numbers.
    Returns a pandas DataFrame."""
    import pandas as pd  # a table is asked for; pandas stays off the import of this module

    variants = list(variants)
    changed = list(dict.fromkeys(k for v in variants for k in v))
    rows, first = [], None
    for changes in variants:
        knobs = default_knobs(**{**base, **changes})
        row = {k: knobs[k] for k in changed}
        try:
            budget = budget_bytes(knobs)
            layout = plan_pair(knobs)[0]
        except KvvizError as e:
            rows.append(row | {"note": str(e)})
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
    counts = ["block stride", "blocks", "blocks per request"]
    columns = changed + counts[:1] + ["binding group"] + counts[1:] + ["requests", "requests vs first %", "note"]
    return pd.DataFrame.from_records(rows, columns=columns).astype({c: "Int64" for c in counts})


def sweep(knob: str, values, **kwargs):
    """`compare_knobs` over one knob's values, e.g. `sweep("block_size", [128, 256, 512])`."""
    require(knob in KNOBS, f"{knob}: not a knob; knobs are {', '.join(KNOBS)}")
    return compare_knobs([{knob: v} for v in values], **kwargs)
