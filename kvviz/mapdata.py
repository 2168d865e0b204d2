"""What a block map shows, as plain data: lanes, ranges, stride, binding group, page anatomy.

One `BlockMapData` feeds both drawings of a layout: the matplotlib figure of `kvviz.plot`
(files, reports, static notebook outputs) and the browser's live map of `kvviz.livemap`
(`to_dict()`), so the two cannot disagree. Light on purpose: no matplotlib, torch or ipywidgets.

Every lane is the same bytes [0, block_stride) of one block: under the overlay planners every
group starts at byte 0 of the same per-block slab (docs/overlay.md#the-overlay-in-one-paragraph).
"""

from __future__ import annotations

import dataclasses
import re

from .defaults import GIB
from .errors import require
from .formats import page_regions
from .core.kinds import CacheKind
from .core.layout import Layout

# One colour per cache kind, the same in every figure and in the live map (CacheKind's style record).
KIND_COLORS: dict[CacheKind, str] = {k: k.color for k in CacheKind}
PAD_COLOR = "#1a1a1a"  # alignment padding inside a page
UNUSED_COLOR = "#9a9a9a"  # hatch of bytes a group leaves unused
REGION_COLORS = {"payload": "#4c72b0", "footer": "#dd8452", "padding": PAD_COLOR}

_UNITS = (("GiB", GIB), ("MiB", GIB >> 10), ("KiB", GIB >> 20))


def format_bytes(n: int, *, max_decimals: int = 2) -> str:
    """Exact byte count in the largest power-of-two unit that shows it with at most
    `max_decimals` decimals: 2,560 -> '2.5 KiB', 1,310,720 -> '1.25 MiB', 1,315,008 -> '1,315,008 B'.
    Never rounds: a count no unit shows exactly is written in bytes."""
    require(isinstance(n, int) and n >= 0, f"n={n!r}: must be a non-negative integer")
    for unit, size in _UNITS:
        if n >= size:
            for d in range(max_decimals + 1):
                if (n * 10**d) % size == 0:
                    return f"{n / size:,.{d}f} {unit}"
    return f"{n:,} B"


def byte_ticks(stride: int, *, max_ticks: int = 8) -> list[int]:
    """Tick positions in [0, stride]: multiples of the smallest power-of-two step (>= 1 B) that
    gives at most `max_ticks` intervals, so that every tick label is exact (`format_bytes`)."""
    require(stride > 0, f"stride={stride}: must be positive")
    step = 1
    while stride // step > max_ticks:
        step *= 2
    return list(range(0, stride + 1, step))


def short_layer_name(name: str) -> str:
    """'model.layers.2.attn.indexer.k_cache' -> 'L2 indexer.k_cache', 'model.layers.4.linear_attn'
    and 'model.layers.0.self_attn.attn' -> 'L4', 'L0'; other names unchanged."""
    return re.sub(r"^model\.layers\.(\d+)\.(?:self_attn\.)?(?:linear_)?attn\b\.?", r"L\1 ", name).strip()


@dataclasses.dataclass(frozen=True)
class Region:
    """One part of a page: payload (all rows' payloads), footer (all rows' footers) or padding,
    bytes [offset + start, offset + end) of the block (`kvviz.formats.page_regions`)."""

    name: str
    start: int  # inside the page
    size: int

    @property
    def end(self) -> int:
        return self.start + self.size


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
    regions: tuple[Region, ...]
    part_names: tuple[str, str] = ("payload", "footer")  # the row's two parts (K/V, conv/SSM state)

    @property
    def end(self) -> int:
        return self.offset + self.page_bytes

    @property
    def padding_bytes(self) -> int:
        return self.page_bytes - self.content_bytes

    @property
    def anatomy_key(self) -> tuple:
        """Equal for pages of one spec (their anatomies are the same)."""
        return (self.kind, self.rows, self.row_describe, self.page_bytes)

    @property
    def short_name(self) -> str:
        return short_layer_name(self.layer)

    def tooltip(self) -> str:
        """What hovering the range shows (the live map writes the same lines from `to_dict`)."""
        return (f"{self.layer}\ngroup {self.group} · {self.kind.label}\n"
                f"offset {self.offset:,} B · page {_with_unit(self.page_bytes)} · end {self.end:,} B")

    def anatomy(self) -> dict:
        """The page's anatomy: rows, row format and its payload / footer / padding regions."""
        return {"rows": self.rows, "row_bytes": self.row_bytes, "payload_bytes": self.payload_bytes,
                "footer_bytes": self.footer_bytes, "content_bytes": self.content_bytes,
                "padding_bytes": self.padding_bytes, "row_format": self.row_format,
                "row_describe": self.row_describe,
                "regions": [{"name": r.name, "label": self.region_label(r.name), "start": r.start, "size": r.size,
                             "end": r.end} for r in self.regions]}

    def region_label(self, name: str) -> str:
        """'payload' / 'footer' named as the row format names its parts ('K', 'conv state', ...)."""
        return {"payload": self.part_names[0], "footer": self.part_names[1]}.get(name, name)

    def to_dict(self, anatomy: int) -> dict:
        """The range for the live map; `anatomy` indexes the map's list of distinct anatomies."""
        return {"layer": self.layer, "group": self.group, "lane": self.lane, "kind": self.kind.name.lower(),
                "offset": self.offset, "page_bytes": self.page_bytes, "end": self.end,
                "padding_bytes": self.padding_bytes, "page_text": _with_unit(self.page_bytes),
                "size_text": format_bytes(self.page_bytes), "anatomy": anatomy}


def _with_unit(n: int) -> str:
    """'8,640 B', or '4,608 B (4.5 KiB)' when a unit shows it exactly."""
    short = format_bytes(n)
    return f"{n:,} B" if short.endswith(" B") else f"{n:,} B ({short})"


@dataclasses.dataclass(frozen=True)
class Lane:
    """One group's lane: the group's pages over [0, stride) and what they leave unused."""

    name: str
    index: int
    num_layers: int
    total: int  # sum of the group's pages
    unused: tuple[tuple[int, int], ...]  # [lo, hi) ranges no page of the group covers
    binds: bool  # the group's total is the stride

    @property
    def unused_bytes(self) -> int:
        return sum(hi - lo for lo, hi in self.unused)

    def tooltip(self, stride: int) -> str:
        why = "binds the stride (its total is the stride)" if self.binds else "does not bind the stride"
        return (f"group {self.name}: {self.num_layers} layers, total {self.total:,} B ({format_bytes(self.total)})\n"
                f"unused: {self.unused_bytes:,} B of the {stride:,} B stride\n{why}")

    def to_dict(self, stride: int) -> dict:
        return {"name": self.name, "index": self.index, "num_layers": self.num_layers, "total": self.total,
                "unused": [list(r) for r in self.unused], "unused_bytes": self.unused_bytes, "binds": self.binds,
                "unused_text": [f"unused {format_bytes(hi - lo)}" for lo, hi in self.unused],
                "tooltip": self.tooltip(stride)}


@dataclasses.dataclass(frozen=True)
class BlockMapData:
    """Everything a block map draws. Build it with `block_map_data(layout)`."""

    planner: str
    stride: int
    lanes: tuple[Lane, ...]
    ranges: tuple[MapRange, ...]  # group by group, in the layout's placement order
    binding_group: str | None  # the lane whose total is the stride; None for bucketed layouts
    caption: str

    @property
    def binding_label(self) -> str:
        return self.binding_group if self.binding_group is not None else "none (sum of page-size buckets)"

    @property
    def overlay_note(self) -> str:
        """What every lane is: the same bytes of one block."""
        return f"every lane = bytes [0, {self.stride:,}) of the same block"

    @property
    def kinds(self) -> tuple[CacheKind, ...]:
        """Cache kinds present, in first-seen order."""
        return tuple(dict.fromkeys(r.kind for r in self.ranges))

    def lane_ranges(self, lane: int) -> tuple[MapRange, ...]:
        return tuple(r for r in self.ranges if r.lane == lane)

    def range(self, layer: str) -> MapRange:
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
            "planner": self.planner, "stride": self.stride, "stride_text": f"{self.stride:,} B",
            "binding_group": self.binding_group, "binding_label": self.binding_label, "caption": self.caption,
            "overlay_note": self.overlay_note,
            "ticks": [{"at": t, "text": format_bytes(t) if t else "0"} for t in byte_ticks(self.stride)],
            "lanes": [lane.to_dict(self.stride) for lane in self.lanes],
            "ranges": ranges,
            "anatomies": [first[key].anatomy() for key in anatomy_index],
            "kinds": [{"kind": k.key, "label": k.label, "color": KIND_COLORS[k]} for k in self.kinds],
            "colors": {"pad": PAD_COLOR, "unused": UNUSED_COLOR, "regions": REGION_COLORS},
        }


def block_map_data(layout: Layout, *, caption: str | None = None) -> BlockMapData:
    """The data of the layout's block map (its caption: planner and stride unless given)."""
    require(isinstance(layout, Layout), f"layout: expected a kvviz Layout, got {type(layout).__name__}")
    names = [g.name for g in layout.groups]
    binding = layout.binding_group
    lanes = tuple(Lane(name=g.name, index=i, num_layers=len(g.layers), total=layout.group_total(i),
                       unused=tuple(layout.unused_ranges(i)), binds=i == binding)
                  for i, g in enumerate(layout.groups))
    ranges = []
    per_spec: dict[tuple, dict] = {}  # pages of one spec share their anatomy (computed once)
    for p in layout.placements:
        c = p.cache
        common = per_spec.get(c.spec_key)
        if common is None:
            row = c.row_format
            common = per_spec[c.spec_key] = dict(
                kind=c.kind, page_bytes=c.page_bytes, content_bytes=c.content_bytes, rows=c.rows,
                row_bytes=c.row_bytes, payload_bytes=row.payload_bytes, footer_bytes=row.footer_bytes,
                row_format=row.name, row_describe=row.describe(), part_names=row.part_names,
                regions=tuple(Region(r.name, r.start, r.size) for r in page_regions(row, c.rows, c.page_bytes)))
        ranges.append(MapRange(layer=p.name, group=names[p.group], lane=p.group, offset=p.offset, **common))
    if caption is None:
        caption = f"block map of the {layout.planner} layout, block stride {layout.block_stride:,} B"
    return BlockMapData(planner=layout.planner, stride=layout.block_stride, lanes=lanes, ranges=tuple(ranges),
                        binding_group=None if binding is None else names[binding], caption=caption)
