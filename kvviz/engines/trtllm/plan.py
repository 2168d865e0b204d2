"""TensorRT-LLM's paged KV pools (PyTorch backend) from a model's declared caches.

Mirrored from TensorRT-LLM's source as stored in kvviz's reference index (main, 2026; the 1.2.1
wheel could not be had: PyPI's tensorrt-llm is a stub that downloads from NVIDIA's index):

* tensorrt_llm/_torch/pyexecutor/_util.py KvCacheCreator._cal_max_memory: the KV memory is
  (total - peak + temporary KV) x free_gpu_memory_fraction (KvCacheConfig default 0.9), int();
  kvviz's `kv_budget_bytes` is that number. configure_kv_cache_capacity then sets
  kv_cache_config.max_tokens = CacheCost.tokens_for_budget(budget) = (budget - intercept) // slope,
  slope = bytes per token, intercept 0 for the plain KVCacheManager.
* tensorrt_llm/_torch/pyexecutor/resource_manager.py KVCacheManager.get_cache_bytes_per_token:
  kv_factor (2; 1 for CacheType SELFKONLY, MLA) x sum(num_kv_heads per local layer) x head_dim x
  dtype size; MLA keeps one head of kv_lora_rank + qk_rope_head_dim.
* KVCacheManager.__init__: max_attention_window None -> [max_seq_len]: one window, so every
  attention layer (sliding, chunked or full) is sized as a max_seq_len layer in one pool (the
  window is applied in the kernel only). With kv_cache_config.max_attention_window given (each
  size clamped to max_seq_len; two or more sizes = VSWA), resource_manager/vswa.py
  (commit 6a7d0303) calculate_max_num_blocks_for_vswa: get_window_size_to_layers (the list is a
  pattern repeated over the layers), adjust_window_sizes_for_vswa (windows shrink only when one
  sequence of every window does not fit the pool), then each window size gets an equal share of
  the pool (TRTLLM_WINDOW_SIZE_SHARES otherwise): blocks = int(budget x share / bytes per token of
  that window's layers // tokens_per_block); max_gpu_total_bytes = the budget.
* vswa.py validate_and_adjust_attention_windows + KVCacheManager.get_max_atten_window_upper_bound:
  a window (max_seq_len by default) longer than its pool's blocks x tokens_per_block is cut to
  that, and max_seq_len becomes the largest window: a request is never longer than the pool.
* KVCacheManager.calculate_max_num_blocks: max_tokens = min(max_tokens, fraction x free /
  bytes per token); blocks_in_primary_pool = int(max_tokens // tokens_per_block) (main with the
  Gemma 4 per-layer head_dim support; earlier releases took math.ceil);
  tokens_per_block = KvCacheConfig.tokens_per_block = 32.
* cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp KVCacheManager::allocatePools logs
  "Number of tokens per block: %d." and "[MemUsageChange] Allocated %0.2f GiB for max tokens in
  paged KV cache (%d)." with primary blocks x tokens_per_block tokens.
* Requests: llmapi/llm_args.py max_batch_size default 2048; the GUARANTEED_NO_EVICT capacity
  scheduler (capacityScheduler.cpp, NoEvictScheduledBlocksManager) reserves a request's blocks to
  completion in every window's pool: KVCacheManager::getRemainingBlocksToCompletion(req, window) =
  ceil(min(tokens, window + temporary window) / tokens_per_block), the temporary window being the
  chunked-context scratch a window shorter than max_seq_len keeps (temporary_attention_window); with
  the default one window it is 0 and this is ceil(tokens / tokens_per_block).
* Hybrid Mamba: TensorRT-LLM's default is MambaHybridCacheManagerV2 (states in slots inside the
  budget), mirrored in kvviz.engines.trtllm.hybrid. With use_py_mamba (use_kv_cache_manager_v2=False,
  TRTLLM_USE_PY_MAMBA=1) the legacy manager
  (kv_cache/mamba_cache_manager/ at commit 28295084: MixedMambaHybridCacheManager =
  MambaCacheManager + KVCacheManager with a layer mask of the attention layers): conv states
  (layers, slots, conv_dim, d_conv - 1) and SSM states (layers, slots, heads, head_dim, d_state)
  (legacy.py PythonMambaCacheManager), slots = _get_mamba_hybrid_pool_size = max_batch_size + 1
  (one CUDA-graph padding slot; common.py), allocated before profiling, so outside the KV budget;
  conv = model dtype,
  SSM = mamba_ssm_cache_dtype 'auto' -> the config's mamba_ssm_cache_dtype (NemotronH: float32), else the
  model's torch_dtype (_torch/model_loader.py validate_and_set_mamba_ssm_cache_dtype; ssm_cache_dtype).

kvviz knobs read here: kv_dtype (in the declared caches), block_size -> tokens_per_block,
max_model_len -> max_seq_len, mamba_ssm_dtype -> mamba_ssm_cache_dtype.
"""

from __future__ import annotations

from kvviz.base.defaults import GIB
from kvviz.base.errors import require
from kvviz.base.formats import ELEMENT_BYTES
from kvviz.engines.common import EnginePlan, EnginePool, check_budget, split_declared, state_bytes
from kvviz.engines.served import check_served
from kvviz.engines.trtllm.constants import MAX_BATCH_SIZE, MAX_NUM_TOKENS, NOTES, TOKENS_PER_BLOCK, VERSION
from kvviz.engines.trtllm.rules import (
    attention_geometry,
    blocks_for_budget,
    blocks_to_completion,
    shrink_windows,
    ssm_cache_dtype,
    temporary_attention_window,
    window_layers,
    window_upper_bound,
)
from kvviz.options import Options


def plan_trtllm(
    model,
    options: Options = Options(),
    *,
    kv_budget_bytes: int,
    max_attention_window: tuple[int, ...] | None = None,
    window_size_shares: tuple[float, ...] | None = None,
    max_batch_size: int = MAX_BATCH_SIZE,
    use_py_mamba: bool = False,
) -> EnginePlan:
    """TensorRT-LLM's pools for `model` when its KV cache gets `kv_budget_bytes` (after
    free_gpu_memory_fraction); `max_attention_window` is KvCacheConfig's (None: one window of
    max_seq_len), `window_size_shares` TRTLLM_WINDOW_SIZE_SHARES, `max_batch_size` LlmArgs'.
    A hybrid (recurrent-state) model gets MambaHybridCacheManagerV2, TensorRT-LLM's default
    (kvviz.engines.trtllm.hybrid); `use_py_mamba` is use_kv_cache_manager_v2=False with
    TRTLLM_USE_PY_MAMBA=1: the legacy MixedMambaHybridCacheManager, states outside the budget."""
    check_budget(kv_budget_bytes)
    check_served("trtllm", model)  # _torch/models/_arch_index.py MODEL_ARCH_TO_MODULE lists it
    if model.architecture == "DeepseekV4ForCausalLM":  # its own manager: kvviz.engines.trtllm.dsv4
        from kvviz.engines.trtllm.dsv4 import plan_trtllm_dsv4

        return plan_trtllm_dsv4(
            model,
            options,
            kv_budget_bytes=kv_budget_bytes,
            max_batch_size=max_batch_size,
            max_attention_window=max_attention_window,
            use_py_mamba=use_py_mamba,
        )
    attn, mla, states = split_declared(model, model.reader.caches(model, options), "trtllm")
    require(not (attn and mla), f"{model.name}: both MHA and MLA layers; TensorRT-LLM keeps one KV cache type")
    require(
        type(max_batch_size) is int and max_batch_size > 0, f"max_batch_size={max_batch_size!r}: a positive integer"
    )
    require(states or not use_py_mamba, f"{model.name}: use_py_mamba applies to hybrid Mamba models only")
    tpb = options.block_size or TOKENS_PER_BLOCK
    max_seq_len = options.max_model_len or model.max_model_len
    kv_factor, heads, head_dim, dtype, kind = attention_geometry(model, attn, mla)
    if states and not use_py_mamba:
        from kvviz.engines.trtllm.hybrid import plan_trtllm_hybrid_v2

        require(
            max_attention_window is None,
            f"{model.name}: max_attention_window with MambaHybridCacheManagerV2 is not modelled by kvviz",
        )
        return plan_trtllm_hybrid_v2(
            model,
            options,
            attn_layout=(kv_factor, heads, head_dim, dtype, kind),
            states=states,
            kv_budget_bytes=kv_budget_bytes,
            tokens_per_block=tpb,
            max_seq_len=max_seq_len,
            max_batch_size=max_batch_size,
        )
    elem = ELEMENT_BYTES[dtype]
    layers = len(heads)
    per_layer = [kv_factor * h * head_dim * elem for h in heads]  # bytes per token, per layer
    windows = (
        (max_seq_len,) if max_attention_window is None else tuple(min(max_seq_len, w) for w in max_attention_window)
    )
    vswa = len(set(windows)) > 1
    groups = window_layers(windows, layers)
    derivation = [
        f"tokens_per_block={tpb}, max_seq_len={max_seq_len:,}, max_attention_window="
        f"{'unset: one window of max_seq_len' if max_attention_window is None else list(windows)}"
    ]
    logs: list[str] = []
    if vswa:
        kept = shrink_windows(groups, per_layer, kv_budget_bytes)
        if any(kept[w] != w for w in groups):
            derivation.append(
                f"adjust_window_sizes_for_vswa: windows {sorted(groups)} -> "
                f"{[kept[w] for w in sorted(groups)]} (one sequence did not fit)"
            )
            merged: dict[int, list[int]] = {}
            for w in sorted(groups):
                merged.setdefault(kept[w], []).extend(groups[w])
            groups = merged
        if window_size_shares is None:
            shares = [1.0 / len(groups)] * len(groups)
        else:
            require(
                len(window_size_shares) == len(groups),
                f"window_size_shares: {len(window_size_shares)} shares for {len(groups)} window sizes",
            )
            require(sum(window_size_shares) == 1.0, "window_size_shares: must sum to 1.0")
            shares = list(window_size_shares)
        blocks_per_window = {}
        for share, (w, ls) in zip(shares, sorted(groups.items())):
            bpt = sum(per_layer[i] for i in ls)
            primary_tokens = kv_budget_bytes * share / bpt  # calculate_max_num_blocks_for_vswa
            blocks_per_window[w] = (int(primary_tokens // tpb), bpt, ls, share)
            derivation.append(
                f"window {w:,}: {len(ls)} layers x {bpt // len(ls):,} B = {bpt:,} B/token; "
                f"share {share:g}: int({kv_budget_bytes:,} x {share:g} / {bpt:,} // {tpb}) = "
                f"{int(primary_tokens // tpb):,} blocks"
            )
    else:
        bpt = sum(per_layer)  # get_cache_bytes_per_token
        max_tokens, blocks = blocks_for_budget(kv_budget_bytes, bpt, tpb)
        blocks_per_window = {windows[0]: (blocks, bpt, list(range(layers)), 1.0)}
        derivation.append(
            f"get_cache_bytes_per_token = {kv_factor} x {sum(heads)} heads (all {layers} layers) x "
            f"{head_dim} x {elem} = {bpt:,} B"
        )
        derivation.append(
            f"max_tokens = {kv_budget_bytes:,} // {bpt:,} = {max_tokens:,}; "
            f"blocks = {max_tokens:,} // {tpb} = {blocks:,}"
        )
    # validate_and_adjust_attention_windows: no window longer than its pool
    adjusted = {}
    for w, (blocks, *_rest) in blocks_per_window.items():
        require(blocks > 0, f"{model.name}: TensorRT-LLM: the budget holds no KV block for window {w:,}")
        bound = window_upper_bound(blocks, tpb)
        adjusted[w] = min(w, bound)
        if bound < w:
            logs.append(
                f"[TensorRT-LLM][WARNING] Attention window size {w} exceeds upper bound {bound} for "
                f"available blocks. Reducing to {bound}."
            )
    if any(adjusted[w] != w for w in adjusted):
        new_len = max(adjusted.values()) if vswa else adjusted[windows[0]]
        logs.append(f"[TensorRT-LLM][WARNING] Adjusted max_seq_len to {new_len}")
        derivation.append(
            f"validate_and_adjust_attention_windows: max_seq_len {max_seq_len:,} -> {new_len:,} "
            f"(the pool's blocks x {tpb})"
        )
        max_seq_len = new_len
    sliding = sum(1 for a in attn if a.sliding_window is not None or a.attention_chunk_size is not None)
    pools: list[EnginePool] = []
    logs.append(f"[TensorRT-LLM][INFO] Number of tokens per block: {tpb}.")
    per_request = {}
    max_num_tokens = options.max_num_batched_tokens or MAX_NUM_TOKENS
    for w, (blocks, bpt, ls, share) in sorted(blocks_per_window.items()):
        window = adjusted[w]
        what = ("latent KV" if kind == "latent" else "K|V") + f" of {len(ls)} {'MLA' if mla else 'attention'} layers"
        if not vswa and sliding:
            what += f" ({sliding} sliding/chunked sized as full: one window)"
        pools.append(
            EnginePool(
                name="primary pool" if not vswa else f"window {window:,} pool",
                holds=what,
                unit=f"block of {tpb} tokens",
                bytes_per_unit=bpt * tpb,
                units=blocks,
                layers=len(ls),
                arrangement="blocks",
                window=window,
                kind=kind,
            )
        )
        temporary = temporary_attention_window(window, max_seq_len, max_num_tokens, adjusted.values())
        per_request[window] = blocks_to_completion(max_seq_len, window, temporary, tpb)
        if window < max_seq_len:
            derivation.append(
                f"window {window:,}: a {max_seq_len:,}-token request reserves ceil(min({max_seq_len:,}, "
                f"{window:,} + {temporary:,} temporary) / {tpb}) = {per_request[window]:,} blocks"
            )
        logs.append(
            f"[TensorRT-LLM][INFO] [MemUsageChange] Allocated {pools[-1].total_bytes / GIB:.2f} GiB for max "
            f"tokens in paged KV cache ({blocks * tpb})."
        )
    if states:
        pools += _mamba_pools(model, options, states, max_batch_size)
        derivation.append(
            f"Mamba states (MixedMambaHybridCacheManager, TRTLLM_USE_PY_MAMBA=1): {pools[-1].units:,} "
            f"+ 1 slots (max_batch_size + a padding slot) x "
            f"({pools[-2].bytes_per_unit:,} + {pools[-1].bytes_per_unit:,}) B, outside the KV budget"
        )
        logs.insert(
            0,
            f"Mamba Cache is allocated. max_mamba_cache_size: {max_batch_size + 1}, conv_state size: "
            f"{pools[-2].total_bytes / GIB:.2f}GB, ssm_state size: {pools[-1].total_bytes / GIB:.2f}GB",
        )
    kv_pools = [p for p in pools if p.kind != "state"]
    full = max(kv_pools, key=lambda p: p.window)
    tokens = full.units * tpb
    running = min([max_batch_size] + [p.units // per_request[p.window] for p in kv_pools])
    rule = (
        f"min(max_batch_size {max_batch_size}, blocks // blocks to completion per pool: ceil(min(max_seq_len, "
        f"window + temporary window) / {tpb})) (GUARANTEED_NO_EVICT reserves blocks to completion)"
    )
    if len(kv_pools) > 1:
        others = ", ".join(f"{p.units * tpb:,} in the window-{p.window:,} pool" for p in kv_pools if p is not full)
        counts = f"tokens of the largest window's pool (blocks x {tpb}); {others}"
    else:
        counts = (
            f"tokens of the one pool's blocks (blocks x {tpb}): a token of context holds a row in every "
            f"{'MLA' if mla else 'attention'} layer" + (", sliding ones included" if sliding else "")
        )
    if states:
        counts += "; the Mamba states sit in max_batch_size + 1 slots outside the budget"
    return EnginePlan(
        engine="trtllm",
        version=VERSION,
        model=model.name,
        kv_budget_bytes=kv_budget_bytes,
        pools=tuple(pools),
        token_capacity=tokens,
        token_capacity_name="max tokens in paged KV cache",
        request_bound=running,
        request_bound_rule=rule,
        max_model_len=max_seq_len,
        log_lines=tuple(logs),
        derivation=tuple(derivation),
        tokens_per_window=tuple((p.window, p.units * tpb) for p in kv_pools),
        notes=NOTES,
        token_capacity_counts=counts,
    )


def _mamba_pools(model, options: Options, states, max_batch_size: int = MAX_BATCH_SIZE) -> list[EnginePool]:
    """legacy.py PythonMambaCacheManager's conv_states / ssm_states over
    _get_mamba_hybrid_pool_size = max_batch_size + 1 slots (the last a padding slot); conv in the
    model dtype, SSM in mamba_ssm_cache_dtype (ssm_cache_dtype). Only with
    use_kv_cache_manager_v2=False and TRTLLM_USE_PY_MAMBA=1 (_util.py get_kv_cache_manager_cls at
    commit 0004396720); the default is kvviz.engines.trtllm.hybrid."""
    conv_dtype = model.dtype
    ssm = ssm_cache_dtype(model, options)
    per_layer = [state_bytes(s, conv_dtype, ssm) for s in states]
    conv_b, ssm_b = sum(c for c, _ in per_layer), sum(t for _, t in per_layer)
    n = len(states)
    return [
        EnginePool(
            name="mamba conv_states",
            holds=f"conv state of {n} layers ({conv_dtype})",
            unit="sequence slot",
            bytes_per_unit=conv_b,
            units=max_batch_size,
            layers=n,
            reserved_units=1,
            kind="state",
            outside_budget=True,
        ),
        EnginePool(
            name="mamba ssm_states",
            holds=f"SSM state of {n} layers ({ssm})",
            unit="sequence slot",
            bytes_per_unit=ssm_b,
            units=max_batch_size,
            layers=n,
            reserved_units=1,
            kind="state",
            outside_budget=True,
        ),
    ]
