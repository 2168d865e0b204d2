"""SGLang 0.5.23's DeepSeek V4 pools (read from the wheel's source, never imported; paths below
are under sglang/srt/).

SGLang sizes DeepSeek V4 with its own configurator, not the hybrid-SWA one:
model_executor/pool_configurator.py create_memory_pool_configurator returns
`DSV4PoolConfigurator` for is_deepseek_v4(hf_config) and is_hybrid_swa. Its
`calculate_pool_sizes(available_bytes, page_size)` prices one *full* token (one token of the
compressed caches' address space) across every cache, takes out the request-scoped c128
compressor-state pool first, and divides:

  full_token = int((available - c128_state_fixed) / bytes_per_full_token) // page * page

Defaults as `sglang serve` resolves them for DeepSeek V4 on an H200 (SM90, CUDA), each read where
it is set:

* page_size 256, swa_full_tokens_ratio 0.1 (arg_groups/model_overrides/deepseek_v4.py
  _deepseek_v4_overrides; the declaration precedes kv_cache_hook.handle_cache_compatibility, so
  _swa_full_tokens_ratio_explicitly_set is True: ratio sizing, not the request-cap mode);
* max_running_requests 256 (arg_groups/deepseek_v4_hook.py apply_deepseek_v4_defaults);
* dsv4_attn_backend flashmla (deepseek_v4_hook._default_dsv4_attention_backend: flashmla_mega is
  for DeepSeek-V4.1 on SM100), so the main-cache layout is KVLayout.V4
  (mem_cache/deepseek_v4_memory_pool.py select_dsv4_kv_layout: 'auto' off SM100);
* no unified_kv ring (layers/attention/dsv4/unified_kv_gate.py is_unified_kv_triton: HIP only),
  no speculative decoding, no HiSparse, no encoder SWA replay, compressor states float32
  (environ.py SGLANG_DSV4_COMPRESS_STATE_DTYPE), no online c128 compression;
* kv_source_layer_ids empty (configs/deepseek_v4.py), so compress-ratio 0 / 1 layers own no
  compressed storage (deepseek_v4_memory_pool.collect_sources_by_ratio).
"""

from __future__ import annotations

import dataclasses
import math

from kvviz.base import formats
from kvviz.base.errors import KvvizError, require
from kvviz.engines.common import EnginePlan, EnginePool, check_budget
from kvviz.engines.sglang.constants import CHUNKED_PREFILL_SIZE, GB, MAX_PREFILL_TOKENS, VERSION
from kvviz.engines.sglang.rules import requests_at_full_length
from kvviz.options import Options

PAGE_SIZE = 256  # model_overrides/deepseek_v4.py _deepseek_v4_overrides (CUDA)
SWA_FULL_TOKENS_RATIO = 0.1  # the same override (DSV4_DEFAULT_SWA_FULL_TOKENS_RATIO too)
MAX_RUNNING_REQUESTS = 256  # deepseek_v4_hook.py apply_deepseek_v4_defaults
STATE_DTYPE_BYTES = 4  # environ.py SGLANG_DSV4_COMPRESS_STATE_DTYPE = "float32"
# kernels/ops/attention/dsv4/kv_layout.py KVLayout.V4: 448 fp8 nope + 64 bf16 rope (576 B) + 8 B of
# ue8m0 scales per token; the page stride padded to a multiple of 576 B (page_align).
V4_DATA_BYTES, V4_SCALE_BYTES, V4_PAGE_ALIGN = 576, 8, 576
# The dims that layout is built for (its comment: 448 fp8 nope + 64 bf16 rope): a latent of another
# size has no SGLang 0.5.23 kernel layout, so it is refused rather than priced at these bytes.
V4_HEAD_DIM, V4_ROPE_DIM = 512, 64
# deepseek_v4_memory_pool.py get_compress_state_ring_size, no speculative decoding.
RING_SIZE = {4: 8, 128: 128}


def v4_page_bytes(page_size: int) -> int:
    """KVLayout.page_bytes (kernels/ops/attention/dsv4/kv_layout.py) for KVLayout.V4: page_size
    rows of 584 B, padded up to a multiple of 576 B."""
    raw = page_size * (V4_DATA_BYTES + V4_SCALE_BYTES)
    return -(-raw // V4_PAGE_ALIGN) * V4_PAGE_ALIGN


def paged_kv_bytes_per_token(page_size: int, compress_ratio: int = 0) -> float:
    """DSV4PoolConfigurator._get_paged_kv_bytes_per_token: a V4 page's bytes over its slots; a
    compressed cache's page holds page_size // ratio slots (resolve_compressed_kv_layout keeps V4)."""
    slots = page_size // compress_ratio if compress_ratio else page_size
    return v4_page_bytes(slots) / slots


def indexer_bytes_per_token(index_head_dim: int) -> int:
    """deepseek_v4_memory_pool.get_dsv4_indexer_bytes_per_token, use_fp4_indexer=False (the NVIDIA
    path keeps the FP8 estimate): fp8 payload + one fp32 scale per 128 values, the row vLLM's
    FP8 indexer writes too (formats.indexer_fp8_row, asked rather than retyped)."""
    return formats.indexer_fp8_row(index_head_dim).row_bytes


@dataclasses.dataclass(frozen=True, kw_only=True)
class DSV4Sizing:
    """What DSV4PoolConfigurator derives for one model and page size (its __init__ and pricing
    methods); `bytes_per_full_token` and `bytes_per_swa_token` are its floats."""

    num_layers: int  # num_layers_total: every hidden layer owns an SWA cache
    c4_layers: int
    c128_layers: int
    attn_head_dim: int  # qk_nope_head_dim + qk_rope_head_dim
    index_head_dim: int
    page_size: int
    swa_ratio: float

    @property
    def swa_kv_bytes(self) -> float:
        """_get_paged_kv_bytes_per_token(): one SWA token of one layer."""
        return paged_kv_bytes_per_token(self.page_size)

    @property
    def c4_state_row_bytes(self) -> int:
        """_get_bytes_per_swa_token: one c4 compressor-state row of one layer, main (2 x 2 x
        attn_head_dim) plus indexer (2 x 2 x index_head_dim), float32."""
        return 2 * 2 * (self.attn_head_dim + self.index_head_dim) * STATE_DTYPE_BYTES

    @property
    def bytes_per_swa_token(self) -> float:
        """DSV4PoolConfigurator._get_bytes_per_swa_token: SWA KV of every layer plus the c4 state
        rows one SWA slot brings (ring_size(4) / page_size of them)."""
        return (
            self.swa_kv_bytes * self.num_layers
            + RING_SIZE[4] / self.page_size * self.c4_state_row_bytes * self.c4_layers
        )

    @property
    def bytes_per_full_token(self) -> float:
        """DSV4PoolConfigurator._get_bytes_per_full_token: swa_ratio x bytes_per_swa_token plus
        _compressed_bytes_per_full_token of each c4 (1/4 KV + 1/4 indexer K) and c128 (1/128 KV) layer."""
        c4 = 1 / 4 * paged_kv_bytes_per_token(self.page_size, 4) + 1 / 4 * indexer_bytes_per_token(self.index_head_dim)
        c128 = 1 / 128 * paged_kv_bytes_per_token(self.page_size, 128)
        return self.swa_ratio * self.bytes_per_swa_token + c4 * self.c4_layers + c128 * self.c128_layers

    def c128_state_rows(self, max_running_requests: int) -> int:
        """_get_c128_state_fixed_bytes: (req slots x ring + ring + 1) rows, up to a multiple of 128;
        req slots = max_running_requests + 1 (_get_num_req_slots)."""
        if not self.c128_layers:
            return 0
        ring = RING_SIZE[128]
        return math.ceil(((max_running_requests + 1) * ring + ring + 1) / 128) * 128

    @property
    def c128_state_row_bytes(self) -> int:
        """One c128 state row of every c128 layer: 2 x attn_head_dim float32 values each."""
        return 2 * self.attn_head_dim * STATE_DTYPE_BYTES * self.c128_layers


def sizing(config, page_size: int = PAGE_SIZE, swa_ratio: float = SWA_FULL_TOKENS_RATIO) -> DSV4Sizing:
    """DSV4PoolConfigurator.__init__ on kvviz's DeepSeek V4 ModelConfig: the stage's compress
    ratios are compress_ratios[:num_hidden_layers] (no MTP layer without speculative decoding),
    head dims as configs/model_config.py sets them (qk_nope = head_dim - qk_rope_head_dim)."""
    ratios = [config.ratio(i) for i in range(config.num_hidden_layers)]
    return DSV4Sizing(
        num_layers=len(ratios),
        c4_layers=ratios.count(4),
        c128_layers=ratios.count(128),
        attn_head_dim=config.head_dim,
        index_head_dim=config.index_head_dim,
        page_size=page_size,
        swa_ratio=swa_ratio,
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class DSV4PoolSizes:
    """_DSV4PoolSizes after finalize_with_max_running_requests, with the fixed bytes taken first."""

    full_tokens: int
    swa_tokens: int
    c4_tokens: int
    c128_tokens: int
    c4_state_pool_size: int
    c128_state_pool_size: int
    c128_state_fixed_bytes: int
    max_running_requests: int


def pool_sizes(s: DSV4Sizing, available_bytes: int, max_running_requests: int = MAX_RUNNING_REQUESTS) -> DSV4PoolSizes:
    """DSV4PoolConfigurator.calculate_pool_sizes + _compute_dsv4_sizes, then
    KVCacheConfigurator.resolve_max_num_reqs (max_running_requests given: min(it, tokens // 2))
    and finalize_with_max_running_requests (c128 state = req slots x ring)."""
    page = s.page_size
    fixed = s.c128_state_rows(max_running_requests) * s.c128_state_row_bytes
    for_tokens = max(available_bytes - fixed, 0)
    full = int(for_tokens / s.bytes_per_full_token) // page * page
    while full > 0 and full * s.bytes_per_full_token > for_tokens:  # no ratio-1/2 padding here
        full -= page
    swa = int(full * s.swa_ratio) // page * page
    running = min(max_running_requests, full // 2)
    return DSV4PoolSizes(
        full_tokens=full,
        swa_tokens=swa,
        c4_tokens=full // 4,
        c128_tokens=full // 128,
        c4_state_pool_size=swa // page * RING_SIZE[4] if s.c4_layers else 0,
        c128_state_pool_size=(running + 1) * RING_SIZE[128] if s.c128_layers else 0,
        c128_state_fixed_bytes=fixed,
        max_running_requests=running,
    )


def _pools(s: DSV4Sizing, z: DSV4PoolSizes) -> list[EnginePool]:
    """The pools at DSV4PoolConfigurator's prices (page-padded V4 rows; the allocation's reserved
    pages in DeepSeekV4TokenToKVPool are not drawn)."""
    page = s.page_size
    pools = [
        EnginePool(
            name="swa_kv",
            holds=f"sliding-window KV of {s.num_layers} layers (V4 rows, window-sized pool)",
            unit="token",
            bytes_per_unit=int(s.swa_kv_bytes * s.num_layers),
            units=z.swa_tokens,
            layers=s.num_layers,
            kind="latent",
        )
    ]
    if s.c4_layers:
        n = s.c4_layers
        pools += [
            EnginePool(
                name="c4 kv",
                holds=f"c4 compressed KV of {n} layers",
                unit="c4 token (4 tokens)",
                bytes_per_unit=int(paged_kv_bytes_per_token(page, 4) * n),
                units=z.c4_tokens,
                layers=n,
                kind="latent",
            ),
            EnginePool(
                name="c4 indexer k",
                holds=f"indexer K of {n} c4 layers (fp8 + scales)",
                unit="c4 token (4 tokens)",
                bytes_per_unit=indexer_bytes_per_token(s.index_head_dim) * n,
                units=z.c4_tokens,
                layers=n,
                kind="latent",
            ),
            EnginePool(
                name="c4 compress state",
                holds=f"main + indexer compressor state of {n} layers (fp32)",
                unit="state row",
                bytes_per_unit=s.c4_state_row_bytes * n,
                units=z.c4_state_pool_size,
                layers=n,
                kind="state",
            ),
        ]
    if s.c128_layers:
        n = s.c128_layers
        rows = s.c128_state_rows(MAX_RUNNING_REQUESTS)  # the fixed bytes priced at the requested 256
        pools += [
            EnginePool(
                name="c128 kv",
                holds=f"c128 compressed KV of {n} layers",
                unit="c128 token (128 tokens)",
                bytes_per_unit=int(paged_kv_bytes_per_token(page, 128) * n),
                units=z.c128_tokens,
                layers=n,
                kind="latent",
            ),
            EnginePool(
                name="c128 compress state",
                holds=f"compressor state of {n} layers (fp32, {RING_SIZE[128]}-row ring per request slot)",
                unit="state row",
                bytes_per_unit=s.c128_state_row_bytes,
                units=z.c128_state_pool_size,
                reserved_units=rows - z.c128_state_pool_size,
                layers=n,
                kind="state",
            ),
        ]
    return pools


def plan_sglang_dsv4(
    model, options: Options = Options(), *, kv_budget_bytes: int, available_gpu_mem_gb: float | None = None
) -> EnginePlan:
    """SGLang 0.5.23's DeepSeek V4 pools when its KV pools get `kv_budget_bytes` (rest_memory,
    KVCacheConfigurator._profile_available_bytes): DSV4PoolConfigurator.calculate_pool_sizes at
    page_size 256, max_total_num_tokens = its full-token count."""
    check_budget(kv_budget_bytes)
    require(
        options.block_size in (None, PAGE_SIZE),
        f"block_size={options.block_size}: SGLang 0.5.23 forces page_size {PAGE_SIZE} for DeepSeek V4 "
        f"(model_overrides/deepseek_v4.py)",
    )
    config = model.reader.config_for(model, options)  # the DeepSeek V4 family's ModelConfig, overrides applied
    require(
        (config.head_dim, config.qk_rope_head_dim) == (V4_HEAD_DIM, V4_ROPE_DIM),
        f"head_dim={config.head_dim}, rope_dim={config.qk_rope_head_dim}: SGLang 0.5.23's DeepSeek V4 "
        f"cache layout (KVLayout.V4) holds a {V4_HEAD_DIM}-dim latent with {V4_ROPE_DIM} RoPE dims only",
    )
    s = sizing(config)
    context_len = options.max_model_len or model.max_model_len
    z = pool_sizes(s, int(kv_budget_bytes / GB * GB))
    if z.full_tokens <= 0:
        raise KvvizError(
            f"{model.name}: SGLang: Not enough memory (max_total_num_tokens={z.full_tokens}; the c128 "
            f"state pool alone takes {z.c128_state_fixed_bytes:,} B)"
        )
    window = config.sliding_window
    if window + s.page_size >= z.swa_tokens:  # MemoryPoolConfigurator.validate_swa_pool_size
        raise KvvizError(
            f"{model.name}: SGLang: SWA pool ({z.swa_tokens} tokens) cannot hold even one request: "
            f"sliding_window_size ({window}) + page_size ({s.page_size}); raise the budget"
        )
    pools = _pools(s, z)
    derivation = (
        f"page_size={s.page_size} (forced for DeepSeek V4), swa_full_tokens_ratio={s.swa_ratio}, "
        f"max_running_requests={MAX_RUNNING_REQUESTS} (apply_deepseek_v4_defaults), context_len={context_len:,}",
        f"layers: {s.num_layers} own an SWA cache, {s.c4_layers} c4, {s.c128_layers} c128 (MTP layer not allocated: "
        f"no speculative decoding)",
        f"V4 page rows: {s.swa_kv_bytes:g} B/token (SWA), {paged_kv_bytes_per_token(s.page_size, 4):g} (c4), "
        f"{paged_kv_bytes_per_token(s.page_size, 128):g} (c128); indexer {indexer_bytes_per_token(s.index_head_dim)} B",
        f"bytes_per_swa_token = {s.bytes_per_swa_token:,.2f}; bytes_per_full_token = {s.bytes_per_full_token:,.4f}",
        f"c128 state fixed = {s.c128_state_rows(MAX_RUNNING_REQUESTS):,} rows x {s.c128_state_row_bytes:,} B = "
        f"{z.c128_state_fixed_bytes:,} B",
        f"full_token = int(({kv_budget_bytes:,} - {z.c128_state_fixed_bytes:,}) / {s.bytes_per_full_token:,.4f}) "
        f"// {s.page_size} x {s.page_size} = {z.full_tokens:,}; swa = {z.swa_tokens:,}",
    )
    mem = "?" if available_gpu_mem_gb is None else f"{available_gpu_mem_gb:.2f}"
    chunk = options.max_num_batched_tokens or CHUNKED_PREFILL_SIZE
    logs = (
        # DSV4PoolConfigurator._compute_dsv4_sizes, calculate_pool_sizes, _to_config.
        f"DSV4 SWA sizing: mode=ratio (explicit), swa_tokens={z.swa_tokens}, swa_full_tokens_ratio={s.swa_ratio}",
        f"DSV4 memory calculation: unified=False, unified_fp8=False, dspark_draft_bf16=False, "
        f"bytes_per_full_token={s.bytes_per_full_token:.2f}, available_bytes={kv_budget_bytes / GB:.2f} GB, "
        f"c128_state_fixed={z.c128_state_fixed_bytes / GB:.2f} GB, c2_state_fixed=0.00 GB, swa_fixed=0.00 GB, "
        f"swa_ring_fixed=0.00 GB, c4_state_fixed=0.00 GB, full_token={z.full_tokens}",
        f"DSV4 pool sizes: full={z.full_tokens}, swa={z.swa_tokens}, c4={z.c4_tokens}, c128={z.c128_tokens}, "
        f"c4_state={z.c4_state_pool_size}, c128_state=0",
        # managers/scheduler.py Scheduler init.
        f"max_total_num_tokens={z.full_tokens}, chunked_prefill_size={chunk}, max_prefill_tokens={MAX_PREFILL_TOKENS}, "
        f"max_running_requests={z.max_running_requests}, context_len={context_len}, available_gpu_mem={mem} GB",
    )
    notes = (
        "DeepSeekV4TokenToKVPool's reserved pages (pools drawn at the configurator's prices)",
        "speculative decoding (MTP / DSpark)",
        "HiSparse, unified_kv ring, encoder SWA replay, online c128",
        "attention DP / context parallel",
        "--max-total-tokens caps",
    )
    return EnginePlan(
        engine="sglang",
        version=VERSION,
        model=model.name,
        kv_budget_bytes=kv_budget_bytes,
        pools=tuple(pools),
        token_capacity=z.full_tokens,
        token_capacity_name="max_total_num_tokens",
        request_bound=z.max_running_requests,
        request_bound_rule=f"resolve_max_num_reqs: min(max_running_requests {MAX_RUNNING_REQUESTS}, tokens // 2)",
        max_model_len=context_len,
        log_lines=logs,
        derivation=derivation,
        notes=notes,
        requests_fit=requests_at_full_length(
            context_len, s.page_size, z.max_running_requests, z.full_tokens, (z.swa_tokens, window)
        ),
        token_capacity_counts=f"positions of the compressed caches' address space (a request of L "
        f"tokens takes L; c4 / c128 keep L/4, L/128 rows); the sliding-window "
        f"pool holds {z.swa_tokens:,} of them (swa_full_tokens_ratio "
        f"{s.swa_ratio})",
    )
