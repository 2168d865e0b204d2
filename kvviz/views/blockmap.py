"""The block map figure: draws a `BlockMapData` (kvviz.views.blockmap_data), nothing else.

The x axis is in BYTES (data units), so a drawn range's x and width are exactly the bytes it
stands for; only the tick labels are in KiB. `draw_lanes` is shared with the before/after figure.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle  # the binding lane's outline
from matplotlib.transforms import blended_transform_factory

from kvviz.base.inputs import checked
from kvviz.core.layout import Layout
from kvviz.views.args import AXES, FLAG, TITLE, WIDTH
from kvviz.views.blockmap_data import BlockMapData, as_block_map_data, plan_heading, titled
from kvviz.views.canvas import (
    LABEL_CHAR_W,
    LANE_H,
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
from kvviz.views.legend import LEGEND_ROW_H, NOTE_H, key_below, key_entries, key_shape, visibility
from kvviz.views.query import PatchRange
from kvviz.views.style import KIND_COLORS, PAD_COLOR, UNUSED_COLOR, format_bytes, grow, pt

__all__ = ["block_map", "block_map_title", "draw_lanes", "stride_line"]


def draw_lanes(
    ax,
    data: BlockMapData,
    *,
    show_padding: bool,
    panel: str | None = None,
    unused_color: str = UNUSED_COLOR,
    lane_h: float = 0.8,
    scale_bytes: int | None = None,
) -> None:
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
            pads.append(PatchRange("pad", r.pad_start, r.end, r.group, r.layer, r.kind, panel=panel))
            pad_y.append(r.lane + half - 0.4 * lane_h)
    # White page edges keep neighbouring pages of one kind apart, unless pages are so narrow
    # (thousands of layers) that the edges would wash the colours out. The padding band covers
    # the lower 40% of the lane so the page colour stays visible above it.
    in_per_byte = axes_width_in(ax) / (scale_bytes or data.stride)
    px_per_byte = in_per_byte * ax.figure.dpi
    median_px = float(np.median([r.size for r in pages])) * px_per_byte
    draw_ranges(
        ax, pages, page_y, lane_h, facecolors=colors, edgecolors="white", linewidths=0.3 if median_px >= 4 else 0
    )
    draw_ranges(ax, pads, pad_y, 0.4 * lane_h, facecolors=PAD_COLOR, zorder=1.1, snap=False)
    unused, unused_y = [], []
    for lane in data.lanes:
        for lo, hi in lane.unused:
            unused.append(PatchRange("unused", lo, hi, lane.name, panel=panel))
            unused_y.append(lane.index - half)
            label = f"unused {format_bytes(hi - lo)}"
            if fits((hi - lo) * in_per_byte, label):
                ax.text(
                    (lo + hi) / 2,
                    lane.index,
                    label,
                    ha="center",
                    va="center",
                    fontsize=pt("small"),
                    zorder=3,
                    color="#333333",
                    gid="size",
                    bbox=dict(boxstyle="square,pad=0.15", facecolor="white", edgecolor="none"),
                )
    draw_ranges(ax, unused, unused_y, lane_h, facecolors="white", edgecolors=unused_color, hatch="////")
    # Byte sizes (and, in lanes of a few pages, layer names) on the pages wide enough to carry them.
    for lane in data.lanes:
        ranges = data.lane_ranges(lane.index)
        for r in ranges:
            width_in = r.page_bytes * in_per_byte
            size = format_bytes(r.page_bytes)
            named = f"{r.short_name}\n{size}"
            label = named if len(ranges) <= 24 and fits(width_in, named) else size if fits(width_in, size) else None
            if label:
                ax.text(
                    r.offset + r.page_bytes / 2,
                    lane.index,
                    label,
                    ha="center",
                    va="center",
                    fontsize=pt("small"),
                    zorder=3,
                    color="white",
                    gid="size",
                )
    binding = [lane.index for lane in data.lanes if lane.binds]
    for i in binding:
        ax.add_patch(
            Rectangle(
                (0, i - half - 0.06),
                data.stride,
                lane_h + 0.12,
                facecolor="none",
                edgecolor="black",
                linewidth=1.4,
                zorder=4,
                gid="binding",
                clip_on=False,
            )
        )
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_yticks(range(n), [lane.label for lane in data.lanes], fontsize=pt("label"))
    for i in binding:
        ax.get_yticklabels()[i].set_fontweight("bold")
    ax.tick_params(axis="y", length=0)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def stride_line(ax, stride: int, text: str, *, color="black") -> None:
    """A dashed line down the lanes at `stride`, labelled `text` at its top (gid stride-mark)."""
    ax.axvline(stride, color=color, linewidth=1.0, linestyle="--", zorder=4)
    ax.annotate(
        text,
        xy=(stride, 1.0),
        xycoords=("data", "axes fraction"),
        xytext=(-3, 3),
        textcoords="offset points",
        ha="right",
        va="bottom",
        fontsize=pt("label"),
        color=color,
        gid="stride-mark",
    )


def _overlay_bracket(ax, data: BlockMapData, above: float = 0.0) -> None:
    """A bracket over the lanes from byte 0 to the stride, saying that every lane is those same
    bytes of one block, and the stride marked at its right end (dashed line down the lanes)."""
    h_in = ax.figure.get_figheight() * ax.get_position().height
    y0, y1 = 1 + grow(0.05) / h_in, 1 + grow(0.11) / h_in
    trans = blended_transform_factory(ax.transData, ax.transAxes)
    ax.add_line(
        Line2D(
            [0, 0, data.stride, data.stride],
            [y0, y1, y1, y0],
            transform=trans,
            color="#333333",
            linewidth=0.9,
            clip_on=False,
            gid="bracket",
        )
    )
    ax.axvline(data.stride, color="black", linewidth=1.0, linestyle="--", zorder=4)
    ax.annotate(
        data.overlay_note,
        xy=(0, y1),
        xycoords=trans,
        xytext=(2, 2),
        textcoords="offset points",
        ha="left",
        va="bottom",
        fontsize=pt("label"),
        color="#333333",
        gid="overlay-note",
    )
    ax.annotate(
        f"stride {data.stride_text}",
        xy=(data.stride, y1),
        xycoords=trans,
        xytext=(0, 2 + above),  # `above` points higher when the note leaves no room (_stride_above)
        textcoords="offset points",
        ha="right",
        va="bottom",
        fontsize=pt("label"),
        fontweight="bold",
        gid="stride-mark",
    )


def _stride_above(data: BlockMapData, plot_w: float) -> float:
    """Points the stride mark goes above the overlay note's line: 0 when the note (left) and the stride (right)
    fit side by side over `plot_w` inches, else one line."""
    chars = len(data.overlay_note) + len(f"stride {data.stride_text}") + 4
    text_in = grow(LABEL_CHAR_W) * chars * pt("label") / pt("small")
    return 0.0 if text_in < plot_w else 1.3 * pt("label")


def block_map_title(layout: Layout | BlockMapData) -> str:
    """The block map's title: planner, block stride and binding group (`BlockMapData.title`)."""
    return as_block_map_data(layout).title


@checked(ax=AXES, show_padding=FLAG, title=TITLE, width=WIDTH)
def block_map(
    layout: Layout | BlockMapData, *, ax=None, show_padding: bool = True, title: str | None = None, width: float = 12.0
) -> Figure:
    """The block's bytes [0, block_stride) across, one lane per group, drawn from
    `block_map_data(layout)` (a BlockMapData works too: the live map's data; a Plan: its pool, or one lane
    per pool of separate pools, titled with what was planned). Returns the Figure.

    One range per layer page (coloured by cache kind), one per padding range (a dark band at the
    bottom of the page's tail) and one per unused range (hatched, its size written when it fits);
    a bracket over the lanes saying that every lane is the same bytes [0, stride) of one block;
    the stride marked at its end; the binding group outlined and flagged; byte sizes on ranges
    wide enough; a legend of the kinds visible at this scale and a note naming the slivers.
    """
    data = as_block_map_data(layout)
    if title is None:  # a Plan says what was planned: model, KV dtype, TP, every knob given
        title = plan_heading(layout)
    plot_w = width - grow(LEFT_IN + RIGHT_IN) if ax is None else axes_width_in(ax)
    heading = wrapped(titled(title, data.title), plot_w + grow(RIGHT_IN))
    above = _stride_above(data, plot_w)
    # each line of the title past the first, and the stride mark's own line when it has one
    extra = grow(0.2) * heading.count("\n") + above / 72
    vis = visibility([data], [plot_w / data.stride], show_padding=show_padding)
    entries = key_entries(
        vis.visible, padding=vis.padding_visible, unused=data.has_unused, padding_label=vis.padding_label
    )
    note = vis.note([data])
    if ax is None:
        _, key_rows, _ = key_shape(entries, plot_w)
        bottom = grow(0.6 + key_rows * LEGEND_ROW_H + 0.1 + (NOTE_H if note else 0))
        fig = new_figure(width, grow(0.8 + len(data.lanes) * LANE_H) + extra + bottom)
        ax = place_axes(fig, left=grow(LEFT_IN), right=grow(RIGHT_IN), top=grow(0.8) + extra, bottom=bottom)
    fig = ax.figure
    draw_lanes(ax, data, show_padding=show_padding)
    byte_axis(ax, data.stride)
    _overlay_bracket(ax, data, above)
    ax.set_title(heading, fontsize=pt("heading"), loc="left", pad=grow(24) + above)
    key_below(ax, entries, note=note)
    return fig
