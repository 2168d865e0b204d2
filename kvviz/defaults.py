"""The defaults kvviz uses, each in one place (imported, never typed again)."""

GIB = 2**30  # 1 GiB; budgets in GiB are converted as int(gib * GIB), like vLLM's int()
BLOCK_SIZE = 256  # tokens per block of DeepSeek V4's main caches (vLLM's default for the model)
MAX_NUM_BATCHED_TOKENS = 8192  # vLLM's default chunk of in-flight tokens per step
VERIFY_BLOCKS = 64  # blocks `kvviz verify` allocates when no budget or block count is given
CONTEXT_TOKENS = 32_768  # request length of the hybrid comparisons when none is given
