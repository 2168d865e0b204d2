"""Real codec rows: the sample of pages that go through kvviz.quant's encoders, and the decode
errors the report gives for them.

Every layer's page in the first block of its group holds real encoded rows in its first
`SAMPLE_ROWS` rows (payloads where the payload region puts them, scales in the footer, as
`quant.pack_page` lays a page out); the rest of the page, and every other page, holds the
pattern (kvviz.verify.source). Pages of one kind (format, rows, dims, codec options) are encoded in
ONE call, at most `SAMPLE_KIND_VALUES` values of them (evenly spread over the kind's layers, at
least one page), so that the sample costs a few codec calls whatever the model. A row wider than
that (a Mamba2 or KDA state row holds up to 1.35 M values) is sampled as its first values of each
part (`row_slice`): the "parts" codec stores a part element by element from the start of its
region (payload, footer), so the first k elements of a part are the first k element sizes of its
bytes, and encoding that slice is encoding those values. A hazard may ask for whole pages of real
rows (the misread demo reads every row). After the read-back the sampled rows are decoded from
the pool's bytes and compared with their fp32 source (max absolute error, max error /
`quant.error_bound`).
"""

from __future__ import annotations

import dataclasses
import math

import torch

from kvviz import quant
from kvviz.base import formats, regions
from kvviz.core.layout import Layout, Placement
from kvviz.pool import Pool
from kvviz.verify.batches import Batch
from kvviz.verify.source import sample_source

SAMPLE_ROWS = 16  # rows of each sampled page that hold real encoded rows
SAMPLE_KIND_VALUES = 2**15  # source values one kind's sample holds at most (one page at least)
# Bytes of working tensors per sampled value: the fp32 source, the codec's fp32 temporaries, the
# encoded rows, the decoded values and the error bound (measured: benchmarks/bench_verify_memory.py).
SAMPLE_BYTES_PER_VALUE = 64


@dataclasses.dataclass(frozen=True)
class SampledPage:
    """The first `rows` rows of one layer's page in one block hold real encoded rows."""

    placement: Placement
    layer: int  # index in layout.placements (its seed)
    block: int
    rows: int


@dataclasses.dataclass(frozen=True)
class SampleKind:
    """Pages of one format, shape and codec options, encoded in one call."""

    fmt: formats.RowFormat
    opts: dict  # the codec options of the sampled values (a row slice's own parts)
    rows: int  # rows sampled per page
    pages: tuple[SampledPage, ...]
    dims: int = 0  # values sampled per row: the first of each part (0: the whole row)

    @property
    def row_dims(self) -> int:
        """Values of each sampled row the sample holds (fmt.dims unless a slice)."""
        return self.dims or self.fmt.dims

    @property
    def values(self) -> int:
        """Source values of the kind's sample."""
        return len(self.pages) * self.rows * self.row_dims

    @property
    def row_bytes(self) -> tuple[int, int]:
        """(payload, footer) bytes each sampled row puts at the start of its row's payload and
        footer: the codec's row of `row_dims` values under `opts`."""
        if not self.dims:
            return self.fmt.payload_bytes, self.fmt.footer_bytes
        return quant.get_codec(self.fmt.codec_name).row_bytes(self.dims, **self.opts)


@dataclasses.dataclass(frozen=True)
class Sample:
    """One kind's sample, encoded: its fp32 source (pages, rows, dims) and the codec's output."""

    kind: SampleKind
    source: torch.Tensor
    encoded: quant.Encoded

    def index(self, name: str, block: int) -> int | None:
        """Where page (name, block) sits in the sample (None: not sampled here)."""
        return next((i for i, p in enumerate(self.kind.pages) if p.placement.name == name and p.block == block), None)


def _spread(items: list, m: int) -> list:
    """m of the items, evenly spread (first and last included when m > 1)."""
    if len(items) <= m:
        return items
    if m == 1:
        return items[:1]
    return [items[round(i * (len(items) - 1) / (m - 1))] for i in range(m)]


def row_slice(fmt: formats.RowFormat, opts: dict) -> tuple[int, dict]:
    """(values, codec options) of the part of one row the sample holds: (0, opts), the whole row,
    unless a "parts" row is wider than SAMPLE_KIND_VALUES; then the first values of each part, in
    proportion to the parts' counts (at least one each), SAMPLE_KIND_VALUES in all."""
    if fmt.codec_name != "parts" or fmt.dims <= SAMPLE_KIND_VALUES:
        return 0, opts
    (e1, c1), (e2, c2) = opts["parts"]
    k1 = min(c1, max(1, SAMPLE_KIND_VALUES * c1 // (c1 + c2)))
    k2 = min(c2, SAMPLE_KIND_VALUES - k1)
    return k1 + k2, {**opts, "parts": ((e1, k1), (e2, k2))}


def choose_samples(
    layout: Layout,
    batches: tuple[Batch, ...],
    first_blocks: tuple[int | None, ...],
    whole_pages: tuple[tuple[Placement, int], ...] = (),
) -> tuple[SampleKind, ...]:
    """The pages that hold real rows: every codec layer's page in its group's first block
    (`first_blocks[g]`), SAMPLE_ROWS rows, grouped by kind and capped; then `whole_pages`
    (placement, block), every row, each a kind of its own."""
    kinds: dict[tuple, list] = {}
    opts_of: dict[tuple, dict] = {}
    index = {p.name: i for i, p in enumerate(layout.placements)}
    whole = {(p.name, b) for p, b in whole_pages}
    for batch in batches:
        block = first_blocks[batch.group]
        if batch.opts is None or block is None:
            continue
        rows = min(batch.first.cache.rows, SAMPLE_ROWS)
        for p in batch.placements:
            if (p.name, block) in whole:
                continue
            key = (p.cache.row_format, p.cache.rows, rows, repr(sorted(batch.opts.items())))
            kinds.setdefault(key, []).append(SampledPage(p, index[p.name], block, rows))
            opts_of[key] = batch.opts
    out = []
    for key, pages in kinds.items():
        fmt, _, rows, _ = key
        dims, opts = row_slice(fmt, opts_of[key])
        m = max(1, SAMPLE_KIND_VALUES // (rows * (dims or fmt.dims)))
        out.append(SampleKind(fmt, opts, rows, tuple(_spread(pages, m)), dims))
    for p, block in whole_pages:
        batch = next(b for b in batches if p.name in b.names)
        out.append(
            SampleKind(
                p.cache.row_format, batch.opts, p.cache.rows, (SampledPage(p, index[p.name], block, p.cache.rows),)
            )
        )
    return tuple(out)


def sample_values(kinds: tuple[SampleKind, ...]) -> int:
    """Source values of every kind's sample (what the fit check counts)."""
    return sum(k.values for k in kinds)


def encode_samples(kinds: tuple[SampleKind, ...], seed: int, device: torch.device) -> tuple[Sample, ...]:
    """Each kind's source (one generator per page, from seed, layer and block) through its codec."""
    out = []
    for kind in kinds:
        x = torch.stack(
            [sample_source(kind.fmt.name, p.layer, p.block, kind.rows, kind.row_dims, seed, device) for p in kind.pages]
        )
        out.append(Sample(kind, x, quant.get_codec(kind.fmt.codec_name).encode(x, **kind.opts)))
    return tuple(out)


def _regions(p: Placement) -> dict[str, regions.Region]:
    return {r.name: r for r in regions.page_regions(p.cache.row_format, p.cache.rows, p.page_bytes)}


def page_bytes(samples: tuple[Sample, ...]) -> dict[tuple[str, int], tuple[tuple[int, torch.Tensor], ...]]:
    """(layer, block) -> the (offset inside the page, uint8 bytes) runs the sample puts there:
    the sampled rows' payloads at the start of the payload region, their scales at the start of
    the footer region (a row slice: each row's first bytes of its payload and of its footer).
    What the read-back expects besides the pattern."""
    out = {}
    for s in samples:
        P, F = s.kind.fmt.payload_bytes, s.kind.fmt.footer_bytes
        p, f = s.kind.row_bytes
        for i, sp in enumerate(s.kind.pages):
            reg = _regions(sp.placement)
            assert s.encoded.payload[i].shape == (sp.rows, p)
            if (p, f) == (P, F):  # whole rows: one run per region
                runs = [(reg["payload"].start, s.encoded.payload[i].reshape(-1))]
                if F:
                    runs.append((reg["footer"].start, s.encoded.footer[i].reshape(-1)))
            else:
                runs = [(reg["payload"].start + r * P, s.encoded.payload[i, r]) for r in range(sp.rows)]
                runs += [(reg["footer"].start + r * F, s.encoded.footer[i, r]) for r in range(sp.rows) if f]
            out[(sp.placement.name, sp.block)] = tuple(runs)
    return out


@dataclasses.dataclass(frozen=True)
class ErrorSum:
    """Decode errors of one format so far."""

    layers: frozenset[str] = frozenset()
    values: int = 0
    max_abs_error: float = 0.0
    max_error_over_bound: float = 0.0

    def merge(self, other: "ErrorSum") -> "ErrorSum":
        """Both sums as one."""
        return ErrorSum(
            self.layers | other.layers,
            self.values + other.values,
            max(self.max_abs_error, other.max_abs_error),
            max(self.max_error_over_bound, other.max_error_over_bound),
        )


def decode_errors(
    pool: Pool, samples: tuple[Sample, ...], skip: frozenset[tuple[str, int]] = frozenset()
) -> dict[str, ErrorSum]:
    """Decode every sample from the bytes the pool holds now and compare with its fp32 source,
    per format. Pages in `skip` (layer, block) are left out (a page a hazard meant to clear)."""
    out: dict[str, ErrorSum] = {}
    for s in samples:
        kind = s.kind
        keep = [i for i, p in enumerate(kind.pages) if (p.placement.name, p.block) not in skip]
        if not keep:
            continue
        codec = quant.get_codec(kind.fmt.codec_name)
        P, F = kind.row_bytes  # the sampled rows' bytes: each row's first P and F (a slice)
        pays, foots = [], []
        for i in keep:
            sp = kind.pages[i]
            pays.append(pool.payload_view(sp.placement.name)[sp.block, : kind.rows, :P])
            foots.append(
                pool.footer_view(sp.placement.name)[sp.block, : kind.rows, :F]
                if F
                else torch.empty(kind.rows, 0, dtype=torch.uint8, device=pool.device)
            )
        idx = torch.tensor(keep, device=s.source.device)
        side = s.encoded.side
        dec = codec.decode(quant.Encoded(torch.stack(pays), torch.stack(foots), side, codec.name, s.encoded.opts))
        x = s.source if len(keep) == len(kind.pages) else s.source.index_select(0, idx)
        # in place, one temporary at a time: a state row alone can hold a million values
        err = dec.sub_(x).abs_()
        torch.nan_to_num(err, nan=math.inf, out=err)
        max_abs = float(err.max())
        bopts = dict(s.encoded.opts)
        if codec.side_option is not None and bopts.get(codec.side_option) is None:
            bopts[codec.side_option] = side  # the per-tensor scale(s) the encoder chose, held outside the cache
        bound = quant.error_bound(codec.name, x, **bopts)
        unbounded = bound <= 0
        off = bool((err[unbounded] > 0).any())  # an error where the bound is 0: infinitely out
        ratio = math.inf if off else float(err.div_(bound.masked_fill_(unbounded, 1.0)).max())
        del err, bound, unbounded
        got = ErrorSum(frozenset(kind.pages[i].placement.name for i in keep), x.numel(), max_abs, ratio)
        out[kind.fmt.name] = out.get(kind.fmt.name, ErrorSum()).merge(got)
    return out
