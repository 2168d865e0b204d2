"""zeroer (docs/hazards.md#zeroer): vLLM #50276 zeroed a layer's block as [offset, offset + stride)
of the flat backing instead of [offset, offset + page).

After the writes, one layer's page in one block is zeroed that way: the following layers of the
same group in that block are wiped and `offset` bytes spill into the next block, owned (round
robin) by another group. The layer defaults to the indexer K cache nearest the middle of its group
(the DSV4 incident lost indexer blocks), else the middle layer of the largest group; the block is
the group's lowest block whose next block another group owns (else its lowest with a next block).
"""

from __future__ import annotations

from kvviz.base.errors import require
from kvviz.core.kinds import CacheKind
from kvviz.core.layout import Layout, Placement
from kvviz.pool import BlockPool, Pool
from kvviz.verify.hazards.base import Hazard, hazard_layer
from kvviz.verify.report import Corruption, HazardReport


def default_layer(layout: Layout) -> Placement:
    """The indexer K cache nearest the middle of its group, else the largest group's middle layer."""
    idx = [p for p in layout.placements if p.cache.kind is CacheKind.INDEXER_K]
    if idx:
        g = idx[0].group
        members = [p for p in layout.group_placements(g) if p.cache.kind is CacheKind.INDEXER_K]
        middle = layout.group_placements(g)[len(layout.group_placements(g)) // 2].offset
        return min(members, key=lambda p: (abs(p.offset - middle), p.offset))
    gp = layout.group_placements(layout.largest_group)
    return gp[len(gp) // 2]


def zeroer_block(blocks: BlockPool, group: int) -> int | None:
    """The group's lowest block whose next block another group holds, else its lowest block that
    has a next block at all (None: neither)."""
    ids = blocks.block_ids(group)
    ids = ids[ids + 1 < blocks.num_blocks]
    if not ids.numel():
        return None
    other = (blocks.owner_ids[ids + 1] != group).nonzero().flatten()
    return int(ids[other[0]]) if other.numel() else int(ids[0])


class Zeroer(Hazard):
    """Zero [offset, offset + stride) of the flat backing at one page (vLLM #50276's bug)."""

    name = "zeroer"
    order = 1

    def __init__(self, layout: Layout, blocks: BlockPool, layer: str | None = None) -> None:
        super().__init__(layout, blocks, layer)
        self.target = t = hazard_layer(layout, layer, default_layer)
        self.block = zeroer_block(blocks, t.group)
        require(
            self.block is not None,
            f"num_blocks={blocks.num_blocks}: hazard='zeroer' needs a block of group "
            f"{layout.groups[t.group].name!r} followed by another block",
        )
        self.lo = self.block * layout.block_stride + t.offset
        self.spill_owner = blocks.owner(self.block + 1)
        self.zeroed = frozenset({(t.name, self.block)})
        self.notes = {self.block: "neighbour", self.block + 1: "spill"}

    def act(self, pool: Pool) -> None:
        """The bug: a stride's worth of the flat backing from the layer's offset."""
        pool.backing[self.lo : self.lo + self.layout.block_stride].zero_()

    def describe(self, pool: Pool, samples: tuple, corrupted: list[Corruption]) -> HazardReport:
        """The layer, the range meant and the range zeroed; the damage showed if any page changed."""
        t, b, lo, stride = self.target, self.block, self.lo, self.layout.block_stride
        names = [g.name for g in self.layout.groups]
        spill = None if self.spill_owner is None else names[self.spill_owner]
        return HazardReport(
            self.name,
            description=(
                f"zeroed {t.name} in block {b} as flat [{lo:,}, {lo + stride:,}) = [offset, offset + stride) "
                f"instead of [offset, offset + page) = [{lo:,}, {lo + t.page_bytes:,}): bytes "
                f"[{t.end:,}, {stride:,}) of block {b} (its group's later layers) and {t.offset:,} bytes "
                f"[0, {t.offset:,}) of block {b + 1}" + (f" (owned by {spill!r})" if spill else "")
            ),
            facts={
                "layer": t.name,
                "group": names[t.group],
                "block": b,
                "offset": t.offset,
                "page_bytes": t.page_bytes,
                "block_stride": stride,
                "meant": [lo, lo + t.page_bytes],
                "zeroed": [lo, lo + stride],
                "neighbour_range": [t.end, stride],
                "spill_block": b + 1,
                "spill_range": [0, t.offset],
                "spill_owner": spill,
            },
            showed=bool(corrupted),
        )


HAZARD = Zeroer
