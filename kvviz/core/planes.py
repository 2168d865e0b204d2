"""The pool as layer planes x blocks: vLLM's default layer-outermost arrangement of a group's
tensor (get_kv_cache_config_from_groups with a layer-outermost layout: layer stride =
num_blocks x page, block stride = page)."""

from __future__ import annotations

import dataclasses

from kvviz.base.errors import require
from kvviz.core.layout import Layout


@dataclasses.dataclass(frozen=True)
class Plane:
    """One layer's plane of a layer-outermost tensor: bytes [start, end) of the pool; layer None
    marks the unused plane of a group one layer short."""

    layer: str | None
    start: int
    end: int


@dataclasses.dataclass(frozen=True)
class TensorPlanes:
    """A group's tensor in vLLM's layer-outermost layout (the one it resolves by default): layer
    stride = num_blocks x page, block stride = page; every tensor starts at byte 0 of the pool."""

    group: str
    offset: int
    page_bytes: int
    layer_stride: int
    block_stride: int
    size: int  # bytes of the pool: bytes per block x num_blocks
    planes: tuple[Plane, ...]

    def block_range(self, layer_index: int, block: int) -> tuple[int, int]:
        """Bytes of one layer's page of one block."""
        lo = self.offset + layer_index * self.layer_stride + block * self.block_stride
        return lo, lo + self.page_bytes


def layer_planes(layout: Layout, num_blocks: int) -> tuple[TensorPlanes, ...]:
    """The pool as layer planes x blocks (layer-outermost), one entry per tensor of `layout`
    (`get_kv_cache_config_from_groups` with a layer-outermost layout: a tensor's layer stride is
    num_blocks x page, its block stride the page, the next tensor of a group starts where its
    layers end)."""
    require(isinstance(num_blocks, int) and num_blocks > 0, f"num_blocks={num_blocks!r}: must be a positive integer")
    size = layout.block_stride * num_blocks
    out: list[tuple[int, TensorPlanes]] = []
    group_cursor: dict[int, int] = {}
    for t in layout.tensors:
        first = layout.placement(t.layers[0])
        page = first.page_bytes
        start = group_cursor.get(first.group, 0)
        stride = num_blocks * page
        planes = tuple(Plane(name, start + k * stride, start + (k + 1) * stride) for k, name in enumerate(t.layers))
        group_cursor[first.group] = start + len(t.layers) * stride
        out.append(
            (first.group, TensorPlanes(layout.groups[first.group].name, start, page, stride, page, size, planes))
        )
    result = []
    for gi, tp in out:
        end = group_cursor[gi]
        is_last = tp.planes[-1].end == end
        planes = tp.planes + ((Plane(None, end, size),) if is_last and end < size else ())
        result.append(dataclasses.replace(tp, planes=planes))
    return tuple(result)
