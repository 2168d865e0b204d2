"""Row and page anatomy (docs/row-formats.md#row-formats, docs/row-formats.md#page-anatomy).

Expected sizes are worked out by hand from the fields (an E4M3 is 1 byte, a bf16 2, a UE8M0 1,
an fp32 4, two E2M1 share a byte), never read back from formats itself.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kvviz import quant
from kvviz.base import formats, regions
from kvviz.base.errors import KvvizError
from kvviz.base.regions import PageAnatomy, Region


def test_ds_mla_row_by_hand():
    row = formats.ds_mla_row(512, 64)
    # 448 NoPE E4M3 (448 B) + 64 RoPE bf16 (128 B); 448 / 64 = 7 UE8M0 scales, padded to 8 B
    assert (row.payload_bytes, row.footer_bytes, row.row_bytes) == (448 + 128, 7 + 1, 584)
    assert row.field("scale").count == 7 and row.field("pad").count == 1 and row.field("NoPE").count == 448
    assert row.describe() == "448 E4M3 NoPE + 64 bf16 RoPE | footer 7 UE8M0 scale + 1 pad = 584 B"


def test_ds_mla_row_other_scale_block():
    row = formats.ds_mla_row(512, 64, scale_block=32)  # 448 / 32 = 14 scales -> 16 B footer
    assert (row.payload_bytes, row.footer_bytes) == (576, 14 + 2)
    assert formats.ds_mla_row(512, 64) == formats.ds_mla_row(512, 64, formats.DS_MLA_SCALE_BLOCK)


def test_indexer_rows_by_hand():
    fp8 = formats.indexer_fp8_row(128)  # 128 E4M3 + one fp32 scale
    mx = formats.indexer_mxfp4_row(128)  # 128 E2M1 = 64 B + 128 / 32 = 4 UE8M0
    assert (fp8.payload_bytes, fp8.footer_bytes) == (128, 4)
    assert (mx.payload_bytes, mx.footer_bytes) == (64, 4)
    assert formats.indexer_fp8_row(256, block=64).footer_bytes == 4 * 4
    assert mx.describe() == "128 E2M1 K | footer 4 UE8M0 scale = 68 B"


def test_describe_separates_thousands_and_names_a_field_once():
    assert formats.bf16_row(512).describe() == "512 bf16 KV = 1,024 B"
    assert formats.Field(name="pad", element=formats.Element.PAD, count=3).describe() == "3 pad"


def test_unknown_field_names_it():
    with pytest.raises(KvvizError, match="field='nope'"):
        formats.fp8_row(512).field("nope")


@pytest.mark.parametrize(
    "name, dims, opts",
    [
        ("fp8_ds_mla", 512, {}),
        ("fp8_ds_mla", 256, {"rope_dims": 0, "scale_block": 32}),
        ("fp8", 512, {}),
        ("bf16", 512, {}),
        ("indexer_fp8", 256, {"block": 64}),
        ("indexer_mxfp4", 128, {}),
        ("fp32", 2048, {}),
    ],
)
def test_quant_sizes_its_rows_from_formats(name, dims, opts):
    """kvviz.quant asks formats for its rows: the codec's row is formats' row, and the encoder's
    bytes have its sizes."""
    codec = quant.get_codec(name)
    row = codec.row_format(dims, **opts)
    want = {
        "fp8_ds_mla": lambda: formats.ds_mla_row(
            dims, opts.get("rope_dims", formats.DS_MLA_ROPE_DIMS), opts.get("scale_block", formats.DS_MLA_SCALE_BLOCK)
        ),
        "fp8": lambda: formats.fp8_row(dims),
        "bf16": lambda: formats.bf16_row(dims),
        "indexer_fp8": lambda: formats.indexer_fp8_row(dims, opts.get("block", formats.INDEXER_FP8_BLOCK)),
        "indexer_mxfp4": lambda: formats.indexer_mxfp4_row(dims),
        "fp32": lambda: formats.state_row(dims),
    }[name]()
    assert row == want and row.name == name
    assert codec.row_bytes(dims, **opts) == (row.payload_bytes, row.footer_bytes)
    enc = codec.encode(torch.ones(2, dims), **opts)
    assert (enc.payload.shape[-1], enc.footer.shape[-1]) == (row.payload_bytes, row.footer_bytes)


# ---------------------------------------------------------------------------- pages


def test_page_anatomy_by_hand():
    """64 fp8_ds_mla rows (576 + 8 B) in a 37,440 B page: payloads [0, 36,864), footers
    [36,864, 37,376), 64 B of padding."""
    a = PageAnatomy.of(formats.ds_mla_row(512, 64), 64, 37_440)
    assert a.payload == Region("payload", 0, 64 * 576)
    assert a.footer == Region("footer", 36_864, 64 * 8)
    assert a.padding == Region("padding", 37_376, 64)
    assert (a.payload_offset(3), a.footer_offset(3)) == (3 * 576, 36_864 + 3 * 8)
    assert a.content.end == 37_376 and a.footer.slice == slice(36_864, 37_376)
    assert regions.page_regions(formats.ds_mla_row(512, 64), 64, 37_440) == (a.payload, a.footer, a.padding)


def test_empty_regions_are_left_out():
    a = PageAnatomy(rows=4, payload_bytes=16, footer_bytes=0, page_bytes=64)
    assert [r.name for r in a.regions] == ["payload"]


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(rows=-1, payload_bytes=1, footer_bytes=0, page_bytes=8), "rows=-1"),
        (dict(rows=1, payload_bytes=1.5, footer_bytes=0, page_bytes=8), "payload_bytes=1.5"),
        (dict(rows=1, payload_bytes=1, footer_bytes=True, page_bytes=8), "footer_bytes=True"),
        (dict(rows=1, payload_bytes=1, footer_bytes=0, page_bytes=0), "page_bytes=0"),
        (dict(rows=3, payload_bytes=4, footer_bytes=1, page_bytes=14), "page_bytes=14: smaller than 3 rows"),
    ],
)
def test_bad_anatomy_names_the_field(kwargs, field):
    with pytest.raises(KvvizError, match=field):
        PageAnatomy(**kwargs)


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(0, 300), p=st.integers(0, 700), f=st.integers(0, 40), extra=st.integers(0, 5000))
def test_regions_tile_the_page_in_order(rows, p, f, extra):
    page_bytes = rows * (p + f) + extra
    if page_bytes == 0:
        return
    a = PageAnatomy(rows=rows, payload_bytes=p, footer_bytes=f, page_bytes=page_bytes)
    parts = (a.payload, a.footer, a.padding)
    assert parts[0].start == 0 and parts[-1].end == page_bytes
    assert all(x.end == y.start for x, y in zip(parts, parts[1:]))
    assert (a.payload.size, a.footer.size, a.padding.size) == (rows * p, rows * f, extra)
    if rows:
        assert a.payload_offset(rows - 1) + p == a.footer.start  # every payload before every footer
        assert a.footer_offset(rows - 1) + f == a.footer.end


def test_page_anatomy_places_and_cuts_bytes_of_any_array():
    """PageAnatomy.write / split / records on a numpy page (formats imports no torch): 3 rows of
    5 payload + 2 footer bytes in a 24 B page, offsets by hand: payload t at 5t, footer t at
    15 + 2t, bytes 21..23 padding."""
    np = pytest.importorskip("numpy")
    a = PageAnatomy(rows=3, payload_bytes=5, footer_bytes=2, page_bytes=24)
    payloads = np.arange(15, dtype=np.uint8).reshape(3, 5) + 10
    footers = np.arange(6, dtype=np.uint8).reshape(3, 2) + 200
    page = np.full(24, 0xEE, dtype=np.uint8)
    assert a.write(page, payloads, footers) is page
    assert page.tolist() == list(range(10, 25)) + [200, 201, 202, 203, 204, 205] + [0, 0, 0]
    p, f = a.split(page)
    assert (p == payloads).all() and (f == footers).all() and np.shares_memory(p, page)
    page[21:] = 0x11
    a.write(page, payloads, footers, zero_padding=False)
    assert page[21:].tolist() == [0x11] * 3
    # read as 3 records of 7 bytes (a per-token reader): record 1 starts at byte 7
    assert a.records(page)[1].tolist() == list(range(17, 24))
