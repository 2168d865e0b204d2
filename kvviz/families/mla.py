"""MLA decoders (DeepSeek V2 / V2-Lite / V3 / R1 / V3.2, Kimi-K2, GLM-4.7-Flash, GLM-MoE-DSA, AXK1,
HY-V4, Mistral Large 3, openPangu Ultra MoE): every layer registers one latent cache of
kv_lora_rank + qk_rope_head_dim elements a token, DSA models an indexer K cache beside it
(docs/model-core.md#families).

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
* TP: ModelConfig.verify_with_parallel_config, the attention heads divide by TP;
* DSA (DeepSeek V3.2, GLM-MoE-DSA: models/deepseek_v32/attention.py DeepseekV32Attention, and
  DeepseekV2MLAAttention wherever the config has index_topk): every layer whose top-k is not shared
  first builds an indexer whose `DeepseekV32IndexerCache` registers `{prefix}.self_attn.indexer.k_cache`,
  an MLAAttentionSpec of one head of index_head_dim + index_head_dim // 128 x 4 uint8 (fp8 values and
  one fp32 scale per quant_block_size 128: formats.indexer_fp8_row), then the sparse MLA cache
  `self_attn.attn`. Both are MLAAttentionSpecs of one block size, so vLLM keeps them in one group
  (UniformTypeKVCacheSpecs). Sparse MLA on Hopper runs FLASH_ATTN_MLA_SPARSE (platforms/cuda.py
  _get_backend_priorities), whose kernel blocks are MultipleOf(64): the block size is 64;
* openPangu (models/openpangu.py OpenPanguDecoderLayer): MLA when the config has qk_nope_head_dim,
  qk_rope_head_dim, v_head_dim and kv_lora_rank; its config is custom code, read as the JSON has it;
* HY-V4 (models/hy_v4/nvidia/attention.py HYV4MLAAttention): dense MLA unless layer_types names sparse
  layers (refused: not modelled); its learnable sink binds a sink-capable backend (FLASHMLA_SPARSE) only where
  that validates, which a dense layer does not ("non-sparse not supported"), so the dense cache is unchanged.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

from kvviz.base.errors import require
from kvviz.base.formats import ds_mla_v32_row, indexer_fp8_row, mla_row
from kvviz.base.inputs import MAX_DIM, MAX_TOKENS_PER_BLOCK, bounded_int, short_repr
from kvviz.core.declare import MLACache
from kvviz.core.kinds import CacheKind
from kvviz.core.spec import CacheSpec
from kvviz.families.deepseek_text import VL_V2_TEXT, MHAttention, plain_attention, plain_caches, vl_v2_text
from kvviz.families.hf import check_tp_heads, derive_max_model_len, read_config, resolve_dtype
from kvviz.families.hf_bounds import field, mla_dims
from kvviz.families.mla_records import RECORDS, MLARecord
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
    index_head_dim: int | None = None  # DSA: the indexer K cache's dims (None: dense MLA)
    # the MLA modules of one decoder layer, each registering `{layer_prefix}.{i}.{module}.attn`
    attentions: tuple[str, ...] = ("self_attn",)
    plain: MHAttention | None = None  # a DeepseekV2DecoderLayer that builds no MLA (deepseek_text)

    @property
    def latent(self) -> int:
        """Elements of one token's MLA latent: kv_lora_rank + qk_rope_head_dim (vLLM 0.33 MLAAttentionSpec
        head_size)."""
        return self.kv_lora_rank + self.qk_rope_head_dim


# vLLM 0.33's is_deepseek_mla (transformers_utils/model_arch_config_convertor.py): the model types whose
# MLA layers vLLM serves with use_mla (the ones this family reads; kimi_linear: the state family).
MLA_MODEL_TYPES = (
    "axk1",
    "deepseek_v2",
    "deepseek_v3",
    "deepseek_v32",
    "glm_moe_dsa",
    "glm4_moe_lite",
    "kimi_k2",
    "pangu_ultra_moe",
    "hy_v4",
    "longcat_flash",
)
# the model types of the records whose model file builds MLA whatever use_mla says, and of the DSA records
MLA_ALWAYS_MODEL_TYPES = tuple(t for r in RECORDS if r.always_mla for t in r.model_types)
DSA_MODEL_TYPES = tuple(t for r in RECORDS if r.dsa for t in r.model_types)
# DeepseekV32Indexer / Indexer (models/deepseek_v32/attention.py, models/deepseek_v2.py): quant_block_size = 128
INDEXER_QUANT_BLOCK = 128
# FLASH_ATTN_MLA_SPARSE.get_supported_kernel_block_sizes (v1/attention/backends/mla/flashattn_mla_sparse.py)
SPARSE_MLA_BLOCK = 64
# HYV4MLAAttention: layer_types entries that make a layer sparse (models/hy_v4/nvidia/attention.py)
HYV4_SPARSE_LAYER_TYPES = ("sparse_attention", "sparse", "indexed_attention")


def _dsa_index_head_dim(raw: dict, text, model_type: str, record: MLARecord, *, name: str) -> int | None:
    """index_head_dim of a DSA model (the config has index_topk), after refusing what kvviz does not model:
    a shared top-k (index_topk_freq > 1 or an index_topk_pattern with 'S': those layers build no indexer and
    vLLM's index groups change) and HY-V4's sparse layer types; None for dense MLA."""
    if model_type == "hy_v4":
        # vLLM reads hy_v4 with its own HYV4Config (transformers_utils/configs/hy_v4.py, _CONFIG_REGISTRY), not
        # transformers' (which fills layer_types with 'indexed_attention'): layer_types stays None unless given,
        # 'sparse' / 'sparse_attention' are renamed 'deepseek_sparse_attention' (then not a sparse kind for
        # HYV4MLAAttention), and learnable_sink defaults to true.
        own = _namespace_of(raw)
        kinds = getattr(own, "layer_types", None) or ()
        kinds = ["deepseek_sparse_attention" if k in ("sparse_attention", "sparse") else k for k in kinds]
        require(
            not any(k in HYV4_SPARSE_LAYER_TYPES for k in kinds),
            f"{name}: layer_types names sparse layers: HY-V4's sparse layers are not modelled",
        )
        # learnable_sink (true by default) leaves a dense layer's cache as it is: _resolve_sink_backend keeps the
        # selected backend only if it supports sinks (no CUDA MLA backend does), else tries its FLASHMLA_SPARSE
        # subclass, whose validate_configuration refuses a dense layer ("non-sparse not supported"), so the sink
        # is disabled and the layer keeps the backend the selector picks (FLASH_ATTN_MLA, FLASHMLA for fp8)
        return None
    if model_type == "deepseek_v32":
        # vLLM reads deepseek_v32 with DeepseekV3Config (transformers_utils/config.py _CONFIG_REGISTRY), which has
        # no index_* defaults: only what config.json holds (transformers' own class would fill them in)
        text = _namespace_of(raw)
    if record.dsa or model_type in DSA_MODEL_TYPES:
        require(  # DeepseekV32Attention is always sparse; its indexer reads config.index_topk
            getattr(text, "index_topk", None) is not None,
            f"{name}: config is missing field 'index_topk' (DeepSeek V3.2's DSA attention is always sparse)",
        )
    if model_type == "pangu_ultra_moe" or getattr(text, "index_topk", None) is None:  # is_v32 = hasattr(...)
        return None
    freq = getattr(text, "index_topk_freq", 1)
    pattern = getattr(text, "index_topk_pattern", None)
    require(freq == 1, f"{name}: index_topk_freq={short_repr(freq)}: a shared top-k (freq > 1) is not modelled")
    require(
        pattern is None or "S" not in pattern,
        f"{name}: index_topk_pattern={short_repr(pattern)}: shared top-k layers ('S') are not modelled",
    )
    dim = getattr(text, "index_head_dim", None)
    require(dim is not None, f"{name}: config is missing field 'index_head_dim' (DSA: index_topk is set)")
    return bounded_int(dim, field=f"{name}: index_head_dim", low=1, high=MAX_DIM)


def _namespace_of(raw: dict):
    """config.json's own fields (its text_config's for a wrapper) as attributes."""
    part = raw["text_config"] if isinstance(raw.get("text_config"), dict) else raw
    return SimpleNamespace(**{k: v for k, v in part.items() if isinstance(k, str)})


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

    def read(self, raw: dict, *, name: str, record: MLARecord) -> Model:
        vl_v2 = raw.get("model_type") == VL_V2_TEXT
        if vl_v2:  # a DeepSeek-VL2 / OCR wrapper's language model (deepseek_text)
            top = text = vl_v2_text(raw)
        else:
            top, text = read_config(raw, name=name, read=record.config)
        model_type = getattr(text, "model_type", None) or raw.get("model_type")
        if record.config.as_type and record.config.applies(raw.get("model_type")):  # read as another type's class
            model_type = raw.get("model_type")
        require(
            model_type in MLA_MODEL_TYPES + MLA_ALWAYS_MODEL_TYPES,
            f"{name}: model_type {short_repr(model_type)}: vLLM 0.33 serves MLA only for the model types of "
            f"is_deepseek_mla ({', '.join(MLA_MODEL_TYPES)}) and the model files that always build it "
            f"({', '.join(MLA_ALWAYS_MODEL_TYPES)})",
        )
        for key in record.requires:  # e.g. OpenPanguDecoderLayer.use_mla: all four fields present
            require(getattr(text, key, None) is not None, f"{name}: config is missing field {key!r} (MLA)")
        layers_key = record.layers_key
        n = field(text, layers_key, model=name)
        require(n > 0, f"{name}: {layers_key}={n}: must be positive")
        heads = field(text, "num_attention_heads", model=name)
        archs = raw.get("architectures") or [model_type]
        plain = plain_attention(text, name=name, vl_v2=vl_v2) if record.v2_layer else None  # DeepseekV2DecoderLayer
        rank, rope = (0, 0) if plain else mla_dims(raw, text, name=name)
        length, key = derive_max_model_len(text)
        config = MLAConfig(
            num_hidden_layers=n,
            num_attention_heads=heads,
            kv_lora_rank=rank,
            qk_rope_head_dim=rope,
            index_head_dim=_dsa_index_head_dim(raw, text, str(model_type), record, name=name),
            attentions=record.attentions,
            plain=plain,
        )
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
    def caches(self, model: Model, options: Options) -> tuple[MLACache, ...] | tuple[CacheSpec, ...]:
        c: MLAConfig = model.config
        tp = options.tensor_parallel_size or 1
        check_tp_heads(c.num_attention_heads, tp, model=model.name)
        dtype = options.kv_dtype or model.dtype
        if c.plain is not None:
            return plain_caches(c.plain, c.num_hidden_layers, c.layer_prefix, tp, dtype, model=model.name)
        if c.index_head_dim is not None:
            return _sparse_caches(model, options, dtype)
        return tuple(
            MLACache(
                name=f"{c.layer_prefix}.{i}.{module}.attn",
                layer=i,
                kv_lora_rank=c.kv_lora_rank,
                qk_rope_head_dim=c.qk_rope_head_dim,
                kv_dtype=dtype,
            )
            for i in range(c.num_hidden_layers)
            for module in c.attentions
        )

    @model_method
    def describe(self, model: Model) -> str:
        c: MLAConfig = model.config
        if c.plain is not None:
            return (
                f"{model.name} ({model.architecture}): {c.num_hidden_layers} attention layers without MLA "
                f"({c.plain.rule}, deepseek_v2.py DeepseekV2DecoderLayer): {c.plain.total_kv_heads} KV heads of "
                f"{c.plain.head_size}; {model.dtype}; max_model_len {model.max_model_len:,}"
            )
        dsa = (
            f" + a DSA indexer K cache of {c.index_head_dim} fp8 + {c.index_head_dim // INDEXER_QUANT_BLOCK} fp32 "
            f"scales a token"
            if c.index_head_dim is not None
            else ""
        )
        modules = f" x {len(c.attentions)} MLA modules ({', '.join(c.attentions)})" if len(c.attentions) > 1 else ""
        return (
            f"{model.name} ({model.architecture}): {c.num_hidden_layers} MLA layers{modules}, one latent head of "
            f"kv_lora_rank {c.kv_lora_rank} + qk_rope_head_dim {c.qk_rope_head_dim} = {c.latent} a token "
            f"(not TP-sharded){dsa}; {model.dtype}; max_model_len {model.max_model_len:,}"
        )


def _sparse_caches(model: Model, options: Options, dtype: str) -> tuple[CacheSpec, ...]:
    """A DSA model's caches, paged: per layer the indexer K cache (registered first: the indexer is built
    before MLAAttention) and the sparse MLA cache, both MLAAttentionSpecs of the sparse backend's block."""
    c: MLAConfig = model.config
    block = options.block_size or SPARSE_MLA_BLOCK
    bounded_int(block, field="block_size", low=1, high=MAX_TOKENS_PER_BLOCK)
    require(
        block % SPARSE_MLA_BLOCK == 0,
        f"block_size={block}: {model.name}'s sparse MLA backend (FLASH_ATTN_MLA_SPARSE) takes multiples of "
        f"{SPARSE_MLA_BLOCK} tokens",
    )
    # an fp8 cache: FLASH_ATTN_MLA_SPARSE takes none, FLASHMLA_SPARSE (next on SM90) takes "fp8" as fp8_ds_mla
    # (mla_attention.py _canonicalize_sparse_mla_kv_cache_dtype); off SM100 its quantized spec aligns block
    # strides to MultipleOf(64) (FlashMLASparseBackend.customize_spec): one 64-token block, nothing to pad
    mla = (
        ds_mla_v32_row(c.kv_lora_rank, c.qk_rope_head_dim)
        if dtype == "fp8"
        else mla_row(c.kv_lora_rank, c.qk_rope_head_dim, dtype)
    )
    index = indexer_fp8_row(c.index_head_dim)
    out = []
    for i in range(c.num_hidden_layers):
        prefix = f"{c.layer_prefix}.{i}.self_attn"
        for name, kind, row in ((".indexer.k_cache", CacheKind.INDEXER_K, index), (".attn", CacheKind.MLA, mla)):
            out.append(
                CacheSpec(
                    name=prefix + name,
                    kind=kind,
                    layer=i,
                    row_format=row,
                    rows=block,
                    tokens_per_block=block,
                    dcp_sharded=True,
                )
            )
    return tuple(out)


MLA = register(MLAFamily(), RECORDS)
