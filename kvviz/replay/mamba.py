"""vLLM 0.33's `MambaManager` in 'align' mode (vllm/v1/core/single_type_kv_cache_manager.py):
one state block per scheduled block boundary, the previous step's state block freed once copied,
an optional prefill checkpoint block (`num_prefill_checkpoint_blocks`), and prefix-cache hits on the
single state block that ends at a boundary. No speculative blocks, no fine-grained hits
(hash_block_size is the block size)."""

from __future__ import annotations

from kvviz.base.regions import cdiv
from kvviz.replay.managers import Manager, mamba_checkpoint_position, mamba_checkpoint_valid
from kvviz.replay.pool import NULL


class MambaManager(Manager):
    """`MambaManager` (mamba_cache_mode='align')."""

    kind = "mamba"

    def __init__(self, *args, checkpoint_blocks: int = 0, checkpoint_alignment: int | None = None, **kw) -> None:
        super().__init__(*args, **kw)
        self.has_checkpoint_blocks = checkpoint_blocks > 0
        self.alignment = checkpoint_alignment
        self.cached_this_step: set = set()
        self.last_state_block_idx: dict[str, int] = {}
        self.retired: dict[str, int] = {}
        self.live_from: dict[str, int] = {}  # where the scan for the first non-null block resumes (_set_limits)
        self.allocated: set[str] = set()
        self.checkpoints: dict[str, tuple[int, int]] = {}

    def skipped_tokens(self, num_computed: int) -> int:
        """`MambaManager.get_num_skipped_tokens`: only the last state is needed."""
        return num_computed - 1

    def remove_blocks_in_range(self, rid, first, last) -> None:
        """`MambaManager._remove_blocks_in_range`: nulls are gaps, not a stop; retired blocks remembered."""
        blocks = self.req_to_blocks.get(rid, [])
        first = max(first, self.retired.get(rid, 0))
        last = min(last, len(blocks))
        if first >= last:
            return
        freed = []
        for i in range(last - 1, first - 1, -1):
            if blocks[i] == NULL:
                continue
            freed.append(blocks[i])
            blocks[i] = NULL
        if freed:
            self.pool.free_blocks(freed)
        self.retired[rid] = last

    def remove_skipped_blocks(self, rid, processed: int) -> None:
        """`MambaManager.remove_skipped_blocks`: also free the state block of two steps ago. The base's
        `remove_blocks_in_range` written out up to its first test: nothing to free up to the retired blocks."""
        bs = self.block_size
        if processed > 1:  # the base: get_num_skipped_tokens = processed - 1 tokens skipped
            blocks = self.req_to_blocks.get(rid)
            if blocks is None:
                blocks = self.req_to_blocks[rid] = []
            end = (processed - 1) // bs
            if end > len(blocks):
                end = len(blocks)
            if end > self.retired.get(rid, 0):
                self.remove_blocks_in_range(rid, 0, end)
        last = self.last_state_block_idx.get(rid)
        if last is not None and last < -(-processed // bs) - 1:
            blocks = self.req_to_blocks[rid]
            if blocks[last] != NULL:
                self.pool.free_blocks([blocks[last]])
                blocks[last] = NULL

    def _needs_checkpoint(self, rid, start, end, position, prefill_end) -> bool:
        """`MambaManager._needs_internal_checkpoint`."""
        if not self.has_checkpoint_blocks or end < prefill_end:
            return False
        idx = cdiv(end, self.block_size) - 2
        blocks = self.blocks(rid)
        return (
            mamba_checkpoint_valid(start, end, position, self.block_size, self.block_size, self.alignment)
            and idx >= 0
            and (idx >= len(blocks) or blocks[idx] == NULL or (rid in self.allocated and idx >= len(blocks)))
        )

    def num_blocks_to_allocate(
        self, rid, num_tokens, new_computed, total_computed, local_computed, main_tokens, cap=False, prefill_end=0
    ) -> int:
        """`MambaManager.get_num_blocks_to_allocate` ('align'): at most one new state block (two with a
        prefill checkpoint); a hit on a state cached in this step waits for the next step."""
        pool = self.pool
        if new_computed and pool.hash[new_computed[-1]] in self.cached_this_step:
            return pool.num_blocks + 1
        num_tokens = main_tokens
        bs = self.block_size
        blocks = self.req_to_blocks.get(rid)
        if blocks is None:
            blocks = self.req_to_blocks[rid] = []
        new = -(-num_tokens // bs) - len(new_computed) - len(blocks)
        position = mamba_checkpoint_position(num_tokens, bs)
        if not self._needs_checkpoint(rid, total_computed, num_tokens, position, prefill_end):
            position = 0
        if not cap:
            if position > 0:
                self.checkpoints[rid] = (position, cdiv(num_tokens, self.block_size) - 2)
            else:
                self.checkpoints.pop(rid, None)
        if new > 0:
            new = min(new, 1 + int(position > 0))
        return new + pool.num_evictable(new_computed) if new_computed else new

    def allocate_new_blocks(self, rid, num_tokens, main_tokens) -> None:
        """`MambaManager.allocate_new_blocks` ('align'): nulls up to the state (and checkpoint) slots."""
        blocks = self.req_to_blocks.get(rid)
        if blocks is None:
            blocks = self.req_to_blocks[rid] = []
        required = -(-main_tokens // self.block_size)
        checkpoint = int(rid in self.checkpoints)
        if required <= len(blocks) and not checkpoint:
            self.allocated.add(rid)
            return
        prev = len(blocks)
        if rid in self.allocated or prev > 0:
            self.last_state_block_idx[rid] = prev - 1
        skipped = required - 1
        if prev < skipped:
            blocks.extend([NULL] * (skipped - checkpoint - prev))
        new = max(required - len(blocks), 0)
        blocks.extend(self.pool.get_new_blocks(new, self.gid, rid))
        self.allocated.add(rid)

    def free(self, rid: str) -> None:
        """`MambaManager.pop_blocks_for_free` then `free`."""
        self.allocated.discard(rid)
        self.last_state_block_idx.pop(rid, None)
        self.retired.pop(rid, None)
        self.live_from.pop(rid, None)
        self.checkpoints.pop(rid, None)
        super().free(rid)

    def mask(self, start, end, request):
        """`MambaManager.reachable_block_mask` at retention interval 0: the one state block ending at
        each reachable boundary."""
        bs = self.block_size
        mask = [False] * (end - start)
        for boundary in request.reachable_boundaries():
            j = boundary // bs - 1
            if start <= j < end:
                mask[j - start] = True
        return mask

    def cache_blocks(self, request, num_tokens: int) -> None:
        """`MambaManager.cache_blocks`: full state blocks, then the prompt checkpoint
        (`_cache_partial_tail_block`); every hash cached here is remembered for this step."""
        rid = request.rid
        before = self.num_cached_block.get(rid, 0)
        super().cache_blocks(request, num_tokens)
        after = self.num_cached_block.get(rid, 0)
        added = self._cache_tail(request, num_tokens)
        if added is not None:
            self.cached_this_step.add(added)
        if after > before:
            blocks, h = self.req_to_blocks[rid], self.pool.hash
            for i in range(before, after):
                if blocks[i] != NULL and h[blocks[i]] is not None:
                    self.cached_this_step.add(h[blocks[i]])

    def _tail_step(self, request, num_tokens: int):
        """What `MambaManager._cache_partial_tail_block` (hash_block_size == block_size) would do at
        `num_tokens`: None (nothing), ("evict", b) (a checkpoint other than the prompt's or the shared-prefix
        junction's: its block's hash dropped), or ("cache", b, position, replace) (the prompt or junction
        checkpoint, or with none the prompt checkpoint position itself, hashed into a block not yet hashed there)."""
        bs, pool, rid = self.block_size, self.pool, request.rid
        prompt_position = mamba_checkpoint_position(request.prompt_len, bs)
        checkpoint = self.checkpoints.get(rid)
        if checkpoint is not None:
            position, idx = checkpoint
            b = self.req_to_blocks[rid][idx]
            if position != prompt_position and position != request.shared_prefix_boundary:
                return ("evict", b) if pool.hash[b] is not None else None
            replace = True
        else:
            if num_tokens <= 0 or num_tokens % bs or num_tokens != prompt_position:
                return None
            blocks = self.req_to_blocks[rid]
            idx = num_tokens // bs - 1
            if idx >= len(blocks):
                return None
            b, position, replace = blocks[idx], num_tokens, False
        if b == NULL or (pool.hash[b] is not None and pool.hash_tokens[b] == position):
            return None
        return ("cache", b, position, replace)

    def tail_is_noop(self, request, num_tokens: int) -> bool:
        """Whether `cache_tail` at `num_tokens` would change nothing (asked of a spec's first group)."""
        return self._tail_step(request, num_tokens) is None

    def cache_tail(self, request, num_tokens: int) -> None:
        """`cache_blocks` when every full block up to `num_tokens` is hashed already: the tail block alone."""
        added = self._cache_tail(request, num_tokens)
        if added is not None:
            self.cached_this_step.add(added)

    def _cache_tail(self, request, num_tokens: int):
        """`MambaManager._cache_partial_tail_block`: the hash it cached, or None."""
        step = self._tail_step(request, num_tokens)
        if step is None:
            return None
        if step[0] == "evict":
            self.pool.evict_hash(step[1])
            return None
        _, b, position, replace = step  # BlockPool.cache_partial_block at a block boundary
        key = request.token_key(position) << self.pool.group_bits | self.gid
        if replace:
            self.pool.evict_hash(b)
        self.pool.insert_hash(key, b, position)
        return key

    def new_step_starts(self) -> None:
        """At the start of an engine step: forget the state blocks counted as new in the last one."""
        self.cached_this_step.clear()

    @staticmethod
    def find_longest_cache_hit_state(request, max_length, gids, pool, block_size):
        """`MambaManager.find_longest_cache_hit`: right to left, the last cached state block."""
        out = [[] for _ in gids]
        for i in range(pool.hit_span(request, max_length // block_size, block_size) - 1, -1, -1):
            got = pool.get_cached_block(request.token_key((i + 1) * block_size), gids)
            if got:
                for lst, b in zip(out, got):
                    lst.extend([NULL] * i)
                    lst.append(b)
                return out, (i + 1) * block_size
        return out, 0
