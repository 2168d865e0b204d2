"""Encoder-decoder and the other architectures of issue 27's 'sparse' batch (tests/data/vllm-0.33/registry-sparse).

* Whisper (large-v3, small), Nemotron Parse and Parse 3.5 (4k-token configs): vLLM 0.33's own plans (plans.json,
  made by scripts/vllm_reference_plans.py: the model's real __init__, every layer's get_kv_cache_spec, vLLM's
  planner and capacity line), field for field; vLLM's own refusals of the 9k / 12k-token configs (refusals.json).
* TP, fp8, max_num_batched_tokens, the default encoder budget, and Cohere ASR (the reference venv cannot import
  cohere_asr.py: no torchaudio): derived by hand below from the cited vLLM 0.33 files.
* The architectures left refused: the refusal names the vLLM spec kvviz does not model.
"""

import json
from pathlib import Path

import pytest
from test_registry_plans import _compare

import kvviz
from kvviz.base.errors import KvvizError
from kvviz.families import refused
from kvviz.families.loader import model_from_dict

HERE = Path(__file__).parent / "data" / "vllm-0.33" / "registry-sparse"
PLANS = json.loads((HERE / "plans.json").read_text())
REFUSALS = json.loads((HERE / "refusals.json").read_text())["failures"]
GIB = 1 << 30
BLOCK = 16  # CacheConfig.DEFAULT_BLOCK_SIZE: FLASH_ATTN keeps it on Hopper (whisper's recorded settings.block_size)


def _unified(case: dict) -> dict:
    """The case with each group's page as vLLM plans it: the script records each layer's own spec (before
    planning), and unify_kv_cache_spec_page_size (v1/core/kv_cache_planning.py) gives a layer whose page divides
    the largest one a block of block_size x ratio (copy_with_new_block_size): its page grows by the same ratio,
    to the group's block_size (DiffusionGemma: 16-token sliding pages of 65,536 B become 32-token pages)."""
    groups = []
    for g in case["groups"]:
        (spec,) = g["specs"]
        groups.append(
            dict(g, page_size_bytes=[p * g["block_size"] // spec["block_size"] for p in g["page_size_bytes"]])
        )
    return dict(case, groups=groups)


@pytest.mark.parametrize("arch", sorted(PLANS["cases"]))
def test_plan_equals_vllm_033(arch):
    case = PLANS["cases"][arch]
    if arch != "DiffusionGemmaForBlockDiffusion":  # the rest are encoder-decoders: no prefix caching
        assert case["settings"]["enable_prefix_caching"] is False
    _compare(kvviz.load(str(HERE / case["config_path"])), _unified(case))


def test_whisper_groups_are_self_then_cross():
    """vLLM's groups: the decoder's self-attention (FullAttentionSpec) and its cross-attention (CrossAttentionSpec,
    layers/attention/cross_attention.py CrossAttention.get_kv_cache_spec), one group each."""
    case = PLANS["cases"]["WhisperForConditionalGeneration"]
    plan = kvviz.plan(kvviz.load(str(HERE / case["config_path"])))
    assert [g.layers[0].spec_class for g in plan.groups] == [g["spec_type"] for g in case["groups"]]
    assert [g.name for g in plan.groups] == ["full", "cross"]


def _hand(layers, kv_heads, head_dim, elem, *, max_len, enc_tokens, budget, cross=True):
    """vLLM 0.33 by hand for a decoder of `layers` self-attention (+ as many cross-attention) layers of one page:
    page = block x kv_heads x 2 x head_dim x element bytes (AttentionSpec.page_size_bytes); both kinds share the
    page, so get_kv_cache_groups (_get_kv_cache_groups_uniform_page_size) makes one group per kind of `layers`
    layers and a block id costs layers x page (one tensor per layer slot); blocks per request:
    cdiv(max_model_len, block) (FullAttentionSpec) and cdiv(max_num_encoder_input_tokens, block)
    (CrossAttentionSpec.max_memory_usage_bytes); tokens = int(concurrency x max_model_len)
    (kv_cache_utils.get_kv_cache_capacity)."""
    page = BLOCK * kv_heads * 2 * head_dim * elem
    stride = layers * page
    num_blocks = budget // stride
    per_group = [-(-max_len // BLOCK)] + ([-(-enc_tokens // BLOCK)] if cross else [])
    conc = num_blocks / sum(per_group)
    return page, stride, num_blocks, per_group, int(conc * max_len), conc


def _check(plan, budget, want):
    page, stride, num_blocks, per_group, tokens, conc = want
    assert {c.page_bytes for g in plan.groups for c in g.layers} == {page}
    assert plan.block_stride == stride
    cap = plan.capacity(budget)
    assert cap.num_blocks == num_blocks
    assert [g.blocks_per_request for g in cap.groups] == per_group
    assert cap.kv_cache_tokens == tokens
    assert cap.max_concurrency == pytest.approx(conc, rel=1e-12)


# whisper-large-v3 (config.json): d_model 1280, 20 decoder heads, 32 decoder layers, max_target_positions 448
WHISPER = HERE / "WhisperForConditionalGeneration"


@pytest.mark.parametrize(
    "knobs, kv_heads, elem, enc_tokens",
    [
        # whisper.py WhisperAttention: num_kv_heads = max(1, 20 // 2); head_dim = 1280 // 20
        ({"tensor_parallel_size": 2}, 10, 2, 8192),
        # CrossAttention takes cache_config.cache_dtype as the self-attention does: fp8 pages of both kinds
        ({"kv_dtype": "fp8"}, 20, 1, 8192),
        # SchedulerConfig.__post_init__: max_num_encoder_input_tokens = max_num_batched_tokens
        ({"max_num_batched_tokens": 2048}, 20, 2, 2048),
    ],
)
def test_whisper_by_hand(knobs, kv_heads, elem, enc_tokens):
    plan = kvviz.plan(kvviz.load(str(WHISPER)), **knobs)
    _check(plan, 8 * GIB, _hand(32, kv_heads, 1280 // 20, elem, max_len=448, enc_tokens=enc_tokens, budget=8 * GIB))


def test_whisper_tp_must_divide_heads():
    with pytest.raises(KvvizError, match="20 attention heads are not divisible"):
        kvviz.plan(kvviz.load(str(WHISPER)), tensor_parallel_size=3)


def test_cohere_asr_by_hand():
    """cohere_asr.py: CohereASRDecoder reads transf_decoder.config_dict (num_layers 8, hidden_size 1024,
    num_attention_heads 8: head_dim 128, KV heads = heads); layer names maybe_prefix('', 'decoder') + make_layers'
    '.layers' inside the layer: decoder.layers.{i}.layers.first_sub_layer.attn / .second_sub_layer.attn;
    max_model_len: the top config's max_position_embeddings (1024)."""
    plan = kvviz.plan(kvviz.load(str(HERE / "CohereAsrForConditionalGeneration")))
    names = [[c.name for c in g.layers] for g in plan.groups]
    assert names == [
        [f"decoder.layers.{i}.layers.first_sub_layer.attn" for i in range(8)],
        [f"decoder.layers.{i}.layers.second_sub_layer.attn" for i in range(8)],
    ]
    assert [g.layers[0].spec_class for g in plan.groups] == ["FullAttentionSpec", "CrossAttentionSpec"]
    # max_model_len comes from ModelConfig.hf_text_config, CohereAsrConfig itself (get_text_config(): no
    # decoder / text_config sub-config), not from transf_decoder's max_sequence_length
    raw = json.loads((HERE / "CohereAsrForConditionalGeneration" / "config.json").read_text())
    raw["transf_decoder"]["config_dict"]["max_sequence_length"] = 512
    assert model_from_dict(raw, name="c").max_model_len == 1024
    for budget in (8 * GIB, 40 * GIB):
        _check(plan, budget, _hand(8, 8, 1024 // 8, 2, max_len=1024, enc_tokens=8192, budget=budget))


def test_nemotron_parse_by_hand():
    """nemotron_parse.py: MBartDecoderNoPos(config.decoder, prefix='.decoder') names its layers
    .decoder.layers.{i}; MBartDecoderLayer: self_attn (WhisperAttention, Attention) and encoder_attn
    (WhisperCrossAttention); d_model 1024 / 16 heads. max_model_len 9000 (the decoder's max_position_embeddings,
    ModelConfig.hf_text_config = get_text_config(): config.decoder). Encoder-decoder: no chunked prefill, so the
    default max_num_batched_tokens is max(max_model_len, 8192) = 9000 (engine/arg_utils.py
    _set_default_max_num_seqs_and_batched_tokens), and so is max_num_encoder_input_tokens."""
    model = kvviz.load(str(HERE / "NemotronParseForConditionalGeneration"))
    assert model.max_model_len == 9000
    plan = kvviz.plan(model)
    assert [c.name for c in plan.groups[1].layers] == [f".decoder.layers.{i}.encoder_attn.attn" for i in range(10)]
    _check(plan, 8 * GIB, _hand(10, 16, 1024 // 16, 2, max_len=9000, enc_tokens=9000, budget=8 * GIB))
    # given, the knob is the encoder budget ...
    plan = kvviz.plan(model, max_num_batched_tokens=10000)
    _check(plan, 8 * GIB, _hand(10, 16, 1024 // 16, 2, max_len=9000, enc_tokens=10000, budget=8 * GIB))
    # ... but without chunked prefill vLLM refuses one below max_model_len (SchedulerConfig.verify_max_model_len)
    with pytest.raises(KvvizError, match=r"max_num_batched_tokens \(8192\) is smaller than max_model_len \(9000\)"):
        kvviz.plan(model, max_num_batched_tokens=8192)


def test_radio_mbart_prefix_by_hand():
    """nemotron_parse3_5.py RadioMBartPrefixForCausalLM: a causal visual prefix, no cross-attention (vLLM raises
    when add_cross_attention is not false); NemotronParseSelfAttention: QKVParallelLinear of
    self_attention_kv_heads (4) KV heads, head_dim d_model // heads = 64; one FullAttentionSpec group."""
    plan = kvviz.plan(kvviz.load(str(HERE / "RadioMBartPrefixForCausalLM")))
    assert len(plan.groups) == 1
    assert [c.name for c in plan.groups[0].layers] == [f".decoder.layers.{i}.self_attn.attn" for i in range(12)]
    _check(plan, 8 * GIB, _hand(12, 4, 1024 // 16, 2, max_len=12000, enc_tokens=0, budget=8 * GIB, cross=False))
    tp8 = kvviz.plan(kvviz.load(str(HERE / "RadioMBartPrefixForCausalLM")), tensor_parallel_size=8)
    # QKVParallelLinear: TP 8 > 4 KV heads -> each rank keeps one replicated KV head
    _check(tp8, 8 * GIB, _hand(12, 1, 64, 2, max_len=12000, enc_tokens=0, budget=8 * GIB, cross=False))


def test_radio_mbart_prefix_refuses_cross_attention():
    raw = json.loads((HERE / "RadioMBartPrefixForCausalLM" / "config.json").read_text())
    raw["decoder"]["add_cross_attention"] = True
    with pytest.raises(KvvizError, match="add_cross_attention"):
        model_from_dict(raw, name="p")


def test_missing_decoder_config_is_one_line():
    raw = json.loads((HERE / "NemotronParseForConditionalGeneration" / "config.json").read_text())
    del raw["decoder"]
    with pytest.raises(KvvizError, match=r"config\.decoder is missing"):
        model_from_dict(raw, name="p")


# Left refused: the one vLLM 0.33 spec kvviz does not model, named in the refusal
STILL_REFUSED = {
    "Qwen4ExpForCausalLM": "CircularBufferSpec",
    "Qwen4ExpForConditionalGeneration": "CircularBufferSpec",
    "Step5ForCausalLM": "CircularBufferSpec",
    "Step5ForConditionalGeneration": "CircularBufferSpec",
    "Glm5NextForCausalLM": "CircularBufferSpec",
    "Glm5NextForConditionalGeneration": "CircularBufferSpec",
    "MiniMaxM3SparseForCausalLM": "cache_role",
    "MiniMaxM3SparseForConditionalGeneration": "cache_role",
    "Dots3NoteForCausalLM": "physical_head_size",
    "VoxtralRealtimeGeneration": "tokens_per_state=Fraction(1, block_pool_size)",
}


@pytest.mark.parametrize("arch", sorted(STILL_REFUSED))
def test_refusal_names_the_spec(arch):
    assert STILL_REFUSED[arch] in refused.REFUSED[arch]
    with pytest.raises(KvvizError, match="kvviz refuses it"):
        model_from_dict({"architectures": [arch], "model_type": "x"}, name="x")


def test_cross_attention_kind_draws_and_serialises():
    """The new kind goes through the text map and the JSON like every other (kvviz.core.kinds)."""
    from kvviz.core.kinds import CacheKind

    plan = kvviz.plan(kvviz.load(str(WHISPER)))
    text = plan.text_map()
    assert CacheKind.CROSS_ATTENTION.glyph in text and CacheKind.CROSS_ATTENTION.label in text
    assert "cross_attention" in json.dumps(plan.to_json())


def test_encoder_budget_follows_is_encoder_decoder():
    """vLLM keys 'no chunked prefill' on ModelConfig.is_encoder_decoder (the config's flag): without it the
    default max_num_batched_tokens (8192) stays, and so does the encoder budget of the cross-attention."""
    raw = json.loads((HERE / "NemotronParseForConditionalGeneration" / "config.json").read_text())
    raw["is_encoder_decoder"] = raw["decoder"]["is_encoder_decoder"] = False  # MBartConfig's default is True
    plan = kvviz.plan(model_from_dict(raw, name="p"))
    assert plan.to_json()["scheduling"]["max_num_encoder_input_tokens"] == 8192
    assert [g.blocks_per_request for g in plan.capacity(8 * GIB).groups] == [-(-9000 // BLOCK), 8192 // BLOCK]


@pytest.mark.parametrize("arch", sorted(REFUSALS))
def test_vllm_refusal_is_kvvizs(arch):
    """vLLM refused max_num_batched_tokens=8192 below max_model_len for both Nemotron Parse configs: the top config's
    or the decoder's is_encoder_decoder (MBartConfig: True by default) turns chunked prefill off
    (transformers_utils/config.py is_encoder_decoder, SchedulerConfig.verify_max_model_len); kvviz refuses alike."""
    failure = REFUSALS[arch]
    assert "is smaller than max_model_len" in failure["error"]
    model = kvviz.load(str(HERE / failure["config_path"]))
    with pytest.raises(KvvizError, match=r"max_num_batched_tokens \(8192\) is smaller than max_model_len"):
        kvviz.plan(model, max_num_batched_tokens=8192)
