"""Running requests in steady decode, replayed lazily: the scheduler's fast path (docs/replay.md#speed).

A running request past its prefill that vLLM 0.33's scheduler gives one token a step, whose allocate_slots
would allocate, hash and free nothing (below its `quiet_end` and `trim_limit`, kvviz/replay/running.py) and
whose processed token neither finishes it nor hashes a block (below `finish_at`, `cache_limit`), does the same
thing every step: one scheduled token (`Scheduler.schedule`), one sampled token (`update_from_output`), and
nothing else, for the scheduler, the pool or the records. Such a request is taken out of the per-step loops
(`Request.lazy` = the first batch it sits out) and counted instead: each step schedules `count` such tokens.
Its counters are brought up to date (`_materialize`) only when it needs the scheduler again: at the first
batch that is not quiet (its wake, known in advance from those limits, all of which only its own steps move),
when it is preempted, or when the token budget binds on the running requests (every steady request then
goes back to the per-step loop for that step).

The counters of a steady request at the start of step s, from its state at the end of step b0 - 1 (b0 its
first lazy batch): batches b0 .. s - 1 scheduled one token each; batches b0 .. s - 2 processed (async
scheduling: batch s - 1 is processed later in step s, so a woken request joins that batch's sampled list) or
b0 .. s - 1 (async off)."""

from __future__ import annotations

import heapq

from kvviz.replay.request import RUNNING


class Steady:
    """The steady requests of one replay: their count and a heap of (wake batch, index, request, first batch)."""

    def __init__(self, async_: bool, windowed: bool) -> None:
        self.async_ = async_
        self.windowed = windowed  # a window or Mamba group: trim_limit applies (Scheduler.schedule's `plain`)
        self.heap: list = []
        self.count = 0

    def enter(self, batch: list, step: int) -> None:
        """At the end of step `step`: each request of the batch's sampled list that is running in steady decode
        and quiet for at least its next batch sits the next batches out, until its wake."""
        async_ = self.async_
        heap = self.heap
        first = step + 1
        for r, n in batch:
            if n != 1 or r.status is not RUNNING or r.num_stale_output_tokens or r.lazy >= 0:
                continue
            out = r.num_output
            base = r.prompt_len + out
            if async_:
                # batch `step` in flight: one placeholder, one token in flight, computed = prompt + output
                if r.num_output_placeholders != 1 or r.num_in_flight_tokens != 1 or r.num_computed_tokens != base:
                    continue
                # batch first + k (output o + k at its schedule) is the first that is not quiet when its processed
                # token finishes the request (o + k + 2 >= finish_at), or its schedule needs a block (computed + 1 >
                # alloc_limit), hashes one (allocate_slots hashes up to min(computed + 1, num_tokens) = computed:
                # computed >= cache_limit; below it the scheduler's call at computed + 1 = cache_limit is a no-op,
                # and so is the processed token's: the next schedule hashes first) or frees one (processed =
                # computed - 1 >= trim_limit)
                k = r.finish_at - 2 - out
                s = r.alloc_limit - base
                if r.cache_limit - base < s:
                    s = r.cache_limit - base
            else:
                if r.num_output_placeholders or r.num_in_flight_tokens or r.num_computed_tokens != base - 1:
                    continue
                k = r.finish_at - 1 - out  # processed in its own step: o + k + 1 >= finish_at
                s = r.quiet_end - base  # computed + 1 = prompt + o + k >= quiet_end
            if s < k:
                k = s
            if self.windowed:
                s = r.trim_limit - base + 1  # processed = prompt + o + k - 1 >= trim_limit
                if s < k:
                    k = s
            if k > 0:
                r.lazy = first
                heapq.heappush(heap, (first + k, r.index, r, first))
                self.count += 1

    def _materialize(self, r, step: int, last) -> None:
        """Bring a steady request's counters to the start of step `step` (before its schedule) and put it back in
        the per-step loops; under async scheduling it joins batch `step - 1`'s sampled list (`last`), processed
        later in this step."""
        first = r.lazy
        r.lazy = -1
        self.count -= 1
        scheduled = step - first
        if scheduled <= 0:
            return
        if self.async_:
            processed = scheduled - 1
            last["sampled"].append((r, 1))
            r.num_in_flight_tokens += 1
            r.num_output_placeholders += 1
        else:
            processed = scheduled
        r.num_computed_tokens += scheduled
        r.num_output += processed

    def wake_due(self, step: int, last) -> None:
        """At the start of step `step`'s schedule: the requests whose wake batch has come."""
        heap = self.heap
        while heap and heap[0][0] <= step:
            _, _, r, first = heapq.heappop(heap)
            if r.lazy == first:
                self._materialize(r, step, last)

    def wake_all(self, step: int, last) -> None:
        """Every steady request back to the per-step loops (the token budget binds on the running requests)."""
        for _, _, r, first in self.heap:
            if r.lazy == first:
                self._materialize(r, step, last)
        self.heap.clear()

    def release(self, r, step: int, last) -> None:
        """One steady request back to the per-step loops now (a preemption takes it)."""
        if r.lazy >= 0:
            self._materialize(r, step, last)

    def next_wake(self) -> int | None:
        """The earliest wake batch of a steady request (stale heap entries skipped), None without one."""
        heap = self.heap
        while heap and heap[0][2].lazy != heap[0][3]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None
