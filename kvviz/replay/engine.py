"""`replay(plan, workload, ...)`: a workload run through vLLM 0.33's engine loop, step by step
(vllm/v1/engine/core.py `EngineCore.step` with async scheduling off, `step_with_batch_queue` with it
on: two batches in flight, step N schedules batch N and processes batch N - 1's output)."""

from __future__ import annotations

from collections import deque
from pathlib import Path

from kvviz.base.errors import KvvizError, require
from kvviz.replay.identity import Identities
from kvviz.replay.kvcache import KVCacheManager, groups_from_plan
from kvviz.replay.result import STEP_FIELDS, Replay
from kvviz.replay.scheduler import Request, Scheduler
from kvviz.replay.workload import check, read_jsonl

DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192


def _record(r) -> dict:
    return {
        "id": r.id,
        "arrival_step": r.arrival_step,
        "prompt_len": r.prompt_len,
        "output_len": r.output_len,
        "prefix_group": r.prefix_group,
        "prefix_len": r.prefix_len,
        "first_scheduled_step": None,
        "first_token_step": None,
        "finish_step": None,
        "finish_processed_step": None,
        "num_preemptions": 0,
        "prefix_hit_tokens_at_admission": None,
        "admissions": [],
        "preempted_steps": [],
        "num_output_tokens": 0,
        "finish_reason": None,
    }


def replay(
    plan,
    workload,
    *,
    budget_bytes: int,
    max_model_len: int | None = None,
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS,
    max_num_seqs: int | None = None,
    enable_prefix_caching: bool | None = None,
    async_scheduling: bool = True,
    max_steps: int | None = None,
    check_invariants: bool = False,
    record_blocks: bool = False,
) -> Replay:
    """Replay `workload` (WorkloadRequests, dicts, or a JSON Lines path) on `plan`'s pool at `budget_bytes`
    as vLLM 0.33's scheduler runs it. The blocks and groups come from the plan (`Plan.capacity`);
    `max_num_seqs` defaults to min(1024, max_num_batched_tokens) (vLLM on an H200-class GPU); prefix
    caching to on (Mamba hybrids: as the plan's 'align' mode says). A request that can never be admitted
    is reported (`finish_reason` 'never_admitted') instead of blocking the queue forever.
    `record_blocks=True` also keeps, per step, the blocks whose state changed (`Replay.block_log`: what the
    time-lapse map of `kvviz.views.traffic_data` replays); off, the run pays nothing for it."""
    groups = groups_from_plan(plan)
    max_model_len = plan.max_model_len if max_model_len is None else max_model_len
    require(
        isinstance(max_model_len, int) and max_model_len > 0, f"max_model_len={max_model_len!r}: a positive integer"
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
        f"budget_bytes={budget_bytes:,}: buys {num_blocks} block(s); the pool needs the null block and one more",
    )
    in_flight = (2 if async_scheduling else 1) * max_num_batched_tokens
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
    )
    records = [_record(r) for r in requests]
    log: list | None = None
    if record_blocks:
        log = []
        kv.pool.dirty = set()
    steps = _run(sched, kv, requests, records, async_scheduling, max_steps, check_invariants, log)
    config = {
        "num_blocks": num_blocks,
        "usable_blocks": num_blocks - 1,
        "num_groups": len(groups),
        "bytes_per_block": cap.bytes_per_block,
        "scheduler_block_size": kv.scheduler_block_size,
        "hash_block_size": kv.scheduler_block_size,
        "kv_budget_bytes_per_gpu": budget_bytes,
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
    inputs = {
        "model": plan.model,
        "kv_budget": budget_bytes,
        "max_model_len": max_model_len,
        "max_num_batched_tokens": max_num_batched_tokens,
        "max_num_seqs": max_num_seqs,
        "enable_prefix_caching": enable_prefix_caching,
        "async_scheduling": async_scheduling,
    }
    return Replay.build(inputs, config, steps, records, kv.stats, tuple(log) if log is not None else ())


def _run(sched: Scheduler, kv: KVCacheManager, requests, records, async_, max_steps, check=False, log=None) -> dict:
    order = sorted(range(len(requests)), key=lambda i: requests[i].arrival_step)
    rows: list = []  # one tuple per step, in STEP_FIELDS order; columns at the end
    queue: deque = deque()
    shared = Identities()
    nxt = 0
    step = 0
    stats = kv.stats
    pool = kv.pool
    while True:
        while nxt < len(order) and requests[order[nxt]].arrival_step <= step:
            i = order[nxt]
            w = requests[i]
            sched.add_request(Request(w.id, i, w.prompt_len, w.output_len, records[i], *shared.of(w)))
            nxt += 1
        if not sched.has_requests() and not queue:
            if nxt >= len(order):
                break
            head = (step, True, None, None)
            sched_part = (0, 0, 0, 0, [], [], 0, [], None)
            held_after = None
        else:
            batch = processed = None
            if sched.has_requests():
                batch = sched.schedule(step)
                _never_admitted(sched, batch, queue, records, step)
            sched_part, held_after = _scheduled_row(step, batch, kv)
            finished = []
            if not async_:
                processed = batch
            else:
                if batch is not None:
                    queue.appendleft(batch)
                if batch is None or not (len(queue) < 2 and (batch["num_scheduled"] or sched.has_requests())):
                    processed = queue.pop()
            if processed is not None:
                finished = sched.update_from_output(processed, step)
            head = (step, False, None if batch is None else step, None if processed is None else processed["step"])
            sched_part = sched_part[:7] + (finished,) + sched_part[7:]
        rows.append(
            head
            + (len(sched.running), len(sched.waiting))
            + sched_part
            + (
                pool.num_free,
                pool.cached_free,
                held_after,
                kv.held_blocks(),
                stats["queries"],
                stats["hits"],
                stats["preempted_queries"],
                stats["preempted_hits"],
            )
        )
        if log is not None:
            log.append(pool.take_changes())
        if check:
            check_pool(kv)
        step += 1
        if max_steps is not None and step >= max_steps:
            raise KvvizError(f"max_steps={max_steps}: the replay did not finish within it")
    if not rows:
        return {k: [] for k in STEP_FIELDS}
    return {k: list(col) for k, col in zip(STEP_FIELDS, zip(*rows))}


def _scheduled_row(step, batch, kv):
    """The scheduled batch's step fields, num_scheduled_reqs to free_blocks_after_schedule in STEP_FIELDS
    order less `finished` (the caller adds it), and held_blocks_after_schedule."""
    if batch is None:
        return (0, 0, 0, 0, [], [], 0, None), None
    decode = batch["decode_tokens"]
    for r, hits in batch["admitted"]:
        rec = r.record
        if rec["first_scheduled_step"] is None:
            rec["first_scheduled_step"] = step
            rec["prefix_hit_tokens_at_admission"] = hits
        rec["admissions"].append([step, hits])
    for r in batch["preempted"]:
        r.record["num_preemptions"] += 1
        r.record["preempted_steps"].append(step)
    total = batch["tokens_scheduled"]
    return (
        batch["num_scheduled"],
        total,
        total - decode,
        decode,
        [r.rid for r, _ in batch["admitted"] if not r.num_preemptions]
        + [r.rid for r, _ in batch["admitted"] if r.num_preemptions],
        [r.rid for r in batch["preempted"]],
        len(batch["preempted"]),
        kv.pool.num_free,
    ), kv.held_blocks()


def _never_admitted(sched, batch, queue, records, step) -> None:
    """A queue head that fails admission with nothing running and nothing in flight never fits:
    report it and take it out (vLLM would retry it every step forever)."""
    if batch["num_scheduled"] or sched.running or not sched.waiting or any(b["num_scheduled"] for b in queue):
        return
    head = sched.waiting[0]
    if head.num_stale_output_tokens:
        return
    sched.waiting.popleft()
    del sched.requests[head.rid]
    rec = head.record
    rec["finish_reason"] = "never_admitted"
    rec["finish_step"] = rec["finish_processed_step"] = step


def check_pool(kv: KVCacheManager) -> None:
    """The pool's invariants, from the block tables (tests): one owner per block id, reference counts equal
    to the tables holding a block, free + held = num_blocks - 1, the counters equal to a recount."""
    pool = kv.pool
    owner: dict = {}
    refs: dict = {}
    for g, m in enumerate(kv.managers):
        for blocks in m.req_to_blocks.values():
            for b in blocks:
                if b == 0:
                    continue
                if owner.setdefault(b, g) != g:
                    raise AssertionError(f"block {b} held by groups {owner[b]} and {g}")
                refs[b] = refs.get(b, 0) + 1
    free = set(pool.free_ids())
    if len(free) != pool.num_free or 0 in free:
        raise AssertionError("free queue length or null block in the free queue")
    for b, n in refs.items():
        if pool.ref[b] != n or b in free:
            raise AssertionError(f"block {b}: ref {pool.ref[b]} but held {n} times")
    if pool.num_free + len(refs) != pool.num_blocks - 1:
        raise AssertionError(f"free {pool.num_free} + held {len(refs)} != {pool.num_blocks - 1}")
    if kv.held_blocks_slow() != kv.held_blocks() or pool.num_cached_free_slow() != pool.cached_free:
        raise AssertionError("held / cached-free counters differ from a recount")
    for first, members in kv.spec_runs:  # one spec's groups: tables of one shape (kvviz/replay/running.py)
        for m in members[1:]:
            for rid, blocks in m.req_to_blocks.items():
                mine = first.req_to_blocks.get(rid)
                if mine is None or [b == 0 for b in blocks] != [b == 0 for b in mine]:
                    raise AssertionError(f"groups {first.gid} and {m.gid} of one spec: {rid}'s tables differ")
            if m.num_cached_block != first.num_cached_block or m.req_to_blocks.keys() != first.req_to_blocks.keys():
                raise AssertionError(f"groups {first.gid} and {m.gid} of one spec hash or hold differently")
