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
from kvviz.base.inputs import MAX_DIM, MAX_LAYERS, bounded_int

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
    # vllm/model_executor/models/step3_text.py Step3TextForCausalLM.__init__: Step3TextModel(prefix=prefix), not
    # maybe_prefix(prefix, "model"), so at the top its layers are f"{''}.layers": .layers.{i}.self_attn.attn
    "step3_text": (".layers", "self_attn.attn"),
}

# Attention whose KV heads and head size are not num_key_value_heads / head_dim (kvviz.families.decoder
# _heads): vllm/model_executor/models/minicpm3.py MiniCPM3Attention.__init__ (Attention(num_local_heads,
# qk_nope_head_dim + qk_rope_head_dim, num_kv_heads=num_local_heads)); falcon.py FalconAttention.__init__
# (new_decoder_architecture: num_kv_heads, else multi_query: 1, else num_attention_heads); gemma4.py
# Gemma4DecoderLayer.__init__ (config.per_layer_config[i].head_dim / .num_key_value_heads); hrm_text.py
# HrmTextAttention.__init__ (KV heads = num_attention_heads, head_dim).
HEAD_RULES = frozenset({"minicpm3", "falcon", "gemma4_text", "diffusion_gemma_text", "hrm_text"})
# Gemma 4's text configs: gemma4_text, and DiffusionGemma's diffusion_gemma_text (diffusion_gemma.py builds
# gemma4.py's Gemma4Model from it, prefix 'model'; transformers' DiffusionGemmaTextConfig keeps per_layer_config)
GEMMA4_TYPES = frozenset({"gemma4_text", "diffusion_gemma_text"})
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


# --- issue 27, "plan them": more model types, each rule from the cited vllm/model_executor/models/ file ---
HEAD_FROM_HIDDEN = HEAD_FROM_HIDDEN | {
    "deepseek",  # deepseek_v2.py DeepseekAttention.__init__ (DeepSeek V1: model_type "deepseek" is never MLA)
    "internlm2",  # internlm2.py InternLM2Attention.__init__
    "minicpm",  # minicpm.py MiniCPMAttention.__init__
    "orion",  # orion.py OrionAttention.__init__
    "step1",  # step1.py StepAttention.__init__
    "chatglm",  # chatglm.py GLMAttention.__init__ (config.kv_channels is not read)
    "dbrx",  # dbrx.py DbrxAttention.__init__: d_model // n_heads
}
LAYER_NAMES = {
    **LAYER_NAMES,
    # internlm2.py InternLM2DecoderLayer.__init__ (.attention), InternLM2Attention.__init__ (.attn)
    "internlm2": ("model.layers", "attention.attn"),
    # bailing_moe.py BailingMoeBlock.__init__ (.attention), BailingAttention.__init__ (.attn)
    "bailing_moe": ("model.layers", "attention.attn"),
    "bailing_moe_v2": ("model.layers", "attention.attn"),
    # chatglm.py ChatGLMBaseModel.__init__ (transformer), ChatGLMModel.__init__ (.encoder), GLMTransformer
    # (.layers), GLMBlock.__init__ (.self_attention), GLMAttention.__init__ (.attn); glm4v.py GLM4VModel(ChatGLMModel)
    "chatglm": ("transformer.encoder.layers", "self_attention.attn"),
    # dbrx.py DbrxForCausalLM (transformer), DbrxModel (.blocks), DbrxBlock (.norm_attn_norm),
    # DbrxFusedNormAttention (.attn), DbrxAttention (.attn)
    "dbrx": ("transformer.blocks", "norm_attn_norm.attn.attn"),
}
# KV heads read from other fields (kv_heads_of): decoder._heads asks for these.
KV_HEAD_READERS = frozenset({"chatglm", "step1", "dbrx"})
HEAD_RULES = HEAD_RULES | KV_HEAD_READERS
# Custom-code configs (no transformers class; vLLM reads them with trust_remote_code, chatglm with its own
# transformers_utils/configs/chatglm.py ChatGLMConfig): read from the JSON as it is (hf._NATIVE_ONLY), with the
# class's aliases and defaults that a reader needs (CUSTOM_FIELDS).
CUSTOM_CODE_TYPES = (
    "bailing_moe",
    "bailing_moe_v2",
    "param2moe",
    "solar",
    "telechat",
    "teleflm",
    "deepseek",
    "internlm2",
    "minicpm",
    "orion",
    "step1",
    "chatglm",
)
# model type -> (aliases {field: the config's own key}, defaults where the JSON omits a field)
CUSTOM_FIELDS = {
    # telechat2.py TeleChat2Model.__init__ sets hf_config.attribute_map (n_layer, n_head); Llama's rules then
    "telechat": ({"num_hidden_layers": "n_layer", "num_attention_heads": "n_head"}, {}),
    # transformers_utils/configs/chatglm.py ChatGLMConfig: attribute_map, __init__ defaults
    # (max_position_embeddings = seq_length)
    "chatglm": (
        {"num_hidden_layers": "num_layers", "max_position_embeddings": "seq_length"},
        dict(
            num_layers=28,
            hidden_size=4096,
            num_attention_heads=32,
            seq_length=2048,
            multi_query_attention=False,
            multi_query_group_num=1,
        ),
    ),
}
# The config class is another model type's: mimo.py MiMoForCausalLM(Qwen2ForCausalLM), MiMo's hub config
# MiMoConfig(Qwen2Config) (num_nextn_predict_layers: MTP layers are the drafter's, not the target's cache).
CONFIG_AS = {"mimo": "qwen2"}
# Attention that splits its KV heads over TP and never replicates them: param2moe.py Param2MoEAttention.__init__
# (assert num_key_value_heads % tp_size == 0).
KV_SPLIT_ONLY = frozenset({"param2moe"})
# Architectures named …ForConditionalGeneration that are no multimodal wrapper: registry.py maps
# ChatGLMForConditionalGeneration to chatglm.py ChatGLMForCausalLM (its LM under `transformer.`).
NOT_WRAPPERS = frozenset({"ChatGLMForConditionalGeneration"})


def custom_fields(text, model_type: str, *, name: str):
    """A custom-code config (namespace of its JSON) with its class's aliases and defaults (CUSTOM_FIELDS);
    DeepSeek V1's rswa_window (deepseek_v2.py DeepseekAttention: RSWAAttention) is not modelled; ChatGLM
    without original_rope is refused as vLLM refuses it (AttributeError)."""
    require(
        model_type != "deepseek" or getattr(text, "rswa_window", None) is None,
        f"{name}: rswa_window: vLLM's RSWAAttention (deepseek_v2.py DeepseekAttention) is not modelled",
    )
    require(  # chatglm.py GLMAttention.__init__: `not config.original_rope`; ChatGLMConfig has no default
        model_type != "chatglm" or hasattr(text, "original_rope"),
        f"{name}: config is missing field 'original_rope' (vLLM's chatglm.py GLMAttention reads it)",
    )
    aliases, defaults = CUSTOM_FIELDS.get(model_type, ({}, {}))
    for key, value in defaults.items():
        if getattr(text, key, None) is None:
            setattr(text, key, value)
    for key, own in aliases.items():
        if getattr(text, own, None) is not None:
            setattr(text, key, getattr(text, own))
    return text


def kv_heads_of(text, model_type: str, heads: int, *, name: str) -> int:
    """The total KV heads of KV_HEAD_READERS, as each model file reads them:

    * chatglm.py GLMAttention.__init__: multi_query_group_num if multi_query_attention, else the heads;
    * step1.py StepAttention.__init__: num_attention_groups, else num_key_value_heads, else 1 (and 1 for a
      value that is None or <= 0);
    * dbrx.py DbrxAttention.__init__: config.attn_config.kv_n_heads."""
    if model_type == "chatglm":
        if not getattr(text, "multi_query_attention", False):
            return heads
        return bounded_int(
            getattr(text, "multi_query_group_num", None), field=f"{name}: multi_query_group_num", low=1, high=MAX_DIM
        )
    if model_type == "step1":
        kv = getattr(text, "num_attention_groups", getattr(text, "num_key_value_heads", 1))
        if kv is None or (isinstance(kv, int) and not isinstance(kv, bool) and kv <= 0):
            return 1
        return bounded_int(kv, field=f"{name}: num_attention_groups", low=1, high=MAX_DIM)
    attn = getattr(text, "attn_config", None)
    kv = attn.get("kv_n_heads") if isinstance(attn, dict) else getattr(attn, "kv_n_heads", None)
    return bounded_int(kv, field=f"{name}: attn_config.kv_n_heads", low=1, high=MAX_DIM)
