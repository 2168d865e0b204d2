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
    victim:<block>:<start>  live_bytes: a victim range, red outline

before_after prefixes the gids of each panel with "before/" and "after/". A collection's own
gid (in SVG output) is its role, e.g. "page" or "before/page".
"""

from __future__ import annotations

import dataclasses
import io
import math
import re
from collections.abc import Iterable, Sequence

import numpy as np
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle  # only the nibble boxes of page_anatomy
from matplotlib.ticker import FuncFormatter, MultipleLocator

from .errors import require
from .formats import page_regions
from .layout import Layout
from .specs import CacheKind, CacheSpec

# One colour per cache kind, the same in every figure (main KV blues, indexer orange, SWA green,
# compressor states purples, indexer state brown).
KIND_COLORS: dict[CacheKind, str] = {
    CacheKind.MAIN_C4: "#1f77b4",
    CacheKind.MAIN_C128: "#7fb8e0",
    CacheKind.INDEXER_K: "#ff7f0e",
    CacheKind.SWA_KV: "#2ca02c",
    CacheKind.STATE_C4: "#9467bd",
    CacheKind.STATE_C128: "#c9b3e0",
    CacheKind.INDEXER_STATE: "#8c564b",
    CacheKind.CUSTOM: "#17becf",
}
PAD_COLOR = "#1a1a1a"  # alignment padding inside a page
UNUSED_COLOR = "#9a9a9a"  # hatch of bytes a group leaves unused
HOLE_COLOR = "#d62728"  # hatch of the bucketed layout's holes in before_after
SAVED_COLOR = "#2ca02c"
VICTIM_COLOR = "#e41a1c"
REGION_COLORS = {"payload": "#4c72b0", "footer": "#dd8452", "padding": PAD_COLOR}
ELEMENT_COLORS = {"E4M3": "#4c72b0", "E2M1": "#64b5cd", "UE8M0": "#dd8452", "bf16": "#55a868",
                  "fp32": "#8172b3", "pad": "#555555", "byte": "#17becf"}

DEFAULT_DPI = 100
_LANE_H = 0.42  # inches per group lane
_LEFT_IN, _RIGHT_IN = 1.75, 0.25  # margins of the lanes (the left one holds the group labels)
_LEGEND_ROW_H = 0.22


@dataclasses.dataclass(frozen=True)
class PatchRange:
    """What one drawn range stands for: bytes [start, end) of `layer` / `group` (module doc)."""

    role: str  # page, pad, unused, saved, region, field, span, victim
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
        if self.role in ("page", "pad", "region", "field"):
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
def short_layer_name(name: str) -> str:
    """'model.layers.2.attn.indexer.k_cache' -> 'L2 indexer.k_cache'; other names unchanged."""
    return re.sub(r"^model\.layers\.(\d+)\.attn\.?", r"L\1 ", name).strip()


def _nice_step(span: float, target: int = 7) -> float:
    raw = span / target
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for m in (1, 2, 2.5, 5, 10):
        if m * mag >= raw:
            return m * mag
    return 10 * mag


def _byte_axis(ax, stride: int, *, label: bool = True) -> None:
    """x in bytes, ticks at round KiB (or bytes for tiny strides), limits [0, stride]."""
    ax.set_xlim(0, stride)
    if stride >= 4096:
        step = max(1, _nice_step(stride / 1024)) * 1024
        ax.xaxis.set_major_locator(MultipleLocator(step))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x / 1024:,.0f}"))
        unit = "KiB"
    else:
        ax.xaxis.set_major_locator(MultipleLocator(max(1, _nice_step(stride))))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,.0f}"))
        unit = "B"
    if label:
        ax.set_xlabel(f"offset in the block ({unit})", fontsize=8)
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

    kind: the role ('page', 'pad', 'unused', 'saved', 'region', 'field', 'span', 'victim');
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
    from matplotlib.text import Text

    return [t.get_text() for t in fig.findobj(Text) if t.get_text()]


def legend_labels(fig: Figure) -> list[str]:
    """The labels of the figure's key (and of any matplotlib legend added to it)."""
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    key = [t.get_text() for t in fig.texts if t.get_gid() == "key"]
    return key + [t.get_text() for lg in legends for t in lg.get_texts()]


def save_figure(fig: Figure, path, *, dpi: int = DEFAULT_DPI) -> None:
    """Write a figure; the format follows the suffix (png, svg, pdf). Deterministic metadata."""
    from pathlib import Path

    fmt = Path(path).suffix.lstrip(".").lower() or "png"
    metadata = {"png": {"Software": "kvviz"}, "svg": {"Date": None, "Creator": "kvviz"},
                "pdf": {"CreationDate": None}}.get(fmt)
    fig.savefig(path, format=fmt, dpi=dpi, metadata=metadata)


def to_png_bytes(fig: Figure, *, dpi: int = DEFAULT_DPI) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": "kvviz"})
    return buf.getvalue()


# ---- block map ----------------------------------------------------------------------------
def _kinds_present(layouts: Iterable[Layout]) -> list[CacheKind]:
    return list(dict.fromkeys(p.cache.kind for layout in layouts for p in layout.placements))


@dataclasses.dataclass(frozen=True)
class KeyEntry:
    """One entry of a figure's key (legend): a swatch and its label."""

    label: str
    facecolor: str
    edgecolor: str = "none"
    hatch: str | None = None
    alpha: float = 1.0


def _key_entries(kinds, *, padding: bool, unused: bool, holes: bool = False, saved: bool = False,
                 victims: bool = False) -> list[KeyEntry]:
    out = [KeyEntry(k.label, KIND_COLORS[k]) for k in kinds]
    if padding:
        out.append(KeyEntry("alignment padding", PAD_COLOR))
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


def _key_below(ax, entries: Sequence[KeyEntry], *, offset_in: float = 0.5) -> None:
    """The key as a grid under the axes: swatches in collections, labels as texts (gid "key").

    Drawn by hand: matplotlib's Legend lays its texts out several times and costs about as much
    as all the pages of a 250-layer map together.
    """
    if not entries:
        return
    fig = ax.figure
    w, h = fig.get_size_inches()
    pos = ax.get_position()
    ncol, _, colw = _key_shape(entries, pos.width * w)
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


def _lane_label(layout: Layout, i: int) -> str:
    g = layout.groups[i]
    star = "  ◀ binds" if i == layout.binding_group else ""
    return f"{g.name}{star}\n{len(g.layers)} layers · {layout.group_total(i):,} B"


def _draw_lanes(ax, layout: Layout, *, show_padding: bool, panel: str | None = None,
                unused_color: str = UNUSED_COLOR, lane_h: float = 0.8) -> None:
    """One lane per group at y = group index: pages, padding bands, unused ranges."""
    n = len(layout.groups)
    half = lane_h / 2
    names = [g.name for g in layout.groups]
    pages, pads, page_y, pad_y, colors = [], [], [], [], []
    for p in layout.placements:
        c = p.cache
        end = p.offset + c.page_bytes
        pages.append(PatchRange("page", p.offset, end, names[p.group], c.name, c.kind, panel=panel))
        page_y.append(p.group - half)
        colors.append(KIND_COLORS[c.kind])
        pad = c.padding_bytes
        if show_padding and pad > 0:
            pads.append(PatchRange("pad", end - pad, end, names[p.group], c.name, c.kind, panel=panel))
            pad_y.append(p.group + half - 0.4 * lane_h)
    # White page edges keep neighbouring pages of one kind apart, unless pages are so narrow
    # (thousands of layers) that the edges would wash the colours out. The padding band covers
    # the lower 40% of the lane so the page colour stays visible above it.
    px_per_byte = ax.figure.get_figwidth() * ax.get_position().width * ax.figure.dpi / layout.block_stride
    median_px = float(np.median([r.size for r in pages])) * px_per_byte
    _draw_ranges(ax, pages, page_y, lane_h, facecolors=colors, edgecolors="white",
                 linewidths=0.3 if median_px >= 4 else 0)
    _draw_ranges(ax, pads, pad_y, 0.4 * lane_h, facecolors=PAD_COLOR, zorder=1.1, snap=False)
    unused, unused_y = [], []
    for gi, name in enumerate(names):
        for lo, hi in layout.unused_ranges(gi):
            unused.append(PatchRange("unused", lo, hi, name, panel=panel))
            unused_y.append(gi - half)
    _draw_ranges(ax, unused, unused_y, lane_h, facecolors="white", edgecolors=unused_color, hatch="////")
    # Layer names on the pages wide enough to carry one, in groups of a few pages only (a
    # 60-layer lane labelled here and there reads as noise).
    for gi in range(n):
        group = layout.group_placements(gi)
        if len(group) > 24:
            continue
        for p in group:
            label = short_layer_name(p.name)
            if p.page_bytes * px_per_byte > 6.5 * len(label) + 8:
                ax.text(p.offset + p.page_bytes / 2, gi, label, ha="center", va="center", fontsize=7, zorder=3,
                        clip_on=True)
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_yticks(range(n), [_lane_label(layout, i) for i in range(n)], fontsize=7.5)
    if layout.binding_group is not None:
        ax.get_yticklabels()[layout.binding_group].set_fontweight("bold")
    ax.tick_params(axis="y", length=0)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _stride_line(ax, stride: int, text: str, *, color="black") -> None:
    ax.axvline(stride, color=color, linewidth=1.0, linestyle="--", zorder=4)
    ax.annotate(text, xy=(stride, 1.0), xycoords=("data", "axes fraction"), xytext=(-3, 3),
                textcoords="offset points", ha="right", va="bottom", fontsize=7.5, color=color)


def _new_figure(width: float, height: float) -> Figure:
    return Figure(figsize=(width, height), dpi=DEFAULT_DPI)


def _place_axes(fig: Figure, *, left: float, right: float, top: float, bottom: float):
    """An axes with margins given in inches (no layout engine: predictable and fast)."""
    w, h = fig.get_size_inches()
    return fig.add_axes((left / w, bottom / h, 1 - (left + right) / w, 1 - (top + bottom) / h))


def block_map_title(layout: Layout) -> str:
    return (f"{layout.planner} layout: block stride {layout.block_stride:,} B; "
            f"binding group: {layout.binding_label}")


def block_map(layout: Layout, *, ax=None, show_padding: bool = True, title: str | None = None,
              width: float = 12.0) -> Figure:
    """The block's bytes [0, block_stride) across, one lane per group.

    One range per layer page (coloured by cache kind), one per padding range (a dark band at the
    bottom of the page's tail) and one per unused range (hatched); the stride and the binding
    group in the title (after `title`, when given).
    """
    require(isinstance(layout, Layout), f"layout: expected a kvviz Layout, got {type(layout).__name__}")
    kinds = _kinds_present([layout])
    has_pad = show_padding and any(p.cache.padding_bytes for p in layout.placements)
    has_unused = any(layout.unused_ranges(i) for i in range(len(layout.groups)))
    entries = _key_entries(kinds, padding=has_pad, unused=has_unused)
    if ax is None:
        n = len(layout.groups)
        _, key_rows, _ = _key_shape(entries, width - _LEFT_IN - _RIGHT_IN)
        bottom = 0.6 + key_rows * _LEGEND_ROW_H + 0.1
        fig = _new_figure(width, 0.55 + n * _LANE_H + bottom)
        ax = _place_axes(fig, left=_LEFT_IN, right=_RIGHT_IN, top=0.55, bottom=bottom)
    fig = ax.figure
    _draw_lanes(ax, layout, show_padding=show_padding)
    _byte_axis(ax, layout.block_stride)
    # The stride is the right edge of the axes and stands in the title (texts are the costliest
    # part of drawing this figure, so it is not repeated at the edge).
    ax.set_title(f"{title}: {block_map_title(layout)}" if title else block_map_title(layout), fontsize=9.5,
                 loc="left", pad=14)
    _key_below(ax, entries)
    return fig


# ---- before / after -----------------------------------------------------------------------
def before_after(before: Layout, after: Layout, *, fig: Figure | None = None, show_padding: bool = True,
                 labels: tuple[str, str] = ("before", "after"), width: float = 12.0) -> Figure:
    """Both layouts on one x scale (the larger stride, normally the before one): both strides,
    the bytes and percentage saved per block, and the holes of a bucketed layout in red."""
    for name, layout in (("before", before), ("after", after)):
        require(isinstance(layout, Layout), f"{name}: expected a kvviz Layout, got {type(layout).__name__}")
    scale = max(before.block_stride, after.block_stride)
    saved = before.block_stride - after.block_stride
    pct = 100.0 * (after.block_stride - before.block_stride) / before.block_stride
    kinds = _kinds_present([before, after])
    holes = [layout.binding_group is None for layout in (before, after)]
    entries = _key_entries(kinds, padding=show_padding, unused=not all(holes), holes=any(holes), saved=saved > 0)
    nb, na = len(before.groups), len(after.groups)
    left, right = _LEFT_IN, _RIGHT_IN
    _, key_rows, _ = _key_shape(entries, width - left - right)
    top, gap, bottom = 0.8, 0.55, 0.6 + key_rows * _LEGEND_ROW_H + 0.1
    if fig is None:
        fig = _new_figure(width, top + (nb + na) * _LANE_H + gap + bottom)
    w, h = fig.get_size_inches()
    plot_h = h - top - gap - bottom
    hb = plot_h * nb / (nb + na)
    ax_b = fig.add_axes((left / w, (bottom + (plot_h - hb) + gap) / h, 1 - (left + right) / w, hb / h))
    ax_a = fig.add_axes((left / w, bottom / h, 1 - (left + right) / w, (plot_h - hb) / h), sharex=ax_b)
    for ax, layout, panel, label in ((ax_b, before, "before", labels[0]), (ax_a, after, "after", labels[1])):
        holes = layout.binding_group is None
        _draw_lanes(ax, layout, show_padding=show_padding, panel=panel,
                    unused_color=HOLE_COLOR if holes else UNUSED_COLOR)
        _stride_line(ax, layout.block_stride, f"{label} stride {layout.block_stride:,} B")
        text = f"{label}: {layout.planner}, binding group: {layout.binding_label}"
        if holes:
            unused = sum(layout.group_unused(i) for i in range(len(layout.groups)))
            text += f"; holes (red hatch): {unused:,} B unused, summed over the groups"
        ax.set_title(text, fontsize=8.5, loc="left", pad=12)
    if saved > 0:
        _draw_ranges(ax_a, [PatchRange("saved", after.block_stride, before.block_stride, panel="after")], -0.5, na,
                     facecolors=SAVED_COLOR, alpha=0.25, zorder=0.5)
        ax_a.text(after.block_stride + saved / 2, (na - 1) / 2, f"saved\n{saved:,} B\n({pct:+.2f}%)",
                  ha="center", va="center", fontsize=7.5, color="#1b5e20", zorder=3)
    _byte_axis(ax_a, scale)
    ax_b.tick_params(axis="x", labelbottom=False)
    change = "saved" if saved > 0 else "added"
    fig.suptitle(f"block stride {before.block_stride:,} B → {after.block_stride:,} B: {pct:+.2f}% "
                 f"({abs(saved):,} B per block {change})", x=left / w, ha="left", y=1 - 0.12 / h,
                 va="top", fontsize=10)
    _key_below(ax_a, entries)
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
    widths = [min(1.0, _KEY_CHAR_W * max(map(len, text.splitlines())) / axes_w) for *_, text in parts]
    centers = [(start + size / 2) / total for _, start, size, _, _ in parts]
    for (name, start, size, color, text), x in zip(parts, _spread(centers, widths)):
        ax.annotate(text, xy=(start + size / 2, 0), xycoords="data", xytext=(x, -0.45),
                    textcoords="axes fraction", ha="center", va="top", fontsize=7.5,
                    arrowprops=dict(arrowstyle="-", color="#666666", linewidth=0.6, shrinkA=1, shrinkB=0,
                                    relpos=(0.5, 1.0)))


def _field_unit(f) -> str:
    """'448 E4M3 NoPE'; a field named like its element ('pad') is not named twice."""
    return f"{f.count} {f.element.label}" + (f" {f.name}" if f.name != f.element.label else "")


def _describe(row) -> str:
    text = " + ".join(map(_field_unit, row.payload))
    if row.footer:
        text += " | footer " + " + ".join(map(_field_unit, row.footer))
    return f"{text} = {row.row_bytes:,} B"


def _field_parts(fields):
    parts, start = [], 0
    for f in fields:
        unit = _field_unit(f)
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
    region_text = {
        "payload": f"payload: {rows} rows x {row.payload_bytes:,} B = {rows * row.payload_bytes:,} B",
        "footer": f"footer: {rows} rows x {row.footer_bytes:,} B = {rows * row.footer_bytes:,} B",
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
             f"row t, payload part (at t x {row.payload_bytes:,} in the page): {row.payload_bytes:,} B",
             fontsize=8.5, va="bottom")
    if ax_foot is not None:
        _labelled_bar(ax_foot, _field_parts(row.footer), row.footer_bytes, "field", "footer")
        fig.text((split + 0.3) / w, (row_y + bar_h + 0.08) / h,
                 f"row t, footer part (at {rows} x {row.payload_bytes} + t x {row.footer_bytes}): "
                 f"{row.footer_bytes} B", fontsize=8.5, va="bottom")
    if packed:
        _nibbles(axes(0.2, x1=left + 4.0, height_in=0.3), packed[0])
    footer = f" = payload {row.payload_bytes:,} B + footer {row.footer_bytes:,} B" if row.footer else ""
    fig.text(left / w, 1 - 0.12 / h, f"{cache.name} ({cache.kind.label}, {row.name}): row {row.row_bytes:,} B{footer}",
             ha="left", va="top", fontsize=10)
    fig.text(left / w, 1 - 0.42 / h, _describe(row), fontsize=8, color="#444444", va="top")
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
        import torch

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
    runs past the stride spills into the next block (the zeroer incident, REFERENCE.md section 8)."""
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
    kvviz.verify Corruption is one) get red outlines and labels. Default blocks: those the victims touch, then owned blocks, at
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
    top, bottom = 0.6, 0.55 + 0.5
    if fig is None:
        fig = _new_figure(width, top + n * 0.62 + bottom)
    w, h = fig.get_size_inches()
    ax = fig.add_axes((1.5 / w, bottom / h, 1 - (1.5 + 1.0) / w, 1 - (top + bottom) / h))
    span_h, img_lo, img_hi = 0.28, 0.32, 0.94
    owners = [_owner(block_groups, b, layout) for b in blocks]
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
    per_lane: dict[int, int] = {}
    for vi, b, lo, hi, layer in pieces:
        if b not in lane:
            continue
        i = lane[b]
        marks.append(PatchRange("victim", lo, hi, layer=None if layer is None else str(layer), block=b))
        mark_y.append(i + 0.02)
        k = per_lane.get(i, 0)
        per_lane[i] = k + 1
        name = short_layer_name(str(layer)) if layer is not None else f"victim {vi}"
        # Label right of the range, or left of it near the right edge, or centred on a wide one.
        if hi < 0.7 * stride:
            x, ha, dx = hi, "left", 4
        elif lo > 0.3 * stride:
            x, ha, dx = lo, "right", -4
        else:
            x, ha, dx = (lo + hi) / 2, "center", 0
        ax.annotate(f"{name} [{lo:,}, {hi:,})", xy=(x, i + 0.2 + 0.25 * (k % 3)), xycoords="data",
                    xytext=(dx, 0), textcoords="offset points", ha=ha, va="center", fontsize=7,
                    color=VICTIM_COLOR, zorder=6, annotation_clip=False,
                    bbox=dict(boxstyle="round,pad=0.15", facecolor="white", edgecolor="none", alpha=0.85))
    _draw_ranges(ax, marks, mark_y, 0.96, facecolors="none", edgecolors=VICTIM_COLOR, linewidths=1.6, zorder=5)
    shown = len(marks)
    kinds = [r.cache_kind for r in spans]
    hidden = len(pieces) - shown
    what = "fraction of non-zero bytes" if stat == "nonzero" else "mean byte value / 255"
    title = f"live bytes of {n} block(s), block stride {stride:,} B; image: {what} per {stride / image.shape[1]:,.0f} B bin"
    if pieces:
        title += f"; {shown} victim range(s) in red" + (f" ({hidden} outside the shown blocks)" if hidden else "")
    ax.set_title(title, fontsize=9, loc="left", pad=8)
    cax = fig.add_axes((1 - 0.85 / w, bottom / h, 0.12 / w, 1 - (top + bottom) / h))
    cb = fig.colorbar(mappable, cax=cax)
    cb.ax.tick_params(labelsize=7)
    cb.set_label("non-zero fraction" if stat == "nonzero" else "mean byte / 255", fontsize=7.5)
    _key_below(ax, _key_entries(list(dict.fromkeys(kinds)), padding=False, unused=False, victims=bool(pieces)))
    return fig
