"""TensorRT-LLM's default cache manager for hybrid Mamba / GDN models: MambaHybridCacheManagerV2.

Which manager a hybrid model gets (PyTorch backend, aggregated serving, no environment overrides):

* llmapi/llm_args.py (commit 0004396720) KvCacheConfig.use_kv_cache_manager_v2 defaults to "auto";
  llmapi/llm_utils.py (commit 0066b2a569) _resolve_kv_cache_manager_v2_auto turns "auto" into the model
  class's get_preferred_kv_cache_manager_version() == "V2". Qwen3NextForCausalLM
  (_torch/models/modeling_qwen3_next.py, commit 00022b0409) and NemotronHForCausalLM prefer "V2"
  (tests/unittest/_torch/executor/kv_cache/test_mamba_cache_manager.py
  test_hybrid_models_prefer_v2_and_python_transceiver); both get_model_defaults set
  kv_cache_config.enable_block_reuse = False.
* _torch/pyexecutor/_util.py (commit 0004396720) get_kv_cache_manager_cls: a hybrid model with
  use_kv_cache_manager_v2 True -> MambaHybridCacheManagerV2. The legacy MixedMambaHybridCacheManager
  (kvviz.engines.trtllm.plan._mamba_pools) needs use_kv_cache_manager_v2=False and TRTLLM_USE_PY_MAMBA=1.

How it sizes (mamba_cache_manager/mamba_cache_manager_v2.py and common.py at commit 28295084):

* KvCacheCreator.configure_kv_cache_capacity gives a V2 manager max_gpu_total_bytes = the KV budget;
  _torch/pyexecutor/kv_cache/kv_cache_manager_v2.py (commit 0004396720) KVCacheManagerV2.__init__ makes it
  the GPU tier's quota. States and attention pages share it (CacheCost intercept > 0).
* MambaHybridCacheManagerV2._minimum_live_gpu_quota: (max_batch_size + dummy) state slots plus one
  attention block must fit, else _build_cache_config raises; dummy = _get_num_cuda_graph_padding_dummy_slots
  (no speculative config) = 1.
* _build_cache_config: typical step = max_batch_size requests of capacity C (history C - 1) plus the dummy
  slots, C = avg_seq_len or max(1, max_seq_len // 2) (_get_typical_request_capacity); a constraint of
  max_batch_size + dummy zero-capacity requests floors the state pool.
* runtime/kv_cache_manager_v2/_storage_manager.py (commit 00f6bd61) StorageManager.__init__: min slots per
  pool group (_compute_min_slots_from_constraints), ratio_from_batch (_compute_slots_for_batch,
  _slots_to_bytes), _compute_slot_count_for_level; CacheLevelManager.cache_tier_granularity;
  runtime/kv_cache_manager_v2/_storage/_core.py (commit 02e3bf9a) CacheLevelStorage.ratio_to_slot_count_list,
  _grains_to_slots, _grains_for_slots.

How it schedules (requests at once):

* _torch/pyexecutor/_util.py (commit 0004396720) create_py_executor_instance: a KVCacheManagerV2 (this manager
  is one) gets KVCacheV2Scheduler with scheduler_capacity = max_batch_size; _torch/pyexecutor/scheduler/
  scheduler_v2.py (stored version, read_file id 56113021743) KVCacheV2Scheduler.__init__ turns the default
  capacity_scheduler_policy GUARANTEED_NO_EVICT (llmapi/llm_args.py SchedulerConfig) into MAX_UTILIZATION, and
  its loop allocates each step's pages only (KVCacheManagerV2.resize_context / try_allocate_generation) within
  BudgetTracker.max_num_requests, suspending requests when a step does not fit (_try_evict_for_gen).
* Nothing is reserved to completion: KVCacheManagerV2.get_needed_resource_to_completion returns 0 and
  get_max_resource_count 1 (both "TODO", kv_cache_manager_v2.py commit 0004396720);
  MambaHybridCacheManagerV2.get_max_resource_count returns max_batch_size (commit 28295084). The scheduler
  reads neither. So the bound is min(max_batch_size, attention blocks) (a running request holds a block);
  requests of max_seq_len tokens the blocks hold at once, blocks // ceil(max_seq_len / tokens_per_block),
  are given as requests_fit.
"""

from __future__ import annotations

import math

from kvviz.base.defaults import GIB
from kvviz.base.errors import require
from kvviz.base.formats import ELEMENT_BYTES
from kvviz.engines.common import EnginePlan, EnginePool, state_bytes

GPU_PAGE = 2 << 20  # CacheLevelManager.cache_tier_granularity's GPU page_size
DUMMY_SLOTS = 1  # _get_num_cuda_graph_padding_dummy_slots(spec_config=None) + int(enable_attention_dp=False)
NOTES = (
    "speculative decoding / MTP layers",
    "host tier (auto-sized to the GPU quota; not drawn)",
    "V2's get_num_available_tokens / clamp_max_seq_len_for_mem (counts the host tier too): kvviz cuts "
    "max_seq_len at the GPU attention pool's tokens only",
    "KVCacheV2Scheduler's suspend / resume of requests that outgrow the blocks (host tier)",
    "block reuse with Mamba snapshots (off by the model's defaults)",
)


def cache_tier_granularity(quota: int) -> int:
    """CacheLevelManager.cache_tier_granularity (GPU tier): 2 MiB << min(4, max(0, int(log2(quota / 1 GiB))))."""
    return GPU_PAGE << min(4, max(0, int(math.log(quota / (GPU_PAGE * 512), 2))))


def grains_for_slots(num_slots: int, slot_sizes: tuple[int, ...], granularity: int) -> int:
    """CacheLevelStorage._grains_for_slots: each pool of the group rounds num_slots x slot size up to grains."""
    return sum(-(-num_slots * s // granularity) for s in slot_sizes)


def grains_to_slots(pg_grains: int, slot_sizes: tuple[int, ...], granularity: int) -> tuple[int, int]:
    """CacheLevelStorage._grains_to_slots: (slots, grains used) of a pool group given pg_grains grains."""
    min_pool = [-(-s // granularity) for s in slot_sizes]
    if pg_grains < sum(min_pool):
        return 0, 0
    num_slots, remaining = 1 << 63, pg_grains
    order = sorted(range(len(slot_sizes)), key=lambda i: slot_sizes[i])
    for j, pool in enumerate(order):
        size = slot_sizes[pool]
        pool_grains = max(min_pool[pool], round(remaining * (size / sum(slot_sizes[k] for k in order[j:]))))
        num_slots = min(num_slots, pool_grains * granularity // size)
        remaining -= pool_grains
    lo, step = num_slots, 1
    hi = lo + step
    while grains_for_slots(hi, slot_sizes, granularity) <= pg_grains:
        lo, step = hi, step * 2
        hi = lo + step
    while lo + 1 < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if grains_for_slots(mid, slot_sizes, granularity) <= pg_grains else (lo, mid)
    return lo, grains_for_slots(lo, slot_sizes, granularity)


def ratio_to_slot_count_list(total_quota: int, size_lists, ratios, granularity: int, min_slots) -> list[int]:
    """CacheLevelStorage.ratio_to_slot_count_list: slots per pool group; groups whose share of the grains
    gives no more than their min slots are pinned there and the rest is shared again by ratio."""
    counts = [0] * len(ratios)
    remaining = total_quota // granularity
    active = list(range(len(ratios)))
    while active:
        share = [ratios[pg] for pg in active]
        got = [0] * len(active)
        budget = remaining
        order = sorted(range(len(active)), key=lambda i: share[i])
        for i, idx in enumerate(order):
            pct = share[idx] / sum(share[j] for j in order[i:])
            got[idx], used = grains_to_slots(round(budget * pct), size_lists[active[idx]], granularity)
            budget -= used
        pinned = [i for i in range(len(active)) if got[i] <= min_slots[active[i]]]
        if not pinned:
            for i, pg in enumerate(active):
                counts[pg] = got[i]
            break
        for i in pinned:
            pg = active[i]
            counts[pg], used = grains_to_slots(
                grains_for_slots(min_slots[pg], size_lists[pg], granularity), size_lists[pg], granularity
            )
            remaining -= used
        free = [active[i] for i in range(len(active)) if i not in pinned]
        if not free:
            break
        require(remaining > 0, "TensorRT-LLM: Insufficient quota to satisfy min_slots constraints")
        active = free
    for pg in range(len(counts)):  # the final bump while the same grains hold one more slot
        now = grains_for_slots(counts[pg], size_lists[pg], granularity)
        while grains_for_slots(counts[pg] + 1, size_lists[pg], granularity) <= now:
            counts[pg] += 1
    return counts


def coalesced_pools(buffer_sizes: list[int]) -> tuple[int, ...]:
    """Slot bytes of a life cycle's pools: buffers of one size share a pool whose slot holds one
    sub-page of each (runtime/kv_cache_manager_v2 lifecycle layout), largest first."""
    counts: dict[int, int] = {}
    for size in buffer_sizes:
        counts[size] = counts.get(size, 0) + 1
    return tuple(sorted((size * n for size, n in counts.items()), reverse=True))


def state_buffers(model, options, states) -> tuple[list[int], str, str]:
    """Per-layer (SSM, conv) state buffer bytes as MambaHybridCacheManagerV2 declares them
    (SsmLayerConfig: SSM_STATE ssm_bytes, CONV_STATE conv_bytes), from the declared MambaCache parts
    (the last part the recurrent/SSM state): conv in the model dtype, SSM in mamba_ssm_cache_dtype
    (kvviz.engines.trtllm.plan.ssm_cache_dtype: NemotronH float32, Qwen3-Next its torch_dtype)."""
    from kvviz.engines.trtllm.rules import ssm_cache_dtype

    ssm_dtype = ssm_cache_dtype(model, options)
    sizes = []
    for s in states:
        conv, ssm = state_bytes(s, model.dtype, ssm_dtype)
        sizes += [b for b in (ssm, conv) if b]  # SSM_STATE then CONV_STATE; a one-part state has no SSM buffer
    return sizes, model.dtype, ssm_dtype


def plan_trtllm_hybrid_v2(
    model,
    options,
    *,
    attn_layout,
    states,
    kv_budget_bytes: int,
    tokens_per_block: int,
    max_seq_len: int,
    max_batch_size: int,
) -> EnginePlan:
    """MambaHybridCacheManagerV2's pools for a hybrid model at `kv_budget_bytes` (the GPU tier quota).
    `attn_layout` is (kv_factor, per-layer KV heads, head_dim, dtype, kind) from trtllm._attention_geometry."""
    from kvviz.engines.trtllm.constants import VERSION

    kv_factor, heads, head_dim, dtype, kind = attn_layout
    tpb, elem = tokens_per_block, ELEMENT_BYTES[dtype]
    attn_buffers = [h * head_dim * elem * tpb for h in heads for _ in range(kv_factor)]  # K (and V) per layer
    attn_pools = coalesced_pools(attn_buffers)
    state_sizes, conv_dtype, ssm_dtype = state_buffers(model, options, states)
    state_pools = coalesced_pools(state_sizes)
    attn_block, state_slot = sum(attn_pools), sum(state_pools)
    live = max_batch_size + DUMMY_SLOTS
    minimum = live * state_slot + attn_block  # _minimum_live_gpu_quota
    require(
        minimum <= kv_budget_bytes,
        f"{model.name}: TensorRT-LLM: The V2 Mamba GPU cache quota is too small for live recurrent states and "
        f"attention pages: got {kv_budget_bytes} bytes, need at least {minimum} bytes "
        f"(max_batch_size {max_batch_size} + {DUMMY_SLOTS} dummy slots x {state_slot:,} B of states + one "
        f"{attn_block:,} B attention block; lower max_batch_size)",
    )
    capacity = max(1, max_seq_len // 2)  # _get_typical_request_capacity, avg_seq_len unset
    g = cache_tier_granularity(kv_budget_bytes)
    size_lists = (attn_pools, state_pools)
    typical = (max_batch_size * -(-capacity // tpb), live)  # _compute_slots_for_batch of the typical step
    typical_bytes = [sum(-(-n * s // g) * g for s in sizes) for n, sizes in zip(typical, size_lists)]
    ratios = [b / sum(typical_bytes) for b in typical_bytes]
    min_slots = (1, live)  # _compute_min_slots_from_constraints: 1 per life cycle, the SSM floor batch
    min_quota = sum(-(-m * s // g) * g for m, sizes in zip(min_slots, size_lists) for s in sizes)
    quota = max(min_quota, -(-kv_budget_bytes // g) * g)  # _compute_slot_count_for_level
    blocks, slots = ratio_to_slot_count_list(quota, size_lists, ratios, g, min_slots)
    require(blocks > 0, f"{model.name}: TensorRT-LLM: the V2 quota holds no attention block")
    tokens = blocks * tpb
    logs = [
        "[TensorRT-LLM][INFO] Selected hybrid KV cache manager: MambaHybridCacheManagerV2",
        f"[TensorRT-LLM][WARNING] 'kv_cache_config.avg_seq_len' is not set for a hybrid Mamba model using KV cache "
        f"manager V2. Falling back to max_seq_len / 2={capacity} for cache-pool sizing.",
        f"[TensorRT-LLM][INFO] KV cache manager v2 device quota set to {kv_budget_bytes / GIB}GiB",
    ]
    seq_len = max_seq_len
    if max_seq_len > tokens:
        seq_len = tokens
        logs.append(
            f"[TensorRT-LLM][WARNING] max_seq_len {max_seq_len} is greater than max_num_tokens {tokens} that "
            f"can be allocated in kv cache manager, setting max_seq_len to {tokens}"
        )
    n_attn, n_state = len(heads), len(states)
    derivation = (
        f"MambaHybridCacheManagerV2 (use_kv_cache_manager_v2 'auto' -> the model's V2 preference); quota = KV budget "
        f"{kv_budget_bytes:,} B; granularity {g >> 20} MiB; max_batch_size {max_batch_size} + {DUMMY_SLOTS} dummy",
        f"attention life cycle: {n_attn} layers, pools {list(attn_pools)} B per {tpb}-token block; SSM life cycle: "
        f"{n_state} layers, pools {list(state_pools)} B per state slot (conv {conv_dtype}, SSM {ssm_dtype})",
        f"minimum live quota = {live} x {state_slot:,} + {attn_block:,} = {minimum:,} B",
        f"typical step: {max_batch_size} x capacity {capacity:,} -> {typical[0]:,} blocks and {typical[1]:,} slots; "
        f"byte ratio {ratios[0]:.6f} : {ratios[1]:.6f}",
        f"ratio_to_slot_count_list(quota {quota:,}, min slots {list(min_slots)}) -> {blocks:,} blocks, {slots:,} slots",
    )
    what = (
        "latent KV" if kind == "latent" else "K|V"
    ) + f" of {n_attn} {'MLA' if kind == 'latent' else 'attention'} layers"
    pools = (
        EnginePool(
            name="attention pool",
            holds=what,
            unit=f"block of {tpb} tokens",
            bytes_per_unit=attn_block,
            units=blocks,
            layers=n_attn,
            arrangement="blocks",
            window=seq_len,
            kind=kind,
        ),
        EnginePool(
            name="recurrent state pool",
            holds=f"SSM ({ssm_dtype}) + conv ({conv_dtype}) states of {n_state} layers",
            unit="state slot",
            bytes_per_unit=state_slot,
            units=slots - DUMMY_SLOTS,
            layers=n_state,
            reserved_units=DUMMY_SLOTS,
            arrangement="blocks",
            kind="state",
        ),
    )
    running = min(max_batch_size, blocks)  # KVCacheV2Scheduler: BudgetTracker.max_num_requests; >= 1 block each
    whole = min(running, blocks // -(-seq_len // tpb))  # requests of max_seq_len tokens the blocks hold at once
    rule = (
        f"min(max_batch_size {max_batch_size}, blocks {blocks:,}): KVCacheV2Scheduler allocates each step's "
        f"pages and reserves nothing to completion; {whole:,} requests of {seq_len:,} tokens fit the blocks"
    )
    return EnginePlan(
        engine="trtllm",
        version=VERSION,
        model=model.name,
        kv_budget_bytes=kv_budget_bytes,
        pools=pools,
        token_capacity=tokens,
        token_capacity_name="attention blocks x tokens_per_block",
        request_bound=running,
        request_bound_rule=rule,
        requests_fit=whole,
        max_model_len=seq_len,
        log_lines=tuple(logs),
        derivation=derivation,
        tokens_per_window=((seq_len, tokens),),
        notes=NOTES,
        token_capacity_counts=f"tokens of the attention pool's blocks (blocks x {tpb}); the recurrent "
        f"states take {slots - DUMMY_SLOTS:,} slots of the same quota",
    )
