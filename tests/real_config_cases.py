"""One comparison of a kvviz Plan with a vLLM 0.33 reference plan of tests/data/vllm-0.33/real-configs
(scripts/vllm_reference_plans.py's case shape), shared by test_real_config_plans and test_real_config_parallel."""

from __future__ import annotations

import pytest

MNBT = "max_num_batched_tokens=8192"


def vllm_line(line: dict, max_model_len: int) -> str:
    """vLLM 0.33's logged line (v1/core/kv_cache_utils.py update_kv_cache_capacity)."""
    return (
        f"GPU KV cache size: {line['gpu_kv_cache_size_tokens']:,} tokens, Maximum concurrency for "
        f"{max_model_len:,} tokens per request: {line['max_concurrency']:.2f}x"
    )


def assert_plan_equals(plan, case: dict, max_model_len: int) -> None:
    """Groups (layers, block size, pages, windows), bytes per block, and at every recorded budget the
    blocks, blocks per request per group, tokens, concurrency and the capacity line, or vLLM's refusal."""
    assert len(plan.groups) == case["num_groups"]
    assert plan.block_stride == case["bytes_per_block"]
    for ours, theirs in zip(plan.groups, case["groups"], strict=True):
        assert [c.name for c in ours.layers] == theirs["layer_names"]
        assert {c.tokens_per_block for c in ours.layers} == {theirs["block_size"]}
        assert sorted({c.page_bytes for c in ours.layers}) == theirs["page_size_bytes"]
        assert {c.sliding_window for c in ours.layers} == {s.get("sliding_window") for s in theirs["specs"]}
    for label, want in case["budgets"].items():
        budget = want["available_bytes_per_gpu"]
        cap = plan.capacity(budget)
        if "error" in want:
            assert want["error"] == "ValueError", (label, want["error_text"])
            assert cap.admission_bytes_per_request > budget, label
            continue
        line = want["capacity"][MNBT]
        assert cap.num_blocks == want["num_blocks"], label
        assert [g.blocks_per_request for g in cap.groups] == line["blocks_per_request_per_group"], label
        assert cap.kv_cache_tokens == line["gpu_kv_cache_size_tokens"], label
        assert cap.max_concurrency == pytest.approx(line["max_concurrency"], rel=1e-12), label
        assert cap.line == vllm_line(line, max_model_len), label
