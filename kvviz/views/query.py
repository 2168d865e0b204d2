"""Finding what a kvviz figure draws, and writing it out.

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
import zlib
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from matplotlib.text import Text

from kvviz.base.defaults import DPI
from kvviz.base.errors import KvvizError
from kvviz.base.inputs import checked, printable
from kvviz.core.kinds import CacheKind
from kvviz.views.args import BLOCK, CACHE_KIND, FIGURE, NAME, PATH, RESOLUTION

__all__ = [
    "DEFAULT_DPI",
    "PatchRange",
    "RangePatch",
    "find_patches",
    "patch_ranges",
    "figure_texts",
    "legend_labels",
    "save_figure",
    "to_png_bytes",
]

DEFAULT_DPI = DPI


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
        """Bytes of the range: end - start."""
        return self.end - self.start

    @property
    def gid(self) -> str:
        """The range's id in the figure (module doc)."""
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

    def __init__(self, collection, index: int, info: PatchRange) -> None:
        self.collection, self.index, self.info = collection, index, info

    def __repr__(self) -> str:
        return f"RangePatch({self.get_gid()!r}, x={self.get_x():,.0f}, width={self.get_width():,.0f})"

    @property
    def axes(self):
        """The axes the range is drawn in."""
        return self.collection.axes

    def _vertices(self) -> np.ndarray:
        return self.collection.get_paths()[self.index].vertices

    def get_x(self) -> float:
        """Left edge in data units (bytes)."""
        return float(self._vertices()[:, 0].min())

    def get_width(self) -> float:
        """Width in data units (bytes)."""
        v = self._vertices()[:, 0]
        return float(v.max() - v.min())

    def get_y(self) -> float:
        """Lower y in data units."""
        return float(self._vertices()[:, 1].min())

    def get_height(self) -> float:
        """Height in data units."""
        v = self._vertices()[:, 1]
        return float(v.max() - v.min())

    def _pick(self, colors) -> tuple:
        colors = np.asarray(colors)
        if len(colors) == 0:
            return (0.0, 0.0, 0.0, 0.0)
        return tuple(float(c) for c in colors[self.index % len(colors)])

    def get_facecolor(self) -> tuple:
        """The drawn face colour (RGBA)."""
        return self._pick(self.collection.get_facecolor())

    def get_edgecolor(self) -> tuple:
        """The drawn edge colour (RGBA)."""
        return self._pick(self.collection.get_edgecolor())

    def get_hatch(self) -> str | None:
        """The collection's hatch, or None."""
        return self.collection.get_hatch()

    def get_gid(self) -> str:
        """The range's gid (`PatchRange.gid`)."""
        return self.info.gid


def _all_ranges(fig: Figure):
    for ax in fig.axes:
        for coll in ax.collections:
            for i, info in enumerate(getattr(coll, "kvviz_ranges", ())):
                yield RangePatch(coll, i, info)


@checked(fig=FIGURE, kind=NAME, layer=NAME, group=NAME, cache_kind=CACHE_KIND, block=BLOCK, panel=NAME)
def find_patches(
    fig: Figure,
    *,
    kind: str | None = None,
    layer: str | None = None,
    group: str | None = None,
    cache_kind: CacheKind | None = None,
    block: int | None = None,
    panel: str | None = None,
) -> list[RangePatch]:
    """The drawn ranges of a figure that match every given filter, in drawing order.

    kind: the role ('page', 'pad', 'unused', 'saved', 'region', 'field', 'span', 'victim', 'plane');
    layer / group: names; cache_kind: a CacheKind; block: a pool block (live_bytes);
    panel: 'before' or 'after' (before_after).
    """
    out = []
    for p in _all_ranges(fig):
        r = p.info
        if (
            (kind is None or r.role == kind)
            and (layer is None or r.layer == layer)
            and (group is None or r.group == group)
            and (cache_kind is None or r.cache_kind == cache_kind)
            and (block is None or r.block == block)
            and (panel is None or r.panel == panel)
        ):
            out.append(p)
    return out


@checked(fig=FIGURE)
def patch_ranges(fig: Figure, **filters) -> list[PatchRange]:
    """What every drawn range stands for (same filters as `find_patches`)."""
    return [p.info for p in find_patches(fig, **filters)]


@checked(fig=FIGURE)
def figure_texts(fig: Figure) -> list[str]:
    """Every non-empty text of a figure: titles, annotations, tick labels, legend entries."""
    return [t.get_text() for t in fig.findobj(Text) if t.get_text()]


@checked(fig=FIGURE)
def legend_labels(fig: Figure) -> list[str]:
    """The labels of the figure's key (and of any matplotlib legend added to it)."""
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    key = [t.get_text() for t in fig.texts if t.get_gid() == "key"]
    return key + [t.get_text() for lg in legends for t in lg.get_texts()]


@checked(fig=FIGURE, path=PATH, dpi=RESOLUTION)
def save_figure(fig: Figure, path, *, dpi: int = DEFAULT_DPI) -> None:
    """Write a figure; the format follows the suffix (png, svg, pdf). Deterministic metadata."""
    fmt = Path(path).suffix.lstrip(".").lower() or "png"
    metadata = {
        "png": {"Software": "kvviz"},
        "svg": {"Date": None, "Creator": "kvviz"},
        "pdf": {"CreationDate": None},
    }.get(fmt)
    try:
        fig.savefig(path, format=fmt, dpi=dpi, metadata=metadata)
    except (OSError, zlib.error) as e:  # a folder, no permission, a full disk (the PDF writer's zlib says so)
        raise KvvizError(
            f"path={printable(path)!r}: cannot write the figure: {getattr(e, 'strerror', None) or e}"
        ) from None


@checked(fig=FIGURE, dpi=RESOLUTION)
def to_png_bytes(fig: Figure, *, dpi: int = DEFAULT_DPI) -> bytes:
    """The figure as PNG bytes at `dpi` (deterministic metadata)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": "kvviz"})
    return buf.getvalue()
