"""One budget vocabulary for `Plan.capacity` (issue 29): bytes, `budget_gib=`, or a GPU.

* `budget_bytes` (positional), or vLLM's name for it, `kv_cache_memory_bytes=` (--kv-cache-memory-bytes:
  the KV cache is exactly that many bytes);
* `budget_gib=` (1 GiB = 2^30 B, truncated as vLLM's int() does; `kvviz.core.capacity.budget_bytes`);
* a GPU: `gpu=` (a kvviz.deploy.GPUS name) or `gpu_memory_gib=`, with vLLM's `gpu_memory_utilization=` and
  the weights (`weights_bytes=`, `checkpoint_dir=`, `raw_config=`) and `activation_bytes=`: the plan's
  `budget_rule` (kvviz.deploy.budget.kv_budget, set by kvviz.plan) sizes one rank at the plan's own TP, so
  TP is given once; a `tensor_parallel_size=` that differs from the plan's is refused, never used.

A `KVBudget` (kvviz.deploy) passed as `budget_bytes` is its `budget` when its TP is the plan's: its available bytes,
or with pipeline stages one a stage (each worker's own). `budget_bytes` may also be a tuple of one budget a stage
for a plan with pipeline stages (kvviz.core.stages.stage_budgets).
Imports no plan (kvviz.core.plan imports this module on first use).
"""

from __future__ import annotations

from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import short_repr
from kvviz.core.capacity import budget_bytes as bytes_of

__all__ = ["DEPLOYMENT_ARGS", "plan_budget"]

# kvviz.deploy.kv_budget's arguments besides the model (vLLM's names where vLLM has one).
DEPLOYMENT_ARGS = (
    "gpu_memory_gib",
    "gpu_memory_utilization",
    "weights_bytes",
    "checkpoint_dir",
    "raw_config",
    "activation_bytes",
)


def _check_tp(plan, tp, what: str) -> None:
    require(
        tp == plan.tensor_parallel_size,
        f"{what}={tp!r}: the plan was made with tensor_parallel_size={plan.tensor_parallel_size} (one rank's "
        f"pages and weights follow it); plan again with kvviz.plan(..., tensor_parallel_size={tp})",
    )


def plan_budget(plan, budget_bytes=None, *, budget_gib=None, gpu=None, **deployment) -> int | tuple[int, ...]:
    """The KV budget in bytes of one rank of `plan` from exactly one way of giving it (module docstring);
    anything else is one KvvizError line naming the argument."""
    unknown = [k for k in deployment if k not in DEPLOYMENT_ARGS + ("kv_cache_memory_bytes", "tensor_parallel_size")]
    if unknown:
        raise KvvizError(
            f"{unknown[0]}: not a budget argument; give budget_bytes, budget_gib=, kv_cache_memory_bytes= or "
            f"gpu= (with {', '.join(DEPLOYMENT_ARGS)})"
        )
    tp = deployment.pop("tensor_parallel_size", None)
    if tp is not None:
        _check_tp(plan, tp, "tensor_parallel_size")
    exact = deployment.pop("kv_cache_memory_bytes", None)
    on_gpu = gpu is not None or deployment.get("gpu_memory_gib") is not None
    given = [
        name
        for name, value in (
            ("budget_bytes", budget_bytes),
            ("budget_gib", budget_gib),
            ("kv_cache_memory_bytes", exact),
        )
        if value is not None
    ]
    if on_gpu:
        require(
            not (set(given) - {"kv_cache_memory_bytes"}),
            f"{given[0] if given else 'budget'}: give one budget: bytes, budget_gib=, or a GPU (gpu=), not both",
        )
        require(
            plan.budget_rule is not None and plan.source is not None,
            "gpu: this plan has no GPU budget rule (made past the door, by the planner itself); make it with "
            "kvviz.plan(...) or kvviz.api.make_plan(...)",
        )
        budget = plan.budget_rule(plan, gpu=gpu, kv_cache_memory_bytes=exact, **deployment)
        return budget.budget
    extra = [k for k, v in deployment.items() if v is not None]
    require(not extra, f"{extra[0] if extra else ''}: applies only with a GPU (gpu= or gpu_memory_gib=)")
    if not given:
        raise KvvizError(
            "budget: give one budget: budget_bytes, budget_gib=, kv_cache_memory_bytes= (vLLM's name) or gpu="
        )
    require(len(given) == 1, f"{given[-1]}: give one budget, not both {given[0]} and {given[-1]}")
    if budget_gib is not None:
        return bytes_of(gib=budget_gib)
    value = budget_bytes if exact is None else exact
    available = getattr(value, "available_bytes", None)
    if available is not None and hasattr(value, "tensor_parallel_size"):  # a kvviz.deploy KVBudget
        _check_tp(plan, value.tensor_parallel_size, "budget (a KVBudget of tensor_parallel_size)")
        stages = len(plan.stages) or 1
        require(
            value.exact_pool or value.pipeline_parallel_size == stages,
            f"budget: a KVBudget of pipeline_parallel_size={value.pipeline_parallel_size} for a plan of {stages} "
            f"stage{'s' if stages > 1 else ''}; size it from the plan: kvviz.deploy.kv_budget(plan, gpu=...)",
        )
        return value.budget
    if isinstance(value, tuple) and plan.stages:  # one a stage: Plan._capacity checks them
        return value
    require(
        type(value) is int and value > 0,
        f"{given[0]}={short_repr(value)}: must be a positive integer"
        + (" (one a stage: the plan has no pipeline stages)" if isinstance(value, tuple) else ""),
    )
    return value
