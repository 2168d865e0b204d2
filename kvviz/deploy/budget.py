"""What a deployment's KV budget is, and the longest request it holds (vLLM 0.33's rules).

Light: imports no torch, transformers or matplotlib at module level.

* `GPUS` (kept in kvviz.deploy.gpus, named here too): accelerators with their total memory in bytes as
  the device reports it; estimates are labelled in every output.
* `kv_budget(model, gpu=...)`: vLLM's `Worker.determine_available_memory`
  (v1/worker/gpu_worker.py) term by term: requested = ceil(total x gpu_memory_utilization)
  (v1/worker/utils.py `request_memory`; default 0.92, config/cache.py), minus the weights on one
  rank, minus an activation / CUDA-graph allowance. vLLM measures the last two; kvviz reads the
  weights from a checkpoint's `model.safetensors.index.json` when it has one (exact) and
  estimates the rest (labelled). `kv_cache_memory_bytes` is vLLM's `--kv-cache-memory-bytes`:
  the budget, exactly, with no terms.
* `largest_context(model, options, budget)`: what `--max-model-len -1` picks
  (v1/core/kv_cache_planning.py `_auto_fit_max_model_len` / `_estimate_max_model_len_from_groups`).
"""

from __future__ import annotations

import math
import os

from kvviz.base.defaults import GIB, GPU_MEMORY_UTILIZATION, TENSOR_PARALLEL_SIZE
from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import instance, short_repr
from kvviz.deploy.budget_record import KVBudget, Term
from kvviz.deploy.gpus import GPU, GPUS, gpu_spec  # noqa: F401 (GPU, gpu_spec: kvviz.deploy.budget's names too)
from kvviz.deploy.stage_weights import StageBudget, parallel_sizes, stage_weight_bytes
from kvviz.deploy.weights import (
    PYTHON_HINT,
    beside_checkpoint,
    checkpoint_weight_bytes,
    estimate_weight_bytes,
    raw_config_of,
)

# vLLM 0.33's CacheConfig.gpu_memory_utilization default (config/cache.py: Field(default=0.92, gt=0, le=1)).
DEFAULT_GPU_MEMORY_UTILIZATION = GPU_MEMORY_UTILIZATION
# kvviz's stated activation / CUDA-graph allowance (an estimate; vLLM has no constant, it measures:
# memory_profiling's non-torch increase + transient peak of the dummy forward, plus
# profile_cudagraph_memory). docs/deploy.md#the-kv-budget-on-a-gpu: non-torch ~0.5-1 GiB, peak activation ~1-3 GiB for
# 7-70B dense at 8192 tokens, CUDA graphs ~0.5-1.5 GiB -> one ~3 GiB default (eager ~2 GiB).
DEFAULT_ACTIVATION_BYTES = 3 * GIB
ACTIVATION_SOURCE = (
    "kvviz's stated default (non-torch + peak activation + CUDA graphs; docs/deploy.md#the-kv-budget-on-a-gpu); "
    "vLLM measures it (memory_profiling, profile_cudagraph_memory)"
)


# What else makes room, in Python; the CLI names its flag (kvviz.cli.main._as_flags).
NO_ROOM_HINT = "(or tensor_parallel_size)"


def _nonneg_int(value, field: str) -> int:
    require(type(value) is int, f"{field}={short_repr(value)}: must be an integer number of bytes")
    require(value >= 0, f"{field}={value!r}: must not be negative")
    return value


def check_budget_args(
    gpu_memory_utilization, weights_bytes=None, checkpoint_dir=None, activation_bytes=None, kv_cache_memory_bytes=None
) -> None:
    """`kv_budget`'s arguments that do not depend on the device, checked before anything is sized (and by
    kvviz.deploy.fit_table once for all its rows): one line naming the argument."""
    util = gpu_memory_utilization
    require(
        isinstance(util, (int, float)) and not isinstance(util, bool) and math.isfinite(util) and 0 < util <= 1,
        f"gpu_memory_utilization={short_repr(util)}: must be in (0, 1] (vLLM's gt=0, le=1)",
    )
    for field, value in (
        ("weights_bytes", weights_bytes),
        ("activation_bytes", activation_bytes),
        ("kv_cache_memory_bytes", kv_cache_memory_bytes),
    ):
        if value is not None:
            _nonneg_int(value, field)
    if checkpoint_dir is not None:
        instance(str, os.PathLike, what="a checkpoint folder (a str or Path)").check(
            checkpoint_dir, field="checkpoint_dir"
        )


def _device(gpu, gpu_memory_gib) -> tuple[str | None, int | None, bool, str]:
    """(name, total bytes, estimate, source) of the device; (None, None, ...) when neither is given."""
    if gpu_memory_gib is not None:
        require(
            isinstance(gpu_memory_gib, (int, float))
            and not isinstance(gpu_memory_gib, bool)
            and math.isfinite(gpu_memory_gib),
            f"gpu_memory_gib={gpu_memory_gib!r}: must be a number",
        )
        require(gpu_memory_gib > 0, f"gpu_memory_gib={gpu_memory_gib!r}: must be positive")
        name = gpu_spec(gpu).name if gpu is not None else None
        return name, int(gpu_memory_gib * GIB), False, "given (gpu_memory_gib)"
    if gpu is not None:
        g = gpu_spec(gpu)
        return g.name, g.total_memory, g.estimate, g.source
    return None, None, False, ""


def kv_budget(
    model,
    *,
    gpu=None,
    gpu_memory_gib=None,
    gpu_memory_utilization=DEFAULT_GPU_MEMORY_UTILIZATION,
    tensor_parallel_size=None,
    weights_bytes=None,
    checkpoint_dir=None,
    activation_bytes=None,
    kv_cache_memory_bytes=None,
    raw_config=None,
    pipeline_parallel_size=None,
    pp_layer_partition=None,
    data_parallel_size=None,
    enable_expert_parallel=False,
) -> KVBudget:
    """The KV cache memory of one rank of `model` on `gpu` (a `GPUS` name) or a device of
    `gpu_memory_gib`, as vLLM 0.33's `Worker.determine_available_memory` computes it:

    * requested = ceil(total x gpu_memory_utilization) (v1/worker/utils.py request_memory; 0.92 is
      CacheConfig's default);
    * weights on one rank: the checkpoint's bytes (`weights_bytes`, the whole model's, or
      `checkpoint_dir`'s model.safetensors.index.json metadata.total_size) / TP, exact; else an
      estimate from the parameters the config implies times the model dtype's bytes, / TP;
    * activation / CUDA-graph allowance: `activation_bytes`, else DEFAULT_ACTIVATION_BYTES
      (an estimate);
    * available = requested - weights - allowance; <= 0 is refused like vLLM's "No available
      memory for the cache blocks".

    `kv_cache_memory_bytes` (vLLM's --kv-cache-memory-bytes): the budget is exactly that, no terms
    (determine_available_memory returns it and ignores gpu_memory_utilization).

    With `pipeline_parallel_size` N (`pp_layer_partition`: VLLM_PP_LAYER_PARTITION), each stage's GPU holds
    its own layers and the modules its model file builds there (kvviz.deploy.stage_weights), and each has its
    own budget (`KVBudget.stages`, `KVBudget.budget`); `data_parallel_size` and `enable_expert_parallel` split
    the routed experts over the DP x TP GPUs (whole experts with expert parallel).

    `model` may be a `kvviz.plan(...)` result: its model, its TP and its pipeline stages (tensor_parallel_size
    and pipeline_parallel_size, when given too, must be the plan's: one rank's pages and weights follow them)."""
    from kvviz.core.plan import Plan
    from kvviz.families import Model

    if isinstance(model, Plan):
        require(model.source is not None, "model: this plan carries no model; make it with kvviz.plan(...)")
        planned_tp = model.tensor_parallel_size
        require(
            tensor_parallel_size is None or tensor_parallel_size == planned_tp,
            f"tensor_parallel_size={tensor_parallel_size!r}: the plan was made with tensor_parallel_size="
            f"{planned_tp}; plan again with kvviz.plan(..., tensor_parallel_size={tensor_parallel_size!r})",
        )
        planned_pp = model.options.pipeline_parallel_size if model.options is not None else None
        require(
            pipeline_parallel_size in (None, planned_pp or 1),
            f"pipeline_parallel_size={pipeline_parallel_size!r}: the plan was made with pipeline_parallel_size="
            f"{planned_pp or 1}; plan again with kvviz.plan(..., pipeline_parallel_size={pipeline_parallel_size!r})",
        )
        if model.options is not None:
            pipeline_parallel_size, pp_layer_partition = planned_pp, model.options.pp_layer_partition
        model, tensor_parallel_size = model.source, planned_tp
    require(isinstance(model, Model), f"model={type(model).__name__}: give a kvviz.load(...) or kvviz.plan(...) result")
    check_budget_args(gpu_memory_utilization, weights_bytes, checkpoint_dir, activation_bytes, kv_cache_memory_bytes)
    tp = TENSOR_PARALLEL_SIZE if tensor_parallel_size is None else tensor_parallel_size
    require(type(tp) is int and tp >= 1, f"tensor_parallel_size={tp!r}: must be a positive integer")
    parallel = parallel_sizes(pipeline_parallel_size, pp_layer_partition, data_parallel_size, enable_expert_parallel)
    name, total, total_estimate, total_source = _device(gpu, gpu_memory_gib)
    if kv_cache_memory_bytes is not None:
        pool = _nonneg_int(kv_cache_memory_bytes, "kv_cache_memory_bytes")
        require(pool > 0, "kv_cache_memory_bytes=0: must be positive")
        if total is not None:
            require(
                pool <= total,
                f"kv_cache_memory_bytes={pool:,}: larger than the device's {total:,} B "
                f"({total / GIB:.2f} GiB{', an estimate' if total_estimate else ''})",
            )
        term = Term(
            "kv_cache_memory_bytes",
            "--kv-cache-memory-bytes",
            pool,
            False,
            "given; vLLM returns it exactly (gpu_worker.determine_available_memory), ignoring "
            "gpu_memory_utilization and profiling",
        )
        return KVBudget(model.name, name, total, None, tp, (term,), pool, exact_pool=True)
    require(total is not None, f"gpu: give a GPU name ({', '.join(GPUS)}), gpu_memory_gib or kv_cache_memory_bytes")
    util = gpu_memory_utilization
    requested = math.ceil(total * util)
    terms = [
        Term("total", f"device total memory{' (' + name + ')' if name else ''}", total, total_estimate, total_source),
        Term(
            "requested",
            f"requested = ceil(total x gpu_memory_utilization {util})",
            requested,
            total_estimate,
            "v1/worker/utils.py request_memory (default 0.92: config/cache.py CacheConfig)",
        ),
    ]
    stages: tuple = ()
    if parallel is None:
        terms.append(weights_term(model, tp, weights_bytes, checkpoint_dir, raw_config, total))
    else:
        beside = beside_checkpoint(model) if checkpoint_dir is None and raw_config is None else checkpoint_dir
        label, weights, source, origin, stages = stage_weight_bytes(
            model, tp, parallel, weights_bytes, beside, raw_config
        )
        terms.append(Term("weights", label, weights, True, source, origin))
    if activation_bytes is None:
        terms.append(
            Term("activation", "activation / CUDA-graph allowance", DEFAULT_ACTIVATION_BYTES, True, ACTIVATION_SOURCE)
        )
    else:
        terms.append(
            Term(
                "activation",
                "activation / CUDA-graph allowance",
                _nonneg_int(activation_bytes, "activation_bytes"),
                False,
                "given (activation_bytes)",
            )
        )
    act = terms[3].value
    est = " (estimated terms)" if any(t.estimate for t in terms[2:]) else ""
    budgets = []
    for where, weights in [(f" on {s.label}", w) for s, w in stages] or [("", terms[2].value)]:
        available = requested - weights - act
        if available <= 0:
            raise KvvizError(
                f"no memory left for the KV cache{where}: gpu_memory_utilization {util} of {total / GIB:.2f} GiB "
                f"= {requested / GIB:.2f} GiB - weights {weights / GIB:.2f} GiB (TP {tp}) - allowance "
                f"{act / GIB:.2f} GiB = {available / GIB:.2f} GiB{est}; vLLM: 'No available memory for the "
                f"cache blocks. Try increasing `gpu_memory_utilization`' {NO_ROOM_HINT}"
            )
        budgets.append(available)
    per_stage = (
        tuple(StageBudget(s, w, a) for (s, w), a in zip(stages, budgets)) if parallel and parallel[0] > 1 else ()
    )
    return KVBudget(model.name, name, total, util, tp, tuple(terms), min(budgets), stages=per_stage)


def weights_term(model, tp, weights_bytes, checkpoint_dir, raw_config, total) -> Term:
    """The weights term of one TP rank: given bytes, a checkpoint's safetensors headers, or the estimate
    from the config (kvviz.deploy.weights), each saying how it was found."""
    label = f"weights on one rank (TP {tp})"
    checkpoint_dir = beside_checkpoint(model) if checkpoint_dir is None and raw_config is None else checkpoint_dir
    if weights_bytes is not None:
        w = _nonneg_int(weights_bytes, "weights_bytes")
        given = f"given (weights_bytes {w:,} B for the whole model)"
        return Term("weights", label, -(-w // tp), False, f"{given} / TP", given)
    if checkpoint_dir is not None:
        found = checkpoint_weight_bytes(checkpoint_dir)
        if found is not None:
            w, how = found
            if total is not None:
                require(-(-w // tp) < 64 * total, f"checkpoint_dir: {how} = {w:,} B is not plausible")
            return Term(
                "weights",
                label,
                -(-w // tp),
                False,
                f"{how} = {w:,} B / TP (sharded linears and vocab-parallel embeddings; replicated norms ignored)",
                f"{how} = {w:,} B",
            )
    raw, where = raw_config_of(model, checkpoint_dir, raw_config)
    if raw is None:
        raise KvvizError(f"weights_bytes: no config.json to estimate {model.name}'s weights from; {PYTHON_HINT}")
    w, how = estimate_weight_bytes(model, raw, hint=PYTHON_HINT, tp=tp)
    shapes = f"one TP rank's shapes (kvviz.deploy.params: sharded layers / TP {tp}, norms and routers whole): "
    return Term(
        "weights", label, w, True, f"estimate from {where}: {shapes if tp > 1 else ''}{how}", f"estimate from {where}"
    )
