"""The write / read-back engine: knows a Layout, a Pool and the one ownership map (a BlockPool),
and nothing of hazards or codecs.

It writes the pattern (kvviz.verify.source) into every page of every owned block through each
batch's strided word view, and later regenerates it and compares the pool with it, work item by
work item. What a page is meant to hold besides the pattern comes in as plain data: `fixed`
(layer, block) -> byte runs (the sampled real rows) and `zeroed` pages (meant to be zero). Every
owned byte that no page of its group covers (`Layout.unused_ranges`) must still be zero, as in a
fresh pool. Each changed page is reported with its layer, block, the absolute byte range inside
the block and the count of changed bytes.
"""

from __future__ import annotations

import ctypes
from typing import Callable, Iterator

import torch

from kvviz.core.layout import Layout
from kvviz.pool import BlockPool, Pool
from kvviz.verify.batches import Batch, WorkItem, position, work_items
from kvviz.verify.report import Corruption, unused_label
from kvviz.verify.source import WORD_DTYPES, block_keys, fill_pattern, layer_keys, ramp

UNUSED_CHUNK_BYTES = 2**24  # bytes of the pool one step of the unused-bytes check reads at a time


def changed_ranges(diff: torch.Tensor) -> tuple[list[int], list[int], list[int], list[int]]:
    """Rows of a (n, bytes) bool diff that changed: their index, first and last changed byte, count."""
    changed = diff.any(dim=1)
    rows = changed.nonzero().flatten()
    d = diff[rows]
    first = d.to(torch.uint8).argmax(dim=1)
    last = d.shape[1] - 1 - d.flip(1).to(torch.uint8).argmax(dim=1)
    return rows.tolist(), first.tolist(), last.tolist(), d.sum(dim=1).tolist()


def _libc_memcmp():
    """The C library's memcmp through ctypes (None where there is none to load)."""
    try:
        f = ctypes.CDLL(None).memcmp
    except (OSError, AttributeError, TypeError):
        return None
    f.restype, f.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    return f


_MEMCMP = _libc_memcmp()


def same_pages(got: torch.Tensor, want: torch.Tensor) -> bool:
    """Whether the pool's (blocks, layers, words) view `got` holds exactly the bytes of `want`
    (contiguous, same shape and dtype).

    On the CPU, where each block's pages are one contiguous run (a batch's layers sit back to
    back), one memcmp per block: torch.equal walks words one by one at about a third of the
    machine's read bandwidth. Elsewhere (CUDA, gaps between the layers): torch.equal."""
    n, L, W = got.shape
    dense = got.stride()[1:] == (W, 1) or L == 1 and got.stride(2) == 1
    if (
        _MEMCMP is None
        or got.device.type != "cpu"
        or not dense
        or not want.is_contiguous()
        or got.dtype != want.dtype
        or got.shape != want.shape
    ):
        return torch.equal(got, want)
    size = got.element_size()
    span = L * W * size
    step = got.stride(0) * size
    a, b = got.data_ptr(), want.data_ptr()
    if step == span:  # the blocks themselves are back to back
        return _MEMCMP(a, b, n * span) == 0
    return all(_MEMCMP(a + k * step, b + k * span, span) == 0 for k in range(n))


class Engine:
    """Writes and reads back one pool. The blocks each group writes are asked of `blocks` once,
    when the engine is made (after any hazard's claims), as runs of equally spaced ids."""

    def __init__(
        self, layout: Layout, pool: Pool, blocks: BlockPool, seed: int, batches: tuple[Batch, ...], max_item_bytes: int
    ) -> None:
        self.layout, self.pool, self.blocks, self.seed = layout, pool, blocks, seed
        self.batches = batches
        self.max_item_bytes = max_item_bytes
        self.runs = tuple(blocks.runs_of(g) for g in range(len(layout.groups)))
        self._ramps: dict[tuple[int, int], torch.Tensor] = {}
        self._buffer: torch.Tensor | None = None
        self._bkeys = block_keys(seed, pool.num_blocks, pool.device)  # 8 B per block
        self._views_of: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # id(batch) -> word view, layer keys

    @property
    def device(self) -> torch.device:
        """Where the pool lives."""
        return self.pool.device

    def group_name(self, g: int) -> str:
        """The name of group g."""
        return self.layout.groups[g].name

    def count(self, g: int) -> int:
        """Blocks group g writes."""
        return sum(len(r) for r in self.runs[g])

    def first_blocks(self, n: int = 1) -> tuple[tuple[int, ...], ...]:
        """Each group's n lowest blocks."""
        out = []
        for runs in self.runs:
            ids: list[int] = []
            for r in runs:
                ids.extend(r[: n - len(ids)])
                if len(ids) >= n:
                    break
            out.append(tuple(ids))
        return tuple(out)

    def items(self) -> Iterator[WorkItem]:
        """Every batch over every block of its group, in layout order."""
        for batch in self.batches:
            yield from work_items(batch, self.runs[batch.group], self.max_item_bytes)

    def _ramp(self, batch: Batch) -> torch.Tensor:
        key = (batch.words, batch.word_bytes)
        r = self._ramps.get(key)
        if r is None:
            r = self._ramps[key] = ramp(batch.words, batch.word_bytes, self.device)
        return r

    def _batch_view(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """The batch's (num_blocks, layers, words) word view of the pool and its layers' keys."""
        got = self._views_of.get(id(batch))
        if got is None:
            view = self.pool.stacked_view(batch.names).view(WORD_DTYPES[batch.word_bytes])
            got = self._views_of[id(batch)] = (view, layer_keys(self.seed, batch.indices, self.device))
        return got

    def _views(self, item: WorkItem) -> Iterator[tuple[int, int, range, torch.Tensor]]:
        """Per piece: its [a, b) positions in the item, its block ids and the pool's word view."""
        a = 0
        whole, _ = self._batch_view(item.batch)
        for piece in item.pieces:
            b = a + len(piece)
            yield a, b, piece, whole[piece.start : piece.stop : piece.step]
            a = b

    def _keys(self, item: WorkItem, piece: range) -> tuple[torch.Tensor, torch.Tensor]:
        return self._bkeys[piece.start : piece.stop : piece.step], self._batch_view(item.batch)[1]

    # ---- write ---------------------------------------------------------------------------------
    def write(self, progress: Callable[[int], None], fixed: dict | None = None) -> int:
        """Group by group, in layout order: the pattern into every page of every owned block,
        straight into the pool's strided word views (no copy of the pages is made), then the
        group's `fixed` (layer, block) -> [(offset in page, bytes)] runs over it. A later group
        writes after an earlier one has finished, as the overlay's groups take turns. Bytes
        written (the pattern's)."""
        by_group: dict[int, list] = {}
        for (name, block), runs in (fixed or {}).items():
            by_group.setdefault(self.layout.by_name[name].group, []).append((name, block, runs))
        written, group = 0, None
        for item in self.items():
            if item.batch.group != group:
                self._write_fixed(by_group.pop(group, ()))
                group = item.batch.group
            r = self._ramp(item.batch)
            for _, _, piece, view in self._views(item):
                fill_pattern(view, *self._keys(item, piece), r)
            written += item.bytes
            progress(item.bytes)
        for rest in by_group.values():
            self._write_fixed(rest)
        return written

    def _write_fixed(self, entries) -> None:
        for name, block, runs in entries:
            page = self.pool.page_view(name)[block]
            for lo, data in runs:
                page[lo : lo + data.numel()].copy_(data)

    # ---- read back -----------------------------------------------------------------------------
    def _expected(self, item: WorkItem, a: int, b: int, piece: range, fixed: dict, zeroed: frozenset) -> torch.Tensor:
        """The pages of one piece as they are meant to be: (blocks, layers, words), in a buffer."""
        batch = item.batch
        nbytes = (b - a) * batch.block_bytes
        if self._buffer is None or self._buffer.numel() < nbytes:
            self._buffer = torch.empty(max(nbytes, self.max_item_bytes), dtype=torch.uint8, device=self.device)
        words = (
            self._buffer[:nbytes].view(WORD_DTYPES[batch.word_bytes]).view(b - a, len(batch.placements), batch.words)
        )
        fill_pattern(words, *self._keys(item, piece), self._ramp(batch))
        if fixed or zeroed:
            pages = words.view(torch.uint8).view(b - a, len(batch.placements), batch.page_bytes)
            for j, name in enumerate(batch.names):
                for block, runs in fixed.get(name, ()):
                    if block in piece:
                        k = piece.index(block)
                        for lo, data in runs:
                            pages[k, j, lo : lo + data.numel()] = data
                for block in zeroed.get(name, ()):
                    if block in piece:
                        pages[piece.index(block), j].zero_()
        return words

    def read_back(
        self,
        progress: Callable[[int], None],
        *,
        fixed: dict | None = None,
        zeroed: frozenset = frozenset(),
        notes: dict | None = None,
    ) -> tuple[list[Corruption], int]:
        """Compare every page with what it is meant to hold (the pattern; `fixed` (layer, block) ->
        [(offset in page, bytes)] runs over it; `zeroed` (layer, block) pages all zero). Every
        changed page is reported (`notes`: block -> how a hazard touched it). Corruptions, bytes read."""
        by_layer: dict[str, list] = {}
        for (name, block), runs in (fixed or {}).items():
            by_layer.setdefault(name, []).append((block, runs))
        zero_by_layer: dict[str, list] = {}
        for name, block in zeroed:
            zero_by_layer.setdefault(name, []).append(block)
        notes = notes or {}
        corrupted: list[Corruption] = []
        read = 0
        for item in self.items():
            batch = item.batch
            for a, b, piece, view in self._views(item):
                want = self._expected(item, a, b, piece, by_layer, zero_by_layer)
                if same_pages(view, want):
                    continue
                got_u8, want_u8 = view.view(torch.uint8), want.view(torch.uint8)
                n, L, page = want_u8.shape
                rows, first, last, count = changed_ranges((got_u8 != want_u8).reshape(n * L, page))
                for r, f, l, c in zip(rows, first, last, count):
                    k, j = divmod(r, L)
                    p = batch.placements[j]
                    corrupted.append(
                        Corruption(
                            p.name,
                            self.group_name(p.group),
                            piece[k],
                            p.offset + f,
                            p.offset + l + 1,
                            c,
                            notes.get(piece[k], ""),
                        )
                    )
            read += item.bytes
            progress(item.bytes)
        return corrupted, read

    def _unused_regions(self) -> Iterator[tuple[int, range, int, int, torch.Tensor]]:
        """(group, blocks, lo, hi, pool columns [lo, hi) of those blocks) for every owned byte that
        no page of the owner covers, a few MiB at a time."""
        step = max(1, UNUSED_CHUNK_BYTES // self.layout.block_stride)
        for g, runs in enumerate(self.runs):
            ranges = self.layout.unused_ranges(g)
            for r in runs if ranges else ():
                for i in range(0, len(r), step):
                    piece = r[i : i + step]
                    blocks = self.pool.blocks[piece.start : piece.stop : piece.step]
                    for lo, hi in ranges:
                        yield g, piece, lo, hi, blocks[:, lo:hi]

    def clear_unused(self) -> None:
        """Zero every owned byte that no page of its owner covers (what a fresh torch.zeros pool
        holds there), before any write: with the pattern over every page, each owned byte is then
        written exactly once."""
        for *_, region in self._unused_regions():
            region.zero_()

    def check_unused(self, notes: dict | None = None) -> tuple[list[Corruption], int]:
        """Every owned byte outside the group's pages must still be zero (a fresh pool), read on
        word views where the range allows. Corruptions, bytes checked."""
        notes = notes or {}
        stride = self.layout.block_stride
        corrupted: list[Corruption] = []
        checked = 0
        for g, piece, lo, hi, region in self._unused_regions():
            checked += region.numel()
            w = 8 if lo % 8 == hi % 8 == stride % 8 == 0 else 1
            if not bool((region.view(WORD_DTYPES[w]) if w > 1 else region).any()):
                continue
            rows, first, last, count = changed_ranges(region != 0)
            for k, f, l, c in zip(rows, first, last, count):
                corrupted.append(
                    Corruption(
                        unused_label(self.group_name(g)),
                        self.group_name(g),
                        piece[k],
                        lo + f,
                        lo + l + 1,
                        c,
                        notes.get(piece[k], ""),
                    )
                )
        return corrupted, checked


def owned_position(engine: Engine, group: int, block: int) -> int | None:
    """Where `block` sits among the blocks group `group` writes (None: not one of them)."""
    return position(engine.runs[group], block)
