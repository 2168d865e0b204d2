"""shared-block (docs/hazards.md#shared-block): two groups hold one block id, so their pages sit
at the same bytes and the later writer overwrites the earlier one.

Group 1 claims group 0's first block (`BlockPool.claim(..., hazard=True)`). Groups write in
layout order, so group 1 writes last: the victims are group 0's layers under group 1's pages
(and each group's unused bytes the other's pages wrote into).
"""

from __future__ import annotations

from kvviz.base.errors import require
from kvviz.core.layout import Layout
from kvviz.pool import BlockPool, Pool
from kvviz.verify.hazards.base import Hazard
from kvviz.verify.report import Corruption, HazardReport


class SharedBlock(Hazard):
    """Group 1 claims group 0's first block; group 1 writes later, over group 0's pages."""

    name = "shared-block"
    order = 0

    @classmethod
    def refuse(cls, layout: Layout, num_blocks: int) -> None:
        """Needs two groups."""
        require(len(layout.groups) >= 2, "hazard='shared-block': needs at least two groups (this layout has one)")

    def __init__(self, layout: Layout, blocks: BlockPool, layer: str | None = None) -> None:
        super().__init__(layout, blocks, layer)
        names = [g.name for g in layout.groups]
        owner, intruder = 0, 1  # groups write in order, so the intruder (group 1) writes after the owner
        self.block = int(blocks.block_ids(owner)[0])
        blocks.claim(intruder, self.block, hazard=True)
        self.owner, self.intruder = names[owner], names[intruder]
        self.notes = {self.block: f"overwritten by {self.intruder}"}

    def describe(self, pool: Pool, samples: tuple, corrupted: list[Corruption]) -> HazardReport:
        """The block both hold, who wrote first and last; the damage showed if any page changed."""
        o, i, b = self.owner, self.intruder, self.block
        return HazardReport(
            self.name,
            description=(
                f"groups {o!r} (owner) and {i!r} (claimed with hazard=True) both hold block {b}; {i!r} "
                f"wrote last, so the layers of {o!r} under its pages are overwritten"
            ),
            facts={"block": b, "owner": o, "intruder": i, "earlier_writer": o, "later_writer": i},
            showed=bool(corrupted),
        )


HAZARD = SharedBlock
