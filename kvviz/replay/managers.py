"""Per-group block tables, as vLLM 0.33's single-type managers keep them
(vllm/v1/core/single_type_kv_cache_manager.py): `FullAttentionManager`, `SlidingWindowManager`
and `MambaManager` in 'align' mode, with prefix caching at `hash_block_size` equal to the block size.

A request's block hash at block i is the identity of the tokens it covers (`Request.token_key`,
kvviz/replay/identity.py): the shared chunk's when the block ends inside the shared prompt tokens (a
prefix group's prefix, a hash chain), else the request's own (chained hashes: a block past the shared
tokens is unique to the request). `prefix_cache_retention_interval` is vLLM 0.33's
default 0: sliding-window and Mamba groups cache only the blocks a later hit can reach (the replay
boundary prompt - 1 and a detected shared-prefix junction; `reachable_block_mask`).
"""

from __future__ import annotations

from itertools import dropwhile
from operator import not_

from kvviz.base.regions import cdiv
from kvviz.replay.identity import END_BITS
from kvviz.replay.pool import NULL, BlockPool


def mamba_checkpoint_position(num_tokens: int, block: int) -> int:
    """vLLM 0.33 `get_mamba_prefill_checkpoint_position` (no EAGLE, no hash lookahead)."""
    return max((num_tokens - 1) // block * block, 0)


def mamba_checkpoint_valid(
    start: int, end: int, position: int, hash_block: int, block: int, alignment: int | None
) -> bool:
    """vLLM 0.33 `is_mamba_prefill_checkpoint_valid`: whether the backend can export the checkpoint."""
    if alignment is None:
        return False
    return (
        start % hash_block == 0
        and cdiv(end, block) - 2 > (start - 1) // block
        and start + hash_block <= position
        and start < position < end
        and (position - start) % alignment == 0
    )


class Manager:
    """`SingleTypeKVCacheManager` (full attention): blocks held for the whole request."""

    kind = "full"
    window = None
    windowed = False  # frees the blocks that leave an attention window (sliding, chunked local): `trim_limit`

    def __init__(
        self, pool: BlockPool, group_id: int, block_size: int, caching: bool, admission_cap: int | None = None
    ) -> None:
        self.pool = pool
        self.gid = group_id
        self.block_size = block_size
        self.caching = caching
        self.cap = admission_cap  # max_admission_blocks_per_request (sliding windows, chunked local attention)
        self.req_to_blocks: dict[str, list[int]] = {}
        self.num_cached_block: dict[str, int] = {}

    def blocks(self, rid: str) -> list[int]:
        """`req_to_blocks[rid]` (a defaultdict in vLLM: reading creates the entry)."""
        got = self.req_to_blocks.get(rid)
        if got is None:
            got = self.req_to_blocks[rid] = []
        return got

    def skipped_tokens(self, num_computed: int) -> int:
        """`get_num_skipped_tokens`: full attention skips nothing."""
        return 0

    def num_blocks_to_allocate(
        self, rid, num_tokens, new_computed, total_computed, local_computed, main_tokens, cap=False, prefill_end=0
    ) -> int:
        """`SingleTypeKVCacheManager.get_num_blocks_to_allocate`."""
        required = cdiv(num_tokens, self.block_size)
        if cap and self.cap is not None:
            required = min(required, self.cap)
        have = len(self.req_to_blocks.get(rid, ()))
        if rid in self.num_cached_block:
            return max(required - have, 0)
        skipped = self.skipped_tokens(total_computed) // self.block_size
        new = max(required - max(skipped, len(new_computed) + have), 0)
        return new + self.pool.num_evictable(new_computed[max(0, skipped - have) :])

    def add_local_computed_blocks(self, rid, new_computed, local_computed) -> None:
        """`add_local_computed_blocks`: touch the hit blocks, null the ones left of the window."""
        blocks = self.blocks(rid)
        skipped = self.skipped_tokens(local_computed) // self.block_size
        if skipped > 0:
            new_computed = new_computed[skipped:]
        if self.caching:
            self.pool.touch(new_computed, rid)
        blocks.extend([NULL] * skipped)
        blocks.extend(new_computed)
        self.num_cached_block[rid] = len(blocks)

    def allocate_new_blocks(self, rid, num_tokens, main_tokens) -> None:
        """`allocate_new_blocks`: enough blocks for `num_tokens` slots."""
        blocks = self.blocks(rid)
        new = cdiv(num_tokens, self.block_size) - len(blocks)
        if new > 0:
            blocks.extend(self.pool.get_new_blocks(new, self.gid, rid))

    def mask(self, start, end, request) -> list[bool] | None:
        """`reachable_block_mask`: None caches every full block (full attention)."""
        return None

    def cache_blocks(self, request, num_tokens: int) -> None:
        """`SingleTypeKVCacheManager.cache_blocks` + `BlockPool.cache_full_blocks`: hash the request's
        full blocks up to `num_tokens` (masked-out and null blocks skipped)."""
        cached = self.num_cached_block.get(request.rid, 0)
        hashed = request.prompt_len + request.num_output  # request.num_hashed_tokens()
        full = (num_tokens if num_tokens < hashed else hashed) // self.block_size
        if cached < full:
            self.cache_full(request, cached, full)

    def cache_full(self, request, cached: int, full: int) -> None:
        """`cache_blocks`' hashing: blocks `cached` to `full` - 1 of the request (cached < full <= its hashed
        blocks), masked-out and null blocks skipped."""
        self.cache_run(request, cached, full, None if self.kind == "full" else self.mask(cached, full, request))

    def cache_run(self, request, cached: int, full: int, mask) -> None:
        """`cache_full` with the reachable-block mask given (one spec's groups share it): nothing to insert when
        the mask keeps no block."""
        rid = request.rid
        if mask is None or True in mask:
            self.pool.insert_run(self.req_to_blocks[rid], cached, full, mask, self.block_size, self.gid, request)
        self.num_cached_block[rid] = full

    def free(self, rid: str) -> None:
        """`free` / `pop_blocks_for_free`: leading nulls trimmed, freed tail first."""
        blocks = self.req_to_blocks.pop(rid, [])
        self.num_cached_block.pop(rid, None)
        held = list(dropwhile(not_, blocks))  # the table from its first non-null block (ids > NULL = 0)
        held.reverse()
        self.pool.free_blocks(held)

    def remove_blocks_in_range(self, rid, first, last) -> None:
        """`_remove_blocks_in_range`: free [first, last) back to front, stop at a null."""
        freed = self._take_range(rid, first, last)
        if freed:
            self.pool.free_blocks(freed)

    def _take_range(self, rid, first, last) -> list[int]:
        """`remove_blocks_in_range` less the freeing: the blocks it frees, in its order, nulled in the table."""
        blocks = self.req_to_blocks.get(rid)
        if blocks is None or first >= last:
            return []
        last = min(last, len(blocks))
        if first >= last:
            return []
        freed = blocks[first:last]
        freed.reverse()  # back to front, up to the first null met
        if NULL in freed:
            del freed[freed.index(NULL) :]
        if freed:
            blocks[last - len(freed) : last] = [NULL] * len(freed)
        return freed

    def remove_skipped_blocks(self, rid, processed: int) -> None:
        """`remove_skipped_blocks`: free blocks that left the attention window."""
        skipped = self.skipped_tokens(processed)
        if skipped <= 0:
            return
        blocks = self.blocks(rid)
        self.remove_blocks_in_range(rid, 0, min(skipped // self.block_size, len(blocks)))

    def take_skipped(self, rid, processed: int) -> list[int]:
        """`remove_skipped_blocks` less the freeing, for a window (its base `_remove_blocks_in_range`; the
        caller frees, `BlockPool.free_runs`)."""
        skipped = self.skipped_tokens(processed)
        if skipped <= 0:
            return []
        blocks = self.blocks(rid)
        return self._take_range(rid, 0, min(skipped // self.block_size, len(blocks)))

    @staticmethod
    def find_longest_cache_hit(request, max_length, gids, pool, block_size):
        """`FullAttentionManager.find_longest_cache_hit`: the longest run of cached blocks from the start."""
        out = [[] for _ in gids]
        # pool.get_cached_block(request.token_key(end), gids) written out; no block past hit_span is cached
        cached, own, chain, chunk, shared = pool.cached, request.own, request.chain, request.chunk, request.shared
        span = pool.hit_span(request, max_length // block_size, block_size)
        if len(gids) == 1:
            lst, g, gbits = out[0], gids[0], pool.group_bits
            start = block_size
            if len(chain) == 1 and shared >= block_size:  # a prefix group's run, scanned once per cache change
                whole = shared // block_size  # blocks all of whose tokens are shared
                version = pool.ident_version.get(chain[0], 0)
                memo = pool.prefix_runs.get((chain[0], whole, g))
                if memo is None or memo[0] != version:
                    run = []
                    for end in range(block_size, (whole + 1) * block_size, block_size):
                        ids = cached.get((chain[0] << END_BITS | end) << gbits | g)
                        if not ids:
                            break
                        run.append(ids[0])
                    memo = pool.prefix_runs[(chain[0], whole, g)] = (version, run)
                run = memo[1]
                n = span if span < whole else whole
                lst.extend(run[:n] if len(run) > n else run)
                if len(lst) < whole or span <= whole:
                    return out, len(lst) * block_size
                start = (whole + 1) * block_size
            for end in range(start, (span + 1) * block_size, block_size):
                ids = cached.get(((chain[(end - 1) // chunk] if end <= shared else own) << END_BITS | end) << gbits | g)
                if not ids:
                    break
                lst.append(ids[0])
            return out, len(lst) * block_size
        for end in range(block_size, (span + 1) * block_size, block_size):
            got = pool.get_cached_block(request.token_key(end), gids)
            if not got:
                break
            for lst, b in zip(out, got):
                lst.append(b)
        return out, len(out[0]) * block_size

    def new_step_starts(self) -> None:
        """At the start of an engine step: forget the blocks counted as new in the last one."""
        return None


class SlidingWindowManager(Manager):
    """`SlidingWindowManager`: blocks that leave the window are freed; a hit needs the
    cdiv(window - 1, block) blocks before its end."""

    kind = "sliding"
    windowed = True

    def __init__(self, *args, window: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.window = window

    def skipped_tokens(self, num_computed: int) -> int:
        """`SlidingWindowManager.get_num_skipped_tokens`: the tokens before the window of the next token."""
        return max(0, num_computed - self.window + 1)

    def trim_limit(self, first: int) -> int:
        """The processed tokens at which block `first` leaves the window (`skipped_tokens` reaches its end)."""
        return (first + 1) * self.block_size + self.window - 1

    def need(self) -> int:
        """The blocks this sliding window needs at most per request (the admission cap)."""
        return cdiv(self.window - 1, self.block_size)

    def mask(self, start, end, request):
        """`SlidingWindowManager.reachable_block_mask` at retention interval 0: only the `need` blocks
        ending at each reachable boundary (prompt - 1, and the shared-prefix junction)."""
        bs, need = self.block_size, self.need()
        mask = [False] * (end - start)
        for boundary in request.reachable_boundaries():
            stop = boundary // bs  # alignment = block size
            for j in range(max(start, stop - need), min(end, stop)):
                mask[j - start] = True
        return mask

    @staticmethod
    def find_longest_cache_hit_window(request, max_length, gids, pool, block_size, window):
        """`SlidingWindowManager.find_longest_cache_hit`: right to left, the first run of
        cdiv(window - 1, block) cached blocks; blocks before it are nulls. The same run is found by testing
        each candidate run from its left end and, at a miss, moving the candidate's right end left of it
        (every run through a missed block fails); with none, the run of hits from block 0 is kept."""
        need = cdiv(window - 1, block_size)
        n = max_length // block_size
        cached, key_of, gbits = pool.cached, request.token_key, pool.group_bits
        seen: dict = {}

        def hit(i):
            got = seen.get(i, False)
            if got is False:
                key = key_of((i + 1) * block_size) << gbits
                got = []
                for g in gids:
                    ids = cached.get(key | g)
                    if not ids:
                        got = None
                        break
                    got.append(ids[0])
                seen[i] = got
            return got

        last = pool.hit_span(request, n, block_size) - 1  # later blocks all miss
        out = [[NULL] * n for _ in gids]
        while last - need + 1 >= 0:
            j = last - need + 1
            while j <= last and hit(j) is not None:
                j += 1
            if j > last:
                for i in range(last - need + 1, last + 1):
                    for lst, b in zip(out, seen[i]):
                        lst[i] = b
                for lst in out:
                    del lst[last + 1 :]
                return out, len(out[0]) * block_size
            last = j - 1
        run = 0
        while run <= last and hit(run) is not None:
            for lst, b in zip(out, seen[run]):
                lst[run] = b
            run += 1
        for lst in out:
            del lst[run:]
        return out, len(out[0]) * block_size


class ChunkedLocalManager(Manager):
    """`ChunkedLocalAttentionManager` (Llama 4): a token attends only to the tokens of its own
    `attention_chunk_size`-token chunk, so the blocks left of the current chunk are freed, and a hit
    takes them as nulls and looks up the blocks of the last chunk left to right. Every full block is
    cached (no reachable-block mask: the base `reachable_block_mask`)."""

    kind = "chunked"
    windowed = True

    def __init__(self, *args, chunk: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.chunk = chunk

    def skipped_tokens(self, num_computed: int) -> int:
        """`ChunkedLocalAttentionManager.get_num_skipped_tokens`: the tokens left of the current chunk."""
        return num_computed // self.chunk * self.chunk

    def trim_limit(self, first: int) -> int:
        """The processed tokens at which block `first` leaves the window (`skipped_tokens` reaches its end)."""
        return cdiv((first + 1) * self.block_size, self.chunk) * self.chunk

    @staticmethod
    def find_longest_cache_hit_chunked(request, max_length, gids, pool, block_size, chunk):
        """`ChunkedLocalAttentionManager.find_longest_cache_hit`: the blocks left of the chunk holding token
        `max_length` are nulls (outside every later token's window: computed), then the run of cached blocks
        from the chunk's start, at most max_length // block_size blocks in all."""
        max_blocks = max_length // block_size
        start = (max_length // chunk * chunk) // block_size if max_length > 0 else 0
        out = [[NULL] * start for _ in gids]
        for i in range(start, min(max_blocks, pool.hit_span(request, max_blocks, block_size))):
            got = pool.get_cached_block(request.token_key((i + 1) * block_size), gids)
            if not got:
                break
            for lst, b in zip(out, got):
                lst.append(b)
        return out, len(out[0]) * block_size
