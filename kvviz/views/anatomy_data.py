"""What the page-anatomy figure shows, as plain data: one layer's page split into its payload,
footer and padding regions (`kvviz.base.regions.PageAnatomy`, docs/row-formats.md#page-anatomy: all
rows' payloads, then all footers, then padding), and one row field by field. No matplotlib."""

from __future__ import annotations

import dataclasses

from kvviz.base.errors import KvvizError, require
from kvviz.base.formats import Field
from kvviz.base.inputs import checked, short_repr
from kvviz.base.regions import Region, page_regions
from kvviz.core.accept import pools_of
from kvviz.core.layout import Layout
from kvviz.core.plan import Plan
from kvviz.core.spec import CacheSpec
from kvviz.views.args import NAME
from kvviz.views.style import ELEMENT_COLORS, OTHER_ELEMENT_COLOR, REGION_COLORS

__all__ = ["BarPart", "PageAnatomyData", "page_anatomy_data", "page_of"]


@dataclasses.dataclass(frozen=True)
class BarPart:
    """One part of a labelled bar: bytes [start, start + size) of the bar, its colour and label."""

    name: str
    start: int
    size: int
    color: str
    text: str

    @property
    def end(self) -> int:
        """First byte past the part."""
        return self.start + self.size


def _field_parts(fields: tuple[Field, ...]) -> tuple[BarPart, ...]:
    """A row part's fields side by side from byte 0 of the part, each labelled with its bytes."""
    parts, start = [], 0
    for f in fields:
        detail = f"{f.num_bytes:,} B" + (" packed, 2 per byte" if f.element.bits < 8 else "")
        parts.append(
            BarPart(
                f.name,
                start,
                f.num_bytes,
                ELEMENT_COLORS.get(f.element.label, OTHER_ELEMENT_COLOR),
                f"{f.describe()}\n{detail}, [{start:,}, {start + f.num_bytes:,})",
            )
        )
        start += f.num_bytes
    return tuple(parts)


@dataclasses.dataclass(frozen=True)
class PageAnatomyData:
    """Everything the page-anatomy figure draws. Build it with `page_anatomy_data(cache)`.

    `page`: the page's regions as bar parts over [0, page_bytes); `payload` / `footer`: one row's
    two parts field by field (they sit apart in the page); `packed`: the element label of the first
    packed 4-bit field, whose nibble order the figure draws, or None."""

    cache_name: str
    page_bytes: int
    rows: int
    row_bytes: int
    payload_bytes: int  # per row
    footer_bytes: int  # per row
    regions: tuple[Region, ...]
    page: tuple[BarPart, ...]
    payload: tuple[BarPart, ...]
    footer: tuple[BarPart, ...]
    part_names: tuple[str, str]
    packed: str | None
    title: str
    subtitle: str  # the row format's own description
    page_line: str

    @property
    def content_bytes(self) -> int:
        """Bytes of the rows: rows x row bytes."""
        return self.rows * self.row_bytes

    @property
    def padding_bytes(self) -> int:
        """Bytes of the page past its rows."""
        return self.page_bytes - self.content_bytes

    @property
    def payload_line(self) -> str:
        """The caption over the row's first part."""
        return f"row t, {self.part_names[0]} part (at t x {self.payload_bytes:,} in the page): {self.payload_bytes:,} B"

    @property
    def footer_line(self) -> str:
        """The caption over the row's second part."""
        return f"row t, {self.part_names[1]} part: {self.footer_bytes:,} B"

    @property
    def packing_text(self) -> str:
        """How a packed 4-bit field's two elements share a byte (empty when none is packed)."""
        if self.packed is None:
            return ""
        return f"{self.packed} packing: elem 2i low nibble, 2i+1 high (bits 0-3 = elem 2i, bits 4-7 = elem 2i+1)"


def page_of(source, layer: str | None = None):
    """The CacheSpec whose page a Plan or Layout draws (kvviz.core.accept.pools_of): layer `layer`'s, else the
    first placed layer's of the first pool; a CacheSpec or Placement is returned as it is."""
    if not isinstance(source, (Plan, Layout)):
        require(layer is None, "layer: applies only to a Plan or Layout")
        return source
    pools = pools_of(source, "cache")
    if layer is None:
        return pools[0].placements[0].cache
    for pool in pools:
        if layer in pool.by_name:
            return pool.by_name[layer].cache
    raise KvvizError(f"layer={short_repr(layer)}: not a layer of this plan (e.g. {pools[0].placements[0].name!r})")


@checked(layer=NAME)
def page_anatomy_data(cache, *, layer: str | None = None) -> PageAnatomyData:
    """The anatomy of one layer's page: a CacheSpec, or a Placement (its cache), or a Plan or Layout with the
    page of `layer` (default: its first placed layer; `page_of`)."""
    cache = page_of(cache, layer)
    cache = getattr(cache, "cache", cache)  # a Placement works too
    require(isinstance(cache, CacheSpec), f"cache: expected a CacheSpec or Placement, got {type(cache).__name__}")
    row, rows = cache.row_format, cache.rows
    regions = page_regions(row, rows, cache.page_bytes)
    first, second = row.part_names  # payload/footer, K/V, conv/SSM state
    region_text = {
        "payload": f"{first}: {rows} rows x {row.payload_bytes:,} B = {rows * row.payload_bytes:,} B",
        "footer": f"{second}: {rows} rows x {row.footer_bytes:,} B = {rows * row.footer_bytes:,} B",
        "padding": (
            f"padding: {cache.padding_bytes:,} B\n"
            + (
                f"(page grown to {cache.page_bytes:,} B)"
                if cache.padded_page_bytes is not None
                else f"(to a multiple of {cache.alignment} B)"
            )
        ),
    }
    page = tuple(
        BarPart(r.name, r.start, r.size, REGION_COLORS[r.name], f"{region_text[r.name]}\n[{r.start:,}, {r.end:,})")
        for r in regions
    )
    packed = [f for f in row.payload + row.footer if f.element.bits < 8]
    split = f" = {first} {row.payload_bytes:,} B + {second} {row.footer_bytes:,} B" if row.footer else ""
    return PageAnatomyData(
        cache_name=cache.name,
        page_bytes=cache.page_bytes,
        rows=rows,
        row_bytes=row.row_bytes,
        payload_bytes=row.payload_bytes,
        footer_bytes=row.footer_bytes,
        regions=regions,
        page=page,
        payload=_field_parts(row.payload),
        footer=_field_parts(row.footer),
        part_names=row.part_names,
        packed=packed[0].element.label if packed else None,
        title=f"{cache.name} ({cache.kind.label}, {row.name}): row {row.row_bytes:,} B{split}",
        subtitle=row.describe(),
        page_line=(
            f"page: {cache.page_bytes:,} B = {rows} rows x {row.row_bytes:,} B ({cache.content_bytes:,} B)"
            f" + {cache.padding_bytes:,} B padding"
        ),
    )
