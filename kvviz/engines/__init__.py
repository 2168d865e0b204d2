"""Other engines' KV pools, sized from the same declared caches the vLLM room plans.

A family's `caches(model, options)` says what each layer registers on one tensor-parallel rank
(`kvviz.core.declare`); each engine here turns that into its own pools, the way the engine does:

* `plan_sglang` (kvviz.engines.sglang.plan): SGLang 0.5.23's token-granular pools (one K and one V
  buffer per layer, rows of one token; hybrid-SWA full and SWA pools; MLA latent buffer; Mamba
  state slots), `max_total_num_tokens` and `max_running_requests`;
* `plan_trtllm` (kvviz.engines.trtllm.plan): TensorRT-LLM's paged pools (blocks of
  tokens_per_block = 32 tokens, one window of max_seq_len by default), its max tokens per window;
* `plan_vllm` (kvviz.engines.dispatch): vLLM 0.33's one shared pool, through `kvviz.vllm.plan.plan_model`, in the
  same result shape so the three can be put side by side.

One budget meaning: `kv_budget_bytes` is what the engine hands its KV pools once weights and
activations are taken: SGLang's profiled `rest_memory` before its Mamba pool is carved out
(KVCacheConfigurator._profile_available_bytes), TensorRT-LLM's KV memory after
free_gpu_memory_fraction (KvCacheCreator._cal_max_memory), vLLM's available KV cache memory.

Every function is pure: no engine is imported; the rules are mirrored and cited where they are.
"""

from kvviz.engines.common import (
    ENGINES,
    EngineKnobs,
    EnginePlan,
    EnginePool,
    EngineRow,
    check_budget,
    split_declared,
    state_bytes,
    token_count_lines,
)
from kvviz.engines.dispatch import compare_engines, compare_rows, plan_engine, plan_vllm

__all__ = [
    "ENGINES",
    "EnginePool",
    "EnginePlan",
    "EngineKnobs",
    "EngineRow",
    "plan_engine",
    "plan_vllm",
    "compare_engines",
    "compare_rows",
    "check_budget",
    "split_declared",
    "state_bytes",
    "token_count_lines",
]
