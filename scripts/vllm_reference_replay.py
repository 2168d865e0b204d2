"""vLLM 0.33's own scheduler replaying a workload on CPU: reference cases for `kvviz replay` (issue 28).

Runs ONLY in the throwaway venv of ../shared/tools/README.md (`/root/vllm-ref/bin/python`: vllm==0.33.0,
torch CPU); kvviz never imports it, and it imports nothing of kvviz. For each case of a spec file
(`{"cases": [{"case", "inputs", "workload", "demo_workload"?}], "demo_workloads"?}`, the shape of
tests/data/vllm-0.33/replay/scheduler-cases.json, whose cases can be fed back in as they are), in a
fresh process each:

1. vLLM's own config and KV cache specs for `CONFIGS/<inputs.model>/config.json`
   (scripts/vllm_reference_plans.py `vllm_model`: `EngineArgs.create_engine_config` on an H200-like
   platform (`_h200_backends`), the model's real `__init__` on the meta device, each layer's own
   `get_kv_cache_spec`), with the case's max_model_len, max_num_batched_tokens, max_num_seqs,
   kv_cache_dtype, prefix caching and async scheduling;
2. the `KVCacheConfig` as `EngineCore._initialize_kv_caches` makes it: `get_global_kv_cache_groups`,
   `get_kv_cache_configs` at the case's budget, `generate_scheduler_kv_cache_config`,
   `update_kv_cache_capacity`, `resolve_kv_cache_block_sizes`, `resolve_cache_hit_alignment_tokens`;
3. `SchedulerConfig.get_scheduler_cls()(vllm_config, kv_cache_config, StructuredOutputManager(vllm_config),
   block_size, hash_block_size=..., include_finished_set=False, log_stats=True)` and `Request`s with the
   block hasher EngineCore builds (`init_none_hash`, `get_request_block_hasher`), driven as EngineCore drives
   it: `batch_queue_size = vllm_config.max_concurrent_batches`, `EngineCore.step_with_batch_queue` when that is
   over 1 (async scheduling or not), `EngineCore.step` otherwise (EngineCore.__init__'s `step_fn`). The one
   stand-in is the model: each batch's `ModelRunnerOutput` gives one sampled token to every scheduled
   request whose prompt is complete (`not request.is_prefill_chunk` after `schedule()`, the runner's rule),
   none to a partial prefill.

Pipeline parallel (`inputs.pp` > 1, `inputs.kv_budget` one number for every stage or a list, one a stage): each
stage's worker registers its own layers' specs (`_pp_model`, scripts/vllm_reference_deploy.py `_stage_specs`, with
the case's EngineArgs), step 2 runs on all of them and the scheduler gets worker 0's config.

Tokens: the requests of one prefix group share their first prefix_len prompt tokens; a request with hash
chains (`hash_ids`, `hash_block_tokens`) has, chunk by chunk, `hash_block_tokens` tokens of each id (one
token value per id), cut at prompt_len; every other prompt token and every output token is unique to its
request (only token equality reaches vLLM's hashes, and they chain: a chunk's tokens after different ids
hash differently).
Set by hand: max_num_seqs defaults to min(1024, max_num_batched_tokens), what EngineArgs picks on an
H200 (arg_utils.get_batch_defaults, >= 70 GiB, OPENAI_API_SERVER) and cannot see on this GPU-less platform.

usage: VENV/bin/python scripts/vllm_reference_replay.py --configs DIR --out OUT.json SPEC.json [--only SUBSTR]
           [--timing RUNS]

--timing RUNS: the timing mode (benchmarks/bench_replay.py): for each case, RUNS fresh schedulers stepped
through the workload by the same loop with its recording switched off (no per-step rows, no per-request
records, no block counts: `_drive`), each run timed alone; OUT.json then holds only each case's timing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from collections import deque
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vllm_reference_plans import _h200_backends, _kind, vllm_model  # noqa: E402

DEFAULT_MNBT = 8192
# token ids: a prefix group's shared prompt, a request's own prompt tail, its outputs and a hash chain's
# chunks never collide
GROUP_BASE, OWN_BASE, OUT_BASE, HASH_BASE = 10_000, 100_000, 200_000, 1_000_000


def _tokens(w: dict, index: int, groups: dict) -> list[int]:
    if w.get("hash_ids") is not None:  # chunk by chunk each id's own tokens, cut at prompt_len, then the request's
        chain = [HASH_BASE + h for h in w["hash_ids"] for _ in range(w["hash_block_tokens"])][: w["prompt_len"]]
        return chain + [OWN_BASE + index] * (w["prompt_len"] - len(chain))
    shared = w["prefix_len"] if w.get("prefix_group") is not None else 0
    if not shared:
        return [OWN_BASE + index] * w["prompt_len"]
    g = groups.setdefault(w["prefix_group"], len(groups))
    return [GROUP_BASE + g] * shared + [OWN_BASE + index] * (w["prompt_len"] - shared)


def _engine_kwargs(inp: dict) -> dict:
    mnbt = inp.get("max_num_batched_tokens") or DEFAULT_MNBT
    kw = {
        "max_num_batched_tokens": mnbt,
        "max_num_seqs": inp.get("max_num_seqs") or min(1024, mnbt),
    }
    if inp.get("kv_cache_dtype", "auto") != "auto":
        kw["kv_cache_dtype"] = inp["kv_cache_dtype"]
    if inp.get("prefix_caching") == "off":
        kw["enable_prefix_caching"] = False
    if inp.get("async_scheduling") == "off":
        kw["async_scheduling"] = False
    if inp.get("pp", 1) != 1:  # the stages' workers are built one by one (_pp_model)
        kw["pipeline_parallel_size"] = inp["pp"]
    if inp.get("tp", 1) != 1:
        raise ValueError("tp != 1: this script builds one rank in one process (the shared case at TP 2 was not)")
    return kw


def _plan(vllm_config, workers: list, budgets: list):
    """EngineCore._initialize_kv_caches: each worker's spec dict (one at PP 1, one a stage under pipeline
    parallel) and its available memory; the scheduler gets worker 0's config (generate_scheduler_kv_cache_config)."""
    from vllm.distributed.kv_transfer.kv_connector.utils import get_current_attn_backends
    from vllm.v1.attention.backends.utils import get_supported_kv_cache_layouts, resolve_kv_cache_layout
    from vllm.v1.core.kv_cache_planning import get_global_kv_cache_groups, get_kv_cache_configs
    from vllm.v1.core.kv_cache_utils import (
        generate_scheduler_kv_cache_config,
        resolve_cache_hit_alignment_tokens,
        resolve_kv_cache_block_sizes,
        update_kv_cache_capacity,
    )
    from vllm.v1.core.single_type_kv_cache_manager import register_all_kvcache_specs

    register_all_kvcache_specs(vllm_config)
    supported = [[x.name for x in get_supported_kv_cache_layouts(get_current_attn_backends(vllm_config))]]
    layout = resolve_kv_cache_layout(vllm_config, supported, list(workers[0].values()))
    groups = get_global_kv_cache_groups(vllm_config, workers)
    vllm_config.adjust_dcp_kv_cache_interleave_size(groups)
    vllm_config.cache_config.kv_cache_layout = layout.name
    configs = get_kv_cache_configs(vllm_config, workers, budgets, groups)
    for c in configs:
        c.kv_cache_layout = vllm_config.cache_config.kv_cache_layout
    sched_cfg = generate_scheduler_kv_cache_config(configs)
    cc = vllm_config.cache_config
    cc.num_gpu_blocks = sched_cfg.num_blocks
    kv_groups = sched_cfg.kv_cache_groups
    participating = [g.kv_cache_spec.block_size for g in kv_groups if g.kv_cache_spec.prefix_cacheable]
    cc.block_size = min(participating or [g.kv_cache_spec.block_size for g in kv_groups])
    update_kv_cache_capacity(vllm_config, sched_cfg)
    vllm_config.validate_block_size()
    block_size, hash_block_size = resolve_kv_cache_block_sizes(sched_cfg, vllm_config)
    align = resolve_cache_hit_alignment_tokens(sched_cfg, vllm_config, block_size, hash_block_size)
    for c in (*configs, sched_cfg):
        c.hash_block_size = hash_block_size
        c.cache_hit_alignment_tokens = align
    return sched_cfg, configs[0], block_size, hash_block_size, layout.name


def _config_record(budget, sched_cfg, rank_cfg, block_size, hash_block_size, layout, vllm_config, specs) -> dict:
    groups = []
    for i, g in enumerate(sched_cfg.kv_cache_groups):
        s = g.kv_cache_spec
        pages = [specs[n].page_size_bytes for n in g.layer_names]
        rec = {
            "group_id": i,
            "num_layers": len(g.layer_names),
            "spec_class": type(s).__name__,
            "kind": _kind(s),
            "block_size": s.block_size,
            "page_size_bytes": sorted(set(pages)),
            "group_page_bytes": sum(pages),
            "prefix_cacheable": bool(s.prefix_cacheable),
            "first_layer": g.layer_names[0],
            "last_layer": g.layer_names[-1],
        }
        if getattr(s, "sliding_window", None):
            rec["sliding_window"] = s.sliding_window
        if hasattr(s, "mamba_cache_mode"):
            rec["mamba_cache_mode"] = s.mamba_cache_mode
            rec["num_prefill_checkpoint_blocks"] = s.num_prefill_checkpoint_blocks
        groups.append(rec)
    return {
        "kv_budget_bytes_per_gpu": budget,
        "num_blocks": sched_cfg.num_blocks,
        "usable_blocks": sched_cfg.num_blocks - 1,
        "null_block": "block id 0 (BlockPool.null_block) is never handed out",
        "num_groups": len(groups),
        "layout": layout,
        "scheduler_block_size": block_size,
        "hash_block_size": hash_block_size,
        "cache_config.block_size": vllm_config.cache_config.block_size,
        "per_rank_num_blocks": [rank_cfg.num_blocks],
        "num_tensors(rank0)": len(rank_cfg.kv_cache_tensors),
        "tensor_bytes(rank0)": sum(t.size for t in rank_cfg.kv_cache_tensors),
        "groups": groups,
    }


def _settings(m, vllm_config, inp) -> dict:
    cc, sc, mc = vllm_config.cache_config, vllm_config.scheduler_config, vllm_config.model_config
    # the config's own layer_types where it has them, else the kind of each layer's spec
    kinds = list(getattr(mc.hf_text_config, "layer_types", None) or [_kind(s) for s in m.specs.values()])
    return {
        "hf_architecture": m.arch,
        "model_type": m.raw.get("model_type"),
        "layer_kinds": kinds,
        "dtype": str(mc.dtype).replace("torch.", ""),
        "cache_dtype": cc.cache_dtype,
        "max_model_len": mc.max_model_len,
        "derived_max_model_len": m.derived,
        "enable_prefix_caching": cc.enable_prefix_caching,
        "prefix_caching_hash_algo": cc.prefix_caching_hash_algo,
        "mamba_cache_mode": cc.mamba_cache_mode,
        "cache_config.sliding_window": cc.sliding_window,
        "block_size": cc.block_size,
        "disable_hybrid_kv_cache_manager": sc.disable_hybrid_kv_cache_manager,
        "scheduler_cls": sc.get_scheduler_cls().__name__,
        "async_scheduling": sc.async_scheduling,
        "max_concurrent_batches": vllm_config.max_concurrent_batches,
        "max_in_flight_tokens": vllm_config.max_in_flight_tokens,
        "max_num_batched_tokens": sc.max_num_batched_tokens,
        "max_num_seqs": sc.max_num_seqs,
        "enable_chunked_prefill": sc.enable_chunked_prefill,
        "long_prefill_token_threshold": sc.long_prefill_token_threshold,
        "scheduler_reserve_full_isl": sc.scheduler_reserve_full_isl,
        "watermark": sc.watermark,
        "policy": sc.policy,
        "prefill_schedule_interval": sc.prefill_schedule_interval,
        "use_v2_model_runner": vllm_config.use_v2_model_runner,
        "num_lookahead_tokens": vllm_config.num_lookahead_tokens,
        "num_hash_lookahead_tokens": vllm_config.num_hash_lookahead_tokens,
        "tensor_parallel_size": vllm_config.parallel_config.tensor_parallel_size,
        "pipeline_parallel_size": vllm_config.parallel_config.pipeline_parallel_size,
        "attention_backends": sorted(m.backends),
    }


STEP_KEYS = (
    "step",
    "idle",
    "scheduled_batch",
    "processed_batch",
    "num_running",
    "num_waiting",
    "num_scheduled_reqs",
    "tokens_scheduled",
    "prefill_tokens",
    "decode_tokens",
    "admitted",
    "preempted",
    "preemptions",
    "finished",
    "free_blocks_after_schedule",
    "free_blocks",
    "cached_free_blocks",
    "held_blocks_after_schedule",
    "held_blocks",
    "pc_queries",
    "pc_hits",
    "pc_preempted_queries",
    "pc_preempted_hits",
)


@contextlib.contextmanager
def _pp_model(folder: Path, max_model_len: int, **engine_kwargs):
    """`vllm_model`'s namespace under pipeline parallel (inputs.pp > 1): each stage's worker registers its own
    layers' specs (scripts/vllm_reference_deploy.py `_stage_specs`, as scripts/vllm_reference_pp_replay.py builds
    them) with this case's EngineArgs; `workers` one spec dict a stage, `specs` all of them, `vllm_config` the last
    stage's (as the PP replay reference takes it)."""
    import types

    from vllm.config import set_current_vllm_config
    from vllm.model_executor.model_loader.utils import get_model_architecture
    from vllm_reference_deploy import _engine_config, _stage_specs

    pp = engine_kwargs.pop("pipeline_parallel_size")
    derived = _engine_config(folder, {})[1]  # max_model_len from the config alone (vllm_model's `derived`)
    o = {"pp": pp, "engine": dict(engine_kwargs, max_model_len=max_model_len)}
    stages = [_stage_specs(folder, o, stage) for stage in range(pp)]
    vc = stages[-1][3]
    with set_current_vllm_config(vc):
        _, arch = get_model_architecture(vc.model_config)
        yield types.SimpleNamespace(
            raw=json.loads((folder / "config.json").read_text()),
            derived=derived,
            vllm_config=vc,
            arch=arch,
            workers=[s[0] for s in stages],
            specs={k: v for s in stages for k, v in s[0].items()},
            backends={b for s in stages for b in s[2]},
        )


def _scheduler(vc, sched_cfg, block_size: int, hash_block_size: int):
    """The scheduler EngineCore builds (`SchedulerConfig.get_scheduler_cls()`), fresh: its own KV cache manager
    and block pool (`EngineCore._initialize_effective_attention_block_size` applied)."""
    from vllm.v1.engine.core import EngineCore
    from vllm.v1.structured_output import StructuredOutputManager

    sched = vc.scheduler_config.get_scheduler_cls()(
        vllm_config=vc,
        kv_cache_config=sched_cfg,
        structured_output_manager=StructuredOutputManager(vc),
        include_finished_set=False,
        log_stats=True,
        block_size=block_size,
        hash_block_size=hash_block_size,
    )
    EngineCore._initialize_effective_attention_block_size(type("E", (), {"vllm_config": vc, "scheduler": sched}))
    return sched


def _request(w: dict, tokens: list[int], step: int, hasher):
    """A workload line as vLLM's `Request`, added at `step` (max_tokens = output_len, EOS ignored)."""
    from vllm.sampling_params import SamplingParams
    from vllm.v1.request import Request

    return Request(
        request_id=w["id"],
        prompt_token_ids=tokens,
        sampling_params=SamplingParams(max_tokens=w["output_len"], ignore_eos=True),
        pooling_params=None,
        arrival_time=float(step),
        block_hasher=hasher,
    )


def _drive(sched, workload: list, tokens: list, hasher, queue_size: int, max_steps: int) -> int:
    """The loop of `replay_case` with its recording switched off (the timing mode): requests added at their
    arrival step, `schedule()`, the stand-in model's output, `update_from_output()`, as EngineCore.step /
    step_with_batch_queue drive them; nothing recorded. Returns the number of steps."""
    from vllm.v1.outputs import ModelRunnerOutput

    order = sorted(range(len(workload)), key=lambda i: workload[i]["arrival_step"])
    index = {w["id"]: i for i, w in enumerate(workload)}
    queue: deque = deque()
    nxt, step = 0, 0
    requests = sched.requests
    while True:
        while nxt < len(order) and workload[order[nxt]]["arrival_step"] <= step:
            i = order[nxt]
            w = workload[i]
            sched.add_request(_request(w, tokens[i], step, hasher))
            nxt += 1
        if sched.has_requests() or queue:
            so = None
            if sched.has_requests():
                so = sched.schedule()
                entry = (so, {r for r in so.num_scheduled_tokens if not requests[r].is_prefill_chunk})
            processed = None
            if queue_size == 1:  # EngineCore.step
                processed = entry if so is not None else None
            else:
                if so is not None:
                    queue.appendleft(entry)
                if so is None or not (
                    len(queue) < queue_size and (so.total_num_scheduled_tokens > 0 or sched.has_requests())
                ):
                    processed = queue.pop()
            if processed is not None:
                pso, sampled = processed
                ids = list(pso.num_scheduled_tokens)
                out = ModelRunnerOutput(
                    req_ids=ids,
                    req_id_to_index={r: k for k, r in enumerate(ids)},
                    sampled_token_ids=[[OUT_BASE + index[r]] if r in sampled else [] for r in ids],
                )
                sched.update_from_output(pso, out)
        elif nxt >= len(order):
            break
        step += 1
        if step >= max_steps:
            raise RuntimeError(f"max_steps={max_steps}: the replay did not finish")
    return step


def _timing(vc, sched_cfg, block_size, hash_block_size, hasher, workload: list, inp: dict, runs: int) -> dict:
    """The timing mode: `runs` fresh schedulers driven through the workload by `_drive` (no per-step or
    per-request records), each timed alone (wall and CPU time); the prompts' token lists are made before the
    clock starts."""
    groups: dict = {}
    tokens = [_tokens(w, i, groups) for i, w in enumerate(workload)]
    times, cpu, steps = [], [], None
    for _ in range(runs):
        sched = _scheduler(vc, sched_cfg, block_size, hash_block_size)
        t0, c0 = time.perf_counter(), time.process_time()
        steps = _drive(
            sched,
            workload,
            tokens,
            hasher,
            vc.max_concurrent_batches,
            inp.get("max_steps", 200_000),
        )
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    times.sort()
    return {
        "recording": "off",
        "steps": steps,
        "runs_s": [round(t, 4) for t in times],
        "runs_cpu_s": sorted(round(t, 4) for t in cpu),  # the process's own CPU time: steadier on a shared machine
        "steps_per_s_min": round(steps / times[-1], 1),  # the slowest run
        "steps_per_s_max": round(steps / times[0], 1),  # the fastest run
        "steps_per_s_median": round(steps / times[len(times) // 2], 1),
    }


def replay_case(case: dict, configs: Path, timing_runs: int = 0) -> dict:
    """One case: vLLM's config, plan and scheduler, the workload stepped through it, every field recorded.
    With `timing_runs`, the timing mode instead: {"case", "inputs", "timing"} of `_timing`."""
    from vllm.utils.hashing import get_hash_fn_by_name
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
    from vllm.v1.outputs import ModelRunnerOutput

    inp = case["inputs"]
    t_setup = time.perf_counter()
    pp = inp.get("pp", 1)
    model = (vllm_model if pp == 1 else _pp_model)(configs / inp["model"], inp["max_model_len"], **_engine_kwargs(inp))
    with model as m:
        vc = m.vllm_config
        budgets = inp["kv_budget"] if isinstance(inp["kv_budget"], list) else [inp["kv_budget"]] * pp
        sched_cfg, rank_cfg, block_size, hash_block_size, layout = _plan(
            vc, m.workers if pp > 1 else [m.specs], budgets
        )
        kv_record = _config_record(
            inp["kv_budget"], sched_cfg, rank_cfg, block_size, hash_block_size, layout, vc, m.specs
        )
        sched = _scheduler(vc, sched_cfg, block_size, hash_block_size)
        hasher = None
        if vc.cache_config.enable_prefix_caching:
            fn = get_hash_fn_by_name(vc.cache_config.prefix_caching_hash_algo)
            init_none_hash(fn)
            hasher = get_request_block_hasher(hash_block_size, fn, vc.num_hash_lookahead_tokens)
        if timing_runs:
            timing = _timing(vc, sched_cfg, block_size, hash_block_size, hasher, case["workload"], inp, timing_runs)
            return {"case": case["case"], "inputs": inp, "timing": timing}
        settings = _settings(m, vc, inp)
        kvm = sched.kv_cache_manager
        settings["kv_cache_size_tokens(update_kv_cache_capacity)"] = vc.cache_config.kv_cache_size_tokens
        settings["kv_cache_max_concurrency(update_kv_cache_capacity)"] = vc.cache_config.kv_cache_max_concurrency
        setup_s = time.perf_counter() - t_setup

        workload = case["workload"]
        index = {w["id"]: i for i, w in enumerate(workload)}
        records = {
            w["id"]: dict(
                w,
                first_scheduled_step=None,
                first_token_step=None,
                finish_step=None,
                finish_processed_step=None,
                num_preemptions=0,
                prefix_hit_tokens_at_admission=None,
                admissions=[],
                preempted_steps=[],
                num_output_tokens=0,
                finish_reason=None,
            )
            for w in workload
        }
        prefix_groups: dict = {}
        order = sorted(range(len(workload)), key=lambda i: workload[i]["arrival_step"])
        preempt_log: list = []
        real_preempt = sched._preempt_request

        def preempt(request, *a, **k):  # observed, not changed: the order of this step's preemptions
            preempt_log.append(request.request_id)
            return real_preempt(request, *a, **k)

        sched._preempt_request = preempt
        pc = {"queries": 0, "hits": 0, "preempted_queries": 0, "preempted_hits": 0}
        blocks = kvm.block_pool.blocks
        managers = kvm.coordinator.single_type_managers

        def held():
            return [
                len({b.block_id for bl in mgr.req_to_blocks.values() for b in bl if not b.is_null}) for mgr in managers
            ]

        def cached_free():
            return sum(1 for b in blocks if b.ref_cnt == 0 and b.block_hash is not None and not b.is_null)

        rows = {k: [] for k in STEP_KEYS}
        queue: deque = deque()  # (scheduler_output, sampled req ids, step), newest left
        nxt, step, t0 = 0, 0, time.perf_counter()
        batch_queue_size = vc.max_concurrent_batches
        max_steps = inp.get("max_steps", 200_000)

        def process(entry):
            so, sampled, batch_step = entry
            ids = list(so.num_scheduled_tokens)
            out = ModelRunnerOutput(
                req_ids=ids,
                req_id_to_index={r: i for i, r in enumerate(ids)},
                sampled_token_ids=[[OUT_BASE + index[r]] if r in sampled else [] for r in ids],
            )
            finished = []
            for eco in sched.update_from_output(so, out).values():
                for o in eco.outputs:
                    rec = records[o.request_id]
                    if o.new_token_ids:
                        if rec["num_output_tokens"] == 0:
                            rec["first_token_step"] = batch_step
                        rec["num_output_tokens"] += len(o.new_token_ids)
                    if o.finish_reason is not None:
                        rec["finish_step"] = batch_step
                        rec["finish_processed_step"] = step
                        rec["finish_reason"] = str(o.finish_reason).lower().split(".")[-1]
                        finished.append(o.request_id)
            return finished

        while True:
            while nxt < len(order) and workload[order[nxt]]["arrival_step"] <= step:
                i = order[nxt]
                w = workload[i]
                sched.add_request(_request(w, _tokens(w, i, prefix_groups), step, hasher))
                nxt += 1
            row = dict.fromkeys(STEP_KEYS)
            row.update(step=step, idle=True, num_scheduled_reqs=0, tokens_scheduled=0, prefill_tokens=0)
            row.update(decode_tokens=0, admitted=[], preempted=[], preemptions=0, finished=[])
            if not sched.has_requests() and not queue:
                if nxt >= len(order):
                    break
            else:
                row["idle"] = False
                so = None
                if sched.has_requests():
                    was_running = {r.request_id for r in sched.running}
                    preempt_log.clear()
                    so = sched.schedule()
                    stats = kvm.make_prefix_cache_stats()
                    for k in pc:
                        pc[k] += getattr(stats, k)
                    sampled, decode, first, again = set(), 0, [], []
                    for rid, n in so.num_scheduled_tokens.items():
                        req = sched.requests[rid]
                        before = req.num_computed_tokens - n
                        if before >= req.num_prompt_tokens and before >= req.num_tokens - 1:
                            decode += n
                        if not req.is_prefill_chunk:
                            sampled.add(rid)
                        if rid not in was_running:
                            rec = records[rid]
                            if rec["first_scheduled_step"] is None:
                                rec["first_scheduled_step"] = step
                                rec["prefix_hit_tokens_at_admission"] = before
                            rec["admissions"].append([step, before])
                            (again if rec["num_preemptions"] else first).append(rid)
                    for rid in preempt_log:
                        records[rid]["num_preemptions"] += 1
                        records[rid]["preempted_steps"].append(step)
                    total = so.total_num_scheduled_tokens
                    row.update(
                        scheduled_batch=step,
                        num_scheduled_reqs=len(so.num_scheduled_tokens),
                        tokens_scheduled=total,
                        prefill_tokens=total - decode,
                        decode_tokens=decode,
                        admitted=first + again,
                        preempted=list(preempt_log),
                        preemptions=len(preempt_log),
                        free_blocks_after_schedule=kvm.block_pool.get_num_free_blocks(),
                        held_blocks_after_schedule=held(),
                    )
                    entry = (so, sampled, step)
                processed = None
                if batch_queue_size == 1:  # EngineCore.step (step_fn: no batch queue at max_concurrent_batches 1)
                    processed = entry if so is not None else None
                else:  # EngineCore.step_with_batch_queue (async scheduling or not)
                    if so is not None:
                        queue.appendleft(entry)
                    if so is None or not (
                        len(queue) < batch_queue_size and (so.total_num_scheduled_tokens > 0 or sched.has_requests())
                    ):
                        processed = queue.pop()
                if processed is not None:
                    row["processed_batch"] = processed[2]
                    row["finished"] = process(processed)
            row.update(
                num_running=len(sched.running),
                num_waiting=sched.get_request_counts()[1],
                free_blocks=kvm.block_pool.get_num_free_blocks(),
                cached_free_blocks=cached_free(),
                held_blocks=held(),
                pc_queries=pc["queries"],
                pc_hits=pc["hits"],
                pc_preempted_queries=pc["preempted_queries"],
                pc_preempted_hits=pc["preempted_hits"],
            )
            for k in STEP_KEYS:
                rows[k].append(row[k])
            step += 1
            if step >= max_steps:
                raise RuntimeError(f"max_steps={max_steps}: the replay did not finish")
        replay_s = time.perf_counter() - t0
        usable = sched_cfg.num_blocks - 1
        reqs = [records[w["id"]] for w in workload]
        totals = {
            "num_steps": len(rows["step"]),
            "num_idle_steps": sum(rows["idle"]),
            "num_requests": len(reqs),
            "num_finished": sum(1 for r in reqs if r["finish_reason"] is not None),
            "all_outputs_complete": all(r["num_output_tokens"] == r["output_len"] for r in reqs),
            "total_preemptions": sum(rows["preemptions"]),
            "requests_preempted": sum(1 for r in reqs if r["num_preemptions"]),
            "prefix_cache": dict(pc),
            "prefix_hit_rate": round(pc["hits"] / pc["queries"], 4) if pc["queries"] else 0.0,
            "tokens_scheduled": sum(rows["tokens_scheduled"]),
            "prefill_tokens": sum(rows["prefill_tokens"]),
            "decode_tokens": sum(rows["decode_tokens"]),
            "max_held_blocks": max(sum(h) for h in rows["held_blocks"]),
            "peak_held_blocks_per_group": [max(c) for c in zip(*rows["held_blocks"])],
            "min_free_blocks": min(
                [f for f in rows["free_blocks_after_schedule"] if f is not None] + rows["free_blocks"]
            ),
            "peak_running": max(rows["num_running"]),
            "last_finish_step": max((r["finish_step"] for r in reqs if r["finish_step"] is not None), default=None),
        }
        checks = {
            "held_plus_free_equals_usable": all(
                f + sum(h) == usable for f, h in zip(rows["free_blocks"], rows["held_blocks"])
            ),
            "all_finished_with_output_len": totals["num_finished"] == len(reqs) and totals["all_outputs_complete"],
        }
        return {
            "case": case["case"],
            "demo_workload": case.get("demo_workload"),
            "platform": type(__import__("vllm.platforms", fromlist=["current_platform"]).current_platform).__name__,
            "inputs": inp,
            "config": settings,
            "kv_cache_config": kv_record,
            "totals": totals,
            "checks": checks,
            "timing": {
                "setup_s": round(setup_s, 2),
                "replay_s": round(replay_s, 2),
                "steps_per_s": round(len(rows["step"]) / replay_s, 1) if replay_s else None,
            },
            "workload": workload,
            "requests": reqs,
            "steps": rows,
        }


def _one(spec_case: dict, configs: Path, out: Path, timing_runs: int = 0) -> None:
    _h200_backends()
    try:
        result = {"case": replay_case(spec_case, configs, timing_runs)}
    except Exception as e:  # a reference run: record vLLM's own refusal
        result = {
            "failure": {
                "error": f"{type(e).__name__}: {e}",
                "traceback_tail": traceback.format_exc().splitlines()[-14:],
            }
        }
    out.write_text(json.dumps(result))


def _timing_in_process(ns, configs: Path) -> int:
    """The timing mode with every case in this process (its loop only is timed, so the process a case runs in
    changes nothing measured); a case vLLM cannot build after another one's state (a MoE model's expert
    parallel group) goes to a fresh process, and one it cannot build at all is left out with its error."""
    import vllm

    _h200_backends()
    spec = json.loads(Path(ns.spec).read_text())
    cases, errors = [], {}
    for c in spec["cases"]:
        if ns.only and ns.only not in c["case"]:
            continue
        try:
            r = replay_case(c, configs, ns.timing)
        except Exception:  # noqa: BLE001 - vLLM's state of an earlier case (its parallel groups): a fresh process
            with tempfile.TemporaryDirectory() as tmp:
                cin, cout = Path(tmp) / "case.json", Path(tmp) / "out.json"
                cin.write_text(json.dumps(c))
                argv_one = [sys.executable, __file__, ns.spec, "--configs", str(configs), "--out", str(cout)]
                subprocess.run(argv_one + ["--one", str(cin), "--timing", str(ns.timing)], capture_output=True)
                try:
                    result = json.loads(cout.read_text())
                except (OSError, ValueError):
                    result = {"failure": {"error": "the fresh process wrote nothing"}}
            if "case" not in result:
                errors[c["case"]] = result["failure"]
                print(f"{c['case']}: FAILED {errors[c['case']]['error']}", file=sys.stderr)
                continue
            r = result["case"]
        cases.append(r)
        print(f"{c['case']}: {r['timing']}", file=sys.stderr)
    Path(ns.out).write_text(json.dumps({"vllm_version": vllm.__version__, "errors": errors, "cases": cases}) + "\n")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec")
    ap.add_argument("--configs", required=True, help="folder of <model>/config.json")
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default=None)
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    ap.add_argument(
        "--timing",
        type=int,
        default=0,
        metavar="RUNS",
        help="the timing mode: each case's loop RUNS times with its recording switched off; writes only timings",
    )
    ap.add_argument(
        "--in-process",
        action="store_true",
        help="with --timing: every case in this one process (no fresh process and vLLM import per case)",
    )
    ns = ap.parse_args(argv)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    configs = Path(ns.configs).resolve()
    if ns.one is not None:
        _one(json.loads(Path(ns.one).read_text()), configs, Path(ns.out), ns.timing)
        return 0
    if ns.timing and ns.in_process:
        return _timing_in_process(ns, configs)
    import vllm

    spec = json.loads(Path(ns.spec).read_text())
    cases, errors = [], {}
    t0 = time.time()
    for c in spec["cases"]:
        if ns.only and ns.only not in c["case"]:
            continue
        keep = {k: c[k] for k in ("case", "inputs", "workload", "demo_workload") if k in c}
        with tempfile.TemporaryDirectory() as tmp:
            cin, cout = Path(tmp) / "case.json", Path(tmp) / "out.json"
            cin.write_text(json.dumps(keep))
            argv_one = [sys.executable, __file__, ns.spec, "--configs", str(configs), "--out", str(cout)]
            proc = subprocess.run(
                argv_one + ["--one", str(cin), "--timing", str(ns.timing)],
                capture_output=True,
                text=True,
                timeout=1800,
            )
            try:
                result = json.loads(cout.read_text())
            except (OSError, ValueError):
                result = {
                    "failure": {"error": f"process exited {proc.returncode}", "tail": proc.stderr.splitlines()[-14:]}
                }
        if "case" in result and ns.timing:
            r = result["case"]
            cases.append(r)
            print(f"{c['case']}: {r['timing']}", file=sys.stderr)
        elif "case" in result:
            r = result["case"]
            r["vllm_version"] = vllm.__version__
            cases.append(r)
            t = r["totals"]
            print(
                f"{c['case']}: {t['num_steps']} steps, {t['total_preemptions']} preemptions, "
                f"hits {t['prefix_cache']['hits']}+{t['prefix_cache']['preempted_hits']}, "
                f"{r['kv_cache_config']['num_blocks']} blocks, {r['timing']['replay_s']} s, checks {r['checks']}",
                file=sys.stderr,
            )
        else:
            errors[c["case"]] = dict(result["failure"], inputs=c["inputs"], workload=c["workload"])
            print(f"{c['case']}: FAILED {result['failure']}", file=sys.stderr)
    out = {
        "vllm_version": vllm.__version__,
        "platform": "UnspecifiedPlatform, CudaPlatform's H200 (SM90) answers (vllm_reference_plans._h200_backends)",
        "how": "scripts/vllm_reference_replay.py: vLLM's own KVCacheConfig and scheduler, stepped as EngineCore does",
        "demo_workloads": spec.get("demo_workloads", {}),
        "errors": errors,
        "elapsed_s": round(time.time() - t0, 1),
        "cases": cases,
    }
    Path(ns.out).write_text(json.dumps(out) + "\n")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
