"""A hybrid model's caches, as vLLM 0.33 registers them (docs/hybrid.md#hybrid-caches).

Attention layers (full, sliding window, chunked local) register one page per block:
block_size tokens x num_kv_heads x head_dim x 2 (K and V) x dtype bytes. A gated delta net
(linear attention) layer registers one recurrent state per request: the causal conv's last
(conv_kernel - 1) inputs and the SSM state. vLLM makes every page the same size: with
linear-attention layers it raises the attention block size until one attention page holds a
state, then pads the state page to the attention page (that padding is waste kvviz shows).
Every size here is built from `formats.RowFormat` fields, never typed in.
"""

from __future__ import annotations

import dataclasses
import functools
import math

from .defaults import MAX_NUM_BATCHED_TOKENS
from .errors import KvvizError, require
from .formats import Element, Field, RowFormat
from .hf import CHUNKED, FULL, LINEAR, SLIDING, HybridConfig
from .specs import CacheKind, CacheSpec

# vLLM's CacheConfig.DEFAULT_BLOCK_SIZE: tokens per block when nothing asks for another size.
DEFAULT_BLOCK_SIZE = 16
# The smallest kernel block of FlashAttention / FlashInfer (`get_supported_kernel_block_sizes`,
# MultipleOf(16)): the attention block size vLLM derives for a hybrid model is a multiple of it.
KERNEL_BLOCK_ALIGNMENT = 16
# FlashInfer's gated delta net prefill exports a state every 64 tokens (gdn_attn.py,
# FLASHINFER_GDN_CHECKPOINT_ALIGNMENT); on Hopper vLLM 0.33 picks that backend, so with prefix
# caching ('align' mode) the attention block is also a multiple of 64.
HOPPER_GDN_CHECKPOINT_ALIGNMENT = 64

KV_DTYPES = {"bf16": Element.BF16, "fp8": Element.E4M3, "fp32": Element.FP32}
SSM_DTYPES = {"bfloat16": Element.BF16, "float32": Element.FP32}
# The conv state takes the model dtype (mamba_cache_dtype 'auto'); float16 is 2 bytes like bf16.
_MODEL_DTYPES = {"bfloat16": Element.BF16, "float16": Element.BF16, "float32": Element.FP32}

ATTENTION_KINDS = {FULL: CacheKind.FULL_ATTENTION, SLIDING: CacheKind.SLIDING_ATTENTION,
                   CHUNKED: CacheKind.CHUNKED_ATTENTION}


@dataclasses.dataclass(frozen=True, kw_only=True)
class HybridOptions:
    """The knobs a vLLM deployment of a hybrid model chooses.

    kv_dtype: 'bf16', 'fp8' or 'fp32' (None: the model dtype, bf16 for every preset).
    block_size: tokens per attention block (None: vLLM's default, 16, raised for models with
        linear-attention layers by `attention_block_size`).
    mamba_ssm_dtype: 'bfloat16' or 'float32' (None: the config's choice, else the model dtype).
    prefix_caching: vLLM 0.33 turns it on by default, which puts linear-attention state in
        'align' mode (MambaModelConfig.verify_and_update_config).
    sliding_window: replaces the config's window (None: keep it).
    mamba_align: the linear-attention backend's checkpoint alignment in tokens (64: FlashInfer on
        Hopper; None: a backend that exports no checkpoints).
    max_num_batched_tokens: tokens in flight per step (sliding and chunked admission).
    """

    kv_dtype: str | None = None
    block_size: int | None = None
    mamba_ssm_dtype: str | None = None
    prefix_caching: bool = True
    sliding_window: int | None = None
    mamba_align: int | None = HOPPER_GDN_CHECKPOINT_ALIGNMENT
    max_num_batched_tokens: int = MAX_NUM_BATCHED_TOKENS

    def __post_init__(self) -> None:
        if self.kv_dtype is not None and self.kv_dtype not in KV_DTYPES:
            raise KvvizError(f"kv_dtype={self.kv_dtype!r}: unknown; choose one of {', '.join(KV_DTYPES)}")
        if self.mamba_ssm_dtype is not None and self.mamba_ssm_dtype not in SSM_DTYPES:
            raise KvvizError(f"mamba_ssm_dtype={self.mamba_ssm_dtype!r}: unknown; choose one of {', '.join(SSM_DTYPES)}")
        if self.block_size is not None:
            require(isinstance(self.block_size, int) and not isinstance(self.block_size, bool)
                    and self.block_size > 0 and self.block_size % KERNEL_BLOCK_ALIGNMENT == 0,
                    f"block_size={self.block_size!r}: must be a positive multiple of {KERNEL_BLOCK_ALIGNMENT} "
                    f"(the attention kernels' block)")
        for field in ("sliding_window", "mamba_align"):
            value = getattr(self, field)
            require(value is None or (isinstance(value, int) and not isinstance(value, bool) and value > 0),
                    f"{field}={value!r}: must be a positive integer")
        require(isinstance(self.max_num_batched_tokens, int) and self.max_num_batched_tokens > 0,
                f"max_num_batched_tokens={self.max_num_batched_tokens!r}: must be a positive integer")
        require(isinstance(self.prefix_caching, bool), f"prefix_caching={self.prefix_caching!r}: must be True or False")


# ---- row formats -------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def kv_row(num_kv_heads: int, head_dim: int, kv_dtype: str) -> RowFormat:
    """One token of one attention layer: K of every KV head, then V (head_size_v = head_size).
    kvviz draws all K rows of a page before all V rows (the payload / footer regions of
    `formats.page_regions`); where inside the page each byte sits depends on the backend's
    layout, the sizes do not."""
    element = KV_DTYPES[kv_dtype]
    n = num_kv_heads * head_dim
    return RowFormat(name=f"kv_{kv_dtype}", dims=2 * n, payload=(Field(name="K", element=element, count=n),),
                     footer=(Field(name="V", element=element, count=n),),
                     view_dtype={"bf16": "bfloat16", "fp32": "float32"}.get(kv_dtype, "uint8"), part_names=("K", "V"), codec="parts")


@functools.lru_cache(maxsize=None)
def gdn_state_row(conv_dim: int, conv_kernel: int, num_v_heads: int, head_k_dim: int, head_v_dim: int,
                  conv_dtype: str, ssm_dtype: str) -> RowFormat:
    """One gated delta net state (vLLM's MambaStateShapeCalculator.gated_delta_net_state_shape):
    conv state (conv_kernel - 1) x conv_dim, then SSM state num_v_heads x head_v_dim x head_k_dim."""
    conv_el, ssm_el = _MODEL_DTYPES[conv_dtype], SSM_DTYPES[ssm_dtype]
    conv = Field(name="conv", element=conv_el, count=(conv_kernel - 1) * conv_dim)
    ssm = Field(name="ssm", element=ssm_el, count=num_v_heads * head_v_dim * head_k_dim)
    view = "bfloat16" if conv_el is ssm_el is Element.BF16 else "float32" if conv_el is ssm_el else "uint8"
    return RowFormat(name=f"gdn_state_{ssm_dtype}", dims=conv.count + ssm.count, payload=(conv,), footer=(ssm,),
                     view_dtype=view, part_names=("conv state", "SSM state"), codec="parts")


def resolved_kv_dtype(config: HybridConfig, options: HybridOptions) -> str:
    """options.kv_dtype, else the model dtype (vLLM's cache_dtype 'auto'; float16 is sized as bf16)."""
    if options.kv_dtype is not None:
        return options.kv_dtype
    return "fp32" if config.torch_dtype == "float32" else "bf16"


def resolved_ssm_dtype(config: HybridConfig, options: HybridOptions) -> str:
    """options.mamba_ssm_dtype, else the config's, else 'auto' = the conv state's dtype."""
    choice = options.mamba_ssm_dtype or config.mamba_ssm_dtype
    if choice in (None, "auto"):
        return "float32" if config.torch_dtype == "float32" else "bfloat16"
    if choice not in SSM_DTYPES:
        raise KvvizError(f"{config.name}: mamba_ssm_dtype={choice!r}: unknown; choose one of {', '.join(SSM_DTYPES)}")
    return choice


def attention_row(config: HybridConfig, options: HybridOptions) -> RowFormat:
    return kv_row(config.num_key_value_heads, config.head_dim, resolved_kv_dtype(config, options))


def state_row(config: HybridConfig, options: HybridOptions) -> RowFormat:
    conv_dtype = config.torch_dtype if config.torch_dtype in _MODEL_DTYPES else "bfloat16"
    return gdn_state_row(config.conv_dim, config.linear_conv_kernel_dim, config.linear_num_value_heads,
                         config.linear_key_head_dim, config.linear_value_head_dim, conv_dtype,
                         resolved_ssm_dtype(config, options))


# ---- block size ---------------------------------------------------------------------------------
def mamba_cache_mode(config: HybridConfig, options: HybridOptions) -> str:
    """'align' with prefix caching, else 'none' (MambaModelConfig.verify_and_update_config)."""
    return "align" if options.prefix_caching and config.has_linear_attention else "none"


def prefill_checkpoint_blocks(config: HybridConfig, options: HybridOptions) -> int:
    """1 when the GDN backend exports prefill checkpoints in 'align' mode (qwen_gdn_linear_attn.py
    get_kv_cache_spec: num_prefill_checkpoint_blocks=1), else 0."""
    return 1 if mamba_cache_mode(config, options) == "align" and options.mamba_align is not None else 0


def state_blocks_per_request(config: HybridConfig, options: HybridOptions) -> int:
    """Blocks a linear-attention group holds per request (MambaSpec.max_memory_usage_bytes):
    'align': 2 + checkpoint blocks (no speculative decoding); 'none': 1."""
    if mamba_cache_mode(config, options) == "align":
        return 2 + prefill_checkpoint_blocks(config, options)
    return 1


def kernel_block_alignment(config: HybridConfig, options: HybridOptions) -> int:
    """The multiple the attention block size of a hybrid model is built from: the larger of the
    kernel block and the configured block size, and in 'align' mode the lcm with the checkpoint alignment."""
    base = options.block_size or DEFAULT_BLOCK_SIZE
    k = max(KERNEL_BLOCK_ALIGNMENT, base)
    if mamba_cache_mode(config, options) == "align":
        k = math.lcm(k, options.mamba_align or 1)
    return k


def attention_block_size(config: HybridConfig, options: HybridOptions) -> int:
    """Tokens per attention block. Attention-only models: options.block_size or 16. With
    linear-attention layers, mirrors vLLM 0.33's Platform._align_hybrid_block_size: the smallest
    multiple of `kernel_block_alignment` whose page holds a state, rounded up to the kernels'
    block, never below the configured size."""
    base = options.block_size or DEFAULT_BLOCK_SIZE
    if not config.has_linear_attention or all(k == LINEAR for k in config.layer_types):
        return base
    k = kernel_block_alignment(config, options)
    per_token = attention_row(config, options).row_bytes
    block = k * -(-state_row(config, options).row_bytes // (k * per_token))
    block = KERNEL_BLOCK_ALIGNMENT * -(-block // KERNEL_BLOCK_ALIGNMENT)
    return max(base, block)


def block_size_derivation(config: HybridConfig, options: HybridOptions, *,
                          pad_states: bool = True) -> tuple[str, ...]:
    """How the attention block size and the pages came about, one line a step (`pad_states`:
    whether the layout pads state pages to the attention page, as vLLM does)."""
    block = attention_block_size(config, options)
    row = attention_row(config, options)
    lines = [f"attention page = {block} tokens x {config.num_key_value_heads} KV heads x {config.head_dim} x 2 (K, V) "
             f"x {row.payload[0].element.bits // 8} B = {block * row.row_bytes:,} B"]
    if config.has_linear_attention:
        s = state_row(config, options)
        lines.insert(0, f"state = conv {s.payload[0].count:,} x {s.payload[0].element.bits // 8} B + ssm "
                        f"{s.footer[0].count:,} x {s.footer[0].element.bits // 8} B = {s.row_bytes:,} B per request")
        if block != (options.block_size or DEFAULT_BLOCK_SIZE):
            k = kernel_block_alignment(config, options)
            lines.insert(1, f"block size = smallest multiple of {k} tokens whose page holds a state "
                            f"(mamba cache mode {mamba_cache_mode(config, options)!r}) = {block}")
        if pad_states and block * row.row_bytes > s.row_bytes:
            lines.append(f"state page padded {s.row_bytes:,} -> {block * row.row_bytes:,} B "
                         f"({block * row.row_bytes - s.row_bytes:,} B of padding per state)")
    return tuple(lines)


# ---- caches -------------------------------------------------------------------------------------
def layer_cache(config: HybridConfig, options: HybridOptions, layer: int, *, block_size: int,
                state_page: int | None) -> CacheSpec:
    """The cache one layer registers; `state_page` pads a state page to that size (None: unpadded)."""
    kind = config.layer_types[layer]
    if kind == LINEAR:
        row = state_row(config, options)
        padded = state_page if state_page is not None and state_page != row.row_bytes else None
        return CacheSpec(name=f"model.layers.{layer}.linear_attn", kind=CacheKind.LINEAR_STATE, layer=layer,
                         row_format=row, rows=1, tokens_per_block=block_size, padded_page_bytes=padded)
    window = options.sliding_window or config.sliding_window
    return CacheSpec(name=f"model.layers.{layer}.self_attn.attn", kind=ATTENTION_KINDS[kind], layer=layer,
                     row_format=attention_row(config, options), rows=block_size, tokens_per_block=block_size,
                     sliding_window=window if kind == SLIDING else None,
                     attention_chunk_size=config.attention_chunk_size if kind == CHUNKED else None)


def unify_page_sizes(caches: tuple[CacheSpec, ...]) -> tuple[CacheSpec, ...]:
    """Mirrors vLLM 0.33's unify_kv_cache_spec_page_size: equal pages stay; a state page is padded
    to the largest page; an attention page that divides it gets a proportionally larger block;
    any other attention page is padded."""
    pages = {c.page_bytes for c in caches}
    if len(pages) <= 1:
        return caches
    largest = max(pages)
    out = []
    for c in caches:
        if c.page_bytes == largest:
            out.append(c)
        elif c.kind is CacheKind.LINEAR_STATE or largest % c.page_bytes:
            out.append(dataclasses.replace(c, padded_page_bytes=largest))
        else:
            ratio = largest // c.page_bytes
            out.append(dataclasses.replace(c, rows=c.rows * ratio, tokens_per_block=c.tokens_per_block * ratio))
    return tuple(out)


def hybrid_caches(config: HybridConfig, options: HybridOptions = HybridOptions(), *,
                  pad_states: bool = True, block_size: int | None = None) -> tuple[CacheSpec, ...]:
    """Every layer's cache in layer order, pages unified as vLLM 0.33 does.

    pad_states=False keeps state pages at their own size (the `packed` and `separate` planners);
    block_size replaces the derived attention block size (the `separate` planner)."""
    block = block_size or attention_block_size(config, options)
    has_attention = any(k != LINEAR for k in config.layer_types)
    state_page = block * attention_row(config, options).row_bytes if (pad_states and has_attention) else None
    caches = tuple(layer_cache(config, options, i, block_size=block, state_page=state_page)
                   for i in range(config.num_hidden_layers))
    return unify_page_sizes(caches) if pad_states else caches
