"""What one block holds and wastes (`Waste`, `layout_waste`) and what one request needs of each
group or pool (`GroupNeed`): the parts `Plan.capacity` (kvviz.core.plan) builds a `Capacity` of."""

from __future__ import annotations

import dataclasses

from kvviz.core.layout import Layout

__all__ = ["Waste", "layout_waste", "GroupNeed"]


@dataclasses.dataclass(frozen=True)
class Waste:
    """Bytes of a block that hold nothing, over every group (or pool): when each group holds
    one block, total_bytes = bytes per block x groups (separate: one block of each pool)."""

    total_bytes: int
    real_bytes: int
    empty_slot_bytes: int  # whole pages a group leaves empty (groups one layer short)
    padded_state_bytes: int  # pages padded past their content (state pages grown to the attention page)
    unused_tail_bytes: int  # the rest of a group's unused range, less than one page

    @property
    def waste_bytes(self) -> int:
        """Bytes of one block holding no cache data: total minus real."""
        return self.total_bytes - self.real_bytes

    @property
    def waste_pct(self) -> float:
        """Waste bytes in percent of the block's total bytes."""
        return 100.0 * self.waste_bytes / self.total_bytes

    def to_json(self) -> dict:
        """The waste split as a JSON object: total, real and waste bytes, the percentage, and the empty-slot,
        padded-state and unused-tail bytes."""
        return {
            "total_bytes": self.total_bytes,
            "real_bytes": self.real_bytes,
            "waste_bytes": self.waste_bytes,
            "waste_pct": round(self.waste_pct, 3),
            "empty_slot_bytes": self.empty_slot_bytes,
            "padded_state_bytes": self.padded_state_bytes,
            "unused_tail_bytes": self.unused_tail_bytes,
        }


def layout_waste(layout: Layout) -> Waste:
    """Waste of one pool: every group spans the block stride."""
    empty = tail = 0
    for i, g in enumerate(layout.groups):
        unused = layout.group_unused(i)
        page = max(c.page_bytes for c in g.layers)
        empty += unused // page * page
        tail += unused % page
    padded = sum(p.cache.padding_bytes for p in layout.placements if p.cache.padded_page_bytes is not None)
    real = sum(
        p.cache.page_bytes if p.cache.padded_page_bytes is None else p.cache.content_bytes for p in layout.placements
    )
    return Waste(layout.block_stride * len(layout.groups), real, empty, padded, tail)


@dataclasses.dataclass(frozen=True)
class GroupNeed:
    """What one request holds in one group (or pool)."""

    name: str
    layers: int
    blocks_per_request: int
    block_bytes: int  # bytes one of its blocks costs: the shared stride, or the pool's own
    num_blocks: int | None = None  # separate pools only: the pool's own blocks

    def to_json(self) -> dict:
        """The group's need as a JSON object (name, layers, blocks per request, block bytes; num_blocks for a pool
        of its own)."""
        out = {
            "name": self.name,
            "layers": self.layers,
            "blocks_per_request": self.blocks_per_request,
            "block_bytes": self.block_bytes,
        }
        if self.num_blocks is not None:
            out["num_blocks"] = self.num_blocks
        return out
