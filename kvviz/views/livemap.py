"""The block map drawn in the browser: an anywidget fed with `BlockMapData.to_dict()`, the same
data object the PNG block map draws (`kvviz.views.blockmap_data`).

The JavaScript module (kvviz/static/blockmap.js, shipped in the package, no network) draws an
SVG: one lane per group over the block's bytes [0, stride), one rect per layer page, hatched
unused ranges, the stride and the binding group marked. Hovering a range shows its layer, group,
cache kind, offset, page bytes and end; hovering a lane shows the group's total, unused bytes and
whether it binds the stride; clicking a range opens its page anatomy (rows, payload, footer,
padding) below the map and sets `selected` to the layer's name.

Every drawn element carries its numbers as data-* attributes (data-layer, data-group,
data-offset, data-page-bytes, data-end, data-kind; lanes data-binds), which the browser test
reads back and compares with the planner. A hybrid model's separate pools share no block:
`separate_pools_map_data` draws one lane per pool, each marked where its own block ends
(data-block-end), with no binding lane.
"""

from __future__ import annotations

import json
from importlib.resources import files

import anywidget
import traitlets

from kvviz.base.inputs import checked, instance, optional
from kvviz.core.layout import Layout
from kvviz.views.blockmap_data import BlockMapData, block_map_data, separate_pools_data


def _static(name: str) -> str:
    return files("kvviz").joinpath("static", name).read_text(encoding="utf-8")


MAP_SOURCE = instance(Layout, BlockMapData, dict, what="a Layout, a BlockMapData or its to_dict()")


class LiveBlockMap(anywidget.AnyWidget):
    """`LiveBlockMap(layout)` or `LiveBlockMap(data=block_map_data(layout).to_dict())`;
    `show(layout_or_data)` redraws. `selected`: the layer of the clicked range ("" for none)."""

    _esm = _static("blockmap.js")
    _css = _static("blockmap.css")
    data = traitlets.Dict()  # what is drawn; sent to the browser as one JSON string (`_data_json`)
    _data_json = traitlets.Unicode("").tag(sync=True)
    selected = traitlets.Unicode("").tag(sync=True)
    status = traitlets.Unicode("").tag(sync=True)  # a line shown over the map (e.g. a refused change)

    @checked(source=optional(MAP_SOURCE))
    def __init__(self, source: Layout | BlockMapData | None = None, /, **kwargs) -> None:
        super().__init__(**kwargs)  # `layout` here is the widget's CSS layout, as for every ipywidget
        if source is not None:
            self.show(source)

    @traitlets.observe("data")
    def _encode_data(self, change) -> None:
        # One string, not a nested dict: ipywidgets walks a synced dict's every value looking for
        # binary buffers, which costs more than the JSON encoding itself.
        self._data_json = json.dumps(change["new"], separators=(",", ":"))

    @checked(what=MAP_SOURCE)
    def show(self, what: Layout | BlockMapData | dict) -> None:
        """Draw a Layout (through `block_map_data`), a BlockMapData, or its `to_dict()`."""
        if isinstance(what, Layout):
            what = block_map_data(what)
        self.data = what.to_dict() if isinstance(what, BlockMapData) else what


def separate_pools_map_data(pools, *, caption: str) -> dict:
    """The live map's data for a separate-pools `kvviz.core.plan.Plan`: one lane per pool, each its
    own pool's block drawn from byte 0 on one byte scale; `separate_pools_data(pools).to_dict()`
    (kvviz.views.blockmap_data): no lane binds, and a lane past its own pool's block is marked
    as such (`block_end`), not as unused bytes."""
    return separate_pools_data(pools, caption=caption).to_dict()
