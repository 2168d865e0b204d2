"""The before/after figure: draws a `BeforeAfterData` (kvviz.views.compare_data), two block maps
on one byte scale, nothing else."""

from __future__ import annotations

from matplotlib.figure import Figure

from kvviz.core.layout import Layout
from kvviz.views.blockmap import draw_lanes, stride_line
from kvviz.views.blockmap_data import BlockMapData
from kvviz.views.canvas import LANE_H, LEFT_IN, RIGHT_IN, byte_axis, draw_ranges, new_figure
from kvviz.views.compare_data import BeforeAfterData, before_after_data
from kvviz.views.legend import LEGEND_ROW_H, NOTE_H, key_below, key_entries, key_shape, visibility
from kvviz.views.query import PatchRange
from kvviz.views.style import HOLE_COLOR, SAVED_COLOR, UNUSED_COLOR

__all__ = ["before_after"]


def before_after(
    before: Layout | BlockMapData | BeforeAfterData,
    after: Layout | BlockMapData | None = None,
    *,
    fig: Figure | None = None,
    show_padding: bool = True,
    labels: tuple[str, str] = ("before", "after"),
    width: float = 12.0,
    title: str | None = None,
) -> Figure:
    """Both layouts on one x scale (the larger stride, normally the before one): both strides,
    the bytes and percentage saved per block, the binding groups outlined, and the holes of a
    bucketed layout in red. Returns the Figure. A BeforeAfterData alone works too. `title`, when
    given, comes before the strides in the figure's title (what is compared: the model, the knobs)."""
    data = before if isinstance(before, BeforeAfterData) else before_after_data(before, after, labels=labels)
    db, da = data.before, data.after
    datas = (db, da)
    left, right = LEFT_IN, RIGHT_IN
    plot_w = width - left - right
    vis = visibility(datas, [plot_w / data.scale] * 2, show_padding=show_padding)
    entries = key_entries(
        vis.visible,
        padding=vis.padding_visible,
        unused=data.has_unused,
        holes=data.has_holes,
        saved=data.saved > 0,
        padding_label=vis.padding_label,
    )
    note = vis.note(datas)
    nb, na = len(db.lanes), len(da.lanes)
    _, key_rows, _ = key_shape(entries, plot_w)
    top, gap, bottom = 1.0, 0.55, 0.6 + key_rows * LEGEND_ROW_H + 0.1 + (NOTE_H if note else 0)
    if fig is None:
        fig = new_figure(width, top + (nb + na) * LANE_H + gap + bottom)
    w, h = fig.get_size_inches()
    plot_h = h - top - gap - bottom
    hb = plot_h * nb / (nb + na)
    ax_b = fig.add_axes((left / w, (bottom + (plot_h - hb) + gap) / h, 1 - (left + right) / w, hb / h))
    ax_a = fig.add_axes((left / w, bottom / h, 1 - (left + right) / w, (plot_h - hb) / h), sharex=ax_b)
    for ax, (panel, label, d) in zip((ax_b, ax_a), data.panels):
        hole = d.binding_group is None
        draw_lanes(
            ax,
            d,
            show_padding=show_padding,
            panel=panel,
            unused_color=HOLE_COLOR if hole else UNUSED_COLOR,
            scale_bytes=data.scale,
        )
        stride_line(ax, d.stride, f"{label} stride {d.stride:,} B")
        ax.set_title(data.panel_title(label, d), fontsize=8.5, loc="left", pad=13)
    if data.saved_range is not None:
        lo, hi = data.saved_range
        draw_ranges(
            ax_a, [PatchRange("saved", lo, hi, panel="after")], -0.5, na, facecolors=SAVED_COLOR, alpha=0.25, zorder=0.5
        )
        ax_a.text(
            (lo + hi) / 2,
            (na - 1) / 2,
            data.saved_text,
            ha="center",
            va="center",
            fontsize=7.5,
            color="#1b5e20",
            zorder=3,
        )
    byte_axis(ax_a, data.scale)
    ax_b.tick_params(axis="x", labelbottom=False)
    fig.suptitle(
        data.title if title is None else f"{title}: {data.title}",
        x=left / w,
        ha="left",
        y=1 - 0.12 / h,
        va="top",
        fontsize=10,
    )
    fig.text(
        left / w, 1 - 0.42 / h, data.overlay_note, ha="left", va="top", fontsize=8, color="#333333", gid="overlay-note"
    )
    key_below(ax_a, entries, note=note)
    return fig
