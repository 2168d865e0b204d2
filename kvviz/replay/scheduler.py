"""vLLM 0.33's v1 `Scheduler` / `AsyncScheduler` on the paths a text workload takes
(vllm/v1/core/sched/scheduler.py, async_scheduler.py; vllm/v1/request.py): FCFS, chunked prefill,
no speculative decoding, no connector, no encoder, no LoRA. Only the forward pass is not run: each
scheduled request whose prompt is complete samples one token."""

from __future__ import annotations

from collections import deque

from kvviz.replay.log import RequestLog
from kvviz.replay.managers import mamba_checkpoint_position, mamba_checkpoint_valid
from kvviz.replay.outputs import OutputUpdate
from kvviz.replay.request import PREEMPTED, RUNNING, Request
from kvviz.replay.steady import Steady


def _seq(r) -> int:
    return r.seq


def _runs(order: list) -> list:
    """`order` with each run of two or more steady requests in a row (crossings) as one list item."""
    out, run = [], []
    for r in order:
        if r.lazy >= 0:
            run.append(r)
            continue
        if run:
            out.append(run if len(run) > 1 else run[0])
            run = []
        out.append(r)
    if run:
        out.append(run if len(run) > 1 else run[0])
    return out


class Scheduler(OutputUpdate):
    """`Scheduler.schedule` / `update_from_output` (and `AsyncScheduler._update_after_schedule`)."""

    def __init__(
        self,
        kv,
        *,
        max_model_len,
        max_num_batched_tokens,
        max_num_seqs,
        async_scheduling,
        mamba_block: int | None,
        mamba_checkpoints: bool,
        lazy: bool = True,
        decode_stagger: int = 1,
    ) -> None:
        self.kv = kv
        # AsyncScheduler.decode_stagger (pipeline_parallel_size; V2 model runner): a request that sampled in
        # schedule() call k is not scheduled again before call k + decode_stagger (Scheduler.current_step counts
        # the calls); 1 changes nothing
        self.decode_stagger = decode_stagger
        self.calls = 0
        self.max_model_len = max_model_len
        self.budget = max_num_batched_tokens
        self.max_num_seqs = max_num_seqs
        self.async_ = async_scheduling
        self.mamba_block = mamba_block  # need_mamba_block_aligned_split (align mode)
        self.mamba_checkpoints = mamba_checkpoints  # mamba_has_prefill_checkpoint_blocks
        self.waiting: deque = deque()
        self.make = None  # workload index -> Request (`add_request` of an index; the engine loop sets it)
        self.running: list = []
        self.finished_ids: set = set()
        # the fast path (kvviz/replay/steady.py): running requests in steady decode sit the per-step loops out
        dense = (kv.dense_slots, kv.dense_crossings) if kv.dense else None
        self.steady = Steady(async_scheduling, bool(kv.windowed) or not kv.no_mamba, dense) if lazy else None
        self.next_seq = 0  # admissions so far: a running request's `seq`, its place in running order
        self.explicit: dict = {}  # seq -> running request not steady (the per-step loops visit these)
        if self.steady is not None:
            self.steady.explicit = self.explicit
        self.last_batch: dict | None = None  # the batch of the last schedule() (a woken request joins its list)
        self.log = RequestLog(())  # the per-request records (the engine sets the run's)

    def add_request(self, r) -> None:
        """Queue a new request at the back of the waiting queue (`Scheduler.add_request`): a Request, or the
        workload index of one that `make` builds when it first reaches the queue's head (a long queue holds
        ints, not requests)."""
        self.waiting.append(r)
        if r.__class__ is not int:
            self._stop(r)

    def _stop(self, r: Request) -> None:
        # update_from_output's stop: num_output >= max_tokens or num_tokens >= max_model_len
        r.finish_at = min(r.max_tokens, self.max_model_len - r.prompt_len)

    def head(self) -> Request:
        """The waiting queue's head, built if it was queued as a workload index."""
        r = self.waiting[0]
        if r.__class__ is int:
            r = self.waiting[0] = self.make(r)
            self._stop(r)
        return r

    def has_requests(self) -> bool:
        """Whether any request is running or waiting (`Scheduler.has_requests`)."""
        return bool(self.running or self.waiting or self.finished_ids)

    # ---- schedule ------------------------------------------------------------------------
    def _mamba_split(self, r: Request, num_new: int, hits: int = 0) -> int:
        """`Scheduler._mamba_block_aligned_split`: prefill chunks end on block boundaries."""
        start = r.num_computed_tokens + hits
        prefill_end = max(r.prompt_len, r.num_tokens - 1)
        if start >= prefill_end:
            return num_new
        bs = self.mamba_block
        last_cache = mamba_checkpoint_position(r.num_tokens, bs)
        end = start + num_new
        position = mamba_checkpoint_position(prefill_end, bs)
        internal = (
            self.mamba_checkpoints and end >= prefill_end and mamba_checkpoint_valid(start, end, position, bs, bs, bs)
        )
        if internal:
            last_cache = 0
        if end < prefill_end:
            aligned = end // bs * bs
            if aligned > start or bs <= self.budget:
                end = aligned
        junction = r.shared_prefix_boundary
        stops = (
            ((start // bs + 1) * bs) if start % bs and not internal else 0,
            last_cache,
            (start + (junction - start) // bs * bs) if start < junction < end else 0,
        )
        end = min((s for s in stops if start < s < end), default=end)
        return max(end - start, 0)

    def schedule(self, step: int, started: bool = False) -> dict:
        """One `schedule()`: running requests first (preempting the last admitted when blocks run out),
        then FCFS admission unless someone was preempted. Returns the batch. `started`: the fast path began
        this step (kvviz/replay/fastpath.py: the step's start and its due pool work done)."""
        kv = self.kv
        budget = self.budget
        self.calls += 1
        calls, stagger = self.calls, self.decode_stagger
        if not started:
            kv.new_step_starts()
        running = self.running
        order = running  # the running requests this loop visits, in running order
        steady = self.steady
        last = self.last_batch
        crossing: list = []  # steady requests due for pool work alone (Steady.cross), in admission order
        crossed = 0
        if steady is not None and steady.count:
            crossing = [] if started else steady.wake_due(step, last)
            if steady.count:
                explicit = self.explicit
                order = [explicit[k] for k in sorted(explicit)] if explicit else []
                if steady.count + sum(map(self._wanted, order)) > budget:
                    steady.wake_all(step, last, crossing)  # the budget binds on the running requests: visit all
                    order = running
                    crossing = []
                else:  # every running request gets what it wants: the steady ones one token each
                    budget -= steady.count
                    if crossing:  # in running order (admission order) with the others
                        order = sorted(order + crossing, key=_seq) if order else crossing
                        if steady.dense:  # a dense model's crossings between two other requests: one call
                            order = _runs(order)
        preempted: list = []
        admitted: list = []
        items: list = []  # admitted (request, tokens), in scheduling order
        # for update_from_output, in scheduling order: (request, tokens) of the requests that sample a token,
        # and of those that only computed a prefill chunk
        processed: list = []
        chunks: list = []
        decode = 0
        async_ = self.async_
        mml1 = self.max_model_len - 1
        mamba_block = self.mamba_block
        allocate = kv.allocate_slots
        skip_max = kv.skip_max_tokens
        append = processed.append
        append_chunk = chunks.append
        no_mamba = kv.no_mamba
        cache_running = kv.cache_running
        # no window and no Mamba group: trim_limit is max_model_len + 1 whenever alloc_limit is known (they are
        # set together; unknown, both are 0), skip_max_tokens is max_model_len: only quiet_end is asked
        plain = no_mamba and not kv.windowed
        work = order[::-1]  # a stack, in running order (a run of crossings may come back one by one)
        while work:  # preemption pops only behind the current request: skipped below when reached
            r = work.pop()
            if r.__class__ is list:  # a run of a dense model's crossings (`_runs`)
                run = [x for x in r if x.status is RUNNING and x.lazy >= 0]
                if run and steady.cross_all(run, step, steady.dense[1]):
                    crossed += len(run)
                else:  # the blocks are not there for all: one by one, preempting as the scheduler does
                    work.extend(reversed(run))
                continue
            if r.status is not RUNNING:  # preempted by a request before it
                continue
            if r.lazy >= 0:  # steady, due for pool work alone: done in place, or back to this loop to preempt
                if steady.cross(r, step, allocate):
                    crossed += 1
                    continue
                steady.release(r, step, last)
                budget += 1  # its token was counted with the steady ones
            if budget <= 0:
                if crossing:
                    continue  # the budget did not bind: only requests that want nothing are left, and crossings
                break
            if stagger > 1 and calls < r.eligible:
                continue  # V2 + PP + async: pp_size calls between one request's decodes
            computed = r.num_computed_tokens
            placeholders = r.num_output_placeholders
            if placeholders > 0 and computed + 2 - placeholders >= r.stop:
                continue  # every output token is scheduled already (AsyncScheduler)
            prompt_len = r.prompt_len
            num_tokens = prompt_len + r.num_output
            known = num_tokens + placeholders  # num_tokens_with_spec plus the output placeholders
            n = known - computed
            if n > budget:
                n = budget
            if n > mml1 - computed:
                n = mml1 - computed
            if mamba_block:
                n = self._mamba_split(r, n)
            if n <= 0:
                continue
            end = computed + n
            # allocate_slots would allocate and free nothing; below cache_limit it would hash nothing either
            if end < r.quiet_end and (plain or (n <= skip_max and computed - r.num_in_flight_tokens < r.trim_limit)):
                pass
            elif (
                n > skip_max
                or end > r.alloc_limit
                or computed - r.num_in_flight_tokens >= r.trim_limit
                or (end >= r.cache_limit and not no_mamba)
            ):
                while not allocate(r, n):
                    victim = running.pop()
                    if victim.lazy >= 0:  # a steady request: counted in the budget already
                        steady.release(victim, step, last)
                        budget += 1
                    self._preempt(victim)
                    preempted.append(victim)
                    if victim is r:
                        break
                if r.status is PREEMPTED:
                    break
            elif end >= r.cache_limit:
                cache_running(r, end)
            budget -= n
            # _update_after_schedule, done here for running requests (nothing later in this step reads them)
            if computed >= prompt_len and computed >= num_tokens - 1:  # past the prefill end
                decode += n
            r.num_computed_tokens = end
            r.num_in_flight_tokens += n
            if end < known:  # a prefill chunk
                append_chunk((r, n))
            else:
                if async_:
                    r.num_output_placeholders = placeholders + 1
                append((r, n))
        if not preempted:
            skipped: deque = deque()
            waiting = self.waiting
            while budget > 0 and waiting and len(running) < self.max_num_seqs:
                r = waiting[0]
                if r.__class__ is int:
                    r = self.head()
                if r.num_stale_output_tokens:  # in-flight output still to be delivered: wait a step
                    skipped.appendleft(waiting.popleft())
                    continue
                blocks, hits = self._hit(r)
                n = min(r.num_tokens - hits, budget)
                if self.mamba_block:
                    n = self._mamba_split(r, n, hits)
                    if n == 0:
                        break
                if not kv.allocate_slots(r, n, hits, blocks, full_sequence_must_fit=True):
                    break
                kv.record_prefix_cache_stats(r, hits)
                waiting.popleft()
                running.append(r)
                r.seq = self.next_seq  # running order
                self.next_seq += 1
                self.explicit[r.seq] = r
                admitted.append((r, hits))
                items.append((r, n))
                budget -= n
                r.status = RUNNING
                r.num_computed_tokens = hits
            if skipped:
                waiting.extendleft(skipped)
        self.finished_ids = set()
        for r, n in items:  # _update_after_schedule of the admitted requests
            computed = r.num_computed_tokens
            num_tokens = r.prompt_len + r.num_output
            if computed >= r.prompt_len and computed >= num_tokens - 1:  # past the prefill end
                decode += n
            computed += n
            r.num_computed_tokens = computed
            r.num_in_flight_tokens += n
            if computed < num_tokens + r.num_output_placeholders:  # a prefill chunk
                chunks.append((r, n))
            else:
                if async_:
                    r.num_output_placeholders += 1
                processed.append((r, n))
        if stagger > 1:  # AsyncScheduler._update_after_schedule: every request that samples in this batch
            for r, _ in processed:
                r.eligible = calls + stagger
        lazy = steady.count if steady is not None else 0  # one decode token each
        batch = self.last_batch = {
            "step": step,
            "num_scheduled": len(processed) + len(chunks) + lazy,
            "tokens_scheduled": self.budget - budget,
            "sampled": processed,
            "chunks": chunks,
            "admitted": admitted,
            "preempted": preempted,
            "decode_tokens": decode + lazy,
            "crossed": crossed,  # steady requests whose pool work was done in place
        }
        return batch

    def _hit(self, r) -> tuple:
        """`get_computed_blocks` for waiting request `r` (hit blocks, hit tokens; its shared-prefix junction set),
        asked again only when its length or its cached entries changed (a queue head that does not fit is asked
        every step)."""
        key = (r.prompt_len + r.num_output, self.kv.pool.hit_version(r))
        memo = r.hit_memo
        if memo is None or memo[0] != key:
            memo = r.hit_memo = (key, self.kv.get_computed_blocks(r))
        blocks, hits, r.shared_prefix_boundary = memo[1]
        return blocks, hits

    def head_refused(self) -> bool:
        """Whether `schedule`'s admission, with nothing but steady requests running, would admit nobody: no room
        to try, or the first request it tries refused (as `schedule` finds it: hit search, chunk, the whole
        sequence's blocks, `KVCacheManager.admits`). False when unsure (a head with output still in flight)."""
        budget = self.budget - (self.steady.count if self.steady is not None else 0)
        if budget <= 0 or not self.waiting or len(self.running) >= self.max_num_seqs:
            return True
        r = self.head()
        if r.num_stale_output_tokens:
            return False
        blocks, hits = self._hit(r)
        n = min(r.num_tokens - hits, budget)
        if self.mamba_block and self._mamba_split(r, n, hits) == 0:
            return True
        return not self.kv.admits(r, hits, blocks)

    def _wanted(self, r) -> int:
        """The tokens `schedule` gives running request `r` when the budget does not bind (its loop, uncapped)."""
        computed = r.num_computed_tokens
        placeholders = r.num_output_placeholders
        if placeholders > 0 and computed + 2 - placeholders >= r.stop:
            return 0
        n = r.prompt_len + r.num_output + placeholders - computed
        if n > self.max_model_len - 1 - computed:
            n = self.max_model_len - 1 - computed
        if self.mamba_block:
            n = self._mamba_split(r, n)
        return n if n > 0 else 0

    def _preempt(self, r: Request) -> None:
        """`Scheduler._preempt_request`: blocks freed, computed tokens reset, back to the queue's front."""
        self.kv.free(r.rid)
        self.kv.pool.watch(r.own)  # its hit search may find its own blocks: memos made before are void
        r.hit_memo = r.admit_memo = None
        self.explicit.pop(r.seq, None)
        r.alloc_limit = r.cache_limit = r.trim_limit = r.quiet_end = 0
        r.status = PREEMPTED
        r.num_computed_tokens = 0
        r.num_stale_output_tokens = r.num_in_flight_tokens
        r.num_output_placeholders = 0
        r.num_preemptions += 1
        self.waiting.appendleft(r)

    # ---- update_from_output ------------------------------------------------------------
