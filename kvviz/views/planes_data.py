"""What the layer-plane figure of a pool shows, as plain data: vLLM's layer-outermost arrangement
(`kvviz.core.planes.layer_planes`, mirroring vLLM 0.33's `get_kv_cache_config_from_groups` with a
layer-outermost layout: layer stride = num_blocks x page, block stride = page), one row per tensor,
and the pages of the blocks shown inside every plane. No matplotlib; takes a Layout."""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Sequence

from kvviz.base.errors import require
from kvviz.base.inputs import checked
from kvviz.core.kinds import CacheKind
from kvviz.core.layout import Layout
from kvviz.core.planes import layer_planes
from kvviz.views.args import BLOCKS, NUM_BLOCKS
from kvviz.views.style import format_bytes, plane_label

__all__ = ["PLANE_PAGES_MAX_BLOCKS", "PlaneRange", "PlanePage", "PlaneRow", "PoolPlanesData", "pool_planes_data"]

# Blocks whose pages the figure draws when none are named: every block of a pool this small.
PLANE_PAGES_MAX_BLOCKS = 8


@dataclasses.dataclass(frozen=True)
class PlaneRange:
    """One layer's plane, bytes [start, end) of the pool; `layer` None: the unused plane a group
    one layer short leaves at the end of the pool."""

    group: str
    layer: str | None
    kind: CacheKind | None
    start: int
    end: int

    @property
    def size(self) -> int:
        """Bytes of the plane: num_blocks x page (the layer stride)."""
        return self.end - self.start

    @property
    def label(self) -> str:
        """'L<i>' for a layer's plane, 'unused plane <size>' for the unused one."""
        return f"unused plane {format_bytes(self.size)}" if self.layer is None else plane_label(self.layer)


@dataclasses.dataclass(frozen=True)
class PlanePage:
    """One layer's page of one shown block inside its plane: bytes [start, end) of the pool."""

    block: int
    group: str
    layer: str
    kind: CacheKind
    start: int
    end: int
    padding_bytes: int  # the page's tail past its rows (a state page grown to the attention page)

    @property
    def pad_start(self) -> int:
        """First byte of the page's padding band: end - padding_bytes."""
        return self.end - self.padding_bytes


@dataclasses.dataclass(frozen=True)
class PlaneRow:
    """One tensor of the pool: its planes (layer stride apart), and the shown blocks' pages."""

    group: str
    name: str  # the group, or 'group (tensor k)' when the group has several tensors
    offset: int
    page_bytes: int
    planes: tuple[PlaneRange, ...]
    pages: tuple[PlanePage, ...]
    block_labels: tuple[tuple[int, int, int], ...]  # (block, start, end) of its page in the first plane

    @property
    def num_layers(self) -> int:
        """Planes of the row that hold a layer."""
        return sum(pl.layer is not None for pl in self.planes)

    @property
    def label(self) -> str:
        """The row's y label: name, offset in the pool, layers and page bytes."""
        return f"{self.name} @ {self.offset:,}\n{self.num_layers} layers · page {self.page_bytes:,} B"


@dataclasses.dataclass(frozen=True)
class PoolPlanesData:
    """Everything the layer-plane figure draws. Build it with `pool_planes_data(layout, num_blocks)`."""

    planner: str
    num_blocks: int
    block_stride: int  # bytes per block of the layout
    rows: tuple[PlaneRow, ...]
    blocks_shown: tuple[int, ...]

    @property
    def size(self) -> int:
        """Bytes of the pool: num_blocks x block_stride; every row spans [0, size)."""
        return self.num_blocks * self.block_stride

    @property
    def planes(self) -> tuple[PlaneRange, ...]:
        """Every layer's plane (not the unused ones), row by row."""
        return tuple(pl for r in self.rows for pl in r.planes if pl.layer is not None)

    @property
    def unused(self) -> tuple[PlaneRange, ...]:
        """The unused planes of short groups."""
        return tuple(pl for r in self.rows for pl in r.planes if pl.layer is None)

    @property
    def pages(self) -> tuple[PlanePage, ...]:
        """The shown blocks' pages, row by row, plane by plane."""
        return tuple(p for r in self.rows for p in r.pages)

    @property
    def kinds(self) -> tuple[CacheKind, ...]:
        """Cache kinds of the planes, in first-seen order."""
        return tuple(dict.fromkeys(pl.kind for pl in self.planes))

    @property
    def padded_kinds(self) -> frozenset[CacheKind]:
        """Kinds of the shown pages that carry padding (none when no block is shown)."""
        return frozenset(p.kind for p in self.pages if p.padding_bytes)

    @property
    def padding_label(self) -> str:
        """What the drawn padding is: state pages grown to the attention page, or alignment."""
        kinds = self.padded_kinds
        return (
            "padding (state page grown to the attention page)"
            if kinds and all(k.is_state for k in kinds)
            else "alignment padding"
        )

    @property
    def title(self) -> str:
        """The figure's title: the planner and the layer / block strides of the arrangement."""
        pages = sorted({r.page_bytes for r in self.rows})
        if len(pages) == 1:
            page = pages[0]
            strides = (
                f"layer stride = {self.num_blocks:,} blocks x page = {self.num_blocks * page:,} B, "
                f"block stride = page = {page:,} B"
            )
        else:
            strides = f"layer stride = {self.num_blocks:,} blocks x page, block stride = page (pages per row)"
        return f"{self.planner} layout, layer-outermost: {strides}"

    @property
    def xlabel(self) -> str:
        """The x axis: bytes of the pool, blocks x bytes per block."""
        return f"offset in the pool ({self.num_blocks:,} blocks x {self.block_stride:,} B per block)"

    @property
    def shown_text(self) -> str:
        """Which blocks' pages are drawn ('' when none)."""
        b = self.blocks_shown
        if not b:
            return ""
        return (
            f"; pages of block{'s' if len(b) > 1 else ''} "
            f"{', '.join(map(str, b)) if len(b) <= 12 else f'{len(b)} blocks'} drawn"
        )

    @property
    def overlay_note(self) -> str:
        """What every row is: bytes of one pool from byte 0 (docs/hybrid.md#hybrid-planners)."""
        return f"every tensor starts at byte 0 of the same pool of {self.size:,} B"


def _blocks_shown(blocks_shown, num_blocks: int) -> tuple[int, ...]:
    if blocks_shown is None:
        blocks_shown = range(num_blocks) if num_blocks <= PLANE_PAGES_MAX_BLOCKS else ()
    blocks_shown = list(blocks_shown)
    for b in blocks_shown:
        require(
            isinstance(b, numbers.Integral) and not isinstance(b, bool) and 0 <= b < num_blocks,
            f"blocks_shown: block {b!r} is outside the pool's {num_blocks} blocks",
        )
    return tuple(sorted({int(b) for b in blocks_shown}))


@checked(num_blocks=NUM_BLOCKS, blocks_shown=BLOCKS)
def pool_planes_data(layout: Layout, num_blocks: int, *, blocks_shown: Sequence[int] | None = None) -> PoolPlanesData:
    """The pool of `num_blocks` blocks as layer planes x blocks (`layer_planes`); the pages of
    `blocks_shown` (default: every block when num_blocks <= PLANE_PAGES_MAX_BLOCKS) in every plane."""
    require(isinstance(layout, Layout), f"layout: expected a kvviz Layout, got {type(layout).__name__}")
    tensors = layer_planes(layout, num_blocks)  # checks num_blocks
    shown = _blocks_shown(blocks_shown, num_blocks)
    cache_of = {p.name: p.cache for p in layout.placements}
    per_group: dict[str, int] = {}
    for t in tensors:
        per_group[t.group] = per_group.get(t.group, 0) + 1
    seen: dict[str, int] = {}
    rows = []
    for t in tensors:
        k = seen[t.group] = seen.get(t.group, -1) + 1
        planes, pages = [], []
        for i, pl in enumerate(t.planes):
            cache = cache_of.get(pl.layer) if pl.layer is not None else None
            planes.append(PlaneRange(t.group, pl.layer, cache.kind if cache else None, pl.start, pl.end))
            if cache is None:
                continue
            for b in shown:
                lo, hi = t.block_range(i, b)
                pages.append(PlanePage(b, t.group, pl.layer, cache.kind, lo, hi, cache.padding_bytes))
        labels = tuple((b, *t.block_range(0, b)) for b in shown) if t.planes[0].layer is not None else ()
        rows.append(
            PlaneRow(
                group=t.group,
                name=t.group if per_group[t.group] == 1 else f"{t.group} (tensor {k})",
                offset=t.offset,
                page_bytes=t.page_bytes,
                planes=tuple(planes),
                pages=tuple(pages),
                block_labels=labels,
            )
        )
    return PoolPlanesData(
        planner=layout.planner,
        num_blocks=num_blocks,
        block_stride=layout.block_stride,
        rows=tuple(rows),
        blocks_shown=shown,
    )
