"""What a block map shows, as plain data (kept for its users: the code is `kvviz.views.blockmap_data`
and `kvviz.views.style`). One `BlockMapData` feeds the PNG block map (`kvviz.plot.block_map`) and
the browser's live map (`kvviz.livemap`, `to_dict()`). Light: no matplotlib, torch or ipywidgets."""

from __future__ import annotations

from .formats import Region
from .views.blockmap_data import (BlockMapData, Lane, MapRange, as_block_map_data, block_map_data,
                                  separate_pools_data)
from .views.style import (KIND_COLORS, PAD_COLOR, REGION_COLORS, UNUSED_COLOR, byte_ticks, format_bytes,
                          short_layer_name)

__all__ = ["Region", "MapRange", "Lane", "BlockMapData", "block_map_data", "separate_pools_data",
           "as_block_map_data", "KIND_COLORS", "PAD_COLOR", "UNUSED_COLOR", "REGION_COLORS", "format_bytes",
           "byte_ticks", "short_layer_name"]
