"""Per-model-type key mappings of the attention-only decoder family (issue 27), each the rule of one
vLLM 0.33 model file (vllm/model_executor/models/<file>.py), and the names the family is registered for.

* head size: the model types whose attention takes hidden_size // num_attention_heads whatever
  config.head_dim says (`HEAD_FROM_HIDDEN`); the others read head_dim, or that quotient without one;
* layer names: `{prefix}.{i}.{suffix}` as the model file's prefixes build them (`LAYER_NAMES`),
  model.layers.{i}.self_attn.attn where a model type is not listed;
* multimodal wrappers whose language model sits under `language_model.` although their
  architecture is not a …ForConditionalGeneration (`WRAPPERS`).
"""

from __future__ import annotations

from kvviz.base.errors import require
from kvviz.base.inputs import MAX_LAYERS, bounded_int

HEAD_FROM_HIDDEN = frozenset(
    {
        "qwen2",  # vllm/model_executor/models/qwen2.py Qwen2Attention.__init__
        "granitemoe",  # vllm/model_executor/models/granitemoe.py GraniteMoeAttention.__init__
        "granitemoeshared",  # vllm/model_executor/models/granitemoeshared.py (GraniteMoeAttention)
        "granitemoe_swa",  # vllm/model_executor/models/granitemoeshared.py (GraniteMoeAttention)
        "gpt2",  # vllm/model_executor/models/gpt2.py GPT2Attention.__init__
        "gptj",  # vllm/model_executor/models/gpt_j.py GPTJAttention.__init__
        "opt",  # vllm/model_executor/models/opt.py OPTAttention.__init__
        "bloom",  # vllm/model_executor/models/bloom.py BloomAttention.__init__
        "olmoe",  # vllm/model_executor/models/olmoe.py OlmoeAttention.__init__
        "stablelm",  # vllm/model_executor/models/stablelm.py StablelmAttention.__init__
        "falcon",  # vllm/model_executor/models/falcon.py FalconAttention.__init__
    }
)

DEFAULT_LAYER_NAMES = ("model.layers", "self_attn.attn")
LAYER_NAMES = {
    "gpt_oss": ("model.layers", "attn.attn"),  # vllm/model_executor/models/gpt_oss.py TransformerBlock.__init__
    "gpt2": ("transformer.h", "attn.attn"),  # vllm/model_executor/models/gpt2.py GPT2Model.__init__, GPT2Block.__init__
    # vllm/model_executor/models/gpt_j.py GPTJModel.__init__, GPTJBlock.__init__
    "gptj": ("transformer.h", "attn.attn"),
    # vllm/model_executor/models/bloom.py BloomModel.__init__, BloomBlock.__init__
    "bloom": ("transformer.h", "self_attention.attn"),
    # vllm/model_executor/models/opt.py OPTModel.__init__, OPTDecoder.__init__
    "opt": ("model.decoder.layers", "self_attn.attn"),
    # vllm/model_executor/models/exaone.py ExaoneDecoderLayer.__init__, ExaoneBlockAttention.__init__
    "exaone": ("model.h", "attn.attention.attn"),
    # vllm/model_executor/models/falcon.py FalconModel.__init__ (transformer.h), FalconDecoderLayer.__init__
    "falcon": ("transformer.h", "self_attention.attn"),
    # vllm/model_executor/models/sarvam.py SarvamMoEForCausalLM(BailingMoeForCausalLM): bailing_moe.py
    # BailingMoeBlock.__init__ (.attention), BailingAttention.__init__ (.attn)
    "sarvam_moe": ("model.layers", "attention.attn"),
}

# Attention whose KV heads and head size are not num_key_value_heads / head_dim (kvviz.families.decoder
# _heads): vllm/model_executor/models/minicpm3.py MiniCPM3Attention.__init__ (Attention(num_local_heads,
# qk_nope_head_dim + qk_rope_head_dim, num_kv_heads=num_local_heads)); falcon.py FalconAttention.__init__
# (new_decoder_architecture: num_kv_heads, else multi_query: 1, else num_attention_heads); gemma4.py
# Gemma4DecoderLayer.__init__ (config.per_layer_config[i].head_dim / .num_key_value_heads); hrm_text.py
# HrmTextAttention.__init__ (KV heads = num_attention_heads, head_dim).
HEAD_RULES = frozenset({"minicpm3", "falcon", "gemma4_text", "hrm_text"})
# Models whose Attention gets no cache_config, so its kv_cache_dtype is 'auto' (the model dtype) whatever
# --kv-cache-dtype says (layers/attention/attention.py Attention.__init__): falcon.py's rotary and alibi
# Attention(...) calls.
NO_CACHE_CONFIG = frozenset({"falcon"})

# vllm/model_executor/models/hyperclovax_vision_v2.py HCXVisionV2ForCausalLM.__init__ (language_model)
WRAPPERS = frozenset({"HCXVisionV2ForCausalLM"})

# Models whose attention caches are not one per decoder layer (`looped_layers`).
LOOPED = frozenset({"hrm_text", "dory", "cosmos3_edge_text"})


def looped_layers(text, model_type: str, *, name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(vLLM's cache names, each one's layer kind) in registration order, for LOOPED model types:

    * hrm_text.py HrmTextModel: the L_module stack is built before the H_module one; in each, layer k of
      num_layers_per_stack registers one PrefillPrefixLMAttention per recurrence step it runs at (L: steps
      h x (L_cycles + 1) + l, H: h x (L_cycles + 1) + L_cycles, h < H_cycles, l < L_cycles), named
      model.{L,H}_module.layers.{step x num_layers_per_stack + k}.self_attn.attn; all full attention;
    * dory.py DoryBackbone: layer i of num_hidden_layers is attention unless layer_types[i] == 'mlp'; an
      attention layer of the recurrent range [n_input_layers, n_input_layers + n_recurrent_layers)
      registers n_recurrent_loops caches when recurrent_kv_cache_mode == 'per_loop' (else one), loop j
      named backbone.layers.{j x num_hidden_layers + i}.mixer.attn; sliding_attention layers carry
      config.sliding_window (DoryAttention per_layer_sliding_window)."""

    def count(key: str, low: int = 1) -> int:
        return bounded_int(getattr(text, key, None), field=f"{name}: {key}", low=low, high=MAX_LAYERS)

    names, kinds = [], []
    if model_type == "cosmos3_edge_text":
        # cosmos3_edge.py _to_nemotron_h_config: layers_block_type ["full_attention", "mlp"] x num_hidden_layers,
        # so text layer i is Nemotron-H layer 2i, Cosmos3EdgeAttentionDecoderLayer's mixer (.mixer.attn)
        n = count("num_hidden_layers")
        return tuple(f"model.layers.{2 * i}.mixer.attn" for i in range(n)), ("full_attention",) * n
    if model_type == "hrm_text":
        h, low, per = count("H_cycles"), count("L_cycles"), count("num_layers_per_stack")
        for stack, steps in (
            ("L", [c * (low + 1) + j for c in range(h) for j in range(low)]),
            ("H", [c * (low + 1) + low for c in range(h)]),
        ):
            for k in range(per):
                for step in steps:
                    names.append(f"model.{stack}_module.layers.{step * per + k}.self_attn.attn")
                    kinds.append("full_attention")
        return tuple(names), tuple(kinds)
    n = count("num_hidden_layers")
    types = getattr(text, "layer_types", None)
    require(isinstance(types, (list, tuple)) and len(types) == n, f"{name}: layer_types: must list {n} layers")
    first, recurrent, loops = count("n_input_layers", 0), count("n_recurrent_layers", 0), count("n_recurrent_loops")
    per_loop = getattr(text, "recurrent_kv_cache_mode", None) == "per_loop"
    for i, kind in enumerate(types):
        require(
            kind in ("full_attention", "sliding_attention", "mlp"),
            f"{name}: layer_types[{i}]={kind!r}: Dory layers are full_attention, sliding_attention or mlp",
        )
        if kind == "mlp":
            continue
        for j in range(loops if per_loop and first <= i < first + recurrent else 1):
            names.append(f"backbone.layers.{j * n + i}.mixer.attn")
            kinds.append(kind)
    return tuple(names), tuple(kinds)


# HF architectures (architectures[0]) and model types the decoder family reads.
NAMES = (
    "LlamaForCausalLM",
    "MistralForCausalLM",
    "MixtralForCausalLM",
    "Phi3ForCausalLM",
    "Qwen2ForCausalLM",
    "Qwen2MoeForCausalLM",
    "Qwen3ForCausalLM",
    "Qwen3MoeForCausalLM",
    "Gemma2ForCausalLM",
    "Gemma3ForCausalLM",
    "Gemma3ForConditionalGeneration",
    "Cohere2ForCausalLM",
    "GptOssForCausalLM",
    "Llama4ForCausalLM",
    "Llama4ForConditionalGeneration",
    "Gemma3nForCausalLM",
    "Gemma3nForConditionalGeneration",
    "llama",
    "mistral",
    "mixtral",
    "phi3",
    "qwen2",
    "qwen2_moe",
    "qwen3",
    "qwen3_moe",
    "gemma2",
    "gemma3",
    "gemma3_text",
    "cohere2",
    "gpt_oss",
    "llama4",
    "llama4_text",
    "gemma3n",
    "gemma3n_text",
    # issue 27, class (b): the rules above as each model file applies them
    "InternLM3ForCausalLM",  # vllm/model_executor/models/llama.py LlamaAttention.__init__
    "IQuestCoderForCausalLM",  # vllm/model_executor/models/llama.py LlamaAttention.__init__
    "LLaMAForCausalLM",  # vllm/model_executor/models/llama.py LlamaAttention.__init__
    "TeleChat3ForCausalLM",  # vllm/model_executor/models/llama.py LlamaAttention.__init__
    "Ministral3ForCausalLM",  # vllm/model_executor/models/mistral.py MistralAttention.__init__
    "ministral3",
    "Ernie4_5ForCausalLM",  # vllm/model_executor/models/ernie45.py Ernie4_5ForCausalLM (Llama)
    "ernie4_5",
    "Ernie4_5_MoeForCausalLM",  # vllm/model_executor/models/ernie45_moe.py Ernie4_5_MoeAttention.__init__
    "ernie4_5_moe",
    "Glm4ForCausalLM",  # vllm/model_executor/models/glm4.py Glm4Attention.__init__
    "glm4",
    # vllm/model_executor/models/glm4_moe.py Glm4MoeDecoderLayer.__init__ (head_dim=config.head_dim),
    # Glm4MoeAttention.__init__ (one Attention at {prefix}.attn; the MTP layer is the drafter's)
    "Glm4MoeForCausalLM",
    "glm4_moe",
    # vllm/model_executor/models/minimax_m2.py MiniMaxM2DecoderLayer.__init__ (head_dim, full attention)
    "MiniMaxM2ForCausalLM",
    "minimax_m2",
    "GemmaForCausalLM",  # vllm/model_executor/models/gemma.py GemmaAttention.__init__
    "gemma",
    "CohereForCausalLM",  # vllm/model_executor/models/commandr.py CohereAttention.__init__
    "cohere",
    "Cohere2MoeForCausalLM",  # vllm/model_executor/models/cohere2_moe.py Cohere2MoeAttention.__init__
    "cohere2_moe",
    "ApertusForCausalLM",  # vllm/model_executor/models/apertus.py ApertusAttention.__init__
    "apertus",
    "Exaone4ForCausalLM",  # vllm/model_executor/models/exaone4.py Exaone4Attention.__init__
    "exaone4",
    "ExaoneMoeForCausalLM",  # vllm/model_executor/models/exaone_moe.py ExaoneMoeAttention.__init__
    "ExaoneMoEForCausalLM",  # vllm/model_executor/models/exaone_moe.py ExaoneMoeAttention.__init__
    "exaone_moe",
    "GraniteForCausalLM",  # vllm/model_executor/models/granite.py GraniteAttention.__init__
    "GraniteSWAForCausalLM",  # vllm/model_executor/models/granite.py GraniteAttention.__init__
    "granite",
    "granite_swa",
    "GraniteMoeForCausalLM",  # vllm/model_executor/models/granitemoe.py GraniteMoeAttention.__init__
    "granitemoe",
    "GraniteMoeSharedForCausalLM",  # vllm/model_executor/models/granitemoeshared.py (GraniteMoeAttention)
    "GraniteMoeSWAForCausalLM",  # vllm/model_executor/models/granitemoeshared.py (GraniteMoeAttention)
    "granitemoeshared",
    "granitemoe_swa",
    "PhiMoEForCausalLM",  # vllm/model_executor/models/phimoe.py PhiMoEAttention.__init__
    "phimoe",
    "HyperCLOVAXForCausalLM",  # vllm/model_executor/models/hyperclovax.py HyperCLOVAXAttention.__init__
    "LagunaForCausalLM",  # vllm/model_executor/models/laguna.py LagunaAttention.__init__
    "laguna",
    "MuseGlimmerForCausalLM",  # vllm/model_executor/models/muse_glimmer.py MuseGlimmerAttention.__init__
    # vllm/model_executor/models/gpt2.py, gpt_j.py, opt.py, bloom.py, olmoe.py, stablelm.py, exaone.py:
    # HEAD_FROM_HIDDEN and LAYER_NAMES above
    "GPT2LMHeadModel",
    "gpt2",
    "GPTJForCausalLM",
    "gptj",
    "OPTForCausalLM",
    "opt",
    "BloomForCausalLM",
    "bloom",
    "OlmoeForCausalLM",
    "olmoe",
    "StableLmForCausalLM",
    "stablelm",
    "ExaoneForCausalLM",
    "exaone",
    "HCXVisionV2ForCausalLM",  # WRAPPERS above
    # HEAD_RULES above
    "MiniCPM3ForCausalLM",
    "minicpm3",
    "FalconForCausalLM",
    "falcon",
    "Gemma4ForCausalLM",  # vllm/model_executor/models/gemma4.py
    "gemma4_text",
    "BeamForCausalLM",  # vllm/models/beam/nvidia/attention.py BeamAttention: per-layer window from layer_types
    "beam",
    # LOOPED above
    "HrmTextForCausalLM",
    "hrm_text",
    "DoryForCausalLM",
    "dory",
    # LAYER_NAMES above: BailingAttention (head_dim, else hidden_size // heads; num_key_value_heads)
    "SarvamMoEForCausalLM",
    "sarvam_moe",
    # issue 27, multimodal wrappers' own language model classes (kvviz.families.wrapper_table_more), the
    # rules above: vllm/model_executor/models/cohere_compass.py CohereCompassAttention.__init__ (config.head_dim,
    # num_key_value_heads, layer_types[i] == "sliding_attention" gives config.sliding_window)
    "CohereCompassForCausalLM",
    # interns1_pro.py InternS1ProMoeDecoderLayer.__init__ (hf_text_config), InternS1ProMoeAttention.__init__
    # (head_dim or hidden_size // num_attention_heads, num_key_value_heads, full attention)
    "InternS1ProMoeLLMForCausalLM",
    # molmo.py MolmoAttention.__init__: num_key_value_heads or num_attention_heads, head size hidden_size //
    # num_attention_heads, full attention: read with qwen2's rules (wrapper_table_more.LM_MODEL_TYPES)
    "MolmoModel",
    # molmo2.py Molmo2Attention.__init__: config.head_dim, num_key_value_heads, full attention
    "Molmo2TextModel",
    # ernie45_vl_moe.py Ernie4_5_VLMoeDecoderLayer.__init__ (head_dim or hidden_size // heads, num_key_value_heads)
    "Ernie4_5_VLMoeForCausalLM",
    # cosmos3_edge.py Cosmos3EdgeForCausalLM: NemotronHAttention (head_dim, else hidden_size // heads;
    # num_key_value_heads; full attention) on every other layer (LOOPED above)
    "Cosmos3EdgeForCausalLM",
    # moondream3.py Moondream3Attention.__init__: dim // n_heads, n_kv_heads, full attention (wrapper_table_more)
    "Moondream3TextModel",
)
