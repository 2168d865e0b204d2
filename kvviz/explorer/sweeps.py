"""The explorer's knobs put to work without widgets: the model, options and budget one set of knobs
means, the plan and capacities it gives, and `compare_knobs` / `sweep` across values."""

from __future__ import annotations

from functools import lru_cache

from kvviz.api import make_plan
from kvviz.base.defaults import TENSOR_PARALLEL_SIZE
from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import bounded_items, short_repr
from kvviz.core import capacity
from kvviz.core.plan import Capacity, Plan
from kvviz.explorer.knobs import AUTO, KNOB_BY_NAME, KNOBS, NO_GPU, default_knobs, model_of
from kvviz.families import Model
from kvviz.options import Options


def kv_budget(knobs: dict):
    """The `kvviz.deploy.budget.KVBudget` of one rank on the knobs' GPU, or None without one."""
    if knobs.get("gpu", NO_GPU) == NO_GPU:
        return None
    from kvviz.deploy.budget import kv_budget as deploy_budget

    return deploy_budget(
        model_for(knobs),
        gpu=knobs["gpu"],
        gpu_memory_utilization=knobs["gpu_memory_utilization"],
        tensor_parallel_size=knobs.get("tensor_parallel_size") or TENSOR_PARALLEL_SIZE,
    )


def budget_bytes(knobs: dict) -> int:
    """The budget in bytes: from the GPU when one is chosen (kvviz.deploy.budget), else budget_gib; a
    budget of 0 GiB or less, or one under a byte, is an error naming budget_gib (never clamped)."""
    b = kv_budget(knobs)
    if b is not None:
        return b.available_bytes
    value = capacity.budget_bytes(gib=knobs["budget_gib"])
    require(value > 0, f"budget_gib={knobs['budget_gib']!r}: is less than one byte")
    return value


def model_for(knobs: dict) -> Model:
    """The model the knobs describe: the preset with its layer mix edited."""
    m = model_of(knobs)
    family = m.reader
    if "c4" in knobs:
        m = family.with_layer_mix(m, c4=knobs["c4"], c128=knobs["c128"], swa=knobs["swa"])
    if "full_layers" in knobs:
        m = family.with_full_layers(m, knobs["full_layers"])
    return m


def options_for(knobs: dict) -> Options:
    """Options from the knobs that are Options fields ('auto' = None, the engine's choice)."""
    values = {}
    for name, value in knobs.items():
        knob = KNOB_BY_NAME[name]
        if knob.option is None:
            continue
        off = (knob.auto and value == AUTO) or (knob.off is not None and value == knob.off)
        values[knob.option] = None if off else value
    return Options(**values)


@lru_cache(maxsize=64)
def _plan(model: Model, planner: str, options: Options) -> Plan:
    return make_plan(model, planner, options)


def plan_knobs(knobs: dict, planner: str | None = None) -> Plan:
    """The plan of the knobs' planner (or `planner`). Raises KvvizError on an impossible combination."""
    return _plan(model_for(knobs), planner or knobs["planner"], options_for(knobs))


def _planners(knobs: dict) -> tuple[str, ...]:
    """The family's planners, or only vllm with pipeline stages (kvviz plans stages with the vllm planner only)."""
    planners = model_of(knobs).reader.planners
    return ("vllm",) if (knobs.get("pipeline_parallel_size") or 1) > 1 and "vllm" in planners else planners


def baseline_planner(knobs: dict) -> str:
    """The planner the explorer's change line compares with: vLLM before #48993 where the family
    has it (bucketed) and it plans these knobs, else vLLM itself."""
    return "bucketed" if "bucketed" in _planners(knobs) else "vllm"


def capacities(knobs: dict) -> tuple[Capacity, ...]:
    """Every planner's capacity at the knobs' budget and max_model_len, in the family's order (vllm only with
    pipeline stages)."""
    budget = budget_bytes(knobs)
    return tuple(plan_knobs(knobs, p).capacity(budget) for p in _planners(knobs))


def layout_key(knobs: dict) -> tuple:
    """The knobs that decide the layout (all but the budget)."""
    return tuple(
        (k, v)
        for k, v in knobs.items()
        if k not in ("budget_gib", "gpu", "gpu_memory_utilization", "data_parallel_size")
    )


def describe_knobs(knobs: dict) -> str:
    """One line naming a configuration, e.g. for the caption of the map still drawn: the model,
    its layer mix, each knob, and what an 'auto' value resolves to (when the knobs plan)."""
    m = model_of(knobs)
    parts = [m.name]
    try:
        plan = plan_knobs(knobs)
        mixed = model_for(knobs)
    except KvvizError:
        plan = mixed = None
    if mixed is not None and "full_layers" in knobs:
        counts = mixed.reader.kind_counts(mixed)
        parts.append(" / ".join(f"{n} {k}" for k, n in counts.items()) + " layers")
    resolved = {}
    if plan is not None:
        resolved = {"kv_dtype": m.dtype, "mamba_ssm_dtype": getattr(m.reader, "resolved_ssm_dtype", lambda mm: None)(m)}
    for name, value in knobs.items():
        if name in ("model", "budget_gib", "full_layers", "gpu", "gpu_memory_utilization"):
            continue
        if value == AUTO and resolved.get(name) is not None:
            value = f"{resolved[name]} (auto)"
        parts.append(f"{KNOB_BY_NAME[name].label} {value}")
    if plan is not None and plan.tokens_per_block is not None:
        parts.append(f"{plan.tokens_per_block}-token blocks")
    return ", ".join(parts)


def compare_knobs(variants, **base):
    """One row per variant (a dict of knob changes on top of `default_knobs(**base)`): the knobs
    the variants change, tokens and bytes per block, binding group, waste %, blocks at the budget,
    blocks one request of max_model_len tokens holds, the requests the budget serves at once and
    their change against the first possible row. An impossible variant gets its one-line message
    in `note` instead of numbers; a knob that does not apply to a row's model raises KvvizError.
    Returns a pandas DataFrame."""
    variants = bounded_items(variants, field="variants")
    for v in variants:
        require(
            isinstance(v, dict),
            f"variants: {short_repr(v)}: each variant is a dict of knob changes, e.g. {{'block_size': 32}}",
        )
    import pandas as pd  # a table is asked for; pandas stays off the import of this module

    changed = list(dict.fromkeys(k for v in variants for k in v))
    rows, first = [], None
    for changes in variants:
        knobs = default_knobs(**{**base, **changes})  # a knob unknown or not the model's raises: a mistake
        row = {k: knobs.get(k) for k in changed}
        try:
            plan = plan_knobs(knobs)
            cap = plan.capacity(budget_bytes(knobs))
        except KvvizError as e:
            rows.append(row | {"note": str(e)})
            continue
        first = first or cap.max_concurrency
        rows.append(
            row
            | {
                "tokens per block": cap.tokens_per_block,
                "bytes per block": cap.bytes_per_block,
                "binding group": plan.pools[0].binding_label if len(plan.pools) == 1 else "none (separate pools)",
                "waste %": round(cap.waste.waste_pct, 2),
                "blocks": cap.num_blocks,
                "blocks per request": cap.blocks_per_request,
                "requests": round(cap.max_concurrency, 2),
                "requests vs first %": round(100 * (cap.max_concurrency - first) / first, 1),
                "note": "",
            }
        )
    counts = ["tokens per block", "bytes per block", "blocks", "blocks per request"]
    columns = (
        changed + counts[:2] + ["binding group", "waste %"] + counts[2:] + ["requests", "requests vs first %", "note"]
    )
    return pd.DataFrame.from_records(rows, columns=columns).astype({c: "Int64" for c in counts})


def sweep(knob: str, values, **kwargs):
    """`compare_knobs` over one knob's values, e.g. `sweep("block_size", [128, 256, 512])`."""
    require(isinstance(knob, str) and knob in KNOBS, f"{short_repr(knob)}: not a knob; knobs are {', '.join(KNOBS)}")
    return compare_knobs([{knob: v} for v in bounded_items(values, field="values")], **kwargs)


# Options fields -> the explorer knob that sets them (the others have the same name, or no control).
_OPTION_KNOBS = {"max_model_len": "context"}


def explorer_source(model, knob_values: dict) -> tuple[object, dict]:
    """(model, knob values) the explorer opens with: a `kvviz.plan(...)` result gives its model (kvviz.core.accept:
    a Plan carries it), its planner and every option it was planned with; knobs given explicitly win. An option
    the explorer has no control for is refused in one line, never dropped. Anything else is returned as given."""
    if not isinstance(model, Plan):
        return model, knob_values
    require(model.source is not None, "model: this plan carries no model; make it with kvviz.plan(...)")
    values = {"planner": model.planner}
    options = model.options if model.options is not None else Options()
    for name in options.given():
        knob = _OPTION_KNOBS.get(name, name)
        require(knob in KNOB_BY_NAME, f"model: the plan's {name} has no explorer control; plan without it")
        values[knob] = getattr(options, name)
    return model.source, {**values, **knob_values}
