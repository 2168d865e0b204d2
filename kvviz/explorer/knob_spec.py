"""The explorer's knob record and the predicates that say where a knob applies (kept apart from the knob table,
kvviz.explorer.knobs, which builds `KNOB_SPECS` from them), and what the arguments of the explorer's public
functions must be (a model, a knob set, a plan, a capacity: kvviz.base.inputs.checked)."""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable

from kvviz.base.inputs import Arg, instance
from kvviz.core.plan import Capacity, Plan
from kvviz.families import Model, preset_names


def knob_applies(name: str):
    """A knob that is an Options field applies where the model's family says so."""

    def applies(model: Model) -> bool:
        return name in model.reader.knobs_for(model)

    return applies


def _always(model) -> bool:
    return True


def has(attr: str):
    """A knob applies where the model's reader has `attr`."""

    def applies(model: Model) -> bool:
        return hasattr(model.reader, attr)

    return applies


def num_layers(model: Model) -> int:
    """The model's number of decoder layers (a layer knob's upper end)."""
    return model.config.num_hidden_layers


def mixes_full_layers(model: Model) -> bool:
    """The family can move the model's full-attention layers (Family.mixes_full_layers)."""
    return getattr(model.reader, "mixes_full_layers", lambda m: False)(model)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Knob:
    """One knob: its control ("choice", "int", "count", "bool" or "float"), label and range.

    `option`: the Options field it sets (None: a knob of the explorer's own). `model_knob`: the
    model sets it (changing the model resets it). `applies_to(model)`: whether the knob means
    something for that model (others are hidden in the explorer). `max_for(model)`: a slider's
    upper end that depends on the model. "count" is an unbounded integer field: a value out of
    range is refused with a message, never clamped (a slider would clamp)."""

    name: str
    label: str
    control: str
    choices: Callable[[object], tuple] | None = None  # of the model (None for the model knob)
    min: float | None = None
    max: float | None = None
    step: float | None = None
    model_knob: bool = False
    applies_to: Callable[[object], bool] = _always
    max_for: Callable[[object], int] | None = None
    option: str | None = None
    auto: bool = False  # the choice AUTO stands for None (the engine's default)
    off: float | None = None  # a value that stands for None (the knob off: no CPU offload at 0 GiB)


def deploys(model: Model) -> bool:
    """The deployment's axes (pipeline parallel, CPU offload, data parallel) apply wherever tensor_parallel_size
    does, as kvviz.vllm.plan.check_knobs accepts them."""
    return "tensor_parallel_size" in model.reader.knobs_for(model)


# What the arguments of the explorer's public functions must be (kvviz.base.inputs.checked).
@functools.lru_cache(maxsize=1)
def _presets() -> frozenset[str]:
    """The shipped presets' names, listed once (a check runs at every explorer update)."""
    return frozenset(preset_names())


def _names_a_model(value) -> bool:
    if isinstance(value, (Model, dict)):  # a knob set names its model
        return isinstance(value, Model) or "model" in value
    return isinstance(value, (str, os.PathLike)) and (value in _presets() or os.path.exists(value))


MODEL_SOURCE = Arg(
    _names_a_model,
    "a preset name (kvviz.model_names()), an existing config.json path, a Model, or a knob set naming its model "
    "(default_knobs(model))",
)
EXPLORER_SOURCE = Arg(
    lambda v: isinstance(v, Plan) or _names_a_model(v), f"a kvviz.plan(...) result or {MODEL_SOURCE.what}"
)
PRESET_NAME = Arg(lambda v: isinstance(v, str) and v in _presets(), "a preset name (kvviz.model_names())")
KNOB_SET = Arg(
    lambda v: isinstance(v, dict) and "model" in v,
    "a knob set: a dict naming its model (kvviz.explorer.default_knobs(model))",
)
PLAN = instance(Plan, what="a kvviz Plan (kvviz.plan(...))")
CAPACITY = instance(Capacity, what="a kvviz Capacity (plan.capacity(budget))")
