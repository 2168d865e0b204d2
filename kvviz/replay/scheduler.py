"""vLLM 0.33's v1 `Scheduler` / `AsyncScheduler` on the paths a text workload takes
(vllm/v1/core/sched/scheduler.py, async_scheduler.py; vllm/v1/request.py): FCFS, chunked prefill,
no speculative decoding, no connector, no encoder, no LoRA. Only the forward pass is not run: each
scheduled request whose prompt is complete samples one token."""

from __future__ import annotations

from collections import deque

from kvviz.replay.managers import mamba_checkpoint_position, mamba_checkpoint_valid

WAITING, RUNNING, PREEMPTED, FINISHED = "waiting", "running", "preempted", "finished"


class Request:
    """`vllm.v1.request.Request` as the scheduler reads it; tokens are identities, not ids."""

    __slots__ = (
        "rid",
        "index",
        "prompt_len",
        "max_tokens",
        "chain",
        "chunk",
        "shared",
        "num_output",
        "num_computed_tokens",
        "num_output_placeholders",
        "num_in_flight_tokens",
        "num_stale_output_tokens",
        "status",
        "num_preemptions",
        "shared_prefix_boundary",
        "record",
        "alloc_limit",
        "quiet_end",
        "cache_limit",
        "trim_limit",
        "hit_memo",
        "stop",
        "finish_at",
        "admit_memo",
    )

    def __init__(self, rid, index, prompt_len, max_tokens, record, chain=(), chunk=1, shared=0) -> None:
        self.rid, self.index, self.prompt_len, self.max_tokens = rid, index, prompt_len, max_tokens
        # the shared leading tokens (kvviz/replay/identity.py): one trie node per `chunk` tokens, `shared` tokens
        self.chain, self.chunk, self.shared = chain, chunk, shared
        self.num_output = self.num_computed_tokens = self.num_output_placeholders = 0
        self.num_in_flight_tokens = self.num_stale_output_tokens = self.num_preemptions = 0
        self.status = WAITING
        self.shared_prefix_boundary = 0
        self.record = record
        # A step of at most `KVCacheManager.skip_max_tokens` tokens whose computed + new tokens stay <= alloc_limit
        # and < cache_limit, and whose processed tokens stay < trim_limit, allocates, hashes and frees nothing
        # (`KVCacheManager._set_limits` sets them; 0 = unknown).
        self.alloc_limit = self.cache_limit = self.trim_limit = 0
        self.quiet_end = 0  # min(alloc_limit + 1, cache_limit): below it, with the window check, nothing to do
        self.hit_memo: tuple | None = None  # ((num_tokens, pool.hit_version), get_computed_blocks' answer)
        self.stop = prompt_len + max_tokens  # prompt plus every output token
        self.admit_memo: tuple | None = None  # (inputs, blocks) of the admission check (KVCacheManager.allocate_slots)
        self.finish_at = max_tokens  # output tokens at which it finishes (the scheduler caps it at max_model_len)

    @property
    def num_tokens(self) -> int:
        """Prompt tokens plus the output tokens sampled so far (vLLM's `Request.num_tokens`)."""
        return self.prompt_len + self.num_output

    def num_hashed_tokens(self) -> int:
        """Tokens covered by `request.block_hashes` (every full block is hashed: block size = hash block size)."""
        return self.num_tokens

    def token_key(self, end: int):
        """The identity of the tokens [0, end) (kvviz/replay/identity.py): the node of the shared chunk holding
        token end - 1 while they are all shared, else the request's own."""
        return (self.chain[(end - 1) // self.chunk], end) if end <= self.shared else (self.rid, end)

    def reachable_boundaries(self):
        """`replay_boundaries` (no EAGLE: prompt - 1) and the shared-prefix junction (`cache_blocks`)."""
        if self.shared_prefix_boundary:
            return (self.prompt_len - 1, self.shared_prefix_boundary)
        return (self.prompt_len - 1,)


class Scheduler:
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
    ) -> None:
        self.kv = kv
        self.max_model_len = max_model_len
        self.budget = max_num_batched_tokens
        self.max_num_seqs = max_num_seqs
        self.async_ = async_scheduling
        self.mamba_block = mamba_block  # need_mamba_block_aligned_split (align mode)
        self.mamba_checkpoints = mamba_checkpoints  # mamba_has_prefill_checkpoint_blocks
        self.waiting: deque = deque()
        self.running: list = []
        self.requests: dict = {}
        self.finished_ids: set = set()

    def add_request(self, r: Request) -> None:
        """Queue a new request at the back of the waiting queue (`Scheduler.add_request`)."""
        self.waiting.append(r)
        self.requests[r.rid] = r
        # update_from_output's stop: num_output >= max_tokens or num_tokens >= max_model_len
        r.finish_at = min(r.max_tokens, self.max_model_len - r.prompt_len)

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

    def schedule(self, step: int) -> dict:
        """One `schedule()`: running requests first (preempting the last admitted when blocks run out),
        then FCFS admission unless someone was preempted. Returns the batch."""
        kv = self.kv
        budget = self.budget
        kv.new_step_starts()
        preempted: list = []
        admitted: list = []
        items: list = []  # admitted (request, tokens), in scheduling order
        # for update_from_output, in scheduling order: (request, tokens) of the requests that sample a token,
        # and of those that only computed a prefill chunk
        processed: list = []
        chunks: list = []
        decode = 0
        async_ = self.async_
        running = self.running
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
        for r in running:  # preemption pops only behind the current position (the list's tail)
            if budget <= 0:
                break
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
            pool = kv.pool
            while budget > 0 and waiting and len(running) < self.max_num_seqs:
                r = waiting[0]
                if r.num_stale_output_tokens:  # in-flight output still to be delivered: wait a step
                    skipped.appendleft(waiting.popleft())
                    continue
                # get_computed_blocks, asked again only when the request's length or its cached entries changed
                # (a queue head that does not fit is asked every step)
                memo_key = (r.prompt_len + r.num_output, pool.hit_version(r))
                memo = r.hit_memo
                if memo is None or memo[0] != memo_key:
                    memo = r.hit_memo = (memo_key, kv.get_computed_blocks(r))
                blocks, hits, r.shared_prefix_boundary = memo[1]
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
        return {
            "step": step,
            "num_scheduled": len(processed) + len(chunks),
            "tokens_scheduled": self.budget - budget,
            "sampled": processed,
            "chunks": chunks,
            "admitted": admitted,
            "preempted": preempted,
            "decode_tokens": decode,
        }

    def _preempt(self, r: Request) -> None:
        """`Scheduler._preempt_request`: blocks freed, computed tokens reset, back to the queue's front."""
        self.kv.free(r.rid)
        r.alloc_limit = r.cache_limit = r.trim_limit = r.quiet_end = 0
        r.status = PREEMPTED
        r.num_computed_tokens = 0
        r.num_stale_output_tokens = r.num_in_flight_tokens
        r.num_output_placeholders = 0
        r.num_preemptions += 1
        self.waiting.appendleft(r)

    # ---- update_from_output ------------------------------------------------------------
    def update_from_output(self, batch: dict, step: int) -> list:
        """`Scheduler.update_from_output`: one token for each sampled request; a request that reaches
        max_tokens (or max_model_len) finishes and frees its blocks."""
        finished = []
        stopped_running, stopped_waiting = [], []
        no_mamba = self.kv.no_mamba
        cache_blocks = self.kv.cache_blocks
        batch_step = batch["step"]
        for r, n in batch["chunks"]:  # no token sampled: only the in-flight counts (nothing here reads another's)
            if r.status is not FINISHED:  # finished since (a request reported never admitted was never scheduled)
                r.num_in_flight_tokens -= n
                if r.num_stale_output_tokens > 0:
                    r.num_stale_output_tokens -= n
        for r, n in batch["sampled"]:
            status_before = r.status
            if status_before is FINISHED:
                continue
            r.num_in_flight_tokens -= n
            stale = r.num_stale_output_tokens > 0
            if stale:
                r.num_stale_output_tokens -= n
            placeholders = r.num_output_placeholders
            num_output = r.num_output = r.num_output + 1
            if num_output == 1:  # the first token (num_output only grows, here)
                r.record["first_token_step"] = batch_step
            if not stale and placeholders > 0:
                r.num_output_placeholders = placeholders - 1
                if status_before is RUNNING:
                    upto = r.num_computed_tokens - r.num_in_flight_tokens
                    if upto >= r.cache_limit or not no_mamba:  # below it every full block is hashed already
                        cache_blocks(r, upto)
            if num_output >= r.finish_at:  # prompt + output >= max_model_len or output >= max_tokens
                rid = r.rid
                r.status = FINISHED
                rec = r.record
                rec["finish_step"] = batch_step
                rec["finish_processed_step"] = step
                rec["num_output_tokens"] = num_output
                self.finished_ids.add(rid)
                self.kv.free(rid)
                del self.requests[rid]
                finished.append(rid)
                (stopped_running if status_before is RUNNING else stopped_waiting).append(r)
        if stopped_running:
            running = self.running
            if len(stopped_running) <= 8:  # a few C-level scans beat rebuilding the list in Python
                for r in stopped_running:
                    running.remove(r)  # Request has no __eq__: identity
            else:
                gone = set(id(r) for r in stopped_running)
                running[:] = [r for r in running if id(r) not in gone]
        for r in stopped_waiting:
            self.waiting.remove(r)
        return finished
