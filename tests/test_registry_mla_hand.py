"""MLA-family architectures whose vLLM construction cannot run on CPU, derived by hand from the cited model
files (issue 27, mla). Each test says which file and function the numbers come from.

* DeepseekV4ForConditionalGeneration: vllm/models/deepseek_v4/__init__.py imports vl_stub.py (which raises
  NotImplementedError) on the CPU platform, and DeepseekV4ForCausalLM's own construction needs
  torch.cuda.Stream (registry.json: "could not construct on CPU"). On CUDA, common/vl_model.py
  DeepseekV4ForConditionalGeneration.__init__ builds `init_vllm_registered_model(vllm_config, hf_config=config,
  prefix=maybe_prefix(prefix, "language_model"), architectures=["DeepseekV4ForCausalLM"])`: the KV cache is
  DeepseekV4ForCausalLM's of the same config, every layer name under `language_model.`; the vision tower's
  outputs are in the encoder cache. kvviz's V4 plan itself is tested against vLLM elsewhere
  (tests/test_engines_trtllm_dsv4.py, tests/test_plan_everywhere.py).
* The DeepSeek-OCR wrappers (deepseek_ocr.py, deepseek_ocr2.py, unlimited_ocr.py): where vLLM's own plan could not
  be made (tests/data/vllm-0.33/registry-mla/plans.json failures), the rule of deepseek_v2.py
  DeepseekV2DecoderLayer / DeepseekAttention gives it.
"""

import json
from pathlib import Path

import pytest

import kvviz
from kvviz.families import model_from_dict

HAND = Path(__file__).parent / "data" / "vllm-0.33" / "registry-mla-hand"
MLA = Path(__file__).parent / "data" / "vllm-0.33" / "registry-mla"
GIB = 1 << 30


def test_deepseek_v4_vl_is_deepseek_v4_under_language_model():
    folder = HAND / "DeepseekV4ForConditionalGeneration"
    raw = json.loads((folder / "config.json").read_text())
    assert raw["architectures"] == ["DeepseekV4ForConditionalGeneration"] and raw["vision_n_layers"] > 0
    wrapped = kvviz.plan(kvviz.load(str(folder)), max_model_len=32768)
    inner = kvviz.plan(
        model_from_dict(dict(raw, architectures=["DeepseekV4ForCausalLM"]), name="v4"), max_model_len=32768
    )
    assert wrapped.source.architecture == "DeepseekV4ForConditionalGeneration"
    assert len(wrapped.groups) == len(inner.groups) == 5
    for ours, theirs in zip(wrapped.groups, inner.groups, strict=True):
        assert [c.name for c in ours.layers] == ["language_model." + c.name for c in theirs.layers]
        assert [c.page_bytes for c in ours.layers] == [c.page_bytes for c in theirs.layers]
    assert wrapped.block_stride == inner.block_stride
    for budget in (8 * GIB, 40 * GIB):
        a, b = wrapped.capacity(budget), inner.capacity(budget)
        assert (a.num_blocks, a.kv_cache_tokens, a.line) == (b.num_blocks, b.kv_cache_tokens, b.line)


@pytest.mark.parametrize("arch", ["DeepseekOCRForCausalLM", "DeepseekOCR2ForCausalLM", "UnlimitedOCRForCausalLM"])
def test_deepseek_ocr_language_model_by_hand(arch):
    """deepseek_vl2.py DeepseekVLV2Config: text config = DeepseekVLV2TextConfig(**language_config), kv_lora_rank None
    allowed; deepseek_v2.py DeepseekV2DecoderLayer: qk_nope_head_dim == qk_rope_head_dim == 0 -> use_mha ->
    DeepseekAttention: Attention(heads, head_dim = hidden_size // num_attention_heads, num_kv_heads =
    num_key_value_heads) at language_model.model.layers.{i}.self_attn.attn (deepseek_ocr.py: prefix
    "language_model"); FLASH_ATTN's 16-token block (Unlimited-OCR: FA4 or TRITON_ATTN, MultipleOf(16) both, and
    its RSWASpec is a FullAttentionSpec to the planner). max_model_len: the text config's
    max_position_embeddings."""
    raw = json.loads((MLA / arch / "config.json").read_text())
    lang = raw["language_config"]
    n, heads, kv = lang["num_hidden_layers"], lang["num_attention_heads"], lang["num_key_value_heads"]
    head = lang["hidden_size"] // heads
    page = 16 * 2 * kv * head * 2  # block x (K, V) x heads x head x bf16
    plan = kvviz.plan(kvviz.load(str(MLA / arch)))
    assert plan.max_model_len == lang["max_position_embeddings"] == 8192
    (group,) = plan.groups
    assert [c.name for c in group.layers] == [f"language_model.model.layers.{i}.self_attn.attn" for i in range(n)]
    assert {c.page_bytes for c in group.layers} == {page} and {c.tokens_per_block for c in group.layers} == {16}
    assert plan.block_stride == n * page
    cap = plan.capacity(8 * GIB)
    assert cap.num_blocks == 8 * GIB // (n * page)
    assert [g.blocks_per_request for g in cap.groups] == [8192 // 16]
    assert cap.kv_cache_tokens == cap.num_blocks * 16 // 1  # one full-attention group
