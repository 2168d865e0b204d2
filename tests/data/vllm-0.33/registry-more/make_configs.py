"""Writes the config folders of this directory (issue 27, "plan them"): one config.json per architecture,
shaped like the public released model's config.json (values as remembered from it where known, else
plausible sizes: see README.md), plus configuration_ref.py where transformers has no config class (custom
code: vLLM reads it with trust_remote_code). Run from this folder: python make_configs.py"""

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent

# A custom-code config class holding the keys as config.json gives them (what a hub configuration_*.py
# does); `attribute_map` / `base` where the public class has them.
REF = '''"""Reference config class for {arch} (custom code on the hub; written for vLLM's reference run)."""

from transformers import {base}


class RefConfig({base}):
    model_type = "{model_type}"
{attribute_map}
    def __init__(self, **kwargs):
{fields}        super().__init__(**kwargs)
'''


def write(arch, config, *, ref_fields=None, base="PretrainedConfig", attribute_map=None, folder=None):
    d = HERE / (folder or arch)
    d.mkdir(exist_ok=True)
    config = {"architectures": [arch], **config}
    if ref_fields is not None:
        config["auto_map"] = {"AutoConfig": "configuration_ref.RefConfig"}
        fields = "".join(f"        self.{k} = kwargs.pop({k!r}, {v!r})\n" for k, v in ref_fields.items())
        amap = f"    attribute_map = {attribute_map!r}\n" if attribute_map else ""
        (d / "configuration_ref.py").write_text(
            REF.format(arch=arch, base=base, model_type=config["model_type"], attribute_map=amap, fields=fields)
        )
    (d / "config.json").write_text(json.dumps(config, indent=2) + "\n")


def ref(config, *skip):
    """The custom class sets every key of config.json it declares (defaults None where the JSON omits one)."""
    return {k: None for k in config if k not in ("architectures", "model_type", "torch_dtype") + skip}


# --- attention decoders whose architecture kvviz did not register -----------------------------------------
afmoe = dict(  # arcee-ai/Trinity-Mini config.json (transformers AfmoeConfig)
    model_type="afmoe",
    vocab_size=200192,
    hidden_size=2048,
    intermediate_size=6144,
    moe_intermediate_size=1024,
    num_hidden_layers=32,
    num_dense_layers=2,
    num_attention_heads=32,
    num_key_value_heads=4,
    head_dim=128,
    hidden_act="silu",
    max_position_embeddings=131072,
    rms_norm_eps=1e-5,
    tie_word_embeddings=False,
    rope_theta=10000.0,
    num_experts=128,
    num_experts_per_tok=8,
    num_shared_experts=1,
    n_group=1,
    topk_group=1,
    route_norm=True,
    route_scale=2.826,
    score_func="sigmoid",
    global_attn_every_n_layers=4,
    sliding_window=2048,
    layer_types=["full_attention" if (i + 1) % 4 == 0 else "sliding_attention" for i in range(32)],
    mup_enabled=True,
    torch_dtype="bfloat16",
)
write("AfmoeForCausalLM", afmoe)

ling = dict(  # inclusionAI/Ling-lite-1.5 config.json (custom code: configuration_bailing_moe.py)
    model_type="bailing_moe",
    vocab_size=126464,
    hidden_size=2048,
    intermediate_size=5632,
    num_hidden_layers=28,
    num_attention_heads=16,
    num_key_value_heads=4,
    head_dim=None,
    hidden_act="silu",
    max_position_embeddings=32768,
    rms_norm_eps=1e-6,
    tie_word_embeddings=False,
    rope_theta=600000.0,
    rope_scaling=None,
    num_experts=64,
    num_shared_experts=2,
    num_experts_per_tok=6,
    moe_intermediate_size=1408,
    first_k_dense_replace=0,
    norm_topk_prob=True,
    norm_head=True,
    use_qkv_bias=False,
    use_bias=False,
    use_qk_norm=False,
    use_rmsnorm=True,
    partial_rotary_factor=1.0,
    rotary_dim=None,
    embedding_dropout=0.0,
    output_dropout=0.0,
    moe_router_enable_expert_bias=False,
    score_function="softmax",
    routed_scaling_factor=1.0,
    router_dtype=None,
    torch_dtype="bfloat16",
)
write("BailingMoeForCausalLM", ling, ref_fields=ref(ling))

ling2 = dict(  # inclusionAI/Ling-mini-2.0 config.json (custom code: configuration_bailing_moe_v2.py)
    model_type="bailing_moe_v2",
    vocab_size=157184,
    hidden_size=2048,
    intermediate_size=5120,
    num_hidden_layers=20,
    num_attention_heads=16,
    num_key_value_heads=4,
    head_dim=128,
    hidden_act="silu",
    max_position_embeddings=32768,
    rms_norm_eps=1e-6,
    tie_word_embeddings=False,
    rope_theta=600000.0,
    rope_scaling=None,
    num_experts=256,
    num_shared_experts=1,
    num_experts_per_tok=8,
    moe_intermediate_size=512,
    moe_shared_expert_intermediate_size=512,
    first_k_dense_replace=1,
    norm_topk_prob=True,
    norm_head=False,
    use_qkv_bias=False,
    use_bias=False,
    use_qk_norm=True,
    use_rmsnorm=True,
    partial_rotary_factor=0.5,
    rotary_dim=None,
    embedding_dropout=0.0,
    output_dropout=0.0,
    moe_router_enable_expert_bias=True,
    score_function="sigmoid",
    n_group=8,
    topk_group=4,
    routed_scaling_factor=2.5,
    router_dtype="fp32",
    num_nextn_predict_layers=1,
    torch_dtype="bfloat16",
)
write("BailingMoeV2ForCausalLM", ling2, ref_fields=ref(ling2))

hy3 = dict(  # transformers HYV3Config defaults, with the MoE keys vLLM's hy_v3.py reads
    model_type="hy_v3",
    vocab_size=120832,
    hidden_size=4096,
    intermediate_size=13312,
    num_hidden_layers=80,
    num_attention_heads=64,
    num_key_value_heads=8,
    head_dim=128,
    hidden_act="silu",
    max_position_embeddings=131072,
    rms_norm_eps=1e-5,
    tie_word_embeddings=False,
    num_experts=192,
    num_experts_per_tok=8,
    num_shared_experts=1,
    moe_intermediate_size=1536,
    expert_hidden_dim=1536,
    router_scaling_factor=2.826,
    route_norm=True,
    first_k_dense_replace=1,
    qk_norm=True,
    rope_parameters={"rope_theta": 11158840.0, "rope_type": "default"},
    torch_dtype="bfloat16",
)
write("HYV3ForCausalLM", hy3)

mimo = dict(  # XiaomiMiMo/MiMo-7B-RL config.json (custom code: MiMoConfig(Qwen2Config))
    model_type="mimo",
    vocab_size=151680,
    hidden_size=4096,
    intermediate_size=11008,
    num_hidden_layers=36,
    num_attention_heads=32,
    num_key_value_heads=8,
    hidden_act="silu",
    max_position_embeddings=32768,
    rms_norm_eps=1e-5,
    tie_word_embeddings=False,
    rope_theta=640000.0,
    rope_scaling=None,
    use_sliding_window=False,
    sliding_window=32768,
    max_window_layers=36,
    attention_dropout=0.0,
    num_nextn_predict_layers=1,
    torch_dtype="bfloat16",
)
write("MiMoForCausalLM", mimo, ref_fields={"num_nextn_predict_layers": 0}, base="Qwen2Config")

write(  # nvidia/Minitron-8B-Base config.json (transformers NemotronConfig): head_dim 128, not 4096 // 48
    "NemotronForCausalLM",
    dict(
        model_type="nemotron",
        vocab_size=256000,
        hidden_size=4096,
        intermediate_size=16384,
        num_hidden_layers=32,
        num_attention_heads=48,
        num_key_value_heads=8,
        head_dim=128,
        hidden_act="relu2",
        max_position_embeddings=4096,
        norm_eps=1e-5,
        partial_rotary_factor=0.5,
        rope_theta=10000,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    ),
)

param2 = dict(  # bharatgen Param2 MoE (custom code); plausible sizes
    model_type="param2moe",
    vocab_size=128008,
    hidden_size=2048,
    intermediate_size=5632,
    num_hidden_layers=24,
    num_attention_heads=16,
    num_key_value_heads=4,
    head_dim=128,
    hidden_act="silu",
    max_position_embeddings=4096,
    rms_norm_eps=1e-6,
    tie_word_embeddings=False,
    rope_theta=10000.0,
    rope_scaling=None,
    partial_rotary_factor=1.0,
    num_experts=64,
    num_experts_per_tok=6,
    num_shared_experts=2,
    moe_intermediate_size=1408,
    moe_shared_expert_intermediate_size=2816,
    first_k_dense_replace=1,
    norm_topk_prob=True,
    use_qk_norm=True,
    use_bias=False,
    use_qkv_bias=False,
    score_function="sigmoid",
    n_group=1,
    topk_group=1,
    routed_scaling_factor=1.0,
    moe_router_enable_expert_bias=True,
    torch_dtype="bfloat16",
)
write("Param2MoEForCausalLM", param2, ref_fields=ref(param2))

solar = dict(  # upstage/solar-pro-preview-instruct config.json (custom code: configuration_solar.py)
    model_type="solar",
    vocab_size=32128,
    hidden_size=5120,
    intermediate_size=17920,
    num_hidden_layers=64,
    num_attention_heads=40,
    num_key_value_heads=10,
    hidden_act="silu",
    max_position_embeddings=4096,
    rms_norm_eps=1e-5,
    tie_word_embeddings=False,
    rope_theta=10000.0,
    rope_scaling=None,
    attention_bias=False,
    mlp_bias=False,
    bskcn_1=[12, 20, 32, 44],
    bskcn_2=[20, 32],
    bskcn_3=[16, 24, 36, 48],
    bskcn_4=[28, 40],
    bskcn_tv=[0.9, 0.8],
    torch_dtype="bfloat16",
)
write("SolarForCausalLM", solar, ref_fields=ref(solar))

telechat = dict(  # Tele-AI/TeleChat2-7B config.json (custom code: configuration_telechat2.py)
    model_type="telechat",
    vocab_size=131072,
    hidden_size=4096,
    ffn_hidden_size=12288,
    n_layer=30,
    n_head=32,
    layer_norm_epsilon=1e-5,
    seq_length=8192,
    max_position_embeddings=8192,
    rope_theta=10000.0,
    tie_word_embeddings=False,
    embed_layernorm=False,
    apply_residual_connection_post_layernorm=False,
    torch_dtype="bfloat16",
)
write(
    "TeleChat2ForCausalLM",
    telechat,
    ref_fields=ref(telechat),
    attribute_map={
        "num_hidden_layers": "n_layer",
        "num_attention_heads": "n_head",
        "intermediate_size": "ffn_hidden_size",
        "rms_norm_eps": "layer_norm_epsilon",
    },
)

teleflm = dict(  # CofeAI/Tele-FLM config.json (custom code: configuration_teleflm.py, Llama with muP)
    model_type="teleflm",
    vocab_size=80000,
    hidden_size=8192,
    intermediate_size=21824,
    num_hidden_layers=64,
    num_attention_heads=64,
    num_key_value_heads=64,
    hidden_act="silu",
    max_position_embeddings=4096,
    rms_norm_eps=1e-5,
    tie_word_embeddings=False,
    rope_theta=10000.0,
    rope_scaling=None,
    attention_bias=False,
    mlp_bias=False,
    use_mup=True,
    mup_scale_factor=32.0,
    output_mult=1.0,
    input_mult=1.0,
    torch_dtype="bfloat16",
)
write("TeleFLMForCausalLM", teleflm, ref_fields=ref(teleflm))

# --- head size hidden_size // num_attention_heads whatever head_dim says --------------------------------
deepseek = dict(  # deepseek-ai/deepseek-moe-16b-base config.json (custom code: configuration_deepseek.py)
    model_type="deepseek",
    vocab_size=102400,
    hidden_size=2048,
    intermediate_size=10944,
    moe_intermediate_size=1408,
    num_hidden_layers=28,
    num_attention_heads=16,
    num_key_value_heads=16,
    hidden_act="silu",
    max_position_embeddings=4096,
    rms_norm_eps=1e-6,
    tie_word_embeddings=False,
    rope_theta=10000.0,
    rope_scaling=None,
    attention_bias=False,
    n_shared_experts=2,
    n_routed_experts=64,
    num_experts_per_tok=6,
    moe_layer_freq=1,
    first_k_dense_replace=1,
    norm_topk_prob=False,
    scoring_func="softmax",
    aux_loss_alpha=0.001,
    seq_aux=True,
    torch_dtype="bfloat16",
)
write("DeepseekForCausalLM", deepseek, ref_fields=ref(deepseek))

internlm2 = dict(  # internlm/internlm2_5-7b-chat config.json (custom code: configuration_internlm2.py)
    model_type="internlm2",
    vocab_size=92544,
    hidden_size=4096,
    intermediate_size=14336,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=8,
    hidden_act="silu",
    max_position_embeddings=32768,
    rms_norm_eps=1e-5,
    tie_word_embeddings=False,
    rope_theta=1000000,
    rope_scaling={"type": "dynamic", "factor": 2.0},
    bias=False,
    attn_implementation="eager",
    torch_dtype="bfloat16",
)
write("InternLM2ForCausalLM", internlm2, ref_fields=ref(internlm2))

minicpm = dict(  # openbmb/MiniCPM-2B-sft-bf16 config.json (custom code: configuration_minicpm.py)
    model_type="minicpm",
    vocab_size=122753,
    hidden_size=2304,
    intermediate_size=5760,
    num_hidden_layers=40,
    num_attention_heads=36,
    num_key_value_heads=36,
    hidden_act="silu",
    max_position_embeddings=2048,
    rms_norm_eps=1e-5,
    tie_word_embeddings=True,
    rope_theta=10000.0,
    rope_scaling=None,
    scale_emb=12,
    dim_model_base=256,
    scale_depth=1.4,
    torch_dtype="bfloat16",
)
write("MiniCPMForCausalLM", minicpm, ref_fields=ref(minicpm))

orion = dict(  # OrionStarAI/Orion-14B-Chat config.json (custom code: configuration_orion.py)
    model_type="orion",
    vocab_size=84608,
    hidden_size=5120,
    intermediate_size=15360,
    num_hidden_layers=40,
    num_attention_heads=40,
    num_key_value_heads=40,
    hidden_act="silu",
    max_position_embeddings=4096,
    rms_norm_eps=1e-5,
    tie_word_embeddings=False,
    rope_theta=10000.0,
    rope_scaling=None,
    torch_dtype="bfloat16",
)
write("OrionForCausalLM", orion, ref_fields=ref(orion))

step1 = dict(  # StepFun Step-1 (custom code); plausible sizes: KV heads from num_attention_groups
    model_type="step1",
    vocab_size=65536,
    hidden_size=4096,
    intermediate_size=11008,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_attention_groups=4,
    max_seq_len=16384,
    rms_norm_eps=1e-5,
    tie_word_embeddings=False,
    attention_bias=False,
    mlp_bias=False,
    torch_dtype="bfloat16",
)
write("Step1ForCausalLM", step1, ref_fields=ref(step1))

# --- KV heads from other fields (vLLM's own ChatGLMConfig; transformers' DbrxConfig) --------------------
chatglm3 = dict(  # THUDM/chatglm3-6b config.json
    model_type="chatglm",
    num_layers=28,
    padded_vocab_size=65024,
    hidden_size=4096,
    ffn_hidden_size=13696,
    kv_channels=128,
    num_attention_heads=32,
    seq_length=8192,
    hidden_dropout=0.0,
    attention_dropout=0.0,
    layernorm_epsilon=1e-5,
    rmsnorm=True,
    apply_residual_connection_post_layernorm=False,
    post_layer_norm=True,
    add_bias_linear=False,
    add_qkv_bias=True,
    bias_dropout_fusion=True,
    multi_query_attention=True,
    multi_query_group_num=2,
    apply_query_key_layer_scaling=True,
    attention_softmax_in_fp32=True,
    fp32_residual_connection=False,
    quantization_bit=0,
    pre_seq_len=None,
    prefix_projection=False,
    original_rope=True,
    tie_word_embeddings=False,
    torch_dtype="float16",
)
write("ChatGLMModel", chatglm3)
glm4 = dict(  # THUDM/glm-4-9b-chat config.json
    chatglm3,
    num_layers=40,
    padded_vocab_size=151552,
    seq_length=131072,
    rope_ratio=500,
    torch_dtype="bfloat16",
)
write("ChatGLMForConditionalGeneration", glm4)
write(  # THUDM/glm-4v-9b config.json: the ChatGLM LM and an EVA2-CLIP vision tower
    "GLM4VForCausalLM",
    dict(
        glm4,
        seq_length=8192,
        rope_ratio=1,
        boi_token_id=151339,
        eoi_token_id=151340,
        vision_config=dict(
            dropout_prob=0.0,
            hidden_act="gelu",
            in_channels=3,
            num_hidden_layers=63,
            hidden_size=1792,
            patch_size=14,
            num_heads=16,
            intermediate_size=15360,
            layer_norm_eps=1e-6,
            num_positions=6401,
            image_size=1120,
            scaling_factor=8,
        ),
    ),
)
write(  # databricks/dbrx-instruct config.json (transformers DbrxConfig)
    "DbrxForCausalLM",
    dict(
        model_type="dbrx",
        d_model=6144,
        n_heads=48,
        n_layers=40,
        max_seq_len=32768,
        vocab_size=100352,
        resid_pdrop=0.0,
        emb_pdrop=0.0,
        attn_config=dict(clip_qkv=8, kv_n_heads=8, rope_theta=500000),
        ffn_config=dict(
            ffn_hidden_size=10752,
            moe_jitter_eps=0.01,
            moe_loss_weight=0.05,
            moe_num_experts=16,
            moe_top_k=4,
            ffn_act_fn={"name": "silu"},
        ),
        initializer_range=0.02,
        output_router_logits=False,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    ),
)
