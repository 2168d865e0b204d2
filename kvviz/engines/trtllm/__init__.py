"""TensorRT-LLM's KV pools (PyTorch backend): its constants (`constants`), window and block rules
(`rules`), the KVCacheManager pools (`plan`), the hybrid Mamba manager V2 (`hybrid`) and DeepSeek V4's
cache manager (`dsv4`)."""

from kvviz.base.lazy import lazy_exports

# name -> the submodule that defines it (imported on first use)
_NAMES = {
    "VERSION": "constants",
    "TOKENS_PER_BLOCK": "constants",
    "FREE_GPU_MEMORY_FRACTION": "constants",
    "MAX_BATCH_SIZE": "constants",
    "MAX_NUM_TOKENS": "constants",
    "NOTES": "constants",
    "blocks_for_budget": "rules",
    "window_layers": "rules",
    "shrink_windows": "rules",
    "window_upper_bound": "rules",
    "temporary_attention_window": "rules",
    "blocks_to_completion": "rules",
    "ssm_cache_dtype": "rules",
    "plan_trtllm": "plan",
    "GPU_PAGE": "hybrid",
    "DUMMY_SLOTS": "hybrid",
    "cache_tier_granularity": "hybrid",
    "grains_for_slots": "hybrid",
    "grains_to_slots": "hybrid",
    "ratio_to_slot_count_list": "hybrid",
    "coalesced_pools": "hybrid",
    "state_buffers": "hybrid",
    "plan_trtllm_hybrid_v2": "hybrid",
    "ALLOWED_TOKENS_PER_BLOCK": "dsv4_pools",
    "WINDOW_SIZE": "dsv4_pools",
    "SPARSE_RATIO": "dsv4_pools",
    "RATIOS": "dsv4_pools",
    "STATE_ELEMENT": "dsv4_pools",
    "INDEXER_K_DTYPE": "dsv4_pools",
    "MAX_SLOT_COUNT": "dsv4_pools",
    "SLIDING": "dsv4_pools",
    "NON_SLIDING": "dsv4_pools",
    "STATES": "dsv4_pools",
    "MANAGER_LAYERS": "dsv4_pools",
    "has_role": "dsv4_pools",
    "DSV4Geometry": "dsv4_pools",
    "LifeCycle": "dsv4_pools",
    "life_cycles": "dsv4_pools",
    "typical_step": "dsv4_pools",
    "stale_blocks": "dsv4_pools",
    "pages_for_batch": "dsv4_pools",
    "floor_pages": "dsv4_pools",
    "pools_cost": "dsv4_pools",
    "slot_counts": "dsv4_pools",
    "geometry": "dsv4",
    "plan_trtllm_dsv4": "dsv4",
}
__all__ = list(_NAMES)
__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
