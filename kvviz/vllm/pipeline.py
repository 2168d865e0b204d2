"""Pipeline parallel as vLLM 0.33 plans it (docs/deploy.md#pipeline-parallel).

* the split: `pp_indices` mirrors distributed/utils.py `get_pp_indices` (and VLLM_PP_LAYER_PARTITION,
  kvviz's `pp_layer_partition`);
* the stages: the whole model's groups (`kv_cache_groups`, as `get_global_kv_cache_groups` forms them once)
  projected on each stage's layers (v1/core/kv_cache_planning.py `_project_kv_cache_groups_to_worker`), a
  `kvviz.core.stages.Stage` each; `Plan.capacity` keeps the minimum of the stages' blocks
  (`get_kv_cache_configs`);
* a stage of state layers only (`state_only_stages`): its worker finds no attention backend, so
  `Platform.update_block_size_for_backend` leaves the block size and the state page as configured; the merged
  specs are grouped again (`get_global_kv_cache_groups`);
* the start-up check: `startup_refusal` runs `_check_enough_kv_cache_memory` on each stage as
  `get_kv_cache_configs` does (the null block held back, every global group counted, an empty one too) and
  words the refusal as vLLM raises it.
The in-flight reserve of window groups grows with PP through `Options.max_concurrent_batches`.
"""

from __future__ import annotations

import dataclasses

from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import short_repr
from kvviz.base.text import format_gib
from kvviz.core.capacity import group_blocks_for_request
from kvviz.core.plan import Plan
from kvviz.core.stages import Stage, stage_budgets
from kvviz.options import Options

PP = "pipeline_parallel_size"
PARTITION = "pp_layer_partition"
# the last sentence of both of _check_enough_kv_cache_memory's errors (v1/core/kv_cache_planning.py)
_SEE = "See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."


def stage_layer_counts(num_hidden_layers: int, pp_size: int, partition: tuple[int, ...] | None = None) -> list[int]:
    """The decoder layers of each of `pp_size` stages, as vLLM 0.33's get_pp_indices (distributed/utils.py) splits
    them: with a partition (VLLM_PP_LAYER_PARTITION) its entries, checked as vLLM checks them (the bad partition
    named in at most a short line); else n // pp layers a stage, the remainder one more layer each on the stages
    before the last, from the second-to-last backwards."""
    if partition is not None:
        parts = list(partition)
        given = short_repr(",".join(map(str, parts[:32])))  # a 5,000-entry partition is not echoed whole
        require(
            len(parts) == pp_size,
            f"{PARTITION}={given}: len(partitions)={len(parts)} does not match "
            f"pp_size={pp_size}. (vLLM 0.33 get_pp_indices)",
        )
        require(
            sum(parts) == num_hidden_layers,
            f"{PARTITION}={given}: sum(partitions)={sum(parts)} does not match "
            f"num_hidden_layers={num_hidden_layers}. (vLLM 0.33 get_pp_indices)",
        )
        return parts
    parts = [num_hidden_layers // pp_size] * pp_size
    remaining = num_hidden_layers % pp_size
    for i in range(2, remaining + 2):
        parts[-i] += 1
    return parts


def pp_indices(num_hidden_layers: int, pp_rank: int, pp_size: int, partition: tuple[int, ...] | None = None):
    """(start_layer, end_layer) of stage `pp_rank`, as vLLM 0.33's get_pp_indices (stage_layer_counts)."""
    parts = stage_layer_counts(num_hidden_layers, pp_size, partition)
    start = sum(parts[:pp_rank])
    return start, start + parts[pp_rank]


def stage_ranges(num_hidden_layers: int, pp_size: int, partition: tuple[int, ...] | None = None, *, model: str = ""):
    """Every stage's (start_layer, end_layer), checked once: at most one stage a decoder layer (vLLM's
    get_pp_indices would give a stage none), the partition as stage_layer_counts checks it. Linear in the stages,
    so a refused PP size is refused before anything is built a stage."""
    require(
        1 <= pp_size <= num_hidden_layers,
        f"{PP}={pp_size}: more stages than {model or 'the model'}'s {num_hidden_layers} decoder layers",
    )
    out, start = [], 0
    for count in stage_layer_counts(num_hidden_layers, pp_size, partition):
        out.append((start, start + count))
        start += count
    return tuple(out)


def _num_hidden_layers(model) -> int:
    n = getattr(model.config, "num_hidden_layers", None)
    if not isinstance(n, int) or n <= 0:
        raise KvvizError(f"{PP}: kvviz does not know {model.name}'s num_hidden_layers to split it into stages")
    return n


def state_only_stages(declared, caches: tuple, rules, model, options: Options) -> tuple[tuple, tuple[str, ...]]:
    """The caches (`caches`: the whole model's, as `resolve_pages` paged them) as the stage workers register them.
    Each worker aligns its own block size after building its layers (v1/executor/multiproc_executor.py
    WorkerProc.__init__ -> platforms/interface.py `Platform.update_block_size_for_backend`): a stage whose layers
    are all recurrent states finds no non-SSM backend (`_find_non_ssm_backends`) and returns before
    `_align_hybrid_block_size`, so its states keep mamba_block_size as configured (the block size, 16 unless
    --block-size; max_model_len without prefix caching) and their own page (no `mamba_page_size_padded`).
    `get_global_kv_cache_groups` merges every worker's specs, then `unify_kv_cache_spec_page_size` pads those
    pages to the largest and their block size makes them a spec of their own. (caches, derivation lines)."""
    from kvviz.core.declare import MambaCache
    from kvviz.vllm.pages import resolve_pages

    states = [isinstance(d, MambaCache) for d in declared]
    if all(states) or not any(states):  # an attention-free or a state-free model: every stage aligns alike
        return caches, ()
    pp, n = options.pipeline_parallel_size or 1, _num_hidden_layers(model)
    local: dict[str, object] = {}
    notes = []
    for rank, (start, end) in enumerate(stage_ranges(n, pp, options.pp_layer_partition, model=model.name)):
        here = [d for d in declared if isinstance(d.layer, int) and start <= d.layer < end]
        if here and all(isinstance(d, MambaCache) for d in here):
            pages = resolve_pages(here, rules)
            local.update({c.name: c for c in pages.caches})
            notes.append(
                f"stage {rank} (layers {start}-{end - 1}) holds state layers only: its worker finds no attention "
                f"backend (Platform.update_block_size_for_backend returns before _align_hybrid_block_size), so its "
                f"states keep mamba_block_size {pages.mamba_block_size} and their own {pages.caches[0].page_bytes:,} B "
                f"page, padded to the largest page when the workers' specs are merged"
            )
    return tuple(local.get(c.name, c) for c in caches), tuple(notes)


def with_stages(plan: Plan, model, options: Options) -> Plan:
    """`plan` (vLLM's, for the whole model) with its pipeline stages: each global group's layers on each stage
    (`_project_kv_cache_groups_to_worker`: a group without a layer there stays, empty) and the stage's bytes per
    block. Refused in one line where vLLM would fail: a stage with no KV-cache layer, a cache layer outside the
    decoder's layers (MTP / draft layers are not placed on stages here)."""
    pp = options.pipeline_parallel_size or 1
    require(plan.planner == "vllm", f"{PP}={pp}: kvviz plans pipeline stages with the vllm planner only")
    n = _num_hidden_layers(model)
    ranges = stage_ranges(n, pp, options.pp_layer_partition, model=model.name)
    groups = plan.layout.groups
    outside = next((c for g in groups for c in g.layers if c.layer is None or not 0 <= c.layer < n), None)
    if outside is not None:
        raise KvvizError(
            f"{PP}={pp}: {outside.name} is not one of {model.name}'s {n} decoder layers (an MTP / draft layer); "
            f"kvviz does not place it on a pipeline stage"
        )
    stages = []
    for rank, (start, end) in enumerate(ranges):
        here = [[c for c in g.layers if start <= c.layer < end] for g in groups]  # type: ignore[operator]
        stage = Stage(rank, start, end, tuple(len(h) for h in here), tuple(sum(c.page_bytes for c in h) for h in here))
        if stage.cache_layers == 0:
            raise KvvizError(
                f"{PP}={pp}: stage {rank} (layers {start}-{end - 1}) registers no KV cache; vLLM 0.33 cannot size "
                f"its pool (_pool_bytes_per_block_from_builder finds no device backing)"
            )
        stages.append(stage)
    note = (
        f"pipeline parallel {pp}: stages of {', '.join(str(s.num_layers) for s in stages)} layers; each plans its "
        f"own layers of every group (bytes per block {', '.join(f'{s.bytes_per_block:,}' for s in stages)} B), "
        f"and every worker keeps the smallest block count (get_kv_cache_configs)"
    )
    return dataclasses.replace(plan, stages=tuple(stages), derivation=plan.derivation + (note,))


def stage_request_bytes(plan: Plan, stage_bytes: int, max_model_len: int) -> int:
    """`_max_memory_usage_bytes_from_groups` on a stage: its bytes per block x the blocks every global group
    holds for one request (an empty projected group keeps the global spec, so it counts too)."""
    s = dataclasses.replace(plan.scheduling, max_model_len=max_model_len)
    return stage_bytes * sum(group_blocks_for_request(plan.layout, s))


def stage_max_model_len(plan: Plan, stride: int, check_bytes: int, upper: int) -> int:
    """`_estimate_max_model_len_from_groups` on one worker: the largest length in [1, upper] whose request memory
    (`stride` x the blocks every global group holds at that length) fits `check_bytes` (its budget less the null
    block), by vLLM's binary search; 0 when not even one token fits."""
    if stage_request_bytes(plan, stride, 1) > check_bytes:
        return 0
    left, right, best = 1, upper, 1
    while left <= right:
        mid = (left + right) // 2
        if stage_request_bytes(plan, stride, mid) <= check_bytes:
            best, left = mid, mid + 1
        else:
            right = mid - 1
    return best


def startup_refusal(plan: Plan, budget_bytes) -> str | None:
    """The error vLLM 0.33 raises at start-up for `budget_bytes` of KV memory on every GPU (or one a stage: each
    worker's own available memory), or None when every stage (every worker) can hold one request of
    max_model_len: `get_kv_cache_configs` checks each worker with the null block held back
    (`_check_enough_kv_cache_memory`, `_estimate_max_model_len_from_groups`)."""
    stages = plan.stages or ()
    strides = [s.bytes_per_block for s in stages] if stages else [plan.layout.block_stride]
    budgets = stage_budgets(stages, budget_bytes) if stages else (budget_bytes,)
    length = plan.max_model_len
    for i, (stride, budget) in enumerate(zip(strides, budgets)):
        check = budget - stride
        where = f"stage {i}: " if stages else ""
        if check <= 0:
            return (
                f"{where}No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
                f"initializing the engine (this flag also controls CPU memory reservation on the CPU backend, despite "
                f"its name). {_SEE}"
            )
        need = stage_request_bytes(plan, stride, length)
        if need <= check:
            continue
        best = stage_max_model_len(plan, stride, check, length)
        estimated = f"Based on the available memory, the estimated maximum model length is {best}. " if best > 0 else ""
        return (
            f"{where}To serve at least one request with the model's max seq len ({length}), ({format_gib(need)} "
            f"GiB KV cache is needed, which is larger than the available KV cache memory ({format_gib(check)} "
            f"GiB). {estimated}Try increasing `gpu_memory_utilization` (which also controls CPU memory on the CPU "
            f"backend) or decreasing `max_model_len` when initializing the engine. {_SEE}"
        )
    return None
