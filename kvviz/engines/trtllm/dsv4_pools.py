"""TensorRT-LLM's DeepseekV4CacheManager geometry: its constants, the life cycles of its pools
(sliding, compressed, state), the typical step it sizes for and the slot counts a budget buys
(tensorrt_llm/_torch/.../deepseek_v4; see kvviz.engines.trtllm.dsv4)."""

from __future__ import annotations

import dataclasses

from kvviz.base import formats

TOKENS_PER_BLOCK = 128  # examples/models/core/deepseek_v4/README.md: the DeepSeek-V4 default


ALLOWED_TOKENS_PER_BLOCK = (128, 256)  # DeepseekV4CacheManager.__init__'s assertion


WINDOW_SIZE = 128  # DeepSeekV4Params.window_size; DeepseekV4TrtllmAttentionMetadata asserts 128


SPARSE_RATIO = 4  # params.py DEEPSEEK_V4_SPARSE_RATIO = DEEPSEEK_V4_OVERLAP_COMPRESSOR_RATIO


RATIOS = (1, 4, 128)  # _build_cache_config: any other ratio is a ValueError


STATE_ELEMENT = "fp32"  # compressor_dtype DataType.FLOAT (the only one __init__ accepts)


INDEXER_K_DTYPE = {"fp8": "fp8", "mxfp4": "fp4"}  # kvviz indexer_format -> TensorRT-LLM indexer_k_dtype


MAX_SLOT_COUNT = (1 << 31) - 1  # page indices are 32-bit in the storage layer


SLIDING = ("SWA", "COMPRESSOR_KV", "COMPRESSOR_SCORE", "INDEXER_COMPRESSOR_KV", "INDEXER_COMPRESSOR_SCORE")


NON_SLIDING = ("COMPRESS", "INDEXER_COMPRESS")


STATES = SLIDING[1:]


# _build_cache_config: the manager layers of one model layer, by compress ratio (roles, sliding window?)
MANAGER_LAYERS = {
    1: ((("SWA",), True),),
    4: ((("SWA",), True), (NON_SLIDING, False), (STATES, True)),
    128: ((("SWA", "COMPRESSOR_KV", "COMPRESSOR_SCORE"), True), (("COMPRESS",), False)),
}


_LABELS = {
    "SWA": "swa kv",
    "COMPRESS": "c{r} compressed kv",
    "INDEXER_COMPRESS": "c{r} indexer k",
    "COMPRESSOR_KV": "c{r} compressor state",
    "COMPRESSOR_SCORE": "c{r} compressor state",
    "INDEXER_COMPRESSOR_KV": "c{r} indexer compressor state",
    "INDEXER_COMPRESSOR_SCORE": "c{r} indexer compressor state",
}


def has_role(ratio: int, role: str) -> bool:
    """params.py compress_ratio_has_attention: every layer has SWA; ratio > 1 the compressed KV and
    its compressor state; ratio 4 (sparse) also the indexer K and its compressor state."""
    if role == "SWA":
        return True
    if role in ("COMPRESS", "COMPRESSOR_KV", "COMPRESSOR_SCORE"):
        return ratio > 1
    return ratio == SPARSE_RATIO


@dataclasses.dataclass(frozen=True, kw_only=True)
class DSV4Geometry:
    """What DeepseekV4CacheManager prices one layer's caches with (cache_manager.py commit 2ccfca94)."""

    head_dim: int  # kv_lora_rank + qk_rope_head_dim
    index_head_dim: int
    main_row_bytes: int  # footer_scale_kv.TOKEN_BYTES (fp8_ds_mla)
    indexer_row_bytes: int  # FP8 blockwise or MXFP4 row
    ratios: tuple[int, ...]  # one per model layer, 0 read as 1
    tokens_per_block: int
    window: int = WINDOW_SIZE

    def attn_dim(self, ratio: int, role: str) -> int:
        """cache_manager.get_attn_dim: compressor states are 2x wide for the overlap (ratio 4) compressor."""
        factor = 2 if ratio == SPARSE_RATIO else 1
        return {
            "SWA": self.head_dim,
            "COMPRESS": self.head_dim,
            "COMPRESSOR_KV": factor * self.head_dim,
            "COMPRESSOR_SCORE": factor * self.head_dim,
            "INDEXER_COMPRESS": self.index_head_dim,
            "INDEXER_COMPRESSOR_KV": factor * self.index_head_dim,
            "INDEXER_COMPRESSOR_SCORE": factor * self.index_head_dim,
        }[role]

    def token_bytes(self, ratio: int, role: str) -> int:
        """cache_manager.get_token_bytes with use_fp8_ds_mla: the 584 B footer-scale row for SWA and
        COMPRESS, the indexer row for INDEXER_COMPRESS, fp32 compressor states."""
        if role in ("SWA", "COMPRESS"):
            return self.main_row_bytes
        if role == "INDEXER_COMPRESS":
            return self.indexer_row_bytes
        return self.attn_dim(ratio, role) * formats.ELEMENT_BYTES[STATE_ELEMENT]

    def bytes_per_token(self, ratio: int, role: str) -> int:
        """_get_attn_bytes_per_token: a compressed row's bytes floored by // ratio."""
        b = self.token_bytes(ratio, role)
        return b // ratio if role in NON_SLIDING else b

    def block_bytes(self, ratio: int, role: str) -> int:
        """_get_attn_bytes_per_block: token bytes x tokens_per_block (tokens_per_block // ratio rows
        for COMPRESS / INDEXER_COMPRESS, compressed_block_sizes)."""
        rows = self.tokens_per_block // ratio if role in NON_SLIDING else self.tokens_per_block
        return self.token_bytes(ratio, role) * rows

    def sliding_window(self, ratio: int, role: str) -> int:
        """_get_window_size, max_draft_len 0: SWA 128; a compressor state (2 for ratio 4) x ratio."""
        return self.window if role == "SWA" else (2 if ratio == SPARSE_RATIO else 1) * ratio


@dataclasses.dataclass(frozen=True, kw_only=True)
class LifeCycle:
    """One life cycle (pool group) of KVCacheManagerV2: its window (0: none) and its pools, one per
    buffer size: (buffer bytes, buffers, name); a slot holds one block of every buffer."""

    window: int
    pools: tuple[tuple[int, int, str], ...]

    @property
    def pool_slot_bytes(self) -> tuple[int, ...]:
        """Bytes of one slot in each pool (lifecycle_layouts: size x count, largest first)."""
        return tuple(size * count for size, count, _ in self.pools)

    @property
    def slot_bytes(self) -> int:
        """Bytes of one slot across the life cycle's pools."""
        return sum(self.pool_slot_bytes)


def life_cycles(g: DSV4Geometry) -> list[LifeCycle]:
    """_build_cache_config's manager layers grouped as lifecycle_layouts groups them: by window, in
    the order layers first use them; buffers of one size share a pool."""
    by_window: dict[int, dict[int, list]] = {}
    for r in g.ratios:
        for roles, sliding in MANAGER_LAYERS[r]:
            window = g.sliding_window(r, roles[0]) if sliding else 0
            sizes = by_window.setdefault(window, {})
            for role in roles:
                entry = sizes.setdefault(g.block_bytes(r, role), [0, []])
                entry[0] += 1
                label = _LABELS[role].format(r=r)
                if label not in entry[1]:
                    entry[1].append(label)
    return [
        LifeCycle(
            window=w,
            pools=tuple(
                sorted(((size, n, " + ".join(names)) for size, (n, names) in sizes.items()), key=lambda p: -p[0] * p[1])
            ),
        )
        for w, sizes in by_window.items()
    ]


def typical_step(max_num_tokens: int, max_batch_size: int, max_seq_len: int) -> tuple[tuple[int, int], ...]:
    """The typical step's requests as (capacity, history): one context request of max_num_tokens and
    max_batch_size - 1 generation requests of max_seq_len, history max_seq_len - 1 (no draft tokens)."""
    return ((max_num_tokens, 0),) + ((max_seq_len, max_seq_len - 1),) * (max_batch_size - 1)


def stale_blocks(window: int, history: int, tokens_per_block: int) -> int:
    """_stale_range's length, no sink tokens: blocks wholly behind the window (the in-flight token at
    `history` keeps it one token longer); C++ division truncates toward zero."""
    if not window:
        return 0
    ahead = history + 1 - window
    return max(0, int(ahead / tokens_per_block) if ahead < 0 else ahead // tokens_per_block)


def pages_for_batch(window: int, batch, tokens_per_block: int) -> int:
    """slots_for_batch for one life cycle, no system prompt: each request's blocks less its stale ones."""
    return sum(
        max(0, -(-cap // tokens_per_block) - stale_blocks(window, hist, tokens_per_block)) for cap, hist in batch
    )


def floor_pages(windows, tokens_per_block: int) -> list[int]:
    """slots_from_constraints with no constraint: a window's (window + tokens_per_block - 2) //
    tokens_per_block + 1 pages; the windowless life cycle the largest of those (at least 1)."""
    windowed = [(w + tokens_per_block - 2) // tokens_per_block + 1 for w in windows if w]
    return [(w + tokens_per_block - 2) // tokens_per_block + 1 if w else max([1] + windowed) for w in windows]


def pools_cost(counts, pool_bytes, granularity: int) -> int:
    """Bytes the life cycles' pools take at `counts` slots, each pool rounded up to the granularity."""
    return sum(-(-c * b // granularity) * granularity for c, pools in zip(counts, pool_bytes) for b in pools)


def slot_counts(need, floors, pool_bytes, granularity: int, budget: int) -> list[int]:
    """_tier_slot_counts: the largest counts proportional to `need` (the neediest life cycle holds
    `scale` pages, each other max(floor, scale x need // max need)) whose pools fit `budget`."""
    reference = max(max(need), 1)

    def counts_at(scale: int) -> list[int]:
        return [min(MAX_SLOT_COUNT, max(f, scale * n // reference)) for f, n in zip(floors, need)]

    def fits(scale: int) -> bool:
        return pools_cost(counts_at(scale), pool_bytes, granularity) <= budget

    low, high = 0, 1
    while high <= MAX_SLOT_COUNT and fits(high):
        low, high = high, high * 2
    high = min(high, MAX_SLOT_COUNT + 1)
    while low + 1 < high:
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid) else (low, mid)
    return counts_at(low)
