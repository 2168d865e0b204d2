"""SGLang 0.5.23's KV pools: its constants (`constants`), the rules its memory pools follow (`rules`),
the per-layer pools (`plan`), the unified hybrid pool (`unified`) and DeepSeek V4's own pools (`dsv4`)."""

from kvviz.base.lazy import lazy_exports

# name -> the submodule that defines it (imported on first use)
_NAMES = {
    "VERSION": "constants",
    "GB": "constants",
    "SWA_FULL_TOKENS_RATIO": "constants",
    "MAMBA_FULL_MEMORY_RATIO": "constants",
    "DEFAULT_PAGE_SIZE": "constants",
    "CHUNKED_PREFILL_SIZE": "constants",
    "MAX_PREFILL_TOKENS": "constants",
    "MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO": "constants",
    "HYBRID_SWA_ARCHS": "constants",
    "DISABLE_HYBRID_SWA_ARCHS": "constants",
    "MAMBA_EXTRA_BUFFER_ARCHS": "constants",
    "KV_SHARING_ARCHS": "constants",
    "is_hybrid_swa": "rules",
    "mamba_ratio": "rules",
    "ssm_dtype": "rules",
    "mamba_per_req": "rules",
    "resolve_max_num_reqs": "rules",
    "requests_at_full_length": "rules",
    "every_layer": "rules",
    "plan_sglang": "plan",
    "ENTRY_ALIGN_BYTES": "unified",
    "entry_bytes": "unified",
    "max_unified_full_tokens": "unified",
    "plan_sglang_unified": "unified",
    "PAGE_SIZE": "dsv4",
    "MAX_RUNNING_REQUESTS": "dsv4",
    "STATE_DTYPE_BYTES": "dsv4",
    "RING_SIZE": "dsv4",
    "v4_page_bytes": "dsv4",
    "paged_kv_bytes_per_token": "dsv4",
    "indexer_bytes_per_token": "dsv4",
    "DSV4Sizing": "dsv4",
    "sizing": "dsv4",
    "DSV4PoolSizes": "dsv4",
    "pool_sizes": "dsv4",
    "plan_sglang_dsv4": "dsv4",
}
__all__ = list(_NAMES)
__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
