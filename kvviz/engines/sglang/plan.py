"""SGLang 0.5.23's KV pools from a model's declared caches (read from the wheel's source, never
imported; paths below are under sglang/srt/).

The path mirrored (KVCacheConfigurator._resolve_memory_pool_config, mem_cache/kv_cache_configurator.py):

1. `_profile_available_bytes`: rest_memory (GiB, a float) = free memory - the non-static slack;
   a hybrid-linear model then gives its Mamba state pool its share (`_handle_max_mamba_cache`);
   the rest, `int(rest * 2**30)`, is the KV budget. kvviz's `kv_budget_bytes` is rest_memory
   before the Mamba carve-out.
2. `create_memory_pool_configurator` (model_executor/pool_configurator.py): a hybrid-SWA model
   gets `HybridSWAPoolConfigurator`, every other (MHA, MLA, hybrid linear) `DefaultPoolConfigurator`.
3. `calculate_pool_sizes` -> max_total_num_tokens (page-aligned), then `resolve_max_num_reqs`
   -> max_running_requests.

Defaults as `sglang serve` resolves them on an H200 (SM90, CUDA): page_size 1
(arg_groups/overrides.py _page_size_default; fa3 is the default MHA and MLA backend on Hopper,
arg_groups/model_override_base.py get_default_attn_backend, and fa3 keeps page 1),
swa_full_tokens_ratio 0.8 and mamba_full_memory_ratio 0.9 (arg_groups/fields/schedule.py
fallbacks), radix cache on, overlap schedule on, chunked_prefill_size 8192 (arg_groups/memory_hook.py,
GPU memory < 160 GiB), max_prefill_tokens 16384.

kvviz knobs read here: kv_dtype (already in the declared caches), block_size -> --page-size,
max_model_len -> --context-length, max_num_batched_tokens -> --chunked-prefill-size (log only),
prefix_caching=False -> --disable-radix-cache, async_scheduling=False -> --disable-overlap-schedule,
mamba_ssm_dtype -> --mamba-ssm-dtype.
"""

from __future__ import annotations

from kvviz.base.defaults import GIB
from kvviz.base.errors import KvvizError, require
from kvviz.base.formats import ELEMENT_BYTES
from kvviz.engines.common import EnginePlan, EnginePool, check_budget, split_declared
from kvviz.engines.served import check_served
from kvviz.engines.sglang.constants import (
    CHUNKED_PREFILL_SIZE,
    DEFAULT_PAGE_SIZE,
    DISABLE_HYBRID_SWA_ARCHS,
    GB,
    KV_SHARING_ARCHS,
    MAMBA_FULL_MEMORY_RATIO,
    MAX_PREFILL_TOKENS,
    SWA_FULL_TOKENS_RATIO,
    TORCH_DTYPE,
    VERSION,
)
from kvviz.engines.sglang.rules import (
    every_layer,
    is_hybrid_swa,
    kv_log,
    kv_pools,
    mamba_per_req,
    mamba_ratio,
    requests_at_full_length,
    resolve_max_num_reqs,
    ssm_dtype,
    uniform,
)
from kvviz.options import Options


def plan_sglang(
    model, options: Options = Options(), *, kv_budget_bytes: int, available_gpu_mem_gb: float | None = None
) -> EnginePlan:
    """SGLang 0.5.23's pools for `model` when its KV pools get `kv_budget_bytes` (rest_memory before
    the Mamba carve-out). `available_gpu_mem_gb` only fills the log line's last field."""
    check_budget(kv_budget_bytes)
    check_served("sglang", model)  # models/registry.py: an EntryClass of sglang/srt/models lists it
    if model.family == "deepseek_v4":  # pool_configurator.py create_memory_pool_configurator: DSV4PoolConfigurator
        from kvviz.engines.sglang.dsv4 import plan_sglang_dsv4

        return plan_sglang_dsv4(
            model, options, kv_budget_bytes=kv_budget_bytes, available_gpu_mem_gb=available_gpu_mem_gb
        )
    attn, mla, states = split_declared(model, model.reader.caches(model, options), "sglang")
    require(not (attn and mla), f"{model.name}: both MHA and MLA layers; SGLang has no such pool here")
    page = options.block_size or DEFAULT_PAGE_SIZE
    context_len = options.max_model_len or model.max_model_len
    derivation: list[str] = [f"page_size={page}, context_len={context_len:,}"]
    pools: list[EnginePool] = []
    logs: list[str] = []
    notes = [
        "post-capture KV resize (ModelRunner.post_capture_resize_kv_pool)",
        "speculative decoding",
        "attention DP / DCP",
        "--max-total-tokens / --max-running-requests caps",
    ]

    # 1. _profile_available_bytes: rest_memory in GiB; hybrid linear models carve their states first.
    rest = kv_budget_bytes / GB
    mamba_cap = None
    if states:
        ssm, ssm_source = ssm_dtype(model, options)
        conv_b, ssm_b = mamba_per_req(states, ssm)
        per_slot = conv_b + ssm_b
        # _handle_max_mamba_cache, the ratio branch (no --max-mamba-cache-size, no spec decoding).
        mamba_budget = rest * MAMBA_FULL_MEMORY_RATIO / (1 + MAMBA_FULL_MEMORY_RATIO)
        mamba_budget_bytes = mamba_budget * GIB
        max_mamba_cache_size = int((mamba_budget_bytes - 0 - per_slot) // per_slot)
        require(
            max_mamba_cache_size > 0,
            f"{model.name}: SGLang: not enough memory for the mamba state cache "
            f"(max_mamba_cache_size={max_mamba_cache_size})",
        )
        mamba_state_memory = ((max_mamba_cache_size + 1) * per_slot + 0) / GIB
        rest = rest - mamba_state_memory
        ratio, ratio_rule = mamba_ratio(model, options)
        mamba_cap = max_mamba_cache_size // ratio
        n = len(states)
        pools += [
            EnginePool(
                name="mamba conv_state",
                holds=f"conv state of {n} {states[0].mamba_type} layers (bf16)",
                unit="request slot",
                bytes_per_unit=conv_b,
                units=max_mamba_cache_size,
                layers=n,
                reserved_units=1,
            ),
            EnginePool(
                name="mamba temporal_state",
                holds=f"SSM state of {n} layers ({ssm}, {ssm_source})",
                unit="request slot",
                bytes_per_unit=ssm_b,
                units=max_mamba_cache_size,
                layers=n,
                reserved_units=1,
            ),
        ]
        derivation += [
            f"mamba_cache_per_req = {conv_b:,} conv + {ssm_b:,} SSM = {per_slot:,} B over {n} layers",
            f"mamba budget = rest x {MAMBA_FULL_MEMORY_RATIO}/(1+{MAMBA_FULL_MEMORY_RATIO}); "
            f"max_mamba_cache_size = {max_mamba_cache_size:,} (+1 padding slot)",
            f"mamba ratio {ratio} ({ratio_rule}) -> at most {mamba_cap:,} running requests",
        ]
        logs.append(
            f"Mamba Cache is allocated. max_mamba_cache_size: {max_mamba_cache_size}, "
            f"conv_state size: {pools[0].total_bytes / GB:.2f}GB, "
            f"ssm_state size: {pools[1].total_bytes / GB:.2f}GB "
        )
    available = int(rest * GIB)
    if states:
        derivation.append(f"KV bytes after the Mamba pool: {available:,}")

    # 2./3. The configurator.
    if mla:
        # DefaultPoolConfigurator._compute_cell_size, MLA: calculate_mla_kv_cache_dim (kv_lora_rank +
        # qk_rope_head_dim, not DSA) x layers x kv dtype size.
        c = mla[0]
        require(all(m.token_bytes == c.token_bytes for m in mla), f"{model.name}: MLA layers differ")
        cell = (c.kv_lora_rank + c.qk_rope_head_dim) * len(mla) * ELEMENT_BYTES[c.kv_dtype]
        tokens = available // cell // page * page
        pools.append(
            EnginePool(
                name="kv_buffer",
                holds=f"latent KV of {len(mla)} MLA layers ({c.kv_lora_rank}+{c.qk_rope_head_dim})",
                unit="token",
                bytes_per_unit=cell,
                units=tokens,
                layers=len(mla),
                reserved_units=page,
            )
        )
        derivation.append(
            f"MLATokenToKVPool: cell_size = ({c.kv_lora_rank} + {c.qk_rope_head_dim}) x {len(mla)} x "
            f"{ELEMENT_BYTES[c.kv_dtype]} = {cell:,} B/token; {available:,} // {cell:,} = {tokens:,}"
        )
        logs.append(
            f"KV Cache is allocated. dtype: {TORCH_DTYPE[c.kv_dtype]}, #tokens: {tokens}, "
            f"KV size: {pools[-1].total_bytes / GB:.2f} GB"
        )
        hybrid = False
        full_pool, sliding = tokens, None
        counts = "rows of the latent buffer: a token of context holds one in every MLA layer"
    elif is_hybrid_swa(model, attn):
        hybrid = True
        swa = [c for c in attn if c.sliding_window is not None or c.attention_chunk_size is not None]
        full = [c for c in attn if c not in swa]
        f0, s0 = uniform(full, "full", model) if full else None, uniform(swa, "sliding", model)
        full_per_token = f0.token_bytes if f0 else 0
        swa_per_token = s0.token_bytes
        window = s0.sliding_window if s0.sliding_window is not None else s0.attention_chunk_size
        if full:
            # HybridSWAPoolConfigurator._recompute_cell_size (float) and calculate_pool_sizes / _solve_pool_sizes.
            cell = full_per_token * len(full) + SWA_FULL_TOKENS_RATIO * (swa_per_token * len(swa))
            max_total = int(available // cell)
            full_tokens = max_total // page * page
            swa_tokens = int(full_tokens * SWA_FULL_TOKENS_RATIO) // page * page
            if window + page >= swa_tokens:  # MemoryPoolConfigurator.validate_swa_pool_size
                raise KvvizError(
                    f"{model.name}: SGLang: SWA pool ({swa_tokens} tokens) cannot hold even one request: "
                    f"sliding_window_size ({window}) + page_size ({page}); raise the budget"
                )
            tokens = full_tokens
            pools += kv_pools("full ", full, full_tokens, page, "full-attention")
            pools += kv_pools("swa ", swa, swa_tokens, page, f"sliding (window {window:,})")
            derivation += [
                f"hybrid SWA: cell = {full_per_token:,} x {len(full)} + {SWA_FULL_TOKENS_RATIO} x "
                f"{swa_per_token:,} x {len(swa)} = {cell:,} B per full token",
                f"full_layer_tokens = {full_tokens:,}, swa_layer_tokens = int({full_tokens:,} x "
                f"{SWA_FULL_TOKENS_RATIO}) = {swa_tokens:,}",
            ]
            logs.append(
                f"Use sliding window memory pool. full_layer_tokens={full_tokens}, swa_layer_tokens={swa_tokens}"
            )
            logs.append(kv_log(pools[-4:-2], full_tokens, f0.kv_dtype))
            logs.append(kv_log(pools[-2:], swa_tokens, s0.kv_dtype))
            full_pool, sliding = full_tokens, (swa_tokens, window)
            counts = (
                f"rows of the full-attention buffers; the sliding-window buffers hold {swa_tokens:,} "
                f"(swa_full_tokens_ratio {SWA_FULL_TOKENS_RATIO})"
            )
        else:  # all SWA: no ratio, max_total = the SWA pool
            cell = swa_per_token * len(swa)
            tokens = int(available // cell) // page * page
            pools += kv_pools("swa ", swa, tokens, page, f"sliding (window {window:,})")
            derivation.append(f"all-SWA pool: {available:,} // {cell:,} = {tokens:,}")
            logs.append(f"Use sliding window memory pool (all SWA). swa_layer_tokens={tokens}")
            full_pool, sliding = None, (tokens, window)
            counts = "rows of the sliding-window buffers (every layer slides)"
    else:
        hybrid = False
        # DefaultPoolConfigurator: n x (head_dim + v_head_dim) x layers x kv size over the attention
        # layers (hybrid linear models: full_attention_layer_ids only); page-aligned floor.
        c = uniform(attn, "attention", model)
        if model.architecture in KV_SHARING_ARCHS:
            attn = every_layer(model, attn)
        cell = c.token_bytes * len(attn)
        tokens = available // cell // page * page
        pools += kv_pools("", attn, tokens, page, "attention")
        why = ""
        if model.architecture in DISABLE_HYBRID_SWA_ARCHS and any(
            a.sliding_window is not None or a.attention_chunk_size is not None for a in attn
        ):
            why = " (sliding layers sized as full: disable_hybrid_swa_memory, model_overrides/gemma2_gemma3.py)"
        elif any(a.sliding_window is not None or a.attention_chunk_size is not None for a in attn):
            why = f" (sliding layers sized as full: {model.architecture} is not a hybrid-SWA architecture)"
        derivation.append(
            f"MHATokenToKVPool: cell_size = {c.num_kv_heads} x ({c.head_size} + {c.head_size_v}) x "
            f"{len(attn)} x {ELEMENT_BYTES[c.kv_dtype]} = {cell:,} B/token{why}; "
            f"{available:,} // {cell:,} = {tokens:,}"
        )
        logs.append(kv_log(pools[-2:], tokens, c.kv_dtype))
        full_pool, sliding = tokens, None
        counts = "rows of the K and V buffers: a token of context holds one in every attention layer" + why

    require(tokens > 0, f"{model.name}: SGLang: Not enough memory (max_total_num_tokens={tokens})")
    running = resolve_max_num_reqs(tokens, context_len, mamba_cap)
    rule = "resolve_max_num_reqs: min(clamp(int(tokens / context_len x 512), 2048, 4096), tokens // 2" + (
        ", max_mamba_cache_size // ratio)" if mamba_cap is not None else ")"
    )
    chunk = options.max_num_batched_tokens or CHUNKED_PREFILL_SIZE
    mem = "?" if available_gpu_mem_gb is None else f"{available_gpu_mem_gb:.2f}"
    # managers/scheduler.py Scheduler init: the line SGLang prints once the pools exist.
    logs.append(
        f"max_total_num_tokens={tokens}, chunked_prefill_size={chunk}, max_prefill_tokens={MAX_PREFILL_TOKENS}, "
        f"max_running_requests={running}, context_len={context_len}, available_gpu_mem={mem} GB"
    )
    notes_t = tuple(notes) + (("SWA eviction / request-cap sizing (SWARequestCapPoolConfigurator)",) if hybrid else ())
    return EnginePlan(
        engine="sglang",
        version=VERSION,
        model=model.name,
        kv_budget_bytes=kv_budget_bytes,
        pools=tuple(pools),
        token_capacity=tokens,
        token_capacity_name="max_total_num_tokens",
        request_bound=running,
        request_bound_rule=rule,
        max_model_len=context_len,
        log_lines=tuple(logs),
        derivation=tuple(derivation),
        notes=notes_t,
        token_capacity_counts=counts + ("; the recurrent states live in request slots" if states else ""),
        requests_fit=requests_at_full_length(context_len, page, running, full_pool, sliding),
    )
