"""Deploying on a GPU: its memory (`gpus`), the weights a checkpoint or config.json says it holds
(`weights`), the KV budget vLLM 0.33 is left with (`budget`), the largest context and batch that fit
(`autofit`), the fit table across GPUs and TP sizes (`fit`) and data parallel / attention DP (`parallel`)."""

from kvviz.base.lazy import lazy_exports

# name -> the submodule that defines it (imported on first use)
_NAMES = {
    "MIB": "gpus",
    "GPU": "gpus",
    "GPUS": "gpus",
    "gpu_spec": "gpus",
    "DTYPE_BYTES": "weights",
    "checkpoint_weight_bytes": "weights",
    "estimate_parameters": "weights",
    "DEFAULT_GPU_MEMORY_UTILIZATION": "budget",
    "DEFAULT_ACTIVATION_BYTES": "budget",
    "ACTIVATION_SOURCE": "budget",
    "format_gib": "budget_record",
    "Term": "budget_record",
    "KVBudget": "budget_record",
    "kv_budget": "budget",
    "AutoFit": "autofit",
    "auto_fit": "autofit",
    "largest_context": "autofit",
    "DEFAULT_CONTEXTS": "fit",
    "DEFAULT_GPUS": "fit",
    "DEFAULT_TP_SIZES": "fit",
    "FitRow": "fit",
    "FitTable": "fit",
    "fit_table": "fit",
    "fit_figure": "fit",
    "DataParallel": "parallel",
    "data_parallel": "parallel",
    "AttentionLayouts": "parallel",
    "attention_layouts": "parallel",
}
__all__ = list(_NAMES)
__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
