"""kvviz against vLLM 0.33's own plans of the attention decoders whose model file sets each layer's cache
itself (issue 27; kvviz.families.decoder_layers): per-layer windows (DomynEdge, Plamo3, openPangu Embedded),
per-layer KV heads and attention-free layers (DeciLM / Nemotron-NAS), static sink tokens (openPangu Pro MoE
V2), several caches a layer (IQuest Loop Coder), chunked-lookback windows (Rnj1), K2 Horizon's attention.

tests/data/vllm-0.33/registry-layers/plans.json was written by scripts/vllm_reference_plans.py (vLLM 0.33.0's
own model class built on the meta device from each config folder there, every layer's get_kv_cache_spec,
get_kv_cache_configs and get_kv_cache_capacity at 8 and 40 GiB a GPU), or by
scripts/vllm_reference_backend.py, the same in-process with what three model files ask of the platform
(Rnj1: --attention-backend TRITON_ATTN; K2 Horizon: the device name; Pangu Pro MoE V2: the current
device). The folder's README says how the configs and each reference were made. Where vLLM's construction
cannot run on CPU (Flint: FlashInfer and Flint's own CUDA kernels; OpenPanguVL: the checkpoint's image
processor), the expected numbers are derived by hand below, citing the model file."""

import json
from pathlib import Path

import pytest

import kvviz
from kvviz.base.errors import KvvizError
from kvviz.families.loader import model_from_dict
from kvviz.families.registry import FAMILIES
from kvviz.options import Options
from tests.test_registry_plans import _compare

HERE = Path(__file__).parent / "data" / "vllm-0.33" / "registry-layers"
PLANS = json.loads((HERE / "plans.json").read_text())
CASES = PLANS["cases"]


def test_every_folder_has_a_reference():
    folders = {p.parent.name for p in HERE.glob("*/config.json")}
    assert folders - set(CASES) <= HAND_DERIVED
    assert not PLANS["failures"]


@pytest.mark.parametrize("arch", sorted(CASES))
def test_plan_equals_vllm_033(arch):
    case = CASES[arch]
    model = kvviz.load(str(HERE / case["config_path"]))
    assert model.architecture == arch
    _compare(model, case)
    plan = kvviz.plan(model, max_model_len=case["settings"]["max_model_len"])
    for ours, theirs in zip(plan.groups, case["groups"], strict=True):
        assert {c.sliding_window for c in ours.layers} == {s.get("sliding_window") for s in theirs["specs"]}


def _from_dict(raw: dict, name: str):
    return model_from_dict(raw, name=name)


def test_pangu_sink_spec_is_full_attention_with_its_own_v_head():
    """openpangu.py OpenPanguSinkAttention.__init__: head_dim = qk_rope_dim + qk_nope_dim (192), V of
    v_channels (128); static_sink_attention.py StaticSinkAttention.get_kv_cache_spec registers a
    SinkFullAttentionSpec: no window (the config's interleaved_sliding_window only reaches the kernel)."""
    case = CASES["PanguProMoEV2ForCausalLM"]
    (spec,) = case["groups"][0]["specs"]
    assert spec["class"] == "SinkFullAttentionSpec"
    model = kvviz.load(str(HERE / case["config_path"]))
    caches = FAMILIES[model.family].caches(model, Options())
    assert {(c.head_size, c.head_size_v, c.sliding_window) for c in caches} == {
        (spec["head_size"], spec["head_size_v"], None)
    }


def test_pangu_sink_refusals():
    """SinkFullAttentionManager.__init__ asserts sink_len % block_size == 0; OpenPanguSinkAttention raises
    where KV heads < TP ('KV heads replication is not support yet')."""
    model = kvviz.load(str(HERE / "PanguProMoEV2ForCausalLM"))
    with pytest.raises(KvvizError, match="static sink tokens"):
        kvviz.plan(model, max_model_len=4096, block_size=48)
    with pytest.raises(KvvizError, match="sink attention does not replicate"):
        kvviz.plan(model, max_model_len=4096, tensor_parallel_size=8)


def test_decilm_every_no_op_is_refused():
    """model_arch_config_convertor.py NemotronNasModelArchConfigConvertor.get_total_num_kv_heads raises
    when every block's attention is no_op."""
    raw = json.loads((HERE / "DeciLMForCausalLM" / "config.json").read_text())
    for block in raw["block_configs"]:
        block["attention"]["no_op"] = True
    with pytest.raises(KvvizError, match="every attention is no_op"):
        _from_dict(raw, "DeciLMForCausalLM")


HAND_DERIVED = frozenset({"FlintForCausalLM", "OpenPanguVLForConditionalGeneration"})


def test_flint_plan_derived_by_hand():
    """FlintForCausalLM (vllm/models/flint/model.py) cannot be built on CPU: its module imports FlashInfer
    and Flint's CUDA kernels, and FlintAttention.__init__ asserts a FlashInferImpl (so vLLM serves it with
    --attention-backend FLASHINFER; FlashInfer's block sizes 16/32/64 keep vLLM's default 16). The plan by
    hand from the config folder (8 layers, layer_types sliding x 3 then full, twice; 4 KV heads x 128,
    sliding_window 513, bfloat16):

    * FlintAttention.__init__: per_layer_sliding_window = config.sliding_window where layer_types[i] is
      sliding_attention, else None, and then Attention takes cache_config.sliding_window, None since the
      layer_types are mixed (engine/arg_utils.py create_engine_config); no kv_sharing_target_layer_name
      (it asserts none); names model.layers.{i}.self_attn.attn (FlintModel: prefix model.layers,
      FlintDecoderLayer: self_attn, FlintAttention: attn);
    * page: 16 tokens x 4 heads x (128 + 128) x 2 B = 32,768 B for every layer, so
      _get_kv_cache_groups_uniform_page_size: buckets in first-seen order (sliding 0,1,2,4,5,6; full 3,7),
      group_size 2 (the smallest bucket; 6 >= 2 x 1.5), sliding in cdiv(6, 2) = 3 groups layers[i::3];
    * bytes per block: 2 layers x 32,768 = 65,536; num_blocks = budget // 65,536;
    * blocks per request at max_model_len 32,768, max_num_batched_tokens 8,192, async scheduling (2 batches
      in flight, VllmConfig.max_in_flight_tokens = 16,384): sliding cdiv(min(513 - 1 + 16,384, 32,768), 16)
      + 1 = 1,057 (SlidingWindowSpec.max_admission_blocks_per_request), full cdiv(32,768, 16) = 2,048;
    * get_max_concurrency_for_kv_cache_config: num_blocks / (3 x 1,057 + 2,048); get_kv_cache_capacity:
      tokens = int(concurrency x 32,768)."""
    model = kvviz.load(str(HERE / "FlintForCausalLM"))
    plan = kvviz.plan(model, max_model_len=32768)
    names = [[f"model.layers.{i}.self_attn.attn" for i in g] for g in ([0, 4], [1, 5], [2, 6], [3, 7])]
    assert [[c.name for c in g.layers] for g in plan.groups] == names
    assert [{c.sliding_window for c in g.layers} for g in plan.groups] == [{513}, {513}, {513}, {None}]
    assert {c.page_bytes for g in plan.groups for c in g.layers} == {16 * 4 * 256 * 2}
    assert {c.tokens_per_block for g in plan.groups for c in g.layers} == {16}
    assert plan.block_stride == 2 * 32768
    per_request = [-(-(513 - 1 + 2 * 8192) // 16) + 1] * 3 + [32768 // 16]
    for budget in (8 << 30, 40 << 30):
        cap = plan.capacity(budget)
        blocks = budget // 65536
        assert cap.num_blocks == blocks
        assert [g.blocks_per_request for g in cap.groups] == per_request
        assert cap.max_concurrency == pytest.approx(blocks / sum(per_request), rel=1e-12)
        assert cap.kv_cache_tokens == int(blocks / sum(per_request) * 32768)
    with pytest.raises(KvvizError, match="bfloat16"):
        kvviz.plan(model, max_model_len=32768, kv_dtype="fp8")


def test_openpangu_vl_is_pangu_embedded_under_its_prefix():
    """OpenPanguVLForConditionalGeneration cannot be built from a config folder alone (its __init__ asks the
    checkpoint's image processor: openpangu_vl.py _parse_preprocess_params). Its __init__ builds the language
    model with init_vllm_registered_model(vllm_config, prefix=maybe_prefix(prefix, "openpangu.language_model"),
    architectures=["PanguEmbeddedForCausalLM"]) and no hf_config: PanguEmbeddedForCausalLM of the top config,
    every layer under openpangu.language_model. The folder's config is PanguEmbeddedForCausalLM's with a
    vision_config, so its plan is vLLM's plan of that one (the reference above), layer names prefixed; the
    vision encoder's outputs live in the encoder cache, not the KV pool."""
    case = json.loads(json.dumps(CASES["PanguEmbeddedForCausalLM"]))
    for group in case["groups"]:
        group["layer_names"] = ["openpangu.language_model." + n for n in group["layer_names"]]
    model = kvviz.load(str(HERE / "OpenPanguVLForConditionalGeneration"))
    assert model.family == "multimodal_decoder"
    _compare(model, case)


def test_decilm_per_layer_kv_heads_under_tp():
    """DeciLMDecoderLayer.__init__: num_attention_heads // n_heads_in_group KV heads (8, 4, 2, 1 in the
    folder's blocks); LlamaAttention.__init__ at TP 2: max(1, heads // 2) a rank, the 1-head layer
    replicated (2 % 1 == 0); no-op blocks register nothing."""
    model = kvviz.load(str(HERE / "DeciLMForCausalLM"))
    raw = json.loads((HERE / "DeciLMForCausalLM" / "config.json").read_text())
    want = {
        f"model.layers.{i}.self_attn.attn": max(1, 64 // b["attention"]["n_heads_in_group"] // 2)
        for i, b in enumerate(raw["block_configs"])
        if not b["attention"]["no_op"]
    }
    caches = FAMILIES[model.family].caches(model, Options(tensor_parallel_size=2))
    assert {c.name: c.num_kv_heads for c in caches} == want
