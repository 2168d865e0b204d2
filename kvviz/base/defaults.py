"""The defaults kvviz uses, each in one place (imported, never typed again).

vLLM 0.33's own defaults where kvviz plans as vLLM does, and kvviz's choices where vLLM has none
(each says which). SGLang's and TensorRT-LLM's defaults live with the rest of their engine's rules
in kvviz/engines/, since they belong to those engines, not to vLLM.
"""

GIB = 2**30  # 1 GiB; budgets in GiB are converted as int(gib * GIB), like vLLM's int()
BLOCK_SIZE = 256  # tokens per block of DeepSeek V4's main caches (vLLM's default for the model)
VLLM_BLOCK_SIZE = 16  # vLLM 0.33's CacheConfig.DEFAULT_BLOCK_SIZE: tokens per block when none is configured
MAX_NUM_BATCHED_TOKENS = 8192  # vLLM's default chunk of in-flight tokens per step (`vllm serve` on an H200)
GPU_MEMORY_UTILIZATION = 0.92  # vLLM 0.33's CacheConfig.gpu_memory_utilization (config/cache.py Field(default=0.92))
TENSOR_PARALLEL_SIZE = 1  # vLLM's ParallelConfig.tensor_parallel_size: one rank is planned
VERIFY_BLOCKS = 64  # blocks `kvviz verify` allocates when no budget or block count is given
SEED = 0  # seed of kvviz verify's source values when none is given (kvviz's choice)
CONTEXT_TOKENS = 32_768  # request length of the hybrid comparisons when none is given
DPI = 100  # resolution of rendered PNG figures when none is given (kvviz's choice)
