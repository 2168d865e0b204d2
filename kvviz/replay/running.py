"""The running-request paths of vLLM 0.33's `KVCacheManager.allocate_slots` (vllm/v1/core/kv_cache_manager.py)
for models with no Mamba group, and the token counts below which a running request's next steps need no
pool work at all (the scheduler then skips the call).

Groups of one layer spec (`KVCacheManager.spec_runs`) hold block tables of one shape for every request:
the same operations reach them in the same steps (one hit lookup for all of them, `find_longest_cache_hit`
on the spec group; the same counts allocated, nulled and hashed), so only their block ids differ. What
depends on a table's shape alone (blocks to allocate, the limits, whether full blocks are left to hash) is
asked of the first group of each spec and counted for all of them; blocks are still allocated, freed and
hashed group by group in vLLM's order."""

from __future__ import annotations

from kvviz.replay.identity import END_BITS
from kvviz.replay.managers import mamba_checkpoint_position
from kvviz.replay.pool import NULL


class RunningSlots:
    """`allocate_slots` for scheduled running requests and the limits it leaves (a mixin of `KVCacheManager`)."""

    def _slot_counts(self, request, num_new_tokens: int) -> tuple[int, int, int]:
        """`allocate_slots`' token counts: computed tokens (capped at max_model_len), computed + new, and the
        slots to hold (that, capped at max_model_len)."""
        mml = self.max_model_len
        total = request.num_computed_tokens
        if total > mml:
            total = mml
        main = total + num_new_tokens
        return total, main, (main if main < mml else mml)

    def _allocate_running(self, request, num_new_tokens: int) -> bool:
        """`allocate_slots` for a scheduled running request with no hit and no admission check, full and
        windowed groups only (sliding, chunked local): the same steps as the general path (windows trimmed,
        blocks counted, allocated group by group, full blocks hashed), with the per-group formulas written out."""
        rid = request.rid
        total, main, need = self._slot_counts(request, num_new_tokens)
        if self.windowed:
            processed = total - request.num_in_flight_tokens
            if processed < 0:
                processed = 0
            freed = [m.take_skipped(rid, processed) for m in self.windowed]
            if any(freed):  # each group's free_blocks in turn, in one call
                self.pool.free_runs(freed)
        to_allocate = 0
        for m, members in self.spec_runs:  # Manager.num_blocks_to_allocate with no new computed blocks
            blocks = m.req_to_blocks.get(rid)
            have = len(blocks) if blocks is not None else 0
            k = -(-need // m.block_size)
            if not m.windowed or rid in m.num_cached_block:
                k -= have
            else:
                skipped = m.skipped_tokens(request.num_computed_tokens) // m.block_size
                k -= skipped if skipped > have else have
            if k > 0:
                to_allocate += k * len(members)
        pool = self.pool
        if to_allocate > pool.num_free:
            return False
        for m in self.managers:  # Manager.allocate_new_blocks, group by group
            blocks = m.req_to_blocks.get(rid)
            if blocks is None:
                blocks = m.req_to_blocks[rid] = []
            new = -(-need // m.block_size) - len(blocks)
            if new > 0:
                blocks.extend(pool.get_new_blocks(new, m.gid, rid))
        num_tokens = request.prompt_len + request.num_output
        self.cache_blocks(request, main if main < num_tokens else num_tokens)
        self._set_limits(request, main)
        return True

    def _allocate_dense(self, request, num_new_tokens: int) -> bool:
        """`_allocate_running` for a model of one full-attention group (`KVCacheManager.dense`): no window
        to trim, the blocks for `need` allocated, the full blocks hashed, and `_set_limits`, written out."""
        return self.dense_slots(
            request, request.num_computed_tokens, request.prompt_len + request.num_output, num_new_tokens
        )

    def dense_slots(self, request, computed: int, num_tokens: int, num_new_tokens: int) -> bool:
        """`_allocate_dense` for `request` at `computed` tokens computed and `num_tokens` tokens (its counters at
        that schedule: a steady request's own lag, kvviz/replay/steady.py)."""
        rid = request.rid
        mml = self.max_model_len
        main = (computed if computed < mml else mml) + num_new_tokens
        need = main if main < mml else mml
        m = self.managers[0]
        bs = m.block_size
        tables = m.req_to_blocks
        blocks = tables.get(rid)
        k = -(-need // bs) - (len(blocks) if blocks is not None else 0)
        pool = self.pool
        if k > pool.num_free:
            return False
        if blocks is None:
            blocks = tables[rid] = []
        if k > 0:
            blocks.extend(pool.get_new_blocks(k, m.gid, rid))
        self._cache_dense(request, main if main < num_tokens else num_tokens, m, blocks, main)
        return True

    def dense_crossings(self, items) -> bool:
        """`dense_slots(r, computed, num_tokens, 1)` for each (r, computed, num_tokens) of steady requests in
        running order, at once: the new blocks popped in one call (the same blocks in the same order: a request
        hashes only blocks it holds, none of them free), then each request's newly full blocks hashed and its
        limits set. False, having done nothing, when the pool has not the blocks for all of them."""
        m = self.managers[0]
        bs, gid, mml = m.block_size, m.gid, self.max_model_len
        tables, got_of = m.req_to_blocks, m.num_cached_block
        pool = self.pool
        plan, wanted = [], 0
        for r, computed, num_tokens in items:
            main = (computed if computed < mml else mml) + 1
            need = main if main < mml else mml
            blocks = tables[r.rid]
            k = -(-need // bs) - len(blocks)
            if k > 0:
                wanted += k
            plan.append((r, blocks, k, main, main if main < num_tokens else num_tokens))
        if wanted > pool.num_free:
            return False
        new = pool.get_new_blocks(wanted, gid) if wanted else []
        owner_of, at = (pool.req_owner if pool.dirty is not None else None), 0  # read by the time-lapse alone
        entries = []
        caching, cap = self.caching, mml + 1
        for r, blocks, k, main, upto in plan:
            rid = r.rid
            if k > 0:
                if owner_of is not None:
                    for b in new[at : at + k]:
                        owner_of[b] = rid
                blocks.extend(new[at : at + k])
                at += k
            cache = cap
            if caching:
                got, full = got_of.get(rid, 0), upto // bs
                if got < full:  # Manager.cache_full: a full group has no mask
                    own, chain, chunk, shared = r.own, r.chain, r.chunk, r.shared
                    for i in range(got, full):
                        b, end = blocks[i], (i + 1) * bs
                        key = (chain[(end - 1) // chunk] if end <= shared else own) << END_BITS | end
                        entries.append((key << pool.group_bits | gid, b, end))
                    got = got_of[rid] = full
                cache = (got + 1) * bs
                if cache > cap:
                    cache = cap
            alloc = len(blocks) * bs
            alloc = r.alloc_limit = alloc if alloc < mml else mml
            r.cache_limit, r.trim_limit = cache, cap
            r.quiet_end = alloc + 1 if alloc < cache else cache
        if entries:
            pool.insert_many(entries)
        return True

    def _cache_running_dense(self, request, main: int) -> None:
        """`cache_running` for a model of one full-attention group."""
        num_tokens = request.prompt_len + request.num_output
        m = self.managers[0]
        self._cache_dense(request, main if main < num_tokens else num_tokens, m, m.req_to_blocks[request.rid], main)

    def _cache_dense(self, request, num_tokens: int, m, blocks, main: int) -> None:
        """`cache_blocks` then `_set_limits` for one full-attention group: a full group never trims, so the
        limits are its allocated and hashed blocks."""
        mml = self.max_model_len
        bs = m.block_size
        alloc = len(blocks) * bs
        if self.caching:
            rid = request.rid
            got = m.num_cached_block.get(rid, 0)
            if got < num_tokens // bs:  # num_tokens <= num_tokens of the request: nothing past it to hash
                m.cache_full(request, got, num_tokens // bs)
                got = num_tokens // bs
            cache = (got + 1) * bs
            if cache > mml + 1:
                cache = mml + 1
        else:
            cache = mml + 1
        alloc = request.alloc_limit = alloc if alloc < mml else mml
        request.cache_limit, request.trim_limit = cache, mml + 1
        request.quiet_end = alloc + 1 if alloc < cache else cache

    def cache_running(self, request, main: int) -> None:
        """`allocate_slots` for a running request of a model with no Mamba group when the scheduler knows it
        allocates and frees nothing (main <= alloc_limit, processed < trim_limit: `_allocate_running`'s
        windows trimmed and blocks counted and allocated are no-ops): the full blocks hashed, the limits reset."""
        num_tokens = request.prompt_len + request.num_output
        self.cache_blocks(request, main if main < num_tokens else num_tokens)
        self._set_limits(request, main)

    def _set_limits(self, request, main: int) -> None:
        """After a running request's `allocate_slots`: the token counts up to which the next steps need no
        pool work (the scheduler then skips the call; n <= `skip_max_tokens` scheduled tokens). main <=
        alloc_limit: every group has blocks for `need`; main < cache_limit: every full block up to
        min(main, num_tokens) is hashed and no Mamba group caches its prompt checkpoint; processed <
        trim_limit: no window has a block to free (its first non-null block is still inside) and no Mamba
        group frees a block (`MambaManager.remove_skipped_blocks`: the first non-null block at or after the
        retired ones, the state block of two steps ago). All only grow while the request holds its blocks."""
        rid = request.rid
        mml = self.max_model_len
        alloc, cache, trim = mml, mml + 1, mml + 1
        caching = self.caching
        for m, _ in self.spec_runs:
            bs = m.block_size
            blocks = m.req_to_blocks[rid]
            k = len(blocks) * bs
            if k < alloc:
                alloc = k
            if caching:
                k = (m.num_cached_block.get(rid, 0) + 1) * bs
                if k < cache:
                    cache = k
            if m.windowed:
                # a window's nulls are a prefix of its table (hits start after nulls, blocks leaving the window
                # are nulled from the front): the first non-null block by bisection
                lo, hi = 0, len(blocks)
                while lo < hi:
                    mid = (lo + hi) // 2
                    if blocks[mid] == NULL:
                        lo = mid + 1
                    else:
                        hi = mid
                k = m.trim_limit(lo)
                if k < trim:
                    trim = k
            elif m.kind == "mamba":
                trim, cache = self._mamba_limits(m, request, main, blocks, trim, cache)
                if rid in m.checkpoints:  # the next call pops it (num_blocks_to_allocate): not a no-op
                    alloc = 0
        request.alloc_limit, request.cache_limit, request.trim_limit = alloc, cache, trim
        request.quiet_end = alloc + 1 if alloc < cache else cache  # min(alloc_limit + 1, cache_limit)

    def _mamba_limits(self, m, request, main, blocks, trim, cache):
        """`_set_limits` for one Mamba group: `MambaManager.remove_skipped_blocks` frees block i (past the
        retired ones, or the last state block) once processed >= (i + 1) * block_size + 1; `cache_blocks`
        caches the prompt checkpoint P when its (hybrid: scheduler-block rounded) token count equals P."""
        bs, rid = m.block_size, request.rid
        first = max(m.retired.get(rid, 0), m.live_from.get(rid, 0))  # a table's nulls never come back to life
        while first < len(blocks) and blocks[first] == NULL:
            first += 1
        m.live_from[rid] = first
        if first < len(blocks):
            trim = min(trim, (first + 1) * bs + 1)
        last = m.last_state_block_idx.get(rid)
        if last is not None and blocks[last] != NULL:
            trim = min(trim, (last + 1) * bs + 1)
        if self.caching:
            position = mamba_checkpoint_position(request.prompt_len, bs)
            sbs = self.scheduler_block_size if self.hybrid else 1
            if position > 0 and position % sbs == 0:
                x = min(main, request.prompt_len + request.num_output)
                if x < position:
                    cache = min(cache, position)
                elif x < position + sbs and rid in m.num_cached_block:
                    # `MambaManager._cache_tail` at the window's token counts does nothing while the block at
                    # the checkpoint is absent, null, or already hashed at it (only this request's own calls,
                    # past the other limits, change that)
                    idx = position // bs - 1
                    if idx < len(blocks) and blocks[idx] != NULL:
                        pool = self.pool
                        if pool.hash[blocks[idx]] is None or pool.hash_tokens[blocks[idx]] != position:
                            cache = 0
                elif x < position + sbs:
                    cache = 0
        return trim, cache
