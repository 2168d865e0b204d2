"""The layer-plane figure of a pool: draws a `PoolPlanesData` (kvviz.views.planes_data), one row
per tensor over the pool's bytes, nothing else. Which block boundaries are far enough apart to
tick is a matter of pixels, decided here."""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.collections import LineCollection
from matplotlib.figure import Figure

from kvviz.base.errors import require
from kvviz.base.inputs import checked, optional
from kvviz.core.accept import plan_of, pools_of
from kvviz.core.layout import Layout
from kvviz.views.args import BLOCKS, NUM_BLOCKS, OPTIONAL_FIGURE, WIDTH
from kvviz.views.blockmap_data import plan_heading, titled
from kvviz.views.canvas import (
    LEFT_IN,
    RIGHT_IN,
    axes_width_in,
    byte_axis,
    draw_ranges,
    fits,
    new_figure,
    place_axes,
    wrapped,
)
from kvviz.views.legend import LEGEND_ROW_H, KeyEntry, key_below, key_entries, key_shape
from kvviz.views.planes_data import PoolPlanesData, pool_planes_data
from kvviz.views.query import PatchRange
from kvviz.views.style import KIND_COLORS, PAD_COLOR, UNUSED_COLOR, grow, pt

__all__ = ["pool_planes", "MIN_TICK_PX"]

MIN_TICK_PX = 3.0  # block boundaries closer than this many pixels are not drawn
_LANE_IN = 0.5  # inches a row takes


def _entries(data: PoolPlanesData) -> list[KeyEntry]:
    entries = key_entries(data.kinds, padding=bool(data.padded_kinds), unused=False, padding_label=data.padding_label)
    if data.unused:
        entries.append(KeyEntry("unused plane(s) of a short group", "white", UNUSED_COLOR, "////"))
    if data.blocks_shown:
        entries.append(KeyEntry("one block's page (block stride = page)", "white", "#333333"))
    return entries


@checked(num_blocks=optional(NUM_BLOCKS), blocks_shown=BLOCKS, fig=OPTIONAL_FIGURE, width=WIDTH)
def pool_planes(
    layout: Layout | PoolPlanesData,
    num_blocks: int | None = None,
    *,
    blocks_shown: Sequence[int] | None = None,
    fig: Figure | None = None,
    width: float = 12.0,
) -> Figure:
    """The pool in vLLM's layer-outermost arrangement (`kvviz.core.planes.layer_planes`): one row per
    tensor, x = bytes [0, bytes per block x num_blocks) of the pool; each layer's plane is one
    range (layer stride = num_blocks x page, coloured by kind, labelled `L<i>` where it fits),
    the blocks are subdivisions of a plane (block stride = page): white ticks where they are at
    least 3 px apart, and the pages of `blocks_shown` drawn inside every plane (default: every
    block when num_blocks <= 8), with a state page's padding as a dark band. A group one layer
    short leaves an unused plane, hatched like unused bytes of a block map.
    Every tensor starts at byte 0 of the same pool (docs/hybrid.md#hybrid-planners).
    Returns the Figure; a PoolPlanesData (`pool_planes_data`) works in place of the layout.
    """
    heading = plan_heading(layout)
    if plan_of(layout) is not None:  # a Plan of one pool: that pool
        pools = pools_of(layout, "layout")
        require(len(pools) == 1, f"layout: a plan of {len(pools)} separate pools; give one of them (plan.pools[i])")
        layout = pools[0]
    data = (
        layout
        if isinstance(layout, PoolPlanesData)
        else pool_planes_data(layout, num_blocks, blocks_shown=blocks_shown)
    )
    entries = _entries(data)
    _, key_rows, _ = key_shape(entries, width - grow(LEFT_IN + RIGHT_IN))
    title = wrapped(titled(heading, data.title), width - grow(LEFT_IN), "heading")
    top, bottom = grow(0.75) + grow(0.2) * title.count("\n"), grow(0.6 + key_rows * LEGEND_ROW_H + 0.1)
    n = len(data.rows)
    if fig is None:
        fig = new_figure(width, top + grow(n * _LANE_IN) + bottom)
    ax = place_axes(fig, left=grow(LEFT_IN), right=grow(RIGHT_IN), top=top, bottom=bottom)
    in_per_byte = axes_width_in(ax) / data.size
    px_per_byte = in_per_byte * fig.dpi
    lane_h, half = 0.8, 0.4
    shown = bool(data.blocks_shown)
    planes, plane_y, plane_colors, unused, unused_y = [], [], [], [], []
    pages, page_y, page_colors, pads, pad_y = [], [], [], [], []
    ticks: list[list[tuple[float, float]]] = []
    for row, r in enumerate(data.rows):
        tick_blocks = not shown and r.page_bytes * px_per_byte >= MIN_TICK_PX
        label_y = row - 0.2 if (shown or tick_blocks) else row  # above the pages / ticks
        for pl in r.planes:
            wide_enough = fits(pl.size * in_per_byte, pl.label)
            if pl.layer is None:
                unused.append(PatchRange("unused", pl.start, pl.end, pl.group))
                unused_y.append(row - half)
                if wide_enough:
                    ax.text(
                        (pl.start + pl.end) / 2,
                        row,
                        pl.label,
                        ha="center",
                        va="center",
                        fontsize=pt("small"),
                        zorder=3,
                        color="#333333",
                        gid="size",
                        bbox=dict(boxstyle="square,pad=0.15", facecolor="white", edgecolor="none"),
                    )
                continue
            planes.append(PatchRange("plane", pl.start, pl.end, pl.group, pl.layer, pl.kind))
            plane_y.append(row - half)
            plane_colors.append(KIND_COLORS[pl.kind])
            if wide_enough:
                ax.text(
                    (pl.start + pl.end) / 2,
                    label_y,
                    pl.label,
                    ha="center",
                    va="center",
                    fontsize=pt("small"),
                    color="white",
                    zorder=3,
                    gid="plane-label",
                )
            if tick_blocks:
                ticks.extend(
                    [(pl.start + b * r.page_bytes, row + 0.05), (pl.start + b * r.page_bytes, row + half)]
                    for b in range(1, data.num_blocks)
                )
        for p in r.pages:
            pages.append(PatchRange("page", p.start, p.end, p.group, p.layer, p.kind, block=p.block))
            page_y.append(row + 0.02)
            page_colors.append(KIND_COLORS[p.kind])
            if p.padding_bytes:
                pads.append(PatchRange("pad", p.pad_start, p.end, p.group, p.layer, p.kind, block=p.block))
                pad_y.append(row + 0.02 + 0.38 - 0.4 * 0.38)
    draw_ranges(ax, planes, plane_y, lane_h, facecolors=plane_colors, edgecolors="white", linewidths=1.0)
    # Dark page edges while pages are wide; white hairlines once dark ones would blacken the row.
    wide = bool(pages) and min(r.size for r in pages) * px_per_byte >= 6
    draw_ranges(
        ax,
        pages,
        page_y,
        0.38,
        facecolors=page_colors,
        edgecolors="#333333" if wide else "white",
        linewidths=0.6 if wide else 0.3,
        zorder=2,
    )
    draw_ranges(ax, pads, pad_y, 0.4 * 0.38, facecolors=PAD_COLOR, zorder=2.1, snap=False)
    draw_ranges(ax, unused, unused_y, lane_h, facecolors="white", edgecolors=UNUSED_COLOR, hatch="////")
    if ticks:
        ax.add_collection(
            LineCollection(ticks, colors="white", linewidths=0.6, zorder=2, gid="block-ticks"), autolim=False
        )
    if shown and len(data.blocks_shown) <= 16:  # block numbers over the first plane's pages
        for row, r in enumerate(data.rows):
            for b, lo, hi in r.block_labels:
                if fits((hi - lo) * in_per_byte, f"b{b}"):
                    ax.text(
                        (lo + hi) / 2,
                        row + 0.21,
                        f"b{b}",
                        ha="center",
                        va="center",
                        fontsize=pt("small"),
                        color="white",
                        zorder=3,
                        gid="block-label",
                    )
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_yticks(range(n), [r.label for r in data.rows], fontsize=pt("label"))
    ax.tick_params(axis="y", length=0)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    byte_axis(ax, data.size, label=False)
    ax.set_xlabel(data.xlabel, fontsize=pt("axis"))
    ax.set_title(title, fontsize=pt("heading"), loc="left", pad=grow(16))
    if shown:
        what = data.shown_text
    elif ticks:
        what = f"; white ticks: the {data.num_blocks:,} blocks of each plane"
    else:
        what = f"; a plane's {data.num_blocks:,} blocks are under {MIN_TICK_PX:g} px each at this scale"
    ax.annotate(
        f"{data.overlay_note}{what}",
        xy=(0, 1),
        xycoords="axes fraction",
        xytext=(0, 4),
        textcoords="offset points",
        ha="left",
        va="bottom",
        fontsize=pt("label"),
        color="#333333",
        gid="overlay-note",
    )
    key_below(ax, entries)
    return fig
