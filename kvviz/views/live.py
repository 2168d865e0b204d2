"""The live-bytes figure of a pool: draws a `LiveBytesData` (kvviz.views.live_data), one lane
per block, nothing else: the owner group's layer ranges, the binned bytes as an image, the
victims outlined in red and numbered, and a table of the victims under the key."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from matplotlib.figure import Figure

from kvviz.base.inputs import checked
from kvviz.core.layout import Layout
from kvviz.views.args import BINS, BLOCKS, MAX_BLOCKS_SHOWN, OPTIONAL_FIGURE, STAT, VICTIMS, WIDTH
from kvviz.views.blockmap_data import plan_heading, titled
from kvviz.views.canvas import LABEL_CHAR_W, axes_width_in, byte_axis, draw_ranges, new_figure, spread, wrapped
from kvviz.views.legend import LEGEND_ROW_H, key_below, key_entries, key_shape
from kvviz.views.live_data import LiveBytesData, live_bytes_data
from kvviz.views.query import PatchRange
from kvviz.views.style import KIND_COLORS, VICTIM_COLOR, grow, pt

__all__ = ["live_bytes"]

_VICTIM_ROW_H = 0.15  # inches a line of the victim table takes
_VICTIM_LABEL_ROWS = 3  # rows of victim numbers a lane holds


def _victim_numbers(ax, data: LiveBytesData) -> None:
    """Numbers over their ranges, in up to three rows a lane, each row spread so that no two overlap."""
    axes_in = axes_width_in(ax)
    per_lane: dict[int, list[tuple[float, str]]] = {}  # lane -> (centre as axes fraction, number)
    for v in data.victims:
        per_lane.setdefault(v.lane, []).append(((v.start + v.end) / 2 / data.stride, str(v.number)))
    for i, labels in per_lane.items():
        labels.sort()
        for row in range(_VICTIM_LABEL_ROWS):
            mine = labels[row::_VICTIM_LABEL_ROWS]
            if not mine:
                continue
            widths = [grow(LABEL_CHAR_W * len(text) + 0.12) / axes_in for _, text in mine]
            for (_, text), x in zip(mine, spread([c for c, _ in mine], widths, pad=grow(0.04) / axes_in)):
                ax.text(
                    x * data.stride,
                    i + 0.2 + 0.24 * row,
                    text,
                    ha="center",
                    va="center",
                    fontsize=pt("small"),
                    color=VICTIM_COLOR,
                    fontweight="bold",
                    zorder=6,
                    gid="victim-number",
                    bbox=dict(boxstyle="round,pad=0.15", facecolor="white", edgecolor=VICTIM_COLOR, linewidth=0.6),
                )


def _victim_table(fig: Figure, table, y: float) -> None:
    """One line a numbered victim, columns aligned (monospace), from `y` inches down."""
    w, h = fig.get_size_inches()
    widths = [max(len(row[c]) for row in table) for c in range(len(table[0]))]

    def line(row):
        return "  ".join(
            cell.rjust(wd) if c in (0, 1, 3) else cell.ljust(wd) for c, (cell, wd) in enumerate(zip(row, widths))
        ).rstrip()

    for k, row in enumerate(table):
        fig.text(
            grow(1.5) / w,
            y / h,
            line(row),
            fontsize=pt("small"),
            family="monospace",
            va="top",
            color="#444444" if k == 0 else VICTIM_COLOR,
            gid="victim-table",
        )
        y -= _VICTIM_ROW_H


@checked(
    blocks=BLOCKS, victims=VICTIMS, bins=BINS, stat=STAT, max_blocks=MAX_BLOCKS_SHOWN, fig=OPTIONAL_FIGURE, width=WIDTH
)
def live_bytes(
    layout: Layout | LiveBytesData,
    block_bytes=None,
    block_groups=None,
    *,
    blocks: Sequence[int] | None = None,
    victims: Iterable = (),
    bins: int = 2048,
    stat: str = "nonzero",
    max_blocks: int = 8,
    fig: Figure | None = None,
    width: float = 12.0,
) -> Figure:
    """The real bytes of some blocks of a pool, one lane per block. Returns the Figure.

    block_bytes: uint8 (num_blocks, block_stride) numpy array or torch tensor (a pool's backing).
    block_groups[b]: the group owning block b (index or name), or None / -1 when free; e.g.
    [block_pool.owner(b) for b in range(num_blocks)] of a kvviz.pool.BlockPool.
    Each lane: a thin strip with the owner group's layer ranges coloured by kind, and an image
    strip of the bytes binned to `bins` columns (fraction of non-zero bytes, or mean byte value
    with stat="mean"). victims (objects or dicts with block, start, end and optionally layer,
    start/end in bytes of that block; a range past the stride continues in the next block; a
    kvviz.verify Corruption is one) get red outlines and a number each, listed with their
    block, bytes and layer in a table under the key (so labels never overlap). Default blocks:
    those the victims touch, then owned blocks, at most `max_blocks`.
    A LiveBytesData (`live_bytes_data`) works in place of the layout and the pool.
    """
    if isinstance(layout, LiveBytesData):
        data = layout
    else:
        data = live_bytes_data(
            layout,
            block_bytes,
            block_groups,
            blocks=blocks,
            victims=victims,
            bins=bins,
            stat=stat,
            max_blocks=max_blocks,
        )
    stride, n = data.stride, len(data.blocks)
    entries = key_entries(data.kinds, padding=False, unused=False, victims=data.has_victims)
    left, right = grow(1.5), grow(1.0)
    _, key_rows, _ = key_shape(entries, width - left - right)
    table_h = (0.1 + _VICTIM_ROW_H * (len(data.victims) + 1)) if data.victims else 0.0
    title = wrapped(titled(plan_heading(layout), data.title), width - left, "heading")
    top, bottom = grow(0.6) + grow(0.2) * title.count("\n"), grow(0.85 + key_rows * LEGEND_ROW_H + table_h)
    if fig is None:
        fig = new_figure(width, top + grow(n * 0.62) + bottom)
    w, h = fig.get_size_inches()
    ax = fig.add_axes((left / w, bottom / h, 1 - (left + right) / w, 1 - (top + bottom) / h))
    span_h, img_lo, img_hi = 0.28, 0.32, 0.94
    mappable = None
    for i in range(n):
        mappable = ax.imshow(
            data.image[i : i + 1],
            extent=(0, stride, i + img_hi, i + img_lo),
            aspect="auto",
            interpolation="nearest",
            cmap="magma",
            vmin=0.0,
            vmax=1.0,
            zorder=1,
        )
    draw_ranges(
        ax,
        [PatchRange("span", s.start, s.end, s.group, s.layer, s.kind, block=s.block) for s in data.spans],
        [s.lane + 0.04 for s in data.spans],
        span_h,
        facecolors=[KIND_COLORS[s.kind] for s in data.spans],
        edgecolors="white",
        linewidths=0.3,
    )
    ax.set_yticks([i + 0.5 for i in range(n)], list(data.lane_labels), fontsize=pt("label"))
    ax.tick_params(axis="y", length=0)
    ax.set_ylim(n, 0)
    byte_axis(ax, stride)
    _victim_numbers(ax, data)
    draw_ranges(
        ax,
        [PatchRange("victim", v.start, v.end, layer=v.layer, block=v.block) for v in data.victims],
        [v.lane + 0.02 for v in data.victims],
        0.96,
        facecolors="none",
        edgecolors=VICTIM_COLOR,
        linewidths=1.6,
        zorder=5,
    )
    ax.set_title(title, fontsize=pt("heading"), loc="left", pad=grow(8))
    cax = fig.add_axes((1 - grow(0.85) / w, bottom / h, grow(0.12) / w, 1 - (top + bottom) / h))
    cb = fig.colorbar(mappable, cax=cax)
    cb.ax.tick_params(labelsize=pt("small"))
    cb.set_label(data.colorbar_label, fontsize=pt("label"))
    key_below(ax, entries)
    if data.table:  # under the key
        _victim_table(fig, data.table, bottom - grow(0.5 + key_rows * LEGEND_ROW_H + 0.1))
    return fig
