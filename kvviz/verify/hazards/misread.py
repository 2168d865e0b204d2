"""misread (docs/hazards.md#misread): a payload-first page read by code written for per-token rows.

The target page (an indexer K cache when the layout has one) is written with every row real and
correct; after the read-back it is read with `quant.read_interleaved` (rows of P + F bytes) and
decoded: truth vs misread values of the first rows, which bytes each reader took, and the error.
The memory itself stays intact, so the damage showed when the run is clean and rows read wrong.
"""

from __future__ import annotations

import math

import torch

from kvviz import quant
from kvviz.base import regions
from kvviz.base.errors import KvvizError, require
from kvviz.core.kinds import CacheKind
from kvviz.core.layout import Layout, Placement
from kvviz.pool import BlockPool, Pool
from kvviz.verify.hazards.base import Hazard, hazard_layer
from kvviz.verify.report import Corruption, HazardReport, Misread, MisreadRow

MISREAD_ROWS, MISREAD_VALUES = 4, 8  # how much of the misread page the report shows


def default_layer(layout: Layout) -> Placement:
    """The first indexer K page of several rows with a footer, else the first such page of any kind."""
    for kinds in ((CacheKind.INDEXER_K,), None):
        for p in layout.placements:
            fmt = p.cache.row_format
            # a page of one row reads the same either way: only pages of several rows can be misread
            if (
                fmt.footer_bytes
                and p.cache.rows > 1
                and fmt.codec_name in quant.CODECS
                and (kinds is None or p.cache.kind in kinds)
            ):
                return p
    raise KvvizError(
        "hazard='misread': the layout has no page of several rows whose second part (scales, V) "
        "sits after every row's first part, so there is nothing to misread"
    )


class MisreadHazard(Hazard):
    """Read one payload-first page with the interleaved reader and decode both readings."""

    name = "misread"
    order = 2

    @classmethod
    def refuse(cls, layout: Layout, num_blocks: int) -> None:
        """Needs a page with a footer (default_layer says why not)."""
        default_layer(layout)

    def __init__(self, layout: Layout, blocks: BlockPool, layer: str | None = None) -> None:
        super().__init__(layout, blocks, layer)
        self.target = t = hazard_layer(layout, layer, default_layer)
        fmt = t.cache.row_format
        require(
            fmt.footer_bytes > 0 and fmt.codec_name in quant.CODECS,
            f"hazard_layer={t.name!r}: format {fmt.name} has no footer to misread",
        )
        self.block = int(blocks.block_ids(t.group)[0])
        self.whole_pages = ((t, self.block),)

    def describe(self, pool: Pool, samples: tuple, corrupted: list[Corruption]) -> HazardReport:
        """Both readings of the page; the damage showed if the memory is intact and rows read wrong."""
        p, block = self.target, self.block
        sample = next(s for s in samples if s.index(p.name, block) is not None)
        i = sample.index(p.name, block)
        m = _misread(
            pool, p, block, sample.source[i], sample.encoded.side, sample.encoded.opts, self.layout.groups[p.group].name
        )
        facts = {
            "layer": m.layer,
            "group": m.group,
            "block": m.block,
            "format": m.format,
            "rows": m.rows,
            "payload_bytes": m.payload_bytes,
            "footer_bytes": m.footer_bytes,
        }
        description = (
            f"{m.layer} ({m.format}) of block {m.block} was written payload-first ({m.rows} x "
            f"{m.payload_bytes} B, then {m.rows} x {m.footer_bytes} B of scales) and read as {m.rows} "
            f"interleaved rows of {m.payload_bytes + m.footer_bytes} B"
        )
        return HazardReport(self.name, description, facts, m, showed=not corrupted and m.rows_wrong > 0)


def _misread(pool: Pool, p: Placement, block: int, source: torch.Tensor, side, opts, group: str) -> Misread:
    fmt = p.cache.row_format
    rows, P, F = p.cache.rows, fmt.payload_bytes, fmt.footer_bytes
    codec = quant.get_codec(fmt.codec_name)
    page = pool.page_view(p.name)[block]  # the real memory
    tp, tf = quant.unpack_page(page, rows, P, F)
    wp, wf = quant.read_interleaved(page, rows, P, F)
    truth = codec.decode(quant.Encoded(tp[None], tf[None], side, codec.name, opts))[0]
    wrong = codec.decode(quant.Encoded(wp[None], wf[None], side, codec.name, opts))[0]
    same = (truth == wrong) | (torch.isnan(truth) & torch.isnan(wrong))
    wrong_rows = (~same.all(dim=1)).nonzero().flatten().tolist()
    err = torch.nan_to_num((wrong - truth).abs(), nan=math.inf)
    terr = float(torch.nan_to_num((truth - source).abs(), nan=math.inf).max())
    by_name = {r.name: r for r in regions.page_regions(fmt, rows, p.page_bytes)}
    o = p.offset
    pay, foot = o + by_name["payload"].start, o + by_name["footer"].start  # where the writer put them
    k = min(MISREAD_VALUES, fmt.dims)
    sample = tuple(
        MisreadRow(
            row=t,
            source=tuple(source[t, :k].tolist()),
            truth=tuple(truth[t, :k].tolist()),
            misread=tuple(wrong[t, :k].tolist()),
            payload=(pay + t * P, pay + (t + 1) * P),
            footer=(foot + t * F, foot + (t + 1) * F),
            read_payload=(o + t * (P + F), o + t * (P + F) + P),
            read_footer=(o + t * (P + F) + P, o + (t + 1) * (P + F)),
        )
        for t in range(min(MISREAD_ROWS, rows))
    )
    return Misread(
        p.name, group, block, fmt.name, rows, P, F, len(wrong_rows), tuple(wrong_rows), float(err.max()), terr, sample
    )


HAZARD = MisreadHazard
