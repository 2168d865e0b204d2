"""What fits a budget: `auto_fit` (the largest max_model_len and the requests at once vLLM 0.33
would start with) and `largest_context`."""

from __future__ import annotations

import dataclasses

from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import instance, short_repr
from kvviz.base.text import format_gib
from kvviz.deploy.gpus import GPU, GPUS, gpu_spec  # noqa: F401 (GPU, gpu_spec: kvviz.deploy.budget's names too)
from kvviz.options import Options


@dataclasses.dataclass(frozen=True)
class AutoFit:
    """What `--max-model-len -1` picks (kv_cache_planning._auto_fit_max_model_len)."""

    max_model_len: int  # the fitted length (0: not even one token fits)
    derived_max_model_len: int  # the model's own (the search's upper end)
    budget_bytes: int
    bytes_per_block: int
    check_bytes: int  # budget - one block (the null block)
    request_bytes: int  # _max_memory_usage_bytes_from_groups at the fitted length

    @property
    def reduced(self) -> bool:
        """Whether the fitted max_model_len is below the model's own."""
        return self.max_model_len < self.derived_max_model_len

    @property
    def log_line(self) -> str:
        """vLLM 0.33's auto-fit log line (kv_cache_planning._auto_fit_max_model_len): the full context fits, or it
        was reduced to the fitted length, with the memory it was checked against."""
        mem = f"{format_gib(self.check_bytes)} GiB GPU"
        if not self.reduced:
            return (
                f"Auto-fit max_model_len: full model context length {self.derived_max_model_len} fits in "
                f"available KV cache memory ({mem})"
            )
        return (
            f"Auto-fit max_model_len: reduced from {self.derived_max_model_len} to {self.max_model_len} to fit "
            f"in available KV cache memory ({mem})"
        )


def auto_fit(
    model, options: Options = Options(), budget_bytes: int | tuple[int, ...] = 0, *, planner: str | None = None
) -> AutoFit:
    """vLLM 0.33's `_estimate_max_model_len_from_groups`: the largest L in [1, the model's derived
    max_model_len] whose request memory (bytes per block x the blocks every group holds at L,
    `_max_memory_usage_bytes_from_groups`) fits the budget less one block (the null block,
    get_kv_cache_configs' check_memory). One plan gives the layout (a page does not depend on the
    request length: a Mamba 'none'-mode state's block size is max_model_len, its bytes are not);
    each L changes only the Scheduling. `options.max_model_len` is ignored (-1 replaces it). With pipeline
    stages each worker fits its own (`budget_bytes` one for every GPU, or one a stage from a GPU) and the
    smallest is kept (`_auto_fit_max_model_len`)."""
    from kvviz.api import make_plan, model_of
    from kvviz.core.capacity import group_blocks_for_request

    model = model_of(model)
    instance(Options, what="a kvviz.Options record").check(options, field="options")
    require(
        (type(budget_bytes) is int and budget_bytes > 0) or isinstance(budget_bytes, tuple),
        f"budget_bytes={short_repr(budget_bytes)}: must be a positive integer (or one a pipeline stage)",
    )
    plan = make_plan(model, planner, dataclasses.replace(options, max_model_len=None))
    derived = model.max_model_len
    if plan.stages:
        return _auto_fit_stages(plan, budget_bytes, derived)
    require(
        not isinstance(budget_bytes, tuple),
        f"budget_bytes={short_repr(budget_bytes)}: one a stage, but the plan has no pipeline stages",
    )
    stride = plan.block_stride

    def need(length: int) -> int:
        s = dataclasses.replace(plan.scheduling, max_model_len=length)
        return sum(sum(group_blocks_for_request(p, s)) * p.block_stride for p in plan.pools)

    check = budget_bytes - stride
    if check <= 0 or need(1) > check:
        return AutoFit(0, derived, budget_bytes, stride, check, 0)
    left, right, result = 1, derived, 1
    while left <= right:
        mid = (left + right) // 2
        if need(mid) <= check:
            result, left = mid, mid + 1
        else:
            right = mid - 1
    return AutoFit(result, derived, budget_bytes, stride, check, need(result))


def _auto_fit_stages(plan, budget_bytes, derived: int) -> AutoFit:
    """`_auto_fit_max_model_len` over pipeline stages: each worker's own largest length from its projected groups
    and its own check memory (its budget less one of its blocks), the smallest kept; the log names the limiting
    worker's memory (the first stage's when none limits). `budget_bytes`: one for every GPU or one a stage."""
    from kvviz.core.stages import stage_budgets
    from kvviz.vllm.pipeline import stage_max_model_len, stage_request_bytes

    budgets = stage_budgets(plan.stages, budget_bytes)
    fitted, limit = derived, plan.stages[0]
    for s in plan.stages:
        length = stage_max_model_len(plan, s.bytes_per_block, budgets[s.index] - s.bytes_per_block, derived)
        if length < fitted:
            fitted, limit = length, s
    stride, budget = limit.bytes_per_block, budgets[limit.index]
    request = stage_request_bytes(plan, stride, fitted) if fitted > 0 else 0
    return AutoFit(fitted, derived, budget, stride, budget - stride, request)


def largest_context(model, options: Options = Options(), budget_bytes: int = 0, *, planner: str | None = None) -> int:
    """The max_model_len `--max-model-len -1` picks for `budget_bytes` of KV memory (see `auto_fit`);
    refused, like vLLM's "Cannot auto-fit max_model_len", when not even one token fits."""
    fit = auto_fit(model, options, budget_bytes, planner=planner)
    if fit.max_model_len <= 0:
        raise KvvizError(
            f"budget_bytes={budget_bytes:,}: Cannot auto-fit max_model_len: not enough GPU memory "
            f"available to serve even a single token (one block is {fit.bytes_per_block:,} B, plus the "
            f"null block)"
        )
    return fit.max_model_len
