"""Multimodal wrappers (kvviz.families.wrappers, issue 27) against a hand derivation from each cited
vLLM 0.33 model file: the wrapper builds its language model with init_vllm_registered_model (or the
class itself) from one part of its config, under maybe_prefix(prefix, "<name>") (models/utils.py).
So the wrapper's plan must equal the plan of that text config read alone as the language model's
architecture, field for field (groups, pages, bytes per block, num_blocks, blocks per request, the
capacity line), except that every layer name carries the wrapper's prefix. The configs are
transformers' defaults of the wrapper's model_type where transformers knows it, else small configs
written here with the fields the model file reads."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest

import kvviz
from kvviz.base.errors import KvvizError
from kvviz.families.refused import REFUSED
from kvviz.families.registry import ARCHITECTURES
from kvviz.families.wrapper_records import RECORDS as WRAPPER_RECORDS

WRAPPERS = {n: r for r in WRAPPER_RECORDS for n in r.names}  # every wrapper record, by each of its names

BUDGET = 8 << 30
KNOBS = ({}, {"tensor_parallel_size": 2}, {"kv_dtype": "fp8", "max_model_len": 8192})


def _write(tmp_path, name: str, raw: dict) -> str:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(raw))
    return str(folder)


def _default(model_type: str) -> dict:
    from transformers import AutoConfig

    return AutoConfig.for_model(model_type).to_dict()


def _comparable(plan, rename) -> dict:
    out = plan.to_json(budget_bytes=BUDGET)
    for part in (out, out.get("summary", {})):
        for key in ("model", "describe", "family", "name"):  # the config's folder name and family differ
            part.pop(key, None)
    text = json.dumps(out, sort_keys=True, default=str)
    return json.loads(rename(text))


def _check(tmp_path, wrapper: dict, alone: dict, head: str, strip: str = "model."):
    """The wrapper's plan equals the text config's own plan with every layer name `strip...` -> `head + ...`."""
    w = kvviz.load(_write(tmp_path, "wrapper", wrapper))
    lm = kvviz.load(_write(tmp_path, "alone", alone))
    assert w.family == f"multimodal_{lm.family}"
    assert "encoder cache" in w.describe() and "not in the KV pool" in w.describe()
    for knobs in KNOBS:
        pw, pl = kvviz.plan(w, **knobs), kvviz.plan(lm, **knobs)
        names_w = [c.name for g in pw.groups for c in g.layers]
        names_l = [c.name for g in pl.groups for c in g.layers]
        assert names_l and all(n.startswith(strip) for n in names_l)
        assert names_w == [head + n[len(strip) :] for n in names_l]
        assert _comparable(pw, lambda s: s) == _comparable(pl, lambda s: s.replace(f'"{strip}', f'"{head}'))
        assert pw.block_stride == pl.block_stride
        cw, cl = pw.capacity(BUDGET), pl.capacity(BUDGET)
        assert dataclasses.replace(cw, model=cl.model) == cl


def _text(raw: dict, key: str = "text_config", **over) -> dict:
    out = copy.deepcopy(raw[key])
    out.update(over)
    return out


def test_llava_text_config_under_language_model(tmp_path):
    # llava.py LlavaForConditionalGeneration.__init__: hf_config=config.text_config (its own
    # architectures: none here, so transformers' causal LM of model_type llama), prefix "language_model"
    raw = dict(_default("llava"), architectures=["LlavaForConditionalGeneration"], dtype="bfloat16")
    alone = _text(raw, architectures=["LlamaForCausalLM"], dtype="bfloat16")
    _check(tmp_path, raw, alone, "language_model.model.", "model.")


def test_qwen2_vl_top_config_read_as_qwen2(tmp_path):
    # qwen2_vl.py: architectures=["Qwen2ForCausalLM"], no hf_config; qwen2.py reads get_text_config()
    # (the text_config) and takes hidden_size // num_attention_heads as its head size
    raw = dict(_default("qwen2_vl"), architectures=["Qwen2VLForConditionalGeneration"], dtype="bfloat16")
    alone = _text(raw, architectures=["Qwen2ForCausalLM"], model_type="qwen2", dtype="bfloat16")
    _check(tmp_path, raw, alone, "language_model.model.", "model.")


def test_qwen3_vl_moe_text_config_as_qwen3_moe(tmp_path):
    # qwen3_vl_moe.py: Qwen3MoeLLMForCausalLM(with_hf_config(config.text_config, ["Qwen3MoeForCausalLM"]))
    raw = dict(_default("qwen3_vl_moe"), architectures=["Qwen3VLMoeForConditionalGeneration"], dtype="bfloat16")
    alone = _text(raw, architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe", dtype="bfloat16")
    _check(tmp_path, raw, alone, "language_model.model.", "model.")


def test_paligemma_gemma_text_config(tmp_path):
    # paligemma.py: hf_config=config.text_config (Gemma), prefix "language_model"
    raw = dict(_default("paligemma"), architectures=["PaliGemmaForConditionalGeneration"], dtype="bfloat16")
    alone = _text(raw, architectures=["GemmaForCausalLM"], dtype="bfloat16")
    _check(tmp_path, raw, alone, "language_model.model.", "model.")


def test_cohere2_vision_sliding_layers(tmp_path):
    # cohere2_vision.py: architectures=config.text_config.architectures (Cohere2, sliding + full layers)
    raw = dict(_default("cohere2_vision"), architectures=["Cohere2VisionForConditionalGeneration"], dtype="bfloat16")
    raw["text_config"]["architectures"] = ["Cohere2ForCausalLM"]
    alone = _text(raw, dtype="bfloat16")
    _check(tmp_path, raw, alone, "language_model.model.", "model.")


def test_qwen2_5_omni_thinker_text_config(tmp_path):
    # qwen2_5_omni_thinker.py: hf_config=thinker_config.text_config, architectures=["Qwen2ForCausalLM"]
    raw = dict(_default("qwen2_5_omni"), architectures=["Qwen2_5OmniForConditionalGeneration"], dtype="bfloat16")
    alone = copy.deepcopy(raw["thinker_config"]["text_config"])
    alone.update(architectures=["Qwen2ForCausalLM"], model_type="qwen2", dtype="bfloat16")
    _check(tmp_path, raw, alone, "language_model.model.", "model.")


def test_idefics3_bare_llama_model_under_text_model(tmp_path):
    # idefics3.py: Idefics3Model under "model" builds LlamaModel (not LlamaForCausalLM) under
    # "text_model": model.text_model.layers.N.self_attn.attn
    raw = dict(_default("idefics3"), architectures=["Idefics3ForConditionalGeneration"], dtype="bfloat16")
    alone = _text(raw, architectures=["LlamaForCausalLM"], dtype="bfloat16")
    _check(tmp_path, raw, alone, "model.text_model.", "model.")


SMALL_LLAMA = {
    "model_type": "llama",
    "hidden_size": 1024,
    "num_hidden_layers": 6,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "intermediate_size": 2048,
    "vocab_size": 32000,
    "max_position_embeddings": 16384,
}


def test_phi3v_top_config_without_prefix(tmp_path):
    # phi3v.py Phi3VForCausalLM.__init__: LlamaForCausalLM from the top config, prefix="" (custom
    # config: transformers does not know phi3_v); names stay model.layers.N.self_attn.attn
    raw = dict(SMALL_LLAMA, model_type="phi3_v", architectures=["Phi3VForCausalLM"], torch_dtype="bfloat16")
    alone = dict(SMALL_LLAMA, architectures=["LlamaForCausalLM"], torch_dtype="bfloat16")
    _check(tmp_path, raw, alone, "model.", "model.")


def test_ovis2_5_text_config_under_llm(tmp_path):
    # ovis2_5.py Ovis2_5.__init__: with_hf_config(config.text_config), prefix=maybe_prefix(prefix, "llm")
    text = dict(SMALL_LLAMA, model_type="qwen3", head_dim=128, architectures=["Qwen3ForCausalLM"])
    raw = {"model_type": "ovis2_5", "architectures": ["Ovis2_5"], "text_config": text, "torch_dtype": "bfloat16"}
    _check(tmp_path, raw, dict(text, torch_dtype="bfloat16"), "llm.model.", "model.")


SMALL_DEEPSEEK = {
    "model_type": "deepseek_v3",
    "hidden_size": 1024,
    "num_hidden_layers": 4,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "kv_lora_rank": 512,
    "q_lora_rank": 256,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128,
    "v_head_dim": 128,
    "intermediate_size": 2048,
    "moe_intermediate_size": 512,
    "vocab_size": 32000,
    "max_position_embeddings": 16384,
}


def test_kimi_vl_mla_language_model(tmp_path):
    # kimi_vl.py: hf_config=config.text_config, architectures=["DeepseekV2ForCausalLM"] (MLA)
    raw = {
        "model_type": "kimi_vl",
        "architectures": ["KimiVLForConditionalGeneration"],
        "text_config": SMALL_DEEPSEEK,
        "torch_dtype": "bfloat16",
    }
    alone = dict(SMALL_DEEPSEEK, architectures=["DeepseekV2ForCausalLM"], torch_dtype="bfloat16")
    _check(tmp_path, raw, alone, "language_model.model.", "model.")


def test_deepseek_vl2_prefix_language(tmp_path):
    # deepseek_vl2.py: hf_config=self.text_config, prefix=maybe_prefix(prefix, "language")
    text = dict(SMALL_DEEPSEEK, architectures=["DeepseekV3ForCausalLM"])
    raw = {"model_type": "deepseek_vl_v2", "architectures": ["DeepseekVLV2ForCausalLM"], "text_config": text}
    raw["torch_dtype"] = "bfloat16"
    _check(tmp_path, raw, dict(text, torch_dtype="bfloat16"), "language.model.", "model.")


def test_every_wrapper_is_planned_once_its_language_model_is():
    for arch, entry in WRAPPERS.items():
        if entry.lm is None or entry.lm in ARCHITECTURES:
            assert ARCHITECTURES[arch] == "multimodal", arch
        else:  # refused, naming the rule, until the language model's family reads it
            assert arch not in ARCHITECTURES and REFUSED[arch], arch


def test_refusals_name_the_rule(tmp_path):
    # voxtral_realtime.py: its causal audio encoder registers pooled KV (whisper_causal.py)
    raw = {"model_type": "voxtral_realtime", "architectures": ["VoxtralRealtimeGeneration"]}
    with pytest.raises(KvvizError, match="causal audio encoder registers KV"):
        kvviz.load(_write(tmp_path, "voxtral_realtime", raw))
    # step_vl.py (planned, its language model from text_config): a config without one is one line
    raw = {"model_type": "step_vl", "architectures": ["StepVLForConditionalGeneration"]}
    with pytest.raises(KvvizError, match="config has no text_config object"):
        kvviz.load(_write(tmp_path, "step_vl", raw))
    # a wrapper kvviz reads, whose text config names a language model kvviz does not plan
    raw = dict(_default("llava"), architectures=["LlavaForConditionalGeneration"])
    raw["text_config"]["architectures"] = ["WhisperForConditionalGeneration"]  # encoder-decoder: refused
    with pytest.raises(KvvizError, match="builds language model WhisperForConditionalGeneration from text_config"):
        kvviz.load(_write(tmp_path, "llava_minicpm", raw))


def test_missing_text_config_is_one_line(tmp_path):
    raw = {"model_type": "ovis2_5", "architectures": ["Ovis2_5"], "torch_dtype": "bfloat16"}
    with pytest.raises(KvvizError, match="no text_config"):
        kvviz.load(_write(tmp_path, "ovis_bare", raw))


def test_lfm2_vl_state_language_model_under_language(tmp_path):
    # lfm2_vl.py Lfm2VLForConditionalGeneration.__init__: hf_config=config.text_config,
    # architectures=config.text_config.architectures (none: transformers' causal LM of lfm2),
    # prefix=maybe_prefix(prefix, "language"); short-conv and attention layers, read by the state family
    raw = dict(_default("lfm2_vl"), architectures=["Lfm2VlForConditionalGeneration"], dtype="bfloat16")
    text = raw["text_config"]
    n = text["num_hidden_layers"]
    text.update(conv_dim=text["hidden_size"], full_attn_idxs=[2, 5])
    text["layer_types"] = ["full_attention" if i in (2, 5) else "conv" for i in range(n)]
    alone = _text(raw, architectures=["Lfm2ForCausalLM"], dtype="bfloat16")
    _check(tmp_path, raw, alone, "language.model.", "model.")


def test_glm4v_moe_language_model(tmp_path):
    # glm4_1v.py Glm4vForConditionalGeneration.__init__: model_type glm4v_moe -> Glm4MoeForCausalLM (text_config)
    raw = dict(_default("glm4v_moe"), architectures=["Glm4vMoeForConditionalGeneration"], torch_dtype="bfloat16")
    text = dict(raw["text_config"], model_type="glm4_moe", architectures=["Glm4MoeForCausalLM"], torch_dtype="bfloat16")
    _check(tmp_path, raw, text, "language_model.model.", "model.")
