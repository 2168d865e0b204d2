"""kvviz against vLLM 0.33's own plans of the architectures whose layer kinds carry their own KV heads / head
sizes, or whose KV heads are not the config's (issue 27, kvviz.families.decoder_kinds): MiMo-V2-Flash and
MiMo-V2 (mimo_v2.py), Step 3.5 (step3p5.py), Step 3 text (step3_text.py), and the multimodal wrappers around
them (MiMo-V2-Omni, Step3-VL, StepVL, Step 3.7) and Gemma 4 Unified.

tests/data/vllm-0.33/registry-kinds/plans.json was written by scripts/vllm_reference_plans.py (vLLM 0.33.0's
own model class built on the meta device from each config.json beside it; see that folder's README); every
case must match field for field (tests/test_registry_plans.py _compare). The wrappers are also tested as
tests/test_wrappers.py tests every wrapper (the wrapper's plan equals the plan of its text config read alone,
every layer name under the wrapper's prefix); StepVL (custom code) and Step 3.7 (vLLM 0.33 does not build it
from transformers 5.24's Step3p7Config: see the README) only so. Step 3's TP rule is derived by hand from
step3_text.py."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from test_registry_plans import _compare
from test_wrappers import _check

import kvviz
from kvviz import Options
from kvviz.base.errors import KvvizError

HERE = Path(__file__).parent / "data" / "vllm-0.33" / "registry-kinds"
PLANS = json.loads((HERE / "plans.json").read_text())
CASES = PLANS["cases"]
MNBT = "max_num_batched_tokens=8192"
# the folder tested against its text config's own plan (below) only: vLLM's run failed (plans.json failures)
BY_TEXT_CONFIG = {"Step3p7ForConditionalGeneration"}


def _raw(arch: str) -> dict:
    return json.loads((HERE / arch / "config.json").read_text())


def test_every_folder_has_a_reference_or_a_text_config_test():
    folders = {p.parent.name for p in HERE.glob("*/config.json")}
    assert folders == set(CASES) | BY_TEXT_CONFIG
    assert not set(PLANS["failures"]) - BY_TEXT_CONFIG


@pytest.mark.parametrize("arch", sorted(CASES))
def test_plan_equals_vllm_033(arch):
    _compare(kvviz.load(str(HERE / arch)), CASES[arch])


# --- wrappers: the plan of the text config, under the wrapper's prefix -------------------------------------


def test_step3_vl_text_config_under_language_model(tmp_path):
    # step3_vl.py Step3VLForConditionalGeneration.__init__: init_vllm_registered_model(hf_config=
    # config.text_config, prefix=maybe_prefix(prefix, "language_model")): Step3TextForCausalLM builds
    # Step3TextModel(prefix="language_model") whose layers are f"{prefix}.layers": language_model.layers.N
    raw = _raw("Step3VLForConditionalGeneration")
    alone = dict(raw["text_config"], torch_dtype=raw["torch_dtype"])
    _check(tmp_path, raw, alone, "language_model.", ".")
    names = [
        c.name for g in kvviz.plan(kvviz.load(str(HERE / "Step3VLForConditionalGeneration"))).groups for c in g.layers
    ]
    assert names == [f"language_model.layers.{i}.self_attn.attn" for i in range(61)]


def test_step3_vl_text_config_takes_vllms_step3_text_defaults(tmp_path):
    # transformers_utils/configs/step3_vl.py Step3VLConfig.__init__: text_config = Step3TextConfig(**text_config),
    # whose max_seq_len defaults to 65536 and head_dim to 256; ModelConfig derives max_model_len from that
    raw = _raw("Step3VLForConditionalGeneration")
    for key in ("max_seq_len", "max_position_embedding", "head_dim"):
        raw["text_config"].pop(key)
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "config.json").write_text(json.dumps(raw))
    model = kvviz.load(str(tmp_path / "v"))
    assert model.max_model_len == 65536
    assert {c.page_bytes for g in kvviz.plan(model).groups for c in g.layers} == {16 * 1 * (256 + 256) * 2}


def test_step_vl_follows_its_text_config(tmp_path):
    # step_vl.py StepVLForConditionalGeneration.__init__: hf_config=config.text_config, no architectures
    # override: the text config's own class, a Step 3 text model or any other (Qwen3 here)
    text = _raw("Step3TextForCausalLM")
    raw = {"model_type": "step_vl", "architectures": ["StepVLForConditionalGeneration"], "torch_dtype": "bfloat16"}
    step3 = dict(raw, text_config={k: v for k, v in text.items() if k != "torch_dtype"})
    _check(tmp_path, step3, text, "language_model.", ".")
    qwen3 = {
        "model_type": "qwen3",
        "architectures": ["Qwen3ForCausalLM"],
        "hidden_size": 1024,
        "num_hidden_layers": 4,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "max_position_embeddings": 40960,
    }
    (tmp_path / "q").mkdir()
    _check(
        tmp_path / "q",
        dict(raw, text_config=qwen3),
        dict(qwen3, torch_dtype="bfloat16"),
        "language_model.model.",
        "model.",
    )


def test_step3p7_text_config_is_step3p5(tmp_path):
    # step3p7.py Step3p7ForConditionalGeneration.__init__: hf_config=config.text_config (transformers'
    # Step3p7TextConfig, model_type step3p5), its architectures, prefix "language_model"; here with 96 query
    # heads on sliding layers (Step-3.5-Flash's), which makes transformers' text config heterogeneous
    raw = _raw("Step3p7ForConditionalGeneration")
    raw["text_config"]["num_sliding_attention_heads"] = 96
    alone = dict(copy.deepcopy(raw["text_config"]), dtype="bfloat16")
    _check(tmp_path, raw, alone, "language_model.model.", "model.")


def test_mimo_v2_omni_top_config_under_language_model(tmp_path):
    # mimo_v2_omni.py MiMoV2OmniForCausalLM.__init__: MiMoV2FlashForCausalLM(vllm_config, prefix=
    # maybe_prefix(prefix, "language_model")) reads hf_config.get_text_config(), here the top config itself
    raw = _raw("MiMoV2OmniForCausalLM")
    alone = {k: v for k, v in raw.items() if k not in ("vision_config", "auto_map")}
    alone["architectures"] = ["MiMoV2FlashForCausalLM"]
    _check(tmp_path, raw, alone, "language_model.model.", "model.")


def test_mimo_v2_with_a_vision_config_is_built_as_omni(tmp_path):
    # model_arch_config_convertor.py MimoV2ModelArchConfigConvertor.__init__: a mimo_v2 / mimo_v2_flash config
    # with a vision_config becomes MiMoV2OmniForCausalLM, whatever its architectures say
    raw = dict(_raw("MiMoV2FlashForCausalLM"), vision_config={"depth": 2, "hidden_size": 64})
    (tmp_path / "omni").mkdir()
    (tmp_path / "omni" / "config.json").write_text(json.dumps(raw))
    model = kvviz.load(str(tmp_path / "omni"))
    assert model.architecture == "MiMoV2OmniForCausalLM" and model.family == "multimodal_decoder"
    names = [c.name for g in kvviz.plan(model).groups for c in g.layers]
    assert sorted(names) == sorted(f"language_model.model.layers.{i}.self_attn.attn" for i in range(48))


# --- TP, by hand from the model files ---------------------------------------------------------------------


@pytest.mark.parametrize("tp", [2, 8])
def test_step3_text_one_kv_head_at_every_tp(tp):
    # step3_text.py Step3TextDecoderLayer.__init__ passes Step3TextAttention(num_kv_heads=1) as a literal;
    # Step3TextAttention.__init__ keeps `self.num_kv_heads = num_kv_heads` (only the query heads are divided:
    # num_heads = 64 // tp; K and V come from a ReplicatedLinear) and builds Attention(num_heads, head_dim=256,
    # scaling, self.num_kv_heads, ...). So every rank's spec is vLLM's TP 1 spec: 1 KV head x head size 256,
    # a page of 16 tokens x 1 x (256 + 256) x 2 B = 16,384 B, 61 layers in one group: 999,424 B a block. At a
    # per-GPU budget each rank then holds what TP 1 holds: num_blocks, blocks per request, the capacity line.
    case = CASES["Step3TextForCausalLM"]
    model = kvviz.load(str(HERE / "Step3TextForCausalLM"))
    plan = kvviz.plan(model, max_model_len=case["settings"]["max_model_len"], tensor_parallel_size=tp)
    layers = [c for g in plan.groups for c in g.layers]
    assert len(plan.groups) == 1 and len(layers) == 61
    declared = model.reader.caches(model, Options(tensor_parallel_size=tp))
    assert {(c.num_kv_heads, c.head_size, c.head_size_v) for c in declared} == {(1, 256, 256)}
    assert {c.page_bytes for c in layers} == {16 * 1 * (256 + 256) * 2}
    assert plan.block_stride == 61 * 16384 == case["bytes_per_block"]
    for label, want in case["budgets"].items():
        cap, line = plan.capacity(want["available_bytes_per_gpu"]), want["capacity"][MNBT]
        assert cap.num_blocks == want["num_blocks"], label
        assert [g.blocks_per_request for g in cap.groups] == line["blocks_per_request_per_group"], label
        assert cap.kv_cache_tokens == line["gpu_kv_cache_size_tokens"], label
        assert cap.max_concurrency == pytest.approx(line["max_concurrency"], rel=1e-12), label


def test_step3_text_kv_heads_ignore_num_attention_groups(tmp_path):
    # the literal 1 of step3_text.py, whatever num_attention_groups says (vLLM does not read it there)
    raw = dict(_raw("Step3TextForCausalLM"), num_attention_groups=8)
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "config.json").write_text(json.dumps(raw))
    model = kvviz.load(str(tmp_path / "s"))
    assert {c.num_kv_heads for c in model.reader.caches(model, Options(tensor_parallel_size=8))} == {1}


@pytest.mark.parametrize("tp", [2, 8])
def test_mimo_v2_flash_kv_heads_per_kind_at_tp(tp):
    # mimo_v2.py MiMoV2Attention.__init__: num_kv_heads = max(1, total_num_kv_heads // tp_size), total
    # num_key_value_heads (4) on full layers, swa_num_key_value_heads (8) on sliding ones; head sizes 192 / 128
    model = kvviz.load(str(HERE / "MiMoV2FlashForCausalLM"))
    layers = {c.name: c for c in model.reader.caches(model, Options(tensor_parallel_size=tp))}
    pattern = _raw("MiMoV2FlashForCausalLM")["hybrid_layer_pattern"]
    for i, p in enumerate(pattern):
        c = layers[f"model.layers.{i}.self_attn.attn"]
        assert (c.num_kv_heads, c.head_size, c.head_size_v) == (max(1, (8 if p else 4) // tp), 192, 128)
        assert c.sliding_window == (128 if p else None)


def test_mimo_v2_without_hybrid_layer_pattern_is_one_line(tmp_path):
    raw = _raw("MiMoV2FlashForCausalLM")
    raw.pop("hybrid_layer_pattern")
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps(raw))
    with pytest.raises(KvvizError, match="hybrid_layer_pattern"):
        kvviz.load(str(tmp_path / "m"))
