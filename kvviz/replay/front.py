"""The replay's front door, `kvviz.replay(plan, workload_or_trace, ...)` (docs/replay.md#python):

* the budget as `Plan.capacity` takes it (kvviz.core.budgets.plan_budget): `budget_bytes=`, `budget_gib=`, or
  `gpu=` with vLLM's deployment arguments (`gpu_memory_utilization=`, ...); with pipeline stages, a GPU gives
  one budget a stage (so may `budget_bytes=`, a tuple), and the pool is the one vLLM's scheduler gets
  (kvviz.replay.engine);
* the scheduler knobs from the plan (`kvviz.plan(..., max_num_batched_tokens=2048)` replays at 2,048): a knob
  given here and to the plan must agree, one given only here is used (the plan's blocks do not depend on it);
  max_model_len is always the plan's (its capacity line counts requests of that length);
* the traffic as WorkloadRequests or dicts, a `Trace` (kvviz.replay.traces), or a file: a kvviz workload
  (JSON Lines) or a published trace (Mooncake, Azure), told apart by its first line, with `rows=`, `step_ms=`,
  `first_row=`, `id_prefix=` (kvviz.replay.read_trace).

The run is kvviz.replay.engine.replay's; the Replay keeps the requests, what the front door read
(`notes['trace']`) and the capacity line's promise (`notes['max_concurrency']`), which the answers
(kvviz.replay.answers) read."""

from __future__ import annotations

from pathlib import Path

from kvviz.base.defaults import MAX_NUM_BATCHED_TOKENS
from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import short_repr
from kvviz.core.budgets import plan_budget
from kvviz.core.plan import Plan
from kvviz.replay import engine
from kvviz.replay.result import Replay
from kvviz.replay.traces import DEFAULT_STEP_MS, Trace, detect_format, read_trace
from kvviz.replay.workload import read_jsonl

# the replay's knob -> the plan's Options field that gives it
PLAN_KNOBS = {
    "max_model_len": "max_model_len",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "async_scheduling": "async_scheduling",
    "enable_prefix_caching": "prefix_caching",
}


def scheduler_knobs(plan: Plan, **given) -> dict:
    """The replay's knobs: each as given, else as the plan was made with it (None where neither says: the
    engine's default). A knob given both ways with two values is one line naming both."""
    options = plan.options
    out = {}
    for knob, field in PLAN_KNOBS.items():
        mine = given.get(knob)
        planned = None if options is None else getattr(options, field)
        if knob == "max_model_len":  # the plan's capacity (and its promise) counts requests of this length
            planned = plan.max_model_len
        if mine is not None and planned is not None and mine != planned:
            raise KvvizError(
                f"{knob}={short_repr(mine)}: the plan was made with {field}={planned!r}; plan again with "
                f"kvviz.plan(..., {field}={short_repr(mine)}) or leave {knob} out"
            )
        out[knob] = planned if mine is None else mine
    return out


def traffic(workload, *, max_model_len: int, trace_format=None, **reading) -> tuple:
    """(requests, the Trace or None) from what `replay` takes: WorkloadRequests or dicts, a Trace, or a path
    (a workload file, or a Mooncake / Azure trace read with `reading`: read_trace's rows, step_ms, id_prefix,
    first_row; `trace_format` None: told by the first line, 'workload': kvviz's JSON Lines)."""
    given = [k for k, v in reading.items() if v is not None]
    if isinstance(workload, (str, Path)):
        fmt = detect_format(workload) if trace_format is None else trace_format
        if fmt != "workload":
            reading["step_ms"] = DEFAULT_STEP_MS if reading.get("step_ms") is None else reading["step_ms"]
            trace = read_trace(workload, format=fmt, max_model_len=max_model_len, **reading)
            return trace.requests, trace
        require(not given, f"{given[0] if given else ''}: applies to a trace (Mooncake or Azure), not a workload")
        return read_jsonl(workload, max_model_len), None
    require(trace_format is None, f"trace_format={short_repr(trace_format)}: applies to a file")
    if isinstance(workload, Trace):
        require(not given, f"{given[0] if given else ''}: the trace was read already; give it to read_trace")
        trace = workload.within(max_model_len)
        return trace.requests, trace
    require(not given, f"{given[0] if given else ''}: applies to a trace file (Mooncake or Azure)")
    if workload is None or isinstance(workload, (bytes, dict, int, float)) or not hasattr(workload, "__iter__"):
        raise KvvizError(
            f"workload={short_repr(workload)}: give WorkloadRequests (kvviz.replay.chat(...)), dicts of the "
            "workload fields, a Trace (kvviz.replay.read_trace) or a file path"
        )
    return tuple(workload), None  # checked once, by the engine (kvviz.replay.workload.check)


def replay(
    plan,
    workload,
    *,
    budget_bytes=None,
    budget_gib=None,
    gpu=None,
    rows=None,
    step_ms=None,
    trace_format: str | None = None,
    id_prefix: str | None = None,
    first_row: int | None = None,
    max_model_len: int | None = None,
    max_num_batched_tokens: int | None = None,
    max_num_seqs: int | None = None,
    enable_prefix_caching: bool | None = None,
    async_scheduling: bool | None = None,
    max_steps: int | None = None,
    check_invariants: bool = False,
    record_blocks: bool = False,
    fast: bool = True,
    **deployment,
) -> Replay:
    """`workload` replayed on `plan`'s pool as vLLM 0.33's scheduler runs it (module docstring): the budget
    given as `Plan.capacity` takes it, the scheduler knobs from the plan unless given, the traffic as
    requests, a Trace or a file (`rows=`, `step_ms=`, `id_prefix=`, `first_row=` for a trace: read_trace).
    `max_num_seqs` defaults to min(1024, max_num_batched_tokens); `record_blocks=True` keeps the time-lapse
    log; `fast=False` replays every step one by one (docs/replay.md#speed: the same output)."""
    if not isinstance(plan, Plan):
        raise KvvizError(
            f"plan={short_repr(plan)}: give a plan, e.g. kvviz.replay(kvviz.plan('llama-3.1-8b'), "
            "kvviz.replay.chat(64), budget_gib=8)"
        )
    # a GPU with pipeline stages gives one budget a stage (each worker's own memory); the engine's pool is then the
    # one vLLM's scheduler gets (docs/replay.md#pipeline-parallel)
    budget = plan_budget(plan, budget_bytes, budget_gib=budget_gib, gpu=gpu, **deployment)
    knobs = scheduler_knobs(
        plan,
        max_model_len=max_model_len,
        max_num_batched_tokens=max_num_batched_tokens,
        async_scheduling=async_scheduling,
        enable_prefix_caching=enable_prefix_caching,
    )
    requests, trace = traffic(
        workload,
        max_model_len=knobs["max_model_len"],
        trace_format=trace_format,
        rows=rows,
        step_ms=step_ms,
        id_prefix=id_prefix,
        first_row=first_row,
    )
    result = engine.replay(
        plan,
        requests,
        budget_bytes=budget,
        max_model_len=knobs["max_model_len"],
        max_num_batched_tokens=knobs["max_num_batched_tokens"] or MAX_NUM_BATCHED_TOKENS,
        max_num_seqs=max_num_seqs,
        enable_prefix_caching=knobs["enable_prefix_caching"],
        async_scheduling=knobs["async_scheduling"] is not False,
        max_steps=max_steps,
        check_invariants=check_invariants,
        record_blocks=record_blocks,
        fast=fast,
    )
    cap = plan.capacity(budget)
    return result.with_notes(
        tuple(requests),
        trace=None if trace is None else trace.to_json(),
        max_concurrency=cap.max_concurrency,
        capacity_line=cap.line,
    )
