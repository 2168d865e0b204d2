"""SGLang 0.5.23 and TensorRT-LLM pools (kvviz.engines) against numbers derived here by hand.

Every expected number below is written out from the model's config.json fields and the engine
rule it mirrors (cited at each), never copied from kvviz's output. A second set of tests runs
the engines' own sizing functions, taken from their source (SGLang's wheel, unpacked where
KVVIZ_SGLANG_SRC points; TensorRT-LLM's source where KVVIZ_TRTLLM_SRC points at a local extract)
and compiled alone with stand-ins for their runtime context; they skip where the source is absent,
or fail where KVVIZ_REQUIRE_<ENGINE>_SRC is set (tests/engine_sources.py; .ci/run requires SGLang's).
"""

from __future__ import annotations
import __future__

import ast
import dataclasses
import math
import sys
import types
from pathlib import Path

import pytest
from engine_sources import absent, source_root

from kvviz.base.errors import KvvizError
from kvviz.engines import ENGINES, compare_engines, plan_engine, plan_vllm
from kvviz.engines.sglang.plan import plan_sglang
from kvviz.engines.trtllm.plan import plan_trtllm
from kvviz.families import load, load_path, preset_names, preset_raw
from kvviz.options import Options

GIB = 2**30
BUDGET = 60 * GIB  # the KV budget every case is sized at (and a smaller one where it matters)
DEEPSEEK_V3_CONFIG = Path(__file__).parent / "data" / "vllm-0.33" / "configs" / "deepseek-v3" / "config.json"


def _model(name):
    if name == "deepseek-v3" and name not in preset_names():
        if not DEEPSEEK_V3_CONFIG.is_file():
            pytest.skip("no deepseek-v3 preset and no shared config.json")
        return load_path(DEEPSEEK_V3_CONFIG)
    return load(name)


def _cfg(name) -> dict:
    """The config.json fields (the text config of a multimodal wrapper)."""
    if name == "deepseek-v3" and name not in preset_names():
        import json

        raw = json.loads(DEEPSEEK_V3_CONFIG.read_text())
    else:
        raw = preset_raw(name)
    return {**raw, **raw.get("text_config", {})}


# ---------------------------------------------------------------------------------------------
# Rules written out once (each a transcription of the cited engine function).
# ---------------------------------------------------------------------------------------------


def sglang_running(tokens: int, context_len: int, mamba_cap: int | None = None) -> int:
    # mem_cache/kv_cache_configurator.py KVCacheConfigurator.resolve_max_num_reqs (no --max-running-requests)
    est = max(min(int(tokens / context_len * 512), 4096), 2048)
    n = min(est, tokens // 2)
    return n if mamba_cap is None else min(n, mamba_cap)


def trtllm_blocks(budget: int, bytes_per_token: int, tokens_per_block: int = 32) -> int:
    # _util.py CacheCost.tokens_for_budget: budget // slope; resource_manager.py calculate_max_num_blocks:
    # int(max_tokens // tokens_per_block)
    return budget // bytes_per_token // tokens_per_block


def trtllm_running(blocks: int, max_seq_len: int, tokens_per_block: int = 32) -> int:
    # vswa.py validate_and_adjust_attention_windows: max_seq_len is cut to the pool's blocks x tokens_per_block
    # (get_max_atten_window_upper_bound, beam 1); then max_batch_size 2048 (llm_args.py) and blocks to
    # completion ceil(len / tokens_per_block)
    max_seq_len = min(max_seq_len, blocks * tokens_per_block)
    return min(2048, blocks // math.ceil(max_seq_len / tokens_per_block))


# ---------------------------------------------------------------------------------------------
# By hand, per model.
# ---------------------------------------------------------------------------------------------


def test_llama_3_1_8b_full_attention():
    c = _cfg("llama-3.1-8b")
    layers, kv, head = c["num_hidden_layers"], c["num_key_value_heads"], c["hidden_size"] // c["num_attention_heads"]
    ctx = c["max_position_embeddings"]
    m = _model("llama-3.1-8b")
    # SGLang DefaultPoolConfigurator._compute_cell_size: kv x (head_dim + v_head_dim) x layers x 2 B (bf16)
    cell = kv * (head + head) * layers * 2
    tokens = BUDGET // cell // 1 * 1  # calculate_pool_sizes, page_size 1
    s = plan_sglang(m, kv_budget_bytes=BUDGET)
    assert (s.token_capacity, s.request_bound) == (tokens, sglang_running(tokens, ctx))
    assert s.log_line.startswith(
        f"max_total_num_tokens={tokens}, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        f"max_running_requests={sglang_running(tokens, ctx)}, context_len={ctx}, "
    )
    assert [p.name for p in s.pools] == ["k_buffer", "v_buffer"]
    assert all(p.unit == "token" and p.units == tokens and p.reserved_units == 1 for p in s.pools)
    assert s.pools[0].bytes_per_unit == kv * head * layers * 2
    # TRT-LLM get_cache_bytes_per_token: 2 x sum(kv heads over layers) x head_dim x 2 B
    bpt = 2 * kv * layers * head * 2
    blocks = trtllm_blocks(BUDGET, bpt)
    t = plan_trtllm(m, kv_budget_bytes=BUDGET)
    assert (t.token_capacity, t.request_bound) == (blocks * 32, trtllm_running(blocks, ctx))
    assert t.pools[0].units == blocks and t.pools[0].bytes_per_unit == bpt * 32
    assert t.tokens_per_window == ((ctx, blocks * 32),)
    assert t.log_line == (
        f"[TensorRT-LLM][INFO] [MemUsageChange] Allocated {blocks * bpt * 32 / GIB:.2f} GiB for max "
        f"tokens in paged KV cache ({blocks * 32})."
    )


def test_gpt_oss_120b_hybrid_swa_in_sglang_single_pool_in_trtllm():
    c = _cfg("gpt-oss-120b")
    types_ = c["layer_types"]
    n_swa, n_full = types_.count("sliding_attention"), types_.count("full_attention")
    kv, head, ctx, window = c["num_key_value_heads"], c["head_dim"], c["max_position_embeddings"], c["sliding_window"]
    m = _model("gpt-oss-120b")
    # SGLang: GptOssForCausalLM is in SWA_SINK_ARCHS -> HybridSWAPoolConfigurator
    per = kv * (head + head) * 2
    cell = per * n_full + 0.8 * (per * n_swa)  # _recompute_cell_size, swa_full_tokens_ratio 0.8
    full = int(BUDGET // cell) // 1 * 1
    swa = int(full * 0.8) // 1 * 1
    s = plan_sglang(m, kv_budget_bytes=BUDGET)
    assert (s.token_capacity, s.request_bound) == (full, sglang_running(full, ctx))
    assert {p.name: p.units for p in s.pools} == {
        "full k_buffer": full,
        "full v_buffer": full,
        "swa k_buffer": swa,
        "swa v_buffer": swa,
    }
    assert f"Use sliding window memory pool. full_layer_tokens={full}, swa_layer_tokens={swa}" in s.log_lines
    assert swa > window + 1  # validate_swa_pool_size holds
    # TRT-LLM: max_attention_window unset -> one window of max_seq_len over all 36 layers
    bpt = 2 * kv * (n_swa + n_full) * head * 2
    blocks = trtllm_blocks(BUDGET, bpt)
    t = plan_trtllm(m, kv_budget_bytes=BUDGET)
    assert (t.token_capacity, t.request_bound) == (blocks * 32, trtllm_running(blocks, ctx))
    assert len([p for p in t.pools if p.name == "primary pool"]) == 1


def test_gemma_3_27b_all_full_attention_in_both():
    c = _cfg("gemma-3-27b")
    layers, kv, head, ctx = (
        c["num_hidden_layers"],
        c["num_key_value_heads"],
        c["head_dim"],
        c["max_position_embeddings"],
    )
    m = _model("gemma-3-27b")
    # SGLang: model_overrides/gemma2_gemma3.py forces disable_hybrid_swa_memory -> DefaultPoolConfigurator over
    # all 62 layers, sliding ones included.
    cell = kv * (head + head) * layers * 2
    tokens = BUDGET // cell
    s = plan_sglang(m, kv_budget_bytes=BUDGET)
    assert (s.token_capacity, s.request_bound) == (tokens, sglang_running(tokens, ctx))
    assert [p.name for p in s.pools] == ["k_buffer", "v_buffer"]
    assert any("disable_hybrid_swa_memory" in d for d in s.derivation)
    bpt = 2 * kv * layers * head * 2
    blocks = trtllm_blocks(BUDGET, bpt)
    t = plan_trtllm(m, kv_budget_bytes=BUDGET)
    # 131,072-token requests do not fit 60 GiB of all-full layers: vswa.py validate_and_adjust_attention_windows
    # cuts the window (and max_seq_len) to get_max_atten_window_upper_bound = blocks x 32, so one request fits.
    assert blocks * 32 < ctx
    assert (t.token_capacity, t.max_model_len, t.request_bound) == (blocks * 32, blocks * 32, 1)
    assert f"[TensorRT-LLM][WARNING] Adjusted max_seq_len to {blocks * 32}" in t.log_lines
    # a shorter max_seq_len (kvviz's max_model_len knob)
    t8 = plan_trtllm(m, Options(max_model_len=8192), kv_budget_bytes=BUDGET)
    assert t8.request_bound == min(2048, blocks // (8192 // 32))
    s8 = plan_sglang(m, Options(max_model_len=8192), kv_budget_bytes=BUDGET)
    assert s8.request_bound == sglang_running(tokens, 8192)


def test_llama_4_scout_chunked_layers_as_swa_in_sglang():
    c = _cfg("llama-4-scout")
    layers, kv, head = c["num_hidden_layers"], c["num_key_value_heads"], c["head_dim"]
    ctx, chunk = c["max_position_embeddings"], c["attention_chunk_size"]
    m = _model("llama-4-scout")
    # configs/model_config.py get_hybrid_layer_ids, Llama4ForConditionalGeneration: swa = (i + 1) % 4 != 0
    n_swa = sum(1 for i in range(layers) if (i + 1) % 4 != 0)
    n_full = layers - n_swa
    per = kv * (head + head) * 2
    cell = per * n_full + 0.8 * (per * n_swa)
    full = int(BUDGET // cell)
    swa = int(full * 0.8)
    s = plan_sglang(m, kv_budget_bytes=BUDGET)
    assert (s.token_capacity, s.request_bound) == (full, sglang_running(full, ctx))
    assert s.request_bound == 2048  # 10M context: the estimate clamps to 2048
    assert {p.name: p.units for p in s.pools}["swa k_buffer"] == swa
    assert swa > chunk + 1
    # the declared chunked layers are SGLang's SWA layers
    declared = [a.layer for a in m.reader.caches(m, Options()) if a.attention_chunk_size]
    assert declared == [i for i in range(layers) if (i + 1) % 4 != 0]
    bpt = 2 * kv * layers * head * 2
    blocks = trtllm_blocks(BUDGET, bpt)
    t = plan_trtllm(m, kv_budget_bytes=BUDGET)
    assert (t.token_capacity, t.request_bound) == (blocks * 32, trtllm_running(blocks, ctx))


def test_qwen3_next_mamba_pool_carved_first_in_sglang():
    c = _cfg("qwen3-next-80b-a3b")
    layers, interval = c["num_hidden_layers"], c["full_attention_interval"]
    n_full = sum(1 for i in range(layers) if (i + 1) % interval == 0)  # configs/qwen3_next.py layers_block_type
    n_lin = layers - n_full
    kv, head, ctx = c["num_key_value_heads"], c["head_dim"], c["max_position_embeddings"]
    kh, vh = c["linear_num_key_heads"], c["linear_num_value_heads"]
    kd, vd, kernel = c["linear_key_head_dim"], c["linear_value_head_dim"], c["linear_conv_kernel_dim"]
    m = _model("qwen3-next-80b-a3b")
    # configs/mamba_utils.py Mamba2StateShape.create: conv (key_dim x 2 + value_dim, kernel - 1), temporal
    # (v heads, v dim, k dim); mamba2_state_dtype: conv bf16, SSM float32 by default.
    conv_dim = kd * kh * 2 + vd * vh
    conv = conv_dim * (kernel - 1) * 2
    ssm = vh * vd * kd * 4
    per_req = (conv + ssm) * n_lin
    # kv_cache_configurator.py _handle_max_mamba_cache (ratio 0.9) then _profile_available_bytes' int(rest x 2**30)
    rest = BUDGET / GIB
    mamba_bytes = rest * 0.9 / (1 + 0.9) * GIB
    size = int((mamba_bytes - per_req) // per_req)
    avail = int((rest - (size + 1) * per_req / GIB) * GIB)
    cell = kv * (head + head) * n_full * 2  # DefaultPoolConfigurator over full_attention_layer_ids
    tokens = avail // cell
    # _calculate_mamba_ratio: 3 + 2 tracking slots (extra_buffer strategy with the overlap schedule)
    s = plan_sglang(m, kv_budget_bytes=BUDGET)
    assert (s.token_capacity, s.request_bound) == (tokens, sglang_running(tokens, ctx, size // 5))
    assert s.request_bound == size // 5  # bound by the state slots, not the tokens
    pools = {p.name: p for p in s.pools}
    assert pools["mamba temporal_state"].units == size and pools["mamba temporal_state"].reserved_units == 1
    assert pools["mamba temporal_state"].bytes_per_unit == ssm * n_lin
    assert s.log_lines[0].startswith(f"Mamba Cache is allocated. max_mamba_cache_size: {size}, ")
    # bf16 SSM state (--mamba-ssm-dtype bfloat16) halves the state
    per16 = (conv + vh * vd * kd * 2) * n_lin
    size16 = int((mamba_bytes - per16) // per16)
    avail16 = int((rest - (size16 + 1) * per16 / GIB) * GIB)
    s16 = plan_sglang(m, Options(mamba_ssm_dtype="bfloat16"), kv_budget_bytes=BUDGET)
    assert (s16.token_capacity, s16.request_bound) == (
        avail16 // cell,
        sglang_running(avail16 // cell, ctx, size16 // 5),
    )
    # no radix cache: 1 slot per request (_calculate_mamba_ratio)
    assert plan_sglang(m, Options(prefix_caching=False), kv_budget_bytes=BUDGET).request_bound == sglang_running(
        tokens, ctx, size // 1
    )
    # no overlap schedule at page 1: 'auto' resolves to no_buffer (overrides._mamba_radix_cache_resolution): 3;
    # at page 64 to extra_buffer with 1 tracking slot without overlap: 3 + 1
    assert plan_sglang(m, Options(async_scheduling=False), kv_budget_bytes=BUDGET).request_bound == sglang_running(
        tokens, ctx, size // 3
    )
    paged = plan_sglang(m, Options(async_scheduling=False, block_size=64), kv_budget_bytes=BUDGET)
    assert (paged.token_capacity, paged.request_bound) == (
        avail // cell // 64 * 64,
        sglang_running(avail // cell // 64 * 64, ctx, size // 4),
    )
    # TRT-LLM's default (use_kv_cache_manager_v2 'auto' -> V2, MambaHybridCacheManagerV2): the states
    # (model dtype) of max_batch_size + 1 slots come out of the budget first; 2,049 slots of 36 layers'
    # states plus one attention block do not fit 60 GiB (_minimum_live_gpu_quota), so it refuses.
    bpt = 2 * kv * n_full * head * 2
    state_slot = (conv_dim * (kernel - 1) * 2 + vh * vd * kd * 2) * n_lin
    need = 2049 * state_slot + bpt * 32
    with pytest.raises(KvvizError, match=f"need at least {need} bytes"):
        plan_trtllm(m, kv_budget_bytes=BUDGET)
    # use_kv_cache_manager_v2=False + TRTLLM_USE_PY_MAMBA=1 (use_py_mamba): the legacy Mixed manager, whose
    # KV pool over the 12 attention layers gets the whole budget; the states are max_batch_size slots outside it.
    blocks = trtllm_blocks(BUDGET, bpt)
    t = plan_trtllm(m, kv_budget_bytes=BUDGET, use_py_mamba=True)
    assert (t.token_capacity, t.request_bound) == (blocks * 32, trtllm_running(blocks, ctx))
    states = {p.name: p for p in t.pools}
    assert (
        states["mamba ssm_states"].units == 2048
        and states["mamba ssm_states"].bytes_per_unit == vh * vd * kd * 2 * n_lin
    )
    # mamba_cache_manager/common.py _get_mamba_hybrid_pool_size: max_batch_size + 1 (a CUDA-graph padding slot)
    assert states["mamba ssm_states"].reserved_units == 1 and states["mamba ssm_states"].outside_budget
    assert t.kv_bytes == blocks * 32 * bpt


def test_trtllm_vswa_equal_shares_per_window():
    c = _cfg("gpt-oss-120b")
    types_ = c["layer_types"]
    kv, head, ctx, window = c["num_key_value_heads"], c["head_dim"], c["max_position_embeddings"], c["sliding_window"]
    m = _model("gpt-oss-120b")
    pattern = tuple(window if t == "sliding_attention" else ctx for t in types_)
    # vswa.py calculate_max_num_blocks_for_vswa: window -> layers (the pattern), each window size an equal
    # share of max_gpu_total_bytes (= the budget): int(budget x 1/2 / bytes per token of its layers // 32)
    n_swa, n_full = types_.count("sliding_attention"), types_.count("full_attention")
    swa_blocks = int(BUDGET * 0.5 / (2 * kv * head * 2 * n_swa) // 32)
    full_blocks = int(BUDGET * 0.5 / (2 * kv * head * 2 * n_full) // 32)
    t = plan_trtllm(m, kv_budget_bytes=BUDGET, max_attention_window=pattern)
    assert t.tokens_per_window == ((window, swa_blocks * 32), (ctx, full_blocks * 32))
    assert t.token_capacity == full_blocks * 32
    # GUARANTEED_NO_EVICT reserves getRemainingBlocksToCompletion(req, window) in each window's pool:
    # ceil(min(len, window + temporary) / 32), the temporary window (_set_temp_attention_window_inputs,
    # calculateTemporaryAttentionWindow) min(max_num_tokens 8192, max_seq_len - 1 - window) for the
    # sliding window and 0 for the full one
    swa_need = math.ceil(min(ctx, window + min(8192, ctx - 1 - window)) / 32)
    assert swa_need == (window + 8192) // 32
    assert t.request_bound == min(2048, swa_blocks // swa_need, full_blocks // (ctx // 32))
    # a sliding pool given 1% of the budget binds: its requests need their 8,192-token scratch too
    lean = plan_trtllm(m, kv_budget_bytes=BUDGET, max_attention_window=pattern, window_size_shares=(0.01, 0.99))
    lean_swa = int(BUDGET * 0.01 / (2 * kv * head * 2 * n_swa) // 32)
    lean_full = int(BUDGET * 0.99 / (2 * kv * head * 2 * n_full) // 32)
    assert lean_swa // swa_need < lean_full // (ctx // 32) < lean_swa // math.ceil(window / 32)
    assert lean.request_bound == min(2048, lean_swa // swa_need, lean_full // (ctx // 32))
    # a shorter max_num_tokens (--max-num-batched-tokens) shrinks the scratch
    short = plan_trtllm(
        m,
        Options(max_num_batched_tokens=2048),
        kv_budget_bytes=BUDGET,
        max_attention_window=pattern,
        window_size_shares=(0.01, 0.99),
    )
    assert short.request_bound == min(2048, lean_swa // math.ceil((window + 2048) / 32), lean_full // (ctx // 32))
    # shares given (TRTLLM_WINDOW_SIZE_SHARES)
    t2 = plan_trtllm(m, kv_budget_bytes=BUDGET, max_attention_window=pattern, window_size_shares=(0.25, 0.75))
    assert t2.tokens_per_window[1][1] == int(BUDGET * 0.75 / (2 * kv * head * 2 * n_full) // 32) * 32
    with pytest.raises(KvvizError, match="window_size_shares"):
        plan_trtllm(m, kv_budget_bytes=BUDGET, max_attention_window=pattern, window_size_shares=(0.5,))
    # a pool too small for one sequence of every window: adjust_window_sizes_for_vswa shrinks the larger
    # window to what the bytes left after the 128-token windows buy over the full layers
    small = 2 * GIB
    per_all, per_full = 2 * kv * head * 2 * (n_swa + n_full), 2 * kv * head * 2 * n_full
    left = small - window * per_all
    shrunk = window + left // per_full
    t3 = plan_trtllm(m, kv_budget_bytes=small, max_attention_window=pattern)
    assert any(f"-> [{window}, {shrunk}]" in d for d in t3.derivation)
    # ...and validate_and_adjust_attention_windows then cuts it to its own pool's tokens (equal shares)
    full_tokens = int(small * 0.5 / per_full // 32) * 32
    assert full_tokens < shrunk and t3.max_model_len == full_tokens


def test_deepseek_v3_mla():
    c = _cfg("deepseek-v3")
    layers, rank, rope, ctx = (
        c["num_hidden_layers"],
        c["kv_lora_rank"],
        c["qk_rope_head_dim"],
        c["max_position_embeddings"],
    )
    m = _model("deepseek-v3")
    # SGLang: calculate_mla_kv_cache_dim = kv_lora_rank + qk_rope_head_dim (not DSA) x layers x 2 B
    cell = (rank + rope) * layers * 2
    tokens = BUDGET // cell
    s = plan_sglang(m, kv_budget_bytes=BUDGET)
    assert (s.token_capacity, s.request_bound) == (tokens, sglang_running(tokens, ctx))
    assert [p.name for p in s.pools] == ["kv_buffer"]
    # TRT-LLM: SELFKONLY, kv_factor 1, one head of kv_lora_rank + qk_rope_head_dim
    bpt = 1 * layers * (rank + rope) * 2
    blocks = trtllm_blocks(BUDGET, bpt)
    t = plan_trtllm(m, kv_budget_bytes=BUDGET)
    assert (t.token_capacity, t.request_bound) == (blocks * 32, trtllm_running(blocks, ctx))


def test_page_size_and_fp8_knobs():
    c = _cfg("llama-3.1-8b")
    layers, kv, head = c["num_hidden_layers"], c["num_key_value_heads"], c["hidden_size"] // c["num_attention_heads"]
    m = _model("llama-3.1-8b")
    budget = 7 * GIB + 12345
    cell = kv * (head + head) * layers * 1  # fp8: 1 byte
    s = plan_sglang(m, Options(kv_dtype="fp8", block_size=64), kv_budget_bytes=budget)
    assert s.token_capacity == budget // cell // 64 * 64
    assert s.pools[0].reserved_units == 64
    t = plan_trtllm(m, Options(block_size=64), kv_budget_bytes=budget)
    assert t.pools[0].units == budget // (2 * kv * layers * head * 2) // 64


def test_sglang_swa_pool_too_small_is_one_line():
    m = _model("llama-4-scout")
    with pytest.raises(KvvizError, match="SWA pool"):
        plan_sglang(m, kv_budget_bytes=GIB // 2)


def test_results_are_frozen_and_describe():
    m = _model("llama-3.1-8b")
    plans = compare_engines(m, kv_budget_bytes=BUDGET)
    assert tuple(p.engine for p in plans) == ENGINES
    for p in plans:
        with pytest.raises(dataclasses.FrozenInstanceError):
            p.token_capacity = 1
        text = p.describe()
        assert p.log_line in text and str(f"{p.token_capacity:,}") in text
        assert p.to_json()["token_capacity"] == p.token_capacity
    v = plan_vllm(m, kv_budget_bytes=BUDGET)
    assert v.log_line.startswith("GPU KV cache size: ")
    with pytest.raises(KvvizError, match="engine="):
        plan_engine("tgi", m, kv_budget_bytes=BUDGET)
    with pytest.raises(KvvizError, match="kv_budget_bytes"):
        plan_sglang(m, kv_budget_bytes=0)


def test_deepseek_v4_goes_to_trtllm_dsv4():
    # DeepseekV4CacheManager's own pools (derived by hand in tests/test_engines_trtllm_dsv4.py)
    p = plan_engine("trtllm", load("deepseek-v4-flash"), kv_budget_bytes=BUDGET)
    assert {"swa kv", "c4 compressed kv", "c4 indexer k", "c128 compressed kv"} <= {x.name for x in p.pools}


def sglang_dsv4_by_hand(c: dict, budget: int) -> tuple[int, int, int, int, float]:
    """(max_total_num_tokens, swa tokens, max_running_requests, c128 state bytes, bytes per full token)
    of SGLang 0.5.23 for a DeepSeek V4 config.json at `budget`, on an H200 with SGLang's defaults for
    the model, transcribed from
    model_executor/pool_configurator.py DSV4PoolConfigurator (calculate_pool_sizes and the pricing
    methods it calls), kernels/ops/attention/dsv4/kv_layout.py KVLayout.V4.page_bytes and
    mem_cache/deepseek_v4_memory_pool.py get_dsv4_indexer_bytes_per_token / get_compress_state_ring_size."""
    page, swa_ratio, max_running = 256, 0.1, 256  # model_overrides/deepseek_v4.py, deepseek_v4_hook.py
    ratios = c["compress_ratios"][: c["num_hidden_layers"]]  # the stage: hidden layers, no MTP (no spec decoding)
    layers, n4, n128 = len(ratios), ratios.count(4), ratios.count(128)
    head = (c["head_dim"] - c["qk_rope_head_dim"]) + c["qk_rope_head_dim"]  # attn_head_dim = nope + rope

    def v4_per_token(slots):  # page_bytes(slots) / slots: 584 B rows, page padded to 576 B multiples
        return math.ceil(slots * (576 + 8) / 576) * 576 / slots

    idx = c["index_head_dim"] + c["index_head_dim"] // 128 * 4  # fp8 indexer estimate (not HIP)
    c4_state = 2 * 2 * head * 4 + 2 * 2 * c["index_head_dim"] * 4  # fp32 main + indexer compressor states
    per_swa = v4_per_token(page) * layers + 8 / page * c4_state * n4  # c4 ring 8 rows per SWA page
    per_full = (
        swa_ratio * per_swa + n4 * (v4_per_token(page // 4) / 4 + idx / 4) + n128 * v4_per_token(page // 128) / 128
    )
    rows = math.ceil(((max_running + 1) * 128 + 128 + 1) / 128) * 128  # c128 ring 128 rows per request slot
    c128_fixed = rows * 2 * head * 4 * n128
    full = int((budget - c128_fixed) / per_full) // page * page
    swa = int(full * swa_ratio) // page * page
    return full, swa, min(max_running, full // 2), c128_fixed, per_full


@pytest.mark.parametrize("name", ["deepseek-v4-pro", "deepseek-v4-flash"])
def test_deepseek_v4_sglang_own_pools_by_hand(name):
    c = _cfg(name)
    budget = 40 * GIB
    full, swa, running, c128_fixed, per_full = sglang_dsv4_by_hand(c, budget)
    plan = plan_engine("sglang", load(name), kv_budget_bytes=budget)
    units = {p.name: p.units for p in plan.pools}
    assert (plan.token_capacity, units["swa_kv"], plan.request_bound) == (full, swa, running)
    assert (units["c4 kv"], units["c128 kv"], units["c4 compress state"]) == (full // 4, full // 128, swa // 256 * 8)
    assert (
        plan.log_line.startswith(f"max_total_num_tokens={full}, ")
        and f"max_running_requests={running}," in plan.log_line
    )
    assert f"DSV4 pool sizes: full={full}, swa={swa}, c4={full // 4}, c128={full // 128}" in plan.log_lines[-2]
    assert 0 <= plan.waste_bytes < budget // 100  # the pools take the budget, the floors aside
    with pytest.raises(KvvizError, match="block_size=64: SGLang 0.5.23 forces page_size 256"):
        plan_engine("sglang", load(name), Options(block_size=64), kv_budget_bytes=budget)
    # 3,000 full tokens after the c128 states: 2,816 page-aligned, an SWA pool of 256 <= window 128 + page 256
    with pytest.raises(KvvizError, match=r"SWA pool \(256 tokens\) cannot hold even one request"):
        plan_engine("sglang", load(name), kv_budget_bytes=c128_fixed + int(3000 * per_full))
    with pytest.raises(KvvizError, match="Not enough memory"):  # the c128 state pool takes it all
        plan_engine("sglang", load(name), kv_budget_bytes=c128_fixed + 100)


# ---------------------------------------------------------------------------------------------
# The engines' own functions, compiled from their source.
# TensorRT-LLM's are not vendored into the repo: the reference index they were read from keeps its
# code out of commits. tests/data/trtllm/PROVENANCE.md names each function, path and commit; a
# local extract (KVVIZ_TRTLLM_SRC) runs here where present.
# ---------------------------------------------------------------------------------------------


def _sglang_root() -> Path | None:
    root = source_root("sglang")
    if root and (root / "sglang" / "srt" / "model_executor" / "pool_configurator.py").is_file():
        return root / "sglang" / "srt"
    return None


def _trtllm_root() -> Path | None:
    candidates = [source_root("trtllm")]
    import importlib.util

    try:
        spec = importlib.util.find_spec("tensorrt_llm")  # locates, does not import
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.origin:
        candidates.append(str(Path(spec.origin).parent.parent))
    for root in candidates:
        if root and (Path(root) / "tensorrt_llm").is_dir():
            return Path(root) / "tensorrt_llm"
    return None


def engine_code(path: Path, qualname: str, env: dict):
    """One function or class of an engine's module, compiled alone into `env` (its module's other
    names are stand-ins the caller gives); the engine's own source lines run."""
    tree = ast.parse(path.read_text(), filename=str(path))
    body = tree.body
    owner, _, name = qualname.rpartition(".")
    if owner:
        body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == owner).body
    node = next(n for n in body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == name)
    if isinstance(node, ast.FunctionDef):  # @staticmethod / @property: the plain function
        node.decorator_list = []
    code = compile(
        ast.Module(body=[node], type_ignores=[]),
        str(path),
        "exec",
        flags=__future__.annotations.compiler_flag,
        dont_inherit=True,
    )
    exec(code, env)
    return env[name]


def engine_constant(path: Path, name: str):
    tree = ast.parse(path.read_text())
    for n in tree.body:
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in n.targets):
            return ast.literal_eval(n.value)
    raise KeyError(name)


def _ns(**kw):
    return types.SimpleNamespace(**kw)


class _Log:
    def info(self, *a, **k):
        pass

    warning = debug = info


@pytest.fixture
def sgl():
    root = _sglang_root()
    if root is None:  # .ci/run fetches the wheel and sets KVVIZ_REQUIRE_SGLANG_SRC: there it must run
        absent("sglang", "sglang/srt/model_executor/pool_configurator.py")
    return root


def test_sglang_default_pool_configurator_runs_as_kvviz_sizes(sgl, monkeypatch):
    from typing import Optional

    import torch

    pc = sgl / "model_executor" / "pool_configurator.py"
    env = {"dataclass": dataclasses.dataclass, "Optional": Optional}
    MemoryPoolConfig = engine_code(pc, "MemoryPoolConfig", env)
    kvc_path = sgl / "mem_cache" / "kv_cache_configurator.py"
    calc_mla = engine_code(kvc_path, "calculate_mla_kv_cache_dim", {"is_deepseek_dsa": lambda hf: False})
    # the function imports two helpers at call time: give it those modules
    for mod, attrs in (
        ("sglang.srt.layers.cp.utils", {"get_glm_dsa_layer_split_effective_num_layers": lambda kvc, n: n}),
        ("sglang.srt.mem_cache.kv_cache_configurator", {"calculate_mla_kv_cache_dim": calc_mla}),
    ):
        parts = mod.split(".")
        for i in range(1, len(parts) + 1):
            name = ".".join(parts[:i])
            if name not in sys.modules:
                monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
        for k, v in attrs.items():
            monkeypatch.setattr(sys.modules[mod], k, v, raising=False)
    env = {
        "torch": torch,
        "envs": _ns(SGLANG_NPU_ENABLE_SPARSE_KV_OFFLOAD=_ns(get=lambda: False)),
        "get_parallel": lambda: _ns(attn_tp_size=1, attn_dcp_size=1),
        "is_deepseek_dsa": lambda hf: False,
        "is_minimax_sparse": lambda hf: False,
        "is_float4_e2m1fn_x2": lambda dt: False,
        "MemoryPoolConfig": MemoryPoolConfig,
    }
    compute_cell = engine_code(pc, "DefaultPoolConfigurator._compute_cell_size", env)
    calculate = engine_code(pc, "DefaultPoolConfigurator.calculate_pool_sizes", env)

    def sizes(name, model_config, num_layers, mla):
        self = _ns(
            kv_cache_dtype_str="auto",
            _compute_qsa_cell_size=lambda **k: 0,
            _fixed_overhead_bytes=0,
            _zero_kv_max_tokens=None,
        )
        kvc = _ns(
            model_config=model_config,
            kv_cache_dtype=torch.bfloat16,
            use_mla_backend=mla,
            server_args=_ns(enable_hisparse=False),
        )
        self._cell_size = compute_cell(self, kvc, num_layers)
        return calculate(self, BUDGET, 1).max_total_num_tokens

    for name in ("llama-3.1-8b", "gemma-3-27b"):
        c = _cfg(name)
        head = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
        mc = _ns(
            hf_config=None,
            head_dim=head,
            v_head_dim=head,
            get_num_kv_heads=lambda tp, dcp=1, c=c: c["num_key_value_heads"] // tp,
        )
        assert (
            sizes(name, mc, c["num_hidden_layers"], False)
            == plan_sglang(_model(name), kv_budget_bytes=BUDGET).token_capacity
        )
    c = _cfg("deepseek-v3")
    mc = _ns(hf_config=None, kv_lora_rank=c["kv_lora_rank"], qk_rope_head_dim=c["qk_rope_head_dim"])
    assert (
        sizes("deepseek-v3", mc, c["num_hidden_layers"], True)
        == plan_sglang(_model("deepseek-v3"), kv_budget_bytes=BUDGET).token_capacity
    )


def test_sglang_hybrid_swa_configurator_runs_as_kvviz_sizes(sgl):
    from typing import Optional

    pc = sgl / "model_executor" / "pool_configurator.py"
    env = {"dataclass": dataclasses.dataclass, "Optional": Optional, "logger": _Log(), "int": int}
    env["MemoryPoolConfig"] = engine_code(pc, "MemoryPoolConfig", env)
    methods = {
        n: engine_code(pc, f"HybridSWAPoolConfigurator.{n}", env)
        for n in (
            "_full_cell_bytes",
            "_swa_cell_bytes",
            "_recompute_cell_size",
            "_solve_pool_sizes",
            "_make_pool_config",
            "calculate_pool_sizes",
        )
    }
    methods["validate_swa_pool_size"] = staticmethod(
        engine_code(pc, "MemoryPoolConfigurator.validate_swa_pool_size", env)
    )
    Configurator = type("HybridSWAPoolConfigurator", (), methods)
    for name in ("gpt-oss-120b", "llama-4-scout"):
        c = _cfg(name)
        layers = c["num_hidden_layers"]
        if name == "gpt-oss-120b":
            swa_ids = [i for i, t in enumerate(c["layer_types"]) if t == "sliding_attention"]
            window = c["sliding_window"]
        else:
            swa_ids = [i for i in range(layers) if (i + 1) % 4 != 0]
            window = c["attention_chunk_size"]
        per = c["num_key_value_heads"] * (c["head_dim"] * 2) * 2  # HybridSWAPoolConfigurator.__init__, bf16
        self = Configurator()
        for k, v in dict(
            _full_layers_num=layers - len(swa_ids),
            _swa_layers_num=len(swa_ids),
            _swa_full_tokens_ratio=0.8,
            _sliding_window_size=window,
            _page_size=1,
            _enable_unified_memory=False,
            _full_per_token=per,
            _swa_per_token=per,
            _draft_full_layers_num=0,
            _draft_swa_layers_num=0,
            _draft_swa_full_layers_num=0,
            _draft_cell_size=0,
            _fused_full_entry=None,
            _fused_swa_entry=None,
        ).items():
            setattr(self, k, v)
        self._recompute_cell_size()
        cfg = self.calculate_pool_sizes(BUDGET, 1)
        plan = plan_sglang(_model(name), kv_budget_bytes=BUDGET)
        units = {p.name: p.units for p in plan.pools}
        assert (cfg.full_max_total_num_tokens, cfg.swa_max_total_num_tokens) == (
            units["full k_buffer"],
            units["swa k_buffer"],
        )
        assert cfg.max_total_num_tokens == plan.token_capacity


def test_sglang_mamba_sizing_and_request_cap_run_as_kvviz_sizes(sgl):
    from abc import ABC
    from typing import List, Optional

    import numpy as np
    import torch

    mu = sgl / "configs" / "mamba_utils.py"
    envs = _ns(
        SGLANG_MAMBA_CONV_DTYPE=_ns(get=lambda: None),
        SGLANG_MAMBA_SSM_DTYPE=_ns(get=lambda: None),
        SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK=_ns(get=lambda: False),
    )
    env = {
        "dataclass": dataclasses.dataclass,
        "field": dataclasses.field,
        "ABC": ABC,
        "List": List,
        "Optional": Optional,
        "np": np,
        "torch": torch,
        "envs": envs,
        "logger": _Log(),
    }
    env["divide"] = engine_code(sgl / "distributed" / "utils.py", "divide", env)
    env["ensure_divisibility"] = engine_code(sgl / "distributed" / "utils.py", "ensure_divisibility", env)
    for qual in (
        "extra_groups_for_head_shards",
        "Mamba2StateDType",
        "mamba2_state_dtype",
        "BaseLinearStateParams",
        "Mamba2StateShape",
        "Mamba2CacheParams",
    ):
        engine_code(mu, qual, env)
    env.update(_is_cpu=False, linear_attn_tp_size=lambda: 1)
    cache_params = engine_code(sgl / "configs" / "qwen3_next.py", "Qwen3NextConfig.mamba2_cache_params", env)
    c = _cfg("qwen3-next-80b-a3b")
    linear_ids = [i for i in range(c["num_hidden_layers"]) if (i + 1) % c["full_attention_interval"] != 0]
    params = cache_params(
        _ns(
            linear_key_head_dim=c["linear_key_head_dim"],
            linear_num_key_heads=c["linear_num_key_heads"],
            linear_value_head_dim=c["linear_value_head_dim"],
            linear_num_value_heads=c["linear_num_value_heads"],
            linear_conv_kernel_dim=c["linear_conv_kernel_dim"],
            linear_layer_ids=linear_ids,
        )
    )
    plan = plan_sglang(_model("qwen3-next-80b-a3b"), kv_budget_bytes=BUDGET)
    pools = {p.name: p for p in plan.pools}
    assert (
        params.mamba_cache_per_req
        == pools["mamba conv_state"].bytes_per_unit + pools["mamba temporal_state"].bytes_per_unit
    )

    # _handle_max_mamba_cache and resolve_max_num_reqs / _calculate_mamba_ratio with SGLang's defaults
    kvc_path = sgl / "mem_cache" / "kv_cache_configurator.py"
    schedule = _ns(
        max_mamba_cache_size=None,
        mamba_full_memory_ratio=0.9,
        max_running_requests=None,
        disable_overlap_schedule=False,
    )

    def override(_what, **kw):
        for k, v in kw.items():
            setattr(schedule, k, v)

    mamba = _ns(
        enable_linear_replayssm_spec=False, enable_mamba_extra_buffer=True, enable_mamba_extra_buffer_lazy=False
    )
    env2 = {
        "get_schedule": lambda: schedule,
        "get_memory": lambda: _ns(disable_radix_cache=False),
        "get_exec": lambda: _ns(mamba=mamba),
        "get_context": lambda: _ns(override=override),
        "get_spec": lambda: _ns(),
        "_pd_prefill_skips_mamba_spec_state": lambda: False,
        "envs": envs,
        "logger": _Log(),
        "max": max,
        "min": min,
        "int": int,
    }
    for n in (
        "MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO",
        "MAMBA_CACHE_BASE_RATIO_DROP_ON_SKIP",
        "MAMBA_CACHE_V2_ADDITIONAL_RATIO_NO_BUFFER",
    ):
        env2[n] = engine_constant(kvc_path, n)
    env2["get_mamba_tracking_slots"] = engine_code(
        sgl / "mem_cache" / "allocation_sizing.py", "get_mamba_tracking_slots", env2
    )
    handle = engine_code(kvc_path, "KVCacheConfigurator._handle_max_mamba_cache", env2)
    ratio = engine_code(kvc_path, "KVCacheConfigurator._calculate_mamba_ratio", env2)
    resolve = engine_code(kvc_path, "KVCacheConfigurator.resolve_max_num_reqs", env2)
    kvc = _ns(
        mambaish_config=_ns(mamba2_cache_params=params),
        pp_size=1,
        fused_entry_bytes=lambda name: None,
        spec_algorithm=_ns(is_none=lambda: True),
        hybrid_gdn_config=object(),
        hybrid_kda_config=None,
        extra_mamba_cache_bytes_per_req=0,
        attn_dp_size=1,
        model_config=_ns(context_len=c["max_position_embeddings"]),
    )
    kvc._calculate_mamba_ratio = lambda: ratio(kvc)
    rest = handle(kvc, BUDGET / GIB)
    available = int(rest * (1 << 30))  # _profile_available_bytes
    assert schedule.max_mamba_cache_size == pools["mamba temporal_state"].units
    cell = c["num_key_value_heads"] * c["head_dim"] * 2 * 2 * (c["num_hidden_layers"] - len(linear_ids))
    assert available // cell == plan.token_capacity
    assert resolve(kvc, plan.token_capacity) == plan.request_bound
    # a full-attention model: no mamba cap
    llama = plan_sglang(_model("llama-3.1-8b"), kv_budget_bytes=BUDGET)
    kvc2 = _ns(
        mambaish_config=None,
        attn_dp_size=1,
        model_config=_ns(context_len=_cfg("llama-3.1-8b")["max_position_embeddings"]),
    )
    assert resolve(kvc2, llama.token_capacity) == llama.request_bound


def test_trtllm_calculate_max_num_blocks_runs_as_kvviz_sizes():
    root = _trtllm_root()
    # KVCacheManager: resource_manager/kv_cache_manager.py (the commit PROVENANCE.md cites), resource_manager.py before
    found = [
        p
        for p in (
            ("resource_manager", "kv_cache_manager.py"),
            ("resource_manager.py",),
        )
        if root is not None and root.joinpath("_torch", "pyexecutor", *p).is_file()
    ]
    if not found:  # the PyPI package is a stub: no CI source (tests/engine_sources.py)
        absent("trtllm", "tensorrt_llm/_torch/pyexecutor/resource_manager/kv_cache_manager.py")
    rm = root.joinpath("_torch", "pyexecutor", *found[0])
    DataType = _ns(FP8="fp8", HALF="fp16", BF16="bf16", FLOAT="fp32", NVFP4="nvfp4")
    size = {"fp8": 1, "fp16": 2, "bf16": 2, "fp32": 4}
    env = {
        "DataType": DataType,
        "get_size_in_bytes": lambda n, dt: n * size[dt],
        "logger": _Log(),
        "torch": _ns(cuda=_ns(mem_get_info=lambda: (140 * GIB, 141 * GIB))),
        "min": min,
        "int": int,
    }
    per_token = engine_code(rm, "KVCacheManager.get_cache_bytes_per_token", env)
    max_blocks = engine_code(rm, "KVCacheManager.calculate_max_num_blocks", env)
    util = root / "_torch" / "pyexecutor" / "_util.py"
    tokens_for_budget = engine_code(util, "CacheCost.tokens_for_budget", {"max": max})
    for name in ("llama-3.1-8b", "gpt-oss-120b", "qwen3-next-80b-a3b", "deepseek-v3"):
        c = _cfg(name)
        m = _model(name)
        if "kv_lora_rank" in c:
            kv_factor, heads, head = 1, [1] * c["num_hidden_layers"], c["kv_lora_rank"] + c["qk_rope_head_dim"]
        elif "full_attention_interval" in c:
            n = sum(1 for i in range(c["num_hidden_layers"]) if (i + 1) % c["full_attention_interval"] == 0)
            kv_factor, heads, head = 2, [c["num_key_value_heads"]] * n, c["head_dim"]
        else:
            kv_factor, heads = 2, [c["num_key_value_heads"]] * c["num_hidden_layers"]
            head = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
        mgr = _ns(kv_factor=kv_factor, num_kv_heads_per_layer=heads, head_dim=head, dtype="bf16")
        mgr.get_cache_bytes_per_token = lambda mgr=mgr: per_token(mgr)
        max_tokens = tokens_for_budget(_ns(slope=per_token(mgr), intercept=0), BUDGET)
        blocks, _ = max_blocks(
            mgr,
            _ns(free_gpu_memory_fraction=0.9, max_tokens=max_tokens, host_cache_size=None),
            head,
            32,
            _ns(world_size=1),
            "bf16",
            kv_factor,
        )
        # a hybrid model's KVCacheManager over its attention layers: the legacy Mixed manager (use_py_mamba)
        plan = plan_trtllm(m, kv_budget_bytes=BUDGET, use_py_mamba="full_attention_interval" in c)
        assert blocks == plan.pools[0].units and blocks * 32 == plan.token_capacity, name


def test_trtllm_vswa_functions_run_as_kvviz_sizes():
    root = _trtllm_root()
    vswa = None if root is None else root / "_torch" / "pyexecutor" / "resource_manager" / "vswa.py"
    if vswa is None or not vswa.is_file():
        absent("trtllm", "tensorrt_llm/_torch/pyexecutor/resource_manager/vswa.py")
    import copy
    from collections import defaultdict
    from typing import Dict, List, Set, Tuple

    DataType = _ns(NVFP4="nvfp4", FP8="fp8")
    env = {
        "copy": copy,
        "defaultdict": defaultdict,
        "Dict": Dict,
        "List": List,
        "Set": Set,
        "Tuple": Tuple,
        "DataType": DataType,
        "KvCacheConfig": object,
        "ModelConfigCpp": object,
        "logger": _Log(),
        "get_size_in_bytes": lambda n, dt: n * {"bf16": 2, "fp8": 1}[dt],
        "os": _ns(getenv=lambda k: None),
    }
    for qual in ("get_window_size_to_layers", "adjust_window_sizes_for_vswa"):
        engine_code(vswa, qual, env)
    calc = engine_code(vswa, "calculate_max_num_blocks_for_vswa", env)
    sys_torch = types.ModuleType("torch")
    sys_torch.cuda = _ns(mem_get_info=lambda: (140 * GIB, 141 * GIB))
    c = _cfg("gpt-oss-120b")
    pattern = [
        c["sliding_window"] if t == "sliding_attention" else c["max_position_embeddings"] for t in c["layer_types"]
    ]
    m = _model("gpt-oss-120b")
    old = sys.modules.get("torch")
    sys.modules["torch"] = sys_torch  # the function imports torch only for mem_get_info (unused: max_gpu_total_bytes)
    try:
        for budget in (BUDGET, 2 * GIB):
            cfg = _ns(free_gpu_memory_fraction=0.9, max_gpu_total_bytes=budget, host_cache_size=None, max_tokens=None)
            blocks, windows, primary, _ = calc(
                kv_cache_config=cfg,
                max_attention_window_vec=pattern,
                num_kv_heads_per_layer=[c["num_key_value_heads"]] * len(pattern),
                num_local_layers=len(pattern),
                kv_factor=2,
                dtype="bf16",
                tokens_per_block=32,
                is_vswa=True,
                mapping=None,
                model_config=_ns(layer_types=c["layer_types"], head_size=c["head_dim"]),
                calculate_scaling_factor_size_bytes_fn=None,
            )
            plan = plan_trtllm(m, kv_budget_bytes=budget, max_attention_window=tuple(pattern))
            pools = {p.window: p.units for p in plan.pools}
            assert primary == budget
            assert sorted(b for b, _ in blocks.values()) == sorted(pools.values()), budget
    finally:
        if old is None:
            del sys.modules["torch"]
        else:
            sys.modules["torch"] = old


# ---------------------------------------------------------------------------------------------
# Byte maps, unified memory, the comparison rows and the CLI.
# ---------------------------------------------------------------------------------------------


def test_sglang_unified_memory_one_buffer_from_both_ends():
    c = _cfg("gpt-oss-120b")
    types_ = c["layer_types"]
    n_swa, n_full = types_.count("sliding_attention"), types_.count("full_attention")
    per = c["num_key_value_heads"] * c["head_dim"] * 2 * 2
    # pool_configurator.py _max_unified_full_tokens (page 1, no draft): the largest full with
    # full x full_bpt + int(full x 0.8) x swa_bpt <= available
    full_bpt, swa_bpt = per * n_full, per * n_swa
    full = BUDGET // full_bpt
    while full * full_bpt + int(full * 0.8) * swa_bpt > BUDGET:
        full -= 1
    from kvviz.engines import EngineKnobs
    from kvviz.engines.maps import byte_map

    p = plan_engine("sglang", _model("gpt-oss-120b"), kv_budget_bytes=BUDGET, knobs=EngineKnobs(unified_memory=True))
    assert p.token_capacity == full
    m = byte_map(p)
    assert m.arrangement == "unified" and len(m.buffers) == 1
    swa_r, full_r = m.buffers[0].regions
    assert swa_r.start == 0 and swa_r.size == int(full * 0.8) * swa_bpt  # grows up from byte 0
    assert full_r.end == m.buffers[0].size and full_r.size == full * full_bpt  # grows down from the top
    with pytest.raises(KvvizError, match="unified_memory"):
        plan_engine("sglang", _model("llama-3.1-8b"), kv_budget_bytes=BUDGET, knobs=EngineKnobs(unified_memory=True))


def test_byte_maps_have_each_engines_shape():
    from kvviz.engines.maps import byte_map

    c = _cfg("llama-3.1-8b")
    layers, kv, head = c["num_hidden_layers"], c["num_key_value_heads"], c["hidden_size"] // c["num_attention_heads"]
    m = _model("llama-3.1-8b")
    s = byte_map(plan_sglang(m, kv_budget_bytes=BUDGET))
    # MHATokenToKVPool: one K and one V buffer per layer of (size + page_size) rows, the padding row first
    tokens = BUDGET // (kv * head * 2 * layers * 2)
    assert len(s.buffers) == 2 * layers
    assert all(b.size == (tokens + 1) * kv * head * 2 for b in s.buffers)
    assert s.buffers[0].regions[0].kind == "pad" and s.buffers[0].regions[0].size == kv * head * 2
    t = byte_map(plan_trtllm(m, kv_budget_bytes=BUDGET))
    pool, block = t.buffers
    # a block holds every layer: [layer][K|V][32 tokens x heads x head_dim]
    assert block.zoom and len(block.regions) == 2 * layers and block.size == 2 * kv * layers * head * 2 * 32
    assert block.regions[1].start == kv * head * 2 * 32 and block.regions[1].kind == "v"
    assert pool.size == trtllm_blocks(BUDGET, 2 * kv * layers * head * 2) * block.size


def test_compare_rows_every_preset_and_figure():
    from kvviz.engines import compare_rows
    from kvviz.engines.figure import compare_figure, plan_figure

    for name in preset_names():
        rows = compare_rows(load(name), kv_budget_bytes=BUDGET)
        assert [r.engine for r in rows] == list(ENGINES)
        for r in rows:
            assert (r.plan is None) != (r.refusal is None)
            assert r.refusal is None or "\n" not in r.refusal
        if name.startswith("deepseek-v4"):
            assert all(r.plan is not None for r in rows)  # TensorRT-LLM's: tests/test_engines_trtllm_dsv4.py
            assert rows[1].plan.log_lines[0].startswith("DSV4 SWA sizing")
            assert "KV cache manager v2 device quota" in rows[2].plan.log_lines[1]
    rows = compare_rows(load("gpt-oss-120b"), kv_budget_bytes=BUDGET)
    fig = compare_figure(rows, model="gpt-oss-120b", budget_bytes=BUDGET)
    texts = " ".join(t.get_text() for t in fig.texts)
    assert all(r.plan.log_line[:40] in texts for r in rows)
    assert plan_figure(rows[1].plan).axes


def test_cli_compare_engines_table_and_refusal_lines(tmp_path, capsys):
    from kvviz.cli import main

    out = tmp_path / "e.png"
    assert (
        main(
            [
                "compare",
                "--model",
                "deepseek-v4-flash",
                "--engines",
                "vllm,sglang,trtllm",
                "--budget-gib",
                "60",
                "--figure",
                str(out),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "KV cache manager v2 device quota set to 60.0GiB" in text and out.stat().st_size > 0
    full = sglang_dsv4_by_hand(_cfg("deepseek-v4-flash"), 60 * GIB)[0]
    assert f"max_total_num_tokens={full}," in text
    assert (
        main(
            [
                "compare",
                "--model",
                "gpt-oss-120b",
                "--engines",
                "trtllm",
                "--budget-gib",
                "60",
                "--max-attention-window",
                "128,131072",
            ]
        )
        == 0
    )
    assert "Allocated 30.00 GiB" in capsys.readouterr().out


def test_gemma_3n_sglang_sizes_every_layer_and_unserved_lines():
    c = _cfg("gemma-3n-e4b")
    layers, kv, head = c["num_hidden_layers"], c["num_key_value_heads"], c["head_dim"]
    # layer_setup.py resolve_layer_indices: num_effective_layers = num_hidden_layers (no KV-sharing reduction)
    cell = kv * (head + head) * layers * 2
    s = plan_sglang(_model("gemma-3n-e4b"), kv_budget_bytes=BUDGET)
    assert s.token_capacity == BUDGET // cell and len([p for p in s.pools]) == 2 and s.pools[0].layers == layers
    for engine, name in (
        ("trtllm", "gemma-3n-e4b"),
        ("trtllm", "jamba-v0.1"),
        ("sglang", "jamba-v0.1"),
        ("sglang", "zamba2"),
    ):
        with pytest.raises(KvvizError, match="does not serve"):
            plan_engine(engine, _model(name), kv_budget_bytes=BUDGET)


def test_each_engines_own_budget_on_a_gpu():
    from kvviz import deploy
    from kvviz.engines.budget import engine_budgets, prefill_capture_sizes, sglang_mem_fraction_static

    m = _model("llama-3.1-8b")
    b = deploy.kv_budget(m, gpu="H200")
    total, weights, act = b.total_memory, b.weights_bytes, b.activation_bytes
    own = engine_budgets(m, b, ENGINES)
    # vLLM: the deploy budget itself
    assert own["vllm"].kv_budget_bytes == b.available_bytes
    # TRT-LLM _cal_max_memory: (total - peak + temporary KV) x 0.9, peak - temporary = weights + allowance
    assert own["trtllm"].kv_budget_bytes == int((total - weights - act) * 0.9)
    # SGLang memory_hook: reserved MiB = 512 + 8192 x 1.5 + 1/8 x 1024 + (256 x 2 + 8 x prefill sizes), >= 10 GiB
    assert len(prefill_capture_sizes(8192)) == 8 + 14 + 8 + 8 + 12 + 8
    reserved = 512 + 8192 * 1.5 + 1024 / 8 + 256 * 2 + 8 * 58
    mib = total / 2**20
    mfs = round((mib - reserved) / mib, 3)
    assert sglang_mem_fraction_static(total) == (mfs, int(reserved))
    # _profile_available_bytes: free after load (total - weights) - total x (1 - mfs), in GiB, int(x 2**30)
    assert own["sglang"].kv_budget_bytes == int((total / GIB - total / GIB * (1 - mfs) - weights / GIB) * GIB)
    # the CLI gives each engine its own on --gpu, and one budget with --kv-cache-memory-bytes
    import contextlib
    import io

    from kvviz.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["compare", "--model", "llama-3.1-8b", "--engines", "vllm,sglang,trtllm", "--gpu", "H200"]) == 0
    text = buf.getvalue()
    assert f"{own['sglang'].kv_budget_bytes:,}" in text and f"{own['trtllm'].kv_budget_bytes:,}" in text
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert (
            main(
                [
                    "compare",
                    "--model",
                    "llama-3.1-8b",
                    "--engines",
                    "sglang,trtllm",
                    "--gpu",
                    "H200",
                    "--kv-cache-memory-bytes",
                    str(BUDGET),
                ]
            )
            == 0
        )
    assert "no engine's fraction applies" in buf.getvalue() and buf.getvalue().count(f"{BUDGET:,}") >= 2


def test_sglang_unified_pool_sizing_runs_as_kvviz_sizes(sgl):
    from bisect import bisect_right
    from typing import Optional

    from kvviz.engines import EngineKnobs

    pc = sgl / "model_executor" / "pool_configurator.py"
    env = {
        "dataclass": dataclasses.dataclass,
        "Optional": Optional,
        "logger": _Log(),
        "int": int,
        "bisect_right": bisect_right,
        "ceil_align": lambda x, a: -(-x // a) * a,
        "max": max,
    }
    env["MemoryPoolConfig"] = engine_code(pc, "MemoryPoolConfig", env)
    methods = {
        n: engine_code(pc, f"HybridSWAPoolConfigurator.{n}", env)
        for n in (
            "_draft_pool_bytes_per_token",
            "_unified_full_bytes_per_token",
            "_unified_pool_bytes",
            "_max_unified_full_tokens",
            "_solve_pool_sizes",
            "_make_pool_config",
            "calculate_pool_sizes",
        )
    }
    methods["validate_swa_pool_size"] = staticmethod(
        engine_code(pc, "MemoryPoolConfigurator.validate_swa_pool_size", env)
    )
    Configurator = type("HybridSWAPoolConfigurator", (), methods)
    c = _cfg("gpt-oss-120b")
    swa_n = c["layer_types"].count("sliding_attention")
    per = c["num_key_value_heads"] * (c["head_dim"] * 2) * 2
    self = Configurator()
    for k, v in dict(
        _full_layers_num=len(c["layer_types"]) - swa_n,
        _swa_layers_num=swa_n,
        _swa_full_tokens_ratio=0.8,
        _sliding_window_size=c["sliding_window"],
        _page_size=1,
        _enable_unified_memory=True,
        _full_per_token=per,
        _swa_per_token=per,
        _draft_full_layers_num=0,
        _draft_swa_layers_num=0,
        _draft_swa_full_layers_num=0,
        _draft_cell_size=0,
        _fused_full_entry=None,
        _fused_swa_entry=None,
    ).items():
        setattr(self, k, v)
    cfg = self.calculate_pool_sizes(BUDGET, 1)
    plan = plan_engine("sglang", _model("gpt-oss-120b"), kv_budget_bytes=BUDGET, knobs=EngineKnobs(unified_memory=True))
    units = {p.name: p.units for p in plan.pools}
    assert (cfg.full_max_total_num_tokens, cfg.swa_max_total_num_tokens) == (
        units["unified full (grows down)"],
        units["unified swa (grows up)"],
    )
    assert cfg.unified_memory_pool_bytes == sum(p.total_bytes for p in plan.pools)


def test_explorer_shows_the_other_engines_at_its_budget():
    pytest.importorskip("ipywidgets")
    from kvviz.explorer.app import Explorer

    e = Explorer("gpt-oss-120b", budget_gib=40)
    s = plan_sglang(_model("gpt-oss-120b"), kv_budget_bytes=40 * GIB)
    t = plan_trtllm(_model("gpt-oss-120b"), kv_budget_bytes=40 * GIB)
    assert (
        f"{s.token_capacity:,} tokens" in e.engines_label.value
        and f"{t.token_capacity:,} tokens" in e.engines_label.value
    )
    e.set(model="deepseek-v4-flash")
    assert "KV cache manager v2 device quota set to 40.0GiB" in e.engines_label.value  # kvviz.engines.trtllm.dsv4


def test_sglang_dsv4_pool_configurator_runs_as_kvviz_sizes(sgl, monkeypatch):
    """DSV4PoolConfigurator's own methods (calculate_pool_sizes and everything it calls), compiled
    from the wheel, on an instance whose fields are set as its __init__ sets them on an H200 with
    SGLang's DeepSeek V4 defaults; its layout, ring and indexer helpers are the wheel's too."""
    import importlib.util
    from typing import Optional

    spec = importlib.util.spec_from_file_location(
        "_sgl_kv_layout", sgl.parent / "kernels" / "ops" / "attention" / "dsv4" / "kv_layout.py"
    )
    kv_layout = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kv_layout)  # a pure enum module
    KVLayout = kv_layout.KVLayout
    pc = sgl / "model_executor" / "pool_configurator.py"
    mp = sgl / "mem_cache" / "deepseek_v4_memory_pool.py"
    off = _ns(get=lambda: False)
    envs = _ns(
        SGLANG_OPT_USE_ONLINE_COMPRESS=off,
        SGLANG_EXPERIMENTAL_ONLINE_C128_MTP=off,
        SGLANG_DSV4_COMPRESS_STATE_DTYPE=_ns(get=lambda: "float32"),
        SGLANG_DSV4_KV_LAYOUT=_ns(get=lambda: "auto"),
        SGLANG_DSV4_COMPRESSED_KV_LAYOUT=_ns(get=lambda: "auto"),
    )
    get_exec = lambda: _ns(kernel=_ns(dsv4_attn_backend="flashmla"))  # noqa: E731
    ceil_div = lambda x, y: (x + y - 1) // y  # noqa: E731  sglang.srt.utils ceil_div
    env = {
        "dataclass": dataclasses.dataclass,
        "Optional": Optional,
        "logger": _Log(),
        "envs": envs,
        "get_exec": get_exec,
        "_is_npu": False,
        "_is_hip": False,
        "ceil_div": ceil_div,
        "KVLayout": KVLayout,
        "ONLINE_C128": False,
        "torch": _ns(cuda=_ns(is_available=lambda: False)),
    }
    env["MemoryPoolConfig"] = engine_code(pc, "MemoryPoolConfig", env)
    env["_DSV4PoolSizes"] = engine_code(pc, "_DSV4PoolSizes", env)
    engine_code(pc, "_get_dsv4_compress_state_dtype_sizes", env)
    pool_mod = types.ModuleType("sglang.srt.mem_cache.deepseek_v4_memory_pool")
    for fn in (
        "resolve_compressed_kv_layout",
        "select_dsv4_kv_layout",
        "_num_dsv4_physical_kv_pages",
        "get_dsv4_indexer_bytes_per_token",
        "get_compress_state_ring_size",
        "collect_sources_by_ratio",
    ):
        setattr(pool_mod, fn, engine_code(mp, fn, env))
    pool_mod.DSV41_INDEX_PAGE_SIZE = 64  # read only on ratio-1/2 owners, which DeepSeek V4 has none of
    for name in ("sglang", "sglang.srt", "sglang.srt.mem_cache"):
        if name not in sys.modules:
            monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, pool_mod.__name__, pool_mod)
    methods = {
        n: engine_code(pc, f"DSV4PoolConfigurator.{n}", env)
        for n in (
            "num_layers",
            "_get_paged_kv_bytes_per_token",
            "_get_bytes_per_swa_token",
            "_compressed_bytes_per_full_token",
            "_get_low_ratio_kv_padding_bytes",
            "_get_bytes_per_full_token",
            "_get_swa_fixed_bytes",
            "_get_swa_tokens",
            "_compute_dsv4_sizes",
            "_get_num_req_slots",
            "_get_c128_state_fixed_bytes",
            "_get_c2_state_fixed_bytes",
            "_unified_c4_state_pool_size",
            "_fixed_c4_state_bytes",
            "_resolve_max_running_requests_per_worker",
            "_fixed_swa_bytes",
            "_to_config",
            "finalize_with_max_running_requests",
            "calculate_pool_sizes",
            "_resolve_swa_cap_tokens",
        )
    }
    methods["validate_swa_pool_size"] = staticmethod(
        engine_code(pc, "MemoryPoolConfigurator.validate_swa_pool_size", env)
    )
    Configurator = type("DSV4PoolConfigurator", (), methods)
    resolve_reqs = engine_code(
        sgl / "mem_cache" / "kv_cache_configurator.py",
        "KVCacheConfigurator.resolve_max_num_reqs",
        {"get_schedule": lambda: _ns(max_running_requests=256), "logger": _Log()},
    )
    for name in ("deepseek-v4-pro", "deepseek-v4-flash"):
        c = _cfg(name)
        ratios = c["compress_ratios"]
        rope, nope = c["qk_rope_head_dim"], c["head_dim"] - c["qk_rope_head_dim"]
        self = Configurator()
        stage = range(0, c["num_hidden_layers"])
        for k, v in dict(  # DSV4PoolConfigurator.__init__, no unified kv / spec / hisparse / replay / PP
            qk_nope_head_dim=nope,
            qk_rope_head_dim=rope,
            indexer_head_dim=c["index_head_dim"],
            attn_head_dim=nope + rope,
            _unified=False,
            _unified_fp8=False,
            _dspark_draft_on_bf16=False,
            kv_bytes=nope + rope * 2 + 8,
            indexer_bytes_per_token=pool_mod.get_dsv4_indexer_bytes_per_token(c["index_head_dim"], False),
            context_len=c.get("max_position_embeddings"),
            stage_compress_ratios=ratios[stage.start : stage.stop],
            stage_owner_layers=pool_mod.collect_sources_by_ratio(ratios, [], stage),
            operator_swa_ratio=0.1,
            swa_ratio=0.1,
            sliding_window_size=c["sliding_window"],
            page_size=256,
            is_speculative=False,
            online_c128_mtp_max_draft_tokens=0,
            attn_dp_size=1,
            requested_max_running_requests_per_worker=256,
            disaggregation_mode="null",
            disaggregation_decode_extra_slots=0,
            c4_shrink_factor=1,
            num_layers_total=len(stage),
            _swa_ring_size=c["sliding_window"],
            _spec_infl=1.0,
            encoder_replay=False,
            paged_draft_layers=0,
            request_window_bytes=0,
            swa_prefix_tails=0,
            low_ratio_index_bytes=pool_mod.get_dsv4_indexer_bytes_per_token(c["index_head_dim"], True),
        ).items():
            setattr(self, k, v)
        self.ring_sizes = {r: pool_mod.get_compress_state_ring_size(r) for r in self.stage_owner_layers if r != 1}
        self.swa_cap_tokens = self._resolve_swa_cap_tokens()
        self.bytes_per_swa_token = self._get_bytes_per_swa_token()
        self.bytes_per_full_token = self._get_bytes_per_full_token()
        for budget in (40 * GIB, BUDGET):
            cfg = self.calculate_pool_sizes(budget, 256)
            kvc = _ns(model_config=_ns(context_len=2048), attn_dp_size=1, mambaish_config=None)
            cfg.max_running_requests = resolve_reqs(kvc, cfg.max_total_num_tokens)
            cfg = self.finalize_with_max_running_requests(cfg)
            plan = plan_engine("sglang", load(name), kv_budget_bytes=budget)
            units = {p.name: p.units for p in plan.pools}
            assert (plan.token_capacity, plan.request_bound) == (cfg.max_total_num_tokens, cfg.max_running_requests)
            assert (
                units["swa_kv"],
                units["c4 kv"],
                units["c128 kv"],
                units["c4 compress state"],
                units["c128 compress state"],
            ) == (
                cfg.swa_max_total_num_tokens,
                cfg.c4_max_total_num_tokens,
                cfg.c128_max_total_num_tokens,
                cfg.c4_state_pool_size,
                cfg.c128_state_pool_size,
            )
            assert f"bytes_per_full_token={self.bytes_per_full_token:.2f}," in plan.log_lines[1]


@pytest.mark.parametrize("knob", [{"head_dim": 576}, {"rope_dim": 32}])
def test_sglang_refuses_a_dsv4_latent_its_v4_layout_does_not_hold(knob):
    """SGLang 0.5.23's KVLayout.V4 (kernels/ops/attention/dsv4/kv_layout.py: 448 fp8 nope + 64 bf16
    rope) is the only DeepSeek V4 layout off SM100: another latent size is refused in one line
    naming the field, not priced at V4's bytes."""
    from kvviz.cli import main

    flag, value = next(iter(knob.items()))
    argv = [
        "plan",
        "--model",
        "deepseek-v4-pro",
        "--engine",
        "sglang",
        "--kv-cache-memory-bytes",
        "40000000000",
        f"--{flag.replace('_', '-')}",
        str(value),
    ]
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    assert code == 2 and err.getvalue().count("\n") == 1 and "KVLayout.V4" in err.getvalue()
    assert f"{flag}={value}" in err.getvalue()
