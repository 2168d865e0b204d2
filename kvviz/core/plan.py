"""The one plan result: one or more pools, each a plain `Layout`, and what a budget buys.

A shared-pool plan (vLLM, and the #48993 planners) has one pool whose groups overlay each other;
separate pools (one per cache kind, as SGLang keeps them) have several, each with its own block
stride and its own blocks. `Plan.capacity(budget)` counts blocks, blocks per request and the
requests that fit, and writes vLLM's own capacity line (docs/model-core.md#the-plan).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

from kvviz.base.defaults import GIB, TENSOR_PARALLEL_SIZE
from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import short_repr
from kvviz.base.text import plural
from kvviz.core.capacity import group_blocks_for_request
from kvviz.core.kinds import CacheKind
from kvviz.core.layout import Layout, text_table
from kvviz.core.spec import Scheduling
from kvviz.core.stages import Stage, binding_stage, stage_budgets, stage_pool, stages_json
from kvviz.core.waste import GroupNeed, Waste, layout_waste
from kvviz.options import Options

__all__ = ["SEPARATE", "Waste", "layout_waste", "GroupNeed", "Capacity", "Plan", "capacity_line"]

SEPARATE = "separate"


def capacity_line(kv_tokens: int, max_model_len: int, concurrency: float) -> str:
    """The line vLLM 0.33 logs once the KV cache is sized (kv_cache_utils.update_kv_cache_capacity):
    'GPU KV cache size: {tokens:,} tokens, Maximum concurrency for {len:,} tokens per request: {c:.2f}x'."""
    return (
        f"GPU KV cache size: {kv_tokens:,} tokens, Maximum concurrency for {max_model_len:,} tokens per "
        f"request: {concurrency:.2f}x"
    )


@dataclasses.dataclass(frozen=True)
class Capacity:
    """A plan's numbers at one budget: blocks, what a request of max_model_len tokens holds, and
    the requests served at once (vLLM's `get_kv_cache_capacity`)."""

    model: str
    planner: str
    tokens_per_block: int | None
    bytes_per_block: int
    num_groups: int
    waste: Waste
    max_model_len: int
    budget_bytes: int
    groups: tuple[GroupNeed, ...]
    num_blocks: int  # shared pool: budget // bytes per block (the null block counted); separate: all pools'
    max_concurrency: float  # requests of max_model_len tokens at once (fractional, like vLLM's)

    @property
    def context(self) -> int:
        """The request length the capacity is counted for: max_model_len, under the name the explorer's knob has."""
        return self.max_model_len

    @property
    def blocks_per_request(self) -> int:
        """Blocks one request of max_model_len tokens holds, summed over the groups (vLLM 0.33
        get_max_concurrency_for_kv_cache_config's denominator)."""
        return sum(g.blocks_per_request for g in self.groups)

    @property
    def admission_bytes_per_request(self) -> int:
        """vLLM's `_max_memory_usage_bytes_from_groups`: bytes per block x the blocks every group
        holds (separate pools: each pool's blocks at its own block size)."""
        return sum(g.blocks_per_request * g.block_bytes for g in self.groups)

    @property
    def requests_fit(self) -> int:
        """Whole requests of max_model_len tokens the budget holds at once."""
        if self.planner == SEPARATE:
            fits = []
            for g in self.groups:
                assert g.num_blocks is not None  # a separate pool's GroupNeed carries its pool's blocks
                fits.append(g.num_blocks // g.blocks_per_request)
            return min(fits)
        return self.num_blocks // self.blocks_per_request

    @property
    def concurrency_text(self) -> str:
        """The concurrency as shown beside the whole requests: vLLM's own '{:.2f}x' (its capacity line), unless
        that rounds up to a whole request that does not fit (8.997 -> '9.00x' beside 8 requests): then truncated,
        with vLLM's rounding named ('8.99x; vLLM's line rounds to 9.00x')."""
        rounded = f"{self.max_concurrency:.2f}"
        if float(rounded) < self.requests_fit + 1:
            return f"{rounded}x"
        return f"{math.floor(self.max_concurrency * 100) / 100:.2f}x; vLLM's line rounds to {rounded}x"

    @property
    def kv_cache_tokens(self) -> int:
        """vLLM's "GPU KV cache size" in tokens: int(max concurrency x max_model_len)."""
        return int(self.max_concurrency * self.max_model_len)

    @property
    def kv_tokens_per_gib(self) -> float:
        """Tokens of max_model_len-long requests held per GiB of budget (concurrency x max_model_len / budget GiB)."""
        return self.max_concurrency * self.max_model_len / (self.budget_bytes / GIB)

    @property
    def line(self) -> str:
        """vLLM 0.33's own log line for this capacity (update_kv_cache_capacity): 'GPU KV cache size: ... tokens,
        Maximum concurrency for ... tokens per request: ...x'."""
        return capacity_line(self.kv_cache_tokens, self.max_model_len, self.max_concurrency)

    def to_json(self) -> dict:
        """The capacity as a JSON object: planner, block, waste, budget, blocks, per-request need, concurrency,
        tokens and the log line."""
        return {
            "model": self.model,
            "planner": self.planner,
            "tokens_per_block": self.tokens_per_block,
            "bytes_per_block": self.bytes_per_block,
            "num_groups": self.num_groups,
            "waste": self.waste.to_json(),
            "context": self.max_model_len,
            "max_model_len": self.max_model_len,
            "budget_bytes": self.budget_bytes,
            "num_blocks": self.num_blocks,
            "blocks_per_request": self.blocks_per_request,
            "admission_bytes_per_request": self.admission_bytes_per_request,
            "max_concurrency": round(self.max_concurrency, 4),
            "requests_fit": self.requests_fit,
            "kv_cache_tokens": self.kv_cache_tokens,
            "capacity_line": self.line,
            "kv_tokens_per_gib": round(self.kv_tokens_per_gib, 1),
            "groups": [g.to_json() for g in self.groups],
        }


@dataclasses.dataclass(frozen=True)
class Plan:
    """A model laid out by one planner: `pools` (one for a shared pool, several for separate
    pools, each a `Layout`), the scheduling its requests are counted with, and how it came about."""

    model: str
    planner: str
    pools: tuple[Layout, ...]
    scheduling: Scheduling
    derivation: tuple[str, ...] = ()
    family: str = ""
    describe: str = ""  # one line about the model (layers by kind, geometry) and what was planned (`setting`)
    stages: tuple[Stage, ...] = ()  # pipeline parallel: each stage's share (kvviz.vllm.pipeline); () = one stage
    setting: str = ""  # what was planned beyond the model: the KV dtype, TP and every knob not left at its default
    # Every knob that shaped the plan, resolved as vLLM resolves it ((name, value) pairs, kvviz.vllm.plan.plan_knobs):
    # what `to_json` records and what a side-by-side review compares.
    knobs: tuple[tuple[str, Any], ...] = ()
    # What it was planned from (kvviz.vllm.plan.plan_model): the kvviz.load Model and the Options, so a budget
    # on a GPU takes TP from the plan; `budget_rule(plan, **deployment)` gives a KV budget (kvviz.api.make_plan,
    # the one door every room makes plans through, sets it to kvviz.deploy.budget.kv_budget: the core imports no
    # deployment).
    source: Any = dataclasses.field(default=None, repr=False, compare=False)
    options: Options | None = dataclasses.field(default=None, repr=False, compare=False)
    budget_rule: Callable[..., Any] | None = dataclasses.field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        require(len(self.pools) > 0, "plan: has no pools")

    @property
    def separate(self) -> bool:
        """Whether the plan keeps one pool per cache kind (the `separate` planner)."""
        return self.planner == SEPARATE

    @property
    def layout(self) -> Layout:
        """The one pool of a shared-pool plan (a separate-pools plan has several: ask `pools`)."""
        if len(self.pools) != 1:
            raise KvvizError(
                f"plan {self.model!r}: {len(self.pools)} separate pools have no single layout; use plan.pools, or "
                f"give the plan itself (kvviz.block_map(plan), verify(plan), ...: every pool)"
            )
        return self.pools[0]

    @property
    def groups(self):
        """Every group of every pool, pool by pool."""
        return tuple(g for p in self.pools for g in p.groups)

    @property
    def block_stride(self) -> int:
        """Bytes of one block (separate pools: one block of every pool)."""
        return sum(p.block_stride for p in self.pools)

    @property
    def tokens_per_block(self) -> int | None:
        """Tokens per block of the first pool (None for a pool of states only)."""
        return self.pools[0].tokens_per_block

    @property
    def max_model_len(self) -> int:
        """The request length the plan's capacity counts (the scheduling's max_model_len)."""
        return self.scheduling.max_model_len

    def split_budget(self, budget: int) -> list[int]:
        """Separate pools: the bytes each pool gets, the budget in proportion to what one request
        needs from each pool (floor; docs/hybrid.md#separate-pools). One pool: the budget."""
        if len(self.pools) == 1:
            return [budget]
        needs = [sum(group_blocks_for_request(p, self.scheduling)) * p.block_stride for p in self.pools]
        total = sum(needs)
        require(total > 0, "separate pools: a request needs no bytes")
        return [budget * n // total for n in needs]

    @property
    def tensor_parallel_size(self) -> int:
        """The TP size the plan was made with (one rank is planned; 1 when not given)."""
        tp = None if self.options is None else self.options.tensor_parallel_size
        return TENSOR_PARALLEL_SIZE if tp is None else tp

    def capacity(self, budget_bytes=None, *, budget_gib=None, gpu=None, **deployment) -> Capacity:
        """Blocks, waste, vLLM's admission estimate and the requests one budget serves, the budget given one way:
        `budget_bytes` (or vLLM's name `kv_cache_memory_bytes=`), `budget_gib=`, or a GPU (`gpu="H200"` or
        `gpu_memory_gib=`, with vLLM's `gpu_memory_utilization=`, `weights_bytes=`, `checkpoint_dir=`,
        `activation_bytes=`: kvviz.deploy.kv_budget, with the plan's own model and TP). A `KVBudget` works as
        `budget_bytes` when its TP is the plan's. `plan_budget` (kvviz.core.budgets) says how each is read."""
        from kvviz.core.budgets import plan_budget

        return self._capacity(plan_budget(self, budget_bytes, budget_gib=budget_gib, gpu=gpu, **deployment))

    def _capacity(self, budget_bytes) -> Capacity:
        if isinstance(budget_bytes, tuple) and self.stages:  # one a stage (kvviz.core.stages.stage_budgets)
            budgets = stage_budgets(self.stages, budget_bytes)
            budget_bytes = budgets[binding_stage(self.stages, budgets).index]  # the capacity's: the binding stage's
            pool_budget = budgets
        else:
            pool_budget = budget_bytes
        require(
            isinstance(budget_bytes, int) and not isinstance(budget_bytes, bool) and budget_bytes > 0,
            f"budget_bytes={short_repr(budget_bytes)}: must be a positive integer"
            + (" (one a stage: the plan has no pipeline stages)" if isinstance(budget_bytes, tuple) else ""),
        )
        s = self.scheduling
        if len(self.pools) > 1 or self.separate:
            shares = self.split_budget(budget_bytes)
            per_req = [sum(group_blocks_for_request(p, s)) for p in self.pools]
            pool_blocks = [share // p.block_stride for share, p in zip(shares, self.pools)]
            groups = tuple(
                GroupNeed(p.groups[0].name, len(p.groups[0].layers), n, p.block_stride, b)
                for p, n, b in zip(self.pools, per_req, pool_blocks)
            )
            each = [layout_waste(p) for p in self.pools]
            waste = Waste(
                self.block_stride, sum(w.real_bytes for w in each), 0, sum(w.padded_state_bytes for w in each), 0
            )
            concurrency = min(b / n for b, n in zip(pool_blocks, per_req))
            return Capacity(
                self.model,
                self.planner,
                self.tokens_per_block,
                self.block_stride,
                len(self.pools),
                waste,
                s.max_model_len,
                budget_bytes,
                groups,
                sum(pool_blocks),
                concurrency,
            )
        layout = self.layout
        per_req = group_blocks_for_request(layout, s)
        # One stage: the layout's stride; pipeline stages: the binding stage's (get_kv_cache_configs' minimum).
        stride, blocks = stage_pool(self.stages, pool_budget) if self.stages else (layout.block_stride, None)
        blocks = layout.num_blocks(budget_bytes) if blocks is None else blocks
        groups = tuple(GroupNeed(g.name, len(g.layers), n, stride) for g, n in zip(layout.groups, per_req))
        return Capacity(
            self.model,
            self.planner,
            self.tokens_per_block,
            stride,
            len(layout.groups),
            layout_waste(layout),
            s.max_model_len,
            budget_bytes,
            groups,
            blocks,
            blocks / sum(per_req),
        )

    def explain(self, budget_bytes: int | None = None) -> str:
        """How the plan was derived, one step a line (pages, groups, each pool's layout); with `budget_bytes`, the
        block count it buys and the bytes left over."""
        lines = list(self.derivation)
        for p in self.pools:
            if len(self.pools) > 1:
                lines.append(f"pool {p.groups[0].name}:")
            lines.extend(("  " if len(self.pools) > 1 else "") + line for line in p.derivation)
        if budget_bytes is not None and len(self.pools) == 1 and not self.stages:  # stages: kvviz.vllm.pipeline
            blocks = self.layout.num_blocks(budget_bytes)
            lines.append(
                f"{budget_bytes:,} B budget ({budget_bytes / GIB:.4f} GiB) // {self.block_stride:,} B "
                f"= {plural(blocks, 'block')} ({budget_bytes - blocks * self.block_stride:,} B left over)"
            )
        return "\n".join(lines)

    def text_map(self, width: int = 72) -> str:
        """The text byte map of each pool, `width` characters a line, pools separated by a blank line."""
        return "\n\n".join(p.text_map(width) for p in self.pools)

    def group_table(self) -> str:
        """One row per group of each pool, as text."""
        rows = [
            [
                g.name,
                len(g.layers),
                f"{lay.group_total(i):,}",
                f"{lay.group_unused(i):,}",
                "yes" if i == lay.binding_group else "",
            ]
            for lay in self.pools
            for i, g in enumerate(lay.groups)
        ]
        return text_table(rows, ["group", "layers", "total B", "unused B", "binds"])

    def to_json(self, *, budget_bytes: int | None = None) -> dict:
        """What `kvviz plan --json` prints: the layout fields (planner, block_stride, num_blocks,
        groups with their layers, tensors, derivation), the model, tokens per block, the scheduling
        (max_model_len, in-flight tokens, Mamba cache mode, decode context-parallel size), and with
        a budget the capacity (`summary`)."""
        cap = None if budget_bytes is None else self._capacity(budget_bytes)  # one a stage: stages_json says each
        if len(self.pools) == 1 and not self.separate:
            out = self.layout.to_json(num_blocks=None if cap is None else cap.num_blocks)
        else:
            out = {
                "planner": self.planner,
                "block_stride": self.block_stride,
                "num_blocks": None if cap is None else cap.num_blocks,
                "groups": [
                    {
                        "name": p.groups[0].name,
                        "total_bytes": p.block_stride,
                        "unused_bytes": 0,
                        "block_stride": p.block_stride,
                        "num_blocks": None if cap is None else cap.groups[i].num_blocks,
                        "layers": [
                            {"name": q.name, "kind": q.cache.kind.key, "offset": q.offset, "page_bytes": q.page_bytes}
                            for q in p.placements
                        ],
                    }
                    for i, p in enumerate(self.pools)
                ],
            }
        out["planner"] = self.planner
        out["derivation"] = list(self.derivation) + [line for p in self.pools for line in p.derivation]
        out["model"] = self.model
        notes = getattr(self.source, "notes", ())  # how the config was read, where not as written (Model.notes)
        if notes:
            out["notes"] = list(notes)
        out["family"] = self.family
        out["tokens_per_block"] = self.tokens_per_block
        out["max_model_len"] = self.max_model_len
        s = self.scheduling  # what a request's blocks were counted with (VllmConfig as the specs read it)
        out["scheduling"] = {
            "max_model_len": s.max_model_len,
            "max_in_flight_tokens": s.max_in_flight_tokens,
            "mamba_cache_mode": s.mamba_cache_mode,
            "decode_context_parallel_size": s.dcp,
        }
        if any(c.kind is CacheKind.CROSS_ATTENTION for p in self.pools for g in p.groups for c in g.layers):
            out["scheduling"]["max_num_encoder_input_tokens"] = s.max_encoder_input_tokens  # CrossAttentionSpec
        if self.stages:
            out["scheduling"]["pipeline_parallel_size"] = len(self.stages)
            out["stages"] = stages_json(self.stages, budget_bytes)
        out["knobs"] = dict(self.knobs)
        out["budget_bytes"] = cap.budget_bytes if cap is not None else None  # one a stage: the binding stage's
        if cap is not None:
            out["summary"] = cap.to_json()
            out["capacity_line"] = cap.line
        return out

    def to_dataframe(self):
        """One row per group of each pool (pool, group, layers, kinds, page bytes, total and unused bytes, binds),
        as a pandas DataFrame for a review (pandas imported here only)."""
        from kvviz.core.tables import plan_dataframe

        return plan_dataframe(self)

    def to_markdown(self, budget_bytes: int | None = None) -> str:
        """The plan for a review as Markdown: its header (model and what was planned), the group table, and with
        `budget_bytes` vLLM's capacity line."""
        from kvviz.core.tables import plan_markdown

        return plan_markdown(self, budget_bytes)

    def __str__(self) -> str:
        return self.text_map()
