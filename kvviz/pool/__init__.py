"""A real KV-cache pool: one uint8 backing, every layer a zero-copy view into it
(docs/planners.md#overlay, docs/hazards.md#shared-block).

vLLM's worker allocates one flat uint8 tensor of ``num_blocks * block_stride`` bytes, sees it as
``(num_blocks, block_stride)`` and gives each layer the columns ``[offset, offset + page)``,
reinterpreted as the layer's dtype. `Pool` does exactly that, on CPU or CUDA, so that
``pool.page_view(name)[b].data_ptr() == backing.data_ptr() + b * stride + offset``.

`BlockPool` is the other half of the overlay's contract: block ids are handed to groups, and a
block id belongs to at most one group at a time. ``claim(..., hazard=True)`` breaks that rule on
purpose and records it, so that `kvviz.verify` can show the damage on real memory.

Rooms: `devices` (device names, free memory and the limits that apply), `views` (Pool and its
views), `blocks` (BlockPool: block ownership).
"""

from kvviz.pool.blocks import ASSIGNMENTS, FREE, BlockPool, ranges_of
from kvviz.pool.devices import (
    CGROUP_ROOT,
    HUGE_PAGE,
    allocation_failed,
    check_fits,
    free_bytes,
    host_memory,
    host_zeros,
    resolve_device,
)
from kvviz.pool.views import VIEW_DTYPES, Pool, TensorView, check_views

__all__ = [
    "ASSIGNMENTS",
    "FREE",
    "BlockPool",
    "ranges_of",
    "CGROUP_ROOT",
    "allocation_failed",
    "check_fits",
    "free_bytes",
    "host_memory",
    "HUGE_PAGE",
    "host_zeros",
    "resolve_device",
    "VIEW_DTYPES",
    "Pool",
    "TensorView",
    "check_views",
]
