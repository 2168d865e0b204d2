"""vLLM's grouping rules (docs/grouping.md#vllm-grouping)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvviz.base.defaults import BLOCK_SIZE
from kvviz.base.errors import KvvizError
from kvviz.core.kinds import CacheKind
from kvviz.core.spec import custom_cache as _custom_cache
from kvviz.families import load_preset
from kvviz.families.deepseek_v4 import CacheOptions, model_caches
from kvviz.vllm.grouping import approximate_gcd, group_caches, kv_cache_groups, pad_small_pages, split_bucket

PRO = load_preset("deepseek-v4-pro").config
FLASH = load_preset("deepseek-v4-flash").config


def custom_cache(name, page_bytes, **kw):
    """A cache known by its page size, at the groups file's default block (defaults.BLOCK_SIZE)."""
    return _custom_cache(name, page_bytes, tokens_per_block=BLOCK_SIZE, **kw)


def sizes(cfg, mtp):
    return {g.name: len(g.layers) for g in group_caches(model_caches(cfg, CacheOptions(mtp=mtp)))}


def test_approximate_gcd_published_cases():
    # docs/grouping.md#vllm-grouping: Pro counts [31, 61 or 62, 30, 31] -> 31; Flash [21, 43 or 44, 21, 20] -> 22.
    assert approximate_gcd([31, 62, 30, 31], 31) == 31
    assert approximate_gcd([31, 61, 30, 31], 31) == 31
    assert approximate_gcd([21, 44, 21, 20], 21) == 22
    assert approximate_gcd([21, 43, 21, 20], 21) == 22


def test_approximate_gcd_ties_go_to_larger():
    # counts [4, 6] from 2: d=2 pads 0, d=3 pads 2, d=4 pads 2, d=6 pads 2 -> 2 (unique best)
    assert approximate_gcd([4, 6], 2) == 2
    # counts [5] from 1: d=1 and d=5 both pad 0 -> the larger, 5
    assert approximate_gcd([5], 1) == 5


def test_group_sizes_pro_and_flash():
    # docs/grouping.md#vllm-grouping: the group sizes.
    assert sizes(PRO, True) == {"full": 91, "swa-a": 31, "swa-b": 31, "c128-state": 31, "c4-state": 60}
    assert sizes(PRO, False) == {"full": 91, "swa-a": 31, "swa-b": 30, "c128-state": 31, "c4-state": 60}
    assert sizes(FLASH, True) == {"full": 62, "swa-a": 22, "swa-b": 22, "c4-state": 42, "c128-state": 20}
    assert sizes(FLASH, False) == {"full": 62, "swa-a": 22, "swa-b": 21, "c4-state": 42, "c128-state": 20}


def test_strided_tuple_major_subgroups():
    groups = {g.name: g for g in group_caches(model_caches(PRO))}
    swa_a = [c.layer for c in groups["swa-a"].layers]
    assert swa_a == list(range(0, 62, 2))  # tuples 0, 2, 4, ...
    c4 = groups["c4-state"].layers
    assert [c.kind for c in c4[:4]] == [CacheKind.INDEXER_STATE, CacheKind.STATE_C4] * 2
    assert [c.layer for c in c4[:4]] == [2, 2, 4, 4]


def test_split_bucket_counts():
    caches = [custom_cache(f"l{i}", 10) for i in range(7)]
    parts = split_bucket(caches, 3)  # ceil(7/3) = 3 sub-groups, strided
    assert [[c.name for c in p] for p in parts] == [["l0", "l3", "l6"], ["l1", "l4"], ["l2", "l5"]]


def test_full_group_never_split_and_registration_order():
    full = next(g for g in group_caches(model_caches(PRO)) if g.name == "full")
    assert len(full.layers) == 91
    layer2 = [c.kind for c in full.layers if c.layer == 2]
    assert layer2 == [CacheKind.INDEXER_K, CacheKind.MAIN_C4]


def test_vllm_033_group_order_is_first_seen():
    names = [g.name for g in kv_cache_groups(model_caches(PRO), block_outermost=True)]
    assert names == ["swa-a", "swa-b", "full", "c128-state", "c4-state"]


@pytest.mark.parametrize(
    "backend,changes",
    [
        # docs/grouping.md#padding-before-48993: FlashMLA D 32,832 -> 37,440, E stays 8,640;
        # FlashInfer E 8,192 -> 8,704.
        (
            "flashmla",
            {
                CacheKind.STATE_C4: (32_832, 37_440),
                CacheKind.STATE_C128: (32_832, 37_440),
                CacheKind.INDEXER_STATE: (8_640, 8_640),
                CacheKind.SWA_KV: (37_440, 37_440),
            },
        ),
        ("flashinfer", {CacheKind.STATE_C4: (32_768, 32_768), CacheKind.INDEXER_STATE: (8_192, 8_704)}),
    ],
)
def test_pre_pr_padding(backend, changes):
    caches = model_caches(PRO, CacheOptions(backend=backend, indexer_format="fp8"))
    padded = pad_small_pages(caches)
    for kind, (was, now) in changes.items():
        i = next(i for i, c in enumerate(caches) if c.kind is kind)
        assert (caches[i].page_bytes, padded[i].page_bytes) == (was, now)


def approximate_gcd_reference(counts, lower_bound):
    """The definition, tried d by d (kvviz's first implementation, kept as the reference)."""
    best, best_pad = None, None
    for d in range(lower_bound, max(max(counts), lower_bound) + 1):
        pad = sum(-(-x // d) * d - x for x in counts)
        if best_pad is None or pad <= best_pad:
            best, best_pad = d, pad
    return best


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.integers(0, 300), min_size=1, max_size=12) | st.lists(st.integers(1, 40), min_size=1, max_size=60),
    st.integers(1, 320),
)
def test_approximate_gcd_equals_the_definition(counts, lower_bound):
    assert approximate_gcd(counts, lower_bound) == approximate_gcd_reference(counts, lower_bound)


def test_approximate_gcd_rejects_bad_counts():
    for counts, field in (([], "counts"), ([3, -1], "counts"), ([3], "lower_bound")):
        with pytest.raises(KvvizError, match=field):
            approximate_gcd(counts, 0 if field == "lower_bound" else 1)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.sampled_from([512, 1_024, 1_728, 4_608, 8_640, 32_832, 37_440]) | st.integers(1, 40_000),
        min_size=1,
        max_size=20,
    ),
    st.lists(st.integers(1, 40_000), min_size=1, max_size=20),
)
def test_pad_small_pages_grows_to_the_smallest_full_size_at_least_as_big(full_pages, window_pages):
    caches = tuple(
        [custom_cache(f"f{i}", p) for i, p in enumerate(full_pages)]
        + [custom_cache(f"w{i}", p, sliding_window=128) for i, p in enumerate(window_pages)]
    )
    padded = pad_small_pages(caches)
    assert [c.name for c in padded] == [c.name for c in caches]
    for was, now in zip(caches, padded):
        bigger = [p for p in full_pages if p >= was.page_bytes]
        expected = min(bigger) if not was.is_full_attention and bigger else was.page_bytes
        assert now.page_bytes == expected
        assert (now.padded_page_bytes is not None) == (expected != was.page_bytes)
        assert now.content_bytes == was.content_bytes


def test_packed_sub_groups_are_lettered_past_z():
    """The packed path letters a bucket's sub-groups a..z, then aa, ab, ... (kvviz's names; vLLM
    names no group), so DeepSeek V4 with thousands of MTP layers keeps readable, unique names."""
    from kvviz.vllm.group_names import named_groups

    one = [custom_cache("l0", 10)]
    names = [g.name for g in named_groups([("swa", [one] * 28)], lettered=True)]
    assert names[:2] == ["swa-a", "swa-b"] and names[25:] == ["swa-z", "swa-aa", "swa-ab"]
    assert [g.name for g in named_groups([("state", [one] * 2)])] == ["state-0", "state-1"]
