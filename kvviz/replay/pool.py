"""One block pool for every KV cache group, as vLLM 0.33's `BlockPool` keeps it
(vllm/v1/core/block_pool.py, vllm/v1/core/kv_cache_utils.py `FreeKVCacheBlockQueue`).

Blocks are plain integer ids with per-id arrays (reference count, prefix-cache hash, the tokens the
hash covers); the free queue is the same doubly linked list vLLM walks, kept in two integer arrays,
so eviction follows vLLM's order exactly: `get_new_blocks` pops from the front, `free_blocks` puts
blocks without a hash at the front (`prepend_n`) and hashed blocks at the back (`append_n`), and a
cached free block leaves the cache only when it is handed out again (LRU eviction).
Block 0 is the null block (`BlockPool.null_block`): popped first, never freed, never counted free.

The blocks never handed out yet are ids `fresh` to num_blocks - 1, in id order, where vLLM's queue holds
them from the start (after the blocks freed to its front, before those freed to its back): one node of the
list (`UNTOUCHED`) stands for all of them, and the per-id arrays grow only when one is handed out. A pool
costs the blocks a run touches, not the blocks it has: a budget of 2**60 bytes replays like a large one.
"""

from __future__ import annotations

from kvviz.replay.cachemap import NULL, PrefixCacheMap
from kvviz.replay.identity import END_BITS

__all__ = ["NULL", "BlockPool"]
# The list's sentinels, kept as the last three slots of `nxt` / `prv` (new ids are inserted before them)
HEAD, UNTOUCHED, TAIL = -3, -2, -1


class BlockPool(PrefixCacheMap):
    """vLLM 0.33 `BlockPool` over `num_blocks` ids: the free queue, reference counts and the
    prefix-cache map (hash with group id -> block ids, `BlockHashToBlockMap`)."""

    __slots__ = (
        "num_blocks",
        "enable_caching",
        "ref",
        "hash",
        "hash_tokens",
        "nxt",
        "prv",
        "num_free",
        "fresh",
        "cached",
        "owner",
        "held",
        "cached_free",
        "ident_count",
        "req_owner",
        "dirty",
        "ident_version",
        "ref_epoch",
        "group_bits",
        "shift",
        "prefix_runs",
        "own_watch",
    )

    def __init__(self, num_blocks: int, enable_caching: bool) -> None:
        self.num_blocks = num_blocks
        self.enable_caching = enable_caching
        self.ref: list[int] = []
        self.hash: list = []
        self.hash_tokens: list[int] = []
        self.owner: list[int] = []  # the group a block id was handed to (one owner per id)
        self.req_owner: list = []  # the request a block id was last handed to: kept while the time-lapse records
        # Linked list: HEAD -> UNTOUCHED -> TAIL, the sentinels' slots last (ids 0.. are inserted before them)
        self.nxt = [UNTOUCHED, TAIL, TAIL]
        self.prv = [HEAD, HEAD, UNTOUCHED]
        self.fresh = 0  # ids below it have been handed out at least once
        self.num_free = num_blocks
        self.held: list[int] = [0]  # per group: blocks with a reference (set by the manager)
        self.cached_free = 0  # free blocks still holding a hash (evictable)
        self.cached: dict = {}  # key -> list of block ids, first is the one `get_one_block` returns
        # Cached entries per shared identity (a chunk of a prefix or hash chain): a lookup of a key whose identity
        # has none misses, so hit searches skip those blocks (`hit_span`).
        self.ident_count: dict = {}
        self.ident_version: dict = {}  # identity -> times its cached entries changed (hit searches memoised)
        # own identity of a request that ran and waits again -> times its cached entries changed (`watch`): the
        # only requests whose hit search can find entries of their own
        self.own_watch: dict = {}
        # (prefix group's identity, its whole blocks, group) -> (its version, the cached run from block 0): the hit
        # search of a prefix group's requests, scanned again only when the group's cached entries change
        self.prefix_runs: dict = {}
        self.dirty: set | None = None  # block ids whose state changed this step, when the time-lapse is recorded
        self.ref_epoch = 0  # counts the calls that freed a block or touched a free one (admission counts memoised)
        self.set_groups(1)
        got = self.get_new_blocks(1)  # BlockPool.__init__: null_block = free_block_queue.popleft()
        assert got == [NULL]
        self.held[0] = 0
        self.ref[NULL] = 0  # never freed, never counted: its count is not read

    def set_groups(self, n: int) -> None:
        """The pool serves `n` groups: a cache key is `token_key << group_bits | group` (kvviz/replay/identity.py),
        its identity `key >> shift`."""
        self.held = [0] * n
        self.group_bits = max(n - 1, 1).bit_length()
        self.shift = END_BITS + self.group_bits

    # ---- FreeKVCacheBlockQueue ---------------------------------------------------------
    def _remove(self, b: int) -> None:
        """`FreeKVCacheBlockQueue.remove`: take a block out of the middle (a prefix hit on it)."""
        if self.hash[b] is not None:
            self.cached_free -= 1
        p, q = self.prv[b], self.nxt[b]
        self.nxt[p] = q
        self.prv[q] = p
        self.num_free -= 1

    def _prepend(self, blocks: list[int]) -> None:
        if not blocks:
            return
        nxt, prv = self.nxt, self.prv
        first = nxt[HEAD]
        p = HEAD
        for b in blocks:
            prv[b] = p
            nxt[p] = b
            p = b
        nxt[p] = first
        prv[first] = p
        self.num_free += len(blocks)

    def free_ids(self) -> list[int]:
        """The free queue front to back, the blocks never handed out included (tests)."""
        out, b, nxt = [], self.nxt[HEAD], self.nxt
        while b != TAIL:
            if b == UNTOUCHED:
                out.extend(range(self.fresh, self.num_blocks))
            else:
                out.append(b)
            b = nxt[b]
        return out

    # ---- BlockPool -----------------------------------------------------------------------
    def take_changes(self) -> tuple:
        """The blocks whose state changed since the last call, each as (block id, state, group, request):
        state 1 held, 2 free with a prefix-cache hash (evictable), 0 free; group and request of its last owner."""
        dirty = self.dirty
        if not dirty:
            return ()
        ref, h, owner, req = self.ref, self.hash, self.owner, self.req_owner
        out = tuple((b, 1 if ref[b] else (2 if h[b] is not None else 0), owner[b], req[b]) for b in sorted(dirty))
        dirty.clear()
        return out

    def num_evictable(self, blocks) -> int:
        """How many of `blocks` are free cached blocks (a hit on them takes one out of the free queue): the
        non-null ones with no reference (the null block's count stays 0: it is never handed out or freed)."""
        return list(map(self.ref.__getitem__, blocks)).count(0) - blocks.count(NULL)

    def get_new_blocks(self, k: int, group: int = 0, rid=None) -> list[int]:
        """`BlockPool.get_new_blocks`: pop `k` free blocks (`popleft_n`), evicting their cached hashes
        (`_maybe_evict_cached_block`, written out)."""
        if k > self.num_free:
            raise ValueError(f"Cannot get {k} free blocks from the pool")
        nxt = self.nxt
        ref, h, owner, req_owner = self.ref, self.hash, self.owner, self.req_owner
        cached, tokens, shift, watch = self.cached, self.hash_tokens, self.shift, self.own_watch
        evicted = 0  # cached blocks handed out (each leaves the cached-free count)
        out = []
        b = nxt[HEAD]
        need = k
        while need:
            if b == UNTOUCHED:  # ids never handed out, in id order: the arrays grow by them
                fresh = self.fresh
                take = min(need, self.num_blocks - fresh)
                out.extend(range(fresh, fresh + take))
                ref.extend([1] * take)
                h.extend([None] * take)
                tokens.extend([0] * take)
                owner.extend([group] * take)
                req_owner.extend([rid] * take)
                nxt[HEAD:HEAD] = [0] * take
                self.prv[HEAD:HEAD] = [0] * take
                self.fresh = fresh = fresh + take
                need -= take
                if fresh == self.num_blocks:
                    b = nxt[UNTOUCHED]  # every id handed out: the node leaves the list
                continue
            run = []  # the queue's ids from here, up to the blocks never handed out
            while need and b != UNTOUCHED:
                run.append(b)
                b = nxt[b]
                need -= 1
            out += run
            for x in run:  # each a free block: no reference yet
                ref[x] = 1
                owner[x] = group
                key = h[x]
                if key is not None:  # evict its cached hash
                    evicted += 1
                    ids = cached.get(key)
                    if ids is not None and x in ids:
                        if len(ids) == 1:
                            del cached[key]
                        else:
                            ids.remove(x)
                        ident = key >> shift
                        if ident & 1:
                            self._uncount(ident)
                        elif watch and ident in watch:  # a preempted request's own (`_uncount`)
                            watch[ident] += 1
                    h[x] = None
                    tokens[x] = 0
            if self.dirty is not None:  # the request a block went to is read by the time-lapse alone
                for x in run:
                    req_owner[x] = rid
        self.cached_free -= evicted
        nxt[HEAD] = b
        self.prv[b] = HEAD
        self.num_free -= k
        if self.dirty is not None:
            self.dirty.update(out)
        self.held[group] += k
        return out

    def touch(self, blocks, rid=None) -> None:
        """`BlockPool.touch`: a prefix hit takes a reference (a free cached block leaves the queue)."""
        ref = self.ref
        for b in blocks:
            if b == NULL:
                continue
            if ref[b] == 0:
                self.ref_epoch += 1
                self._remove(b)
                self.held[self.owner[b]] += 1
                if self.dirty is not None:
                    self.req_owner[b] = rid
                    self.dirty.add(b)
            ref[b] += 1

    def free_blocks(self, ordered) -> None:
        """`BlockPool.free_blocks`: blocks whose count drops to 0 go to the queue's front when they hold
        no hash (evicted first) and to its back when cached (evicted last, LRU)."""
        self.free_runs((ordered,))

    def free_runs(self, runs) -> None:
        """`free_blocks` of each run in turn, in one call: what runs later puts before the earlier ones at the
        queue's front, and after them at its back."""
        fronts = []
        ref, h, owner, held = self.ref, self.hash, self.owner, self.held
        nxt, prv = self.nxt, self.prv
        caching = self.enable_caching
        self.ref_epoch += 1
        tail = first_tail = prv[TAIL]  # hashed blocks are linked at the queue's back as they come (`append_n`)
        appended = 0
        for ordered in runs:
            first = []
            for b in ordered:
                if b:  # not the null block
                    left = ref[b] - 1
                    ref[b] = left
                    if not left:
                        held[owner[b]] -= 1
                        if caching and h[b] is not None:
                            prv[b] = tail
                            nxt[tail] = b
                            tail = b
                            appended += 1
                        else:
                            first.append(b)
            if first:
                fronts.append(first)
        if appended:
            nxt[tail] = TAIL
            prv[TAIL] = tail
            self.num_free += appended
            self.cached_free += appended
        if self.dirty is not None:
            b = first_tail
            while b != tail:  # the appended blocks
                b = nxt[b]
                self.dirty.add(b)
        first = [b for run in reversed(fronts) for b in run] if len(fronts) > 1 else (fronts[0] if fronts else [])
        self._prepend(first)
        if self.dirty is not None:
            self.dirty.update(first)

    def num_cached_free_slow(self) -> int:
        """Free blocks that still hold a prefix-cache hash, counted by walking the queue (tests)."""
        h, fresh = self.hash, self.fresh
        return sum(1 for b in self.free_ids() if b < fresh and h[b] is not None)
