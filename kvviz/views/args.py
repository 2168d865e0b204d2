"""What the arguments of the views' public functions must be, declared once (kvviz.base.inputs.checked): a figure,
an axes, a replay read duck-typed, a figure's size in inches, a resolution, a filter name. Light (no matplotlib):
a figure is recognised by what it can do, not by its class."""

from __future__ import annotations

import os

from kvviz.base.inputs import (
    DPI_RANGE,
    MAX_BLOCKS,
    Arg,
    duck,
    flag,
    instance,
    integer,
    items_of,
    number,
    one_of,
    optional,
    text,
)
from kvviz.core.kinds import CacheKind

FIGURE = duck("savefig", "get_children", "axes", what="a matplotlib Figure (e.g. a kvviz figure)")
AXES = optional(duck("add_collection", "get_figure", what="a matplotlib Axes"))
OPTIONAL_FIGURE = optional(FIGURE)
REPLAY = duck("step_columns", "to_json", what="a kvviz.replay Replay (kvviz.replay.replay(...))")
REPLAY_WITH_BLOCKS = duck(
    "step_columns", "to_json", "block_log", what="a kvviz.replay Replay run with record_blocks=True"
)
# A figure's size in inches: below 4 in across (1.5 in high) its margins leave no room for the lanes and labels;
# above 200 in it is past any poster and near what matplotlib can allocate.
MIN_WIDTH_IN, MIN_HEIGHT_IN, MAX_INCHES = 4.0, 1.5, 200.0
WIDTH = number(MIN_WIDTH_IN, MAX_INCHES, low_open=False)
HEIGHT = number(MIN_HEIGHT_IN, MAX_INCHES, low_open=False)
RESOLUTION = integer(*DPI_RANGE)  # dots per inch of a rendered figure
NAME = optional(text())  # a layer, group or panel name to filter on
BLOCK = optional(integer(0, MAX_BLOCKS))
NUM_BLOCKS = integer(1, MAX_BLOCKS)
BLOCKS = optional(items_of(integer(0, MAX_BLOCKS)))
MAX_COLUMNS = 4096  # cells a row of the pool map: a pool's blocks past this are drawn in more rows
COLUMNS = optional(integer(1, MAX_COLUMNS))
MAX_BINS = 1 << 16  # columns of a live-bytes lane: finer than any screen
BINS = integer(1, MAX_BINS)
PATH = Arg(lambda v: isinstance(v, (str, os.PathLike)) and os.fspath(v) != "", "a file path (str or Path)")
LABELS = Arg(
    lambda v: isinstance(v, (tuple, list)) and len(v) == 2 and all(isinstance(x, str) for x in v),
    "two strings, e.g. ('before', 'after')",
)
FLAG = flag()
TITLE = optional(text(empty=True))
VICTIMS = Arg(
    lambda v: hasattr(v, "__iter__") and not isinstance(v, (str, bytes, dict)),
    "an iterable of victim ranges (kvviz.verify Corruptions, or dicts with block, start and end)",
)
STAT = one_of("nonzero", "mean")
MAX_BLOCKS_SHOWN = integer(1, 1024)  # lanes of a live-bytes figure
BYTE_ROWS = Arg(
    lambda v: getattr(v, "ndim", 0) == 2 and str(getattr(v, "dtype", "")) == "uint8" and v.shape[1] > 0,
    "a 2-D uint8 array (blocks x bytes)",
)
CACHE_KIND = optional(instance(CacheKind, what="a kvviz CacheKind"))
MAX_STEPS = 1 << 40  # engine steps of a replay
STEP = integer(0, MAX_STEPS)
