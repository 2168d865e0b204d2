"""DeepSeek-V2 decoder layers that build no MLA (issue 27, mla): the attention DeepseekV2DecoderLayer picks,
and vLLM's own text config class of the DeepSeek-VL2 / DeepSeek-OCR wrappers.

Rules, from vLLM 0.33 (paths under vllm/):

* models/deepseek_v2.py DeepseekV2DecoderLayer.__init__: `use_mha` (model_type "deepseek", or
  qk_nope_head_dim == qk_rope_head_dim == 0) builds DeepseekAttention, else ModelConfig.use_mla builds
  DeepseekV2MLAAttention (the MLA family's cache), else DeepseekV2Attention;
* DeepseekAttention: Attention(num_heads // tp, head_dim = hidden_size // num_attention_heads,
  num_kv_heads = max(1, num_key_value_heads // tp)) at `<prefix>.self_attn.attn`; where the top config
  has `rswa_window` (Unlimited-OCR) it is an RSWAAttention, whose RSWASpec is a FullAttentionSpec for the
  planner (v1/kv_cache_interface.py RSWASpec: no max_memory_usage_bytes of its own);
* DeepseekV2Attention: Attention(num_local_heads, qk_nope_head_dim + qk_rope_head_dim,
  num_kv_heads=num_local_heads): every query head has its own K and V, TP-sharded;
* ModelConfig.use_mla (config/model.py, model_arch_config_convertor.py is_deepseek_mla): deepseek_v2 /
  deepseek_v3 with kv_lora_rank not None;
* transformers_utils/configs/deepseek_vl2.py DeepseekVLV2Config: the text config is
  DeepseekVLV2TextConfig(**config.json's language_config), transformers' DeepseekV2Config (its defaults
  for every missing key) except that kv_lora_rank may be None (DeepSeek-OCR's language model has none).
"""

from __future__ import annotations

import dataclasses
import functools
from types import SimpleNamespace

from kvviz.base.errors import require
from kvviz.core.declare import AttentionCache
from kvviz.families.hf import config_class, kv_heads_per_rank
from kvviz.families.hf_bounds import field

# the model_type kvviz gives a text config read as vLLM's DeepseekVLV2TextConfig (its own model_type is
# deepseek_v2, which transformers' DeepseekV2Config reads, refusing kv_lora_rank None)
VL_V2_TEXT = "deepseek_vl_v2_text"


@dataclasses.dataclass(frozen=True)
class MHAttention:
    """A DeepSeek-V2 layer's plain attention: total KV heads (split over TP as the rule says), head size, rule."""

    total_kv_heads: int
    head_size: int
    rule: str  # "DeepseekAttention" or "DeepseekV2Attention"
    rswa_window: int | None = None


@functools.cache
def _deepseek_v2_defaults() -> dict:
    return config_class("deepseek_v2")().to_dict()


def vl_v2_text(raw: dict) -> SimpleNamespace:
    """A DeepseekVLV2TextConfig: config.json's language model keys over transformers' DeepseekV2Config defaults
    (kv_lora_rank None kept), as attributes; its model_type is deepseek_v2."""
    merged = {**_deepseek_v2_defaults(), **{k: v for k, v in raw.items() if isinstance(k, str)}}
    merged["model_type"] = "deepseek_v2"
    return SimpleNamespace(**merged)


def plain_attention(text, *, name: str, vl_v2: bool = False) -> MHAttention | None:
    """The plain attention DeepseekV2DecoderLayer (the layer of the records with `v2_layer`) builds for this
    text config, or None where it builds MLA.
    kv_lora_rank None (DeepseekV2Attention) exists only in vLLM's DeepseekVLV2TextConfig (`vl_v2`):
    transformers' DeepseekV2Config / DeepseekV3Config refuse None, so elsewhere MLA is built and a missing
    kv_lora_rank is the MLA family's one-line refusal."""
    nope, rope = getattr(text, "qk_nope_head_dim", 0) or 0, getattr(text, "qk_rope_head_dim", 0) or 0
    heads = field(text, "num_attention_heads", model=name)
    rswa = getattr(text, "rswa_window", None)
    if getattr(text, "model_type", None) == "deepseek" or (nope == 0 and rope == 0):
        hidden = field(text, "hidden_size", model=name)
        kv = field(text, "num_key_value_heads", model=name)
        require(hidden % heads == 0, f"{name}: hidden_size={hidden}: must divide by num_attention_heads={heads}")
        return MHAttention(kv, hidden // heads, "DeepseekAttention", rswa)
    if not vl_v2 or getattr(text, "kv_lora_rank", None) is not None:
        return None  # use_mla: DeepseekV2MLAAttention
    return MHAttention(heads, nope + rope, "DeepseekV2Attention")


def plain_caches(attn: MHAttention, n: int, prefix: str, tp: int, dtype: str, *, model: str) -> tuple:
    """One full-attention cache a layer, `<prefix>.<i>.self_attn.attn`."""
    kv = kv_heads_per_rank(attn.total_kv_heads, tp, model=model)
    return tuple(
        AttentionCache(
            name=f"{prefix}.{i}.self_attn.attn",
            layer=i,
            num_kv_heads=kv,
            head_size=attn.head_size,
            head_size_v=attn.head_size,
            kv_dtype=dtype,
        )
        for i in range(n)
    )
