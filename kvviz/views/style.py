"""The look every view shares, as plain values: colours by cache kind and role, and byte labels.

Light on purpose (no matplotlib): the data objects of `kvviz.views` and the live map's JSON use
these too, so the PNG figures and the browser cannot disagree on a colour or a label.
"""

from __future__ import annotations

import contextlib
import contextvars
import re

from kvviz.base.defaults import GIB
from kvviz.base.errors import require
from kvviz.base.inputs import MAX_BUDGET_BYTES, Arg, checked, duck, integer, number, optional, text
from kvviz.core.kinds import CacheKind

# One colour per cache kind, the same in every figure and in the live map (CacheKind's style record).
KIND_COLORS: dict[CacheKind, str] = {k: k.color for k in CacheKind}
PAD_COLOR = "#1a1a1a"  # alignment padding inside a page
UNUSED_COLOR = "#9a9a9a"  # hatch of bytes a group leaves unused
REGION_COLORS = {"payload": "#4c72b0", "footer": "#dd8452", "padding": PAD_COLOR}
HOLE_COLOR = "#d62728"  # hatch of the bucketed layout's holes in before_after
SAVED_COLOR = "#2ca02c"
VICTIM_COLOR = "#e41a1c"
ELEMENT_COLORS = {
    "E4M3": "#4c72b0",
    "E2M1": "#64b5cd",
    "UE8M0": "#dd8452",
    "bf16": "#55a868",
    "fp32": "#8172b3",
    "pad": "#555555",
    "byte": "#17becf",
}
OTHER_ELEMENT_COLOR = "#999999"

_UNITS = (("GiB", GIB), ("MiB", GIB >> 10), ("KiB", GIB >> 20))

# ---- text sizes (docs/figures.md#text-size) ------------------------------------------------------------------
# Every text of a figure at its default size is at least 10 pt, legible on a projector: the smallest role is 10 pt
# and the others step up from it. The inches a figure gives its text (label room, margins, key rows, lane heights)
# were laid out for 7-pt text and grow with it (`grow`). `text_scale(s)` multiplies both for the figures made
# inside it: 1.5 for a large room, 0.7 for the compact 7-pt figures of kvviz before issue 37.
FONT_PT = {"small": 10.0, "label": 10.5, "axis": 11.0, "heading": 12.0, "title": 13.0}
DESIGN_PT = 7.0  # the text size the figures' inch constants were laid out for
_SCALE = contextvars.ContextVar("kvviz_text_scale", default=1.0)


def pt(role: str) -> float:
    """The font size in points of a text role ('small', 'label', 'axis', 'heading', 'title') at the current scale."""
    return FONT_PT[role] * _SCALE.get()


def grow(size: float) -> float:
    """`size` (inches, or points of padding) laid out for 7-pt text, at the current text size."""
    return size * FONT_PT["small"] / DESIGN_PT * _SCALE.get()


@contextlib.contextmanager
@checked(scale=number(0.25, 4.0, low_open=False))
def text_scale(scale: float):
    """`with kvviz.views.text_scale(1.5): fig = block_map(plan)`: every figure made inside has its text and the room
    around it `scale` times the default (whose smallest text is 10 pt)."""
    token = _SCALE.set(scale)
    try:
        yield
    finally:
        _SCALE.reset(token)


@checked(n=integer(0, MAX_BUDGET_BYTES), max_decimals=integer(0, 12))
def format_bytes(n: int, *, max_decimals: int = 2) -> str:
    """Exact byte count in the largest power-of-two unit that shows it with at most
    `max_decimals` decimals: 2,560 -> '2.5 KiB', 1,310,720 -> '1.25 MiB', 1,315,008 -> '1,315,008 B'.
    Never rounds: a count no unit shows exactly is written in bytes."""
    require(isinstance(n, int) and n >= 0, f"n={n!r}: must be a non-negative integer")
    for unit, size in _UNITS:
        if n >= size:
            for d in range(max_decimals + 1):
                if (n * 10**d) % size == 0:
                    return f"{n / size:,.{d}f} {unit}"
    return f"{n:,} B"


def with_unit(n: int) -> str:
    """'8,640 B', or '4,608 B (4.5 KiB)' when a unit shows it exactly (`format_bytes`)."""
    short = format_bytes(n)
    return f"{n:,} B" if short.endswith(" B") else f"{n:,} B ({short})"


@checked(stride=integer(1, MAX_BUDGET_BYTES), max_ticks=integer(1, 1000))
def byte_ticks(stride: int, *, max_ticks: int = 8) -> list[int]:
    """Tick positions in [0, stride]: multiples of the smallest power-of-two step (>= 1 B) that
    gives at most `max_ticks` intervals, so that every tick label is exact (`format_bytes`)."""
    require(stride > 0, f"stride={stride}: must be positive")
    step = 1
    while stride // step > max_ticks:
        step *= 2
    return list(range(0, stride + 1, step))


def tick_label(at: int) -> str:
    """The label of a byte tick: '0', or the exact `format_bytes` of its position."""
    return format_bytes(at) if at else "0"


@checked(name=text(empty=True))
def short_layer_name(name: str) -> str:
    """'model.layers.2.attn.indexer.k_cache' -> 'L2 indexer.k_cache', 'model.layers.4.linear_attn'
    and 'model.layers.0.self_attn.attn' -> 'L4', 'L0'; other names unchanged."""
    return re.sub(r"^model\.layers\.(\d+)\.(?:self_attn\.)?(?:linear_)?attn\b\.?", r"L\1 ", name).strip()


def plane_label(layer: str) -> str:
    """'model.layers.12.linear_attn' -> 'L12' (a plane is too narrow for the whole name)."""
    m = re.search(r"layers\.(\d+)\.", layer)
    return f"L{m.group(1)}" if m else short_layer_name(layer)


@checked(
    df=duck("copy", "columns", "dtypes", "rename", what="a pandas DataFrame"),
    units=optional(
        Arg(lambda v: isinstance(v, dict) and all(isinstance(u, str) for u in v.values()), "a dict of column -> unit")
    ),
    decimals=integer(0, 12),
)
def readable_table(df, *, units: dict | None = None, decimals: int = 2):
    """A copy of a pandas DataFrame for reading (a notebook table, a slide): integers with thousands separators
    (21306 -> '21,306'), other numbers to `decimals` places, each column named with its unit (`units`: column ->
    'B', 'GiB', '%', ...: 'block_stride' -> 'block_stride (B)'). The cells become text: compute on the original."""
    units = units or {}
    out = df.copy()
    for column in out.columns:
        kind = out[column].dtype.kind
        if kind in "iu":
            out[column] = [f"{v:,}" for v in out[column]]
        elif kind == "f":
            out[column] = [f"{v:,.{decimals}f}" for v in out[column]]
    return out.rename(columns={c: f"{c} ({u})" for c, u in units.items() if c in out.columns})
