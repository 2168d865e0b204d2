"""The page-anatomy figure: draws a `PageAnatomyData` (kvviz.views.anatomy_data), nothing else:
the page's regions, one row field by field, and a packed 4-bit field's nibble order."""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import Rectangle  # the nibble boxes

from kvviz.base.inputs import checked
from kvviz.views.anatomy_data import BarPart, PageAnatomyData, page_anatomy_data
from kvviz.views.args import NAME, OPTIONAL_FIGURE, WIDTH
from kvviz.views.blockmap_data import plan_heading, titled
from kvviz.views.canvas import draw_ranges, new_figure, spread, wrapped
from kvviz.views.query import PatchRange
from kvviz.views.style import grow, pt

__all__ = ["page_anatomy"]

_ANATOMY_CHAR_W = 0.066  # inches a character of the anatomy labels takes at 7.5 pt (grown with the text: style.grow)


def _labelled_bar(ax, parts: tuple[BarPart, ...], total: int, role: str, owner: str) -> None:
    """One bar [0, total) across the axes, one range per part; the labels under it, spread so
    they never overlap, each with a leader line to its range."""
    ax.set_xlim(0, total)
    ax.set_ylim(0, 1)
    ax.set_axis_off()
    draw_ranges(
        ax,
        [PatchRange(role, p.start, p.end, group=owner, layer=p.name) for p in parts],
        0,
        1,
        facecolors=[p.color for p in parts],
        edgecolors="white",
        linewidths=0.8,
    )
    axes_w = ax.get_position().width * ax.figure.get_figwidth()
    widths = [min(1.0, grow(_ANATOMY_CHAR_W) * max(map(len, p.text.splitlines())) / axes_w) for p in parts]
    centers = [(p.start + p.size / 2) / total for p in parts]
    for p, x in zip(parts, spread(centers, widths)):
        ax.annotate(
            p.text,
            xy=(p.start + p.size / 2, 0),
            xycoords="data",
            xytext=(x, -0.45),
            textcoords="axes fraction",
            ha="center",
            va="top",
            fontsize=pt("label"),
            arrowprops=dict(arrowstyle="-", color="#666666", linewidth=0.6, shrinkA=1, shrinkB=0, relpos=(0.5, 1.0)),
        )


def _nibbles(ax, text: str) -> None:
    """The first bytes of a packed 4-bit field: byte i = elem 2i (low nibble) | elem 2i+1 (high)."""
    nbytes = 4
    ax.set_xlim(0, nbytes)
    ax.set_ylim(0, 1)
    ax.axis("off")
    for i in range(nbytes):
        for half, (label, shade) in enumerate(((f"lo: e{2 * i}", "#a6d4e6"), (f"hi: e{2 * i + 1}", "#64b5cd"))):
            ax.add_patch(Rectangle((i + 0.5 * half, 0), 0.5, 1, facecolor=shade, edgecolor="white", linewidth=1))
            ax.text(i + 0.25 + 0.5 * half, 0.5, label, ha="center", va="center", fontsize=pt("small"))
        ax.text(i + 0.5, 1.08, f"byte {i}", ha="center", va="bottom", fontsize=pt("small"))
    ax.text(
        nbytes + 0.15, 0.5, text, ha="left", va="center", fontsize=pt("label"), transform=ax.transData, clip_on=False
    )


@checked(layer=NAME, fig=OPTIONAL_FIGURE, width=WIDTH)
def page_anatomy(cache, *, layer: str | None = None, fig: Figure | None = None, width: float = 11.0) -> Figure:
    """One layer's page zoomed: payload, footer and padding regions (`page_regions`), then one
    row field by field (its payload part and its footer part, which sit apart in the page);
    a packed 4-bit field also gets its nibble order drawn. `cache`: a CacheSpec, a Placement or
    a PageAnatomyData (`page_anatomy_data`), or a Plan or Layout: the page of `layer` (default: its
    first layer). Returns the Figure."""
    data = cache if isinstance(cache, PageAnatomyData) else page_anatomy_data(cache, layer=layer)
    left, right, bar_h = grow(0.5), grow(0.5), grow(0.34)
    title = wrapped(titled(plan_heading(cache), data.title), width - left, "title")
    subtitle = wrapped(data.subtitle, width - left, "axis")
    extra = grow(0.25) * title.count("\n") + grow(0.2) * subtitle.count("\n")  # lines past the first of each
    fig = fig or new_figure(width, grow(4.1 if data.packed else 3.5) + extra)
    w, h = fig.get_size_inches()

    def axes(bottom_in, x0=left, x1=None, height_in=bar_h):
        x1 = w - right if x1 is None else x1
        return fig.add_axes((x0 / w, bottom_in / h, (x1 - x0) / w, height_in / h))

    page_y = h - grow(1.05) - extra - bar_h
    _labelled_bar(axes(page_y), data.page, data.page_bytes, "region", data.cache_name)
    fig.text(left / w, (page_y + bar_h + grow(0.08)) / h, data.page_line, fontsize=pt("axis"), va="bottom")

    row_y = page_y - grow(1.35)
    if data.footer:
        split = left + (w - left - right) * 0.68
        ax_pay, ax_foot = axes(row_y, x1=split - grow(0.3)), axes(row_y, x0=split + grow(0.3))
    else:
        ax_pay, ax_foot = axes(row_y), None
    _labelled_bar(ax_pay, data.payload, data.payload_bytes, "field", "payload")
    fig.text(left / w, (row_y + bar_h + grow(0.08)) / h, data.payload_line, fontsize=pt("axis"), va="bottom")
    if ax_foot is not None:
        _labelled_bar(ax_foot, data.footer, data.footer_bytes, "field", "footer")
        fig.text(
            (split + grow(0.3)) / w,
            (row_y + bar_h + grow(0.08)) / h,
            data.footer_line,
            fontsize=pt("axis"),
            va="bottom",
        )
    if data.packed:
        text = wrapped(data.packing_text, w - left - right - grow(4.2), "label")  # to the right of the 4 bytes
        _nibbles(axes(grow(0.2), x1=left + grow(4.0), height_in=grow(0.3)), text)
    fig.text(left / w, 1 - grow(0.12) / h, title, ha="left", va="top", fontsize=pt("title"))
    below = grow(0.42) + grow(0.25) * title.count("\n")
    fig.text(left / w, 1 - below / h, subtitle, fontsize=pt("axis"), color="#444444", va="top")
    return fig
