"""The engine loop's fast path (docs/replay.md#speed): the steps after a settled one, taken without the
scheduler's per-step calls.

A settled step is one in which nothing was scheduled, admitted, preempted, processed or finished one by one:
only steady requests decoded (kvviz/replay/steady.py), some of them doing their pool work in place (a new
block, a hashed one: `Steady.cross`). The steps after it do the same until something else is due: an arrival,
a steady request's wake that is not pool work alone, or blocks freed while a request waits that might then fit
(a window frees blocks as it slides, a Mamba group its old states; the waiting head is asked as the scheduler
would, `Scheduler.head_refused`, and if it may fit the scheduler finishes that step; without frees the pool only
fills, and a waiting head refused stays refused: its count only grows as hit blocks are evicted). Steps with no
pool work repeat the last row (`StepLog.repeat_last`: an idle gap, a decode run between block boundaries); steps with
some do each due request's pool work in admission (running) order and record a row that differs from the last
only in its step and its free and held blocks. Nothing else is touched: the scheduler, the batch in flight
and the waiting queue are as the last settled step left them."""

from __future__ import annotations

from kvviz.replay.invariants import check_pool


def settled_run(sched, kv, steps, step: int, until: int | None, blocks, check) -> tuple[int, bool]:
    """Take the steps from `step` (the one after a settled step) while they stay settled, up to `until` (the next
    arrival or max_steps; None: none). Returns the step the per-step loop resumes at and whether that step is
    begun (its pool work done, blocks freed while a request waits that may now fit: `schedule(started=True)`)."""
    steady, pool, rows = sched.steady, kv.pool, steps.rows
    allocate = kv.allocate_slots
    waiting = bool(sched.waiting)
    per_request = len(kv.managers)  # a decode step's pool work takes at most one block per group
    start, started = step, False
    while until is None or step < until:
        wake = steady.next_wake() if steady is not None and steady.count else None
        if wake is None or wake > step:  # nothing due: the last row repeats up to the next wake
            end = wake if until is None else (until if wake is None else min(wake, until))
            if end is None:
                break  # nothing would ever end it: the per-step loop runs on
            steps.repeat_last(end - step)
            if blocks is not None:
                blocks.extend([()] * (end - step))
            step = end
            continue
        kv.new_step_starts()  # a Mamba group's states cached in the last step are old now
        due = steady.take_due(step)
        if not all(entry[3] for entry in due) or pool.num_free < len(due) * per_request:
            steady.put_back(step, due)  # the per-step loop takes this step
            break
        epoch = pool.ref_epoch
        if steady.dense is not None:  # in admission order: running order
            done = steady.cross_all([entry[1] for entry in due], step, steady.dense[1])
        else:
            done = all([steady.cross(entry[1], step, allocate) for entry in due])
        if not done:  # cannot be: the pool had a block per group for each
            raise RuntimeError(f"replay fast path: step {step}: pool work found no free block")
        if waiting and pool.ref_epoch != epoch and not sched.head_refused():
            started = True  # a window or Mamba group freed blocks, and the waiting head may fit: the scheduler's
            break
        last = rows[-1]
        held = kv.held_blocks()
        free = pool.num_free
        rows.append(
            (step, False, step, last[3] + step - last[0])
            + last[4:10]
            + ([], [], 0, [], free, free, pool.cached_free, held, list(held))
            + last[19:]
        )
        if blocks is not None:
            blocks.append(pool.take_changes())
        if check:
            check_pool(kv)
        step += 1
    if step > start and sched.last_batch is not None:
        sched.last_batch["step"] = step - 1  # the batch in flight is the last step's
    return step, started
