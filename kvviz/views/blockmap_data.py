"""What a block map shows, as plain data: lanes, ranges, stride, binding group, page anatomy.

One `BlockMapData` feeds both drawings of a layout: the matplotlib figure of
`kvviz.views.blockmap` (files, reports, static notebook outputs) and the browser's live map of
`kvviz.views.livemap` (`to_dict()`), so the two cannot disagree. Light on purpose: no matplotlib, torch
or ipywidgets; it takes a `Layout` (or a `Plan` of separate pools) and imports no planner.

Every lane is the same bytes [0, block_stride) of one block: under the overlay planners every
group starts at byte 0 of the same per-block slab (docs/overlay.md#the-overlay-in-one-paragraph).
A hybrid model's separate pools share no block: `separate_pools_data` gives one lane per pool,
each marked where its own pool's block ends (`Lane.block_end`), and no lane binds.
"""

from __future__ import annotations

import dataclasses

from kvviz.base.errors import require
from kvviz.base.regions import Region, page_regions
from kvviz.core.accept import plan_of, pools_of
from kvviz.core.kinds import CacheKind
from kvviz.core.layout import Layout
from kvviz.views.style import (
    KIND_COLORS,
    PAD_COLOR,
    REGION_COLORS,
    UNUSED_COLOR,
    byte_ticks,
    format_bytes,
    short_layer_name,
    tick_label,
    with_unit,
)

__all__ = [
    "Region",
    "MapRange",
    "Lane",
    "BlockMapData",
    "block_map_data",
    "separate_pools_data",
    "as_block_map_data",
    "plan_heading",
    "titled",
]


@dataclasses.dataclass(frozen=True)
class MapRange:
    """One layer's page in its group's lane: bytes [offset, end) of the block."""

    layer: str
    group: str
    lane: int  # index of the group's lane
    kind: CacheKind
    offset: int
    page_bytes: int
    content_bytes: int  # rows x row bytes
    rows: int
    row_bytes: int
    payload_bytes: int  # per row
    footer_bytes: int  # per row
    row_format: str
    row_describe: str
    regions: tuple[Region, ...]  # `kvviz.base.regions.page_regions` of the page
    part_names: tuple[str, str] = ("payload", "footer")  # the row's two parts (K/V, conv/SSM state)

    @property
    def end(self) -> int:
        """First byte past the page: offset + page_bytes."""
        return self.offset + self.page_bytes

    @property
    def padding_bytes(self) -> int:
        """Bytes of the page past its rows (alignment, or a state page grown to the attention page)."""
        return self.page_bytes - self.content_bytes

    @property
    def pad_start(self) -> int:
        """First byte of the page's padding band in the block: end - padding_bytes."""
        return self.end - self.padding_bytes

    @property
    def anatomy_key(self) -> tuple:
        """Equal for pages of one spec (their anatomies are the same)."""
        return (self.kind, self.rows, self.row_describe, self.page_bytes)

    @property
    def short_name(self) -> str:
        """The layer's name as a lane label shows it (`short_layer_name`)."""
        return short_layer_name(self.layer)

    def tooltip(self) -> str:
        """What hovering the range shows (the live map writes the same lines from `to_dict`)."""
        return (
            f"{self.layer}\ngroup {self.group} · {self.kind.label}\n"
            f"offset {self.offset:,} B · page {with_unit(self.page_bytes)} · end {self.end:,} B"
        )

    def anatomy(self) -> dict:
        """The page's anatomy: rows, row format and its payload / footer / padding regions."""
        return {
            "rows": self.rows,
            "row_bytes": self.row_bytes,
            "payload_bytes": self.payload_bytes,
            "footer_bytes": self.footer_bytes,
            "content_bytes": self.content_bytes,
            "padding_bytes": self.padding_bytes,
            "row_format": self.row_format,
            "row_describe": self.row_describe,
            "regions": [
                {"name": r.name, "label": self.region_label(r.name), "start": r.start, "size": r.size, "end": r.end}
                for r in self.regions
            ],
        }

    def region_label(self, name: str) -> str:
        """'payload' / 'footer' named as the row format names its parts ('K', 'conv state', ...)."""
        return {"payload": self.part_names[0], "footer": self.part_names[1]}.get(name, name)

    def to_dict(self, anatomy: int) -> dict:
        """The range for the live map; `anatomy` indexes the map's list of distinct anatomies."""
        return {
            "layer": self.layer,
            "group": self.group,
            "lane": self.lane,
            "kind": self.kind.name.lower(),
            "offset": self.offset,
            "page_bytes": self.page_bytes,
            "end": self.end,
            "padding_bytes": self.padding_bytes,
            "page_text": with_unit(self.page_bytes),
            "size_text": format_bytes(self.page_bytes),
            "anatomy": anatomy,
        }


@dataclasses.dataclass(frozen=True)
class Lane:
    """One group's lane: the group's pages over [0, stride) and what they leave unused.
    `block_end`: where the lane's own pool's block ends (separate pools only, else None)."""

    name: str
    index: int
    num_layers: int
    total: int  # sum of the group's pages
    unused: tuple[tuple[int, int], ...]  # [lo, hi) ranges no page of the group covers
    binds: bool  # the group's total is the stride
    block_end: int | None = None

    @property
    def unused_bytes(self) -> int:
        """Bytes of the stride no page of the group covers."""
        return sum(hi - lo for lo, hi in self.unused)

    @property
    def label(self) -> str:
        """The lane's y label: name (flagged when it binds), layers and total bytes."""
        star = "  ◀ binds" if self.binds else ""
        return f"{self.name}{star}\n{self.num_layers} layers · {self.total:,} B"

    def tooltip(self, stride: int) -> str:
        """What hovering the lane shows: total, unused bytes, whether it binds the stride."""
        if self.block_end is not None:
            return (
                f"pool {self.name}: {self.num_layers} layers, its own block of {self.block_end:,} B "
                f"({format_bytes(self.block_end)}), its own block ids\n"
                f"separate pool: shares no block with the others"
            )
        why = "binds the stride (its total is the stride)" if self.binds else "does not bind the stride"
        return (
            f"group {self.name}: {self.num_layers} layers, total {self.total:,} B ({format_bytes(self.total)})\n"
            f"unused: {self.unused_bytes:,} B of the {stride:,} B stride\n{why}"
        )

    def to_dict(self, stride: int) -> dict:
        """The lane for the live map (`block_end` only for a separate pool's lane)."""
        out = {
            "name": self.name,
            "index": self.index,
            "num_layers": self.num_layers,
            "total": self.total,
            "unused": [list(r) for r in self.unused],
            "unused_bytes": self.unused_bytes,
            "binds": self.binds,
            "unused_text": [f"unused {format_bytes(hi - lo)}" for lo, hi in self.unused],
            "tooltip": self.tooltip(stride),
        }
        if self.block_end is not None:
            out["block_end"] = self.block_end
        return out


@dataclasses.dataclass(frozen=True)
class BlockMapData:
    """Everything a block map draws. Build it with `block_map_data(layout)` (or
    `separate_pools_data(plan, caption=...)`: `separate` is then True and `stride` is the largest
    pool's block)."""

    planner: str
    stride: int
    lanes: tuple[Lane, ...]
    ranges: tuple[MapRange, ...]  # group by group, in the layout's placement order
    binding_group: str | None  # the lane whose total is the stride; None for bucketed layouts
    caption: str
    separate: bool = False

    @property
    def binding_label(self) -> str:
        """The binding group's name, or what stands in for one (bucketed, separate pools)."""
        if self.separate:
            return "none: separate pools, each with its own stride"
        return self.binding_group if self.binding_group is not None else "none (sum of page-size buckets)"

    @property
    def overlay_note(self) -> str:
        """What every lane is: the same bytes of one block."""
        if self.separate:
            return "separate pools: each lane is one block of its own pool (bytes [0, its stride))"
        return f"every lane = bytes [0, {self.stride:,}) of the same block"

    @property
    def stride_text(self) -> str:
        """The stride as the map's stride mark writes it."""
        return f"{self.stride:,} B (largest pool's block)" if self.separate else f"{self.stride:,} B"

    @property
    def title(self) -> str:
        """The block map's title: planner, stride and binding group."""
        return f"{self.planner} layout: block stride {self.stride:,} B; binding group: {self.binding_label}"

    @property
    def kinds(self) -> tuple[CacheKind, ...]:
        """Cache kinds present, in first-seen order."""
        return tuple(dict.fromkeys(r.kind for r in self.ranges))

    @property
    def has_unused(self) -> bool:
        """Whether any lane leaves bytes of the stride unused."""
        return any(lane.unused for lane in self.lanes)

    @property
    def unused_bytes(self) -> int:
        """Unused bytes summed over the lanes (a bucketed layout's holes)."""
        return sum(lane.unused_bytes for lane in self.lanes)

    def lane_ranges(self, lane: int) -> tuple[MapRange, ...]:
        """The ranges of lane `lane`, in placement order."""
        return tuple(r for r in self.ranges if r.lane == lane)

    def range(self, layer: str) -> MapRange:
        """The range of one layer's page; KeyError when the layer is not in the map."""
        for r in self.ranges:
            if r.layer == layer:
                return r
        raise KeyError(layer)

    def to_dict(self) -> dict:
        """JSON-able, for the live map: every number the browser draws, nothing it computes.
        Pages of one spec share one anatomy entry (a Pro map has 250 ranges, 9 anatomies)."""
        anatomy_index: dict[tuple, int] = {}
        ranges = [r.to_dict(anatomy_index.setdefault(r.anatomy_key, len(anatomy_index))) for r in self.ranges]
        first = {}
        for r in self.ranges:
            first.setdefault(r.anatomy_key, r)
        return {
            "planner": self.planner,
            "stride": self.stride,
            "stride_text": self.stride_text,
            "binding_group": self.binding_group,
            "binding_label": self.binding_label,
            "caption": self.caption,
            "overlay_note": self.overlay_note,
            "ticks": [{"at": t, "text": tick_label(t)} for t in byte_ticks(self.stride)],
            "lanes": [lane.to_dict(self.stride) for lane in self.lanes],
            "ranges": ranges,
            "anatomies": [first[key].anatomy() for key in anatomy_index],
            "kinds": [{"kind": k.key, "label": k.label, "color": KIND_COLORS[k]} for k in self.kinds],
            "colors": {"pad": PAD_COLOR, "unused": UNUSED_COLOR, "regions": REGION_COLORS},
        }


def block_map_data(layout: Layout, *, caption: str | None = None) -> BlockMapData:
    """The data of the layout's block map (its caption: planner and stride unless given).
    Lanes and unused ranges are the layout's (`Layout.group_total`, `Layout.unused_ranges`)."""
    require(isinstance(layout, Layout), f"layout: expected a kvviz Layout, got {type(layout).__name__}")
    names = [g.name for g in layout.groups]
    binding = layout.binding_group
    lanes = tuple(
        Lane(
            name=g.name,
            index=i,
            num_layers=len(g.layers),
            total=layout.group_total(i),
            unused=tuple(layout.unused_ranges(i)),
            binds=i == binding,
        )
        for i, g in enumerate(layout.groups)
    )
    ranges = []
    per_spec: dict[tuple, dict] = {}  # pages of one spec share their anatomy (computed once)
    for p in layout.placements:
        c = p.cache
        common = per_spec.get(c.spec_key)
        if common is None:
            row = c.row_format
            common = per_spec[c.spec_key] = dict(
                kind=c.kind,
                page_bytes=c.page_bytes,
                content_bytes=c.content_bytes,
                rows=c.rows,
                row_bytes=c.row_bytes,
                payload_bytes=row.payload_bytes,
                footer_bytes=row.footer_bytes,
                row_format=row.name,
                row_describe=row.describe(),
                part_names=row.part_names,
                regions=page_regions(row, c.rows, c.page_bytes),
            )
        ranges.append(MapRange(layer=p.name, group=names[p.group], lane=p.group, offset=p.offset, **common))
    if caption is None:
        caption = f"block map of the {layout.planner} layout, block stride {layout.block_stride:,} B"
    return BlockMapData(
        planner=layout.planner,
        stride=layout.block_stride,
        lanes=lanes,
        ranges=tuple(ranges),
        binding_group=None if binding is None else names[binding],
        caption=caption,
    )


def separate_pools_data(plan, *, caption: str) -> BlockMapData:
    """The map of a separate-pools `kvviz.core.plan.Plan`: one lane per pool, each its own pool's
    block drawn from byte 0 on one byte scale (the largest pool's block sets the width).

    Honest about what it is not: the pools share no block and no stride, so no lane binds, and the
    part of a lane past its own pool's block is marked as such (`Lane.block_end`), not as unused
    bytes. Each pool's lane and ranges are `block_map_data` of that pool's one-group layout,
    unchanged but for the lane index."""
    pools = getattr(plan, "pools", None)
    require(pools, f"plan: expected a kvviz Plan with pools, got {type(plan).__name__}")
    parts = [block_map_data(p) for p in pools]
    lanes, ranges = [], []
    for i, (d, pool) in enumerate(zip(parts, pools)):
        lanes.append(dataclasses.replace(d.lanes[0], index=i, binds=False, block_end=pool.block_stride))
        ranges.extend(dataclasses.replace(r, lane=i) for r in d.ranges)
    return BlockMapData(
        planner=plan.planner,
        stride=max(d.stride for d in parts),
        lanes=tuple(lanes),
        ranges=tuple(ranges),
        binding_group=None,
        caption=caption,
        separate=True,
    )


def as_block_map_data(layout, name: str = "layout") -> BlockMapData:
    """`layout` as block-map data: a BlockMapData unchanged, a Layout or a one-pool Plan through
    `block_map_data`, a separate-pools Plan through `separate_pools_data` (every pool drawn; the pools
    from kvviz.core.accept.pools_of); anything else is refused naming the argument `name`."""
    if isinstance(layout, BlockMapData):
        return layout
    pools = pools_of(layout, name)
    if len(pools) == 1:
        return block_map_data(pools[0])
    strides = ", ".join(f"{p.groups[0].name} {p.block_stride:,} B" for p in pools)
    return separate_pools_data(
        layout,
        caption=f"{len(pools)} separate pools of {layout.model}, one lane per pool, each one block of its own pool "
        f"({strides}) from byte 0 on one byte scale",
    )


def plan_heading(source) -> str | None:
    """What a figure drawn from `source` was planned from, for its title: the model and what was planned beyond it
    (`Plan.setting`: the KV dtype, the TP size and every knob given, i.e. each that differs from vLLM's default);
    None for a Layout or a data object, which carry no model."""
    plan = plan_of(source)
    if plan is None:
        return None
    return f"{plan.model} ({plan.setting})" if plan.setting else plan.model


def titled(heading: str | None, title: str) -> str:
    """`title` under a figure's heading ('heading: title'), or alone without one."""
    return f"{heading}: {title}" if heading else title
