"""The pool itself: ONE uint8 backing of num_blocks * block_stride bytes and zero-copy views of
every layer at base + block * stride + offset, as vLLM's worker makes them."""

from __future__ import annotations

import dataclasses

import torch

from kvviz.base import regions
from kvviz.base.defaults import VERIFY_BLOCKS
from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import of_type
from kvviz.base.text import bytes_label
from kvviz.core.accept import pools_of
from kvviz.core.layout import Layout, Placement, SharedTensor
from kvviz.core.plan import Plan
from kvviz.pool.devices import allocation_failed, check_fits, host_zeros, resolve_device

VIEW_DTYPES = {"uint8": torch.uint8, "bfloat16": torch.bfloat16, "float32": torch.float32}


def check_views(layout: Layout) -> None:
    """Refuse layouts in which some layer cannot be viewed as its dtype (docs/caches.md#backend-alignment)."""
    of_type(layout, Layout, field="layout", give="a kvviz Layout (plan.layout)")
    stride = layout.block_stride
    for p in layout.placements:
        size = p.cache.dtype_size
        dtype = p.cache.row_format.view_dtype
        where = f"layer {p.name!r} (group {layout.groups[p.group].name!r})"
        require(p.page_bytes > 0, f"{where}: page_bytes=0, a zero-size page has no view")
        require(
            p.offset >= 0 and p.end <= stride,
            f"{where}: offset {p.offset} + page {p.page_bytes} lies outside the block stride {stride}",
        )
        require(
            p.offset % size == 0,
            f"{where}: offset={p.offset} is not divisible by the {dtype} size {size}; its view is impossible",
        )
        require(
            stride % size == 0,
            f"{where}: block_stride={stride} is not divisible by the {dtype} size {size}; its view is impossible",
        )
        require(
            p.page_bytes % size == 0,
            f"{where}: page_bytes={p.page_bytes} is not divisible by the {dtype} size {size}; its view is impossible",
        )


@dataclasses.dataclass(frozen=True)
class TensorView:
    """One of the layout's shared tensors over the pool.

    PR-era planners (``layer_stride is None``): ``view`` is (num_blocks, extent) uint8 from the
    tensor's offset, extent = the largest page of the layers that share it. vLLM 0.33
    (``layer_stride`` set): ``view`` is (num_blocks, len(layers), layer_stride) uint8.
    """

    tensor: SharedTensor
    view: torch.Tensor


class Pools(tuple):
    """The pools of a separate-pools plan, one `Pool` each (each its own backing, blocks and stride, as
    SGLang keeps them): what `Pool(plan)` returns for such a plan."""


class Pool:
    """ONE uint8 backing of num_blocks * block_stride bytes and zero-copy views of every layer."""

    def __new__(cls, layout=None, *args, **kwargs):
        """A Pool; for a separate-pools Plan (kvviz.core.accept.pools_of: several pools) a `Pools`, one Pool per
        pool, each of `num_blocks` blocks."""
        if isinstance(layout, Plan) and len(layout.pools) > 1:
            return Pools(cls(pool, *args, **kwargs) for pool in layout.pools)
        return super().__new__(cls)

    def __init__(
        self,
        layout: Layout | Plan,
        num_blocks: int = VERIFY_BLOCKS,
        device: str | torch.device = "auto",
        *,
        zero: bool = True,
    ) -> None:
        """Allocate the backing (zeroed, as vLLM's worker does with torch.zeros; zero=False leaves
        the bytes as the allocator gives them, for a caller that writes every byte it reads, as
        kvviz.verify does) and check that every layer has a view. On the CPU the backing is
        host_zeros (transparent huge pages, zero from the kernel: `zeroed` is then True whatever
        `zero` says); CUDA backings are torch's. `layout`: a Layout or a one-pool Plan (a separate-pools
        Plan gives `Pools`); `num_blocks` defaults to kvviz verify's small pool (VERIFY_BLOCKS)."""
        (layout,) = pools_of(layout, "layout")
        require(
            isinstance(num_blocks, int) and not isinstance(num_blocks, bool) and num_blocks > 0,
            f"num_blocks={num_blocks!r}: must be a positive integer",
        )
        self.layout = layout
        self.num_blocks = num_blocks
        self.block_stride = layout.block_stride
        self.device = resolve_device(device)
        check_views(layout)
        self.nbytes = num_blocks * layout.block_stride
        check_fits(self.nbytes, self.device, what=f"num_blocks={num_blocks} x block_stride={layout.block_stride}")
        try:
            if self.device.type == "cpu":
                self.backing = host_zeros(self.nbytes)
            else:
                make = torch.zeros if zero else torch.empty
                self.backing = make(self.nbytes, dtype=torch.uint8, device=self.device)
        except (MemoryError, RuntimeError) as e:  # the free-memory check raced or lied
            if not allocation_failed(e):
                raise
            raise KvvizError(
                f"num_blocks={num_blocks}: allocating {bytes_label(self.nbytes)} on {self.device} failed "
                f"({str(e).splitlines()[0]})"
            ) from None
        self.zeroed = zero or self.device.type == "cpu"  # every byte starts at 0
        self.blocks = self.backing.view(num_blocks, layout.block_stride)

    @classmethod
    def from_budget(cls, layout: Layout, budget_bytes: int, device: str | torch.device = "auto") -> "Pool":
        """floor(budget / stride) blocks (Layout.num_blocks)."""
        n = layout.num_blocks(budget_bytes)
        require(
            n > 0,
            f"budget_bytes={budget_bytes}: smaller than one block stride ({layout.block_stride:,} B); "
            f"num_blocks would be 0",
        )
        return cls(layout, n, device)

    # ---- lookups -------------------------------------------------------------------------------
    def placement(self, name: str) -> Placement:
        """The layout's placement of layer `name` (KvvizError naming layer= when there is none)."""
        p = self.layout.by_name.get(name)
        if p is None:
            raise KvvizError(f"layer={name!r}: not in this layout")
        return p

    @property
    def data_ptr(self) -> int:
        """The backing's base address (every view is at base + block * stride + offset)."""
        return self.backing.data_ptr()

    def byte_address(self, block: int, name: str) -> int:
        """Where layer `name`'s page of block `block` starts: base + block * stride + offset."""
        require(0 <= block < self.num_blocks, f"block={block}: outside 0..{self.num_blocks - 1}")
        return self.data_ptr + block * self.block_stride + self.placement(name).offset

    # ---- views ---------------------------------------------------------------------------------
    def page_view(self, name: str) -> torch.Tensor:
        """(num_blocks, page_bytes) uint8: the backing as (num_blocks, stride), columns [offset, offset+page)."""
        p = self.placement(name)
        return self.blocks[:, p.offset : p.end]

    def typed_view(self, name: str) -> torch.Tensor:
        """(num_blocks, page_bytes / dtype_size) in the layer's view dtype (uint8, bfloat16, float32)."""
        p = self.placement(name)
        return self.page_view(name).view(VIEW_DTYPES[p.cache.row_format.view_dtype])

    def row_view(self, name: str) -> torch.Tensor:
        """(num_blocks, rows, row_bytes / dtype_size) over the content region (padding left out).

        Only for formats without a footer: with a footer, a row's payload and its scales are
        `rows * payload_bytes` apart, so a row is not one contiguous run (use payload_view and
        footer_view).
        """
        p = self.placement(name)
        fmt = p.cache.row_format
        if fmt.footer_bytes:
            raise KvvizError(
                f"layer {name!r}: format {fmt.name} keeps its scales in a footer after all rows' payloads, "
                f"so a row is not contiguous; use payload_view/footer_view"
            )
        content = p.cache.rows * fmt.row_bytes
        typed = self.blocks[:, p.offset : p.offset + content].view(VIEW_DTYPES[fmt.view_dtype])
        return typed.unflatten(1, (p.cache.rows, fmt.row_bytes // fmt.dtype_size))

    def _region(self, name: str, region: str) -> tuple[int, int]:
        """[start, end) inside the block of one region ("payload", "footer") of layer `name`'s page,
        as kvviz.base.formats lays a page out (docs/row-formats.md#page-anatomy)."""
        p = self.placement(name)
        for r in regions.page_regions(p.cache.row_format, p.cache.rows, p.page_bytes):
            if r.name == region:
                return p.offset + r.start, p.offset + r.end
        return p.offset, p.offset  # the format has no such region (a format without footer)

    def payload_view(self, name: str) -> torch.Tensor:
        """(num_blocks, rows, payload_bytes) uint8: every row's payload (the page's first region)."""
        p = self.placement(name)
        lo, hi = self._region(name, "payload")
        return self.blocks[:, lo:hi].unflatten(1, (p.cache.rows, p.cache.row_format.payload_bytes))

    def footer_view(self, name: str) -> torch.Tensor:
        """(num_blocks, rows, footer_bytes) uint8: every row's footer (scales), after all payloads."""
        p = self.placement(name)
        lo, hi = self._region(name, "footer")
        return self.blocks[:, lo:hi].unflatten(1, (p.cache.rows, p.cache.row_format.footer_bytes))

    def stacked_view(self, names, blocks: slice = slice(None)) -> torch.Tensor:
        """(blocks, len(names), page_bytes) uint8: the pages of layers whose offsets are equally
        spaced (one spec of one group in vLLM 0.33's overlay-by-spec tensors, `layer_stride` apart),
        as ONE zero-copy strided view, so a batch of layers is copied or compared in one operation.

        `blocks` is a basic slice of block ids (a step is allowed). KvvizError unless the layers
        have one page size and equally spaced offsets.
        """
        ps = [self.placement(n) for n in names]
        require(ps, "names: give at least one layer")
        page = ps[0].page_bytes
        require(all(p.page_bytes == page for p in ps), f"names: pages of {names!r} differ in size")
        step = ps[1].offset - ps[0].offset if len(ps) > 1 else page
        require(
            step > 0 and all(b.offset - a.offset == step for a, b in zip(ps, ps[1:])),
            f"names: offsets of {names!r} are not equally spaced",
        )
        start, stop, bstep = blocks.indices(self.num_blocks)
        n = len(range(start, stop, bstep))
        return torch.as_strided(
            self.backing,
            (n, len(ps), page),
            (bstep * self.block_stride, step, 1),
            start * self.block_stride + ps[0].offset,
        )

    def group_view(self, group: int, blocks: slice = slice(None)) -> torch.Tensor:
        """(blocks, span) uint8: the columns from the group's first page offset to its last page end,
        every layer of the group (and any hole between its pages) in ONE strided view."""
        ps = self.layout.group_placements(group)
        require(bool(ps), f"group={group!r}: not a group of this layout with pages")
        lo, hi = min(p.offset for p in ps), max(p.end for p in ps)
        return self.blocks[blocks, lo:hi]

    def tensor_views(self) -> tuple[TensorView, ...]:
        """Views of the layout's shared tensors (see TensorView), in the layout's order."""
        out = []
        for t in self.layout.tensors:
            if t.layer_stride is None:
                extent = max(self.layout.by_name[n].page_bytes for n in t.layers)
                out.append(TensorView(t, self.blocks[:, t.offset : t.offset + extent]))
            else:
                n = len(t.layers)
                v = self.blocks[:, t.offset : t.offset + n * t.layer_stride].unflatten(1, (n, t.layer_stride))
                out.append(TensorView(t, v))
        return tuple(out)

    def __repr__(self) -> str:
        return (
            f"Pool({self.layout.planner}, num_blocks={self.num_blocks}, block_stride={self.block_stride}, "
            f"{bytes_label(self.nbytes)} on {self.device})"
        )
