"""TensorRT-LLM's DeepSeek V4 pools (PyTorch backend, main as stored in kvviz's reference index, 2026;
read as text, never imported; tests/data/trtllm/PROVENANCE.md lists every file and commit).

TensorRT-LLM serves DeepseekV4ForCausalLM with its own manager: _torch/attention/backends/sparse/
__init__.py get_sparse_attn_kv_cache_manager returns `DeepseekV4CacheManager` for
sparse_attention_config.algorithm 'deepseek_v4' (built from the checkpoint's compress_ratios and
window), a KVCacheManagerV2 subclass (_torch/attention/backends/sparse/deepseek_v4/cache_manager.py,
commit 2ccfca94). How it sizes its pools, each rule mirrored below where it is used:

* Budget: _util.py (commit d8ae02ca) KvCacheCreator.configure_kv_cache_capacity sets
  kv_cache_config.max_gpu_total_bytes to _cal_max_memory's (total - peak + temporary KV) x
  free_gpu_memory_fraction ("KVCacheManagerV2 ... controls capacity using max_gpu_total_bytes
  only"); kvviz's `kv_budget_bytes` is that number. _torch/pyexecutor/kv_cache/kv_cache_manager_v2.py
  KVCacheManagerV2.__init__ makes it the GPU tier's quota.
* Layers (DeepseekV4CacheManager._build_cache_config, _get_window_size): every model layer gets
  manager layers by compress ratio (checkpoint ratio 0 is 1, modeling_deepseekv4.py
  _deepseek_v4_pos_embd_params): 1: [SWA] window 128; 4: [SWA] window 128, [COMPRESS,
  INDEXER_COMPRESS] no window, [COMPRESSOR_KV, COMPRESSOR_SCORE, INDEXER_COMPRESSOR_KV,
  INDEXER_COMPRESSOR_SCORE] window 2 x 4 = 8; 128: [SWA, COMPRESSOR_KV, COMPRESSOR_SCORE] window
  128, [COMPRESS] no window. window_size 128 is DeepSeekV4Params' and the only one the metadata
  accepts; no MTP (max_draft_len 0).
* Bytes (get_token_bytes, _get_attn_bytes_per_block: token bytes x tokens_per_block, or x
  tokens_per_block // ratio for COMPRESS / INDEXER_COMPRESS): on Hopper (an H200 is SM90)
  DeepseekV4CacheManager.__init__ refuses every kv_cache_config.dtype but 'fp8_ds_mla', so SWA and
  COMPRESS rows are footer_scale_kv.py (commit d77955c5) TOKEN_BYTES = 584 (448 E4M3 + 64 bf16 +
  7 UE8M0 + 1 pad: formats.ds_mla_row); INDEXER_COMPRESS is indexer_k_dtype 'fp8' (the Blackwell
  default is 'fp4'), index_head_dim + index_head_dim // 128 x 4 (formats.indexer_fp8_row; 'fp4':
  formats.indexer_mxfp4_row); compressor states are fp32 of (2 for ratio 4, else 1) x head_dim
  (main) or x index_head_dim (indexer) values (get_attn_dim, params.py commit 50aec1cb).
* tokens_per_block 128 (examples/models/core/deepseek_v4/README.md, commit 3699edad: "TensorRT LLM
  defaults DeepSeek-V4 to tokens_per_block=128"; __init__ accepts 128 or 256).
* Pools: KVCacheManagerV2 puts manager layers of one window in one life cycle (the window-128 SWA
  + c128 compressor states, the window-8 c4 compressor states, the windowless compressed KV); a
  life cycle's buffers of one size share a pool, one slot holding one block of each. The GPU quota
  is split between life cycles in proportion to the pages the typical step needs. The step is
  DeepseekV4CacheManager._get_typical_seq_len's (avg_seq_len unset: max_seq_len): one context
  request of max_num_tokens plus max_batch_size - 1 generation requests of max_seq_len with history
  max_seq_len - 1 (the manager's tests, test_max_num_tokens_is_used_by_base_config). Counts are
  max(floor, scale x need // max need) at the largest scale whose pools, each rounded up to the GPU
  granularity (2 MiB << min(4, log2(quota / 1 GiB))), fit the quota; a windowed life cycle's floor
  is (window + tokens_per_block - 2) // tokens_per_block + 1 pages, the windowless one's the largest
  of those. Mirrored from TensorRT-LLM's lifecycle slot-count module, which repeats the C++ storage
  manager's computeSlotsForBatch / computeSlotsFromConstraints and tier granularity
  (slots_for_batch, _stale_range, slots_from_constraints, gpu_granularity -- the rule of
  trtllm_hybrid.cache_tier_granularity --, _tier_slot_counts;
  stored file, read_file id 70130628343).
* Requests: _util.py (commit 0004396720) create_py_executor_instance gives every KVCacheManagerV2,
  DeepseekV4CacheManager included, the KVCacheV2Scheduler (scheduler/scheduler_v2.py) with
  max_num_requests = max_batch_size. It forces MAX_UTILIZATION, allocates each step's pages on
  demand and suspends what no longer fits; it reads neither get_max_resource_count nor
  get_needed_resource_to_completion (DeepseekV4CacheManager's byte estimates are not used to admit).
  So at most min(max_batch_size, the pages of the scarcest life cycle) run at once, and of full
  length min(that, pages // the pages one generation request of max_seq_len holds, per life cycle).
* Token capacity: the windowless life cycle's pages x tokens_per_block, the longest sequence the
  pools hold (KVCacheManager.clamp_max_seq_len_for_mem); a longer max_seq_len is cut to it
  (KVCacheManagerV2.__init__'s warning).

kvviz knobs read here: block_size -> tokens_per_block, max_model_len -> max_seq_len,
max_num_batched_tokens -> max_num_tokens, indexer_format -> indexer_k_dtype ('mxfp4' is 'fp4'),
main_format (only fp8_ds_mla on an H200), head_dim / rope_dim / index_head_dim overrides.
"""

from __future__ import annotations

from kvviz.base import formats
from kvviz.base.defaults import GIB
from kvviz.base.errors import KvvizError, require
from kvviz.engines.common import EnginePlan, EnginePool, check_budget
from kvviz.engines.trtllm.constants import MAX_BATCH_SIZE, MAX_NUM_TOKENS, VERSION
from kvviz.engines.trtllm.dsv4_pools import (
    ALLOWED_TOKENS_PER_BLOCK,
    INDEXER_K_DTYPE,
    RATIOS,
    TOKENS_PER_BLOCK,
    WINDOW_SIZE,
    DSV4Geometry,
    LifeCycle,
    floor_pages,
    life_cycles,
    pages_for_batch,
    pools_cost,
    slot_counts,
    typical_step,
)
from kvviz.engines.trtllm.hybrid import cache_tier_granularity  # the V2 GPU tier's granularity, one home
from kvviz.options import Options


def geometry(model, options: Options) -> DSV4Geometry:
    """The DeepSeek V4 config as DeepseekV4CacheManager reads it, refused in one line where it has
    no H200 path: tokens_per_block, the fp8_ds_mla latent, the window and the compress ratios."""
    tpb = options.block_size or TOKENS_PER_BLOCK
    require(
        tpb in ALLOWED_TOKENS_PER_BLOCK,
        f"block_size={tpb}: TensorRT-LLM's DeepseekV4CacheManager requires tokens_per_block in [128, 256]",
    )
    require(
        options.main_format in (None, "fp8_ds_mla"),
        f"main_format={options.main_format!r}: TensorRT-LLM runs DeepSeek V4 on Hopper only with "
        f"kv_cache_config.dtype='fp8_ds_mla' (DeepseekV4CacheManager.__init__)",
    )
    indexer = options.indexer_format or "fp8"
    require(
        indexer in INDEXER_K_DTYPE,
        f"indexer_format={indexer!r}: TensorRT-LLM's indexer_k_dtype is 'fp8' or 'fp4' (kvviz: fp8, mxfp4)",
    )
    config = model.reader.config_for(model, options)  # the DeepSeek V4 family's ModelConfig, overrides applied
    main = formats.ds_mla_row(config.head_dim, config.qk_rope_head_dim)
    require(
        main.payload_bytes == 448 + 64 * 2 and config.qk_rope_head_dim == 64,
        f"head_dim={config.head_dim}, rope_dim={config.qk_rope_head_dim}: TensorRT-LLM's footer-scale KV "
        f"layout (footer_scale_kv.py) holds 448 NoPE + 64 RoPE dims only",
    )
    require(
        indexer == "fp8" or config.index_head_dim == 128,
        f"index_head_dim={config.index_head_dim}: TensorRT-LLM's FP4 indexer K cache requires 128",
    )
    require(
        config.sliding_window == WINDOW_SIZE,
        f"sliding_window={config.sliding_window}: TensorRT-LLM's "
        f"DeepSeek V4 attention requires window_size == {WINDOW_SIZE}",
    )
    ratios = tuple(1 if r == 0 else r for r in config.compress_ratios[: config.num_hidden_layers])
    bad = sorted(set(ratios) - set(RATIOS))
    require(not bad, f"compress_ratios: {bad}: TensorRT-LLM's DeepSeek V4 supports ratios 1, 4, 128 only")
    require(
        any(r > 1 for r in ratios),
        "compress_ratios: no c4 / c128 layer; kvviz does not size an all-SWA "
        "DeepSeek V4 in TensorRT-LLM (its windowless pool would be empty)",
    )
    return DSV4Geometry(
        head_dim=config.head_dim,
        index_head_dim=config.index_head_dim,
        main_row_bytes=main.row_bytes,
        indexer_row_bytes=formats.indexer_row(indexer, config.index_head_dim).row_bytes,
        ratios=ratios,
        tokens_per_block=tpb,
    )


def _engine_pools(cycles: list[LifeCycle], counts: list[int], tpb: int) -> list[EnginePool]:
    """One EnginePool per pool of each life cycle: `counts` slots of one block of every buffer."""
    out = []
    for lc, n in zip(cycles, counts):
        for size, buffers, name in lc.pools:
            state = "state" in name
            out.append(
                EnginePool(
                    name=name,
                    holds=f"{buffers} buffers of {size:,} B ("
                    + (f"window {lc.window} life cycle" if lc.window else "windowless life cycle")
                    + ")",
                    unit=f"page of {tpb} tokens",
                    bytes_per_unit=size * buffers,
                    units=n,
                    layers=buffers,
                    arrangement="blocks",
                    window=lc.window or None,
                    kind="state" if state else "latent",
                )
            )
    return out


def plan_trtllm_dsv4(
    model,
    options: Options = Options(),
    *,
    kv_budget_bytes: int,
    max_batch_size: int = MAX_BATCH_SIZE,
    max_attention_window: tuple[int, ...] | None = None,
    use_py_mamba: bool = False,
) -> EnginePlan:
    """TensorRT-LLM's DeepSeek V4 pools when its KV cache gets `kv_budget_bytes`
    (max_gpu_total_bytes, the GPU tier quota of DeepseekV4CacheManager) and LlmArgs gives
    `max_batch_size`; the rules in the module docstring, each function citing the one it mirrors.
    `max_attention_window` and `use_py_mamba` (plan_trtllm's knobs) do not apply and are refused."""
    check_budget(kv_budget_bytes)
    require(
        type(max_batch_size) is int and max_batch_size > 0, f"max_batch_size={max_batch_size!r}: a positive integer"
    )
    require(
        max_attention_window is None,
        f"max_attention_window={max_attention_window!r}: DeepseekV4CacheManager sets "
        f"DeepSeek V4's windows itself (_build_cache_config)",
    )
    require(not use_py_mamba, f"{model.name}: use_py_mamba applies to hybrid Mamba models only")
    g = geometry(model, options)
    tpb = g.tokens_per_block
    max_seq_len = options.max_model_len or model.max_model_len
    max_num_tokens = options.max_num_batched_tokens or MAX_NUM_TOKENS
    cycles = life_cycles(g)
    batch = typical_step(max_num_tokens, max_batch_size, max_seq_len)
    need = [pages_for_batch(lc.window, batch, tpb) for lc in cycles]
    floors = floor_pages([lc.window for lc in cycles], tpb)
    gran = cache_tier_granularity(kv_budget_bytes)
    pool_bytes = [lc.pool_slot_bytes for lc in cycles]
    minimum = pools_cost(floors, pool_bytes, gran)
    if minimum > kv_budget_bytes:
        raise KvvizError(
            f"{model.name}: TensorRT-LLM: kv_budget_bytes={kv_budget_bytes:,} cannot hold DeepSeek V4's "
            f"minimum pages ({minimum:,} B: {floors} pages in {gran >> 20} MiB chunks); raise the budget"
        )
    counts = slot_counts(need, floors, pool_bytes, gran, kv_budget_bytes)
    full = next(i for i, lc in enumerate(cycles) if not lc.window)
    tokens = counts[full] * tpb  # clamp_max_seq_len_for_mem: the windowless pages bound one sequence
    logs = [
        f"[TensorRT-LLM][INFO] Estimated max memory in KV cache : {kv_budget_bytes / GIB:.2f} GiB",
        f"[TensorRT-LLM][INFO] KV cache manager v2 device quota set to {kv_budget_bytes / GIB}GiB",
    ]
    derivation = [
        f"tokens_per_block={tpb}, max_seq_len={max_seq_len:,}, max_num_tokens={max_num_tokens:,}, "
        f"max_batch_size={max_batch_size:,}; rows: fp8_ds_mla {g.main_row_bytes} B, indexer "
        f"{g.indexer_row_bytes} B, compressor states fp32",
        f"typical step: 1 context request of {max_num_tokens:,} + {max_batch_size - 1:,} generation "
        f"requests of {max_seq_len:,} (history {max_seq_len - 1:,})",
    ]
    for lc, n, f, p in zip(cycles, counts, floors, need):
        derivation.append(
            f"life cycle window {lc.window or 'none'}: slot {lc.slot_bytes:,} B "
            f"({' + '.join(f'{c} x {s:,}' for s, c, _ in lc.pools)}), typical-step need {p:,} pages, "
            f"floor {f}: {n:,} pages"
        )
    derivation.append(
        f"pools rounded to {gran >> 20} MiB: {pools_cost(counts, pool_bytes, gran):,} of "
        f"{kv_budget_bytes:,} B; the windowless pages hold {tokens:,} tokens"
    )
    if max_seq_len > tokens:
        logs.append(
            f"[TensorRT-LLM][WARNING] max_seq_len {max_seq_len} is greater than max_num_tokens {tokens} that "
            f"can be allocated in kv cache manager, setting max_seq_len to {tokens}"
        )
        max_seq_len = tokens
    # KVCacheV2Scheduler: max_batch_size requests, pages on demand (every running request holds a
    # page of each life cycle); a generation request of max_seq_len holds slots_for_batch's pages.
    running = min(max_batch_size, min(counts))
    held = [pages_for_batch(lc.window, ((max_seq_len, max_seq_len - 1),), tpb) for lc in cycles]
    fit = min([running] + [n // h for n, h in zip(counts, held) if h])
    derivation.append(
        f"KVCacheV2Scheduler: min(max_batch_size {max_batch_size}, {min(counts):,} pages) = {running:,} "
        f"at once; a {max_seq_len:,}-token request holds {held} pages of the life cycles: "
        f"{fit:,} of full length"
    )
    notes = (
        "speculative decoding / MTP layers (max_draft_len widens the windows)",
        "host (secondary) cache tier",
        "SWA scratch reuse and the warm-up constraints (they raise the floors only)",
        "avg_seq_len / pool_ratio overrides, attention DP and pipeline parallelism",
        "the C++ storage manager's own rounding of the split (kvviz rounds each pool up to the chunk)",
    )
    return EnginePlan(
        engine="trtllm",
        version=VERSION,
        model=model.name,
        kv_budget_bytes=kv_budget_bytes,
        pools=tuple(_engine_pools(cycles, counts, tpb)),
        token_capacity=tokens,
        token_capacity_name="tokens of the windowless pages",
        request_bound=running,
        requests_fit=fit,
        request_bound_rule=f"KVCacheV2Scheduler: min(max_batch_size {max_batch_size}, pages of the "
        f"scarcest life cycle); pages on demand, nothing reserved to completion",
        max_model_len=max_seq_len,
        log_lines=tuple(logs),
        derivation=tuple(derivation),
        notes=notes,
        token_capacity_counts="positions of the compressed caches' pages (windowless life cycle pages x "
        "tokens_per_block): the longest sequence, not the sum over requests",
    )
