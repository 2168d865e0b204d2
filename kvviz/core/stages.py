"""Pipeline-parallel stages: each stage's share of the model's groups and what its GPUs' budget buys
(docs/deploy.md#pipeline-parallel).

vLLM 0.33 groups the whole model once, then projects every group on each stage
(v1/core/kv_cache_planning.py `_project_kv_cache_groups_to_worker`): a stage keeps its own layers of each
group, and a group with none of its layers there stays, empty. A stage's bytes per block is its largest
projected group (`_get_kv_cache_bytes_per_block`), each worker's blocks are budget // that, and every worker
keeps the smallest count (`get_kv_cache_configs`: "Change the num_blocks of each rank to the smallest among
all ranks"). Each worker's memory is its own (`available_memory`, one a worker): a budget is one number for
every GPU, or one a stage (a tuple: a GPU budget whose weights differ by stage, kvviz.deploy.kv_budget), and the
binding stage is the one that makes the fewest blocks. Nothing here knows a model or an engine:
`kvviz.vllm.pipeline` builds the stages.
"""

from __future__ import annotations

import dataclasses

from kvviz.base.errors import require


@dataclasses.dataclass(frozen=True)
class Stage:
    """One pipeline stage (every TP rank of it plans the same): its layer range [first_layer, end_layer) as
    `get_pp_indices` gives it, the layers each global group has here (0: the group stays, empty), the bytes of
    those layers' pages in each group, and the stage's bytes per block (the largest of those)."""

    index: int
    first_layer: int
    end_layer: int
    group_layers: tuple[int, ...]
    group_bytes: tuple[int, ...]

    @property
    def bytes_per_block(self) -> int:
        """vLLM 0.33's `_get_kv_cache_bytes_per_block` on the projected groups: the largest group's pages."""
        return max(self.group_bytes)

    @property
    def num_layers(self) -> int:
        """Decoder layers on the stage (end_layer - first_layer)."""
        return self.end_layer - self.first_layer

    @property
    def cache_layers(self) -> int:
        """Layers that register a KV cache on the stage, over every group."""
        return sum(self.group_layers)

    def num_blocks(self, budget_bytes: int) -> int:
        """Blocks one of the stage's workers would make of `budget_bytes` alone (before the minimum)."""
        return budget_bytes // self.bytes_per_block


def stage_budgets(stages: tuple[Stage, ...], budget_bytes) -> tuple[int, ...]:
    """Each stage's KV memory: `budget_bytes` on every GPU (an int), or one a stage (a tuple of positive ints, as
    get_kv_cache_configs takes each worker's available_memory)."""
    if isinstance(budget_bytes, tuple):
        require(
            len(budget_bytes) == len(stages) and all(type(b) is int and b > 0 for b in budget_bytes),
            f"budget_bytes: one positive integer a stage ({len(stages)}), got {len(budget_bytes)} values",
        )
        return budget_bytes
    require(
        type(budget_bytes) is int and budget_bytes > 0,
        f"budget_bytes={budget_bytes!r}: must be a positive integer",
    )
    return (budget_bytes,) * len(stages)


def binding_stage(stages: tuple[Stage, ...], budget_bytes=None) -> Stage:
    """The stage whose workers make the fewest blocks of `budget_bytes` (stage_budgets), the most bytes per block
    breaking a tie, then the first; without a budget, the stage with the most bytes per block (the first such)."""
    require(len(stages) > 0, "stages: there are none")
    if budget_bytes is None:
        return max(stages, key=lambda s: (s.bytes_per_block, -s.index))
    budgets = stage_budgets(stages, budget_bytes)
    return min(stages, key=lambda s: (s.num_blocks(budgets[s.index]), -s.bytes_per_block, s.index))


def stage_pool(stages: tuple[Stage, ...], budget_bytes) -> tuple[int, int]:
    """(the binding stage's bytes per block, num_blocks = the minimum over every stage of its budget // its bytes
    per block), as `get_kv_cache_configs` converges the workers."""
    budgets = stage_budgets(stages, budget_bytes)
    bind = binding_stage(stages, budgets)
    return bind.bytes_per_block, bind.num_blocks(budgets[bind.index])


def stages_json(stages: tuple[Stage, ...], budget_bytes) -> list[dict]:
    """`--json`'s `stages`: each stage's layers, its groups' layer counts, bytes per block, and with a budget (one
    for every GPU or one a stage) its own budget, its blocks before the minimum and whether it binds."""
    budgets = None if budget_bytes is None else stage_budgets(stages, budget_bytes)
    binding = binding_stage(stages, budgets).index
    out = []
    for s in stages:
        row: dict = {
            "stage": s.index,
            "layers": [s.first_layer, s.end_layer],
            "num_layers": s.num_layers,
            "cache_layers": s.cache_layers,
            "group_layers": list(s.group_layers),
            "bytes_per_block": s.bytes_per_block,
            "binds": s.index == binding,
        }
        if budgets is not None:
            row["budget_bytes"] = budgets[s.index]
            row["num_blocks_alone"] = s.num_blocks(budgets[s.index])
        out.append(row)
    return out
