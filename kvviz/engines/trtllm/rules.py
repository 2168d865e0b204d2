"""TensorRT-LLM's window and block rules (KVCacheManager, resource_manager/vswa.py): blocks for a
budget, window groups and shrinking, the window upper bound, the temporary attention window, blocks
to completion, and the SSM cache dtype it resolves."""

from __future__ import annotations

import math

from kvviz.base.errors import require
from kvviz.engines.trtllm.constants import SSM
from kvviz.options import Options


def blocks_for_budget(budget: int, bytes_per_token: int, tokens_per_block: int) -> tuple[int, int]:
    """(max_tokens, blocks_in_primary_pool): CacheCost.tokens_for_budget (intercept 0), then
    KVCacheManager.calculate_max_num_blocks' int(max_tokens // tokens_per_block)."""
    max_tokens = max(budget // bytes_per_token, 0)
    return max_tokens, int(max_tokens // tokens_per_block)


def window_layers(windows: tuple[int, ...], num_layers: int) -> dict[int, list[int]]:
    """vswa.py get_window_size_to_layers: the per-layer window list as a repeating pattern over
    the local (attention) layers, window size -> layer offsets."""
    if len(windows) == 1:
        return {windows[0]: list(range(num_layers))}
    out: dict[int, list[int]] = {}
    for i in range(num_layers):
        out.setdefault(windows[i % len(windows)], []).append(i)
    return out


def shrink_windows(groups: dict[int, list[int]], per_layer_token_bytes: list[int], pool_bytes: int) -> dict[int, int]:
    """vswa.py adjust_window_sizes_for_vswa (max_tokens unset): window -> the window it keeps.
    Unchanged when one sequence of every window fits the pool; else, smallest window first, each
    window gets the tokens the remaining bytes buy over the layers not yet placed."""
    required = sum(w * sum(per_layer_token_bytes[i] for i in groups[w]) for w in sorted(groups))
    if required < pool_bytes:
        return {w: w for w in groups}
    remaining, left = pool_bytes, {i for ls in groups.values() for i in ls}
    accum, prev, out = 0, 0, {}
    for w in sorted(groups):
        if remaining > 0 and left:
            per_token = sum(per_layer_token_bytes[i] for i in left)
            tokens = min(remaining // per_token, w - prev)
            remaining -= tokens * per_token
            accum += tokens
            if accum < w:
                remaining = 0
        out[w] = accum
        left -= set(groups[w])
        prev = w
    return out


def window_upper_bound(blocks: int, tokens_per_block: int) -> int:
    """KVCacheManager.get_max_atten_window_upper_bound, beam width 1, no sink tokens: the tokens
    of the whole blocks the pool has."""
    require(blocks > 0, "TensorRT-LLM: Impossible to fit in any sequence in kvCache (no block)")
    return math.floor(blocks * tokens_per_block / tokens_per_block) * tokens_per_block


def temporary_attention_window(window: int, max_seq_len: int, max_num_tokens: int, windows) -> int:
    """The scratch tokens a sliding window reserves beyond itself for chunked context:
    KVCacheManager._set_temp_attention_window_inputs (resource_manager/kv_cache_manager.py, commit
    600066ad) passes paged_context_fmha, max_input_len = max_seq_len - 1 and max_num_tokens when any
    window is shorter than max_seq_len; WindowBlockManager::calculateTemporaryAttentionWindow
    (cpp/tensorrt_llm/batch_manager/kvCacheManager.h) gives min(max_num_tokens, max_input_len -
    window), at least 0, for a window shorter than max_input_len, else 0."""
    if min(windows) >= max_seq_len or max_seq_len - 1 <= window:
        return 0
    return max(min(max_num_tokens, max_seq_len - 1 - window), 0)


def blocks_to_completion(seq_len: int, window: int, temporary: int, tokens_per_block: int) -> int:
    """KVCacheManager::getRemainingBlocksToCompletion(req, windowSize) for a request not yet
    started (no blocks allocated, no sink tokens, beam 1): ceilDiv(min(prompt + max_new_tokens,
    window + temporary window), tokens_per_block); the GUARANTEED_NO_EVICT scheduler's
    NoEvictScheduledBlocksManager reserves that many in each window's pool."""
    return -(-min(seq_len, window + temporary) // tokens_per_block)


def attention_geometry(model, attn, mla):
    """(kv_factor, per-layer kv heads, head_dim, dtype, what) as _util.py _create_kv_cache_manager
    hands them to KVCacheManager (MLA: SELFKONLY, one head of kv_lora_rank + qk_rope_head_dim)."""
    if mla:
        c = mla[0]
        require(all(m.token_bytes == c.token_bytes for m in mla), f"{model.name}: MLA layers differ")
        return 1, [1] * len(mla), c.kv_lora_rank + c.qk_rope_head_dim, c.kv_dtype, "latent"
    dtype = attn[0].kv_dtype
    require(
        all(a.head_size == a.head_size_v and a.kv_dtype == dtype for a in attn),
        f"{model.name}: TensorRT-LLM's KVCacheManager keeps one head_dim and dtype for K and V",
    )
    head_dim = attn[0].head_size
    require(all(a.head_size == head_dim for a in attn), f"{model.name}: per-layer head_dim needs KVCacheManagerV2")
    return 2, [a.num_kv_heads for a in attn], head_dim, dtype, "kv"


def ssm_cache_dtype(model, options: Options) -> str:
    """The SSM state's element: kv_cache_config.mamba_ssm_cache_dtype (kvviz's mamba_ssm_dtype), else 'auto' as
    _torch/pyexecutor/model_loader.py validate_and_set_mamba_ssm_cache_dtype resolves it (commit 0004396720):
    config_utils.resolve_ssm_cache_dtype, the config's own mamba_ssm_cache_dtype field only (NemotronHConfig
    defaults it to float32: _torch/configs/nemotron_h.py at commit 1e8ee684, transformers' class alike; the
    checkpoint's mamba_ssm_dtype is not honoured), else the model's torch_dtype."""
    if options.mamba_ssm_dtype:
        return SSM[options.mamba_ssm_dtype]
    cfg = model.config
    if getattr(cfg, "ssm_dtype", None) and getattr(cfg, "ssm_dtype_source", "").startswith("mamba_ssm_cache_dtype"):
        return cfg.ssm_dtype
    return model.dtype
