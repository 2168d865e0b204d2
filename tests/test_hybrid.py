"""Hybrid models laid out as vLLM 0.33 does, packed, and in separate pools
(docs/hybrid.md#hybrid-caches, #hybrid-grouping, #hybrid-planners, #separate-pools).

Expected values come from the issue's worked figures and from the rules redone by hand from
the config fields; the invariants run over random hybrid configs (hypothesis)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvviz import capacity
from kvviz.defaults import GIB, MAX_NUM_BATCHED_TOKENS
from kvviz.errors import KvvizError
from kvviz.hf import CHUNKED, FULL, LINEAR, SLIDING, HybridConfig
from kvviz.hybrid import (HybridLayout, HybridOptions, SeparatePools, compare_hybrid, comparison_json,
                          format_comparison, hybrid_caches, layer_planes, plan_hybrid, plan_json, summarize)
from kvviz.hybrid_specs import attention_block_size, kernel_block_alignment, state_row
from kvviz.specs import CacheKind

NO_PC = HybridOptions(prefix_caching=False)
BUDGET_40 = 40 * GIB
CONTEXT = 32768


def cdiv(a, b):
    return -(-a // b)


# ---- the figures -------------------------------------------------------------------------
def test_qwen3_next_without_prefix_caching(qwen):
    layout = plan_hybrid(qwen, NO_PC)
    state = [c for c in hybrid_caches(qwen, NO_PC) if c.kind is CacheKind.LINEAR_STATE][0]
    assert layout.tokens_per_block == 544
    assert layout.page_bytes == 1_114_112
    assert state.content_bytes == 1_097_728 and state.page_bytes == 1_114_112
    assert layout.block_stride == 13_369_344
    assert [len(g.layers) for g in layout.groups] == [12, 12, 12, 12]


def test_gpt_oss_two_groups_of_18_at_offset_0(gpt_oss):
    layout = plan_hybrid(gpt_oss)
    assert [len(g.layers) for g in layout.groups] == [18, 18]
    assert len(layout.tensors) == 2 and all(t.offset == 0 for t in layout.tensors)
    assert layout.block_stride == 589_824


def test_gemma3_groups_one_layer_short(gemma):
    layout = plan_hybrid(gemma)
    sizes = [(g.layers[0].kind, len(g.layers)) for g in layout.groups]
    assert sizes == [(CacheKind.SLIDING_ATTENTION, n) for n in (9, 9, 9, 9, 8, 8)] + [(CacheKind.FULL_ATTENTION, 10)]
    # the i-th sliding group holds sliding layers [i::6]
    sliding = [i for i in range(62) if (i + 1) % 6]
    assert [c.layer for c in layout.groups[1].layers] == sliding[1::6]
    # short groups leave whole empty slots at the end of the block
    page = 16 * 16 * 128 * 2 * 2
    assert layout.block_stride == 10 * page
    assert layout.unused_ranges(4) == [(8 * page, 10 * page)]


# ---- pages by hand from the config fields --------------------------------------------------------
def test_attention_pages_by_hand(gpt_oss, gemma, scout):
    for c in (gpt_oss, gemma, scout):
        for opts, dtype_bytes in ((HybridOptions(), 2), (HybridOptions(kv_dtype="fp8"), 1)):
            expected = 16 * c.num_key_value_heads * c.head_dim * 2 * dtype_bytes
            assert {x.page_bytes for x in hybrid_caches(c, opts)} == {expected}


def test_gdn_state_by_hand(qwen):
    conv_dim = 2 * qwen.linear_num_key_heads * qwen.linear_key_head_dim + \
        qwen.linear_num_value_heads * qwen.linear_value_head_dim
    conv = (qwen.linear_conv_kernel_dim - 1) * conv_dim
    ssm = qwen.linear_num_value_heads * qwen.linear_key_head_dim * qwen.linear_value_head_dim
    assert state_row(qwen, NO_PC).row_bytes == 2 * conv + 2 * ssm
    fp32 = HybridOptions(prefix_caching=False, mamba_ssm_dtype="float32")
    state32 = 2 * conv + 4 * ssm
    assert state_row(qwen, fp32).row_bytes == state32
    per_token = qwen.num_key_value_heads * qwen.head_dim * 2 * 2
    block = attention_block_size(qwen, fp32)
    # the smallest multiple of 16 tokens whose page holds the state
    assert block % 16 == 0 and block * per_token >= state32 and (block - 16) * per_token < state32


def test_prefix_caching_aligns_the_block_to_the_checkpoint_alignment(qwen):
    per_token = 2 * 256 * 2 * 2
    layout = plan_hybrid(qwen)  # prefix caching on: vLLM 0.33's default for hybrid models
    assert kernel_block_alignment(qwen, HybridOptions()) == 64
    assert layout.tokens_per_block == 64 * cdiv(1_097_728, 64 * per_token) == 576
    assert layout.page_bytes == 576 * per_token


def test_attention_only_models_keep_the_default_block(gpt_oss, scout):
    assert plan_hybrid(gpt_oss).tokens_per_block == 16
    assert plan_hybrid(scout, HybridOptions(block_size=32)).tokens_per_block == 32


# ---- admission and capacity ----------------------------------------------------------------------
def test_qwen3_next_admission_at_32k(qwen):
    s = summarize(plan_hybrid(qwen, NO_PC), qwen, NO_PC, budget_bytes=BUDGET_40, context=CONTEXT)
    # full attention holds the whole context; each of the 3 state groups one state (mode 'none')
    assert [g.blocks_per_request for g in s.groups] == [1, 1, 1, cdiv(CONTEXT, 544)]
    assert s.admission_bytes_per_request == 13_369_344 * (3 + cdiv(CONTEXT, 544))
    assert s.num_blocks == BUDGET_40 // 13_369_344
    assert s.requests_fit == s.num_blocks // (3 + cdiv(CONTEXT, 544))
    # 'align' mode: 2 states + 1 checkpoint per group
    on = summarize(plan_hybrid(qwen), qwen, budget_bytes=BUDGET_40, context=CONTEXT)
    assert [g.blocks_per_request for g in on.groups][:3] == [3, 3, 3]


def test_sliding_and_chunked_admission(gpt_oss, scout):
    s = summarize(plan_hybrid(gpt_oss), gpt_oss, budget_bytes=BUDGET_40, context=CONTEXT)
    window = cdiv(min(128 - 1 + MAX_NUM_BATCHED_TOKENS, CONTEXT), 16) + 1
    assert [g.blocks_per_request for g in s.groups] == [window, CONTEXT // 16]
    t = summarize(plan_hybrid(scout), scout, budget_bytes=BUDGET_40, context=CONTEXT)
    chunk = cdiv(min(8192 + MAX_NUM_BATCHED_TOKENS, CONTEXT), 16)
    assert [g.blocks_per_request for g in t.groups] == [chunk, chunk, chunk, CONTEXT // 16]
    assert t.admission_bytes_per_request == 786_432 * (3 * chunk + CONTEXT // 16)
    assert t.max_concurrency == pytest.approx(capacity.max_concurrency(plan_hybrid(scout), BUDGET_40, CONTEXT))


def test_short_requests_hold_only_their_tokens(scout):
    layout = plan_hybrid(scout)
    assert capacity.group_blocks_for_request(layout, 100) == [cdiv(100, 16)] * 4


# ---- packed and separate -------------------------------------------------------------------------
def test_packed_changes_nothing_without_state(gpt_oss, gemma, scout):
    for c in (gpt_oss, gemma, scout):
        a, b = plan_hybrid(c), plan_hybrid(c, planner="packed")
        assert a.block_stride == b.block_stride and [g.layers for g in a.groups] == [g.layers for g in b.groups]


def test_packed_unpadded_states_move_padding_to_the_tail(qwen):
    vllm = summarize(plan_hybrid(qwen, NO_PC), qwen, NO_PC, budget_bytes=BUDGET_40, context=CONTEXT)
    packed_layout = plan_hybrid(qwen, NO_PC, "packed")
    packed = summarize(packed_layout, qwen, NO_PC, budget_bytes=BUDGET_40, context=CONTEXT)
    # 12 attention pages bind; 13_369_344 // 1_097_728 = 12 states fit, so 36 states need 3 groups
    assert [len(g.layers) for g in packed_layout.groups] == [12, 12, 12, 12]
    assert packed.bytes_per_block == vllm.bytes_per_block == 13_369_344
    assert vllm.waste.padded_state_bytes == 36 * (1_114_112 - 1_097_728)
    assert packed.waste.padded_state_bytes == 0
    assert packed.waste.unused_tail_bytes == 3 * (13_369_344 - 12 * 1_097_728)
    assert packed.waste.waste_bytes == vllm.waste.waste_bytes


def test_separate_pools_split_the_budget_by_need(qwen, gemma):
    for c, opts in ((qwen, NO_PC), (gemma, HybridOptions())):
        pools = plan_hybrid(c, opts, "separate")
        assert isinstance(pools, SeparatePools)
        s = summarize(pools, c, opts, budget_bytes=BUDGET_40, context=CONTEXT)
        needs = [g.blocks_per_request * g.block_bytes for g in s.groups]
        for g, need in zip(s.groups, needs):
            assert g.num_blocks == (BUDGET_40 * need // sum(needs)) // g.block_bytes
            assert g.num_blocks >= s.requests_fit * g.blocks_per_request
        assert s.waste.waste_bytes == 0  # no overlay, no padding
        assert sum(g.num_blocks * g.block_bytes for g in s.groups) <= BUDGET_40
    state_pool = plan_hybrid(qwen, NO_PC, "separate").pools[0]
    assert state_pool.block_stride == 36 * 1_097_728


def test_compare_table_and_json(qwen):
    summaries = compare_hybrid(qwen, NO_PC, budget_bytes=BUDGET_40, context=CONTEXT)
    assert [s.planner for s in summaries] == ["vllm", "packed", "separate"]
    text = format_comparison(summaries)
    assert "13,369,344" in text and text.count("\n") == 5
    j = comparison_json(summaries)
    assert j["planners"][0]["bytes_per_block"] == 13_369_344
    assert j["planners"][0]["waste"]["waste_bytes"] == 36 * 16_384


def test_plan_json_keeps_the_layout_fields(gpt_oss, qwen):
    j = plan_hybrid(gpt_oss).to_json(num_blocks=10)
    assert j["block_stride"] == 589_824 and j["num_blocks"] == 10
    assert [len(g["layers"]) for g in j["groups"]] == [18, 18]
    assert all(t["offset"] == 0 and t["layer_stride"] == 32_768 for t in j["tensors"])
    sep = plan_hybrid(qwen, NO_PC, "separate").to_json(num_blocks=[3, 4])
    assert sep["num_blocks"] == 7 and {"block_stride", "num_blocks", "groups"} <= set(sep)


def test_plan_json_with_a_budget(qwen):
    j = plan_json(plan_hybrid(qwen, NO_PC), qwen, NO_PC, budget_bytes=BUDGET_40)
    assert j["num_blocks"] == BUDGET_40 // 13_369_344 and j["tokens_per_block"] == 544
    assert j["summary"]["admission_bytes_per_request"] == 13_369_344 * (3 + cdiv(CONTEXT, 544))
    sep = plan_json(plan_hybrid(qwen, NO_PC, "separate"), qwen, NO_PC, budget_bytes=BUDGET_40, context=CONTEXT)
    assert sep["num_blocks"] == sum(g["num_blocks"] for g in sep["groups"]) == sep["summary"]["num_blocks"]
    assert plan_json(plan_hybrid(qwen), qwen)["num_blocks"] is None


def test_text_map_shows_padding(qwen):
    text = str(plan_hybrid(qwen, NO_PC))
    assert "~=padding" in text and "M=linear-attention state" in text


# ---- layer-outermost map -------------------------------------------------------------------------
def test_layer_planes_of_a_short_group(gemma):
    layout = plan_hybrid(gemma)
    n = 100
    page = layout.page_bytes
    tensors = layer_planes(layout, n)
    assert len(tensors) == 7
    short = tensors[4]  # 8 layers in a block that holds 10
    assert short.layer_stride == n * page and short.block_stride == page and short.size == 10 * page * n
    assert [p.layer is None for p in short.planes] == [False] * 8 + [True]
    assert short.planes[-1].start == 8 * n * page and short.planes[-1].end == short.size
    assert short.block_range(3, 7) == (3 * n * page + 7 * page, 3 * n * page + 8 * page)


# ---- bad input -----------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs,field", [({"kv_dtype": "fp4"}, "kv_dtype"), ({"block_size": 10}, "block_size"),
                                          ({"mamba_ssm_dtype": "fp8"}, "mamba_ssm_dtype"),
                                          ({"sliding_window": 0}, "sliding_window"),
                                          ({"max_num_batched_tokens": 0}, "max_num_batched_tokens")])
def test_bad_options_name_the_field(kwargs, field):
    with pytest.raises(KvvizError, match=field):
        HybridOptions(**kwargs)


def test_unknown_planner(gpt_oss):
    with pytest.raises(KvvizError, match="planner"):
        plan_hybrid(gpt_oss, planner="bucketed")


# ---- invariants over random hybrid configs -------------------------------------------------------
@st.composite
def hybrid_configs(draw):
    kinds = draw(st.lists(st.sampled_from([FULL, SLIDING, CHUNKED, LINEAR]), min_size=1, max_size=4, unique=True))
    n = draw(st.integers(min_value=len(kinds), max_value=64))
    layers = kinds + draw(st.lists(st.sampled_from(kinds), min_size=n - len(kinds), max_size=n - len(kinds)))
    layers = draw(st.permutations(layers))
    return HybridConfig(
        name="random", model_type="random", architecture="Random", num_hidden_layers=n, layer_types=tuple(layers),
        num_key_value_heads=draw(st.integers(1, 16)), head_dim=draw(st.sampled_from([64, 80, 128, 256])),
        sliding_window=draw(st.integers(16, 8192)), attention_chunk_size=draw(st.integers(64, 16384)),
        linear_num_key_heads=draw(st.integers(1, 32)), linear_num_value_heads=draw(st.integers(1, 64)),
        linear_key_head_dim=draw(st.sampled_from([64, 128, 256])),
        linear_value_head_dim=draw(st.sampled_from([64, 128, 256])), linear_conv_kernel_dim=draw(st.integers(2, 8)))


options_strategy = st.builds(HybridOptions, kv_dtype=st.sampled_from(["bf16", "fp8"]),
                             mamba_ssm_dtype=st.sampled_from(["bfloat16", "float32"]), prefix_caching=st.booleans(),
                             block_size=st.sampled_from([None, 16, 32, 64]))


def check_layout(layout):
    for gi in range(len(layout.groups)):
        spans = sorted((p.offset, p.end) for p in layout.group_placements(gi))
        assert all(0 <= lo and hi <= layout.block_stride for lo, hi in spans)  # pages inside the stride
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))  # no overlap within a group
    names = [p.name for p in layout.placements]
    assert len(names) == len(set(names))


@settings(max_examples=120, deadline=None)
@given(hybrid_configs(), options_strategy)
def test_vllm_layout_invariants(config, options):
    layout = plan_hybrid(config, options)
    check_layout(layout)
    assert isinstance(layout, HybridLayout)
    assert len({p.page_bytes for p in layout.placements}) == 1  # equal pages across groups
    assert sorted(p.cache.layer for p in layout.placements) == list(range(config.num_hidden_layers))
    s = summarize(layout, config, options, budget_bytes=GIB, context=4096)
    w = s.waste
    real = sum(p.cache.content_bytes for p in layout.placements)
    assert w.waste_bytes == layout.block_stride * len(layout.groups) - real
    assert w.waste_bytes == w.empty_slot_bytes + w.padded_state_bytes + w.unused_tail_bytes
    assert w.unused_tail_bytes == 0  # vLLM's groups leave whole pages empty, nothing less
    # groups of one bucket differ by at most one layer
    by_kind = {}
    for g in layout.groups:
        by_kind.setdefault((g.layers[0].kind, g.layers[0].sliding_window), []).append(len(g.layers))
    assert all(max(v) - min(v) <= 1 for v in by_kind.values())
    if config.has_linear_attention and any(k != LINEAR for k in config.layer_types):
        state = state_row(config, options).row_bytes
        k = kernel_block_alignment(config, options)
        per_token = layout.page_bytes // layout.tokens_per_block
        assert layout.tokens_per_block % 16 == 0 and layout.page_bytes >= state
        if layout.tokens_per_block > (options.block_size or 16):  # raised: the smallest that holds a state
            assert (layout.tokens_per_block - k) * per_token < state


@settings(max_examples=80, deadline=None)
@given(hybrid_configs(), options_strategy)
def test_packed_and_separate_invariants(config, options):
    packed = plan_hybrid(config, options, "packed")
    check_layout(packed)
    s = summarize(packed, config, options, budget_bytes=GIB, context=4096)
    assert s.waste.waste_bytes == s.waste.empty_slot_bytes + s.waste.padded_state_bytes + s.waste.unused_tail_bytes
    assert s.waste.padded_state_bytes == 0
    pools = plan_hybrid(config, options, "separate")
    for pool in pools.pools:
        check_layout(pool)
        assert pool.block_stride == pool.groups[0].total_bytes
    sep = summarize(pools, config, options, budget_bytes=GIB, context=4096)
    assert sum(g.num_blocks * g.block_bytes for g in sep.groups) <= GIB
    assert sum(len(p.groups[0].layers) for p in pools.pools) == config.num_hidden_layers


@settings(max_examples=60, deadline=None)
@given(hybrid_configs(), st.integers(1, 50))
def test_layer_planes_tile_each_tensor(config, num_blocks):
    layout = plan_hybrid(config)
    for t in layer_planes(layout, num_blocks):
        assert t.planes[0].start == 0 and t.planes[-1].end == t.size
        assert all(a.end == b.start for a, b in zip(t.planes, t.planes[1:]))
        assert all(p.end - p.start == t.layer_stride for p in t.planes if p.layer is not None)
        assert t.layer_stride == num_blocks * t.page_bytes


def test_sliding_window_override(gpt_oss):
    layout = plan_hybrid(gpt_oss, HybridOptions(sliding_window=4096))
    assert {c.sliding_window for g in layout.groups for c in g.layers} == {4096, None}
    # a sliding group keeps window - 1 + in-flight tokens, plus one block (by hand, 16-token blocks)
    sliding, full = capacity.group_blocks_for_request(layout, CONTEXT)
    assert sliding == cdiv(4096 - 1 + MAX_NUM_BATCHED_TOKENS, 16) + 1 and full == cdiv(CONTEXT, 16)
