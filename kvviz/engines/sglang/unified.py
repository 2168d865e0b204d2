"""SGLang 0.5.23 with --enable-unified-memory: one byte buffer for a hybrid-SWA model's full and
sliding-window tokens (read from the wheel, never imported; paths under sglang/srt/).

* model_executor/pool_configurator.py HybridSWAPoolConfigurator.calculate_pool_sizes, unified
  branch: `_max_unified_full_tokens` bisects the largest page-aligned full capacity whose
  `_unified_pool_bytes(full, swa)` = full x full bytes/token + swa x swa bytes/token fits the
  available bytes, swa = int(full x swa_full_tokens_ratio) // page x page (no draft model);
  `_solve_pool_sizes` skips validate_swa_pool_size when unified.
* mem_cache/unified_memory_pool.py UnifiedKVPool: one uint8 buffer; two END allocators grow
  inward from opposite ends: the SWA sub-pool from the low byte end (grow 'up'), the full
  sub-pool from the high byte end (grow 'down'); the split between them floats at run time.
  MHASubPoolSpec.layout: a slot is one token-major entry [K_0 | V_0 | K_1 | V_1 | ...] over the
  sub-pool's layers, rounded up to ENTRY_ALIGN_BYTES (32; mem_cache/layout/token_major.py).
"""

from __future__ import annotations

from bisect import bisect_right

from kvviz.base.errors import require
from kvviz.engines.common import EnginePlan, EnginePool, check_budget, split_declared
from kvviz.engines.served import check_served
from kvviz.engines.sglang.constants import CHUNKED_PREFILL_SIZE, DEFAULT_PAGE_SIZE, SWA_FULL_TOKENS_RATIO, VERSION
from kvviz.engines.sglang.rules import is_hybrid_swa, requests_at_full_length, resolve_max_num_reqs, uniform
from kvviz.options import Options

ENTRY_ALIGN_BYTES = 32  # mem_cache/layout/token_major.py


def entry_bytes(layer_bytes: int, layers: int) -> int:
    """token_major.align_entry_bytes of one slot's rows over every layer of a sub-pool."""
    return -(-(layer_bytes * layers) // ENTRY_ALIGN_BYTES) * ENTRY_ALIGN_BYTES


def max_unified_full_tokens(
    available: int, page: int, full_bpt: int, swa_bpt: int, ratio: float = SWA_FULL_TOKENS_RATIO
) -> int:
    """HybridSWAPoolConfigurator._max_unified_full_tokens (no draft): the largest page-aligned
    full capacity whose full + SWA bytes fit `available`."""

    def allocation_bytes(full_pages: int) -> int:
        full = full_pages * page
        swa = int(full * ratio) // page * page
        return full * full_bpt + swa * swa_bpt

    max_pages = available // full_bpt // page
    full_pages = bisect_right(range(max_pages + 1), available, key=allocation_bytes) - 1
    return max(full_pages, 0) * page


def plan_sglang_unified(model, options: Options = Options(), *, kv_budget_bytes: int) -> EnginePlan:
    """SGLang 0.5.23's unified pool for a hybrid-SWA `model` at `kv_budget_bytes`; a model SGLang
    does not size as hybrid SWA is refused in one line (kvviz models only that unified pool)."""
    check_budget(kv_budget_bytes)
    check_served("sglang", model)
    attn, mla, states = split_declared(model, model.reader.caches(model, options), "sglang")
    require(
        not mla and not states and attn and is_hybrid_swa(model, attn),
        f"unified_memory: kvviz models SGLang's unified pool for hybrid-SWA models only "
        f"(HybridSWAPoolConfigurator); {model.name} ({model.architecture}) is not sized as one",
    )
    page = options.block_size or DEFAULT_PAGE_SIZE
    context_len = options.max_model_len or model.max_model_len
    swa = [c for c in attn if c.sliding_window is not None or c.attention_chunk_size is not None]
    full = [c for c in attn if c not in swa]
    require(full, f"{model.name}: all layers sliding; the unified pool needs a full-attention end")
    f0, s0 = uniform(full, "full", model), uniform(swa, "sliding", model)
    window = s0.sliding_window if s0.sliding_window is not None else s0.attention_chunk_size
    full_bpt, swa_bpt = f0.token_bytes * len(full), s0.token_bytes * len(swa)  # _unified_full_bytes_per_token
    full_tokens = max_unified_full_tokens(kv_budget_bytes, page, full_bpt, swa_bpt)
    swa_tokens = int(full_tokens * SWA_FULL_TOKENS_RATIO) // page * page
    require(full_tokens > 0, f"{model.name}: SGLang: Not enough memory for the unified pool")
    pool_bytes = full_tokens * full_bpt + swa_tokens * swa_bpt  # _unified_pool_bytes
    pools = (
        EnginePool(
            name="unified swa (grows up)",
            holds=f"K|V entries of {len(swa)} sliding layers",
            unit="token",
            bytes_per_unit=swa_bpt,
            units=swa_tokens,
            layers=len(swa),
            arrangement="unified",
        ),
        EnginePool(
            name="unified full (grows down)",
            holds=f"K|V entries of {len(full)} full-attention layers",
            unit="token",
            bytes_per_unit=full_bpt,
            units=full_tokens,
            layers=len(full),
            arrangement="unified",
        ),
    )
    running = resolve_max_num_reqs(full_tokens, context_len, None)
    logs = (
        f"Use sliding window memory pool. full_layer_tokens={full_tokens}, swa_layer_tokens={swa_tokens}",
        f"max_total_num_tokens={full_tokens}, "
        f"chunked_prefill_size={options.max_num_batched_tokens or CHUNKED_PREFILL_SIZE}, "
        f"max_prefill_tokens=16384, max_running_requests={running}, context_len={context_len}, "
        f"available_gpu_mem=? GB",
    )
    derivation = (
        f"_max_unified_full_tokens: largest full (page {page}) with full x {full_bpt:,} + "
        f"int(full x {SWA_FULL_TOKENS_RATIO}) x {swa_bpt:,} <= {kv_budget_bytes:,}: full = {full_tokens:,}, "
        f"swa = {swa_tokens:,}",
        f"one buffer of {pool_bytes:,} B: SWA entries from byte 0 up, full entries from the top down "
        f"(entries of {entry_bytes(f0.token_bytes, len(full)):,} / {entry_bytes(s0.token_bytes, len(swa)):,} B)",
    )
    return EnginePlan(
        engine="sglang",
        version=VERSION + " (--enable-unified-memory)",
        model=model.name,
        kv_budget_bytes=kv_budget_bytes,
        pools=pools,
        token_capacity=full_tokens,
        token_capacity_name="max_total_num_tokens",
        request_bound=running,
        request_bound_rule="resolve_max_num_reqs: min(clamp(int(tokens / context_len x 512), 2048, 4096), tokens // 2)",
        max_model_len=context_len,
        log_lines=logs,
        derivation=derivation,
        requests_fit=requests_at_full_length(context_len, page, running, full_tokens, (swa_tokens, window)),
        token_capacity_counts=f"full-attention entries of the one buffer; the sliding-window "
        f"allocator holds {swa_tokens:,}",
        notes=(
            "the run-time float of the full/SWA split (compaction)",
            "draft pools",
            "the unified Mamba pool (UnifiedMambaTokenToKVPool)",
        ),
    )
