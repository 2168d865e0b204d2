"""Engines side by side: what each engine's token count counts, and the like-for-like column
(requests of max_model_len tokens at once), derived here from the cited engine rules."""

from __future__ import annotations

import math

import pytest

from kvviz.cli import main
from kvviz.engines import compare_rows, plan_vllm
from kvviz.engines.sglang.plan import plan_sglang
from kvviz.families import load, preset_raw
from kvviz.options import Options

GIB = 2**30


def test_vllm_runs_at_most_max_num_seqs_requests_on_an_h200():
    # vLLM 0.33 engine/arg_utils.py _set_default_max_num_seqs_and_batched_tokens_args: max_num_seqs
    # 1024 on a GPU of >= 70 GiB that is not an A100. Llama 3.1 8B, 512-token requests, 100 GiB:
    # a token is 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 131,072 B, a 16-token block 2 MiB,
    # so about 51,200 blocks for requests of 512 / 16 = 32 blocks: about 1,600 whole requests fit,
    # and the scheduler runs 1,024 of them.
    c = preset_raw("llama-3.1-8b")
    token = c["num_hidden_layers"] * c["num_key_value_heads"] * (c["hidden_size"] // c["num_attention_heads"]) * 2 * 2
    blocks = 100 * GIB // (16 * token)
    assert blocks // (512 // 16) > 1024
    plan = plan_vllm(load("llama-3.1-8b"), Options(max_model_len=512), kv_budget_bytes=100 * GIB)
    assert plan.request_bound == plan.full_length_requests == 1024
    assert "max_num_seqs 1024" in plan.request_bound_rule


def test_sglang_requests_of_full_length_within_max_running_requests():
    # gpt-oss-120b in SGLang 0.5.23 (hybrid SWA, page 1): max_running_requests caps requests of any
    # length (resolve_max_num_reqs gives thousands), while a 131,072-token request takes 131,072 rows
    # of the full pool and min(131,072, window 128 + page 1) rows of the sliding pool.
    m = load("gpt-oss-120b")
    plan = plan_sglang(m, kv_budget_bytes=40 * GIB)
    full = plan.token_capacity
    swa = next(p.units for p in plan.pools if p.name.startswith("swa "))
    window = preset_raw("gpt-oss-120b")["sliding_window"]
    length = plan.max_model_len
    assert plan.request_bound > full // length
    assert plan.full_length_requests == min(plan.request_bound, full // length, swa // min(length, window + 1))
    assert plan.to_json()["full_length_requests"] == plan.full_length_requests


def test_sglang_page_rounds_a_request():
    # With --page-size 64 (options.block_size) a request of L tokens takes ceil(L / 64) pages.
    m = load("llama-3.1-8b")
    plan = plan_sglang(m, Options(block_size=64, max_model_len=1000), kv_budget_bytes=GIB)
    assert plan.full_length_requests == min(plan.request_bound, plan.token_capacity // (math.ceil(1000 / 64) * 64))


@pytest.mark.parametrize("name", ["deepseek-v4-pro", "gpt-oss-120b", "qwen3-next-80b-a3b", "gemma-3-27b"])
def test_compare_says_what_each_engines_tokens_count(name, capsys):
    assert main(["compare", "--model", name, "--engines", "vllm,sglang,trtllm", "--budget-gib", "40"]) == 0
    out = capsys.readouterr().out
    assert "tokens are each engine's own count, not one unit" in out
    assert "  vllm: int(max concurrency x max_model_len)" in out
    assert "  sglang: " in out
    header = next(line for line in out.splitlines() if line.startswith("engine "))
    assert "requests at once" in header and "engine's bound" in header


def test_deepseek_v4_sglang_tokens_are_said_to_be_compressed_positions():
    # SGLang's max_total_num_tokens for DeepSeek V4 counts the compressed caches' address space,
    # and its SWA pool holds swa_full_tokens_ratio (0.1, model_overrides/deepseek_v4.py) of it.
    model = load("deepseek-v4-pro")
    rows = compare_rows(model, ("vllm", "sglang"), kv_budget_bytes=40 * GIB)
    s = rows[1].plan
    swa = next(p.units for p in s.pools if p.name == "swa_kv")
    assert swa == int(s.token_capacity * 0.1) // 256 * 256
    assert "compressed caches' address space" in s.token_capacity_counts and f"{swa:,}" in s.token_capacity_counts
    raw = preset_raw("deepseek-v4-pro")
    window, length = raw["sliding_window"], raw["max_position_embeddings"]
    # max_running_requests 256 (deepseek_v4_hook.py); page 256; a full-length request of the config's
    # max_position_embeddings (1,048,576: vLLM's max_model_len, its YaRN rope_scaling not applied again).
    assert model.max_model_len == length == 1 << 20
    need = math.ceil(min(length, window + 256) / 256) * 256
    assert s.full_length_requests == min(256, s.token_capacity // length, swa // need)


def test_a_state_pool_of_blocks_is_drawn_as_one_state_per_layer_not_k_and_v():
    # TensorRT-LLM's MambaHybridCacheManagerV2 slot holds every GDN layer's conv and SSM state; a
    # Qwen3-Next GDN layer's state, from config.json (mamba_utils / modeling_qwen3_next shapes):
    # conv (2 x key heads x key dim + value heads x value dim) x (kernel - 1) and SSM value heads x
    # key dim x value dim, both bf16 in TensorRT-LLM for this model.
    from kvviz.engines import EngineKnobs, plan_engine
    from kvviz.engines.maps import byte_map

    c = preset_raw("qwen3-next-80b-a3b")
    conv_dim = (
        2 * c["linear_num_key_heads"] * c["linear_key_head_dim"]
        + c["linear_num_value_heads"] * c["linear_value_head_dim"]
    )
    per_layer = (
        conv_dim * (c["linear_conv_kernel_dim"] - 1)
        + c["linear_num_value_heads"] * c["linear_key_head_dim"] * c["linear_value_head_dim"]
    ) * 2
    plan = plan_engine(
        "trtllm", load("qwen3-next-80b-a3b"), kv_budget_bytes=40 * GIB, knobs=EngineKnobs(max_batch_size=256)
    )
    inside = next(b for b in byte_map(plan).buffers if b.zoom and "state" in b.name)
    assert {r.kind for r in inside.regions} == {"state"}
    assert all(r.size == per_layer for r in inside.regions)
    # every full_attention_interval-th layer is attention, the rest GDN
    assert len(inside.regions) == c["num_hidden_layers"] - c["num_hidden_layers"] // c["full_attention_interval"]
