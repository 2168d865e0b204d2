"""MLA decoders (DeepSeek V2 / V2-Lite / V3 / R1, Kimi-K2): every layer registers one latent
cache of kv_lora_rank + qk_rope_head_dim elements a token (docs/model-core.md#families).

Rules, from vLLM 0.33 (paths under vllm/):

* use_mla (config/model.py ModelConfig.use_mla): model_type in is_deepseek_mla's list
  (transformers_utils/model_arch_config_convertor.py: deepseek_v2, deepseek_v3, kimi_k2, ...) and
  kv_lora_rank set; kimi_k2 is read with DeepseekV3Config's fields (transformers_utils/config.py
  _CONFIG_REGISTRY) and its architecture is DeepseekV3ForCausalLM;
* head size (model_arch_config_convertor.get_head_size) = kv_lora_rank + qk_rope_head_dim, read
  from config.json itself (it works around a transformers attribute_map bug);
* the spec (layers/attention/mla_attention.py MLAAttention.get_kv_cache_spec): MLAAttentionSpec,
  one KV head on every rank (ModelConfig.get_num_kv_heads returns 1 for MLA: not TP-sharded),
  head_size_v 0; name `model.layers.{i}.self_attn.attn` (models/deepseek_v2.py
  DeepseekV2MLAAttention -> layers/mla.py MultiHeadLatentAttentionWrapper, prefix + ".attn");
  the MTP layers (num_nextn_predict_layers) are not part of the target model's cache;
* TP: ModelConfig.verify_with_parallel_config, the attention heads divide by TP.
"""

from __future__ import annotations

import dataclasses

from kvviz.base.errors import require
from kvviz.base.inputs import short_repr
from kvviz.core.declare import MLACache
from kvviz.families.hf import check_tp_heads, derive_max_model_len, field, read_config, resolve_dtype
from kvviz.families.registry import Family, Model, model_method, register
from kvviz.options import Options


@dataclasses.dataclass(frozen=True)
class MLAConfig:
    """The cache-relevant part of an MLA decoder's config (DeepSeek V2/V3, Kimi-K2): layers, attention heads,
    kv_lora_rank, qk_rope_head_dim and the layer-name prefix."""

    num_hidden_layers: int
    num_attention_heads: int
    kv_lora_rank: int
    qk_rope_head_dim: int
    layer_prefix: str = "model.layers"

    @property
    def latent(self) -> int:
        """Elements of one token's MLA latent: kv_lora_rank + qk_rope_head_dim (vLLM 0.33 MLAAttentionSpec
        head_size)."""
        return self.kv_lora_rank + self.qk_rope_head_dim


def _raw_int(raw: dict, text, key: str, *, name: str) -> int:
    """A field as config.json has it (vLLM's get_head_size re-reads the raw file), else the
    config object's."""
    value = raw.get(key)
    if value is None and isinstance(raw.get("text_config"), dict):
        value = raw["text_config"].get(key)
    if value is None:
        value = getattr(text, key, None)
    require(value is not None, f"{name}: config is missing field {key!r}")
    require(
        isinstance(value, int) and not isinstance(value, bool) and value > 0,
        f"{name}: {key}={short_repr(value)}: must be a positive integer",
    )
    return value


def mla_dims(raw: dict, text, *, name: str) -> tuple[int, int]:
    """(kv_lora_rank, qk_rope_head_dim) of an MLA config; shared with the state family (Kimi-Linear)."""
    return _raw_int(raw, text, "kv_lora_rank", name=name), _raw_int(raw, text, "qk_rope_head_dim", name=name)


class MLAFamily(Family):
    """MLA decoders: one latent page per layer, not sharded by TP (vLLM 0.33 MLAAttentionSpec, docs/model-
    core.md#families)."""

    key = "mla"
    title = "MLA decoder"
    knobs = (
        "kv_dtype",
        "block_size",
        "max_model_len",
        "max_num_batched_tokens",
        "async_scheduling",
        "tensor_parallel_size",
    )

    def read(self, raw: dict, *, name: str) -> Model:
        top, text = read_config(raw, name=name)
        model_type = getattr(text, "model_type", None) or raw.get("model_type")
        n = field(text, "num_hidden_layers", model=name)
        require(n > 0, f"{name}: num_hidden_layers={n}: must be positive")
        heads = field(text, "num_attention_heads", model=name)
        rank, rope = mla_dims(raw, text, name=name)
        archs = raw.get("architectures") or [model_type]
        length, key = derive_max_model_len(text)
        config = MLAConfig(num_hidden_layers=n, num_attention_heads=heads, kv_lora_rank=rank, qk_rope_head_dim=rope)
        return Model(
            name=name,
            family=self.key,
            architecture=str(archs[0]),
            model_type=str(model_type),
            dtype=resolve_dtype(top, text, raw, name=name),
            max_model_len=length,
            config=config,
            max_model_len_source=key,
        )

    @model_method
    def caches(self, model: Model, options: Options) -> tuple[MLACache, ...]:
        c: MLAConfig = model.config
        tp = options.tensor_parallel_size or 1
        check_tp_heads(c.num_attention_heads, tp, model=model.name)
        dtype = options.kv_dtype or model.dtype
        return tuple(
            MLACache(
                name=f"{c.layer_prefix}.{i}.self_attn.attn",
                layer=i,
                kv_lora_rank=c.kv_lora_rank,
                qk_rope_head_dim=c.qk_rope_head_dim,
                kv_dtype=dtype,
            )
            for i in range(c.num_hidden_layers)
        )

    @model_method
    def describe(self, model: Model) -> str:
        c: MLAConfig = model.config
        return (
            f"{model.name} ({model.architecture}): {c.num_hidden_layers} MLA layers, one latent head of "
            f"kv_lora_rank {c.kv_lora_rank} + qk_rope_head_dim {c.qk_rope_head_dim} = {c.latent} a token "
            f"(not TP-sharded); {model.dtype}; max_model_len {model.max_model_len:,}"
        )


MLA = register(MLAFamily(), ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "deepseek_v2", "deepseek_v3", "kimi_k2"))
