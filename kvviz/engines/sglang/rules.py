"""SGLang 0.5.23's rules for its pools: hybrid-SWA detection, the Mamba ratio and SSM dtype, max
running requests, requests of the full context at once, and the K/V pools and log lines of a layer set."""

from __future__ import annotations

from kvviz.base.errors import require
from kvviz.base.formats import ELEMENT_BYTES
from kvviz.core.declare import AttentionCache
from kvviz.engines.common import EnginePool, state_bytes
from kvviz.engines.sglang.constants import (
    DEFAULT_PAGE_SIZE,
    DISABLE_HYBRID_SWA_ARCHS,
    GB,
    HYBRID_SWA_ARCHS,
    MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO,
    MAMBA_EXTRA_BUFFER_ARCHS,
    SSM,
    TORCH_DTYPE,
)
from kvviz.options import Options


def is_hybrid_swa(model, attn) -> bool:
    """configs/model_config.py ModelConfig._derive_hybrid_model: is_hybrid_swa_model(architectures)
    and not disable_hybrid_swa_memory (forced for Gemma 2/3/3n), with at least one sliding layer."""
    arch = model.architecture
    has_swa = any(c.sliding_window is not None or c.attention_chunk_size is not None for c in attn)
    return arch in HYBRID_SWA_ARCHS and arch not in DISABLE_HYBRID_SWA_ARCHS and has_swa


def mamba_ratio(model, options: Options) -> tuple[int, str]:
    """KVCacheConfigurator._calculate_mamba_ratio: state slots per running request.
    --disable-radix-cache: 1. Else MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO (3) plus the extra
    buffer's tracking slots (mem_cache/allocation_sizing.py get_mamba_tracking_slots: 2 with the
    overlap schedule, 1 without) when the strategy is extra_buffer."""
    if options.prefix_caching is False:
        return 1, "radix cache disabled: 1 slot per request"
    overlap = options.async_scheduling is not False
    paging = (options.block_size or DEFAULT_PAGE_SIZE) > 1
    extra = model.architecture in MAMBA_EXTRA_BUFFER_ARCHS and (overlap or paging)
    slots = (2 if overlap else 1) if extra else 0
    strategy = "extra_buffer" if extra else "no_buffer"
    return (
        MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO + slots,
        f"{strategy}: {MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO} + {slots} tracking slots",
    )


def ssm_dtype(model, options: Options) -> tuple[str, str]:
    """configs/mamba_utils.py mamba2_state_dtype: --mamba-ssm-dtype, else the config's
    mamba_ssm_dtype, else float32 (SGLang's default, unlike vLLM's model dtype)."""
    if options.mamba_ssm_dtype:
        return SSM[options.mamba_ssm_dtype], "--mamba-ssm-dtype"
    cfg = model.config
    if getattr(cfg, "ssm_dtype", None) and getattr(cfg, "ssm_dtype_source", "").startswith("mamba_ssm_dtype"):
        return cfg.ssm_dtype, "config mamba_ssm_dtype"
    return "fp32", "SGLang default float32"


def mamba_per_req(states, ssm: str) -> tuple[int, int]:
    """(conv bytes, SSM bytes) of one request over every state layer: BaseLinearStateParams.mamba_cache_per_req
    = (conv numel x conv dtype + temporal numel x SSM dtype) x layers; conv dtype bf16
    (SGLANG_MAMBA_CONV_DTYPE unset). The last part of a declared state is its temporal (SSM) state."""
    per_layer = [state_bytes(s, "bf16", ssm) for s in states]
    return sum(c for c, _ in per_layer), sum(t for _, t in per_layer)


def resolve_max_num_reqs(token_capacity: int, context_len: int, mamba_cap: int | None) -> int:
    """KVCacheConfigurator.resolve_max_num_reqs, no --max-running-requests, attention DP 1:
    estimated = clamp(int(tokens / context_len * 512), 2048, 4096), min with tokens // 2, then the
    Mamba cap max_mamba_cache_size // ratio."""
    estimated = int(token_capacity / context_len * 512)
    estimated = max(min(estimated, 4096), 2048)
    max_num_reqs = min(estimated, token_capacity // 2)
    if mamba_cap is not None:
        max_num_reqs = min(max_num_reqs, mamba_cap)
    require(max_num_reqs > 0, "SGLang: the Mamba state cache is too small to serve any requests (resolve_max_num_reqs)")
    return max_num_reqs


def requests_at_full_length(
    context_len: int, page: int, running: int, full_tokens: int | None, sliding: tuple[int, int] | None = None
) -> int:
    """Requests of context_len tokens SGLang's pools hold at once, within max_running_requests
    (which caps requests of any length): each takes ceil(len / page) pages of the full-attention
    pool, and of a sliding-window pool (`sliding` = (its tokens, the window)) min(len, window +
    page) tokens page-rounded, since the SWA radix cache frees what falls behind the window and
    MemoryPoolConfigurator.validate_swa_pool_size takes window + page_size as one request's floor.
    kvviz's count from the pools' sizes, not a number SGLang prints."""
    pages = -(-context_len // page)
    fits = [running]
    if full_tokens is not None:
        fits.append(full_tokens // (pages * page))
    if sliding is not None:
        swa_tokens, window = sliding
        fits.append(swa_tokens // (min(pages, -(-window // page) + 1) * page))
    return min(fits)


def every_layer(model, attn) -> list:
    """The declared attention caches plus one of the same geometry for each layer that registers
    none (KV-shared layers): SGLang sizes num_hidden_layers buffers."""
    import dataclasses

    have = {a.layer for a in attn}
    extra = [
        dataclasses.replace(attn[-1], layer=i, name=f"layer {i} (KV-shared, still allocated)")
        for i in range(model.config.num_hidden_layers)
        if i not in have
    ]
    return sorted(attn + extra, key=lambda a: a.layer)


def uniform(caches, what: str, model) -> AttentionCache:
    """The one attention geometry SGLang sizes `what` layers from; layers that differ are refused."""
    first = caches[0]
    for c in caches:
        require(
            c.token_bytes == first.token_bytes,
            f"{model.name}: SGLang sizes all {what} layers from one geometry "
            f"(ModelConfig.head_dim / get_num_kv_heads); layers differ",
        )
    return first


def kv_pools(prefix: str, layers, tokens: int, page: int, label: str) -> list[EnginePool]:
    """MHATokenToKVPool: one K and one V buffer per layer, (size + page_size) rows of one token
    (_kv_buffer_shapes)."""
    c = layers[0]
    k = c.num_kv_heads * c.head_size * ELEMENT_BYTES[c.kv_dtype] * len(layers)
    v = c.num_kv_heads * c.head_size_v * ELEMENT_BYTES[c.kv_dtype] * len(layers)
    return [
        EnginePool(
            name=f"{prefix}k_buffer",
            holds=f"K of {len(layers)} {label} layers",
            unit="token",
            bytes_per_unit=k,
            units=tokens,
            layers=len(layers),
            reserved_units=page,
        ),
        EnginePool(
            name=f"{prefix}v_buffer",
            holds=f"V of {len(layers)} {label} layers",
            unit="token",
            bytes_per_unit=v,
            units=tokens,
            layers=len(layers),
            reserved_units=page,
        ),
    ]


def kv_log(pools, tokens: int, dtype: str, name: str = "KV Cache") -> str:
    """KVCache._finalize_allocation_log (mem_cache/memory_pool.py), the (K, V) form."""
    k, v = pools
    return (
        f"{name} is allocated. dtype: {TORCH_DTYPE[dtype]}, #tokens: {tokens}, K size: {k.total_bytes / GB:.2f} GB, "
        f"V size: {v.total_bytes / GB:.2f} GB"
    )
