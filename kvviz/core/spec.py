"""One cache one layer registers, with its page: the core of vLLM's spec family
(vllm/v1/kv_cache_interface.py, vLLM 0.33).

A `CacheSpec` answers the questions vLLM's `KVCacheSpec` classes answer, from its own fields:
which class it is (`spec_class`), how large its page is (`page_bytes`, `AttentionSpec` /
`MambaSpec.page_size_bytes`) and how many of its blocks one request holds
(`blocks_per_request`, `max_memory_usage_bytes // page_size_bytes` of the class). The bytes of a
row come from its `formats.RowFormat`, field by field; nothing here knows a model family.
"""

from __future__ import annotations

import dataclasses

from kvviz.base.errors import KvvizError
from kvviz.base.formats import RowFormat, opaque_row
from kvviz.base.inputs import MAX_PAGE_BYTES
from kvviz.base.regions import round_up
from kvviz.core.kinds import CacheKind


@dataclasses.dataclass(frozen=True, slots=True)
class Scheduling:
    """What a request's blocks depend on besides the spec (vLLM's VllmConfig as the specs read it):
    the request length (`max_model_len`), the tokens in flight
    (`VllmConfig.max_in_flight_tokens` = max_concurrent_batches x max_num_batched_tokens), the
    Mamba cache mode ('align' with prefix caching, else 'none'), the decode context-parallel
    size (`decode_context_parallel_size`) and the encoder tokens a cross-attention cache holds
    (`SchedulerConfig.max_num_encoder_input_tokens`, set to max_num_batched_tokens in its
    __post_init__, config/scheduler.py; 0: not given)."""

    max_model_len: int
    max_in_flight_tokens: int
    mamba_cache_mode: str = "none"
    dcp: int = 1
    max_encoder_input_tokens: int = 0


# The page size is derived once per cache: an init=False, compare=False field that __post_init__
# fills, so a slotted CacheSpec carries it without a __dict__ (a model of 100x the layers makes
# ~100x the specs).
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CacheSpec:
    """One cache one layer registers: `rows` rows of `row_format`, page rounded to `alignment`.

    Attention kinds hold one row per token (rows = tokens_per_block); a recurrent state holds one
    row (rows = 1) whatever the block size. Mirrors one layer's vLLM `KVCacheSpec`.
    """

    name: str  # vLLM's layer name, e.g. model.layers.2.self_attn.attn
    kind: CacheKind
    layer: int | None
    row_format: RowFormat
    rows: int
    tokens_per_block: int
    sliding_window: int | None = None  # SlidingWindowSpec.sliding_window (None: not windowed)
    attention_chunk_size: int | None = None  # ChunkedLocalAttentionSpec.attention_chunk_size
    alignment: int = 1
    padded_page_bytes: int | None = None  # page_size_padded (vLLM's padding of a smaller page)
    checkpoint_blocks: int = 0  # MambaSpec.num_prefill_checkpoint_blocks
    dcp_sharded: bool = False  # AttentionSpec.dcp_sharded: DCP splits its tokens over ranks

    page_bytes: int = dataclasses.field(init=False, repr=False, compare=False)
    # Kept for the whole request: no window, no chunk, not a recurrent state.
    is_full_attention: bool = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        row_bytes = self.row_format.row_bytes
        if self.rows <= 0:
            raise KvvizError(f"{self.name}: rows={self.rows} must be positive")
        if row_bytes <= 0:
            raise KvvizError(f"{self.name}: page_bytes must be positive (got a zero-size row)")
        if self.alignment <= 0:
            raise KvvizError(f"{self.name}: alignment={self.alignment} must be positive")
        page = self.padded_page_bytes
        if page is None:
            page = round_up(self.rows * row_bytes, self.alignment)
        if page > MAX_PAGE_BYTES:  # a size no field bound caught (a state of 2e23 B) is refused, not planned
            raise KvvizError(
                f"{self.name}: a page of {page:,} B ({self.rows:,} rows of {row_bytes:,} B): at most "
                f"{MAX_PAGE_BYTES:,} B a layer; a config field holds an absurd size"
            )
        object.__setattr__(self, "page_bytes", page)  # frozen: the derived size is written once, here
        object.__setattr__(
            self,
            "is_full_attention",
            self.sliding_window is None
            and self.attention_chunk_size is None
            and not self.kind.is_state
            and self.kind is not CacheKind.CROSS_ATTENTION,
        )

    @property
    def row_bytes(self) -> int:
        """Bytes of one row (one token, or the whole state), from the row format."""
        return self.row_format.row_bytes

    @property
    def content_bytes(self) -> int:
        """Bytes of rows, before alignment."""
        return self.rows * self.row_format.row_bytes

    @property
    def aligned_bytes(self) -> int:
        """Content rounded up to the backend's alignment (the page unless padded)."""
        return round_up(self.rows * self.row_format.row_bytes, self.alignment)

    @property
    def padding_bytes(self) -> int:
        """Bytes of the page beyond its rows: alignment and page_size_padded."""
        return self.page_bytes - self.content_bytes

    @property
    def dtype_size(self) -> int:
        """Bytes of one element of the row (vLLM's dtype size of the spec)."""
        return self.row_format.dtype_size

    @property
    def is_state(self) -> bool:
        """Whether the cache is a recurrent state (vLLM MambaSpec)."""
        return self.kind.is_state

    @property
    def spec_class(self) -> str:
        """The vLLM 0.33 class this cache's spec is (kv_cache_interface.py)."""
        if self.kind.is_state:
            return "MambaSpec"
        if self.kind is CacheKind.CROSS_ATTENTION:
            return "CrossAttentionSpec"
        mla = self.kind in (
            CacheKind.MLA,
            CacheKind.MAIN_C4,
            CacheKind.MAIN_C128,
            CacheKind.INDEXER_K,
            CacheKind.SWA_KV,
        )
        if self.attention_chunk_size is not None:
            return "ChunkedLocalAttentionSpec"
        if self.sliding_window is not None:
            return "SlidingWindowMLASpec" if mla else "SlidingWindowSpec"
        return "MLAAttentionSpec" if mla else "FullAttentionSpec"

    @property
    def group_key(self) -> tuple[int, int | None]:
        """(tokens per block, sliding window): vLLM #48993 buckets non-full caches by this."""
        return (self.tokens_per_block, self.sliding_window)

    @property
    def spec_key(self) -> tuple:
        """Everything but the layer name: equal keys = one vLLM KVCacheSpec."""
        return (
            self.kind,
            self.row_format,
            self.rows,
            self.tokens_per_block,
            self.sliding_window,
            self.attention_chunk_size,
            self.alignment,
            self.page_bytes,
            self.checkpoint_blocks,
        )

    def with_page_bytes(self, page_bytes: int) -> "CacheSpec":
        """The same cache with its page grown to `page_bytes` (page_size_padded)."""
        return dataclasses.replace(self, padded_page_bytes=page_bytes)

    def with_block_size(self, tokens_per_block: int) -> "CacheSpec":
        """The same cache with `tokens_per_block` tokens a block (`copy_with_new_block_size`): an
        attention page grows with it, a state page does not."""
        rows = self.rows if self.kind.is_state else self.rows * tokens_per_block // self.tokens_per_block
        return dataclasses.replace(self, rows=rows, tokens_per_block=tokens_per_block)

    def blocks_per_request(self, s: Scheduling) -> int:
        """Blocks this cache's block table holds for one request of `s.max_model_len` tokens:
        vLLM 0.33's `max_memory_usage_bytes(vllm_config) // page_size_bytes` of its class
        (kv_cache_interface.py; docs/model-core.md#blocks-per-request):

        * FullAttentionSpec / MLAAttentionSpec: cdiv(max_model_len / dcp, block_size);
        * SlidingWindowSpec.max_admission_blocks_per_request:
          cdiv(min(window - 1 + in-flight tokens, max_model_len), block_size) + 1;
        * ChunkedLocalAttentionSpec.max_admission_blocks_per_request:
          cdiv(min(chunk + in-flight tokens, max_model_len), block_size);
        * MambaSpec: 'align' mode 2 + prefill checkpoint blocks, else 1 (no speculative blocks);
        * CrossAttentionSpec: cdiv(scheduler_config.max_num_encoder_input_tokens, block_size), the
          encoder's tokens whatever the request's length.
        """
        if self.kind.is_state:
            return 2 + self.checkpoint_blocks if s.mamba_cache_mode == "align" else 1
        if self.kind is CacheKind.CROSS_ATTENTION:
            if s.max_encoder_input_tokens <= 0:
                raise KvvizError(f"{self.name}: a cross-attention cache needs max_num_encoder_input_tokens")
            return -(-s.max_encoder_input_tokens // self.tokens_per_block)
        if self.attention_chunk_size is not None:
            kept = min(self.attention_chunk_size + s.max_in_flight_tokens, s.max_model_len)
            return -(-kept // self.tokens_per_block)
        if self.sliding_window is not None:
            kept = min(self.sliding_window - 1 + s.max_in_flight_tokens, s.max_model_len)
            return -(-kept // self.tokens_per_block) + 1
        tokens = s.max_model_len
        if self.dcp_sharded and s.dcp > 1:
            tokens = -(-tokens // s.dcp)
        return -(-tokens // self.tokens_per_block)


def custom_cache(
    name: str,
    page_bytes: int,
    *,
    kind: CacheKind = CacheKind.CUSTOM,
    tokens_per_block: int,
    sliding_window: int | None = None,
) -> CacheSpec:
    """A cache known only by its page size (groups given as JSON)."""
    if not (isinstance(page_bytes, int) and page_bytes > 0):  # the message only when it fails
        raise KvvizError(f"{name}: page_bytes={page_bytes!r} must be a positive integer")
    return CacheSpec(
        name=name,
        kind=kind,
        layer=None,
        row_format=opaque_row(page_bytes),
        rows=1,
        tokens_per_block=tokens_per_block,
        sliding_window=sliding_window,
    )
