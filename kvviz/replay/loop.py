"""vLLM 0.33's engine loop over a workload (vllm/v1/engine/core.py: `EngineCore.step` when the batch queue's
depth, VllmConfig.max_concurrent_batches, is 1; `step_with_batch_queue` otherwise, async scheduling or not:
up to that many batches in flight, a step schedules a batch and processes the oldest one only when the queue
is full or nothing more can be scheduled), one row recorded per step (kvviz/replay/log.py). At PP 1 with async
scheduling the depth is 2: step N schedules batch N and processes batch N - 1's output.

The fast path's jump (docs/replay.md#speed): a quiet step (nothing scheduled, admitted, preempted,
processed or finished one by one; only steady requests, kvviz/replay/steady.py, counted) leaves the engine
as it found it, steady requests' counters aside, so the steps after it repeat it exactly until a request
arrives or a steady request wakes. They are recorded as one run of the same row (`StepLog.repeat_last`),
an idle gap included, instead of being stepped through."""

from __future__ import annotations

from collections import deque

from kvviz.base.errors import KvvizError
from kvviz.replay.fastpath import settled_run
from kvviz.replay.identity import Identities
from kvviz.replay.invariants import check_pool
from kvviz.replay.log import NEVER_ADMITTED, StepLog
from kvviz.replay.request import Request

_IDLE_PART = (0, 0, 0, 0, [], [], 0, [], None)  # num_scheduled_reqs .. free_blocks_after_schedule of an idle step


def run(sched, kv, requests, log, depth, max_steps, check=False, blocks=None, fast=True) -> StepLog:
    """Step the engine until every request has finished (or was never admitted); the steps recorded. `depth`:
    the batch queue's (max_concurrent_batches)."""
    arrivals = [w.arrival_step for w in requests]
    if all(map(int.__le__, arrivals, arrivals[1:])):  # in arrival order already (generators, traces)
        order: range | list = range(len(requests))
    else:  # stable: requests of one step in workload order
        order = sorted(range(len(requests)), key=arrivals.__getitem__)
    del arrivals
    total = len(order)
    steps = StepLog()
    rows = steps.rows
    queue: deque = deque()
    shared = Identities()
    nxt = 0
    step = 0
    stats = kv.stats
    pool = kv.pool
    steady = sched.steady
    started = False  # the fast path began this step (kvviz/replay/fastpath.py)

    def make(i: int) -> Request:
        w = requests[i]
        return Request(w.id, i, w.prompt_len, w.output_len, *shared.of(w))

    sched.make = make
    while True:
        while nxt < total and requests[order[nxt]].arrival_step <= step:
            sched.add_request(order[nxt])
            nxt += 1
        quiet = True  # settled: this step changed nothing but steady requests and their pool work in place
        batch = None
        if not sched.has_requests() and not queue:
            if nxt >= total:
                break
            head = (step, True, None, None)
            sched_part = _IDLE_PART
            held_after = None
        else:
            processed = None
            if sched.has_requests():
                if sched.finished_ids:  # schedule() forgets them: the next step may find no request
                    quiet = False
                batch = sched.schedule(step, started)
                started = False
                if _never_admitted(sched, batch, queue, log, step):
                    quiet = False
                elif batch["sampled"] or batch["chunks"] or batch["admitted"] or batch["preempted"]:
                    quiet = False
            else:
                quiet = False  # the queue drains: the next step differs
            sched_part, held_after = _scheduled_row(step, batch, kv, log)
            finished = []
            if depth == 1:  # EngineCore.step
                processed = batch
            else:  # EngineCore.step_with_batch_queue: a batch nothing was scheduled in takes its place in the queue
                if batch is not None:
                    queue.appendleft(batch)
                if batch is None or not (len(queue) < depth and (batch["num_scheduled"] or sched.has_requests())):
                    processed = queue.pop()
            if processed is None:
                quiet = False  # the queue fills: the next step processes a batch
            else:
                if processed["sampled"] or processed["chunks"]:
                    quiet = False
                finished = sched.update_from_output(processed, step)
            if batch is not None and steady is not None:
                steady.enter(batch["sampled"], step)
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
        if blocks is not None:
            blocks.append(pool.take_changes())
        if check:
            check_pool(kv)
        step += 1
        if quiet and fast:  # settled: the steps after it need no per-step call until something else is due
            until = requests[order[nxt]].arrival_step if nxt < total else None
            if max_steps is not None:
                until = max_steps if until is None else min(until, max_steps)
            step, started = settled_run(sched, kv, steps, step, until, blocks, check)
        if max_steps is not None and step >= max_steps:
            raise KvvizError(f"max_steps={max_steps}: the replay did not finish within it")
    return steps


def _scheduled_row(step, batch, kv, log):
    """The scheduled batch's step fields, num_scheduled_reqs to free_blocks_after_schedule in STEP_FIELDS
    order less `finished` (the caller adds it), and held_blocks_after_schedule; admissions and preemptions
    recorded per request."""
    if batch is None:
        return (0, 0, 0, 0, [], [], 0, None), None
    decode = batch["decode_tokens"]
    admitted, preempted = batch["admitted"], batch["preempted"]
    for r, hits in admitted:
        log.admitted(r.index, step, hits)
    for r in preempted:
        log.preempt(r.index, step)
    total = batch["tokens_scheduled"]
    return (
        batch["num_scheduled"],
        total,
        total - decode,
        decode,
        [r.rid for r, _ in admitted if not r.num_preemptions] + [r.rid for r, _ in admitted if r.num_preemptions]
        if admitted
        else [],
        [r.rid for r in preempted],
        len(preempted),
        kv.pool.num_free,
    ), kv.held_blocks()


def _never_admitted(sched, batch, queue, log, step) -> bool:
    """A queue head that fails admission with nothing running and nothing in flight never fits:
    report it and take it out (vLLM would retry it every step forever). Whether it did."""
    if batch["num_scheduled"] or sched.running or not sched.waiting or any(b["num_scheduled"] for b in queue):
        return False
    head = sched.head()
    if head.num_stale_output_tokens:
        return False
    sched.waiting.popleft()
    log.finished(head.index, step, step, 0, NEVER_ADMITTED)
    return True
