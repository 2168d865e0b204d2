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
  attention layer (sliding, chunked or full) is sized as a max_seq_len layer in one pool; no VSWA
  unless kv_cache_config.max_attention_window is given (not modelled).
* KVCacheManager.calculate_max_num_blocks: max_tokens = min(max_tokens, fraction x free /
  bytes per token); blocks_in_primary_pool = int(max_tokens // tokens_per_block) (main with the
  Gemma 4 per-layer head_dim support; earlier releases took math.ceil);
  tokens_per_block = KvCacheConfig.tokens_per_block = 32.
* cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp KVCacheManager::allocatePools logs
  "Number of tokens per block: %d." and "[MemUsageChange] Allocated %0.2f GiB for max tokens in
  paged KV cache (%d)." with primary blocks x tokens_per_block tokens.
* Requests: llmapi/llm_args.py max_batch_size default 2048; the GUARANTEED_NO_EVICT capacity
  scheduler reserves a request's blocks to completion (KVCacheManager.get_needed_resource_to_completion:
  ceil(tokens / tokens_per_block)).
* Hybrid Mamba (legacy MambaHybridCacheManager = MambaCacheManager + KVCacheManager with a
  layer mask of the attention layers): one conv and one SSM state per sequence slot,
  max_batch_size slots, allocated before profiling, so outside the KV budget; conv = model dtype,
  SSM = mamba_ssm_cache_dtype 'auto' -> the model's torch_dtype
  (_torch/model_loader.py validate_and_set_mamba_ssm_cache_dtype).

kvviz knobs read here: kv_dtype (in the declared caches), block_size -> tokens_per_block,
max_model_len -> max_seq_len, mamba_ssm_dtype -> mamba_ssm_cache_dtype.
"""

from __future__ import annotations

import math

from ..defaults import GIB
from ..errors import require
from ..formats import ELEMENT_BYTES
from ..options import Options
from . import EnginePlan, EnginePool, check_budget, split_declared

VERSION = "main (2026, PyTorch backend)"
TOKENS_PER_BLOCK = 32  # llmapi/llm_args.py KvCacheConfig.tokens_per_block
FREE_GPU_MEMORY_FRACTION = 0.9  # KvCacheConfig.free_gpu_memory_fraction (applied before kv_budget_bytes)
MAX_BATCH_SIZE = 2048  # llmapi/llm_args.py BaseLlmArgs.max_batch_size
MAX_NUM_TOKENS = 8192  # llmapi/llm_args.py BaseLlmArgs.max_num_tokens
_SSM = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def blocks_for_budget(budget: int, bytes_per_token: int, tokens_per_block: int) -> tuple[int, int]:
    """(max_tokens, blocks_in_primary_pool): CacheCost.tokens_for_budget (intercept 0), then
    KVCacheManager.calculate_max_num_blocks' int(max_tokens // tokens_per_block)."""
    max_tokens = max(budget // bytes_per_token, 0)
    return max_tokens, int(max_tokens // tokens_per_block)


def plan_trtllm(model, options: Options = Options(), *, kv_budget_bytes: int) -> EnginePlan:
    """TensorRT-LLM's pools for `model` when its KV cache gets `kv_budget_bytes` (after
    free_gpu_memory_fraction)."""
    check_budget(kv_budget_bytes)
    attn, mla, states = split_declared(model, model.reader.caches(model, options))
    require(not (attn and mla), f"{model.name}: both MHA and MLA layers; TensorRT-LLM keeps one KV cache type")
    tpb = options.block_size or TOKENS_PER_BLOCK
    max_seq_len = options.max_model_len or model.max_model_len
    derivation: list[str] = [f"tokens_per_block={tpb}, max_seq_len={max_seq_len:,}, one window of max_seq_len "
                             f"(max_attention_window unset)"]
    pools: list[EnginePool] = []
    notes = ["VSWA pools (kv_cache_config.max_attention_window)", "attention-window shrink when the pool holds less "
             "than max_seq_len (_validate_and_adjust_attention_windows)", "speculative decoding / MTP layers",
             "host (secondary) pool", "KVCacheManagerV2 and the unified hybrid Mamba managers (main routes "
             "hybrids to CppMambaHybridCacheManager / MambaHybridCacheManagerV2, whose fixed state cost is "
             "CacheCost.intercept inside the budget)"]

    if mla:
        c = mla[0]
        require(all(m.token_bytes == c.token_bytes for m in mla), f"{model.name}: MLA layers differ")
        kv_factor, heads, head_dim, layers, dtype = 1, 1, c.kv_lora_rank + c.qk_rope_head_dim, len(mla), c.kv_dtype
        holds = f"latent KV of {layers} MLA layers (SELFKONLY, 1 head of {head_dim})"
        bytes_per_token = kv_factor * heads * layers * head_dim * ELEMENT_BYTES[dtype]
    else:
        kv_factor, layers, dtype = 2, len(attn), attn[0].kv_dtype
        require(all(a.head_size == a.head_size_v and a.kv_dtype == dtype for a in attn),
                f"{model.name}: TensorRT-LLM's KVCacheManager keeps one head_dim and dtype for K and V")
        head_dim = attn[0].head_size
        require(all(a.head_size == head_dim for a in attn), f"{model.name}: per-layer head_dim needs KVCacheManagerV2")
        heads = sum(a.num_kv_heads for a in attn)  # sum(num_kv_heads_per_layer)
        sliding = sum(1 for a in attn if a.sliding_window is not None or a.attention_chunk_size is not None)
        holds = (f"K|V of {layers} attention layers"
                 + (f" ({sliding} sliding/chunked sized as full: one window)" if sliding else ""))
        bytes_per_token = kv_factor * heads * head_dim * ELEMENT_BYTES[dtype]
    max_tokens, blocks = blocks_for_budget(kv_budget_bytes, bytes_per_token, tpb)
    require(blocks > 0, f"{model.name}: TensorRT-LLM: the budget holds no KV block")
    pools.append(EnginePool(name="primary pool", holds=holds, unit=f"block of {tpb} tokens",
                            bytes_per_unit=bytes_per_token * tpb, units=blocks, layers=layers))
    derivation.append(f"get_cache_bytes_per_token = {kv_factor} x {heads if not mla else 1} heads"
                      f"{'' if mla else ' (all layers)'} x {head_dim}{f' x {layers} layers' if mla else ''} x "
                      f"{ELEMENT_BYTES[dtype]} = {bytes_per_token:,} B")
    derivation.append(f"max_tokens = {kv_budget_bytes:,} // {bytes_per_token:,} = {max_tokens:,}; "
                      f"blocks = {max_tokens:,} // {tpb} = {blocks:,}")
    if states:
        conv_dtype = model.dtype
        ssm = _SSM[options.mamba_ssm_dtype] if options.mamba_ssm_dtype else model.dtype
        conv_b = ssm_b = 0
        for s in states:
            temporal = s.parts[-1] if len(s.parts) > 1 else None
            for p in s.parts:
                if p is temporal:
                    ssm_b += p.count * ELEMENT_BYTES[ssm]
                else:
                    conv_b += p.count * ELEMENT_BYTES[conv_dtype]
        n = len(states)
        pools += [EnginePool(name="mamba conv_states", holds=f"conv state of {n} layers ({conv_dtype})",
                             unit="sequence slot", bytes_per_unit=conv_b, units=MAX_BATCH_SIZE, layers=n),
                  EnginePool(name="mamba ssm_states", holds=f"SSM state of {n} layers ({ssm})", unit="sequence slot",
                             bytes_per_unit=ssm_b, units=MAX_BATCH_SIZE, layers=n)]
        derivation.append(f"Mamba states: {MAX_BATCH_SIZE} slots x ({conv_b:,} + {ssm_b:,}) B, outside the KV budget")
    tokens = blocks * tpb
    per_request = math.ceil(max_seq_len / tpb)
    running = min(MAX_BATCH_SIZE, blocks // per_request)
    rule = (f"min(max_batch_size {MAX_BATCH_SIZE}, blocks // ceil(max_seq_len / {tpb})) "
            f"(GUARANTEED_NO_EVICT reserves blocks to completion)")
    kv_bytes = pools[0].total_bytes
    logs = (f"[TensorRT-LLM][INFO] Number of tokens per block: {tpb}.",
            f"[TensorRT-LLM][INFO] [MemUsageChange] Allocated {kv_bytes / GIB:.2f} GiB for max tokens in paged KV "
            f"cache ({tokens}).")
    return EnginePlan(engine="trtllm", version=VERSION, model=model.name, kv_budget_bytes=kv_budget_bytes,
                      pools=tuple(pools), token_capacity=tokens, token_capacity_name="max tokens in paged KV cache",
                      request_bound=running, request_bound_rule=rule, max_model_len=max_seq_len, log_lines=logs,
                      derivation=tuple(derivation), tokens_per_window=((max_seq_len, tokens),), notes=tuple(notes))
