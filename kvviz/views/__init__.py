"""kvviz's views: one plain data object per figure, and one module per figure that draws it.

Data (light: no matplotlib, torch or ipywidgets; each a frozen dataclass built from a Layout or
Plan by a pure function, importing no planner family):

    blockmap_data   BlockMapData    block_map_data(layout), separate_pools_data(plan, caption=...)
    compare_data    BeforeAfterData before_after_data(before, after)
    planes_data     PoolPlanesData  pool_planes_data(layout, num_blocks)
    live_data       LiveBytesData   live_bytes_data(layout, block_bytes, block_groups)
    anatomy_data    PageAnatomyData page_anatomy_data(cache)
    style           colours by kind and role, exact byte labels

Drawing (matplotlib, no pyplot; each returns a `KvvizFigure`):

    blockmap  block_map     compare  before_after    planes  pool_planes
    live      live_bytes    anatomy  page_anatomy
    query     find_patches, patch_ranges, figure_texts, legend_labels, save_figure, to_png_bytes
    legend    the key and the sliver note;   canvas  the shared drawing primitives

The browser's live map (`kvviz.livemap`) draws `BlockMapData.to_dict()`, the PNG block map draws
the same `BlockMapData`. `kvviz.plot` re-exports the figure functions under their old names.
The figure names below load matplotlib only when touched.
"""

from __future__ import annotations

import importlib

from .anatomy_data import PageAnatomyData, page_anatomy_data
from .blockmap_data import BlockMapData, block_map_data, separate_pools_data
from .compare_data import BeforeAfterData, before_after_data
from .live_data import LiveBytesData, live_bytes_data
from .planes_data import PoolPlanesData, pool_planes_data

_FIGURES = {"block_map": ".blockmap", "before_after": ".compare", "pool_planes": ".planes",
            "live_bytes": ".live", "page_anatomy": ".anatomy"}

__all__ = ["BlockMapData", "block_map_data", "separate_pools_data", "BeforeAfterData", "before_after_data",
           "PoolPlanesData", "pool_planes_data", "LiveBytesData", "live_bytes_data", "PageAnatomyData",
           "page_anatomy_data", *_FIGURES]


def __getattr__(name: str):
    """The figure functions (`block_map`, ...), imported on first use (they need matplotlib)."""
    if name in _FIGURES:
        return getattr(importlib.import_module(_FIGURES[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
