"""`replay(plan, workload, ...)`: a workload run through vLLM 0.33's engine loop, step by step
(vllm/v1/engine/core.py `EngineCore.step` when max_concurrent_batches is 1, `step_with_batch_queue` with
that many batches in flight otherwise: at PP 1 with async scheduling two, step N schedules batch N and
processes batch N - 1's output; under pipeline parallel PP + 1 with it, PP without).

Pipeline parallel (docs/replay.md#pipeline-parallel): vLLM 0.33 groups the whole model's layers once
(`get_global_kv_cache_groups`), each stage's worker sizes its projected groups from its own memory, every worker
keeps the smallest block count (`get_kv_cache_configs`), and the scheduler gets worker 0's config
(`generate_scheduler_kv_cache_config`): every global group, even one with no layer on stage 0, and that count.
So the replay's groups are the plan's and its num_blocks the plan's capacity at the stages' budgets
(`Plan.capacity`, kvviz.core.stages.stage_pool: the one home of that rule)."""

from __future__ import annotations

import gc
from contextlib import contextmanager
from pathlib import Path

from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import short_repr
from kvviz.core.stages import stage_budgets
from kvviz.options import Options
from kvviz.replay.identity import END_BITS
from kvviz.replay.kvcache import KVCacheManager, groups_from_plan
from kvviz.replay.log import RequestLog
from kvviz.replay.loop import run
from kvviz.replay.result import Replay
from kvviz.replay.scheduler import Scheduler
from kvviz.replay.workload import check, read_jsonl

DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192


@contextmanager
def _collector_paused():
    """Python's cyclic garbage collector off for the engine's loop, as it was before after it. The loop makes
    almost no cyclic garbage (a 20,000-request chat trace leaves a few hundred objects to the collector), but
    it keeps millions of small containers alive (block tables, cache-map entries), and the collector's passes
    over them cost that trace 5.6 s of CPU against 4.5 s without them in one paired run (docs/replay.md#speed)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def replay(
    plan,
    workload,
    *,
    budget_bytes: int | tuple[int, ...],
    max_model_len: int | None = None,
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS,
    max_num_seqs: int | None = None,
    enable_prefix_caching: bool | None = None,
    async_scheduling: bool = True,
    max_steps: int | None = None,
    check_invariants: bool = False,
    record_blocks: bool = False,
    fast: bool = True,
) -> Replay:
    """Replay `workload` (WorkloadRequests, dicts, or a JSON Lines path) on `plan`'s pool at `budget_bytes`
    as vLLM 0.33's scheduler runs it (`budget_bytes`: one for every GPU, or with pipeline stages one a stage).
    The blocks and groups come from the plan (`Plan.capacity`; with stages the scheduler's pool, module docstring);
    `max_num_seqs` defaults to min(1024, max_num_batched_tokens) (vLLM on an H200-class GPU); prefix
    caching to on (Mamba hybrids: as the plan's 'align' mode says). A request that can never be admitted
    is reported (`finish_reason` 'never_admitted') instead of blocking the queue forever.
    `record_blocks=True` also keeps, per step, the blocks whose state changed (`Replay.block_log`: what the
    time-lapse map of `kvviz.views.traffic_data` replays); off, the run pays nothing for it. `fast=False`
    switches the fast path off (docs/replay.md#speed: steady decode replayed lazily, quiet steps repeated in one
    jump): every request and every step is then replayed one by one, with the same result (the tests hold both
    equal)."""
    groups = groups_from_plan(plan)
    max_model_len = plan.max_model_len if max_model_len is None else max_model_len
    require(
        isinstance(max_model_len, int) and 0 < max_model_len < 2**END_BITS,
        f"max_model_len={max_model_len!r}: a positive integer below 2**{END_BITS}",
    )
    require(
        isinstance(max_num_batched_tokens, int) and max_num_batched_tokens > 0,
        f"max_num_batched_tokens={max_num_batched_tokens!r}: a positive integer",
    )
    if max_num_seqs is None:
        max_num_seqs = min(1024, max_num_batched_tokens)
    require(isinstance(max_num_seqs, int) and max_num_seqs > 0, f"max_num_seqs={max_num_seqs!r}: a positive integer")
    mode = plan.scheduling.mamba_cache_mode
    has_mamba = any(g.kind == "mamba" for g in groups)
    if enable_prefix_caching is None:
        enable_prefix_caching = mode == "align" if has_mamba else True
    if has_mamba and enable_prefix_caching and mode != "align":
        raise KvvizError(
            "enable_prefix_caching=True: the plan's Mamba groups are not in 'align' mode; plan the "
            "model with prefix caching on"
        )
    if has_mamba and not enable_prefix_caching and mode == "align":
        raise KvvizError(
            "enable_prefix_caching=False: the plan's Mamba groups are in 'align' mode; plan the model "
            "with prefix_caching=False"
        )
    if isinstance(workload, (str, Path)):
        requests = read_jsonl(workload, max_model_len)
    else:
        requests = check(workload, max_model_len)
    cap = plan.capacity(budget_bytes)
    num_blocks = cap.num_blocks
    require(
        num_blocks >= 2,
        f"budget_bytes={short_repr(budget_bytes)}: buys {num_blocks} block(s); the pool needs the null block and "
        "one more",
    )
    # VllmConfig.max_in_flight_tokens, the sliding and chunked groups' admission cap: max_concurrent_batches
    # (PP + 1 with async scheduling, PP without) x max_num_batched_tokens, asked of Options (its one home)
    pp = len(plan.stages) or None
    options = Options(
        pipeline_parallel_size=pp, async_scheduling=async_scheduling, max_num_batched_tokens=max_num_batched_tokens
    )
    in_flight = options.max_in_flight_tokens
    # EngineCore's batch queue holds max_concurrent_batches batches (Options: its one home); the fast path
    # (docs/replay.md#speed) is exact for PP 1's depths only: 2 with async scheduling, 1 (EngineCore.step) without
    depth = options.max_concurrent_batches
    fast = fast and depth == (2 if async_scheduling else 1)
    kv = KVCacheManager(
        groups,
        num_blocks,
        max_model_len=max_model_len,
        max_in_flight_tokens=in_flight,
        enable_caching=enable_prefix_caching,
        mamba_mode=mode,
    )
    mamba_block = next((g.block_size for g in groups if g.kind == "mamba"), None) if mode == "align" else None
    sched = Scheduler(
        kv,
        max_model_len=max_model_len,
        max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs,
        async_scheduling=async_scheduling,
        mamba_block=mamba_block,
        mamba_checkpoints=has_mamba and all(g.checkpoint_blocks > 0 for g in groups if g.kind == "mamba"),
        lazy=fast,
        # AsyncScheduler.__init__: decode_stagger = pipeline_parallel_size (used with the V2 model runner, the one
        # async scheduling runs on under PP: Options.max_concurrent_batches); the plain Scheduler has none
        decode_stagger=(pp or 1) if async_scheduling else 1,
    )
    records = RequestLog(requests)
    sched.log = records
    blocks: list | None = None
    if record_blocks:
        blocks = []
        kv.pool.dirty = set()
    with _collector_paused():
        steps = run(sched, kv, requests, records, depth, max_steps, check_invariants, blocks, fast)
    config = {
        "num_blocks": num_blocks,
        "usable_blocks": num_blocks - 1,
        "num_groups": len(groups),
        "bytes_per_block": cap.bytes_per_block,
        "scheduler_block_size": kv.scheduler_block_size,
        "hash_block_size": kv.scheduler_block_size,
        "kv_budget_bytes_per_gpu": cap.budget_bytes,  # with stages: the binding stage's
        "groups": [
            {
                "group_id": i,
                "name": g.name,
                "kind": g.kind,
                "block_size": g.block_size,
                "sliding_window": g.sliding_window,
                "attention_chunk_size": g.attention_chunk_size,
            }
            for i, g in enumerate(groups)
        ],
    }
    if plan.stages:  # each stage's worker's own memory (stage_budgets: one number is every stage's)
        config["kv_budget_bytes_per_stage"] = list(stage_budgets(plan.stages, budget_bytes))
    inputs = {
        "model": plan.model,
        "kv_budget": cap.budget_bytes,
        "max_model_len": max_model_len,
        "max_num_batched_tokens": max_num_batched_tokens,
        "max_num_seqs": max_num_seqs,
        "enable_prefix_caching": enable_prefix_caching,
        "async_scheduling": async_scheduling,
    }
    return Replay.build(inputs, config, steps, records, kv.stats, tuple(blocks) if blocks is not None else ())
