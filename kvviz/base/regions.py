"""Byte ranges: `Region` (the one byte-range type, in a page or an engine's buffer), `PageAnatomy` (payloads, then
footers, then padding) and `page_regions` for a row format."""

from __future__ import annotations

import dataclasses

from kvviz.base.errors import require
from kvviz.base.formats import RowFormat


def cdiv(a: int, b: int) -> int:
    """vLLM's utils/math_utils.py cdiv: the ceiling of a / b in integers, -(a // -b)."""
    return -(a // -b)


def round_up(n: int, multiple: int) -> int:
    """`n` rounded up to a multiple of `multiple` (integers, no float rounding)."""
    return cdiv(n, multiple) * multiple


@dataclasses.dataclass(frozen=True)
class Region:
    """A byte range [start, start + size) and what it holds: inside a page (`name` "payload",
    "footer" or "padding", no `kind`) or inside an engine's buffer (kvviz.engines.maps: `kind`
    'k', 'v', 'kv', 'latent', 'state', 'conv', 'ssm', 'pad', 'free', or 'swa' / 'full' for
    SGLang's unified entries)."""

    name: str
    start: int
    size: int
    kind: str = ""

    @property
    def end(self) -> int:
        """One past the region's last byte: start + size."""
        return self.start + self.size

    @property
    def slice(self) -> slice:
        """``slice(start, end)``, to index a page's last dim."""
        return slice(self.start, self.end)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PageAnatomy:
    """Where each byte of one page goes (docs/row-formats.md#page-anatomy), the one statement of
    the rule: all `rows` payloads first (row t at t * payload_bytes), then all footers (row t at
    rows * payload_bytes + t * footer_bytes), then padding up to `page_bytes`.

    Mirrors vLLM's packed DeepSeek V4 pages (the fp8_ds_mla and indexer cache writers address a
    row's scales past the whole block's values). Bad sizes raise KvvizError naming the field.
    """

    rows: int
    payload_bytes: int  # per row
    footer_bytes: int  # per row
    page_bytes: int

    def __post_init__(self) -> None:
        for name in ("rows", "payload_bytes", "footer_bytes"):
            v = getattr(self, name)
            require(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0,
                f"{name}={v!r}: must be a non-negative integer",
            )
        pb = self.page_bytes
        require(
            isinstance(pb, int) and not isinstance(pb, bool) and pb > 0,
            f"page_bytes={pb!r}: must be a positive integer",
        )
        require(
            self.content.size <= pb,
            f"page_bytes={pb}: smaller than {self.rows} rows of {self.payload_bytes} + {self.footer_bytes} B "
            f"= {self.content.size} B",
        )

    @classmethod
    def of(cls, row: RowFormat, rows: int, page_bytes: int) -> "PageAnatomy":
        """The anatomy of a page of `rows` rows of format `row`."""
        return cls(rows=rows, payload_bytes=row.payload_bytes, footer_bytes=row.footer_bytes, page_bytes=page_bytes)

    @property
    def payload(self) -> Region:
        """All rows' payloads: [0, rows * payload_bytes)."""
        return Region("payload", 0, self.rows * self.payload_bytes)

    @property
    def footer(self) -> Region:
        """All rows' footers, right after the payloads: rows * footer_bytes bytes."""
        return Region("footer", self.payload.end, self.rows * self.footer_bytes)

    @property
    def padding(self) -> Region:
        """The rest of the page after the footers, up to page_bytes (zero bytes when written)."""
        return Region("padding", self.footer.end, self.page_bytes - self.footer.end)

    @property
    def content(self) -> Region:
        """Payloads and footers together (everything but the padding)."""
        return Region("content", 0, self.rows * (self.payload_bytes + self.footer_bytes))

    def payload_offset(self, row: int) -> int:
        """Byte offset of row `row`'s payload in the page."""
        return self.payload.start + row * self.payload_bytes

    def footer_offset(self, row: int) -> int:
        """Byte offset of row `row`'s footer in the page."""
        return self.footer.start + row * self.footer_bytes

    @property
    def regions(self) -> tuple[Region, ...]:
        """Payload, footer and padding regions, empty ones left out."""
        return tuple(r for r in (self.payload, self.footer, self.padding) if r.size)

    # ---- the rule applied to bytes: any array with [..., slice] indexing and reshape (a torch
    # tensor, a numpy array); this module imports neither, so the light paths stay light. ----

    def split(self, page):
        """(payloads [..., rows, payload_bytes], footers [..., rows, footer_bytes]) of `page`
        [..., page_bytes]: views where the array type can reshape without copying."""
        lead = tuple(page.shape[:-1])
        return (
            page[..., self.payload.slice].reshape(*lead, self.rows, self.payload_bytes),
            page[..., self.footer.slice].reshape(*lead, self.rows, self.footer_bytes),
        )

    def write(self, page, payloads, footers, *, zero_padding: bool = True):
        """Write rows into `page` [..., page_bytes] in place: row t's payload at t * payload_bytes,
        its footer at rows * payload_bytes + t * footer_bytes, the padding zeroed (unless
        ``zero_padding=False``). `payloads` [..., rows, payload_bytes] and `footers`
        [..., rows, footer_bytes] share page's leading dims. Returns page."""
        lead = tuple(page.shape[:-1])
        page[..., self.payload.slice] = payloads.reshape(*lead, self.payload.size)
        page[..., self.footer.slice] = footers.reshape(*lead, self.footer.size)
        if zero_padding:
            page[..., self.padding.slice] = 0
        return page

    def records(self, page):
        """The content of `page` [..., page_bytes] cut into `rows` records of payload_bytes +
        footer_bytes each, [..., rows, payload_bytes + footer_bytes]: how a reader that assumes
        each row's payload and footer side by side (a per-token layout) sees the page."""
        return page[..., self.content.slice].reshape(
            *page.shape[:-1], self.rows, self.payload_bytes + self.footer_bytes
        )


def page_regions(row: RowFormat, rows: int, page_bytes: int) -> tuple[Region, ...]:
    """Payload region, footer region and trailing padding of one page (empty regions omitted)."""
    return PageAnatomy.of(row, rows, page_bytes).regions
