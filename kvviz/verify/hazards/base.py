"""What every hazard is: an object that sets itself up on a layout and its block ownership, acts
on the real pool after the writes, says which bytes it expects changed, and describes what it did.

A hazard never touches the engine: it claims blocks on the BlockPool (the one ownership map),
names pages that need whole real rows (`whole_pages`), names pages it meant to clear
(`zeroed`) and how it touched each block (`notes`), and acts on the Pool (`act`). A new hazard is
one module in this package with a subclass as its `HAZARD` (docs/hazards.md says how).
"""

from __future__ import annotations

from typing import ClassVar

from kvviz.base.errors import KvvizError
from kvviz.core.layout import Layout, Placement
from kvviz.pool import BlockPool, Pool
from kvviz.verify.report import Corruption, HazardReport


class Hazard:
    """One hazard acted out on one run; __init__ is its set-up (before the pool exists)."""

    name: ClassVar[str] = ""
    order: ClassVar[int] = 0  # place in HAZARDS (the CLI's list)
    whole_pages: tuple[tuple[Placement, int], ...] = ()  # (layer, block) written with every row real
    zeroed: frozenset[tuple[str, int]] = frozenset()  # (layer, block) pages the hazard meant to clear
    notes: dict[int, str] = {}  # block -> how the hazard touched it (the report's note)

    @classmethod
    def refuse(cls, layout: Layout, num_blocks: int) -> None:
        """Raise KvvizError, naming the argument, when the hazard cannot be acted out on this layout."""

    def __init__(self, layout: Layout, blocks: BlockPool, layer: str | None = None) -> None:
        self.layout = layout

    def act(self, pool: Pool) -> None:
        """Do the damage on the real memory, after every group has written."""

    def describe(self, pool: Pool, samples: tuple, corrupted: list[Corruption]) -> HazardReport:
        """What the hazard did, and whether its damage showed in this run."""
        raise NotImplementedError


def hazard_layer(layout: Layout, name: str | None, default) -> Placement:
    """The layer `hazard_layer=` names, else `default(layout)`."""
    if name is None:
        return default(layout)
    p = layout.by_name.get(name)
    if p is None:
        raise KvvizError(f"hazard_layer={name!r}: not a layer of this layout")
    return p
