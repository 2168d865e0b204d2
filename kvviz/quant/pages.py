"""Pages of encoded rows: payloads first, then footers, then zero padding.

The layout rule is `kvviz.base.regions.PageAnatomy`'s (docs/row-formats.md#page-anatomy); these
functions check the tensors (uint8, matching shapes, a page large enough) and ask the anatomy
to place or cut the bytes. It mirrors vLLM 0.33's packed DeepSeek V4 pages: the fp8_ds_mla
writer (``quantize_and_insert_k_cache``: "First 64 * 576 = 36864 bytes: Token data ... Next
64 * 8 = 512 bytes: Scales") and the MXFP4 indexer writer address a row's scales past the
whole block's values.
"""

from __future__ import annotations

import torch

from kvviz.base.errors import require
from kvviz.base.regions import PageAnatomy
from kvviz.quant import bits


def _check_rows(payload: torch.Tensor, footer: torch.Tensor) -> tuple[int, int, int]:
    payload = bits.as_u8(payload, "payload")
    footer = bits.as_u8(footer, "footer")
    require(payload.dim() >= 2, f"payload: needs [..., rows, P], got shape {tuple(payload.shape)}")
    require(footer.dim() >= 2, f"footer: needs [..., rows, F], got shape {tuple(footer.shape)}")
    require(
        tuple(footer.shape[:-1]) == tuple(payload.shape[:-1]),
        f"footer: shape {tuple(footer.shape)} does not match payload {tuple(payload.shape)} before the last dim",
    )
    return int(payload.shape[-2]), int(payload.shape[-1]), int(footer.shape[-1])


def _anatomy(rows: int, p: int, f: int, page_bytes: int) -> PageAnatomy:
    """The page's anatomy, checked by PageAnatomy (KvvizError naming page_bytes if too small)."""
    return PageAnatomy(rows=rows, payload_bytes=p, footer_bytes=f, page_bytes=page_bytes)


def write_page(
    dst: torch.Tensor, payload: torch.Tensor, footer: torch.Tensor, *, zero_padding: bool = True
) -> torch.Tensor:
    """Write rows into an existing page view ``dst`` uint8 [..., page_bytes], in place.

    `PageAnatomy.write`: row t's payload at t*P, its footer at rows*P + t*F, the rest zeroed
    (``zero_padding=False`` leaves it untouched). ``dst`` may be a non-contiguous column slice
    of a larger backing tensor (e.g. (num_blocks, stride)[:, off:off+page]); it is never
    reallocated. Returns dst.
    """
    dst = bits.as_u8(dst, "dst")
    rows, p, f = _check_rows(payload, footer)
    page = _anatomy(rows, p, f, bits.last_dim(dst, "dst"))
    lead = tuple(payload.shape[:-2])
    require(
        tuple(dst.shape[:-1]) == lead,
        f"dst: leading dims {tuple(dst.shape[:-1])} differ from the rows' {lead}",
    )
    return page.write(dst, payload, footer, zero_padding=zero_padding)


def pack_page(payload: torch.Tensor, footer: torch.Tensor, page_bytes: int) -> torch.Tensor:
    """(payload uint8 [..., rows, P], footer uint8 [..., rows, F]) -> page uint8 [..., page_bytes].

    All rows' payloads first (row t at t*P), then all footers (row t at rows*P + t*F), then zero
    padding (`PageAnatomy.write`); KvvizError naming page_bytes if rows*(P+F) > page_bytes.
    """
    rows, p, f = _check_rows(payload, footer)
    _anatomy(rows, p, f, page_bytes)
    out = torch.empty(*payload.shape[:-2], page_bytes, dtype=torch.uint8, device=payload.device)
    return write_page(out, payload, footer)


def unpack_page(page: torch.Tensor, rows: int, P: int, F: int) -> tuple[torch.Tensor, torch.Tensor]:
    """page uint8 [..., page_bytes] -> (payload [..., rows, P], footer [..., rows, F]).

    The inverse of `pack_page` (`PageAnatomy.split`); views of ``page`` where torch can reshape.
    """
    page = bits.as_u8(page, "page")
    return _anatomy(rows, P, F, bits.last_dim(page, "page")).split(page)


def read_interleaved(page: torch.Tensor, rows: int, P: int, F: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The WRONG reader (the misread hazard): assumes each row's values and scales interleave.

    Reads the page as ``rows`` records of P+F bytes (`PageAnatomy.records`: record t at
    t*(P+F), P value bytes then F scale bytes), as code written for a per-token layout (e.g.
    DeepSeek V3.2's 656 B ``fp8_ds_mla``) would. On a payload-first page this returns shifted
    payloads and scale bytes taken from the middle of other rows' values, except row 0's payload.
    """
    page = bits.as_u8(page, "page")
    recs = _anatomy(rows, P, F, bits.last_dim(page, "page")).records(page)
    return recs[..., :P], recs[..., P:]
