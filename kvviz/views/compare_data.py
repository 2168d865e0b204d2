"""What a before/after figure shows, as plain data: two block maps on one byte scale and the
bytes per block one saves over the other (vLLM #48993's comparison: bucketed + FP8 indexer
against the overlay + MXFP4, docs/published-numbers.md#the-published-table). No matplotlib."""

from __future__ import annotations

import dataclasses

from kvviz.base.inputs import checked
from kvviz.views.args import LABELS
from kvviz.views.blockmap_data import BlockMapData, as_block_map_data

__all__ = ["BeforeAfterData", "before_after_data"]

OVERLAY_NOTE = (
    "every lane = bytes [0, stride) of the same block of its layout; "
    "dashed lines mark each stride; the binding group is outlined"
)


@dataclasses.dataclass(frozen=True)
class BeforeAfterData:
    """Two layouts' block maps (`before`, `after`) drawn on one x scale, with their panel labels."""

    before: BlockMapData
    after: BlockMapData
    labels: tuple[str, str] = ("before", "after")

    @property
    def panels(self) -> tuple[tuple[str, str, BlockMapData], ...]:
        """(panel name, label, data) of the two panels: ('before', ...), ('after', ...)."""
        return (("before", self.labels[0], self.before), ("after", self.labels[1], self.after))

    @property
    def scale(self) -> int:
        """Bytes across both panels: the larger stride (normally the before one)."""
        return max(self.before.stride, self.after.stride)

    @property
    def saved(self) -> int:
        """Bytes per block the after layout saves (negative when it adds)."""
        return self.before.stride - self.after.stride

    @property
    def pct(self) -> float:
        """The stride's change in percent of the before stride (negative = smaller)."""
        return 100.0 * (self.after.stride - self.before.stride) / self.before.stride

    @property
    def saved_range(self) -> tuple[int, int] | None:
        """Bytes [after stride, before stride) the after layout no longer needs, or None."""
        return (self.after.stride, self.before.stride) if self.saved > 0 else None

    @property
    def has_holes(self) -> bool:
        """Whether a panel is a bucketed layout (no binding group): its unused ranges are holes."""
        return any(d.binding_group is None for d in (self.before, self.after))

    @property
    def has_unused(self) -> bool:
        """Whether a panel with a binding group leaves bytes unused (hatched grey, not a hole)."""
        return any(d.has_unused for d in (self.before, self.after) if d.binding_group is not None)

    def panel_title(self, label: str, data: BlockMapData) -> str:
        """One panel's title: its planner and binding group, and a bucketed layout's holes."""
        text = f"{label}: {data.planner}, binding group: {data.binding_label}"
        if data.binding_group is None:
            text += f"; holes (red hatch): {data.unused_bytes:,} B unused, summed over the groups"
        return text

    @property
    def saved_text(self) -> str:
        """The label of the saved range."""
        return f"saved\n{self.saved:,} B\n({self.pct:+.2f}%)"

    @property
    def title(self) -> str:
        """The figure's title: both strides, the change in percent and in bytes per block."""
        change = "saved" if self.saved > 0 else "added"
        return (
            f"block stride {self.before.stride:,} B → {self.after.stride:,} B: {self.pct:+.2f}% "
            f"({abs(self.saved):,} B per block {change})"
        )

    overlay_note = OVERLAY_NOTE


@checked(labels=LABELS)
def before_after_data(before, after, *, labels: tuple[str, str] = ("before", "after")) -> BeforeAfterData:
    """The data of a before/after figure of two Layouts (or BlockMapData)."""
    return BeforeAfterData(as_block_map_data(before, "before"), as_block_map_data(after, "after"), tuple(labels))
