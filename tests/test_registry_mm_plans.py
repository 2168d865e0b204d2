"""Multimodal wrappers of kvviz.families.wrapper_records (issue 27) against vLLM 0.33's own plans.

tests/data/vllm-0.33/registry-mm/plans.json holds what vLLM 0.33.0 itself planned, with its real model
construction on the meta device (scripts/vllm_reference_plans.py), for the configs beside it (see that
folder's README: transformers' default configs where transformers knows the model_type, else small
configs with the fields the model file reads). Every case must plan exactly as vLLM did (test_registry_plans._compare).

Where vLLM's construction cannot run here (a tokenizer the wrapper asks for, a custom-code vision tower),
the wrapper's plan must equal the plan of its text config read alone as the class the model file builds,
with every layer name under the prefix the file gives it (test_wrappers._check), the prefix and the class
cited from the model file in each test.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from test_registry_plans import _compare
from test_wrappers import BUDGET, KNOBS, SMALL_LLAMA, _check, _write

import kvviz
from kvviz.base.errors import KvvizError
from kvviz.families.registry import ARCHITECTURES
from kvviz.families.wrapper_records import RECORDS as WRAPPER_RECORDS

MORE_WRAPPERS = [n for r in WRAPPER_RECORDS for n in r.names]  # every wrapper record's names

HERE = Path(__file__).parent / "data" / "vllm-0.33" / "registry-mm"
PLANS = json.loads((HERE / "plans.json").read_text())
CASES = PLANS["cases"]

QWEN2 = dict(SMALL_LLAMA, model_type="qwen2", hidden_size=1536, num_attention_heads=12, num_key_value_heads=2)
QWEN3 = dict(SMALL_LLAMA, model_type="qwen3", head_dim=128, num_attention_heads=16, num_key_value_heads=8)


@pytest.mark.parametrize("arch", sorted(CASES))
def test_plan_equals_vllm_033(arch):
    case = CASES[arch]
    assert case["architecture"] == arch
    model = kvviz.load(str(HERE / case["config_path"]))
    assert model.family.startswith("multimodal_")
    assert "not in the KV pool" in model.describe()
    _compare(model, case)


def test_every_entry_is_planned():
    for arch in MORE_WRAPPERS:
        assert ARCHITECTURES[arch] == "multimodal", arch


# minicpmv.py MiniCPMV.__new__ picks the class by config.version (_SUPPORT_VERSION), which builds its LLM
# with init_llm(vllm_config, prefix=maybe_prefix(prefix, "llm")) from the top config (MiniCPMVBaseModel):
# 2.5 and 4.0 LlamaForCausalLM, 2.6 Qwen2ForCausalLM, 4.5 Qwen3ForCausalLM -> llm.model.layers.N.self_attn.attn
@pytest.mark.parametrize(
    ("version", "text", "lm"),
    [
        ("2.5", SMALL_LLAMA, "LlamaForCausalLM"),
        (None, SMALL_LLAMA, "LlamaForCausalLM"),  # no version, not (hidden_size 2304, query_num 64): 2.5
        (4.0, SMALL_LLAMA, "LlamaForCausalLM"),
        (2.6, QWEN2, "Qwen2ForCausalLM"),
        ("4.5", QWEN3, "Qwen3ForCausalLM"),
    ],
)
def test_minicpmv_version_picks_the_llm(tmp_path, version, text, lm):
    raw = dict(text, model_type="minicpmv", architectures=["MiniCPMV"], torch_dtype="bfloat16", query_num=64)
    if version is not None:
        raw["version"] = version
    alone = dict(text, architectures=[lm], torch_dtype="bfloat16")
    _check(tmp_path, raw, alone, "llm.model.", "model.")


def test_minicpmv_2_0_builds_minicpm(tmp_path):
    # minicpmv.py MiniCPMV2_0.init_llm: MiniCPMForCausalLM (no version, hidden_size 2304, query_num 64: 2.0)
    raw = dict(SMALL_LLAMA, hidden_size=2304, num_attention_heads=36, query_num=64, model_type="minicpmv")
    raw.update(architectures=["MiniCPMV"], torch_dtype="bfloat16")
    if "MiniCPMForCausalLM" in ARCHITECTURES:
        _check(tmp_path, raw, dict(raw, model_type="minicpm", architectures=["MiniCPMForCausalLM"]), "llm.model.")
    else:
        with pytest.raises(KvvizError, match="builds language model MiniCPMForCausalLM from top config"):
            kvviz.load(_write(tmp_path, "minicpmv2", raw))


def test_minicpmv_unserved_version_is_refused(tmp_path):
    raw = dict(SMALL_LLAMA, model_type="minicpmv", architectures=["MiniCPMV"], version="3.0")
    with pytest.raises(KvvizError, match=r"version='3.0': vLLM 0.33 serves versions 2.0, 2.5, 2.6, 4.0, 4.5"):
        kvviz.load(_write(tmp_path, "minicpmv3", raw))


# minicpmo.py MiniCPMO.__new__: version[:2], no version 2.6; MiniCPMO2_6 (Qwen2), MiniCPMO4_5 (Qwen3), under "llm"
@pytest.mark.parametrize(
    ("version", "text", "lm"), [(None, QWEN2, "Qwen2ForCausalLM"), ("4.5.1", QWEN3, "Qwen3ForCausalLM")]
)
def test_minicpmo_version_picks_the_llm(tmp_path, version, text, lm):
    raw = dict(text, model_type="minicpmo", architectures=["MiniCPMO"], torch_dtype="bfloat16")
    if version is not None:
        raw["version"] = version
    _check(tmp_path, raw, dict(text, architectures=[lm], torch_dtype="bfloat16"), "llm.model.", "model.")


def test_isaac_text_config_as_qwen3(tmp_path):
    # isaac.py IsaacForConditionalGeneration.__init__: init_vllm_registered_model(architectures=
    # ["Qwen3ForCausalLM"], prefix=maybe_prefix(prefix, "language_model")), no hf_config: Qwen3's layers read
    # get_text_config(), IsaacConfig's text_config (transformers_utils/configs/isaac.py). vLLM's construction
    # asks the tokenizer for the vision token (_resolve_vision_token_id), so it cannot run without a checkout.
    raw = {"model_type": "isaac", "architectures": ["IsaacForConditionalGeneration"], "text_config": QWEN3}
    raw.update(vision_config={}, torch_dtype="bfloat16")
    _check(
        tmp_path, raw, dict(QWEN3, architectures=["Qwen3ForCausalLM"], torch_dtype="bfloat16"), "language_model.model."
    )


def test_ultravox_text_model_id_is_refused_naming_the_field(tmp_path):
    # transformers_utils/configs/ultravox.py UltravoxConfig.__setattr__: text_model_id loads another checkout
    raw = {"model_type": "ultravox", "architectures": ["UltravoxModel"], "text_model_id": "meta-llama/Llama-3.1-8B"}
    with pytest.raises(KvvizError, match="text_model_id='meta-llama/Llama-3.1-8B': vLLM reads the language model's"):
        kvviz.load(_write(tmp_path, "ultravox_id", raw))


def test_ultravox_text_config_without_model_type_is_llama(tmp_path):
    # UltravoxConfig.__init__: CONFIG_MAPPING[text_config.get("model_type", "llama")](**text_config)
    text = {k: v for k, v in SMALL_LLAMA.items() if k != "model_type"}
    raw = {"model_type": "ultravox", "architectures": ["UltravoxModel"], "text_config": text, "torch_dtype": "bfloat16"}
    _check(
        tmp_path,
        raw,
        dict(SMALL_LLAMA, architectures=["LlamaForCausalLM"], torch_dtype="bfloat16"),
        "language_model.model.",
    )


def test_ovis_serves_three_text_model_types(tmp_path):
    # ovis.py Ovis.__init__: IMAGE_PAD_TOKEN_ID_MAP[text_model_type] (gemma2, llama, qwen2), else KeyError
    raw = {
        "model_type": "ovis",
        "architectures": ["Ovis"],
        "llm_config": dict(QWEN3, architectures=["Qwen3ForCausalLM"]),
    }
    with pytest.raises(KvvizError, match="llm_config.model_type='qwen3': vLLM's Ovis serves gemma2, llama, qwen2"):
        kvviz.load(_write(tmp_path, "ovis_qwen3", raw))


def test_molmo_head_from_hidden(tmp_path):
    # molmo.py MolmoForCausalLM.__init__: MolmoModel under "model" from the top config; MolmoAttention: head size
    # hidden_size // num_attention_heads whatever head_dim says, KV heads num_key_value_heads or the heads.
    # Custom code (no transformers class): the same rules as Qwen2's (qwen2.py Qwen2Attention), read alone as it.
    text = dict(QWEN2, head_dim=64, num_key_value_heads=None)
    raw = dict(text, model_type="molmo", architectures=["MolmoForCausalLM"], torch_dtype="bfloat16")
    alone = dict(text, num_key_value_heads=QWEN2["num_attention_heads"], architectures=["Qwen2ForCausalLM"])
    _check(tmp_path, raw, dict(alone, torch_dtype="bfloat16"), "model.", "model.")


def test_interns1_pro_text_config(tmp_path):
    # interns1_pro.py InternS1ProForConditionalGeneration.__init__: InternS1ProMoeLLMForCausalLM under
    # "language_model"; InternS1ProMoeAttention: head_dim or hidden_size // heads, num_key_value_heads, full
    # attention, as qwen3_moe.py Qwen3MoeAttention (custom code config: read alone as Qwen3-MoE)
    text = dict(QWEN3, model_type="qwen3_moe", num_experts=8, num_experts_per_tok=2, moe_intermediate_size=512)
    raw = {"model_type": "interns1_pro", "architectures": ["InternS1ProForConditionalGeneration"], "text_config": text}
    raw["torch_dtype"] = "bfloat16"
    alone = dict(text, architectures=["Qwen3MoeForCausalLM"], torch_dtype="bfloat16")
    _check(tmp_path, raw, alone, "language_model.model.", "model.")


def _data(arch: str) -> dict:
    return _data_of(HERE, arch)


def _data_of(root: Path, arch: str) -> dict:
    return json.loads((root / arch / "config.json").read_text())


def test_fireredasr2_qwen2_under_model_decoder(tmp_path):
    # fireredasr2.py FireRedASR2ForConditionalGeneration.__init__: FireRedASR2Model under "model", whose
    # Qwen2ForCausalLM(vllm_config, prefix=maybe_prefix(prefix, "decoder")) reads the top config (a Qwen2Config):
    # model.decoder.model.layers.N.self_attn.attn. vLLM's construction on the meta device stops in the Conformer
    # encoder (Tensor.item() on a meta tensor), so the plan is the top config's alone as Qwen2ForCausalLM.
    raw = _data("FireRedASR2ForConditionalGeneration")
    alone = dict(raw, architectures=["Qwen2ForCausalLM"])
    _check(tmp_path, raw, alone, "model.decoder.model.", "model.")


def test_funasr_bare_qwen3_model_under_model_decoder(tmp_path):
    # funasr.py FunASRModel.__init__ (under "model"): Qwen3Model(vllm_config, prefix=maybe_prefix(prefix,
    # "decoder")), the bare model from the top config (a Qwen3Config): model.decoder.layers.N.self_attn.attn
    raw = _data("FunASRForConditionalGeneration")
    alone = dict(raw, architectures=["Qwen3ForCausalLM"])
    _check(tmp_path, raw, alone, "model.decoder.", "model.")


def test_ernie45_vl_reads_the_top_config(tmp_path):
    # ernie45_vl.py Ernie4_5_VLMoeForConditionalGeneration.__init__: Ernie4_5_VLMoeForCausalLM under
    # "language_model" from vllm_config.model_config.hf_config, the checkpoint's flat custom-code config
    # (ernie45_vl_moe.py Ernie4_5_VLMoeDecoderLayer: num_attention_heads, num_key_value_heads, head_dim or
    # hidden_size // heads, as ernie45_moe.py Ernie4_5_MoeAttention). transformers' nested ernie4_5_vl_moe
    # config has none of those fields at the top, and vLLM's construction fails on it.
    text = dict(SMALL_LLAMA, model_type="ernie4_5_moe", moe_num_experts=8, moe_k=2, moe_intermediate_size=512)
    raw = dict(text, model_type="ernie4_5_moe_vl", architectures=["Ernie4_5_VLMoeForConditionalGeneration"])
    raw.update(torch_dtype="bfloat16", vision_config={})
    alone = dict(text, architectures=["Ernie4_5_MoeForCausalLM"], torch_dtype="bfloat16")
    _check(tmp_path, raw, alone, "language_model.model.", "model.")


def test_molmo2_text_model_under_model(tmp_path):
    # molmo2.py Molmo2ForConditionalGeneration.__init__: Molmo2TextModel under "model" reads text_config into its
    # TextConfig; Molmo2Attention: config.head_dim (asserted hidden_size // heads), num_key_value_heads, full
    # attention: model.layers.N.self_attn.attn, as llama.py LlamaAttention reads the same fields. vLLM's
    # construction needs the checkpoint's vit_config (its own config class); without one kvviz refuses as well.
    text = dict(SMALL_LLAMA, model_type="molmo2_text", head_dim=64)
    raw = {"model_type": "molmo2", "architectures": ["Molmo2ForConditionalGeneration"], "text_config": text}
    raw.update(vit_config={}, torch_dtype="bfloat16")
    alone = dict(text, model_type="llama", architectures=["LlamaForCausalLM"], torch_dtype="bfloat16")
    _check(tmp_path, raw, alone, "model.", "model.")
    del raw["vit_config"]
    with pytest.raises(KvvizError, match="config has no vit_config"):
        kvviz.load(_write(tmp_path, "molmo2_no_vit", raw))


@pytest.mark.parametrize(
    "arch",
    [
        "MiniCPMV4_6ForConditionalGeneration",
        "MiniCPMV4_7ForConditionalGeneration",
        "MiniCPMOcrForConditionalGeneration",
    ],
)
def test_minicpmv4_6_qwen3_5_under_language_model(tmp_path, arch):
    # minicpmv4_6.py MiniCPMV4_6ForConditionalGeneration.__init__ (4.7 and OCR inherit it): Qwen3_5ForCausalLM(
    # vllm_config, prefix=maybe_prefix(prefix, "language_model")), which reads hf_text_config (text_config).
    # vLLM's own plan of these configs (plans.json off_target) was made off CUDA: qwen_gdn_linear_attn.py
    # _resolve_gdn_prefill_backend returns 'triton' when not current_platform.is_cuda(), and 'flashinfer' on SM90
    # (the H200). Only FlashInfer sets _checkpoint_alignment = FLASHINFER_GDN_CHECKPOINT_ALIGNMENT (64, gdn_attn.py)
    # and get_kv_cache_spec's num_prefill_checkpoint_blocks=1 (QwenGatedDeltaNetAttention); platforms/interface.py
    # _align_hybrid_block_size lcm's the alignment into the attention block: 320 on the H200, 272 in the reference.
    # So on the H200 the wrapper's plan must equal its text config's alone as Qwen3_5ForCausalLM (whose H200 plan
    # test_registry_plans compares with vLLM's) ...
    raw = _data(arch)
    alone = dict(raw["text_config"], architectures=["Qwen3_5ForCausalLM"], dtype="bfloat16")
    _check(tmp_path, raw, alone, "language_model.model.", "model.")
    # ... and with the triton backend's rule (MambaBase's spec: no checkpoint block, no alignment; kvviz's "gdn/base",
    # as OLMo-Hybrid's layers) it must equal vLLM's own off-CUDA plan field for field
    case = PLANS["off_target"]["cases"][arch]
    model = kvviz.load(str(HERE / case["config_path"]))
    wrapped = model.config
    lm = dataclasses.replace(wrapped.lm, config=dataclasses.replace(wrapped.lm.config, state_backend="gdn/base"))
    _compare(dataclasses.replace(model, config=dataclasses.replace(wrapped, lm=lm)), case)
    assert case["settings"]["block_size"] == 272 and kvviz.plan(model).groups[0].layers[0].tokens_per_block == 320


@pytest.mark.parametrize(
    "arch",
    [
        "MiniCPMV4_6ForConditionalGeneration",
        "MiniCPMV4_7ForConditionalGeneration",
        "MiniCPMOcrForConditionalGeneration",
    ],
)
def test_minicpmv4_6_ignores_mamba_ssm_dtype(tmp_path, arch):
    # config/vllm.py VllmConfig.try_verify_and_update_config: MODELS_CONFIG_MAP.get(model_config.architecture), the
    # wrapper's architecture, which models/config.py MODELS_CONFIG_MAP does not list (Qwen3_5ForCausalLM and
    # Qwen3_5(Moe)ForConditionalGeneration map to Qwen3_5ForConditionalGenerationConfig, which copies hf_text_config
    # .mamba_ssm_dtype into cache_config.mamba_ssm_cache_dtype). So a text config's mamba_ssm_dtype float32 leaves
    # the wrapper's states in the model dtype (bf16), while Qwen3_5ForCausalLM alone keeps them in float32.
    raw = _data(arch)
    base = kvviz.plan(kvviz.load(_write(tmp_path, "base", raw)))
    raw["text_config"]["mamba_ssm_dtype"] = "float32"
    with_field = kvviz.plan(kvviz.load(_write(tmp_path, "f32", raw)))
    assert with_field.block_stride == base.block_stride
    assert [c.page_bytes for g in with_field.groups for c in g.layers] == [
        c.page_bytes for g in base.groups for c in g.layers
    ]
    alone = dict(raw["text_config"], architectures=["Qwen3_5ForCausalLM"], dtype="bfloat16")
    assert kvviz.plan(kvviz.load(_write(tmp_path, "alone", alone))).block_stride > base.block_stride


@pytest.mark.parametrize("arch", ["Moondream3ForCausalLM", "HfMoondream"])
def test_moondream3_text_blocks(tmp_path, arch):
    # moondream3.py Moondream3ForCausalLM.__init__: Moondream3Config(config=...).text_config, a Moondream3TextConfig
    # (transformers_utils/configs/moondream3.py: dim, n_heads, n_kv_heads, n_layers, max_context, with defaults),
    # under Moondream3TextModel(prefix "text"), blocks under "blocks", Moondream3Attention at ".attn" (head size
    # dim // n_heads, n_kv_heads): text.blocks.N.attn.attn; as Llama of those sizes, read alone
    raw = dict(_data("Moondream3ForCausalLM"), architectures=[arch])
    t = raw["config"]["text"]
    alone = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "dtype": "bfloat16", "vocab_size": 51200}
    alone.update(hidden_size=t["dim"], num_hidden_layers=t["n_layers"], num_attention_heads=t["n_heads"])
    alone.update(num_key_value_heads=t["n_kv_heads"], intermediate_size=t["ff_dim"], max_position_embeddings=4096)
    w, lm = kvviz.load(_write(tmp_path, "w", raw)), kvviz.load(_write(tmp_path, "alone", alone))
    assert "not in the KV pool" in w.describe()
    for knobs in KNOBS:
        pw, pl = kvviz.plan(w, **knobs), kvviz.plan(lm, **knobs)
        names = [
            c.name.replace("model.layers.", "text.blocks.").replace(".self_attn.attn", ".attn.attn")
            for g in pl.groups
            for c in g.layers
        ]
        assert [c.name for g in pw.groups for c in g.layers] == names
        assert pw.block_stride == pl.block_stride
        cw, cl = pw.capacity(BUDGET), pl.capacity(BUDGET)
        assert dataclasses.replace(cw, model=cl.model) == cl
    # defaults of Moondream3TextConfig where config.text says nothing: 24 layers, 32 heads of 2048 // 32
    bare = kvviz.load(_write(tmp_path, "bare", {"model_type": "moondream3", "architectures": [arch]}))
    c = bare.config
    assert (c.num_hidden_layers, c.num_key_value_heads, c.head_dim, bare.max_model_len) == (24, 32, 64, 4096)


BACKEND_MM = Path(__file__).parent / "data" / "vllm-0.33" / "registry" / "transformers-backend"


@pytest.mark.parametrize(
    ("arch", "decoder"),
    [
        ("Emu3ForConditionalGeneration", "text_model"),
        ("HunYuanVLForConditionalGeneration", "language_model"),
        ("VibeVoiceAsrForConditionalGeneration", "language_model"),
    ],
)
def test_transformers_backend_multimodal(tmp_path, arch, decoder):
    # registry.py _TRANSFORMERS_SUPPORTED_MODELS: TransformersMultiModalForCausalLM (transformers/multimodal.py,
    # MultiModalMixin over base.py Base). Base._create_attention_instances: for i in range(text_config.
    # num_hidden_layers) one Attention named maybe_prefix(prefix, f"{attn_prefix}.attn"), attn_prefix the qualname of
    # layer i's HF attention module in the vLLM model, whose `model` is transformers' AutoModel of the whole config
    # (Base._create_model): Emu3Model.text_model, HunYuanVLModel.language_model, VibeVoiceAsrModel.language_model
    # (transformers 5.x modeling files; AutoModel.from_config on the meta device lists <decoder>.layers.N.self_attn);
    # head size model_arch_config.head_size (head_dim, else hidden_size // heads), KV heads num_key_value_heads,
    # full attention (no sliding_window): the plan of a Llama of the text config's sizes (llama.py LlamaAttention,
    # the same three rules) with model.layers. -> model.<decoder>.layers. vLLM's construction could not run here: its
    # multimodal processing info asks for the checkpoint's HF processor (preprocessor_config.json and a tokenizer).
    raw = _data_of(BACKEND_MM, arch)
    t = raw["text_config"]
    heads = t["num_attention_heads"]
    alone = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "dtype": "bfloat16"}
    alone.update(hidden_size=t["hidden_size"], num_hidden_layers=t["num_hidden_layers"], num_attention_heads=heads)
    alone.update(num_key_value_heads=t.get("num_key_value_heads") or heads, head_dim=t.get("head_dim"))
    alone.update(max_position_embeddings=t["max_position_embeddings"], vocab_size=t["vocab_size"])
    assert t.get("sliding_window") is None
    _check(tmp_path, dict(raw, dtype="bfloat16"), alone, f"model.{decoder}.", "model.")


def test_hunyuan_vl_needs_head_dim(tmp_path):
    # transformers modeling_hunyuan_vl.py HunYuanVLDenseV1Attention: getattr(config, "head_dim", ...) ** -0.5, and
    # HunYuanVLTextConfig's head_dim is None by default: the model the backend builds fails without it
    raw = _data_of(BACKEND_MM, "HunYuanVLForConditionalGeneration")
    raw["text_config"]["head_dim"] = None
    with pytest.raises(KvvizError, match="head_dim: transformers' HunYuan attention needs it"):
        kvviz.load(_write(tmp_path, "hyvl", raw))
