"""Figures of a planned block: byte map, before/after, page anatomy, live bytes of a pool.

Every builder returns a `matplotlib.figure.Figure` made without pyplot (no global state, works
headless with Agg) and accepts a figure or axes to draw into. Showing and saving are separate
(`save_figure`, or `Figure.savefig`).

The x axis of every byte map is in BYTES (data units), so a drawn range's x and width are
exactly the bytes it stands for; only the tick labels are in KiB.

Ranges are drawn as `PolyCollection`s, one collection per style (pages, padding bands, unused
ranges, ...), one polygon per byte range, never per byte and never merged: adjacent pages of one
kind stay separate polygons. (One `Rectangle` artist per range costs about 0.5 ms to build and
draw; 500 of them alone blow the 300 ms budget of a DeepSeek-V4-Pro map.) `find_patches` returns
a `RangePatch` per range, which reads the collection's own vertices and colours and answers like
a Rectangle; `patch_ranges` returns what each range stands for (`PatchRange`). Their gids:

    page:<layer>            one layer's page [offset, offset + page_bytes)  (exactly one a page)
    pad:<layer>             its alignment padding [offset + content, end)   (one a padded page)
    unused:<group>:<start>  one contiguous range the group leaves unused    (tail or hole)
    saved                   before_after: [after stride, before stride)
    region:<name>           page_anatomy: payload / footer / padding of the page
    field:<name>            page_anatomy: one field of one row (group = payload or footer)
    span:<block>:<layer>    live_bytes: the owner group's layer range in that block
    plane:<layer>           pool_planes: one layer's plane [start, start + num_blocks x page)
    page:<block>:<layer>    pool_planes: that layer's page of one shown block (pad:<block>:<layer>
                            its padding); the unused plane of a short group is an `unused` range
    victim:<block>:<start>  live_bytes: a victim range, red outline

before_after prefixes the gids of each panel with "before/" and "after/". A collection's own
gid (in SVG output) is its role, e.g. "page" or "before/page".
"""

from __future__ import annotations

import dataclasses
import io
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.text import Text
from matplotlib.patches import Rectangle  # the binding lane's outline and the nibble boxes of page_anatomy
from matplotlib.ticker import FixedLocator, FixedFormatter
from matplotlib.transforms import blended_transform_factory

from .errors import require
from .formats import page_regions
from .core.layout import Layout
from .mapdata import (KIND_COLORS, PAD_COLOR, REGION_COLORS, UNUSED_COLOR, BlockMapData, block_map_data,
                      byte_ticks, format_bytes, short_layer_name)
from .core.kinds import CacheKind
from .core.spec import CacheSpec

__all__ = ["KIND_COLORS", "PAD_COLOR", "UNUSED_COLOR", "REGION_COLORS", "short_layer_name", "format_bytes"]

HOLE_COLOR = "#d62728"  # hatch of the bucketed layout's holes in before_after
SAVED_COLOR = "#2ca02c"
VICTIM_COLOR = "#e41a1c"
ELEMENT_COLORS = {"E4M3": "#4c72b0", "E2M1": "#64b5cd", "UE8M0": "#dd8452", "bf16": "#55a868",
                  "fp32": "#8172b3", "pad": "#555555", "byte": "#17becf"}

DEFAULT_DPI = 100
_LANE_H = 0.42  # inches per group lane
# Margins of the lanes: the left one holds the group labels; the right one half a tick label, so
# that a tick at the stride is not cut off.
_LEFT_IN, _RIGHT_IN = 1.75, 0.45
# A kind (or the padding) whose widest range is narrower than this many pixels is invisible: it
# gets a line in the sliver note instead of a legend entry nobody could find in the figure.
MIN_VISIBLE_PX = 3.0
_LEGEND_ROW_H = 0.22


@dataclasses.dataclass(frozen=True)
class PatchRange:
    """What one drawn range stands for: bytes [start, end) of `layer` / `group` (module doc)."""

    role: str  # page, pad, unused, saved, region, field, span, victim, plane
    start: int
    end: int
    group: str | None = None
    layer: str | None = None
    cache_kind: CacheKind | None = None
    block: int | None = None
    panel: str | None = None  # "before" / "after" in before_after

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def gid(self) -> str:
        if self.role in ("page", "pad") and self.block is not None:  # pool_planes: one block's page
            gid = f"{self.role}:{self.block}:{self.layer}"
        elif self.role in ("page", "pad", "region", "field", "plane"):
            gid = f"{self.role}:{self.layer}"
        elif self.role == "unused":
            gid = f"unused:{self.group}:{self.start}"
        elif self.role == "span":
            gid = f"span:{self.block}:{self.layer}"
        elif self.role == "victim":
            gid = f"victim:{self.block}:{self.start}"
        else:
            gid = self.role
        return f"{self.panel}/{gid}" if self.panel else gid


class RangePatch:
    """One drawn byte range: item `index` of a `PolyCollection` (the figure's ink).

    It answers like a `Rectangle` (get_x, get_width, get_y, get_height, get_facecolor,
    get_edgecolor, get_hatch, get_gid), reading the collection's own vertices and colours, so a
    test of it tests what is drawn. `info` is the `PatchRange` the range stands for.
    """

    __slots__ = ("collection", "index", "info")

    def __init__(self, collection: PolyCollection, index: int, info: PatchRange) -> None:
        self.collection, self.index, self.info = collection, index, info

    def __repr__(self) -> str:
        return f"RangePatch({self.get_gid()!r}, x={self.get_x():,.0f}, width={self.get_width():,.0f})"

    @property
    def axes(self):
        return self.collection.axes

    def _vertices(self) -> np.ndarray:
        return self.collection.get_paths()[self.index].vertices

    def get_x(self) -> float:
        return float(self._vertices()[:, 0].min())

    def get_width(self) -> float:
        v = self._vertices()[:, 0]
        return float(v.max() - v.min())

    def get_y(self) -> float:
        return float(self._vertices()[:, 1].min())

    def get_height(self) -> float:
        v = self._vertices()[:, 1]
        return float(v.max() - v.min())

    def _pick(self, colors) -> tuple:
        colors = np.asarray(colors)
        if len(colors) == 0:
            return (0.0, 0.0, 0.0, 0.0)
        return tuple(float(c) for c in colors[self.index % len(colors)])

    def get_facecolor(self) -> tuple:
        return self._pick(self.collection.get_facecolor())

    def get_edgecolor(self) -> tuple:
        return self._pick(self.collection.get_edgecolor())

    def get_hatch(self) -> str | None:
        return self.collection.get_hatch()

    def get_gid(self) -> str:
        return self.info.gid


# ---- helpers: byte ranges, formatting -------------------------------------------------------
def _byte_axis(ax, stride: int, *, label: bool = True) -> None:
    """x in bytes, limits [0, stride]; ticks at multiples of a power-of-two step, labelled exactly
    (`kvviz.mapdata.byte_ticks` and `format_bytes`: 2,560 B is '2.5 KiB', never a rounded '2')."""
    ax.set_xlim(0, stride)
    ticks = byte_ticks(stride)
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FixedFormatter([format_bytes(t) if t else "0" for t in ticks]))
    if label:
        ax.set_xlabel("offset in the block", fontsize=8)
    ax.tick_params(axis="x", labelsize=7)


def _draw_ranges(ax, infos: Sequence[PatchRange], y0, height, *, facecolors, zorder: float = 1.0,
                 **style) -> PolyCollection | None:
    """One polygon per range: x [start, end), y [y0, y0 + height) (scalars or one per range)."""
    n = len(infos)
    if n == 0:
        return None
    x0 = np.fromiter((r.start for r in infos), float, n)
    x1 = np.fromiter((r.end for r in infos), float, n)
    y0 = np.broadcast_to(np.asarray(y0, float), (n,))
    y1 = y0 + np.broadcast_to(np.asarray(height, float), (n,))
    verts = np.empty((n, 4, 2))
    verts[:, 0, 0] = verts[:, 3, 0] = x0
    verts[:, 1, 0] = verts[:, 2, 0] = x1
    verts[:, :2, 1] = y0[:, None]
    verts[:, 2:, 1] = y1[:, None]
    style.setdefault("linewidths", 0)
    pc = PolyCollection(verts, closed=True, facecolors=facecolors, zorder=zorder, **style)
    first = infos[0]
    pc.set_gid(f"{first.panel}/{first.role}" if first.panel else first.role)
    pc.kvviz_ranges = tuple(infos)
    ax.add_collection(pc, autolim=False)
    return pc


# ---- finding what is drawn in a finished figure -------------------------------------------
def _all_ranges(fig: Figure):
    for ax in fig.axes:
        for coll in ax.collections:
            for i, info in enumerate(getattr(coll, "kvviz_ranges", ())):
                yield RangePatch(coll, i, info)


def find_patches(fig: Figure, *, kind: str | None = None, layer: str | None = None, group: str | None = None,
                 cache_kind: CacheKind | None = None, block: int | None = None,
                 panel: str | None = None) -> list[RangePatch]:
    """The drawn ranges of a figure that match every given filter, in drawing order.

    kind: the role ('page', 'pad', 'unused', 'saved', 'region', 'field', 'span', 'victim', 'plane');
    layer / group: names; cache_kind: a CacheKind; block: a pool block (live_bytes);
    panel: 'before' or 'after' (before_after).
    """
    out = []
    for p in _all_ranges(fig):
        r = p.info
        if ((kind is None or r.role == kind) and (layer is None or r.layer == layer)
                and (group is None or r.group == group) and (cache_kind is None or r.cache_kind == cache_kind)
                and (block is None or r.block == block) and (panel is None or r.panel == panel)):
            out.append(p)
    return out


def patch_ranges(fig: Figure, **filters) -> list[PatchRange]:
    """What every drawn range stands for (same filters as `find_patches`)."""
    return [p.info for p in find_patches(fig, **filters)]


def figure_texts(fig: Figure) -> list[str]:
    """Every non-empty text of a figure: titles, annotations, tick labels, legend entries."""
    return [t.get_text() for t in fig.findobj(Text) if t.get_text()]


def legend_labels(fig: Figure) -> list[str]:
    """The labels of the figure's key (and of any matplotlib legend added to it)."""
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    key = [t.get_text() for t in fig.texts if t.get_gid() == "key"]
    return key + [t.get_text() for lg in legends for t in lg.get_texts()]


def save_figure(fig: Figure, path, *, dpi: int = DEFAULT_DPI) -> None:
    """Write a figure; the format follows the suffix (png, svg, pdf). Deterministic metadata."""
    fmt = Path(path).suffix.lstrip(".").lower() or "png"
    metadata = {"png": {"Software": "kvviz"}, "svg": {"Date": None, "Creator": "kvviz"},
                "pdf": {"CreationDate": None}}.get(fmt)
    fig.savefig(path, format=fmt, dpi=dpi, metadata=metadata)


def to_png_bytes(fig: Figure, *, dpi: int = DEFAULT_DPI) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": "kvviz"})
    return buf.getvalue()


# ---- block map ----------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class KeyEntry:
    """One entry of a figure's key (legend): a swatch and its label."""

    label: str
    facecolor: str
    edgecolor: str = "none"
    hatch: str | None = None
    alpha: float = 1.0


def _key_entries(kinds, *, padding: bool, unused: bool, holes: bool = False, saved: bool = False,
                 victims: bool = False, padding_label: str = "alignment padding") -> list[KeyEntry]:
    out = [KeyEntry(k.label, KIND_COLORS[k]) for k in kinds]
    if padding:
        out.append(KeyEntry(padding_label, PAD_COLOR))
    if unused:
        out.append(KeyEntry("unused by the group", "white", UNUSED_COLOR, "////"))
    if holes:
        out.append(KeyEntry("hole (bucketed)", "white", HOLE_COLOR, "////"))
    if saved:
        out.append(KeyEntry("saved per block", SAVED_COLOR, alpha=0.25))
    if victims:
        out.append(KeyEntry("victim range", "none", VICTIM_COLOR))
    return out


_KEY_FONT = 7.5
_KEY_CHAR_W = 0.058  # inches per character at 7.5 pt (DejaVu Sans, generous)
_KEY_SWATCH = (0.2, 0.11)  # inches


def _key_shape(entries: Sequence[KeyEntry], avail_in: float) -> tuple[int, int, float]:
    """(columns, rows, column width in inches) of a key that fits `avail_in` inches."""
    if not entries:
        return 1, 0, 0.0
    colw = _KEY_SWATCH[0] + 0.25 + _KEY_CHAR_W * max(len(e.label) for e in entries)
    ncol = max(1, min(len(entries), int(avail_in // colw)))
    return ncol, -(-len(entries) // ncol), colw


def _key_below(ax, entries: Sequence[KeyEntry], *, offset_in: float = 0.5, note: str = "") -> None:
    """The key as a grid under the axes: swatches in collections, labels as texts (gid "key").

    Drawn by hand: matplotlib's Legend lays its texts out several times and costs about as much
    as all the pages of a 250-layer map together.
    """
    fig = ax.figure
    w, h = fig.get_size_inches()
    pos = ax.get_position()
    ncol, nrows, colw = _key_shape(entries, pos.width * w)
    if note:  # under the key: what is too thin to see at this scale
        fig.text(pos.x0, (pos.y0 * h - offset_in - nrows * _LEGEND_ROW_H - 0.04) / h, note, fontsize=_KEY_FONT,
                 color="#444444", ha="left", va="top", gid="sliver-note")
    if not entries:
        return
    left = (pos.x0 + pos.width / 2) * w - ncol * colw / 2
    top = pos.y0 * h - offset_in
    sw, sh = _KEY_SWATCH
    styles: dict[tuple, list] = {}
    for i, e in enumerate(entries):
        x, y = left + (i % ncol) * colw, top - (i // ncol) * _LEGEND_ROW_H
        verts = [(x / w, (y - sh) / h), ((x + sw) / w, (y - sh) / h), ((x + sw) / w, y / h), (x / w, y / h)]
        styles.setdefault((e.facecolor, e.edgecolor, e.hatch, e.alpha), []).append(verts)
        fig.text((x + sw + 0.07) / w, (y - sh / 2) / h, e.label, fontsize=_KEY_FONT, va="center", ha="left",
                 gid="key")
    for (face, edge, hatch, alpha), verts in styles.items():
        fig.add_artist(PolyCollection(verts, facecolors=face, edgecolors=edge, hatch=hatch, alpha=alpha,
                                      linewidths=0.8 if edge != "none" else 0, transform=fig.transFigure,
                                      gid="key"))


def _padding_label(datas: Sequence[BlockMapData]) -> str:
    """What the padding of these maps is: a hybrid model's state pages padded up to the attention
    page (docs/hybrid.md#hybrid-caches), alignment padding, or both."""
    kinds = {r.kind.is_state for d in datas for r in d.ranges if r.padding_bytes}
    if kinds == {True}:
        return "padding (state page grown to the attention page)"
    return "padding (alignment, or a state page grown)" if kinds == {True, False} else "alignment padding"


def _lane_label(data: BlockMapData, i: int) -> str:
    lane = data.lanes[i]
    star = "  ◀ binds" if lane.binds else ""
    return f"{lane.name}{star}\n{lane.num_layers} layers · {lane.total:,} B"


# A label fits a range when the range is wider than its text (7 pt, ~0.058 in a character) plus a margin.
_LABEL_CHAR_W = 0.058
_LABEL_MARGIN_IN = 0.08
MIN_VISIBLE_IN = MIN_VISIBLE_PX / DEFAULT_DPI


def _fits(width_in: float, text: str) -> bool:
    return width_in > _LABEL_CHAR_W * max(map(len, text.splitlines())) + _LABEL_MARGIN_IN


def _as_data(layout, name: str = "layout") -> BlockMapData:
    if isinstance(layout, BlockMapData):
        return layout
    require(isinstance(layout, Layout), f"{name}: expected a kvviz Layout, got {type(layout).__name__}")
    return block_map_data(layout)


@dataclasses.dataclass(frozen=True)
class Visibility:
    """Which kinds a block map can show at its scale: a kind whose widest page is narrower than
    MIN_VISIBLE_IN (and the padding, likewise) goes into the sliver note, not the legend."""

    visible: tuple[CacheKind, ...]
    slivers: tuple[CacheKind, ...]
    padding_visible: bool
    max_padding: int
    padding_label: str = "alignment padding"  # what the padding is (`_padding_label`)

    def note(self, datas: Sequence[BlockMapData]) -> str:
        parts = []
        for k in self.slivers:
            rs = next([r for r in d.ranges if r.kind is k] for d in datas if k in d.kinds)
            sizes = sorted({r.page_bytes for r in rs})
            size = " to ".join(format_bytes(x) for x in dict.fromkeys((sizes[0], sizes[-1])))
            groups = ", ".join(dict.fromkeys(r.group for r in rs))
            parts.append(f"{k.label}: {len(rs)} pages of {size} in {groups}")
        if self.max_padding and not self.padding_visible:
            parts.append(f"{self.padding_label}: at most {format_bytes(self.max_padding)} a page")
        return ("too thin to see at this scale: " + "; ".join(parts)) if parts else ""


def _visibility(datas: Sequence[BlockMapData], in_per_byte: Sequence[float], *, show_padding: bool) -> Visibility:
    widest: dict[CacheKind, float] = {}  # widest run of adjacent pages of the kind in one lane
    pad_in, max_pad = 0.0, 0
    for d, scale in zip(datas, in_per_byte):
        for lane in d.lanes:
            run_kind, run_start, run_end = None, 0, 0
            for r in sorted(d.lane_ranges(lane.index), key=lambda r: r.offset) + [None]:
                if r is not None and r.kind is run_kind and r.offset == run_end:
                    run_end = r.end
                    continue
                if run_kind is not None:
                    widest[run_kind] = max(widest.get(run_kind, 0.0), (run_end - run_start) * scale)
                if r is not None:
                    run_kind, run_start, run_end = r.kind, r.offset, r.end
        for r in d.ranges:
            if show_padding:
                pad_in = max(pad_in, r.padding_bytes * scale)
                max_pad = max(max_pad, r.padding_bytes)
    kinds = list(dict.fromkeys(k for d in datas for k in d.kinds))
    return Visibility(visible=tuple(k for k in kinds if widest[k] >= MIN_VISIBLE_IN),
                      slivers=tuple(k for k in kinds if widest[k] < MIN_VISIBLE_IN),
                      padding_visible=pad_in >= MIN_VISIBLE_IN, max_padding=max_pad,
                      padding_label=_padding_label(datas))


def _axes_width_in(ax) -> float:
    return ax.figure.get_figwidth() * ax.get_position().width


def _draw_lanes(ax, data: BlockMapData, *, show_padding: bool, panel: str | None = None,
                unused_color: str = UNUSED_COLOR, lane_h: float = 0.8, scale_bytes: int | None = None) -> None:
    """One lane per group at y = group index: pages, padding bands, unused ranges, the binding
    group's outline, and the byte sizes of the ranges wide enough to carry them."""
    n = len(data.lanes)
    half = lane_h / 2
    pages, pads, page_y, pad_y, colors = [], [], [], [], []
    for r in data.ranges:
        pages.append(PatchRange("page", r.offset, r.end, r.group, r.layer, r.kind, panel=panel))
        page_y.append(r.lane - half)
        colors.append(KIND_COLORS[r.kind])
        if show_padding and r.padding_bytes > 0:
            pads.append(PatchRange("pad", r.end - r.padding_bytes, r.end, r.group, r.layer, r.kind, panel=panel))
            pad_y.append(r.lane + half - 0.4 * lane_h)
    # White page edges keep neighbouring pages of one kind apart, unless pages are so narrow
    # (thousands of layers) that the edges would wash the colours out. The padding band covers
    # the lower 40% of the lane so the page colour stays visible above it.
    in_per_byte = _axes_width_in(ax) / (scale_bytes or data.stride)
    px_per_byte = in_per_byte * ax.figure.dpi
    median_px = float(np.median([r.size for r in pages])) * px_per_byte
    _draw_ranges(ax, pages, page_y, lane_h, facecolors=colors, edgecolors="white",
                 linewidths=0.3 if median_px >= 4 else 0)
    _draw_ranges(ax, pads, pad_y, 0.4 * lane_h, facecolors=PAD_COLOR, zorder=1.1, snap=False)
    unused, unused_y = [], []
    for lane in data.lanes:
        for lo, hi in lane.unused:
            unused.append(PatchRange("unused", lo, hi, lane.name, panel=panel))
            unused_y.append(lane.index - half)
            label = f"unused {format_bytes(hi - lo)}"
            if _fits((hi - lo) * in_per_byte, label):
                ax.text((lo + hi) / 2, lane.index, label, ha="center", va="center", fontsize=7, zorder=3,
                        color="#333333", gid="size", bbox=dict(boxstyle="square,pad=0.15", facecolor="white",
                                                             edgecolor="none"))
    _draw_ranges(ax, unused, unused_y, lane_h, facecolors="white", edgecolors=unused_color, hatch="////")
    # Byte sizes (and, in lanes of a few pages, layer names) on the pages wide enough to carry them.
    for lane in data.lanes:
        ranges = data.lane_ranges(lane.index)
        for r in ranges:
            width_in = r.page_bytes * in_per_byte
            size = format_bytes(r.page_bytes)
            named = f"{r.short_name}\n{size}"
            label = named if len(ranges) <= 24 and _fits(width_in, named) else size if _fits(width_in, size) else None
            if label:
                ax.text(r.offset + r.page_bytes / 2, lane.index, label, ha="center", va="center", fontsize=7,
                        zorder=3, color="white", gid="size")
    binding = [lane.index for lane in data.lanes if lane.binds]
    for i in binding:
        ax.add_patch(Rectangle((0, i - half - 0.06), data.stride, lane_h + 0.12, facecolor="none",
                               edgecolor="black", linewidth=1.4, zorder=4, gid="binding", clip_on=False))
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_yticks(range(n), [_lane_label(data, i) for i in range(n)], fontsize=7.5)
    for i in binding:
        ax.get_yticklabels()[i].set_fontweight("bold")
    ax.tick_params(axis="y", length=0)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _stride_line(ax, stride: int, text: str, *, color="black") -> None:
    ax.axvline(stride, color=color, linewidth=1.0, linestyle="--", zorder=4)
    ax.annotate(text, xy=(stride, 1.0), xycoords=("data", "axes fraction"), xytext=(-3, 3),
                textcoords="offset points", ha="right", va="bottom", fontsize=7.5, color=color, gid="stride-mark")


def _overlay_bracket(ax, data: BlockMapData) -> None:
    """A bracket over the lanes from byte 0 to the stride, saying that every lane is those same
    bytes of one block, and the stride marked at its right end (dashed line down the lanes)."""
    h_in = ax.figure.get_figheight() * ax.get_position().height
    y0, y1 = 1 + 0.05 / h_in, 1 + 0.11 / h_in
    trans = blended_transform_factory(ax.transData, ax.transAxes)
    ax.add_line(Line2D([0, 0, data.stride, data.stride], [y0, y1, y1, y0], transform=trans, color="#333333",
                       linewidth=0.9, clip_on=False, gid="bracket"))
    ax.axvline(data.stride, color="black", linewidth=1.0, linestyle="--", zorder=4)
    ax.annotate(data.overlay_note, xy=(0, y1), xycoords=trans, xytext=(2, 2), textcoords="offset points",
                ha="left", va="bottom", fontsize=7.5, color="#333333", gid="overlay-note")
    ax.annotate(f"stride {data.stride:,} B", xy=(data.stride, y1), xycoords=trans, xytext=(0, 2),
                textcoords="offset points", ha="right", va="bottom", fontsize=7.5, fontweight="bold",
                gid="stride-mark")


class KvvizFigure(Figure):
    """A matplotlib `Figure` that draws itself in Jupyter with any backend: kvviz builds figures
    without pyplot (no figure manager), so IPython would otherwise print `<Figure size ...>` unless
    the notebook selected `%matplotlib inline`; `_repr_png_` is IPython's rich display hook."""

    def _repr_png_(self) -> bytes:
        return to_png_bytes(self)


def _new_figure(width: float, height: float) -> Figure:
    return KvvizFigure(figsize=(width, height), dpi=DEFAULT_DPI)


def _place_axes(fig: Figure, *, left: float, right: float, top: float, bottom: float):
    """An axes with margins given in inches (no layout engine: predictable and fast)."""
    w, h = fig.get_size_inches()
    return fig.add_axes((left / w, bottom / h, 1 - (left + right) / w, 1 - (top + bottom) / h))


def block_map_title(layout) -> str:
    data = _as_data(layout)
    return f"{data.planner} layout: block stride {data.stride:,} B; binding group: {data.binding_label}"


_NOTE_H = 0.22  # inches of the sliver note under the key


def block_map(layout: Layout | BlockMapData, *, ax=None, show_padding: bool = True, title: str | None = None,
              width: float = 12.0) -> Figure:
    """The block's bytes [0, block_stride) across, one lane per group, drawn from
    `kvviz.mapdata.block_map_data(layout)` (a BlockMapData works too: the live map's data).

    One range per layer page (coloured by cache kind), one per padding range (a dark band at the
    bottom of the page's tail) and one per unused range (hatched, its size written when it fits);
    a bracket over the lanes saying that every lane is the same bytes [0, stride) of one block;
    the stride marked at its end; the binding group outlined and flagged; byte sizes on ranges
    wide enough; a legend of the kinds visible at this scale and a note naming the slivers.
    """
    data = _as_data(layout)
    has_unused = any(lane.unused for lane in data.lanes)
    if ax is None:
        plot_w = width - _LEFT_IN - _RIGHT_IN
    else:
        plot_w = _axes_width_in(ax)
    vis = _visibility([data], [plot_w / data.stride], show_padding=show_padding)
    entries = _key_entries(vis.visible, padding=vis.padding_visible, unused=has_unused,
                           padding_label=vis.padding_label)
    note = vis.note([data])
    if ax is None:
        n = len(data.lanes)
        _, key_rows, _ = _key_shape(entries, plot_w)
        bottom = 0.6 + key_rows * _LEGEND_ROW_H + 0.1 + (_NOTE_H if note else 0)
        fig = _new_figure(width, 0.8 + n * _LANE_H + bottom)
        ax = _place_axes(fig, left=_LEFT_IN, right=_RIGHT_IN, top=0.8, bottom=bottom)
    fig = ax.figure
    _draw_lanes(ax, data, show_padding=show_padding)
    _byte_axis(ax, data.stride)
    _overlay_bracket(ax, data)
    ax.set_title(f"{title}: {block_map_title(data)}" if title else block_map_title(data), fontsize=9.5,
                 loc="left", pad=24)
    _key_below(ax, entries, note=note)
    return fig


# ---- before / after -----------------------------------------------------------------------
def before_after(before: Layout | BlockMapData, after: Layout | BlockMapData, *, fig: Figure | None = None,
                 show_padding: bool = True, labels: tuple[str, str] = ("before", "after"),
                 width: float = 12.0) -> Figure:
    """Both layouts on one x scale (the larger stride, normally the before one): both strides,
    the bytes and percentage saved per block, the binding groups outlined, and the holes of a
    bucketed layout in red."""
    datas = (_as_data(before, "before"), _as_data(after, "after"))
    db, da = datas
    scale = max(db.stride, da.stride)
    saved = db.stride - da.stride
    pct = 100.0 * (da.stride - db.stride) / db.stride
    holes = [d.binding_group is None for d in datas]
    left, right = _LEFT_IN, _RIGHT_IN
    plot_w = width - left - right
    vis = _visibility(datas, [plot_w / scale] * 2, show_padding=show_padding)
    has_unused = any(lane.unused for d, hole in zip(datas, holes) if not hole for lane in d.lanes)
    entries = _key_entries(vis.visible, padding=vis.padding_visible, unused=has_unused, holes=any(holes),
                           saved=saved > 0, padding_label=vis.padding_label)
    note = vis.note(datas)
    nb, na = len(db.lanes), len(da.lanes)
    _, key_rows, _ = _key_shape(entries, plot_w)
    top, gap, bottom = 1.0, 0.55, 0.6 + key_rows * _LEGEND_ROW_H + 0.1 + (_NOTE_H if note else 0)
    if fig is None:
        fig = _new_figure(width, top + (nb + na) * _LANE_H + gap + bottom)
    w, h = fig.get_size_inches()
    plot_h = h - top - gap - bottom
    hb = plot_h * nb / (nb + na)
    ax_b = fig.add_axes((left / w, (bottom + (plot_h - hb) + gap) / h, 1 - (left + right) / w, hb / h))
    ax_a = fig.add_axes((left / w, bottom / h, 1 - (left + right) / w, (plot_h - hb) / h), sharex=ax_b)
    for ax, data, panel, label in ((ax_b, db, "before", labels[0]), (ax_a, da, "after", labels[1])):
        hole = data.binding_group is None
        _draw_lanes(ax, data, show_padding=show_padding, panel=panel,
                    unused_color=HOLE_COLOR if hole else UNUSED_COLOR, scale_bytes=scale)
        _stride_line(ax, data.stride, f"{label} stride {data.stride:,} B")
        text = f"{label}: {data.planner}, binding group: {data.binding_label}"
        if hole:
            unused = sum(lane.unused_bytes for lane in data.lanes)
            text += f"; holes (red hatch): {unused:,} B unused, summed over the groups"
        ax.set_title(text, fontsize=8.5, loc="left", pad=13)
    if saved > 0:
        _draw_ranges(ax_a, [PatchRange("saved", da.stride, db.stride, panel="after")], -0.5, na,
                     facecolors=SAVED_COLOR, alpha=0.25, zorder=0.5)
        ax_a.text(da.stride + saved / 2, (na - 1) / 2, f"saved\n{saved:,} B\n({pct:+.2f}%)",
                  ha="center", va="center", fontsize=7.5, color="#1b5e20", zorder=3)
    _byte_axis(ax_a, scale)
    ax_b.tick_params(axis="x", labelbottom=False)
    change = "saved" if saved > 0 else "added"
    fig.suptitle(f"block stride {db.stride:,} B → {da.stride:,} B: {pct:+.2f}% "
                 f"({abs(saved):,} B per block {change})", x=left / w, ha="left", y=1 - 0.12 / h,
                 va="top", fontsize=10)
    fig.text(left / w, 1 - 0.42 / h, "every lane = bytes [0, stride) of the same block of its layout; "
             "dashed lines mark each stride; the binding group is outlined", ha="left", va="top", fontsize=8,
             color="#333333", gid="overlay-note")
    _key_below(ax_a, entries, note=note)
    return fig


# ---- pool as layer planes x blocks (layer-outermost) --------------------------------------
# Blocks whose pages pool_planes draws when none are named: every block of a pool this small.
PLANE_PAGES_MAX_BLOCKS = 8
_MIN_TICK_PX = 3.0  # block boundaries closer than this many pixels are not drawn


def _plane_label(layer: str) -> str:
    """'model.layers.12.linear_attn' -> 'L12' (a plane is too narrow for the whole name)."""
    m = re.search(r"layers\.(\d+)\.", layer)
    return f"L{m.group(1)}" if m else short_layer_name(layer)


def pool_planes(layout: Layout, num_blocks: int, *, blocks_shown: Sequence[int] | None = None,
                fig: Figure | None = None, width: float = 12.0) -> Figure:
    """The pool in vLLM's layer-outermost arrangement (`kvviz.core.planes.layer_planes`): one row per
    tensor, x = bytes [0, bytes per block x num_blocks) of the pool; each layer's plane is one
    range (layer stride = num_blocks x page, coloured by kind, labelled `L<i>` where it fits),
    the blocks are subdivisions of a plane (block stride = page): white ticks where they are at
    least 3 px apart, and the pages of `blocks_shown` drawn inside every plane (default: every
    block when num_blocks <= 8), with a state page's padding as a dark band. A group one layer
    short leaves an unused plane, hatched like unused bytes of a block map.
    Every tensor starts at byte 0 of the same pool (docs/hybrid.md#hybrid-planners).
    """
    from .core.planes import layer_planes

    require(isinstance(layout, Layout), f"layout: expected a kvviz Layout, got {type(layout).__name__}")
    tensors = layer_planes(layout, num_blocks)  # checks num_blocks
    if blocks_shown is None:
        blocks_shown = range(num_blocks) if num_blocks <= PLANE_PAGES_MAX_BLOCKS else ()
    blocks_shown = list(blocks_shown)
    for b in blocks_shown:
        require(isinstance(b, (int, np.integer)) and not isinstance(b, bool) and 0 <= b < num_blocks,
                f"blocks_shown: block {b!r} is outside the pool's {num_blocks} blocks")
    blocks_shown = sorted({int(b) for b in blocks_shown})
    size = layout.block_stride * num_blocks
    kind_of = {p.name: p.cache.kind for p in layout.placements}
    cache_of = {p.name: p.cache for p in layout.placements}
    n = len(tensors)
    per_group: dict[str, int] = {}
    for t in tensors:
        per_group[t.group] = per_group.get(t.group, 0) + 1
    kinds = list(dict.fromkeys(kind_of[pl.layer] for t in tensors for pl in t.planes if pl.layer is not None))
    has_unused = any(pl.layer is None for t in tensors for pl in t.planes)
    padded_kinds = {c.kind for c in cache_of.values() if c.padding_bytes} if blocks_shown else set()
    entries = _key_entries(kinds, padding=bool(padded_kinds), unused=False, padding_label=(
        "padding (state page grown to the attention page)" if padded_kinds and all(k.is_state for k in padded_kinds)
        else "alignment padding"))
    if has_unused:
        entries.append(KeyEntry("unused plane(s) of a short group", "white", UNUSED_COLOR, "////"))
    if blocks_shown:
        entries.append(KeyEntry("one block's page (block stride = page)", "white", "#333333"))
    plot_w = width - _LEFT_IN - _RIGHT_IN
    _, key_rows, _ = _key_shape(entries, plot_w)
    top, bottom = 0.75, 0.6 + key_rows * _LEGEND_ROW_H + 0.1
    lane_in = 0.5
    if fig is None:
        fig = _new_figure(width, top + n * lane_in + bottom)
    ax = _place_axes(fig, left=_LEFT_IN, right=_RIGHT_IN, top=top, bottom=bottom)
    in_per_byte = _axes_width_in(ax) / size
    px_per_byte = in_per_byte * fig.dpi
    lane_h, half = 0.8, 0.4
    planes, plane_y, plane_colors, unused, unused_y = [], [], [], [], []
    pages, page_y, page_colors, pads, pad_y = [], [], [], [], []
    ticks: list[list[tuple[float, float]]] = []
    seen: dict[str, int] = {}
    labels = []
    for row, t in enumerate(tensors):
        k = seen[t.group] = seen.get(t.group, -1) + 1
        name = t.group if per_group[t.group] == 1 else f"{t.group} (tensor {k})"
        layers = sum(pl.layer is not None for pl in t.planes)
        tick_blocks = not blocks_shown and t.page_bytes * px_per_byte >= _MIN_TICK_PX
        label_y = row - 0.2 if (blocks_shown or tick_blocks) else row  # above the pages / ticks
        labels.append(f"{name} @ {t.offset:,}\n{layers} layers · page {t.page_bytes:,} B")
        for i, pl in enumerate(t.planes):
            if pl.layer is None:
                unused.append(PatchRange("unused", pl.start, pl.end, t.group))
                unused_y.append(row - half)
                text = f"unused plane {format_bytes(pl.end - pl.start)}"
                if _fits((pl.end - pl.start) * in_per_byte, text):
                    ax.text((pl.start + pl.end) / 2, row, text, ha="center", va="center", fontsize=7, zorder=3,
                            color="#333333", gid="size", bbox=dict(boxstyle="square,pad=0.15", facecolor="white",
                                                                 edgecolor="none"))
                continue
            kind = kind_of[pl.layer]
            planes.append(PatchRange("plane", pl.start, pl.end, t.group, pl.layer, kind))
            plane_y.append(row - half)
            plane_colors.append(KIND_COLORS[kind])
            label = _plane_label(pl.layer)
            if _fits((pl.end - pl.start) * in_per_byte, label):
                ax.text((pl.start + pl.end) / 2, label_y, label, ha="center",
                        va="center", fontsize=7, color="white", zorder=3, gid="plane-label")
            cache = cache_of[pl.layer]
            for b in blocks_shown:
                lo, hi = t.block_range(i, b)
                pages.append(PatchRange("page", lo, hi, t.group, pl.layer, kind, block=b))
                page_y.append(row + 0.02)
                page_colors.append(KIND_COLORS[kind])
                if cache.padding_bytes:
                    pads.append(PatchRange("pad", hi - cache.padding_bytes, hi, t.group, pl.layer, kind, block=b))
                    pad_y.append(row + 0.02 + 0.38 - 0.4 * 0.38)
            if tick_blocks:
                ticks.extend([(pl.start + b * t.page_bytes, row + 0.05), (pl.start + b * t.page_bytes, row + half)]
                             for b in range(1, num_blocks))
    _draw_ranges(ax, planes, plane_y, lane_h, facecolors=plane_colors, edgecolors="white", linewidths=1.0)
    # Dark page edges while pages are wide; white hairlines once dark ones would blacken the row.
    wide = bool(pages) and min(r.size for r in pages) * px_per_byte >= 6
    _draw_ranges(ax, pages, page_y, 0.38, facecolors=page_colors, edgecolors="#333333" if wide else "white",
                 linewidths=0.6 if wide else 0.3, zorder=2)
    _draw_ranges(ax, pads, pad_y, 0.4 * 0.38, facecolors=PAD_COLOR, zorder=2.1, snap=False)
    _draw_ranges(ax, unused, unused_y, lane_h, facecolors="white", edgecolors=UNUSED_COLOR,
                 hatch="////")
    if ticks:
        from matplotlib.collections import LineCollection

        ax.add_collection(LineCollection(ticks, colors="white", linewidths=0.6, zorder=2, gid="block-ticks"),
                          autolim=False)
    if blocks_shown and len(blocks_shown) <= 16:  # block numbers over the first plane's pages
        for row, t in enumerate(tensors):
            first = t.planes[0]
            for b in blocks_shown:
                lo, hi = t.block_range(0, b)
                if first.layer is not None and _fits((hi - lo) * in_per_byte, f"b{b}"):
                    ax.text((lo + hi) / 2, row + 0.21, f"b{b}", ha="center", va="center", fontsize=6.5,
                            color="white", zorder=3, gid="block-label")
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_yticks(range(n), labels, fontsize=7.5)
    ax.tick_params(axis="y", length=0)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    _byte_axis(ax, size, label=False)
    ax.set_xlabel(f"offset in the pool ({num_blocks:,} blocks x {layout.block_stride:,} B per block)", fontsize=8)
    pages_set = sorted({t.page_bytes for t in tensors})
    if len(pages_set) == 1:
        page = pages_set[0]
        strides = (f"layer stride = {num_blocks:,} blocks x page = {num_blocks * page:,} B, "
                   f"block stride = page = {page:,} B")
    else:
        strides = f"layer stride = {num_blocks:,} blocks x page, block stride = page (pages per row)"
    ax.set_title(f"{layout.planner} layout, layer-outermost: {strides}", fontsize=9.5, loc="left", pad=16)
    if blocks_shown:
        shown = (f"; pages of block{'s' if len(blocks_shown) > 1 else ''} "
                 f"{', '.join(map(str, blocks_shown)) if len(blocks_shown) <= 12 else f'{len(blocks_shown)} blocks'} drawn")
    elif ticks:
        shown = f"; white ticks: the {num_blocks:,} blocks of each plane"
    else:
        shown = f"; a plane's {num_blocks:,} blocks are under {_MIN_TICK_PX:g} px each at this scale"

    ax.annotate(f"every tensor starts at byte 0 of the same pool of {size:,} B{shown}", xy=(0, 1),
                xycoords="axes fraction", xytext=(0, 4), textcoords="offset points", ha="left", va="bottom",
                fontsize=7.5, color="#333333", gid="overlay-note")
    _key_below(ax, entries)
    return fig


# ---- page anatomy -------------------------------------------------------------------------
def _spread(centers: Sequence[float], widths: Sequence[float], pad: float = 0.02) -> list[float]:
    """Label centres (axes fraction) near `centers`, labels `widths` wide not overlapping, inside [0, 1]."""
    xs: list[float] = []
    for c, wd in zip(centers, widths):
        lo = wd / 2 if not xs else xs[-1] + (widths[len(xs) - 1] + wd) / 2 + pad
        xs.append(max(c, lo))
    for i in range(len(xs) - 1, -1, -1):
        hi = 1 - widths[i] / 2 if i == len(xs) - 1 else xs[i + 1] - (widths[i + 1] + widths[i]) / 2 - pad
        xs[i] = min(xs[i], hi)
    return xs


_ANATOMY_CHAR_W = 0.066  # inches a character of the 7.5 pt anatomy labels takes, digits and commas included


def _labelled_bar(ax, parts: list[tuple[str, int, int, str, str]], total: int, role: str, owner: str) -> None:
    """parts: (name, start, size, colour, label). One bar [0, total) across the axes; the labels
    under it, spread so they never overlap, each with a leader line to its range."""
    ax.set_xlim(0, total)
    ax.set_ylim(0, 1)
    ax.set_axis_off()
    _draw_ranges(ax, [PatchRange(role, start, start + size, group=owner, layer=name)
                      for name, start, size, _, _ in parts], 0, 1,
                 facecolors=[color for _, _, _, color, _ in parts], edgecolors="white", linewidths=0.8)
    axes_w = ax.get_position().width * ax.figure.get_figwidth()
    widths = [min(1.0, _ANATOMY_CHAR_W * max(map(len, text.splitlines())) / axes_w) for *_, text in parts]
    centers = [(start + size / 2) / total for _, start, size, _, _ in parts]
    for (name, start, size, color, text), x in zip(parts, _spread(centers, widths)):
        ax.annotate(text, xy=(start + size / 2, 0), xycoords="data", xytext=(x, -0.45),
                    textcoords="axes fraction", ha="center", va="top", fontsize=7.5,
                    arrowprops=dict(arrowstyle="-", color="#666666", linewidth=0.6, shrinkA=1, shrinkB=0,
                                    relpos=(0.5, 1.0)))


def _field_parts(fields):
    parts, start = [], 0
    for f in fields:
        unit = f.describe()
        detail = f"{f.num_bytes:,} B" + (" packed, 2 per byte" if f.element.bits < 8 else "")
        parts.append((f.name, start, f.num_bytes, ELEMENT_COLORS.get(f.element.label, "#999999"),
                      f"{unit}\n{detail}, [{start:,}, {start + f.num_bytes:,})"))
        start += f.num_bytes
    return parts


def page_anatomy(cache, *, fig: Figure | None = None, width: float = 11.0) -> Figure:
    """One layer's page zoomed: payload, footer and padding regions (`page_regions`), then one
    row field by field (its payload part and its footer part, which sit apart in the page);
    a packed 4-bit field also gets its nibble order drawn."""
    cache = getattr(cache, "cache", cache)  # a Placement works too
    require(isinstance(cache, CacheSpec), f"cache: expected a CacheSpec or Placement, got {type(cache).__name__}")
    row = cache.row_format
    rows = cache.rows
    regions = page_regions(row, rows, cache.page_bytes)
    packed = [f for f in row.payload + row.footer if f.element.bits < 8]
    fig = fig or _new_figure(width, 4.1 if packed else 3.5)
    w, h = fig.get_size_inches()
    left, right, bar_h = 0.5, 0.5, 0.34

    def axes(bottom_in, x0=left, x1=None, height_in=bar_h):
        x1 = w - right if x1 is None else x1
        return fig.add_axes((x0 / w, bottom_in / h, (x1 - x0) / w, height_in / h))

    page_y = h - 1.05 - bar_h
    ax_page = axes(page_y)
    first, second = row.part_names  # payload/footer, K/V, conv/SSM state
    region_text = {
        "payload": f"{first}: {rows} rows x {row.payload_bytes:,} B = {rows * row.payload_bytes:,} B",
        "footer": f"{second}: {rows} rows x {row.footer_bytes:,} B = {rows * row.footer_bytes:,} B",
        "padding": (f"padding: {cache.padding_bytes:,} B\n"
                    + (f"(page grown to {cache.page_bytes:,} B)" if cache.padded_page_bytes is not None
                       else f"(to a multiple of {cache.alignment} B)")),
    }
    _labelled_bar(ax_page, [(r.name, r.start, r.size, REGION_COLORS[r.name],
                             f"{region_text[r.name]}\n[{r.start:,}, {r.end:,})") for r in regions],
                  cache.page_bytes, "region", cache.name)
    fig.text(left / w, (page_y + bar_h + 0.08) / h,
             f"page: {cache.page_bytes:,} B = {rows} rows x {row.row_bytes:,} B ({cache.content_bytes:,} B)"
             f" + {cache.padding_bytes:,} B padding", fontsize=8.5, va="bottom")

    row_y = page_y - 1.35
    if row.footer:
        split = left + (w - left - right) * 0.68
        ax_pay, ax_foot = axes(row_y, x1=split - 0.3), axes(row_y, x0=split + 0.3)
    else:
        ax_pay, ax_foot = axes(row_y), None
    _labelled_bar(ax_pay, _field_parts(row.payload), row.payload_bytes, "field", "payload")
    fig.text(left / w, (row_y + bar_h + 0.08) / h,
             f"row t, {first} part (at t x {row.payload_bytes:,} in the page): {row.payload_bytes:,} B",
             fontsize=8.5, va="bottom")
    if ax_foot is not None:
        _labelled_bar(ax_foot, _field_parts(row.footer), row.footer_bytes, "field", "footer")
        fig.text((split + 0.3) / w, (row_y + bar_h + 0.08) / h,
                 f"row t, {second} part: {row.footer_bytes:,} B", 
                 fontsize=8.5, va="bottom")
    if packed:
        _nibbles(axes(0.2, x1=left + 4.0, height_in=0.3), packed[0])
    footer = f" = {first} {row.payload_bytes:,} B + {second} {row.footer_bytes:,} B" if row.footer else ""
    fig.text(left / w, 1 - 0.12 / h, f"{cache.name} ({cache.kind.label}, {row.name}): row {row.row_bytes:,} B{footer}",
             ha="left", va="top", fontsize=10)
    fig.text(left / w, 1 - 0.42 / h, row.describe(), fontsize=8, color="#444444", va="top")
    return fig


def _nibbles(ax, field) -> None:
    """The first bytes of a packed 4-bit field: byte i = elem 2i (low nibble) | elem 2i+1 (high)."""
    nbytes = 4
    ax.set_xlim(0, nbytes)
    ax.set_ylim(0, 1)
    ax.axis("off")
    for i in range(nbytes):
        for half, (label, shade) in enumerate(((f"lo: e{2 * i}", "#a6d4e6"), (f"hi: e{2 * i + 1}", "#64b5cd"))):
            ax.add_patch(Rectangle((i + 0.5 * half, 0), 0.5, 1, facecolor=shade, edgecolor="white", linewidth=1))
            ax.text(i + 0.25 + 0.5 * half, 0.5, label, ha="center", va="center", fontsize=7)
        ax.text(i + 0.5, 1.08, f"byte {i}", ha="center", va="bottom", fontsize=7)
    ax.text(nbytes + 0.15, 0.5, f"{field.element.label} packing: elem 2i low nibble, 2i+1 high "
            f"(bits 0-3 = elem 2i, bits 4-7 = elem 2i+1)", ha="left", va="center", fontsize=7.5,
            transform=ax.transData, clip_on=False)


# ---- live bytes of a pool -----------------------------------------------------------------
def _as_uint8_matrix(block_bytes, stride: int) -> np.ndarray:
    if hasattr(block_bytes, "detach"):  # a torch tensor (maybe on a GPU): copy to host lazily below
        t = block_bytes.detach()
        require(str(t.dtype) == "torch.uint8", f"block_bytes: dtype {t.dtype} must be torch.uint8")
        require(t.dim() == 2, f"block_bytes: shape {tuple(t.shape)} must be (num_blocks, block_stride)")
        require(t.shape[1] == stride, f"block_bytes: {t.shape[1]:,} bytes a block, the layout's stride is {stride:,}")
        return t
    arr = np.asarray(block_bytes)
    require(arr.dtype == np.uint8, f"block_bytes: dtype {arr.dtype} must be uint8")
    require(arr.ndim == 2, f"block_bytes: shape {arr.shape} must be (num_blocks, block_stride)")
    require(arr.shape[1] == stride, f"block_bytes: {arr.shape[1]:,} bytes a block, the layout's stride is {stride:,}")
    return arr


def _rows_to_numpy(data, rows: list[int]) -> np.ndarray:
    if hasattr(data, "detach"):
        import torch  # only for a torch tensor given: plot itself never needs torch

        return data[torch.as_tensor(rows, dtype=torch.long, device=data.device)].cpu().numpy()
    return data[rows]


def _owner(block_groups, b: int, layout: Layout) -> int | None:
    """Index of the group owning block b: given as an index or a group name; None / -1 = free."""
    g = block_groups[b]
    if g is None:
        return None
    if isinstance(g, str):
        names = [grp.name for grp in layout.groups]
        require(g in names, f"block_groups[{b}]={g!r}: no such group; the layout has {', '.join(names)}")
        return names.index(g)
    n_groups = len(layout.groups)
    g = int(g)
    if g < 0:
        return None
    require(g < n_groups, f"block_groups[{b}]={g}: the layout has {n_groups} groups")
    return g


def _field(obj, name: str, default=None):
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def binned_bytes(rows: np.ndarray, bins: int, *, stat: str = "nonzero") -> np.ndarray:
    """(k, stride) uint8 -> (k, bins): per bin the fraction of non-zero bytes ('nonzero') or the
    mean byte value / 255 ('mean'). Bin edges are floor(i * stride / bins); vectorised."""
    require(stat in ("nonzero", "mean"), f"stat={stat!r}: choose nonzero or mean")
    stride = rows.shape[1]
    bins = max(1, min(bins, stride))
    edges = (np.arange(bins, dtype=np.int64) * stride) // bins
    counts = np.diff(np.append(edges, stride))
    values = (rows != 0) if stat == "nonzero" else rows
    sums = np.add.reduceat(values, edges, axis=1, dtype=np.int64)
    out = sums / counts
    return out / 255.0 if stat == "mean" else out


def _victim_pieces(victims, stride: int, num_blocks: int):
    """Victims as (index, block, start, end, layer) pieces inside one block each: a range that
    runs past the stride spills into the next block (the zeroer incident, docs/hazards.md#zeroer)."""
    out = []
    for vi, v in enumerate(victims):
        block, start, end = _field(v, "block"), _field(v, "start"), _field(v, "end")
        for name, value in (("block", block), ("start", start), ("end", end)):
            require(isinstance(value, (int, np.integer)) and not isinstance(value, bool),
                    f"victims[{vi}].{name}={value!r}: must be an integer")
        require(0 <= block < num_blocks, f"victims[{vi}].block={block}: the pool has {num_blocks} blocks")
        require(0 <= start < end, f"victims[{vi}]: start={start}, end={end} must satisfy 0 <= start < end")
        skip = int(start) // stride  # a start past the stride already lies in a later block
        b, lo, hi = int(block) + skip, int(start) - skip * stride, int(end) - skip * stride
        while hi > 0 and b < num_blocks:
            out.append((vi, b, lo, min(hi, stride), _field(v, "layer")))
            b, lo, hi = b + 1, 0, hi - stride
    return out


_VICTIM_ROW_H = 0.15  # inches a line of the victim table takes
_VICTIM_LABEL_ROWS = 3  # rows of victim numbers a lane holds


def live_bytes(layout: Layout, block_bytes, block_groups, *, blocks: Sequence[int] | None = None,
               victims: Iterable = (), bins: int = 2048, stat: str = "nonzero", max_blocks: int = 8,
               fig: Figure | None = None, width: float = 12.0) -> Figure:
    """The real bytes of some blocks of a pool, one lane per block.

    block_bytes: uint8 (num_blocks, block_stride) numpy array or torch tensor (a pool's backing).
    block_groups[b]: the group owning block b (index or name), or None / -1 when free; e.g.
    [block_pool.owner(b) for b in range(num_blocks)] of a kvviz.pool.BlockPool.
    Each lane: a thin strip with the owner group's layer ranges coloured by kind, and an image
    strip of the bytes binned to `bins` columns (fraction of non-zero bytes, or mean byte value
    with stat="mean"). victims (objects or dicts with block, start, end and optionally layer,
    start/end in bytes of that block; a range past the stride continues in the next block; a
    kvviz.verify Corruption is one) get red outlines and a number each, listed with their
    block, bytes and layer in a table under the key (so labels never overlap). Default blocks: those the victims touch, then owned blocks, at
    most `max_blocks`.
    """
    require(isinstance(layout, Layout), f"layout: expected a kvviz Layout, got {type(layout).__name__}")
    stride = layout.block_stride
    data = _as_uint8_matrix(block_bytes, stride)
    num_blocks = int(data.shape[0])
    require(num_blocks > 0, "block_bytes: the pool has no blocks")
    require(len(block_groups) == num_blocks,
            f"block_groups: has {len(block_groups)} entries, the pool has {num_blocks} blocks")
    require(isinstance(bins, int) and bins > 0, f"bins={bins!r}: must be a positive integer")
    pieces = _victim_pieces(list(victims), stride, num_blocks)
    if blocks is None:
        owned = [b for b in range(num_blocks) if _owner(block_groups, b, layout) is not None]
        blocks = list(dict.fromkeys([p[1] for p in pieces] + owned))[:max_blocks] or [0]
        blocks.sort()
    blocks = [int(b) for b in blocks]
    require(len(blocks) > 0, "blocks: choose at least one block")
    for b in blocks:
        require(0 <= b < num_blocks, f"blocks: block {b} is outside the pool's {num_blocks} blocks")
    lane = {b: i for i, b in enumerate(blocks)}

    image = binned_bytes(_rows_to_numpy(data, blocks), bins, stat=stat)
    n = len(blocks)
    owners = [_owner(block_groups, b, layout) for b in blocks]
    shown = [(vi, b, lo, hi, layer) for vi, b, lo, hi, layer in pieces if b in lane]
    kinds = list(dict.fromkeys(p.cache.kind for g in owners if g is not None for p in layout.group_placements(g)))
    entries = _key_entries(kinds, padding=False, unused=False, victims=bool(pieces))
    plot_w = width - 1.5 - 1.0
    _, key_rows, _ = _key_shape(entries, plot_w)
    # Victims are numbered on the map and listed in a table under the key (labels never overlap).
    table_h = (0.1 + _VICTIM_ROW_H * (len(shown) + 1)) if shown else 0.0
    top, bottom = 0.6, 0.85 + key_rows * _LEGEND_ROW_H + table_h
    if fig is None:
        fig = _new_figure(width, top + n * 0.62 + bottom)
    w, h = fig.get_size_inches()
    ax = fig.add_axes((1.5 / w, bottom / h, 1 - (1.5 + 1.0) / w, 1 - (top + bottom) / h))
    span_h, img_lo, img_hi = 0.28, 0.32, 0.94
    spans, span_y, span_colors = [], [], []
    mappable = None
    for i, (b, g) in enumerate(zip(blocks, owners)):
        if g is not None:
            for p in layout.group_placements(g):
                spans.append(PatchRange("span", p.offset, p.end, layout.groups[g].name, p.name, p.cache.kind, block=b))
                span_y.append(i + 0.04)
                span_colors.append(KIND_COLORS[p.cache.kind])
        mappable = ax.imshow(image[i:i + 1], extent=(0, stride, i + img_hi, i + img_lo), aspect="auto",
                             interpolation="nearest", cmap="magma", vmin=0.0, vmax=1.0, zorder=1)
    _draw_ranges(ax, spans, span_y, span_h, facecolors=span_colors, edgecolors="white", linewidths=0.3)
    labels = [f"block {b}\n{'free' if g is None else layout.groups[g].name}" for b, g in zip(blocks, owners)]
    ax.set_yticks([i + 0.5 for i in range(n)], labels, fontsize=7.5)
    ax.tick_params(axis="y", length=0)
    ax.set_ylim(n, 0)
    _byte_axis(ax, stride)
    marks, mark_y = [], []
    axes_in = _axes_width_in(ax)
    per_lane: dict[int, list[tuple[float, str]]] = {}  # lane -> (centre as axes fraction, number)
    table = []
    for number, (vi, b, lo, hi, layer) in enumerate(shown, start=1):
        marks.append(PatchRange("victim", lo, hi, layer=None if layer is None else str(layer), block=b))
        mark_y.append(lane[b] + 0.02)
        per_lane.setdefault(lane[b], []).append(((lo + hi) / 2 / stride, str(number)))
        name = short_layer_name(str(layer)) if layer is not None else f"victim {vi}"
        table.append((str(number), str(b), f"[{lo:,}, {hi:,})", f"{hi - lo:,} B", name))
    # Numbers over their ranges, in up to three rows a lane, each row spread so that no two overlap.
    for i, labels in per_lane.items():
        labels.sort()
        for row in range(_VICTIM_LABEL_ROWS):
            mine = labels[row::_VICTIM_LABEL_ROWS]
            if not mine:
                continue
            widths = [(_LABEL_CHAR_W * len(text) + 0.12) / axes_in for _, text in mine]
            for (_, text), x in zip(mine, _spread([c for c, _ in mine], widths, pad=0.04 / axes_in)):
                ax.text(x * stride, i + 0.2 + 0.24 * row, text, ha="center", va="center", fontsize=7,
                        color=VICTIM_COLOR, fontweight="bold", zorder=6, gid="victim-number",
                        bbox=dict(boxstyle="round,pad=0.15", facecolor="white", edgecolor=VICTIM_COLOR,
                                  linewidth=0.6))
    _draw_ranges(ax, marks, mark_y, 0.96, facecolors="none", edgecolors=VICTIM_COLOR, linewidths=1.6, zorder=5)
    hidden = len(pieces) - len(shown)
    what = "fraction of non-zero bytes" if stat == "nonzero" else "mean byte value / 255"
    title = f"live bytes of {n} block(s), block stride {stride:,} B; image: {what} per {stride / image.shape[1]:,.0f} B bin"
    if pieces:
        title += f"; {len(shown)} victim range(s) in red" + (f" ({hidden} outside the shown blocks)" if hidden else "")
    ax.set_title(title, fontsize=9, loc="left", pad=8)
    cax = fig.add_axes((1 - 0.85 / w, bottom / h, 0.12 / w, 1 - (top + bottom) / h))
    cb = fig.colorbar(mappable, cax=cax)
    cb.ax.tick_params(labelsize=7)
    cb.set_label("non-zero fraction" if stat == "nonzero" else "mean byte / 255", fontsize=7.5)
    _key_below(ax, entries)
    if table:  # under the key: one line a numbered victim, columns aligned (monospace)
        header = ("#", "block", "bytes [start, end) of the block", "size", "layer")
        widths = [max(len(row[c]) for row in [header, *table]) for c in range(5)]

        def line(row):
            return "  ".join(cell.rjust(wd) if c in (0, 1, 3) else cell.ljust(wd)
                             for c, (cell, wd) in enumerate(zip(row, widths))).rstrip()

        y = bottom - 0.5 - key_rows * _LEGEND_ROW_H - 0.1
        for k, row in enumerate([header, *table]):
            fig.text(1.5 / w, y / h, line(row), fontsize=7, family="monospace", va="top",
                     color="#444444" if k == 0 else VICTIM_COLOR, gid="victim-table")
            y -= _VICTIM_ROW_H
    return fig
