"""The library's front door: load any model, plan it, compare planners (docs/model-core.md).

import kvviz
model = kvviz.load("llama-3.1-8b")            # a preset, a config.json or a folder
plan = kvviz.plan(model, tensor_parallel_size=2, kv_dtype="fp8")
print(plan)                                    # the text byte map
print(plan.capacity(40 * 2**30).line)          # vLLM's own capacity line
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import MAX_BUDGET_BYTES, bounded_int, duck, finite_number, short_repr
from kvviz.core.budgets import DEPLOYMENT_ARGS
from kvviz.core.plan import Capacity, Plan
from kvviz.core.sidebyside import Side, SideBySide
from kvviz.families import Model, load
from kvviz.options import Options
from kvviz.vllm.plan import plan_model

__all__ = ["load", "plan", "make_plan", "compare", "side_by_side", "budget_record", "options_from", "gpu_budget"]


def model_of(model) -> Model:
    """The `Model` a front-door argument names: a Model as it is, a preset name or config path through
    `kvviz.load`; anything else is one KvvizError naming `model`."""
    if isinstance(model, Model):
        return model
    if isinstance(model, (str, Path)):
        try:
            return load(model)
        except KvvizError as e:  # load names its own argument; here it is `model`
            raise KvvizError(re.sub(r"^name_or_path=", "model=", str(e))) from None
    hint = {
        "Plan": ": it is already a plan; pass kvviz.plan's model argument a model",
        "Layout": ": it is one pool of a plan; pass kvviz.plan a model",
    }.get(type(model).__name__, "")
    raise KvvizError(
        f"model={short_repr(model)}{hint}; give kvviz.load(...)'s result, a preset name "
        f"(kvviz.model_names()) or a config path"
    )


def _planner(model: Model, planner) -> str | None:
    require(
        planner is None or isinstance(planner, str),
        f"planner={short_repr(planner)}: give a planner's name: {', '.join(model.reader.planners)} (None: vllm)",
    )
    return planner


def options_from(knobs: dict) -> Options:
    """Options from keyword knobs; an unknown knob name is one line naming the knobs."""
    require(
        isinstance(knobs, dict), f"knobs={short_repr(knobs)}: give a dict of Options fields, e.g. {{'kv_dtype': 'fp8'}}"
    )
    fields = Options.__dataclass_fields__
    for name in knobs:
        if name not in fields:
            raise KvvizError(f"{name}: not a knob; knobs are {', '.join(fields)}")
    return Options(**knobs)


def make_plan(model, planner: str | None = None, options: Options = Options()) -> Plan:
    """The one way a Plan is made, in every room (`kvviz.plan`, the CLI, the explorer, kvviz.deploy, the replay's
    CLI): `model` (a `Model`, preset name or config path) laid out by `planner` (None: the family's default,
    vLLM 0.33's own) with `options`, by kvviz.vllm.plan.plan_model, and given the budget rule that sizes a GPU
    (`gpu_budget`), so that every Plan answers `capacity(gpu=...)` from the config its model was read from."""
    m = model_of(model)
    require(
        isinstance(options, Options),
        f"options={short_repr(options)}: give a kvviz.Options record (kvviz.plan takes the knobs as keywords)",
    )
    return dataclasses.replace(plan_model(m, _planner(m, planner), options), budget_rule=gpu_budget)


def plan(model, planner: str | None = None, **knobs) -> Plan:
    """`model` (a `Model`, preset name or config path) laid out by `planner` ('vllm' by default:
    what vLLM 0.33 does; 'overlay', 'bucketed', 'packed', 'separate' where the model's family has
    them) with `knobs` (`kvviz.options.Options` fields). A knob that does not apply is refused."""
    return make_plan(model, planner, options_from(knobs))


def gpu_budget(plan: Plan, **deployment):
    """`Plan.capacity(gpu=...)`'s budget rule: kvviz.deploy.kv_budget of the plan's model at the plan's TP
    (vLLM 0.33 Worker.determine_available_memory, term by term; kvviz.deploy.budget)."""
    from kvviz.deploy.budget import kv_budget

    return kv_budget(plan, **deployment)


def compare(model, *, budget_bytes=None, budget_gib=None, gpu=None, **knobs) -> tuple[tuple[str, Capacity], ...]:
    """(label, capacity at one budget) for each layout the model's family compares: every planner side by
    side, or DeepSeek V4's vLLM #48993 before/after. `model`: a model, preset name or path, or a
    `kvviz.plan(...)` result (its model and options; `knobs` given here win). The budget is given as
    `Plan.capacity` takes it (kvviz.core.budgets): `budget_bytes=`, `budget_gib=`, or `gpu=` with vLLM's
    deployment arguments (`gpu_memory_utilization=`, `kv_cache_memory_bytes=`, ...)."""
    if isinstance(model, Plan):
        require(model.source is not None, "model: this plan carries no model; make it with kvviz.plan(...)")
        given = model.options.given() if model.options is not None else ()
        knobs = {**{k: getattr(model.options, k) for k in given}, **knobs}
        model = model.source
    m = model_of(model)
    budget = {k: knobs.pop(k) for k in tuple(knobs) if k in DEPLOYMENT_ARGS + ("kv_cache_memory_bytes",)}
    options = options_from(knobs)
    plans = [(label, make_plan(m, planner, opts)) for label, planner, opts in m.reader.comparisons(m, options)]
    return tuple((label, p.capacity(budget_bytes, budget_gib=budget_gib, gpu=gpu, **budget)) for label, p in plans)


# The rules a budget was had by, as a review records them (vLLM 0.33's names).
GIVEN_RULE = "given bytes (vLLM's --kv-cache-memory-bytes: the KV cache is exactly that)"
GPU_RULE = "vLLM 0.33 Worker.determine_available_memory: ceil(total x utilization) - weights - activation"


def budget_record(budget_bytes: int | tuple[int, ...], kv_budget=None, *, budget_gib=None) -> dict:
    """How a side's budget was had, for a review: the rule, its inputs (what a user chose: the bytes or GiB given,
    or the GPU, gpu_memory_utilization, where the weights came from and the activation allowance), the bytes, and
    on a GPU the budget's terms (`kvviz.deploy.KVBudget.to_json`). With pipeline stages sized from a GPU the bytes
    are one a stage (`KVBudget.budget`), recorded as a list."""
    for b in budget_bytes if isinstance(budget_bytes, tuple) else (budget_bytes,):
        bounded_int(b, field="budget_bytes", low=1, high=MAX_BUDGET_BYTES)
    budget_bytes = list(budget_bytes) if isinstance(budget_bytes, tuple) else budget_bytes
    if budget_gib is not None:
        finite_number(budget_gib, field="budget_gib")
    if kv_budget is not None:
        duck("exact_pool", "term", "to_json", what="a kvviz.deploy.kv_budget(...) result").check(
            kv_budget, field="kv_budget"
        )
    if kv_budget is None:
        inputs = {"budget_gib": budget_gib} if budget_gib is not None else {"budget_bytes": budget_bytes}
        return {"rule": GIVEN_RULE, "inputs": inputs, "bytes": budget_bytes}
    if kv_budget.exact_pool:
        inputs = {"gpu": kv_budget.gpu, "kv_cache_memory_bytes": kv_budget.available_bytes}
        return {"rule": GIVEN_RULE, "inputs": inputs, "bytes": budget_bytes, "kv_budget": kv_budget.to_json()}
    inputs = {"gpu": kv_budget.gpu, "gpu_memory_utilization": kv_budget.gpu_memory_utilization}
    weights, activation = kv_budget.term("weights"), kv_budget.term("activation")
    inputs["weights"] = weights.origin  # where the whole model's weights came from (their share follows TP / PP)
    inputs["activation_bytes"] = activation.value
    return {"rule": GPU_RULE, "inputs": inputs, "bytes": budget_bytes, "kv_budget": kv_budget.to_json()}


def side_by_side(a: Plan, b: Plan, *, budget_bytes=None, budget_gib=None, gpu=None, **deployment) -> SideBySide:
    """Two configurations for a review (bf16 vs fp8, TP 2 vs TP 4, one model vs another): `a` and `b` are
    `kvviz.plan(...)` results, each counted at the budget given as `Plan.capacity` takes it (on a GPU each side's
    own: its model's weights at its TP). The result says what differs and prints as text (`.text()`), Markdown
    (`.markdown()`) or JSON (`.to_json()`); `kvviz.views.side_by_side` draws it."""
    sides = []
    for label, p in (("A", a), ("B", b)):
        require(isinstance(p, Plan), f"{label.lower()}={short_repr(p)}: give a kvviz.plan(...) result")
        if gpu is not None or deployment.get("gpu_memory_gib") is not None:
            kv = gpu_budget(p, gpu=gpu, **deployment)
            sides.append(Side(label, p, p.capacity(kv), budget_record(kv.budget, kv)))
        else:
            cap = p.capacity(budget_bytes, budget_gib=budget_gib, **deployment)
            sides.append(Side(label, p, cap, budget_record(cap.budget_bytes, budget_gib=budget_gib)))
    return SideBySide(*sides)
