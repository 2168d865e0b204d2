"""The key (legend) of a figure: which entries it has, which kinds are too thin to see at the
figure's scale (the sliver note), and the key drawn as a grid under an axes."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from matplotlib.collections import PolyCollection

from kvviz.core.kinds import CacheKind
from kvviz.views.blockmap_data import BlockMapData
from kvviz.views.query import DEFAULT_DPI
from kvviz.views.style import (
    HOLE_COLOR,
    KIND_COLORS,
    PAD_COLOR,
    SAVED_COLOR,
    UNUSED_COLOR,
    VICTIM_COLOR,
    format_bytes,
    grow,
    pt,
)

__all__ = [
    "KeyEntry",
    "key_entries",
    "key_shape",
    "key_below",
    "Visibility",
    "visibility",
    "padding_label",
    "MIN_VISIBLE_PX",
    "MIN_VISIBLE_IN",
    "LEGEND_ROW_H",
    "NOTE_H",
]

# A kind (or the padding) whose widest range is narrower than this many pixels is invisible: it
# gets a line in the sliver note instead of a legend entry nobody could find in the figure.
MIN_VISIBLE_PX = 3.0
MIN_VISIBLE_IN = MIN_VISIBLE_PX / DEFAULT_DPI
LEGEND_ROW_H = 0.22  # inches a row of the key takes
NOTE_H = 0.22  # inches of the sliver note under the key

# At 7-pt text, as every inch constant of the views (grown with the text: style.grow).
_KEY_CHAR_W = 0.058  # inches per character of the key (DejaVu Sans, generous)
_KEY_SWATCH = (0.2, 0.11)  # inches


@dataclasses.dataclass(frozen=True)
class KeyEntry:
    """One entry of a figure's key (legend): a swatch and its label."""

    label: str
    facecolor: str
    edgecolor: str = "none"
    hatch: str | None = None
    alpha: float = 1.0


def key_entries(
    kinds,
    *,
    padding: bool,
    unused: bool,
    holes: bool = False,
    saved: bool = False,
    victims: bool = False,
    padding_label: str = "alignment padding",
) -> list[KeyEntry]:
    """The key of a figure: one entry per kind, then the padding, unused, holes, saved and
    victim entries asked for."""
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


def key_shape(entries: Sequence[KeyEntry], avail_in: float) -> tuple[int, int, float]:
    """(columns, rows, column width in inches) of a key that fits `avail_in` inches."""
    if not entries:
        return 1, 0, 0.0
    colw = grow(_KEY_SWATCH[0] + 0.25 + _KEY_CHAR_W * max(len(e.label) for e in entries))
    ncol = max(1, min(len(entries), int(avail_in // colw)))
    return ncol, -(-len(entries) // ncol), colw


def key_below(ax, entries: Sequence[KeyEntry], *, offset_in: float = 0.5, note: str = "") -> None:
    """The key as a grid under the axes: swatches in collections, labels as texts (gid "key").

    Drawn by hand: matplotlib's Legend lays its texts out several times and costs about as much
    as all the pages of a 250-layer map together.
    """
    fig = ax.figure
    w, h = fig.get_size_inches()
    pos = ax.get_position()
    ncol, nrows, colw = key_shape(entries, pos.width * w)
    if note:  # under the key: what is too thin to see at this scale
        fig.text(
            pos.x0,
            (pos.y0 * h - grow(offset_in + nrows * LEGEND_ROW_H + 0.04)) / h,
            note,
            fontsize=pt("label"),
            color="#444444",
            ha="left",
            va="top",
            gid="sliver-note",
        )
    if not entries:
        return
    left = (pos.x0 + pos.width / 2) * w - ncol * colw / 2
    top = pos.y0 * h - grow(offset_in)
    sw, sh = grow(_KEY_SWATCH[0]), grow(_KEY_SWATCH[1])
    styles: dict[tuple, list] = {}
    for i, e in enumerate(entries):
        x, y = left + (i % ncol) * colw, top - (i // ncol) * grow(LEGEND_ROW_H)
        verts = [(x / w, (y - sh) / h), ((x + sw) / w, (y - sh) / h), ((x + sw) / w, y / h), (x / w, y / h)]
        styles.setdefault((e.facecolor, e.edgecolor, e.hatch, e.alpha), []).append(verts)
        fig.text(
            (x + sw + grow(0.07)) / w,
            (y - sh / 2) / h,
            e.label,
            fontsize=pt("label"),
            va="center",
            ha="left",
            gid="key",
        )
    for (face, edge, hatch, alpha), verts in styles.items():
        fig.add_artist(
            PolyCollection(
                verts,
                facecolors=face,
                edgecolors=edge,
                hatch=hatch,
                alpha=alpha,
                linewidths=0.8 if edge != "none" else 0,
                transform=fig.transFigure,
                gid="key",
            )
        )


def padding_label(datas: Sequence[BlockMapData]) -> str:
    """What the padding of these maps is: a hybrid model's state pages padded up to the attention
    page (docs/hybrid.md#hybrid-caches), alignment padding, or both."""
    kinds = {r.kind.is_state for d in datas for r in d.ranges if r.padding_bytes}
    if kinds == {True}:
        return "padding (state page grown to the attention page)"
    return "padding (alignment, or a state page grown)" if kinds == {True, False} else "alignment padding"


@dataclasses.dataclass(frozen=True)
class Visibility:
    """Which kinds a block map can show at its scale: a kind whose widest page is narrower than
    MIN_VISIBLE_IN (and the padding, likewise) goes into the sliver note, not the legend."""

    visible: tuple[CacheKind, ...]
    slivers: tuple[CacheKind, ...]
    padding_visible: bool
    max_padding: int
    padding_label: str = "alignment padding"  # what the padding is (`padding_label`)

    def note(self, datas: Sequence[BlockMapData]) -> str:
        """The sliver note: each invisible kind's pages and sizes, and invisible padding ('' if none)."""
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


def visibility(datas: Sequence[BlockMapData], in_per_byte: Sequence[float], *, show_padding: bool) -> Visibility:
    """Which kinds of these maps are visible at `in_per_byte` inches a byte (one scale per map):
    a kind by its widest run of adjacent pages in one lane, the padding by its widest band."""
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
    return Visibility(
        visible=tuple(k for k in kinds if widest[k] >= MIN_VISIBLE_IN),
        slivers=tuple(k for k in kinds if widest[k] < MIN_VISIBLE_IN),
        padding_visible=pad_in >= MIN_VISIBLE_IN,
        max_padding=max_pad,
        padding_label=padding_label(datas),
    )
