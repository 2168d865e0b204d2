"""One block pool for every KV cache group, as vLLM 0.33's `BlockPool` keeps it
(vllm/v1/core/block_pool.py, vllm/v1/core/kv_cache_utils.py `FreeKVCacheBlockQueue`).

Blocks are plain integer ids with per-id arrays (reference count, prefix-cache hash, the tokens the
hash covers); the free queue is the same doubly linked list vLLM walks, kept in two integer arrays,
so eviction follows vLLM's order exactly: `get_new_blocks` pops from the front, `free_blocks` puts
blocks without a hash at the front (`prepend_n`) and hashed blocks at the back (`append_n`), and a
cached free block leaves the cache only when it is handed out again (LRU eviction).
Block 0 is the null block (`BlockPool.null_block`): popped first, never freed, never counted free.
"""

from __future__ import annotations

NULL = 0


class BlockPool:
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
        "cached",
        "head",
        "tail",
        "owner",
        "held",
        "cached_free",
        "ident_count",
        "req_owner",
        "dirty",
        "ident_version",
        "ref_epoch",
    )

    def __init__(self, num_blocks: int, enable_caching: bool) -> None:
        n = num_blocks
        self.num_blocks = n
        self.enable_caching = enable_caching
        self.ref = [0] * n
        self.hash: list = [None] * n
        self.hash_tokens = [0] * n
        # Linked list over ids 0..n-1 with a head sentinel n and a tail sentinel n + 1.
        self.head, self.tail = n, n + 1
        self.nxt = list(range(1, n + 1)) + [0, -1]
        self.prv = [n] + list(range(0, n - 1)) + [-1, n - 1]
        self.nxt[n - 1] = self.tail
        self.num_free = n
        self.owner = [0] * n  # the group a block id was handed to (one owner per id)
        self.held: list[int] = []  # per group: blocks with a reference (set by the manager)
        self.cached_free = 0  # free blocks still holding a hash (evictable)
        self.cached: dict = {}  # key -> list of block ids, first is the one `get_one_block` returns
        # Cached entries per token identity (a shared chunk or a request id): a lookup of a key whose
        # identity has none misses, so hit searches skip those blocks (`hit_span`).
        self.ident_count: dict = {}
        self.ident_version: dict = {}  # identity -> times its cached entries changed (hit searches memoised)
        self.req_owner: list = [None] * n  # the request a block id was last handed to (the time-lapse)
        self.dirty: set | None = None  # block ids whose state changed this step, when the time-lapse is recorded
        self.ref_epoch = 0  # counts the calls that freed a block or touched a free one (admission counts memoised)
        got = self.popleft_n(1)  # BlockPool.__init__: null_block = free_block_queue.popleft()
        assert got == [NULL]

    # ---- FreeKVCacheBlockQueue ---------------------------------------------------------
    def popleft_n(self, k: int) -> list[int]:
        """`FreeKVCacheBlockQueue.popleft_n`: the first `k` free blocks."""
        nxt, out = self.nxt, []
        b = nxt[self.head]
        for _ in range(k):
            out.append(b)
            b = nxt[b]
        nxt[self.head] = b
        self.prv[b] = self.head
        self.num_free -= k
        return out

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
        first = nxt[self.head]
        p = self.head
        for b in blocks:
            prv[b] = p
            nxt[p] = b
            p = b
        nxt[p] = first
        prv[first] = p
        self.num_free += len(blocks)

    def _append(self, blocks: list[int]) -> None:
        if not blocks:
            return
        nxt, prv = self.nxt, self.prv
        last = prv[self.tail]
        for b in blocks:
            prv[b] = last
            nxt[last] = b
            last = b
        nxt[last] = self.tail
        prv[self.tail] = last
        self.num_free += len(blocks)
        self.cached_free += len(blocks)  # only hashed blocks are appended

    def free_ids(self) -> list[int]:
        """The free queue front to back (evictable cached blocks included)."""
        out, b, nxt = [], self.nxt[self.head], self.nxt
        while b != self.tail:
            out.append(b)
            b = nxt[b]
        return out

    # ---- BlockPool -----------------------------------------------------------------------
    def get_cached_block(self, key, group_ids) -> list[int] | None:
        """`BlockPool.get_cached_block`: one cached block per group for this hash, or None."""
        out = []
        cached = self.cached
        for g in group_ids:
            ids = cached.get((key, g))
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
        ident = key[0][0]
        self.ident_count[ident] = self.ident_count.get(ident, 0) + 1
        self.ident_version[ident] = self.ident_version.get(ident, 0) + 1

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
            ident = key[0][0]
            self.ident_version[ident] += 1
            left = self.ident_count[ident] - 1
            if left:
                self.ident_count[ident] = left
            else:
                del self.ident_count[ident]
        self.hash[b] = None
        self.hash_tokens[b] = 0
        if self.dirty is not None:
            self.dirty.add(b)
        return True

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

    def hit_version(self, request) -> tuple:
        """Changes whenever a cached entry of the request's identities (its shared chunks, its own id) does:
        a prefix-hit search gives the same answer while this and the request's length stay the same (each
        identity's count of changes only grows, so their sum moves whenever one does)."""
        v = self.ident_version
        chain = request.chain
        if not chain:
            return (v.get(request.rid, 0), 0)
        if len(chain) == 1:
            return (v.get(request.rid, 0), v.get(chain[0], 0))
        return (v.get(request.rid, 0), sum([v.get(c, 0) for c in chain]))

    def hit_span(self, request, n: int, block_size: int) -> int:
        """How many of the first `n` blocks of `request` can be in the cache at all: all when a block of the
        request's own is cached, else none past the last shared chunk with a cached entry (a block's hash
        names the chunk holding its last token), none when no chunk has one."""
        count = self.ident_count
        if count.get(request.rid):
            return n
        chain = request.chain
        for k in range(len(chain) - 1, -1, -1):
            if count.get(chain[k]):
                end = (k + 1) * request.chunk
                if end > request.shared:
                    end = request.shared
                return min(n, end // block_size)
        return 0

    def num_evictable(self, blocks) -> int:
        """How many of `blocks` are free cached blocks (a hit on them takes one out of the free queue): the
        non-null ones with no reference (the null block's count stays 0: it is never handed out or freed)."""
        return list(map(self.ref.__getitem__, blocks)).count(0) - blocks.count(NULL)

    def get_new_blocks(self, k: int, group: int = 0, rid=None) -> list[int]:
        """`BlockPool.get_new_blocks`: pop `k` free blocks (`popleft_n`), evicting their cached hashes."""
        if k > self.num_free:
            raise ValueError(f"Cannot get {k} free blocks from the pool")
        nxt, head = self.nxt, self.head
        ref, h, owner, req_owner = self.ref, self.hash, self.owner, self.req_owner
        out = []
        b = nxt[head]
        for _ in range(k):
            out.append(b)
            if h[b] is not None:
                self.evict_hash(b)
            ref[b] += 1
            owner[b] = group
            req_owner[b] = rid
            b = nxt[b]
        nxt[head] = b
        self.prv[b] = head
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
                self.req_owner[b] = rid
                if self.dirty is not None:
                    self.dirty.add(b)
            ref[b] += 1

    def free_blocks(self, ordered) -> None:
        """`BlockPool.free_blocks`: blocks whose count drops to 0 go to the queue's front when they hold
        no hash (evicted first) and to its back when cached (evicted last, LRU)."""
        first, last = [], []
        ref, h, caching = self.ref, self.hash, self.enable_caching
        self.ref_epoch += 1
        for b in ordered:
            if b == NULL:
                continue
            ref[b] -= 1
            if ref[b] == 0:
                self.held[self.owner[b]] -= 1
                if h[b] is None or not caching:
                    first.append(b)
                else:
                    last.append(b)
        self._prepend(first)
        self._append(last)
        if self.dirty is not None:
            self.dirty.update(first)
            self.dirty.update(last)

    def num_cached_free_slow(self) -> int:
        """Free blocks that still hold a prefix-cache hash, counted by walking the queue (tests)."""
        h = self.hash
        return sum(1 for b in self.free_ids() if h[b] is not None)
