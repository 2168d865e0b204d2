"""What the explorer shows for one state of its knobs, without widgets: the plan to display
(`plan_for_display`), its capacity at the chosen budget (`result_at`), the engines' side-by-side
lines (`engines_html`), the deployment's lines (`deploy_html`: stages, offload, DP, fp8), and the knobs kept
across a model switch."""

from __future__ import annotations

import dataclasses
import html

from kvviz.base.errors import KvvizError
from kvviz.base.inputs import checked, instance
from kvviz.core import capacity
from kvviz.core.plan import Plan
from kvviz.engines import compare_rows
from kvviz.explorer.knob_spec import KNOB_SET, PLAN
from kvviz.explorer.sweeps import baseline_planner, budget_bytes, capacities, describe_knobs, plan_knobs
from kvviz.explorer.tables import PRE_STYLE, group_table_html
from kvviz.views.blockmap_data import block_map_data
from kvviz.views.livemap import separate_pools_map_data

# Layouts (and their map data) kept per Explorer, so that toggling back or moving the budget is instant.
CACHE_SIZE = 32


# Control name -> CSS class; outputs too. The browser test finds widgets by these.
CSS_CLASSES = {
    "widget": "kvviz-explorer",
    "model": "kvviz-model",
    "head_dim": "kvviz-head-dim",
    "rope_dim": "kvviz-rope-dim",
    "index_head_dim": "kvviz-index-head-dim",
    "main_format": "kvviz-main-format",
    "indexer_format": "kvviz-indexer",
    "backend": "kvviz-backend",
    "block_size": "kvviz-block-size",
    "mtp": "kvviz-mtp",
    "c4": "kvviz-c4",
    "c128": "kvviz-c128",
    "swa": "kvviz-swa",
    "planner": "kvviz-planner",
    "kv_dtype": "kvviz-kv-dtype",
    "sliding_window": "kvviz-sliding-window",
    "full_layers": "kvviz-full-layers",
    "mamba_ssm_dtype": "kvviz-mamba-ssm-dtype",
    "prefix_caching": "kvviz-prefix-caching",
    "tensor_parallel_size": "kvviz-tensor-parallel-size",
    "decode_context_parallel_size": "kvviz-decode-context-parallel-size",
    "capacity_label": "kvviz-capacity",
    "context": "kvviz-context",
    "budget_gib": "kvviz-budget",
    "error_label": "kvviz-error",
    "answer": "kvviz-answer",
    "answer_head": "kvviz-answer-head",
    "fits_label": "kvviz-fits",
    "stride_label": "kvviz-stride",
    "blocks_label": "kvviz-blocks",
    "change_label": "kvviz-change",
    "summary": "kvviz-summary",
    "block_map": "kvviz-block-map",
    "map_caption": "kvviz-map-caption",
    "table": "kvviz-table",
    "derivation": "kvviz-derivation",
}


@dataclasses.dataclass(frozen=True)
class Planned:
    """One cached plan: the chosen planner's `Plan`, the baseline's, the map's data and the HTML of
    the group (or pool) table and the derivation (they depend on the plan only)."""

    plan: Plan
    baseline: Plan
    map_data: dict  # what the live map draws
    table_html: str
    derivation_html: str

    @property
    def layout(self):
        """The plan's one pool, or the Plan itself when it has separate pools."""
        return self.plan.pools[0] if len(self.plan.pools) == 1 else self.plan


@checked(plan=PLAN)
def stride_words(plan: Plan) -> str:
    """The plan's block stride in words, e.g. 'block stride 1,315,008 B, 256 tokens per block'."""
    tokens = "" if plan.tokens_per_block is None else f", {plan.tokens_per_block} tokens per block"
    pools = f" ({len(plan.pools)} separate pools)" if len(plan.pools) > 1 else ""
    return f"block stride {plan.block_stride:,} B{tokens}{pools}"


@checked(knobs=KNOB_SET)
def plan_for_display(knobs: dict) -> Planned:
    """Plan the knobs and prepare everything the explorer shows of the plan. Raises KvvizError.

    Separate pools share no block: the map draws one lane per pool, each its own pool's block on
    one byte scale (`livemap.separate_pools_map_data`), and the caption says so."""
    plan = plan_knobs(knobs)
    base = baseline_planner(knobs)
    baseline = plan if base == plan.planner else plan_knobs(knobs, base)
    what = describe_knobs(knobs)
    if len(plan.pools) > 1:
        strides = ", ".join(f"{p.groups[0].name} {p.block_stride:,} B" for p in plan.pools)
        caption = (
            f"separate pools of {what}: one lane per pool, each lane one block of its own pool with its own "
            f"stride ({strides}), drawn from byte 0 on one byte scale; no lane binds, and a lane is blank past "
            f"its pool's block; one block of every pool: {stride_words(plan)}"
        )
        data = separate_pools_map_data(plan, caption=caption)
    else:
        data = block_map_data(plan.layout, caption=f"block map of {what}: {stride_words(plan)}").to_dict()
    derivation = f'<pre style="{PRE_STYLE}">{html.escape(plan.explain())}</pre>'
    return Planned(plan, baseline, data, group_table_html(plan), derivation)


@dataclasses.dataclass(frozen=True)
class Result:
    """Everything one update shows, computed before any widget is touched."""

    plan: Plan
    capacity: object  # core.plan.Capacity of the chosen planner at the budget
    capacities: tuple  # every planner's
    comparison: capacity.Comparison | None  # against the baseline planner (one pool each)

    @property
    def layout(self):
        """The plan's one pool, or the Plan itself when it has separate pools."""
        return self.plan.pools[0] if len(self.plan.pools) == 1 else self.plan

    @property
    def num_blocks(self) -> int:
        """Blocks the chosen planner's pool holds at the budget."""
        return self.capacity.num_blocks

    @property
    def summary(self):
        """The chosen planner's Capacity (the same record as `capacity`)."""
        return self.capacity


@checked(planned=instance(Planned, what="a Planned (plan_for_display(knobs))"), knobs=KNOB_SET)
def result_at(planned: Planned, knobs: dict) -> Result:
    """What the explorer shows of a planned configuration at the knobs' budget: every planner's Capacity and the
    comparison with the baseline planner (None unless both have one pool)."""
    budget = budget_bytes(knobs)
    caps = capacities(knobs)
    chosen = next(c for c in caps if c.planner == planned.plan.planner)
    one = len(planned.plan.pools) == 1 and len(planned.baseline.pools) == 1
    cmp = capacity.Comparison(before=planned.baseline.layout, after=planned.plan.layout, budget=budget) if one else None
    return Result(planned.plan, chosen, caps, cmp)


@checked(knobs=KNOB_SET)
def engines_html(knobs: dict) -> str:
    """One line per other engine at the budget the knobs give (kvviz.engines.compare_rows): its
    token capacity, requests at once and own log line, or why it has no plan."""
    from kvviz.explorer.sweeps import model_for, options_for

    try:
        rows = compare_rows(
            model_for(knobs), ("sglang", "trtllm"), options_for(knobs), kv_budget_bytes=budget_bytes(knobs)
        )
    except KvvizError as e:
        return f'<span style="color:#555">other engines: {html.escape(str(e))}</span>'
    lines = [
        f"{r.engine}: {r.plan.token_capacity:,} tokens, {r.plan.full_length_requests:,} requests of "
        f"{r.plan.max_model_len:,} tokens at once ({r.plan.log_line})"
        if r.plan
        else f"{r.engine}: {r.refusal}"
        for r in rows
    ]
    head = f"the same KV budget ({budget_bytes(knobs):,} B) in the other engines (docs/engines.md#one-budget-meaning):"
    return '<div style="color:#555;font-size:12px">' + "<br>".join(html.escape(t) for t in [head] + lines) + "</div>"


@checked(plan=PLAN, knobs=KNOB_SET)
def deploy_lines(plan: Plan, knobs: dict) -> list[str]:
    """The capacity lines past one GPU and one memory tier the knobs ask for (docs/deploy.md), as `kvviz plan`
    prints them: each pipeline stage's blocks (the binding one named), the CPU offload tier, the data-parallel
    replicas and their total, and what fp8 KV buys here (vllm planner); one stage of vLLM's planner: the start-up
    error vLLM 0.33 raises at a budget below one request (`startup_refusal`). A view kvviz or vLLM refuses is its
    line."""
    from kvviz.explorer.sweeps import model_for, options_for

    budget = budget_bytes(knobs)
    options = options_for(knobs)

    def stages() -> list[str]:
        from kvviz.vllm.pipeline import startup_refusal

        refusal = startup_refusal(plan, budget)
        parts = (
            f"{s['stage']}: layers {s['layers'][0]}-{s['layers'][1] - 1}, {s['bytes_per_block']:,} B a block, "
            f"{s['num_blocks_alone']:,} blocks alone{' (binds)' if s['binds'] else ''}"
            for s in plan.to_json(budget_bytes=budget)["stages"]
        )
        return ["stages: " + "; ".join(parts) + (f"; vLLM 0.33 refuses to start: {refusal}" if refusal else "")]

    def startup() -> list[str]:  # as `kvviz plan` prints it (cli/deploy_views.py): vLLM raises instead of logging
        from kvviz.vllm.pipeline import startup_refusal

        refusal = startup_refusal(plan, budget)
        return [] if refusal is None else [f"vLLM 0.33 refuses to start at this budget: {refusal}"]

    def offload() -> list[str]:
        from kvviz.vllm.offload import offload_for

        return [offload_for(plan, options).line()]

    def replicas() -> list[str]:
        from kvviz.deploy.parallel import data_parallel

        return data_parallel(plan, budget, knobs["data_parallel_size"]).lines()[::2]

    def fp8() -> list[str]:
        from kvviz.deploy.fp8 import fp8_gain

        return [fp8_gain(model_for(knobs), plan.max_model_len, budget, options).line]

    views = (
        (bool(plan.stages), stages),
        (not plan.stages and plan.planner == "vllm" and len(plan.pools) == 1, startup),
        (options.kv_offloading_size is not None, offload),
        ((knobs.get("data_parallel_size") or 1) > 1, replicas),
        (plan.planner == "vllm" and "kv_dtype" in knobs, fp8),
    )
    lines: list[str] = []
    for wanted, view in views:
        if not wanted:
            continue
        try:
            lines.extend(view())
        except KvvizError as e:
            lines.append(str(e))
    return lines


def deploy_html(plan: Plan, knobs: dict) -> str:
    """`deploy_lines` as the explorer shows them under the capacity line ("" when none applies)."""
    lines = deploy_lines(plan, knobs)
    if not lines:
        return ""
    return '<div style="font-size:12px">' + "<br>".join(html.escape(t) for t in lines) + "</div>"


def grey_caption(text: str) -> str:
    """`text` as the explorer's small grey caption (HTML-escaped)."""
    return f'<div style="font-size:12px;color:#555;line-height:1.35">{html.escape(text, quote=False)}</div>'


def pct(x: float) -> str:
    """A signed percentage with two decimals ('+12.50%')."""
    return f"{x:+.2f}%"


# The knobs a model switch keeps (where the new model takes the value): deployment choices that
# mean the same for every model. Every other knob takes the new model's default, and the notice
# names those that changed.
KEPT_ON_SWITCH = (
    "kv_dtype",
    "mamba_ssm_dtype",
    "prefix_caching",
    "tensor_parallel_size",
    "budget_gib",
    "gpu",
    "gpu_memory_utilization",
    "main_format",
    "indexer_format",
    "backend",
)


# Where the controls sit: three columns (model, deployment, layer mix and budget). A knob added to
# kvviz.explorer.knobs.KNOB_SPECS and not listed here gets a fourth column.
CONTROL_COLUMNS = (
    ("model", "head_dim", "rope_dim", "index_head_dim", "mtp", "sliding_window", "full_layers"),
    (
        "main_format",
        "indexer_format",
        "backend",
        "kv_dtype",
        "block_size",
        "mamba_ssm_dtype",
        "prefix_caching",
        "tensor_parallel_size",
        "decode_context_parallel_size",
        "planner",
    ),
    ("c4", "c128", "swa", "budget_gib", "gpu", "gpu_memory_utilization", "context"),
    ("pipeline_parallel_size", "data_parallel_size", "kv_offloading_size"),  # docs/deploy.md's axes
)
