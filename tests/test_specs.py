"""Caches and page sizes (docs/caches.md#the-caches-a-layer-registers, docs/row-formats.md#row-formats),
built from the row fields."""

import pytest

from kvviz.base.errors import KvvizError
from kvviz.base.formats import ds_mla_row, indexer_fp8_row, indexer_mxfp4_row
from kvviz.base.regions import page_regions
from kvviz.core.kinds import CacheKind
from kvviz.families import load_preset
from kvviz.families.deepseek_v4 import CacheOptions, model_caches

PRO = load_preset("deepseek-v4-pro").config
FLASH = load_preset("deepseek-v4-flash").config


def pages(backend, indexer="fp8"):
    """Page size of each cache kind (the first cache of that kind)."""
    out = {}
    for c in model_caches(PRO, CacheOptions(backend=backend, indexer_format=indexer)):
        out.setdefault(c.kind, c.page_bytes)
    return out


# docs/caches.md#the-caches-a-layer-registers, page table: (kind, FlashMLA, FlashInfer), FP8 indexer.
PAGE_TABLE = [
    (CacheKind.MAIN_C4, 37_440, 32_768),
    (CacheKind.MAIN_C128, 1_728, 1_024),
    (CacheKind.INDEXER_K, 8_640, 8_704),
    (CacheKind.SWA_KV, 37_440, 32_768),
    (CacheKind.STATE_C4, 32_832, 32_768),
    (CacheKind.STATE_C128, 32_832, 32_768),
    (CacheKind.INDEXER_STATE, 8_640, 8_192),
]


@pytest.mark.parametrize("kind,flashmla,flashinfer", PAGE_TABLE)
def test_page_table(kind, flashmla, flashinfer):
    assert pages("flashmla")[kind] == flashmla
    assert pages("flashinfer")[kind] == flashinfer


def test_mxfp4_indexer_page_both_backends():
    assert pages("flashmla", "mxfp4")[CacheKind.INDEXER_K] == 4_608
    assert pages("flashinfer", "mxfp4")[CacheKind.INDEXER_K] == 4_608


def test_unaligned_content_bytes():
    """The page table's left column: rows x row bytes before alignment."""
    content = {c.kind: c.content_bytes for c in model_caches(PRO, CacheOptions(indexer_format="fp8"))}
    assert content[CacheKind.MAIN_C4] == 64 * 584 == 37_376
    assert content[CacheKind.MAIN_C128] == 2 * 584
    assert content[CacheKind.INDEXER_K] == 64 * 132
    assert content[CacheKind.STATE_C4] == content[CacheKind.STATE_C128] == 32_768
    assert content[CacheKind.INDEXER_STATE] == 8_192


def test_row_anatomy():
    row = ds_mla_row(512, 64)
    assert (row.payload_bytes, row.footer_bytes, row.row_bytes) == (576, 8, 584)
    assert [f.count for f in row.footer] == [7, 1]  # 7 UE8M0 scales + 1 pad byte
    assert indexer_mxfp4_row(128).row_bytes == 68 and indexer_fp8_row(128).row_bytes == 132
    assert indexer_mxfp4_row(128).payload_bytes == 64
    regions = page_regions(row, 64, 37_440)
    assert [(r.name, r.start, r.size) for r in regions] == [
        ("payload", 0, 64 * 576),
        ("footer", 64 * 576, 64 * 8),
        ("padding", 64 * 584, 37_440 - 64 * 584),
    ]


def test_layer_kinds_and_cache_counts():
    """docs/overlay.md#models: Pro 30 c4 + 31 c128; Flash 21 c4 + 20 c128 + 2 SWA-only; MTP is SWA-only."""
    for cfg, c4, c128, swa in ((PRO, 30, 31, 0), (FLASH, 21, 20, 2)):
        ratios = [cfg.ratio(i) for i in range(cfg.num_hidden_layers)]
        assert (ratios.count(4), ratios.count(128), sum(r in (0, 1) for r in ratios)) == (c4, c128, swa)
        caches = model_caches(cfg, CacheOptions(mtp=True))
        kinds = [c.kind for c in caches]
        assert kinds.count(CacheKind.INDEXER_K) == c4
        assert kinds.count(CacheKind.SWA_KV) == cfg.num_hidden_layers + 1
        mtp = [c for c in caches if c.layer == cfg.num_hidden_layers]
        assert [c.kind for c in mtp] == [CacheKind.SWA_KV]


def test_registration_order_b_before_a_e_before_d():
    caches = [c for c in model_caches(PRO) if c.layer == 2]
    assert [c.kind for c in caches] == [
        CacheKind.SWA_KV,
        CacheKind.INDEXER_K,
        CacheKind.MAIN_C4,
        CacheKind.INDEXER_STATE,
        CacheKind.STATE_C4,
    ]
    assert caches[1].name == "model.layers.2.attn.indexer.k_cache"


def test_head_dim_override_changes_rows():
    cfg = PRO.with_overrides(head_dim=576)
    c = next(c for c in model_caches(cfg) if c.kind is CacheKind.MAIN_C4)
    # 512 NoPE E4M3 + 64 bf16 RoPE = 640 payload; 8 scales, no pad.
    assert c.row_bytes == 512 + 128 + 8


@pytest.mark.parametrize(
    "kwargs,field",
    [
        (dict(indexer_format="mxfp4", index_head_dim=100), "index_head_dim"),
        (dict(indexer_format="fp8", index_head_dim=96), "index_head_dim"),
        (dict(head_dim=500), "head_dim"),
        (dict(indexer_format="int3"), "indexer_format"),
        (dict(main_format="fp16"), "main_format"),
        (dict(backend="tpu"), "backend"),
        (dict(block_size=100), "block_size"),
    ],
)
def test_bad_knobs_name_the_field(kwargs, field):
    dims = {k: kwargs.pop(k) for k in ("head_dim", "index_head_dim") if k in kwargs}
    with pytest.raises(KvvizError, match=field):
        model_caches(PRO.with_overrides(**dims), CacheOptions(**kwargs))


@pytest.mark.parametrize("main_format", ["fp8_ds_mla", "fp8", "bf16"])
@pytest.mark.parametrize("indexer", ["fp8", "mxfp4"])
def test_codecs_agree_with_row_anatomy(main_format, indexer):
    """kvviz.quant sizes its rows on its own; both must give the same payload and footer bytes."""
    from kvviz.quant import get_codec

    for head_dim in (512, 576):
        cfg = PRO.with_overrides(head_dim=head_dim)
        rows = {c.row_format for c in model_caches(cfg, CacheOptions(main_format=main_format, indexer_format=indexer))}
        for row in rows:
            assert get_codec(row.name).row_bytes(row.dims) == (row.payload_bytes, row.footer_bytes), row.name


def test_cache_spec_is_a_frozen_record_with_its_sizes_derived_once():
    """A slotted, frozen record: sizes follow its fields, copies recompute them, nothing mutates."""
    import dataclasses

    c = next(c for c in model_caches(PRO) if c.kind is CacheKind.MAIN_C4)
    assert not hasattr(c, "__dict__")
    assert (c.content_bytes, c.aligned_bytes, c.page_bytes, c.padding_bytes) == (64 * 584, 37_440, 37_440, 64)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.page_bytes = 1
    grown = c.with_page_bytes(40_000)
    assert (grown.page_bytes, grown.content_bytes, grown.padding_bytes) == (40_000, 64 * 584, 40_000 - 64 * 584)
    assert dataclasses.replace(c, padded_page_bytes=40_000) == grown
    assert dataclasses.replace(grown, padded_page_bytes=None).page_bytes == 37_440
    assert c.attention_chunk_size is None and c.spec_key != grown.spec_key
