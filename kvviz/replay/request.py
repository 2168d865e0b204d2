"""vLLM 0.33's `vllm.v1.request.Request` as the replay's scheduler reads it (vllm/v1/request.py): token
counts and identities, never token ids."""

from __future__ import annotations

from kvviz.replay.identity import END_BITS, own_identity

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
        "alloc_limit",
        "quiet_end",
        "cache_limit",
        "trim_limit",
        "hit_memo",
        "stop",
        "finish_at",
        "admit_memo",
        "lazy",
        "own",
        "seq",
        "eligible",
    )

    def __init__(self, rid, index, prompt_len, max_tokens, chain=(), chunk=1, shared=0) -> None:
        self.rid, self.index, self.prompt_len, self.max_tokens = rid, index, prompt_len, max_tokens
        # the shared leading tokens (kvviz/replay/identity.py): one trie node per `chunk` tokens, `shared` tokens
        self.chain, self.chunk, self.shared = chain, chunk, shared
        self.own = own_identity(index)
        self.seq = -1  # its place in running order (Scheduler.schedule: admissions so far when admitted)
        self.num_output = self.num_computed_tokens = self.num_output_placeholders = 0
        self.num_in_flight_tokens = self.num_stale_output_tokens = self.num_preemptions = 0
        self.status = WAITING
        self.shared_prefix_boundary = 0
        # A step of at most `KVCacheManager.skip_max_tokens` tokens whose computed + new tokens stay <= alloc_limit
        # and < cache_limit, and whose processed tokens stay < trim_limit, allocates, hashes and frees nothing
        # (`KVCacheManager._set_limits` sets them; 0 = unknown).
        self.alloc_limit = self.cache_limit = self.trim_limit = 0
        self.quiet_end = 0  # min(alloc_limit + 1, cache_limit): below it, with the window check, nothing to do
        self.hit_memo: tuple | None = None  # ((num_tokens, pool.hit_version), get_computed_blocks' answer)
        self.stop = prompt_len + max_tokens  # prompt plus every output token
        self.admit_memo: tuple | None = None  # (shape, floor, epoch, blocks) of the admission check (allocate_slots)
        self.finish_at = max_tokens  # output tokens at which it finishes (the scheduler caps it at max_model_len)
        self.eligible = 0  # the schedule() call from which it may be scheduled again (next_decode_eligible_step)
        self.lazy = -1  # steady decode (kvviz/replay/steady.py): the first batch it is replayed in lazily; -1: not

    @property
    def num_tokens(self) -> int:
        """Prompt tokens plus the output tokens sampled so far (vLLM's `Request.num_tokens`)."""
        return self.prompt_len + self.num_output

    def num_hashed_tokens(self) -> int:
        """Tokens covered by `request.block_hashes` (every full block is hashed: block size = hash block size)."""
        return self.num_tokens

    def token_key(self, end: int) -> int:
        """The tokens [0, end) as an int (kvviz/replay/identity.py): the identity of the shared chunk holding
        token end - 1 while they are all shared, else the request's own, with `end`."""
        return ((self.chain[(end - 1) // self.chunk] if end <= self.shared else self.own) << END_BITS) | end

    def reachable_boundaries(self):
        """`replay_boundaries` (no EAGLE: prompt - 1) and the shared-prefix junction (`cache_blocks`)."""
        if self.shared_prefix_boundary:
            return (self.prompt_len - 1, self.shared_prefix_boundary)
        return (self.prompt_len - 1,)
