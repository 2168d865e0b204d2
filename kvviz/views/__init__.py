"""kvviz's views: one plain data object per figure, and one module per figure that draws it.

Data (light: no matplotlib, torch or ipywidgets; each a frozen dataclass built from a Layout or
Plan by a pure function, importing no planner family):

    blockmap_data   BlockMapData    block_map_data(layout), separate_pools_data(plan, caption=...)
    compare_data    BeforeAfterData before_after_data(before, after)
    planes_data     PoolPlanesData  pool_planes_data(layout, num_blocks)
    live_data       LiveBytesData   live_bytes_data(layout, block_bytes, block_groups)
    anatomy_data    PageAnatomyData page_anatomy_data(cache)
    traffic_data    OccupancyData, QueueData, PoolMapData   occupancy_data(replay), queue_data(replay),
                    TimeLapse(replay).at(step) (from a kvviz.replay Replay, read duck-typed)
    style           colours by kind and role, exact byte labels

Drawing (matplotlib, no pyplot; each returns a `KvvizFigure`):

    blockmap  block_map     compare  before_after    planes  pool_planes    sidebyside  side_by_side
    live      live_bytes    anatomy  page_anatomy
    traffic   occupancy, queues, pool_map (the pool under traffic)
    query     find_patches, patch_ranges, figure_texts, legend_labels, save_figure, to_png_bytes
    legend    the key and the sliver note;   canvas  the shared drawing primitives

The browser's live map (`kvviz.views.livemap`) draws `BlockMapData.to_dict()`, the PNG block map draws
the same `BlockMapData`. `kvviz.views` re-exports the figure functions under their old names.
The figure names below load matplotlib only when touched.
"""

from __future__ import annotations

from kvviz.base.lazy import lazy_exports

# name -> the module of kvviz.views that defines it
_NAMES = {
    "page_anatomy": "anatomy",
    "PageAnatomyData": "anatomy_data",
    "page_anatomy_data": "anatomy_data",
    "block_map": "blockmap",
    "block_map_title": "blockmap",
    "BlockMapData": "blockmap_data",
    "block_map_data": "blockmap_data",
    "separate_pools_data": "blockmap_data",
    "as_block_map_data": "blockmap_data",
    "MapRange": "blockmap_data",
    "Lane": "blockmap_data",
    "KvvizFigure": "canvas",
    "before_after": "compare",
    "side_by_side": "sidebyside",
    "BeforeAfterData": "compare_data",
    "before_after_data": "compare_data",
    "KeyEntry": "legend",
    "Visibility": "legend",
    "MIN_VISIBLE_PX": "legend",
    "MIN_VISIBLE_IN": "legend",
    "live_bytes": "live",
    "LiveBytesData": "live_data",
    "live_bytes_data": "live_data",
    "binned_bytes": "live_data",
    "LiveBlockMap": "livemap",
    "pool_planes": "planes",
    "PoolPlanesData": "planes_data",
    "pool_planes_data": "planes_data",
    "PLANE_PAGES_MAX_BLOCKS": "planes_data",
    "find_patches": "query",
    "patch_ranges": "query",
    "figure_texts": "query",
    "legend_labels": "query",
    "save_figure": "query",
    "to_png_bytes": "query",
    "PatchRange": "query",
    "RangePatch": "query",
    "DEFAULT_DPI": "query",
    "render_report": "report",
    "KIND_COLORS": "style",
    "PAD_COLOR": "style",
    "UNUSED_COLOR": "style",
    "REGION_COLORS": "style",
    "HOLE_COLOR": "style",
    "SAVED_COLOR": "style",
    "VICTIM_COLOR": "style",
    "ELEMENT_COLORS": "style",
    "short_layer_name": "style",
    "format_bytes": "style",
    "byte_ticks": "style",
    "OccupancyData": "traffic_data",
    "occupancy_data": "traffic_data",
    "QueueData": "traffic_data",
    "queue_data": "traffic_data",
    "PoolMapData": "traffic_data",
    "TimeLapse": "traffic_data",
    "pool_map_data": "traffic_data",
    "occupancy": "traffic",
    "queues": "traffic",
    "pool_map": "traffic",
}
__all__ = list(_NAMES)
__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
