"""The architectures vLLM 0.33 serves through its Transformers modeling backend (registry.py
`_TRANSFORMERS_SUPPORTED_MODELS`, vllm/model_executor/models/transformers/), planned by the decoder family
with the rule by which that backend registers their KV caches (issue 27):

* vllm/model_executor/models/transformers/base.py Base._create_attention_instances: one vLLM `Attention`
  per decoder layer i (a layer whose attention does not dispatch through the Transformers attention
  interface is a ValueError), attached to the HF attention module serving layer i and named
  `{that module's qualname}.attn` (VLLM_ATTN_ATTR); the qualname is the one of transformers' AutoModel
  (Base._create_model) under `model` (Base.recursive_replace), so `model.layers.{i}.self_attn.attn` for
  most and the HF module tree's own elsewhere (the records' `layer_names`);
* head size: model_arch_config.head_size (transformers_utils/model_arch_config_convertor.py
  ModelArchConfigConvertorBase.get_head_size: head_dim when > 0, else hidden_size_per_head, else hidden_size //
  num_attention_heads),
  KV heads: ModelConfig.get_num_kv_heads (get_total_num_kv_heads: the first of config.py
  CONFIG_FIELD_ALIASES['total_num_kv_heads'] the config has, `KV_HEAD_KEYS`, else num_attention_heads);
* window: `per_layer_sliding_window = text_config.sliding_window` where layer_types[i] ==
  'sliding_attention', else the Attention's CacheConfig.sliding_window (the decoder's two-step rule);
* no KV sharing: the backend passes no kv_sharing_target_layer_name, so HunYuan's use_cla /
  cla_share_factor leave every layer its own cache (transformers' HunYuan modeling has no CLA either);
  MoE (transformers/moe.py) replaces the experts only, no cache.

The three multimodal ones (Emu3, HunYuan-VL, VibeVoice-ASR: transformers/multimodal.py
TransformersMultiModalForCausalLM, a MultiModalMixin over the same Base) are multimodal wrappers
(kvviz.families.wrapper_records) whose language model is `TransformersForCausalLM` of the text config
(get_text_config(), Base.text_config), read by this rule: Base._create_attention_instances registers one
Attention per layer of text_config.num_hidden_layers, named after the HF attention module's qualname under
`model` (transformers' AutoModel of the whole config), whose decoder (get_decoder()) is a submodule:
`model.text_model.layers.N.self_attn.attn` for Emu3Model, `model.language_model.` for the others.

`RECORDS`: one DecoderRecord (`backend=True`) per architecture of registry.py `_TRANSFORMERS_SUPPORTED_MODELS`
(text generation), with the model type transformers' config of it has, and the backend's own causal LM.
"""

from __future__ import annotations

from kvviz.base.errors import require
from kvviz.families.decoder_rules import DecoderRecord

# config.py CONFIG_FIELD_ALIASES["total_num_kv_heads"], in its order (getattr_iter takes the first present)
KV_HEAD_KEYS = ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num", "num_attention_groups")

_BASE = "transformers/base.py Base._create_attention_instances"
_MOE = "transformers/moe.py (experts only), base.py Base._create_attention_instances"


def _backend(name: str, model_type: str, vllm: str = _BASE, **fields) -> DecoderRecord:
    return DecoderRecord(name=name, model_types=(model_type,), vllm=vllm, backend=True, **fields)


# registry.py _TRANSFORMERS_BACKEND_MODELS: the backend's own causal LM, the language model of the multimodal ones
BACKEND_LM = "TransformersForCausalLM"
RECORDS: tuple[DecoderRecord, ...] = (
    _backend("ArceeForCausalLM", "arcee"),
    _backend("CwmForCausalLM", "cwm"),
    _backend("FlexOlmoForCausalLM", "flex_olmo", _MOE),
    _backend("GlmForCausalLM", "glm"),
    # transformers GPTBigCodeModel.h[i].attn
    _backend("GPTBigCodeForCausalLM", "gpt_bigcode", layer_names=("model.h", "attn.attn")),
    # transformers GPTNeoXModel.layers[i].attention
    _backend("GPTNeoXForCausalLM", "gpt_neox", layer_names=("model.layers", "attention.attn")),
    _backend("HunYuanDenseV1ForCausalLM", "hunyuan_v1_dense"),
    _backend("HunYuanMoEV1ForCausalLM", "hunyuan_v1_moe", _MOE),
    _backend("Jais2ForCausalLM", "jais2"),
    _backend("Kolibri1ForCausalLM", "kolibri1", _MOE),
    _backend("MellumForCausalLM", "mellum", _MOE),
    _backend("OlmoForCausalLM", "olmo"),
    _backend("Olmo2ForCausalLM", "olmo2"),
    _backend("Olmo3ForCausalLM", "olmo3"),
    _backend("PhiForCausalLM", "phi"),
    _backend("SeedOssForCausalLM", "seed_oss"),
    _backend("SmolLM3ForCausalLM", "smollm3"),
    _backend("Starcoder2ForCausalLM", "starcoder2"),
    _backend("VaultGemmaForCausalLM", "vaultgemma"),
    DecoderRecord(name=BACKEND_LM, vllm=_BASE + " (the multimodal ones' language model)", backend=True),
)

# transformers' HunYuanDenseV1Attention / HunYuanMoEV1Attention.__init__ (modeling_hunyuan_v1_dense.py,
# modeling_hunyuan_v1_moe.py): `self.scaling = getattr(config, "head_dim", ...) ** -0.5`, and their config
# classes always carry head_dim (None by default): the model the backend builds fails without one (vLLM 0.33
# recorded: TypeError on transformers' default HunYuan configs, tests/data/vllm-0.33/registry/README.md).
# transformers' HunYuanVLDenseV1Attention (modeling_hunyuan_vl.py) reads getattr(config, "head_dim", ...) the same
# way, and HunYuanVLTextConfig carries head_dim (None by default) too.
HEAD_DIM_REQUIRED = frozenset({"hunyuan_v1_dense", "hunyuan_v1_moe", "hunyuan_vl_text"})


def backend_kv_heads(text, heads: int) -> int:
    """KV heads as ModelArchConfigConvertorBase.get_total_num_kv_heads reads them (the first alias present)."""
    for key in KV_HEAD_KEYS:
        value = getattr(text, key, None)
        if value is not None:
            return value
    return heads


def backend_head_size(text, heads: int, hidden: int | None, *, name: str) -> int:
    """Head size as ModelArchConfigConvertorBase.get_head_size reads it (no MLA among these)."""
    head_dim = getattr(text, "head_dim", None)
    require(
        head_dim is not None or getattr(text, "model_type", None) not in HEAD_DIM_REQUIRED,
        f"{name}: head_dim: transformers' HunYuan attention needs it (vLLM's Transformers backend builds that model)",
    )
    if head_dim is not None and head_dim > 0:
        return head_dim
    per_head = getattr(text, "hidden_size_per_head", None)
    if per_head is not None:
        return per_head
    require(hidden is not None and heads > 0, f"{name}: config is missing field 'head_dim'")
    return hidden // heads
