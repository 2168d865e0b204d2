"""Gemma 4, Cohere2-MoE and HY-V4 on the default configs against vLLM 0.33's own plans of them
(tests/data/vllm-0.33/registry/plans.json, scripts of that folder's README): every group field, by the
library and by `kvviz plan --json`, and a derivation whose numbers are the pages it plans (issue 39)."""

import json
import re
from pathlib import Path

import pytest
from real_config_cases import assert_cli_equals, assert_plan_equals

import kvviz

REGISTRY = Path(__file__).parent / "data" / "vllm-0.33" / "registry"
CASES = json.loads((REGISTRY / "plans.json").read_text())["cases"]
ARCHS = ("Gemma4ForCausalLM", "Cohere2MoeForCausalLM", "HYV4ForCausalLM")


def _plan(arch: str):
    case = CASES[arch]
    return kvviz.plan(str(REGISTRY / case["config_path"]), max_model_len=case["settings"]["max_model_len"]), case


@pytest.mark.parametrize("arch", ARCHS)
def test_library_equals_vllm_on_every_group_field(arch):
    plan, case = _plan(arch)
    assert_plan_equals(plan, case, case["settings"]["max_model_len"])


@pytest.mark.parametrize("arch", ARCHS)
def test_cli_json_equals_vllm_on_every_group_field(arch):
    case = CASES[arch]
    assert_cli_equals(REGISTRY / case["config_path"], {"tensor_parallel_size": 1}, case)


def test_cohere2_moe_sliding_layers_see_window_plus_one():
    """cohere2_moe.py Cohere2MoeAttention.__init__: a sliding layer's per_layer_sliding_window is
    config.sliding_window + 1 (as commandr.py's CohereAttention: the layer sees [pos - window, pos])."""
    plan, case = _plan("Cohere2MoeForCausalLM")
    raw = json.loads((REGISTRY / case["config_path"]).read_text())
    windows = {c.sliding_window for g in plan.groups for c in g.layers} - {None}
    assert windows == {raw["sliding_window"] + 1}


def test_gemma4_derivation_states_the_pages_it_plans():
    """Gemma 4's sliding layers (4 KV heads x 256 x K|V x 2 B = 4,096 B a token) hold 32 tokens a block
    in vLLM: unify_kv_cache_spec_page_size raises their 16-token block until the page equals the full
    layers' 16 x 8,192 = 131,072 B. Every 'page = N tokens x B = P' line of the derivation multiplies out
    and names a page the plan holds; the sliding one says 32 tokens."""
    plan, case = _plan("Gemma4ForCausalLM")
    pages = {c.page_bytes for g in plan.groups for c in g.layers}
    stated = re.findall(r"page = ([\d,]+) tokens x ([\d,]+) B = ([\d,]+) B", "\n".join(plan.derivation))
    assert stated
    for tokens, per_token, page in stated:
        tokens, per_token, page = (int(x.replace(",", "")) for x in (tokens, per_token, page))
        assert tokens * per_token == page and page in pages
    sliding = [line for line in plan.derivation if line.startswith("sliding-window K|V page")]
    assert sliding and "32 tokens x 4,096 B = 131,072 B" in sliding[0]
    assert "unify_kv_cache_spec_page_size" in sliding[0]
    # and the map's stride line names the groups whose block is not the configured 16
    stride_line = next(line for line in str(plan.layout).splitlines() if "block stride" in line)
    assert "16 tokens (sliding512-0 32, sliding512-1 32" in stride_line and "full" not in stride_line


def test_hyv4_learnable_sink_leaves_the_dense_cache_as_it_is():
    """HY-V4's default config sets learnable_sink (vLLM's HYV4Config) and no sparse layer_types: dense MLA.
    models/hy_v4/nvidia/attention.py HYV4MLAAttention._resolve_sink_backend keeps the selected backend only if it
    supports sinks (no CUDA MLA backend does: AttentionBackend.supports_sink is False), else tries its
    FLASHMLA_SPARSE subclass, whose validate_configuration refuses a dense layer ("non-sparse not supported"):
    the sink is disabled and the layer keeps FLASH_ATTN_MLA, the cache vLLM recorded for this config."""
    plan, case = _plan("HYV4ForCausalLM")
    raw = json.loads((REGISTRY / case["config_path"]).read_text())
    assert raw["learnable_sink"] is True and raw.get("layer_types") is None
    assert case["settings"]["attention_backends"] == ["FLASH_ATTN_MLA:FlashAttnMLABackendSM90_SpecOnlyImpl"]
    assert {c.tokens_per_block for g in plan.groups for c in g.layers} == {16}
