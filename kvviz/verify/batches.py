"""How a verify run walks a layout: batches of layers written as one strided view, and work items
(a batch over some of its group's blocks) sized so that their working copies stay small.

A batch is what vLLM 0.33's overlay-by-spec tensors make of one spec of one group: layers of one
row format and page size whose offsets are equally far apart (`layer_stride`), so the pool sees
them as ONE (blocks, layers, page) strided view (`Pool.stacked_view`). Batches are read and
written on word views: words of `word_bytes` bytes, the widest (8, 4, 2 or 1) that divides the
page size, the offsets, the layer step and the block stride.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Iterator

import torch

from kvviz import quant
from kvviz.base import formats
from kvviz.base.errors import require
from kvviz.base.inputs import MAX_BUDGET_BYTES, bounded_int, of_type
from kvviz.core.layout import Layout, Placement

# Bytes of pages one work item holds (at least one block of its batch): small enough that its
# expected pages stay in the CPU's caches between being generated and compared; a GPU wants
# large ones (fewer kernel launches) as long as they stay a small part of the pool.
CPU_ITEM_BYTES = 2**20
GPU_ITEM_BYTES = 2**28


@dataclasses.dataclass(frozen=True)
class Batch:
    """Layers of one group with one row format and equally spaced offsets: one strided view."""

    group: int
    placements: tuple[Placement, ...]
    indices: tuple[int, ...]  # each layer's index in layout.placements (its seed)
    opts: dict | None  # encode options; None: opaque bytes, no codec
    word_bytes: int = 1  # the word the pattern is written in (8, 4, 2 or 1 bytes)

    @property
    def names(self) -> tuple[str, ...]:
        """The layers' names, in offset order."""
        return tuple(p.name for p in self.placements)

    @property
    def first(self) -> Placement:
        """The batch's first layer (lowest offset)."""
        return self.placements[0]

    @property
    def fmt(self) -> formats.RowFormat:
        """The row format every layer of the batch shares."""
        return self.first.cache.row_format

    @property
    def page_bytes(self) -> int:
        """Bytes of one layer's page."""
        return self.first.page_bytes

    @property
    def words(self) -> int:
        """Words of one page."""
        return self.page_bytes // self.word_bytes

    @property
    def block_bytes(self) -> int:
        """Bytes of the batch in one block (every layer's page)."""
        return len(self.placements) * self.page_bytes


def codec_opts(p: Placement) -> dict:
    """Encode options that make the codec's row match the layout's RowFormat (checked)."""
    fmt = p.cache.row_format
    opts: dict[str, Any] = {}
    if fmt.name == "fp8_ds_mla":
        # the RoPE tail is the payload's bf16 field (formats.ds_mla_row); asked by element type
        opts["rope_dims"] = sum(f.count for f in fmt.payload if f.element is formats.Element.BF16)
    if fmt.codec_name == "parts":  # hybrid rows: K|V or conv|SSM state, element by element
        opts["parts"] = quant.parts_of(fmt)
    codec = quant.get_codec(fmt.codec_name)
    got = codec.row_bytes(fmt.dims, **opts)
    require(
        got == (fmt.payload_bytes, fmt.footer_bytes),
        f"layer {p.name!r}: codec {fmt.name} makes rows of {got[0]} + {got[1]} B but the layout says "
        f"{fmt.payload_bytes} + {fmt.footer_bytes} B",
    )
    return opts


def _same_kind(a: Placement, b: Placement) -> bool:
    return a.cache.row_format == b.cache.row_format and a.page_bytes == b.page_bytes and a.cache.rows == b.cache.rows


def _word_bytes(stride: int, run: list[Placement]) -> int:
    step = run[1].offset - run[0].offset if len(run) > 1 else 0
    g = math.gcd(stride, run[0].page_bytes, run[0].offset, step)
    return next(w for w in (8, 4, 2, 1) if g % w == 0)


def layer_batches(layout: Layout, max_bytes: int = CPU_ITEM_BYTES) -> tuple[Batch, ...]:
    """Each group's layers, in order, cut into runs of one format at equally spaced offsets, each
    run cut so that one block of it holds at most `max_bytes` (at least one layer)."""
    of_type(layout, Layout, field="layout", give="a kvviz Layout (plan.layout)")
    bounded_int(max_bytes, field="max_bytes", low=1, high=MAX_BUDGET_BYTES)
    index = {p.name: i for i, p in enumerate(layout.placements)}
    out = []
    for g in range(len(layout.groups)):
        run: list[Placement] = []

        def flush():
            if not run:
                return
            fmt = run[0].cache.row_format
            opaque = fmt.codec_name not in quant.CODECS
            if opaque:
                require(fmt.name == "opaque", f"layer {run[0].name!r}: format {fmt.name!r} has no codec in kvviz.quant")
            opts = None if opaque else codec_opts(run[0])
            per = max(1, max_bytes // run[0].page_bytes)
            for i in range(0, len(run), per):
                part = run[i : i + per]
                out.append(
                    Batch(
                        g, tuple(part), tuple(index[p.name] for p in part), opts, _word_bytes(layout.block_stride, part)
                    )
                )
            run.clear()

        for p in layout.group_placements(g):
            if run and not (
                _same_kind(run[0], p)
                and (len(run) < 2 or p.offset - run[-1].offset == run[1].offset - run[0].offset)
                and p.offset > run[-1].offset
            ):
                flush()
            run.append(p)
        flush()
    return tuple(out)


def item_bytes(device: torch.device, pool_bytes: int) -> int:
    """Bytes of pages per work item: CPU_ITEM_BYTES on the CPU; on a GPU up to GPU_ITEM_BYTES,
    at most 1/32 of the pool (the buffer and a changed item's diff then stay under a fifth of it)."""
    if device.type == "cpu":
        return CPU_ITEM_BYTES
    return max(CPU_ITEM_BYTES, min(GPU_ITEM_BYTES, pool_bytes // 32))


@dataclasses.dataclass(frozen=True)
class WorkItem:
    """One batch over the group's blocks at positions [k0, k1) of its ascending list."""

    batch: Batch
    k0: int
    k1: int
    pieces: tuple[range, ...]  # those blocks, as runs of equally spaced ids

    @property
    def bytes(self) -> int:
        """Page bytes the item covers."""
        return (self.k1 - self.k0) * self.batch.block_bytes


def pieces(runs: tuple[range, ...], k0: int, k1: int) -> tuple[range, ...]:
    """The block ids at positions [k0, k1) of the ascending list `runs` describes, as runs."""
    out, base = [], 0
    for r in runs:
        lo, hi = max(k0 - base, 0), min(k1 - base, len(r))
        if lo < hi:
            out.append(r[lo:hi])
        base += len(r)
        if base >= k1:
            break
    return tuple(out)


def position(runs: tuple[range, ...], block: int) -> int | None:
    """Where `block` sits in the ascending list `runs` describes (None: not in it)."""
    base = 0
    for r in runs:
        if block in r:
            return base + r.index(block)
        base += len(r)
    return None


def blocks_per_item(batch: Batch, max_bytes: int) -> int:
    """Blocks of a batch one work item covers: about `max_bytes` of pages, at least one block."""
    return max(1, max_bytes // batch.block_bytes)


def work_items(batch: Batch, runs: tuple[range, ...], max_bytes: int) -> Iterator[WorkItem]:
    """The batch over every block of its group, cut into work items."""
    per = blocks_per_item(batch, max_bytes)
    n = sum(len(r) for r in runs)
    for k0 in range(0, n, per):
        k1 = min(n, k0 + per)
        yield WorkItem(batch, k0, k1, pieces(runs, k0, k1))
