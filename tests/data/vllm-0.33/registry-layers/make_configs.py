"""Writes the config folders of this directory (README.md says what each holds and what was set by hand).

Each architecture here has no transformers config class (custom code), so each folder gets a config.json
with `auto_map` -> configuration_ref.RefConfig and that module: a PretrainedConfig of the architecture's
model_type holding the keys its vLLM 0.33 model file reads. Sizes are plausible, not a released model's,
where the released config.json is not known; the per-layer fields are what each rule is tested on.

usage: python make_configs.py   (from anywhere; writes beside this file)
"""

import json
from pathlib import Path

HERE = Path(__file__).parent

REF = '''"""Reference config class for {arch} (written by ../make_configs.py): the keys the vLLM 0.33 model file
reads, as attributes; nested dicts ({nested}) read with attribute access as the released config class's
dataclasses are."""

from transformers import PretrainedConfig


class _Attr(dict):
    def __getattr__(self, key):
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None


def _wrap(value):
    if isinstance(value, dict):
        return _Attr({{k: _wrap(v) for k, v in value.items()}})
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


class RefConfig(PretrainedConfig):
    model_type = "{model_type}"

    def __init__(self, **kwargs):
        for key in {nested!r}:
            if key in kwargs:
                kwargs[key] = _wrap(kwargs[key])
        super().__init__(**kwargs)
'''

ROPE = {"rope_type": "default", "rope_theta": 10000.0}


def common(arch, model_type, **kw):
    return {
        "architectures": [arch],
        "model_type": model_type,
        "auto_map": {"AutoConfig": "configuration_ref.RefConfig"},
        "torch_dtype": "bfloat16",
        "vocab_size": 32000,
        "rms_norm_eps": 1e-6,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        **kw,
    }


CONFIGS = {}

# domyn_edge.py DomynEdgeDecoderLayer: window_sizes[i][0] (> 0: a window of that + 1), position_layers[i],
# per_layer_config[i].head_dim (transformers' per-layer overrides, keyed by layer index)
n = 12
CONFIGS["DomynEdgeForCausalLM"] = (
    common(
        "DomynEdgeForCausalLM",
        "domyn_edge",
        hidden_size=2048,
        intermediate_size=6144,
        num_hidden_layers=n,
        num_attention_heads=16,
        num_key_value_heads=4,
        head_dim=128,
        max_position_embeddings=32768,
        rope_parameters=ROPE,
        window_sizes=[[-1, -1] if i % 4 == 3 else [1023 if i < 6 else 511, 0] for i in range(n)],
        position_layers=["nope" if i % 4 == 3 else "rope" for i in range(n)],
        per_layer_config={str(i): {"head_dim": 256} for i in range(n) if i % 4 == 3},
    ),
    (),
)

# plamo3.py Plamo3AttentionMixer: layer_types[i], interleaved_sliding_window[i]
n = 16
CONFIGS["Plamo3ForCausalLM"] = (
    common(
        "Plamo3ForCausalLM",
        "plamo3",
        hidden_size=2048,
        intermediate_size=8192,
        num_hidden_layers=n,
        num_attention_heads=16,
        num_key_value_heads=4,
        head_dim=128,
        max_position_embeddings=65536,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        rope_local_theta=10000.0,
        sliding_window_pattern=4,
        layer_types=["full_attention" if i % 4 == 3 else "sliding_attention" for i in range(n)],
        interleaved_sliding_window=[None if i % 4 == 3 else 2048 for i in range(n)],
    ),
    (),
)

# nemotron_nas.py DeciLMDecoderLayer: block_configs[i].attention.no_op / .n_heads_in_group
# (shaped like nvidia/Llama-3_3-Nemotron-Super-49B-v1's block_configs, 12 of its 80 layers)
n = 12


def block(no_op=False, group=8, linear=False):
    return {
        "attention": {
            "n_heads_in_group": None if no_op else group,
            "no_op": no_op,
            "num_sink_tokens": None,
            "replace_with_linear": linear,
            "sparsify": None,
            "unshifted_sink": False,
            "use_prefill_window_in_sink_attention": False,
            "window_length": None,
        },
        "ffn": {"ffn_mult": 5.25, "no_op": False, "replace_with_linear": False, "sparsify": None},
    }


CONFIGS["DeciLMForCausalLM"] = (
    common(
        "DeciLMForCausalLM",
        "nemotron-nas",
        hidden_size=8192,
        num_hidden_layers=n,
        num_attention_heads=64,
        max_position_embeddings=131072,
        rope_theta=500000.0,
        rope_parameters={
            "rope_type": "llama3",
            "rope_theta": 500000.0,
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
        block_configs=[
            block(),
            block(),
            block(no_op=True),
            block(group=16),
            block(no_op=True),
            block(no_op=True),
            block(group=32),
            block(),
            block(no_op=True),
            block(group=64),
            block(),
            block(),
        ],
    ),
    ("block_configs",),
)

# openpangu.py OpenPanguEmbeddedAttention: interleaved_sliding_window[layer % len]
n = 12
CONFIGS["PanguEmbeddedForCausalLM"] = (
    common(
        "PanguEmbeddedForCausalLM",
        "PanguEmbedded",
        hidden_size=4096,
        intermediate_size=12800,
        num_hidden_layers=n,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        max_position_embeddings=32768,
        rope_theta=16000000.0,
        rope_parameters={"rope_type": "default", "rope_theta": 16000000.0},
        bias=True,
        interleaved_sliding_window=[4096, 4096, 4096, None],
    ),
    (),
)

# openpangu.py OpenPanguSinkAttention: param_sink_number static sink tokens (StaticSinkAttention,
# SinkFullAttentionSpec), K of qk_nope_dim + qk_rope_dim, V of v_channels
n = 8
CONFIGS["PanguProMoEV2ForCausalLM"] = (
    common(
        "PanguProMoEV2ForCausalLM",
        "PanguProMoEV2",
        hidden_size=4608,
        intermediate_size=10240,
        moe_intermediate_size=1280,
        num_hidden_layers=n,
        num_attention_heads=64,
        num_key_value_heads=4,
        qk_nope_dim=128,
        qk_rope_dim=64,
        v_channels=128,
        max_position_embeddings=131072,
        rope_theta=25600000.0,
        param_sink_number=128,
        param_sink_with_value=True,
        param_sink_scalar=1.0,
        param_sink_of_head_dim=False,
        n_routed_experts=64,
        n_shared_experts=1,
        num_experts_per_tok=8,
        first_k_dense_replace=1,
        routed_scaling_factor=2.5,
        norm_topk_prob=True,
        router_enable_expert_bias=True,
        sandwich_norm=True,
        interleaved_sliding_window=[2048, 2048, 2048, None],
    ),
    (),
)

# iquest_loopcoder.py LoopCoderAttention: loop_num Attention layers per decoder layer, loop j > 0 named
# layers.{j x num_hidden_layers + i} with a window of loop_window_size
n = 8
CONFIGS["IQuestLoopCoderForCausalLM"] = (
    common(
        "IQuestLoopCoderForCausalLM",
        "iquestloopcoder",
        hidden_size=5120,
        intermediate_size=27648,
        num_hidden_layers=n,
        num_attention_heads=40,
        num_key_value_heads=8,
        max_position_embeddings=131072,
        rope_parameters={"rope_type": "default", "rope_theta": 500000.0},
        max_window_layers=n,
        sliding_window=None,
        loop_num=2,
        loop_window_size=64,
    ),
    (),
)

# k2_horizon.py K2HorizonDecoderLayer: K2HorizonAttention / K2HorizonMoVAAttention (num_key_value_heads,
# head_dim; no per-layer window)
n = 8
CONFIGS["K2HorizonForCausalLM"] = (
    common(
        "K2HorizonForCausalLM",
        "k2_horizon",
        hidden_size=3072,
        intermediate_size=8192,
        moe_intermediate_size=1024,
        num_hidden_layers=n,
        num_attention_heads=32,
        num_key_value_heads=4,
        head_dim=128,
        rope_head_dim=64,
        max_position_embeddings=131072,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        query_key_norm=True,
        attention_bias=False,
        attention_gate_func="sigmoid",
        layernorm_num_groups=1,
        mlp_only_layers=[0],
        num_experts=32,
        num_experts_per_tok=4,
        num_shared_experts=1,
        decoder_sparse_step=1,
        mova_num_experts=4,
        mova_num_experts_per_tok=2,
        moe_gate_bias=True,
        norm_topk_prob=True,
        router_score_func="sigmoid",
        router_scaling_factor=2.5,
    ),
    (),
)

# rnj1.py Rnj1Attention: chunked_attention layers carry sliding_window (chunk_lookback 1); transformers'
# Gemma3TextConfig holds the config (the model file's own import), so no configuration_ref.py
n = 8
RNJ1 = {
    "architectures": ["Rnj1ForCausalLM"],
    "model_type": "gemma3_text",
    "torch_dtype": "bfloat16",
    "vocab_size": 128256,
    "hidden_size": 4096,
    "intermediate_size": 16384,
    "num_hidden_layers": n,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "query_pre_attn_scalar": 128,
    "max_position_embeddings": 32768,
    "sliding_window": 4096,
    "layer_types": ["full_attention" if i % 4 == 3 else "chunked_attention" for i in range(n)],
    # v5 rope_parameters keyed by layer type, as Rnj1Attention.__init__ reads them
    "rope_parameters": {
        "chunked_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
    },
    "final_logit_softcapping": None,
    "attn_logit_softcapping": None,
}

# vllm/models/flint/model.py FlintAttention: layer_types[i] == "sliding_attention" -> sliding_window; vLLM's
# own FlintConfig (transformers_utils/configs) reads it. No reference run: the model needs FlashInfer and
# Flint's CUDA kernels (tests/test_registry_layer_plans.py derives its plan by hand)
n = 8
FLINT = {
    "architectures": ["FlintForCausalLM"],
    "model_type": "flint",
    "torch_dtype": "bfloat16",
    "num_hidden_layers": n,
    "hidden_size": 2048,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "max_position_embeddings": 262144,
    "use_sliding_window": True,
    "sliding_window": 513,
    "layer_types": ["full_attention" if i % 4 == 3 else "sliding_attention" for i in range(n)],
    "no_rope_layer_indices": [i for i in range(n) if i % 4 == 3],
    "mlp_only_layers": [0],
}

# openpangu_vl.py OpenPanguVLForConditionalGeneration: PanguEmbeddedForCausalLM built from the top config
# under openpangu.language_model.; no reference run (the model asks the checkpoint's image processor), the
# test derives it from PanguEmbeddedForCausalLM's reference
VL = dict(
    CONFIGS["PanguEmbeddedForCausalLM"][0],
    architectures=["OpenPanguVLForConditionalGeneration"],
    model_type="openpangu_vl",
    vision_config={
        "depth": 32,
        "hidden_size": 1280,
        "num_heads": 16,
        "intermediate_size": 3456,
        "hidden_act": "silu",
        "patch_size": 14,
        "temporal_patch_size": 2,
        "spatial_merge_size": 2,
        "in_channels": 3,
        "window_size": 112,
        "fullatt_block_indexes": [7, 15, 23, 31],
        "out_hidden_size": 4096,
    },
)
del VL["auto_map"]  # no reference run reads it


def main() -> None:
    folder = HERE / "OpenPanguVLForConditionalGeneration"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(VL, indent=2) + "\n")
    folder = HERE / "FlintForCausalLM"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(FLINT, indent=2) + "\n")
    folder = HERE / "Rnj1ForCausalLM"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(RNJ1, indent=2) + "\n")
    for arch, (config, nested) in CONFIGS.items():
        folder = HERE / arch
        folder.mkdir(exist_ok=True)
        (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        ref = REF.format(arch=arch, model_type=config["model_type"], nested=tuple(nested))
        (folder / "configuration_ref.py").write_text(ref)


if __name__ == "__main__":
    main()
