"""Blocks, budgets and requests (docs/planners.md#overlay, docs/published-numbers.md#budget-rounding,
docs/published-numbers.md#admission-estimate, docs/model-core.md#blocks-per-request)."""

from __future__ import annotations

import dataclasses
import math

from kvviz.base.defaults import GIB
from kvviz.base.errors import KvvizError, require
from kvviz.base.text import tidy
from kvviz.core.group import tuple_count
from kvviz.core.layout import Layout
from kvviz.core.spec import Scheduling


def budget_bytes(*, gib: float | None = None, num_bytes: int | None = None) -> int:
    """A KV budget in bytes from GiB (1 GiB = 2^30 B, truncated like vLLM's int()) or bytes."""
    require((gib is None) != (num_bytes is None), "budget: give exactly one of GiB or bytes")
    if gib is not None:
        require(
            isinstance(gib, (int, float)) and math.isfinite(gib) and gib > 0,
            f"budget_gib={gib!r}: must be a positive number",
        )
        require(math.isfinite(gib * GIB), f"budget_gib={gib!r}: too large to count in bytes")  # 1e308: int(inf)
        return int(gib * GIB)
    if not (isinstance(num_bytes, int) and num_bytes > 0):
        raise KvvizError(f"budget_bytes={num_bytes!r}: must be a positive integer")
    return num_bytes


def num_blocks(layout: Layout, budget: int) -> int:
    """floor(budget / stride): how many per-block slabs the budget holds (Layout.num_blocks)."""
    return layout.num_blocks(budget)


def budget_range(stride: int, blocks: int) -> tuple[int, int]:
    """All budgets (bytes, inclusive) for which floor(budget / stride) == blocks."""
    require(stride > 0 and blocks >= 0, "budget_range: stride must be positive, blocks non-negative")
    return blocks * stride, (blocks + 1) * stride - 1


def common_budget_range(pairs) -> tuple[int, int] | None:
    """The budgets that give every (stride, blocks) pair at once, or None if no budget does."""
    lo, hi = 0, None
    for stride, blocks in pairs:
        a, b = budget_range(stride, blocks)
        lo, hi = max(lo, a), b if hi is None else min(hi, b)
    return (lo, hi) if hi is not None and lo <= hi else None


@dataclasses.dataclass(frozen=True)
class Comparison:
    """Before/after at one budget, as vLLM #48993 tabulates it."""

    before: Layout
    after: Layout
    budget: int

    @property
    def blocks_before(self) -> int:
        """Blocks the budget buys with the `before` layout (budget // its block stride)."""
        return num_blocks(self.before, self.budget)

    @property
    def blocks_after(self) -> int:
        """Blocks the budget buys with the `after` layout (budget // its block stride)."""
        return num_blocks(self.after, self.budget)

    @property
    def stride_change_pct(self) -> float:
        """The change in block stride from before to after, in percent of before."""
        return 100.0 * (self.after.block_stride - self.before.block_stride) / self.before.block_stride

    @property
    def blocks_change_pct(self) -> float:
        """The change in blocks from before to after, in percent of before; a budget that buys `before` no block
        has no percentage (a one-line KvvizError, not a division by zero)."""
        require(
            self.blocks_before > 0,
            f"budget={self.budget:,} B: below one block of the before layout, so the "
            f"change in blocks has no percentage",
        )
        return 100.0 * (self.blocks_after - self.blocks_before) / self.blocks_before

    @property
    def token_stride_change_pct(self) -> float | None:
        """The change in bytes per token (block stride / tokens per block), in percent of before;
        None when a side's blocks have no token count (a groups file)."""
        a, b = self.before.tokens_per_block, self.after.tokens_per_block
        if not a or not b:
            return None
        return 100.0 * (self.after.block_stride * a - self.before.block_stride * b) / (self.before.block_stride * b)

    def stride_note(self) -> str:
        """One clause saying what the stride change compares: blocks of the same token count, or
        of different ones (then the change per token, which is what capacity follows). vLLM
        #48993's published -10.75% compares 256-token blocks and also moves the indexer from fp8
        to mxfp4, so a planner change alone (bucketed -> overlay: -2.77%) or a block of another
        token count (Qwen3-Next's 544 -> 576 tokens: +5.88% a block, 0% a token) reads differently."""
        a, b = self.before.tokens_per_block, self.after.tokens_per_block
        if a and b and a != b:
            return (
                f"blocks of {a:,} and {b:,} tokens: {self.token_stride_change_pct:+.2f}% a token "
                f"(not comparable with a change between blocks of one size)"
            )
        same = f"{a:,}-token blocks on both sides" if a else "both sides"
        return same + (
            ", same knobs (vLLM #48993's -10.75% also moves the indexer from fp8 to mxfp4)"
            if self.before.planner == "bucketed"
            else ", same knobs"
        )

    def to_json(self) -> dict:
        """The comparison as a JSON object: the budget, and each side's planner, stride, blocks and binding group,
        then the changes in percent."""
        return {
            "budget_bytes": self.budget,
            "budget_gib": tidy(self.budget / GIB),
            "before": {
                "planner": self.before.planner,
                "block_stride": self.before.block_stride,
                "num_blocks": self.blocks_before,
                "binding_group": self.before.binding_label,
            },
            "after": {
                "planner": self.after.planner,
                "block_stride": self.after.block_stride,
                "num_blocks": self.blocks_after,
                "binding_group": self.after.binding_label,
            },
            "stride_change_pct": round(self.stride_change_pct, 2),
            "blocks_change_pct": round(self.blocks_change_pct, 2),
        }


def full_group_index(layout: Layout) -> int | None:
    """The index of the layout's first full-attention group, or None when it has none."""
    full = [i for i, g in enumerate(layout.groups) if g.is_full]
    return full[0] if full else None


def admission_estimate_per_block(layout: Layout) -> int | None:
    """What vLLM's `_max_memory_usage_bytes_from_groups` assumes a block costs after #48993:
    the full group's distinct page sizes, each times the full group's tuple count (the old
    bucket assumption), instead of the real stride. None when there is no full group."""
    i = full_group_index(layout)
    if i is None:
        return None
    layers = layout.groups[i].layers
    return tuple_count(layers) * sum(dict.fromkeys(c.page_bytes for c in layers))


def group_blocks_for_request(layout: Layout, scheduling: Scheduling) -> list[int]:
    """Blocks each group's block table holds for one request (`get_max_concurrency_for_kv_cache_config`:
    cdiv(max_memory_usage_bytes, page_size_bytes) of the group's spec; a group of several layer
    specs (UniformTypeKVCacheSpecs.max_memory_usage_pages) takes the largest of its layers')."""
    require(
        isinstance(scheduling.max_model_len, int) and scheduling.max_model_len > 0,
        f"max_model_len={scheduling.max_model_len!r}: must be a positive integer",
    )
    out = []
    for g in layout.groups:
        first = g.layers[0]
        if all(c.spec_key == first.spec_key for c in g.layers[1:2]):
            out.append(first.blocks_per_request(scheduling))
        else:
            out.append(max(c.blocks_per_request(scheduling) for c in g.layers))
    return out


def max_concurrency(layout: Layout, budget: int, scheduling: Scheduling) -> float:
    """Requests of `scheduling.max_model_len` tokens the budget serves at once, counted as vLLM
    0.33's `get_max_concurrency_for_kv_cache_config` does: all groups draw block ids from one
    shared pool, so a request costs the sum over groups of the blocks each group holds, and
    concurrency = num_blocks / that sum."""
    per_request = sum(group_blocks_for_request(layout, scheduling))
    if per_request == 0:
        raise KvvizError("max_model_len: a request of that length holds no blocks")
    return num_blocks(layout, budget) / per_request
