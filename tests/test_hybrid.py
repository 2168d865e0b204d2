"""Hybrid models laid out as vLLM 0.33 does, packed, and in separate pools
(docs/hybrid.md#hybrid-caches, #hybrid-grouping, #hybrid-planners, #separate-pools).

Expected values come from the issue's worked figures, from the rules redone by hand from
the config fields and from vLLM 0.33's own output (tests/data/vllm-0.33/hybrid-presets.json);
the invariants run over random hybrid configs (hypothesis)."""

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvviz.api import compare
from kvviz.base.defaults import GIB, MAX_NUM_BATCHED_TOKENS
from kvviz.base.errors import KvvizError
from kvviz.core import capacity
from kvviz.core.kinds import CacheKind
from kvviz.core.planes import layer_planes
from kvviz.core.spec import Scheduling
from kvviz.families import Model
from kvviz.families.decoder import CHUNKED, FULL, SLIDING, DecoderConfig
from kvviz.families.state_config import ATTN, STATE, Slot, StateConfig
from kvviz.options import Options
from kvviz.vllm.pages import KERNEL_BLOCK_ALIGNMENT, STATE_BACKENDS
from kvviz.vllm.plan import plan_model

LINEAR = "linear_attention"  # a gated delta net layer (Qwen3-Next's layer_types)
BUDGET_40 = 40 * GIB
CONTEXT = 32768
# Requests of 32,768 tokens (the length vLLM's output below was made at; the models' own is longer).
DEFAULT = Options(max_model_len=CONTEXT)
NO_PC = Options(prefix_caching=False, max_model_len=CONTEXT)
# vLLM 0.33: tokens in flight = max_concurrent_batches (2: async scheduling) x max_num_batched_tokens.
IN_FLIGHT = 2 * MAX_NUM_BATCHED_TOKENS

VLLM = json.loads((Path(__file__).parent / "data" / "vllm-0.33" / "hybrid-presets.json").read_text())
VLLM_CASES = {c["case"]: c for c in VLLM["cases"]}


def cdiv(a, b):
    return -(-a // b)


def plan_hybrid(model, options=DEFAULT, planner=None):
    return plan_model(model, planner, options)


def page_of(plan) -> int:
    """The one page size of a vLLM plan (pages are unified)."""
    pages = {p.page_bytes for p in plan.layout.placements}
    assert len(pages) == 1
    return pages.pop()


def caches_of(plan):
    return [p.cache for pool in plan.pools for p in pool.placements]


def state_bytes(model, options=DEFAULT) -> int:
    """One state's bytes (conv + SSM), from the family's state parts."""
    return sum(p.num_bytes for p in model.reader.state_parts(model, options))


# ---- the figures -------------------------------------------------------------------------
def test_qwen3_next_without_prefix_caching(qwen):
    plan = plan_hybrid(qwen, NO_PC)
    state = [c for c in caches_of(plan) if c.kind is CacheKind.GDN_STATE][0]
    assert plan.tokens_per_block == 544
    assert page_of(plan) == 1_114_112
    assert state.content_bytes == 1_097_728 and state.page_bytes == 1_114_112
    assert plan.block_stride == 13_369_344
    assert [len(g.layers) for g in plan.groups] == [12, 12, 12, 12]


def test_gpt_oss_two_groups_of_18_at_offset_0(gpt_oss):
    layout = plan_hybrid(gpt_oss).layout
    assert [len(g.layers) for g in layout.groups] == [18, 18]
    assert len(layout.tensors) == 2 and all(t.offset == 0 for t in layout.tensors)
    assert layout.block_stride == 589_824


def test_gemma3_groups_one_layer_short(gemma):
    plan = plan_hybrid(gemma)
    layout = plan.layout
    sizes = [(g.layers[0].kind, len(g.layers)) for g in layout.groups]
    assert sizes == [(CacheKind.SLIDING_ATTENTION, n) for n in (9, 9, 9, 9, 8, 8)] + [(CacheKind.FULL_ATTENTION, 10)]
    # the i-th sliding group holds sliding layers [i::6]
    sliding = [i for i in range(62) if (i + 1) % 6]
    assert [c.layer for c in layout.groups[1].layers] == sliding[1::6]
    # short groups leave whole empty slots at the end of the block
    page = 16 * 16 * 128 * 2 * 2
    assert layout.block_stride == 10 * page
    assert layout.unused_ranges(4) == [(8 * page, 10 * page)]


# ---- vLLM 0.33's own output (tests/data/vllm-0.33/hybrid-presets.json) ---------------------------
VLLM_PLANS = [
    ("gpt-oss-120b", "gpt_oss", {}),
    ("gemma-3-27b-text", "gemma", {}),
    ("llama-4-scout-text", "scout", {}),
    ("qwen3-next-80b-a3b/ssm=auto(bf16)/prefix-caching=on(default,align)", "qwen", {}),
    ("qwen3-next-80b-a3b/ssm=float32/prefix-caching=on(default,align)", "qwen", {"mamba_ssm_dtype": "float32"}),
    ("qwen3-next-80b-a3b/ssm=auto(bf16)/prefix-caching=off(mamba_cache_mode=none)", "qwen", {"prefix_caching": False}),
    (
        "qwen3-next-80b-a3b/ssm=float32/prefix-caching=off(mamba_cache_mode=none)",
        "qwen",
        {"prefix_caching": False, "mamba_ssm_dtype": "float32"},
    ),
]


@pytest.mark.parametrize("case,fixture,knobs", VLLM_PLANS, ids=[c for c, _, _ in VLLM_PLANS])
def test_plans_match_vllm_033(request, case, fixture, knobs):
    model = request.getfixturevalue(fixture)
    theirs = VLLM_CASES[case]
    assert theirs["config"]["max_model_len"] == CONTEXT
    plan = plan_model(model, "vllm", Options(max_model_len=CONTEXT, **knobs))
    want = theirs["plans"]["default"]
    assert plan.tokens_per_block == theirs["config"]["after_platform_alignment"]["block_size"]
    assert plan.block_stride == want["bytes_per_block"]
    assert [len(g.layers) for g in plan.groups] == [g["num_layers"] for g in want["groups"]]
    assert [g.layers[0].tokens_per_block for g in plan.groups] == [g["block_size"] for g in want["groups"]]
    for label, budget in want["budgets"].items():
        assert plan.capacity(budget["available_bytes"]).num_blocks == budget["num_blocks"], label
    for mnbt in (2048, 8192):
        adm = want["admission_per_request_at_max_model_len"][f"max_num_batched_tokens={mnbt}"]
        assert adm["max_concurrent_batches"] == 2  # async scheduling, vLLM's default
        cap = plan_model(model, "vllm", Options(max_model_len=CONTEXT, max_num_batched_tokens=mnbt, **knobs)).capacity(
            BUDGET_40
        )
        assert [g.blocks_per_request for g in cap.groups] == adm["blocks_per_group"]
        assert cap.admission_bytes_per_request == adm["_max_memory_usage_bytes_from_groups"]
    if model.family == "decoder":  # one page size: vLLM's packed branch changes nothing, nor does kvviz's
        packed, theirs_packed = plan_model(model, "packed", Options(max_model_len=CONTEXT)), theirs["plans"]["packed"]
        assert packed.block_stride == theirs_packed["bytes_per_block"]
        assert [len(g.layers) for g in packed.groups] == [g["num_layers"] for g in theirs_packed["groups"]]


# ---- pages by hand from the config fields --------------------------------------------------------
def test_attention_pages_by_hand(gpt_oss, gemma, scout):
    for m in (gpt_oss, gemma, scout):
        c = m.config
        for opts, dtype_bytes in ((Options(), 2), (Options(kv_dtype="fp8"), 1)):
            expected = 16 * c.num_key_value_heads * c.head_dim * 2 * dtype_bytes
            assert {x.page_bytes for x in caches_of(plan_hybrid(m, opts))} == {expected}


def test_gdn_state_by_hand(qwen):
    a = qwen.config.args
    conv_dim = 2 * a["num_k_heads"] * a["head_k_dim"] + a["num_v_heads"] * a["head_v_dim"]
    conv = (a["conv_kernel"] - 1) * conv_dim
    ssm = a["num_v_heads"] * a["head_k_dim"] * a["head_v_dim"]
    assert state_bytes(qwen, NO_PC) == 2 * conv + 2 * ssm
    fp32 = Options(prefix_caching=False, mamba_ssm_dtype="float32", max_model_len=CONTEXT)
    state32 = 2 * conv + 4 * ssm
    assert state_bytes(qwen, fp32) == state32
    per_token = qwen.config.num_kv_heads * qwen.config.head_dim * 2 * 2
    block = plan_hybrid(qwen, fp32).tokens_per_block
    # the smallest multiple of 16 tokens whose page holds the state
    assert block % 16 == 0 and block * per_token >= state32 and (block - 16) * per_token < state32


def test_prefix_caching_aligns_the_block_to_the_checkpoint_alignment(qwen):
    per_token = 2 * 256 * 2 * 2
    plan = plan_hybrid(qwen)  # prefix caching on: vLLM 0.33's default for hybrid models
    # 'align' mode: the kernel block (16) and FlashInfer's GDN checkpoint alignment (64), lcm
    alignment = math.lcm(KERNEL_BLOCK_ALIGNMENT, STATE_BACKENDS["gdn"].checkpoint_alignment)
    assert alignment == 64
    assert plan.tokens_per_block == 64 * cdiv(1_097_728, 64 * per_token) == 576
    assert page_of(plan) == 576 * per_token


def test_attention_only_models_keep_the_default_block(gpt_oss, scout):
    assert plan_hybrid(gpt_oss).tokens_per_block == 16
    assert plan_hybrid(scout, Options(block_size=32)).tokens_per_block == 32


# ---- admission and capacity ----------------------------------------------------------------------
def test_qwen3_next_admission_at_32k(qwen):
    s = plan_hybrid(qwen, NO_PC).capacity(BUDGET_40)
    # full attention holds the whole context; each of the 3 state groups one state (mode 'none')
    assert [g.blocks_per_request for g in s.groups] == [1, 1, 1, cdiv(CONTEXT, 544)]
    assert s.admission_bytes_per_request == 13_369_344 * (3 + cdiv(CONTEXT, 544))
    assert s.num_blocks == BUDGET_40 // 13_369_344
    assert s.requests_fit == s.num_blocks // (3 + cdiv(CONTEXT, 544))
    # 'align' mode: 2 states + 1 checkpoint per group
    on = plan_hybrid(qwen).capacity(BUDGET_40)
    assert [g.blocks_per_request for g in on.groups][:3] == [3, 3, 3]


def test_sliding_and_chunked_admission(gpt_oss, scout):
    s = plan_hybrid(gpt_oss).capacity(BUDGET_40)
    window = cdiv(min(128 - 1 + IN_FLIGHT, CONTEXT), 16) + 1
    assert [g.blocks_per_request for g in s.groups] == [window, CONTEXT // 16]
    plan = plan_hybrid(scout)
    t = plan.capacity(BUDGET_40)
    chunk = cdiv(min(8192 + IN_FLIGHT, CONTEXT), 16)
    assert [g.blocks_per_request for g in t.groups] == [chunk, chunk, chunk, CONTEXT // 16]
    assert t.admission_bytes_per_request == 786_432 * (3 * chunk + CONTEXT // 16)
    assert t.max_concurrency == pytest.approx(capacity.max_concurrency(plan.layout, BUDGET_40, plan.scheduling))
    # one batch in flight (no async scheduling): max_num_batched_tokens alone
    one = plan_hybrid(gpt_oss, Options(max_model_len=CONTEXT, async_scheduling=False)).capacity(BUDGET_40)
    assert [g.blocks_per_request for g in one.groups] == [cdiv(128 - 1 + MAX_NUM_BATCHED_TOKENS, 16) + 1, CONTEXT // 16]


def test_short_requests_hold_only_their_tokens(scout):
    layout = plan_hybrid(scout).layout
    s = Scheduling(max_model_len=100, max_in_flight_tokens=IN_FLIGHT)
    assert capacity.group_blocks_for_request(layout, s) == [cdiv(100, 16)] * 4


def test_default_request_length_is_the_models_own(gpt_oss):
    # vLLM derives max_model_len from the config when --max-model-len is not given
    assert plan_model(gpt_oss).max_model_len == gpt_oss.max_model_len


# ---- packed and separate -------------------------------------------------------------------------
def test_packed_changes_nothing_without_state(gpt_oss, gemma, scout):
    for c in (gpt_oss, gemma, scout):
        a, b = plan_hybrid(c), plan_hybrid(c, planner="packed")
        assert a.block_stride == b.block_stride and [g.layers for g in a.groups] == [g.layers for g in b.groups]


def test_packed_unpadded_states_move_padding_to_the_tail(qwen):
    vllm = plan_hybrid(qwen, NO_PC).capacity(BUDGET_40)
    packed_plan = plan_hybrid(qwen, NO_PC, "packed")
    packed = packed_plan.capacity(BUDGET_40)
    # 12 attention pages bind; 13_369_344 // 1_097_728 = 12 states fit, so 36 states need 3 groups
    assert [len(g.layers) for g in packed_plan.groups] == [12, 12, 12, 12]
    assert packed.bytes_per_block == vllm.bytes_per_block == 13_369_344
    assert vllm.waste.padded_state_bytes == 36 * (1_114_112 - 1_097_728)
    assert packed.waste.padded_state_bytes == 0
    assert packed.waste.unused_tail_bytes == 3 * (13_369_344 - 12 * 1_097_728)
    assert packed.waste.waste_bytes == vllm.waste.waste_bytes


def test_separate_pools_split_the_budget_by_need(qwen, gemma):
    for c, opts in ((qwen, NO_PC), (gemma, DEFAULT)):
        pools = plan_hybrid(c, opts, "separate")
        assert pools.separate and len(pools.pools) == 2  # one pool per cache kind
        s = pools.capacity(BUDGET_40)
        needs = [g.blocks_per_request * g.block_bytes for g in s.groups]
        for g, need in zip(s.groups, needs):
            assert g.num_blocks == (BUDGET_40 * need // sum(needs)) // g.block_bytes
            assert g.num_blocks >= s.requests_fit * g.blocks_per_request
        assert s.waste.waste_bytes == 0  # no overlay, no padding
        assert sum(g.num_blocks * g.block_bytes for g in s.groups) <= BUDGET_40
    state_pool = plan_hybrid(qwen, NO_PC, "separate").pools[0]
    assert state_pool.block_stride == 36 * 1_097_728


def test_compare_table_and_json(qwen, capsys):
    summaries = compare(qwen, budget_bytes=BUDGET_40, prefix_caching=False, max_model_len=CONTEXT)
    assert [label for label, _ in summaries] == ["vllm", "packed", "separate"]
    assert [s.planner for _, s in summaries] == ["vllm", "packed", "separate"]
    from kvviz.cli import main

    assert (
        main(
            [
                "compare",
                "--model",
                "qwen3-next-80b-a3b",
                "--no-prefix-caching",
                "--max-model-len",
                "32768",
                "--budget-bytes",
                str(BUDGET_40),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "13,369,344" in text and all(f"{p}: GPU KV cache size: " in text for p in ("vllm", "packed", "separate"))
    j = summaries[0][1].to_json()
    assert j["bytes_per_block"] == 13_369_344
    assert j["waste"]["waste_bytes"] == 36 * 16_384


def test_plan_json_keeps_the_layout_fields(gpt_oss, qwen):
    j = plan_hybrid(gpt_oss).layout.to_json(num_blocks=10)
    assert j["block_stride"] == 589_824 and j["num_blocks"] == 10
    assert [len(g["layers"]) for g in j["groups"]] == [18, 18]
    assert all(t["offset"] == 0 and t["layer_stride"] == 32_768 for t in j["tensors"])
    sep = plan_hybrid(qwen, NO_PC, "separate").to_json(budget_bytes=BUDGET_40)
    assert sep["num_blocks"] == sum(g["num_blocks"] for g in sep["groups"])
    assert {"block_stride", "num_blocks", "groups"} <= set(sep)


def test_plan_json_with_a_budget(qwen):
    j = plan_hybrid(qwen, NO_PC).to_json(budget_bytes=BUDGET_40)
    assert j["num_blocks"] == BUDGET_40 // 13_369_344 and j["tokens_per_block"] == 544
    assert j["summary"]["admission_bytes_per_request"] == 13_369_344 * (3 + cdiv(CONTEXT, 544))
    sep = plan_hybrid(qwen, NO_PC, "separate").to_json(budget_bytes=BUDGET_40)
    assert sep["num_blocks"] == sum(g["num_blocks"] for g in sep["groups"]) == sep["summary"]["num_blocks"]
    assert plan_hybrid(qwen).to_json()["num_blocks"] is None


def test_text_map_shows_padding(qwen):
    text = str(plan_hybrid(qwen, NO_PC))
    assert "~=padding" in text and f"G={CacheKind.GDN_STATE.label}" in text


# ---- layer-outermost map -------------------------------------------------------------------------
def test_layer_planes_of_a_short_group(gemma):
    plan = plan_hybrid(gemma)
    n = 100
    page = page_of(plan)
    tensors = layer_planes(plan.layout, n)
    assert len(tensors) == 7
    short = tensors[4]  # 8 layers in a block that holds 10
    assert short.layer_stride == n * page and short.block_stride == page and short.size == 10 * page * n
    assert [p.layer is None for p in short.planes] == [False] * 8 + [True]
    assert short.planes[-1].start == 8 * n * page and short.planes[-1].end == short.size
    assert short.block_range(3, 7) == (3 * n * page + 7 * page, 3 * n * page + 8 * page)


# ---- bad input -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs,field",
    [
        ({"kv_dtype": "fp4"}, "kv_dtype"),
        ({"mamba_ssm_dtype": "fp8"}, "mamba_ssm_dtype"),
        ({"sliding_window": 0}, "sliding_window"),
        ({"max_num_batched_tokens": 0}, "max_num_batched_tokens"),
    ],
)
def test_bad_options_name_the_field(kwargs, field):
    with pytest.raises(KvvizError, match=field):
        Options(**kwargs)


def test_block_size_off_the_kernel_block_is_refused(gpt_oss):
    # FlashAttention / FlashInfer take blocks of a multiple of 16 tokens (MultipleOf(16))
    with pytest.raises(KvvizError, match="block_size"):
        plan_hybrid(gpt_oss, Options(block_size=10))


def test_unknown_planner(gpt_oss):
    with pytest.raises(KvvizError, match="planner"):
        plan_hybrid(gpt_oss, planner="bucketed")


# ---- invariants over random hybrid configs -------------------------------------------------------
# An attention-only decoder mixes full, sliding and chunked layers; a gated delta net hybrid mixes
# linear-attention (state) and full-attention layers (the two families that plan them).
@st.composite
def hybrid_configs(draw):
    if draw(st.booleans()):
        pool = [FULL, SLIDING, CHUNKED]
    else:
        pool = [LINEAR, FULL]
    kinds = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=len(pool), unique=True))
    if LINEAR in pool and LINEAR not in kinds:
        kinds = [LINEAR] + kinds[: len(pool) - 1]
    n = draw(st.integers(min_value=len(kinds), max_value=64))
    layers = kinds + draw(st.lists(st.sampled_from(kinds), min_size=n - len(kinds), max_size=n - len(kinds)))
    layers = tuple(draw(st.permutations(layers)))
    kv_heads = draw(st.integers(1, 16))
    head_dim = draw(st.sampled_from([64, 80, 128, 256]))
    if LINEAR in pool:
        slots = tuple(
            Slot(STATE, f"model.layers.{i}.linear_attn", i)
            if k == LINEAR
            else Slot(ATTN, f"model.layers.{i}.self_attn.attn", i)
            for i, k in enumerate(layers)
        )
        args = (
            ("num_k_heads", draw(st.integers(1, 32))),
            ("num_v_heads", draw(st.integers(1, 64))),
            ("head_k_dim", draw(st.sampled_from([64, 128, 256]))),
            ("head_v_dim", draw(st.sampled_from([64, 128, 256]))),
            ("conv_kernel", draw(st.integers(2, 8))),
        )
        config = StateConfig(
            mamba_type="gdn",
            slots=slots,
            num_hidden_layers=n,
            state_args=args,
            num_attention_heads=kv_heads,
            num_kv_heads=kv_heads,
            head_dim=head_dim,
        )
        family = "state"
    else:
        config = DecoderConfig(
            num_hidden_layers=n,
            num_attention_heads=kv_heads,
            num_key_value_heads=kv_heads,
            head_dim=head_dim,
            layer_kinds=layers,
            sliding_window=draw(st.integers(16, 8192)) if SLIDING in layers else None,
            attention_chunk_size=draw(st.integers(64, 16384)) if CHUNKED in layers else None,
            layer_prefix="model.layers",
            attn_suffix="self_attn.attn",
            kind_source="random",
        )
        family = "decoder"
    return Model(
        name="random",
        family=family,
        architecture="Random",
        model_type="random",
        dtype="bf16",
        max_model_len=4096,
        config=config,
    )


def options_for(model, kv_dtype, ssm, prefix, block):
    knobs = dict(kv_dtype=kv_dtype, block_size=block)
    if model.family == "state":
        knobs.update(mamba_ssm_dtype=ssm, prefix_caching=prefix)
    return Options(**knobs)


options_strategy = st.tuples(
    st.sampled_from(["bf16", "fp8"]),
    st.sampled_from(["bfloat16", "float32"]),
    st.booleans(),
    st.sampled_from([None, 16, 32, 64]),
)


def kinds_of(model) -> tuple[str, ...]:
    c = model.config
    if isinstance(c, DecoderConfig):
        return c.layer_kinds
    return tuple(LINEAR if s.kind == STATE else FULL for s in c.slots)


def check_layout(layout):
    for gi in range(len(layout.groups)):
        spans = sorted((p.offset, p.end) for p in layout.group_placements(gi))
        assert all(0 <= lo and hi <= layout.block_stride for lo, hi in spans)  # pages inside the stride
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))  # no overlap within a group
    names = [p.name for p in layout.placements]
    assert len(names) == len(set(names))


@settings(max_examples=120, deadline=None)
@given(hybrid_configs(), options_strategy)
def test_vllm_layout_invariants(model, knobs):
    options = options_for(model, *knobs)
    plan = plan_hybrid(model, options)
    layout = plan.layout
    check_layout(layout)
    assert len(plan.pools) == 1
    assert len({p.page_bytes for p in layout.placements}) == 1  # equal pages across groups
    assert sorted(p.cache.layer for p in layout.placements) == list(range(model.config.num_hidden_layers))
    s = plan.capacity(GIB)
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
    kinds = kinds_of(model)
    if LINEAR in kinds and any(k != LINEAR for k in kinds):
        state = state_bytes(model, options)
        k = max(KERNEL_BLOCK_ALIGNMENT, options.block_size or 16)
        if options.prefix_caching is not False:  # 'align' mode: the GDN checkpoint alignment too
            k = math.lcm(k, STATE_BACKENDS["gdn"].checkpoint_alignment)
        page = page_of(plan)
        per_token = page // plan.tokens_per_block
        assert plan.tokens_per_block % 16 == 0 and page >= state
        if plan.tokens_per_block > (options.block_size or 16):  # raised: the smallest that holds a state
            assert (plan.tokens_per_block - k) * per_token < state


@settings(max_examples=80, deadline=None)
@given(hybrid_configs(), options_strategy)
def test_packed_and_separate_invariants(model, knobs):
    options = options_for(model, *knobs)
    packed = plan_hybrid(model, options, "packed")
    check_layout(packed.layout)
    s = packed.capacity(GIB)
    assert s.waste.waste_bytes == s.waste.empty_slot_bytes + s.waste.padded_state_bytes + s.waste.unused_tail_bytes
    assert s.waste.padded_state_bytes == 0
    pools = plan_hybrid(model, options, "separate")
    for pool in pools.pools:
        check_layout(pool)
        assert pool.block_stride == pool.groups[0].total_bytes
    sep = pools.capacity(GIB)
    assert sum(g.num_blocks * g.block_bytes for g in sep.groups) <= GIB
    assert sum(len(p.groups[0].layers) for p in pools.pools) == model.config.num_hidden_layers


@settings(max_examples=60, deadline=None)
@given(hybrid_configs(), st.integers(1, 50))
def test_layer_planes_tile_each_tensor(model, num_blocks):
    layout = plan_hybrid(model, Options()).layout
    for t in layer_planes(layout, num_blocks):
        assert t.planes[0].start == 0 and t.planes[-1].end == t.size
        assert all(a.end == b.start for a, b in zip(t.planes, t.planes[1:]))
        assert all(p.end - p.start == t.layer_stride for p in t.planes if p.layer is not None)
        assert t.layer_stride == num_blocks * t.page_bytes


def test_sliding_window_override(gpt_oss):
    plan = plan_hybrid(gpt_oss, Options(sliding_window=4096, max_model_len=CONTEXT))
    assert {c.sliding_window for g in plan.groups for c in g.layers} == {4096, None}
    # a sliding group keeps window - 1 + in-flight tokens, plus one block (by hand, 16-token blocks)
    sliding, full = capacity.group_blocks_for_request(plan.layout, plan.scheduling)
    assert sliding == cdiv(4096 - 1 + IN_FLIGHT, 16) + 1 and full == cdiv(CONTEXT, 16)
