"""Each engine's own KV budget on the --gpu path, from the device and weights kvviz.deploy.budget reads.

A budget given as bytes (`--kv-cache-memory-bytes`, `--budget-gib`) means the same for every
engine: the memory its KV pools get once weights and activations are taken. Only on the --gpu
path do the engines' own fractions and reserves apply, each its own way:

* vLLM 0.33 (kvviz.deploy.budget.kv_budget): ceil(total x gpu_memory_utilization 0.92) - weights -
  activation allowance.
* SGLang 0.5.23: mem_cache/kv_cache_configurator.py _profile_available_bytes: rest = free after
  loading - pre_model_load x (1 - mem_fraction_static), i.e. total x mem_fraction_static -
  weights when nothing else holds the device (pre_model_load = total). mem_fraction_static
  (arg_groups/memory_hook.py _handle_gpu_memory_settings, not post-capture-sized) =
  round((gpu_mem - reserved) / gpu_mem, 3) in MiB, reserved = 512 + max(chunked_prefill_size, 2048)
  x 1.5 + tp x pp / 8 x 1024 + reserve_for_graph_mb (decode max_bs x 2 + prefill: 8 MiB per
  captured size, 1.5 GiB with MLA), at least 10 GiB on a device over 60 GiB.
* TensorRT-LLM: _torch/pyexecutor/_util.py KvCacheCreator._cal_max_memory = (total - peak +
  temporary KV) x free_gpu_memory_fraction 0.9; kvviz takes peak - temporary KV as weights +
  the activation allowance.
"""

from __future__ import annotations

import dataclasses

from kvviz.base.defaults import GIB
from kvviz.base.errors import require
from kvviz.engines.sglang.constants import CHUNKED_PREFILL_SIZE

MIB = 1 << 20
SGLANG_CHUNKED_PREFILL = CHUNKED_PREFILL_SIZE  # memory_hook.py: 8k on an H20 / H200 class device (< 160 GiB)
SGLANG_DECODE_MAX_BS = 256  # memory_hook.py: < 160 GiB and tp < 4 (512 at tp >= 4)


@dataclasses.dataclass(frozen=True)
class EngineBudget:
    """One engine's KV budget on a device: the bytes, and the lines that say how it was made."""

    engine: str
    kv_budget_bytes: int
    lines: tuple[str, ...]
    estimate: bool


def prefill_capture_sizes(max_bs: int) -> list[int]:
    """arg_groups/cuda_graph_hook.py generate_prefill_cuda_graph_batch_sizes."""
    sizes = (
        list(range(4, 33, 4))
        + list(range(48, 257, 16))
        + list(range(288, 513, 32))
        + list(range(576, 1025, 64))
        + list(range(1280, 4097, 256))
        + list(range(4608, max_bs + 1, 512))
    )
    return [s for s in sizes if s <= max_bs]


def sglang_mem_fraction_static(total_bytes: int, *, tp: int = 1, mla: bool = False) -> tuple[float, int]:
    """(mem_fraction_static, reserved MiB) as memory_hook._handle_gpu_memory_settings resolves them
    for a text model, no disaggregation, no post-capture sizing (SGLANG_ENABLE_POST_CAPTURE_KV_SIZING
    off), CUDA graphs on."""
    gpu_mem = total_bytes / MIB
    max_bs = SGLANG_DECODE_MAX_BS if tp < 4 else 512
    graph = max_bs * 2 + (1.5 * 1024 if mla else len(prefill_capture_sizes(SGLANG_CHUNKED_PREFILL)) * 8)
    reserved = 512 + max(SGLANG_CHUNKED_PREFILL, 2048) * 1.5 + tp / 8 * 1024 + graph
    if gpu_mem > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((gpu_mem - reserved) / gpu_mem, 3), int(reserved)


def engine_budgets(model, vllm_budget, engines) -> dict[str, EngineBudget]:
    """Each engine's budget from the terms of kvviz.deploy.budget's KVBudget (total, weights, allowance)."""
    total, weights, act = vllm_budget.total_memory, vllm_budget.weights_bytes, vllm_budget.activation_bytes
    require(total is not None and weights is not None, "engines: a --gpu budget needs the device and the weights")
    est = vllm_budget.estimate
    out = {}
    for e in engines:
        if e == "vllm":
            out[e] = EngineBudget(
                e,
                vllm_budget.available_bytes,
                (
                    f"vllm: ceil(total x {vllm_budget.gpu_memory_utilization}) - weights - allowance = "
                    f"{vllm_budget.available_bytes:,} B",
                ),
                est,
            )
        elif e == "sglang":
            mla = any(type(c).__name__ == "MLACache" for c in model.reader.caches(model, _opts()))
            mfs, reserved = sglang_mem_fraction_static(total, tp=vllm_budget.tensor_parallel_size, mla=mla)
            rest = total / GIB - (total / GIB) * (1 - mfs) - weights / GIB
            require(
                rest > 0,
                f"SGLang: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static={mfs}",
            )
            b = int(rest * GIB)
            out[e] = EngineBudget(
                e,
                b,
                (
                    f"sglang: mem_fraction_static = round(({total / MIB:.0f} - {reserved:,} MiB reserved) / "
                    f"{total / MIB:.0f}, 3) = {mfs}; rest_memory = total x {mfs} - weights = {b:,} B "
                    f"(multimodal adjustment and CUDA context not modelled)",
                ),
                True,
            )
        elif e == "trtllm":
            b = int((total - weights - act) * 0.9)
            require(b > 0, "TensorRT-LLM: no memory left for the KV cache after weights and activations")
            out[e] = EngineBudget(
                e, b, (f"trtllm: (total - weights - allowance) x free_gpu_memory_fraction 0.9 = {b:,} B",), est
            )
    return out


def _opts():
    from kvviz.options import Options

    return Options()


__all__ = ["EngineBudget", "engine_budgets", "sglang_mem_fraction_static", "prefill_capture_sizes"]
