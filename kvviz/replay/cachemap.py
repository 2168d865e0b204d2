"""The prefix-cache map of vLLM 0.33's `BlockPool` (vllm/v1/core/block_pool.py `BlockHashToBlockMap`,
`cache_full_blocks`, `_maybe_evict_cached_block`, `get_cached_block`), a mixin of kvviz/replay/pool.py's
`BlockPool`: cache key -> the blocks holding it, each block's key, and what the replay's hit searches ask of it
(kvviz/replay/identity.py: keys are flat ints, identity << END_BITS | end, then << group bits | group)."""

from __future__ import annotations

from itertools import compress

from kvviz.replay.identity import END_BITS

NULL = 0  # the null block's id (`BlockPool.null_block`: popped first, never handed out)


class PrefixCacheMap:
    """The cached-block map and its bookkeeping per identity (`BlockPool` holds the state)."""

    __slots__ = ()

    def get_cached_block(self, key: int, group_ids) -> list[int] | None:
        """`BlockPool.get_cached_block`: one cached block per group for the tokens `key` (`Request.token_key`),
        or None."""
        out = []
        cached = self.cached
        key <<= self.group_bits
        for g in group_ids:
            ids = cached.get(key | g)
            if not ids:
                return None
            out.append(ids[0])
        return out

    def insert_hash(self, key, b: int, num_tokens: int) -> None:
        """`BlockPool._insert_block_hash` (one hash per block: hash_block_size is the block size)."""
        if self.hash[b] == key:
            return
        ids = self.cached.get(key)
        if ids is not None and b in ids:
            return
        if self.ref[b] == 0:
            self.cached_free += 1
        if self.hash[b] is not None:  # a block re-keyed: drop its old entry first
            self.evict_hash(b)
        self.hash[b] = key
        self.hash_tokens[b] = num_tokens
        if self.dirty is not None:
            self.dirty.add(b)
        if ids is None:
            self.cached[key] = [b]
        else:
            ids.append(b)
        self._count(key >> self.shift, 1)

    def insert_run(self, blocks, start: int, stop: int, mask, block_size: int, group: int, request) -> None:
        """`BlockPool.cache_full_blocks`: `insert_hash` for blocks[start:stop] of `request`'s table in `group`
        (null and masked-out blocks skipped), each under `request.token_key(its end)` (`insert_many`)."""
        gbits = self.group_bits
        chain, chunk, shared, own = request.chain, request.chunk, request.shared, request.own
        entries = []
        for i in range(start, stop) if mask is None else compress(range(start, stop), mask):
            b = blocks[i]
            if b == NULL:
                continue
            end = (i + 1) * block_size
            key = ((chain[(end - 1) // chunk] if end <= shared else own) << END_BITS | end) << gbits | group
            entries.append((key, b, end))
        self.insert_many(entries)

    def insert_many(self, entries) -> None:
        """`insert_hash` of each (key, block, end) in turn, the common case (a block not keyed yet) written out,
        the entries of one identity in a row counted once."""
        h, cached, ref, tokens, dirty = self.hash, self.cached, self.ref, self.hash_tokens, self.dirty
        shift = self.shift
        ident, added = None, 0  # the identity being counted, its new entries
        for key, b, end in entries:
            if h[b] is not None:  # already keyed (or re-keyed): the general path
                self.insert_hash(key, b, end)
                continue
            ids = cached.get(key)
            if ids is None:
                cached[key] = [b]
            elif b in ids:
                continue
            else:
                ids.append(b)
            if ref[b] == 0:
                self.cached_free += 1
            h[b] = key
            tokens[b] = end
            if dirty is not None:
                dirty.add(b)
            if key >> shift != ident:
                if added:
                    self._count(ident, added)
                ident, added = key >> shift, 0
            added += 1
        if added:
            self._count(ident, added)

    def _count(self, ident: int, added: int) -> None:
        """`added` new cached entries of `ident`: a shared chunk's count and version move; a request's own entries
        move its version only when it is watched (kvviz/replay/identity.py: shared identities are odd, own ones
        even)."""
        if ident & 1:
            self.ident_count[ident] = self.ident_count.get(ident, 0) + added
            self.ident_version[ident] = self.ident_version.get(ident, 0) + added
        elif ident in self.own_watch:
            self.own_watch[ident] += 1

    def _uncount(self, ident: int) -> None:
        """One cached entry of `ident` dropped (`_count`'s inverse)."""
        if ident & 1:
            self.ident_version[ident] += 1
            left = self.ident_count[ident] - 1
            if left:
                self.ident_count[ident] = left
            else:
                del self.ident_count[ident]
        elif ident in self.own_watch:
            self.own_watch[ident] += 1

    def evict_hash(self, b: int) -> bool:
        """`BlockPool._maybe_evict_cached_block`: drop the block's prefix-cache entry."""
        key = self.hash[b]
        if key is None:
            return False
        if self.ref[b] == 0:
            self.cached_free -= 1
        ids = self.cached.get(key)
        if ids is not None and b in ids:
            ids.remove(b)
            if not ids:
                del self.cached[key]
            self._uncount(key >> self.shift)
        self.hash[b] = None
        self.hash_tokens[b] = 0
        if self.dirty is not None:
            self.dirty.add(b)
        return True

    def hit_version(self, request) -> tuple:
        """Changes whenever a cached entry of the request's identities (its shared chunks, its own) does: a
        prefix-hit search gives the same answer while this and the request's length stay the same (each count of
        changes only grows, so their sum moves whenever one does; a request's own are counted once it was
        preempted, `watch`: before, none exist)."""
        own = self.own_watch.get(request.own, 0)  # a request never run has no entry of its own
        v = self.ident_version
        chain = request.chain
        if not chain:
            return (own, 0)
        if len(chain) == 1:
            return (own, v.get(chain[0], 0))
        return (own, sum([v.get(c, 0) for c in chain]))

    def watch(self, own: int) -> None:
        """Count the changes of a preempted request's own cached entries from now on (`hit_version`)."""
        self.own_watch.setdefault(own, 0)

    def unwatch(self, own: int) -> None:
        """A request is done: its own entries are nobody's to search."""
        self.own_watch.pop(own, None)

    def hit_span(self, request, n: int, block_size: int) -> int:
        """How many of the first `n` blocks of `request` can be in the cache at all: all once it ran (blocks of its
        own may be cached), else none past the last shared chunk with a cached entry (a block's hash names the
        chunk holding its last token), none when no chunk has one."""
        if request.num_preemptions:  # it ran: entries of its own may be cached
            return n
        count = self.ident_count
        chain = request.chain
        for k in range(len(chain) - 1, -1, -1):
            if count.get(chain[k]):
                end = (k + 1) * request.chunk
                if end > request.shared:
                    end = request.shared
                return min(n, end // block_size)
        return 0
