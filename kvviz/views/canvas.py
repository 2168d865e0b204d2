"""Drawing primitives every figure shares: the figure class, axes placed in inches, the byte
axis, byte ranges as one polygon each, and label fitting. Figures are made without pyplot (no
global state, headless with Agg)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.ticker import FixedFormatter, FixedLocator

from kvviz.views.query import DEFAULT_DPI, PatchRange, to_png_bytes
from kvviz.views.style import byte_ticks, grow, pt, tick_label

__all__ = [
    "KvvizFigure",
    "new_figure",
    "place_axes",
    "axes_width_in",
    "byte_axis",
    "draw_ranges",
    "fits",
    "wrapped",
    "spread",
    "LEFT_IN",
    "RIGHT_IN",
    "LANE_H",
    "LABEL_CHAR_W",
]

LANE_H = 0.42  # inches per group lane (at 7-pt text: every inch constant here is grown with the text, style.grow)
# Margins of the lanes: the left one holds the group labels; the right one half a tick label, so
# that a tick at the stride is not cut off.
LEFT_IN, RIGHT_IN = 1.75, 0.45
# A label fits a range when the range is wider than its text (~0.058 in a character of 7 pt) plus a margin.
LABEL_CHAR_W = 0.058
_LABEL_MARGIN_IN = 0.08


class KvvizFigure(Figure):
    """A matplotlib `Figure` that draws itself in Jupyter with any backend: kvviz builds figures
    without pyplot (no figure manager), so IPython would otherwise print `<Figure size ...>` unless
    the notebook selected `%matplotlib inline`; `_repr_png_` is IPython's rich display hook."""

    def _repr_png_(self) -> bytes:
        """The figure as PNG bytes (`to_png_bytes`), for IPython's display."""
        return to_png_bytes(self)


def new_figure(width: float, height: float) -> Figure:
    """A KvvizFigure of `width` x `height` inches at DEFAULT_DPI."""
    return KvvizFigure(figsize=(width, height), dpi=DEFAULT_DPI)


def place_axes(fig: Figure, *, left: float, right: float, top: float, bottom: float):
    """An axes with margins given in inches (no layout engine: predictable and fast)."""
    w, h = fig.get_size_inches()
    return fig.add_axes((left / w, bottom / h, 1 - (left + right) / w, 1 - (top + bottom) / h))


def axes_width_in(ax) -> float:
    """Width of an axes in inches."""
    return ax.figure.get_figwidth() * ax.get_position().width


def byte_axis(ax, stride: int, *, label: bool = True) -> None:
    """x in bytes, limits [0, stride]; ticks at multiples of a power-of-two step, labelled exactly
    (`byte_ticks` and `format_bytes`: 2,560 B is '2.5 KiB', never a rounded '2')."""
    ax.set_xlim(0, stride)
    ticks = byte_ticks(stride)
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FixedFormatter([tick_label(t) for t in ticks]))
    if label:
        ax.set_xlabel("offset in the block", fontsize=pt("axis"))
    ax.tick_params(axis="x", labelsize=pt("small"))


def draw_ranges(
    ax, infos: Sequence[PatchRange], y0, height, *, facecolors, zorder: float = 1.0, **style
) -> PolyCollection | None:
    """One polygon per range: x [start, end), y [y0, y0 + height) (scalars or one per range).
    The collection carries `kvviz_ranges` (what `find_patches` reads back); None when empty."""
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


def fits(width_in: float, text: str) -> bool:
    """Whether `text` (the small text size) fits inside a range `width_in` inches wide."""
    return width_in > grow(LABEL_CHAR_W) * max(map(len, text.splitlines())) + grow(_LABEL_MARGIN_IN)


def wrapped(text: str, width_in: float, role: str = "heading") -> str:
    """`text` broken at its clause boundaries ('; ', then ', ', then spaces) into lines that fit `width_in` inches
    at the font size of `role` (a character ~0.6 em of DejaVu Sans): a title naming a model and its knobs never
    runs off the figure."""
    per_line = max(20, int(width_in / (0.6 * pt(role) / 72)))
    lines = []
    for line in text.split("\n"):
        while len(line) > per_line:
            cut = max((line.rfind(sep, 0, per_line) for sep in ("; ", ", ", " ")), default=-1)
            cut = cut if cut > per_line // 3 else per_line
            lines.append(line[: cut + 1].rstrip())
            line = line[cut + 1 :].lstrip()
        lines.append(line)
    return "\n".join(lines)


def spread(centers: Sequence[float], widths: Sequence[float], pad: float = 0.02) -> list[float]:
    """Label centres (axes fraction) near `centers`, labels `widths` wide not overlapping, inside [0, 1]."""
    xs: list[float] = []
    for c, wd in zip(centers, widths):
        lo = wd / 2 if not xs else xs[-1] + (widths[len(xs) - 1] + wd) / 2 + pad
        xs.append(max(c, lo))
    for i in range(len(xs) - 1, -1, -1):
        hi = 1 - widths[i] / 2 if i == len(xs) - 1 else xs[i + 1] - (widths[i + 1] + widths[i]) / 2 - pad
        xs[i] = min(xs[i], hi)
    return xs
