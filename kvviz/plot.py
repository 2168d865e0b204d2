"""Figures of a planned block: byte map, before/after, page anatomy, pool planes, live bytes.

The figures live in `kvviz.views` (one data object per figure, one module per figure that draws
it); this module keeps the names users call: `kvviz.plot.block_map` and the rest. Every builder
returns a `matplotlib.figure.Figure` (a `KvvizFigure`, which shows itself in Jupyter) made
without pyplot, and accepts a figure or axes to draw into; saving is separate (`save_figure`).

The x axis of every byte map is in BYTES (data units); `find_patches` / `patch_ranges` read the
drawn ranges back (their gids: `kvviz.views.query`).
"""

from __future__ import annotations

from .views.anatomy import page_anatomy
from .views.anatomy_data import PageAnatomyData, page_anatomy_data
from .views.blockmap import block_map, block_map_title
from .views.blockmap_data import BlockMapData, block_map_data
from .views.canvas import KvvizFigure
from .views.compare import before_after
from .views.compare_data import BeforeAfterData, before_after_data
from .views.legend import MIN_VISIBLE_IN, MIN_VISIBLE_PX, KeyEntry, Visibility
from .views.live import live_bytes
from .views.live_data import LiveBytesData, binned_bytes, live_bytes_data
from .views.planes import pool_planes
from .views.planes_data import PLANE_PAGES_MAX_BLOCKS, PoolPlanesData, pool_planes_data
from .views.query import (DEFAULT_DPI, PatchRange, RangePatch, figure_texts, find_patches, legend_labels,
                          patch_ranges, save_figure, to_png_bytes)
from .views.style import (ELEMENT_COLORS, HOLE_COLOR, KIND_COLORS, PAD_COLOR, REGION_COLORS, SAVED_COLOR,
                          UNUSED_COLOR, VICTIM_COLOR, format_bytes, short_layer_name)

__all__ = [
    "block_map", "before_after", "page_anatomy", "pool_planes", "live_bytes", "block_map_title",
    "find_patches", "patch_ranges", "figure_texts", "legend_labels", "save_figure", "to_png_bytes",
    "binned_bytes", "KvvizFigure", "PatchRange", "RangePatch", "KeyEntry", "Visibility",
    "BlockMapData", "block_map_data", "BeforeAfterData", "before_after_data", "PoolPlanesData",
    "pool_planes_data", "LiveBytesData", "live_bytes_data", "PageAnatomyData", "page_anatomy_data",
    "DEFAULT_DPI", "MIN_VISIBLE_PX", "MIN_VISIBLE_IN", "PLANE_PAGES_MAX_BLOCKS",
    "KIND_COLORS", "PAD_COLOR", "UNUSED_COLOR", "REGION_COLORS", "HOLE_COLOR", "SAVED_COLOR", "VICTIM_COLOR",
    "ELEMENT_COLORS", "short_layer_name", "format_bytes",
]
