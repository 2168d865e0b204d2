"""Writes the config folders of tests/data/vllm-0.33/registry-state/ (see its README): one per
architecture, config.json with the keys the vLLM 0.33 model file reads, and for a custom-code
architecture (no transformers config class) a configuration_ref.py naming its model_type.

usage: python tests/data/vllm-0.33/make_registry_state_configs.py
"""

import json
from pathlib import Path

ROOT = Path(__file__).parent / "registry-state"

REF = '''"""The custom-code config class of {arch} for vLLM's reference run (trust_remote_code):
a PretrainedConfig holding config.json's keys as attributes, under the model_type below."""

import transformers


class RefConfig(transformers.PretrainedConfig):
    model_type = "{model_type}"
'''


def _write(arch: str, config: dict, *, remote: bool, ref: str = REF) -> None:
    folder = ROOT / arch
    folder.mkdir(parents=True, exist_ok=True)
    config = {"architectures": [arch], **config}
    if remote:
        config["auto_map"] = {"AutoConfig": "configuration_ref.RefConfig"}
        (folder / "configuration_ref.py").write_text(ref.format(arch=arch, model_type=config["model_type"]))
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")


MLA_DIMS = dict(q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128)
MOE = dict(
    num_experts=64,
    num_experts_per_tok=8,
    num_shared_experts=1,
    moe_intermediate_size=512,
    moe_shared_expert_intermediate_size=512,
    n_group=8,
    topk_group=4,
    routed_scaling_factor=2.5,
    score_function="sigmoid",
    moe_router_enable_expert_bias=True,
    norm_topk_prob=True,
)

# Ling 2.x (Bailing) shape: hidden 4096, 32 heads of 128, vocab 157184, rope 600000 (plausible sizes)
BAILING = dict(
    hidden_size=4096,
    intermediate_size=9216,
    num_attention_heads=32,
    head_dim=128,
    vocab_size=157184,
    rms_norm_eps=1e-6,
    rope_theta=600000,
    max_position_embeddings=131072,
    use_bias=False,
    use_qkv_bias=False,
    tie_word_embeddings=False,
    hidden_act="silu",
    first_k_dense_replace=1,
    torch_dtype="bfloat16",
)


def bailing_v3() -> dict:
    # bailing_moe_v3.py: _is_kda_layer(layer_group_size=4, 22 layers): layers 3, 7, ..., 19 and the
    # tail 20, 21 are MLA, the rest KDA (short_conv_kernel_size, no_kda_lora). model_type bailing_hybrid:
    # vLLM's own BailingMoeV3TextConfig's (transformers_utils/configs/bailing_moe_v3_vl.py), one of
    # is_deepseek_mla's model types (else use_mla is off and vLLM cannot unify the MLA page)
    return dict(
        model_type="bailing_hybrid",
        num_hidden_layers=22,
        layer_group_size=4,
        short_conv_kernel_size=4,
        no_kda_lora=True,
        **BAILING,
        **MLA_DIMS,
        **MOE,
    )


def bailing_v3_vl() -> dict:
    # vLLM's own config class (transformers_utils/configs/bailing_moe_v3_vl.py BailingMoeV3VLConfig):
    # no custom code; the text config is the causal LM's, the vision config its defaults
    text = {k: v for k, v in bailing_v3().items() if k not in ("torch_dtype",)}
    return dict(model_type="bailing_moe_v3_vl", torch_dtype="bfloat16", text_config=text, vision_config={})


def bailing_v2_5() -> dict:
    # bailing_moe_linear.py: is_linear_layer(i, layer_group_size=4): (i + 1) % 4 != 0 is linear attention
    # (BailingMoELinearAttention), else MLA (BailingMoeV25MLAAttention); no tail rule, so 20, 21 are linear
    return dict(
        model_type="bailing_hybrid",
        num_hidden_layers=22,
        layer_group_size=4,
        group_norm_size=4,
        use_linear_silu=False,
        linear_rope=True,
        use_qk_norm=True,
        partial_rotary_factor=0.5,
        **BAILING,
        **MLA_DIMS,
        **MOE,
    )


def alice_ai() -> dict:
    # alice_ai.py: layer_types 'linear_attention' -> KimiGatedDeltaNetAttention `.linear_attn` with the
    # flat linear_* geometry (keys = values), 'full_attention' -> Qwen3NextAttention `.self_attn`;
    # models/config.py AliceAIForCausalLMConfig's checks (kda_allow_negative_eigenvalues false, sigmoid router,
    # bias correction)
    n = 16
    return dict(
        model_type="alice_ai",
        num_hidden_layers=n,
        layer_types=["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(n)],
        hidden_size=2048,
        num_attention_heads=16,
        num_key_value_heads=2,
        head_dim=256,
        linear_num_key_heads=16,
        linear_num_value_heads=16,
        linear_key_head_dim=128,
        linear_value_head_dim=128,
        linear_conv_kernel_dim=4,
        block_attn_res_block_size=4,
        kda_allow_negative_eigenvalues=False,
        router_score_function="sigmoid",
        router_bias_correction=True,
        num_experts=64,
        num_experts_per_tok=8,
        moe_intermediate_size=512,
        shared_expert_intermediate_size=512,
        norm_topk_prob=True,
        intermediate_size=5120,
        vocab_size=151936,
        rms_norm_eps=1e-6,
        hidden_act="silu",
        max_position_embeddings=65536,
        rope_parameters={"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25},
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )


QWEN35_REF = '''"""The custom-code config class of {arch} for vLLM's reference run (trust_remote_code):
transformers' Qwen3_5MoeConfig (its text_config and vision_config sub-configs) under the model_type below."""

from transformers import Qwen3_5MoeConfig


class RefConfig(Qwen3_5MoeConfig):
    model_type = "{model_type}"
'''


def interns2(arch: str, model_type: str, **text_extra) -> dict:
    # interns2_preview.py InternS2PreviewForConditionalGeneration(Qwen3_5MoeForConditionalGeneration) and
    # interns2_mobius.py: the text config is Qwen3.5-MoE's (the registry's Qwen3_5MoeForCausalLM default config,
    # tests/data/vllm-0.33/registry/configs/), with mamba_ssm_dtype float32 as the released Qwen3.5 configs set
    # it: not read for these architectures (models/config.py MODELS_CONFIG_MAP has neither)
    here = Path(__file__).parent / "registry" / "configs" / "Qwen3_5MoeForCausalLM" / "config.json"
    text = json.loads(here.read_text())
    for key in ("architectures", "_name_or_path", "id2label", "label2id", "dtype"):
        text.pop(key, None)
    text.update(mamba_ssm_dtype="float32", **text_extra)
    return dict(
        model_type=model_type,
        torch_dtype="bfloat16",
        text_config=text,
        vision_config={"depth": 2, "hidden_size": 1152, "out_hidden_size": text["hidden_size"]},
        image_token_id=248056,
        video_token_id=248057,
    )


def kimi_k3() -> dict:
    # transformers_utils/configs/kimi_k3.py KimiK3Config (vLLM's own class): text_config a KimiLinearConfig,
    # here Kimi-Linear-48B-A3B-Instruct's released config (kvviz/presets/kimi-linear.json) without the
    # full-rank gate (the KimiLinearGatedDeltaNetAttention path of KimiDecoderLayer); vision defaults
    preset = Path(__file__).parents[3] / "kvviz" / "presets" / "kimi-linear.json"
    text = json.loads(preset.read_text())
    for key in ("architectures", "_name_or_path", "torch_dtype"):
        text.pop(key, None)
    return dict(model_type="kimi_k3", torch_dtype="bfloat16", text_config=text, vision_config={})


def main() -> None:
    _write("BailingMoeV3ForCausalLM", bailing_v3(), remote=True)
    _write("BailingMoeV3VLForConditionalGeneration", bailing_v3_vl(), remote=False)
    _write("BailingMoeV2_5ForCausalLM", bailing_v2_5(), remote=True)
    _write("AliceAIForCausalLM", alice_ai(), remote=True)
    _write("KimiK3ForConditionalGeneration", kimi_k3(), remote=False)
    for arch, model_type, extra in (
        ("InternS2PreviewForConditionalGeneration", "interns2_preview", {}),
        ("InternS2MobiusForConditionalGeneration", "interns2_mobius", {"num_blocks": 2}),
    ):
        _write(arch, interns2(arch, model_type, **extra), remote=True, ref=QWEN35_REF)


if __name__ == "__main__":
    main()
