"""TensorRT-LLM's defaults kvviz mirrors (llmapi/llm_args.py KvCacheConfig and BaseLlmArgs): tokens
per block, the free-memory fraction, max_batch_size, max_num_tokens; the version read."""

from __future__ import annotations

VERSION = "main (2026, PyTorch backend)"


TOKENS_PER_BLOCK = 32  # llmapi/llm_args.py KvCacheConfig.tokens_per_block


FREE_GPU_MEMORY_FRACTION = 0.9  # KvCacheConfig.free_gpu_memory_fraction (applied before kv_budget_bytes)


MAX_BATCH_SIZE = 2048  # llmapi/llm_args.py BaseLlmArgs.max_batch_size


MAX_NUM_TOKENS = 8192  # llmapi/llm_args.py BaseLlmArgs.max_num_tokens


SSM = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


NOTES = (
    "speculative decoding / MTP layers",
    "host (secondary) pool",
    "beam width > 1 and sink tokens",
    "KVCacheManagerV2 for attention-only models and CppMambaHybridCacheManager (use_kv_cache_manager_v2=False "
    "without TRTLLM_USE_PY_MAMBA)",
)
