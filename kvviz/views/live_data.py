"""What the live-bytes figure of a pool shows, as plain data: the real bytes of some blocks,
binned, the owner group's layer ranges of each, and the victim ranges a hazard hit.

No matplotlib; numpy for the binning, torch only when a torch tensor is given (its rows are
copied to the host, only those shown). Takes a Layout and a pool's bytes; imports no planner.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

import numpy as np

from kvviz.base.errors import require
from kvviz.base.inputs import checked
from kvviz.core.accept import pools_of
from kvviz.core.kinds import CacheKind
from kvviz.core.layout import Layout
from kvviz.views.args import BINS, BLOCKS, BYTE_ROWS, MAX_BLOCKS_SHOWN, STAT, VICTIMS
from kvviz.views.style import short_layer_name

__all__ = ["binned_bytes", "LiveSpan", "VictimMark", "LiveBytesData", "live_bytes_data"]


@checked(rows=BYTE_ROWS, bins=BINS, stat=STAT)
def binned_bytes(rows: np.ndarray, bins: int, *, stat: str = "nonzero") -> np.ndarray:
    """(k, stride) uint8 -> (k, bins): per bin the fraction of non-zero bytes ('nonzero') or the
    mean byte value / 255 ('mean'). Bin edges are floor(i * stride / bins); vectorised."""
    require(stat in ("nonzero", "mean"), f"stat={stat!r}: choose nonzero or mean")
    stride = rows.shape[1]
    bins = max(1, min(bins, stride))
    edges = (np.arange(bins, dtype=np.int64) * stride) // bins
    counts = np.diff(np.append(edges, stride))
    values = (rows != 0) if stat == "nonzero" else rows
    sums = np.add.reduceat(values, edges, axis=1, dtype=np.int64)
    out = sums / counts
    return out / 255.0 if stat == "mean" else out


def _as_uint8_matrix(block_bytes, stride: int):
    if hasattr(block_bytes, "detach"):  # a torch tensor (maybe on a GPU): copy to host lazily below
        t = block_bytes.detach()
        require(str(t.dtype) == "torch.uint8", f"block_bytes: dtype {t.dtype} must be torch.uint8")
        require(t.dim() == 2, f"block_bytes: shape {tuple(t.shape)} must be (num_blocks, block_stride)")
        require(t.shape[1] == stride, f"block_bytes: {t.shape[1]:,} bytes a block, the layout's stride is {stride:,}")
        return t
    arr = np.asarray(block_bytes)
    require(arr.dtype == np.uint8, f"block_bytes: dtype {arr.dtype} must be uint8")
    require(arr.ndim == 2, f"block_bytes: shape {arr.shape} must be (num_blocks, block_stride)")
    require(arr.shape[1] == stride, f"block_bytes: {arr.shape[1]:,} bytes a block, the layout's stride is {stride:,}")
    return arr


def _rows_to_numpy(data, rows: list[int]) -> np.ndarray:
    if hasattr(data, "detach"):
        import torch  # only for a torch tensor given: the views themselves never need torch

        return data[torch.as_tensor(rows, dtype=torch.long, device=data.device)].cpu().numpy()
    return data[rows]


def _owner(block_groups, b: int, layout: Layout) -> int | None:
    """Index of the group owning block b: given as an index or a group name; None / -1 = free."""
    g = block_groups[b]
    if g is None:
        return None
    if isinstance(g, str):
        names = [grp.name for grp in layout.groups]
        require(g in names, f"block_groups[{b}]={g!r}: no such group; the layout has {', '.join(names)}")
        return names.index(g)
    n_groups = len(layout.groups)
    g = int(g)
    if g < 0:
        return None
    require(g < n_groups, f"block_groups[{b}]={g}: the layout has {n_groups} groups")
    return g


def _field(obj, name: str, default=None):
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _victim_pieces(victims, stride: int, num_blocks: int):
    """Victims as (index, block, start, end, layer) pieces inside one block each: a range that
    runs past the stride spills into the next block (the zeroer incident, docs/hazards.md#zeroer)."""
    out = []
    for vi, v in enumerate(victims):
        block, start, end = _field(v, "block"), _field(v, "start"), _field(v, "end")
        for name, value in (("block", block), ("start", start), ("end", end)):
            require(
                isinstance(value, (int, np.integer)) and not isinstance(value, bool),
                f"victims[{vi}].{name}={value!r}: must be an integer",
            )
        require(0 <= block < num_blocks, f"victims[{vi}].block={block}: the pool has {num_blocks} blocks")
        require(0 <= start < end, f"victims[{vi}]: start={start}, end={end} must satisfy 0 <= start < end")
        skip = int(start) // stride  # a start past the stride already lies in a later block
        b, lo, hi = int(block) + skip, int(start) - skip * stride, int(end) - skip * stride
        while hi > 0 and b < num_blocks:
            out.append((vi, b, lo, min(hi, stride), _field(v, "layer")))
            b, lo, hi = b + 1, 0, hi - stride
    return out


@dataclasses.dataclass(frozen=True)
class LiveSpan:
    """One layer range of a shown block's owner group: bytes [start, end) of the block."""

    block: int
    lane: int  # index of the block's lane
    group: str
    layer: str
    kind: CacheKind
    start: int
    end: int


@dataclasses.dataclass(frozen=True)
class VictimMark:
    """One victim piece inside one shown block: bytes [start, end) of the block, numbered from 1
    (a range past the stride is one piece a block). `index`: which of the given victims it is."""

    number: int
    index: int
    block: int
    lane: int
    start: int
    end: int
    layer: str | None

    @property
    def size(self) -> int:
        """Bytes of the piece."""
        return self.end - self.start

    @property
    def name(self) -> str:
        """The victim's layer as the table shows it, or 'victim <index>' when none was given."""
        return short_layer_name(self.layer) if self.layer is not None else f"victim {self.index}"

    @property
    def row(self) -> tuple[str, str, str, str, str]:
        """Its line of the victim table: number, block, bytes, size, layer."""
        return (str(self.number), str(self.block), f"[{self.start:,}, {self.end:,})", f"{self.size:,} B", self.name)


VICTIM_TABLE_HEADER = ("#", "block", "bytes [start, end) of the block", "size", "layer")


@dataclasses.dataclass(frozen=True)
class LiveBytesData:
    """Everything the live-bytes figure draws. Build it with `live_bytes_data(...)`.
    `image[i]`: lane i's bytes binned (fraction of non-zero bytes, or mean byte / 255)."""

    stride: int
    blocks: tuple[int, ...]
    owners: tuple[str | None, ...]  # the owner group of each shown block, None when free
    spans: tuple[LiveSpan, ...]
    victims: tuple[VictimMark, ...]  # the pieces inside shown blocks
    hidden_victims: int  # pieces in blocks not shown
    stat: str
    image: np.ndarray = dataclasses.field(compare=False, repr=False)
    note: str = ""  # what the bytes are when no pool was given (a fresh pool's zeros)

    @property
    def kinds(self) -> tuple[CacheKind, ...]:
        """Cache kinds of the owner groups' spans, in first-seen order."""
        return tuple(dict.fromkeys(s.kind for s in self.spans))

    @property
    def has_victims(self) -> bool:
        """Whether any victim was given (shown or not): the key then has a victim entry."""
        return bool(self.victims) or self.hidden_victims > 0

    @property
    def bin_bytes(self) -> float:
        """Bytes a column of the image stands for (stride / bins)."""
        return self.stride / self.image.shape[1]

    @property
    def lane_labels(self) -> tuple[str, ...]:
        """'block <b>\\n<owner group or free>' for each lane."""
        return tuple(f"block {b}\n{'free' if g is None else g}" for b, g in zip(self.blocks, self.owners))

    @property
    def title(self) -> str:
        """The figure's title: blocks, stride, what the image shows and the victims."""
        what = "fraction of non-zero bytes" if self.stat == "nonzero" else "mean byte value / 255"
        title = (
            f"live bytes of {len(self.blocks)} block(s), block stride {self.stride:,} B; "
            f"image: {what} per {self.bin_bytes:,.0f} B bin"
        )
        if self.note:
            title += f"; {self.note}"
        if self.has_victims:
            hidden = self.hidden_victims
            title += f"; {len(self.victims)} victim range(s) in red" + (
                f" ({hidden} outside the shown blocks)" if hidden else ""
            )
        return title

    @property
    def colorbar_label(self) -> str:
        """The colour bar's label."""
        return "non-zero fraction" if self.stat == "nonzero" else "mean byte / 255"

    @property
    def table(self) -> tuple[tuple[str, ...], ...]:
        """The victim table: its header, then one row a shown victim piece (empty without victims)."""
        return (VICTIM_TABLE_HEADER, *(v.row for v in self.victims)) if self.victims else ()


@checked(blocks=BLOCKS, victims=VICTIMS, bins=BINS, stat=STAT, max_blocks=MAX_BLOCKS_SHOWN)
def live_bytes_data(
    layout: Layout,
    block_bytes,
    block_groups,
    *,
    blocks: Sequence[int] | None = None,
    victims: Iterable = (),
    bins: int = 2048,
    stat: str = "nonzero",
    max_blocks: int = 8,
) -> LiveBytesData:
    """The live-bytes data of a pool (arguments as `kvviz.views.live_bytes`): default blocks are
    those the victims touch, then owned blocks, at most `max_blocks`, in block order.

    `layout`: a Layout or a Plan (kvviz.core.accept.pools_of). Without `block_bytes` and `block_groups`,
    the bytes are a fresh pool's (zeros, as vLLM's worker allocates it with torch.zeros), its blocks
    owned round robin by the groups (`fresh_pool`); a separate-pools Plan then shows block 0 of every
    pool, one lane each, on one byte scale (`fresh_pools_data`)."""
    pools = pools_of(layout, "layout")
    fresh = block_bytes is None and block_groups is None
    if len(pools) > 1:
        require(
            fresh,
            "block_bytes: a separate-pools plan has one backing per pool; give one pool (plan.pools[i]) and its bytes",
        )
        return fresh_pools_data(pools, bins=bins, stat=stat)
    layout = pools[0]
    note = ""
    if fresh:
        block_bytes, block_groups = fresh_pool(layout, max_blocks)
        note = FRESH_NOTE
    require(
        block_bytes is not None and block_groups is not None,
        "block_bytes, block_groups: give both (a pool's bytes and each block's owner) or neither (a fresh pool)",
    )
    stride = layout.block_stride
    data = _as_uint8_matrix(block_bytes, stride)
    num_blocks = int(data.shape[0])
    require(num_blocks > 0, "block_bytes: the pool has no blocks")
    require(
        len(block_groups) == num_blocks,
        f"block_groups: has {len(block_groups)} entries, the pool has {num_blocks} blocks",
    )
    require(isinstance(bins, int) and bins > 0, f"bins={bins!r}: must be a positive integer")
    pieces = _victim_pieces(list(victims), stride, num_blocks)
    if blocks is None:
        owned = [b for b in range(num_blocks) if _owner(block_groups, b, layout) is not None]
        blocks = list(dict.fromkeys([p[1] for p in pieces] + owned))[:max_blocks] or [0]
        blocks.sort()
    blocks = [int(b) for b in blocks]
    require(len(blocks) > 0, "blocks: choose at least one block")
    for b in blocks:
        require(0 <= b < num_blocks, f"blocks: block {b} is outside the pool's {num_blocks} blocks")
    lane = {b: i for i, b in enumerate(blocks)}
    image = binned_bytes(_rows_to_numpy(data, blocks), bins, stat=stat)
    owners = [_owner(block_groups, b, layout) for b in blocks]
    spans = tuple(
        LiveSpan(b, i, layout.groups[g].name, p.name, p.cache.kind, p.offset, p.end)
        for i, (b, g) in enumerate(zip(blocks, owners))
        if g is not None
        for p in layout.group_placements(g)
    )
    shown = [p for p in pieces if p[1] in lane]
    marks = tuple(
        VictimMark(number, vi, b, lane[b], lo, hi, None if layer is None else str(layer))
        for number, (vi, b, lo, hi, layer) in enumerate(shown, start=1)
    )
    image.setflags(write=False)
    return LiveBytesData(
        stride=stride,
        blocks=tuple(blocks),
        owners=tuple(None if g is None else layout.groups[g].name for g in owners),
        spans=spans,
        victims=marks,
        hidden_victims=len(pieces) - len(shown),
        stat=stat,
        image=image,
        note=note,
    )


FRESH_NOTE = "a fresh pool (zeros); kvviz.verify(plan, keep_pool=True) fills one"


def fresh_pool(layout: Layout, max_blocks: int) -> tuple[np.ndarray, list[int]]:
    """(bytes, owners) of a freshly allocated pool of min(max_blocks, groups) blocks (at least one): every
    byte zero (vLLM's worker allocates the KV cache with torch.zeros), block b owned by group b mod groups."""
    require(isinstance(max_blocks, int) and max_blocks > 0, f"max_blocks={max_blocks!r}: must be a positive integer")
    n = max(1, min(max_blocks, len(layout.groups)))
    return np.zeros((n, layout.block_stride), dtype=np.uint8), [b % len(layout.groups) for b in range(n)]


def fresh_pools_data(pools: Sequence[Layout], *, bins: int = 2048, stat: str = "nonzero") -> LiveBytesData:
    """Block 0 of every pool of a separate-pools plan, fresh (zeros), one lane per pool on one byte scale (the
    largest pool's block): each lane's spans are its pool's layer ranges."""
    require(isinstance(bins, int) and bins > 0, f"bins={bins!r}: must be a positive integer")
    stride = max(p.block_stride for p in pools)
    spans = tuple(
        LiveSpan(0, i, pool.groups[p.group].name, p.name, p.cache.kind, p.offset, p.end)
        for i, pool in enumerate(pools)
        for p in pool.placements
    )
    image = binned_bytes(np.zeros((len(pools), stride), dtype=np.uint8), bins, stat=stat)
    image.setflags(write=False)
    return LiveBytesData(
        stride=stride,
        blocks=(0,) * len(pools),
        owners=tuple(p.groups[0].name for p in pools),
        spans=spans,
        victims=(),
        hidden_victims=0,
        stat=stat,
        image=image,
        note=f"block 0 of each of {len(pools)} separate pools, {FRESH_NOTE}",
    )
