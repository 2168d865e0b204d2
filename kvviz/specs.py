"""A model config plus knobs -> every KV cache each layer registers
(docs/caches.md#the-caches-a-layer-registers).

Caches come out in vLLM's registration order: per layer, sliding-window KV (C), indexer K (B),
main compressed KV (A), indexer compressor state (E), main compressor state (D). The B-before-A
and E-before-D order was read off vLLM 0.33; C first makes the sliding-window groups the
first seen, as vLLM 0.33 lists them.
"""

from __future__ import annotations

import dataclasses
import enum

from . import formats
from .config import ModelConfig
from .defaults import BLOCK_SIZE
from .errors import KvvizError, require
from .formats import RowFormat, round_up


class CacheKind(enum.Enum):
    """What a cache holds; `letter` is its row in docs/caches.md#the-caches-a-layer-registers."""

    MAIN_C4 = ("main KV c4", "A")
    MAIN_C128 = ("main KV c128", "A")
    INDEXER_K = ("indexer K", "B")
    SWA_KV = ("sliding-window KV", "C")
    STATE_C4 = ("compressor state c4", "D")
    STATE_C128 = ("compressor state c128", "D")
    INDEXER_STATE = ("indexer state", "E")
    CUSTOM = ("custom", "?")
    # Hybrid models (docs/hybrid.md#hybrid-caches): one K|V page per layer, or one recurrent state.
    FULL_ATTENTION = ("full-attention K|V", "F")
    SLIDING_ATTENTION = ("sliding-window K|V", "S")
    CHUNKED_ATTENTION = ("chunked-local K|V", "L")
    LINEAR_STATE = ("linear-attention state", "M")

    def __init__(self, label: str, letter: str) -> None:
        self.label = label
        self.letter = letter


# Backend page alignment (a kernel requirement, docs/caches.md#backend-alignment): FlashMLA sparse wants
# every page a multiple of 576 B (one fp8_ds_mla payload row); FlashInfer wants the main KV and
# indexer K pages (the ones its kernels read by page) a multiple of 512 B and leaves states alone.
@dataclasses.dataclass(frozen=True, kw_only=True)
class Backend:
    name: str
    alignment: int
    aligned_kinds: frozenset[CacheKind]
    default_main_format: str


_ALL_DSV4 = frozenset(k for k in CacheKind if k is not CacheKind.CUSTOM)
BACKENDS = {
    "flashmla": Backend(name="flashmla", alignment=576, aligned_kinds=_ALL_DSV4, default_main_format="fp8_ds_mla"),
    "flashinfer": Backend(
        name="flashinfer",
        alignment=512,
        aligned_kinds=frozenset({CacheKind.MAIN_C4, CacheKind.MAIN_C128, CacheKind.INDEXER_K}),
        default_main_format="fp8",
    ),
    "none": Backend(name="none", alignment=1, aligned_kinds=frozenset(), default_main_format="fp8_ds_mla"),
}

# Compressor geometry per compression ratio, as DeepSeek V4's compressor registers it:
# coff = overlap factor (c4 windows overlap twice), state rows (tokens) kept per block.
# The state window (the grouping key) is coff x ratio tokens.
COMPRESSOR = {4: {"coff": 2, "state_tokens": 4}, 128: {"coff": 1, "state_tokens": 8}}
SWA_TOKENS_PER_BLOCK = 64  # the sliding-window KV cache has its own fixed block of 64 tokens


# The page size is derived once per cache: an init=False, compare=False field that __post_init__
# fills, so a slotted CacheSpec carries it without a __dict__ (a model of 100x the layers makes
# ~100x the specs; cached_propertys behind a __dict__ cost an object and a chain of lookups each).
# content_bytes and aligned_bytes are one multiplication away and are not stored.
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CacheSpec:
    """One cache one layer registers: `rows` rows of `row_format`, page rounded to `alignment`.

    Mirrors one layer's vLLM `KVCacheSpec` and its `page_size_bytes` (vllm/v1/kv_cache_interface.py).
    """

    name: str  # vLLM's layer name, e.g. model.layers.2.attn.indexer.k_cache
    kind: CacheKind
    layer: int | None
    row_format: RowFormat
    rows: int
    tokens_per_block: int
    sliding_window: int | None = None  # None: full attention (kept for the whole request)
    attention_chunk_size: int | None = None  # chunked local attention (vLLM ChunkedLocalAttentionSpec)
    alignment: int = 1
    padded_page_bytes: int | None = None  # pre-#48993 only: small pages grown to a main page size

    # The page vLLM allocates (aligned content, or the grown size when padded).
    page_bytes: int = dataclasses.field(init=False, repr=False, compare=False)
    # Kept for the whole request: no window, no chunk, not a recurrent state. Stored, like
    # page_bytes: padding, grouping and every KVGroup ask it of each cache.
    is_full_attention: bool = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Plain ifs, not require(): its message would be formatted for every cache of a model.
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
        object.__setattr__(self, "page_bytes", page)  # frozen: the derived size is written once, here
        object.__setattr__(self, "is_full_attention", self.sliding_window is None and self.attention_chunk_size is None
                           and self.kind is not CacheKind.LINEAR_STATE)

    @property
    def row_bytes(self) -> int:
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
        return self.page_bytes - self.content_bytes

    @property
    def dtype_size(self) -> int:
        return self.row_format.dtype_size

    @property
    def group_key(self) -> tuple[int, int | None]:
        """(tokens per block, sliding window): vLLM buckets non-full caches by this."""
        return (self.tokens_per_block, self.sliding_window)

    @property
    def spec_key(self) -> tuple:
        """Everything but the layer name: equal keys = one vLLM KVCacheSpec. Built when asked
        (only overlay-by-spec asks), not kept: a tuple per cache would be one more object for
        every collection to walk."""
        return (self.kind, self.row_format, self.rows, self.tokens_per_block, self.sliding_window,
                self.attention_chunk_size, self.alignment, self.page_bytes)

    def with_page_bytes(self, page_bytes: int) -> "CacheSpec":
        """The same cache with its page grown to `page_bytes` (pre-#48993 padding)."""
        return CacheSpec(name=self.name, kind=self.kind, layer=self.layer, row_format=self.row_format,
                         rows=self.rows, tokens_per_block=self.tokens_per_block,
                         sliding_window=self.sliding_window, attention_chunk_size=self.attention_chunk_size,
                         alignment=self.alignment, padded_page_bytes=page_bytes)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CacheOptions:
    """The knobs a deployment chooses. `main_format=None` takes the backend's default."""

    backend: str = "flashmla"
    main_format: str | None = None
    indexer_format: str = "mxfp4"
    block_size: int = BLOCK_SIZE
    mtp: bool = True

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise KvvizError(f"backend={self.backend!r}: unknown; choose one of {', '.join(BACKENDS)}")
        if self.resolved_main_format not in formats.MAIN_FORMATS:
            raise KvvizError(
                f"main_format={self.main_format!r}: unknown; choose one of {', '.join(formats.MAIN_FORMATS)}"
            )
        if self.indexer_format not in formats.INDEXER_FORMATS:
            raise KvvizError(
                f"indexer_format={self.indexer_format!r}: unknown; choose one of {', '.join(formats.INDEXER_FORMATS)}"
            )
        require(isinstance(self.block_size, int) and self.block_size > 0, f"block_size={self.block_size!r}: must be a positive integer")

    @property
    def resolved_main_format(self) -> str:
        return self.main_format or BACKENDS[self.backend].default_main_format


def _aligned(kind: CacheKind, backend: Backend) -> int:
    return backend.alignment if kind in backend.aligned_kinds else 1


def _layer_templates(config: ModelConfig, layer: int, options: CacheOptions) -> tuple[tuple, ...]:
    """What a layer of `layer`'s compress ratio registers, in vLLM's registration order (C, B, A,
    E, D): one (name suffix, kind, row format, rows, tokens per block, sliding window, alignment)
    per cache. Everything but the layer name depends on the ratio alone, so model_caches derives
    it once per ratio and only names each layer's caches."""
    backend = BACKENDS[options.backend]
    main = formats.main_row(options.resolved_main_format, config.head_dim, config.qk_rope_head_dim)
    ratio = config.ratio(layer)

    def template(suffix, kind, row, rows, tokens, window):
        return (suffix, kind, row, rows, tokens, window, _aligned(kind, backend))

    out = [template(".swa_cache", CacheKind.SWA_KV, main, SWA_TOKENS_PER_BLOCK, SWA_TOKENS_PER_BLOCK,
                    config.sliding_window)]
    if ratio in (0, 1):
        return tuple(out)
    if ratio not in COMPRESSOR:
        raise KvvizError(f"compress_ratios[{layer}]={ratio}: kvviz knows ratios 0, 1, {', '.join(map(str, COMPRESSOR))}")
    if options.block_size % ratio:
        raise KvvizError(f"block_size={options.block_size}: must be a multiple of every compress ratio "
                         f"(layer {layer} has {ratio})")
    geo = COMPRESSOR[ratio]
    state_window = geo["coff"] * ratio
    state_tokens = geo["state_tokens"]
    if ratio == 4:
        index = formats.indexer_row(options.indexer_format, config.index_head_dim)
        out.append(template(".indexer.k_cache", CacheKind.INDEXER_K, index, options.block_size // ratio,
                            options.block_size, None))
    main_kind = CacheKind.MAIN_C4 if ratio == 4 else CacheKind.MAIN_C128
    out.append(template("", main_kind, main, options.block_size // ratio, options.block_size, None))
    if ratio == 4:
        # K and V halves of the overlapping windows of the indexer's own compressor.
        index_state = formats.state_row(2 * geo["coff"] * config.index_head_dim)
        out.append(template(".indexer.compressor.state_cache", CacheKind.INDEXER_STATE, index_state,
                            state_tokens, state_tokens, state_window))
    state_kind = CacheKind.STATE_C4 if ratio == 4 else CacheKind.STATE_C128
    main_state = formats.state_row(2 * geo["coff"] * config.head_dim)
    out.append(template(".compressor.state_cache", state_kind, main_state, state_tokens, state_tokens,
                        state_window))
    return tuple(out)


def _named_caches(layer: int, templates: tuple[tuple, ...], out: list) -> None:
    """Append one CacheSpec per template to `out`, named model.layers.{layer}.attn{suffix}."""
    prefix = f"model.layers.{layer}.attn"
    for suffix, kind, row, rows, tokens, window, alignment in templates:
        out.append(CacheSpec(name=prefix + suffix, kind=kind, layer=layer, row_format=row, rows=rows,
                             tokens_per_block=tokens, sliding_window=window, alignment=alignment))


def layer_caches(config: ModelConfig, layer: int, options: CacheOptions) -> list[CacheSpec]:
    """The caches one layer registers, in vLLM's registration order (C, B, A, E, D)."""
    out: list[CacheSpec] = []
    _named_caches(layer, _layer_templates(config, layer, options), out)
    return out


def model_caches(config: ModelConfig, options: CacheOptions = CacheOptions()) -> tuple[CacheSpec, ...]:
    """Every cache of every layer (MTP layers too when options.mtp), in registration order.

    The caches' shape is derived once per compress ratio (the MTP slots count as ratio 1), so a
    model of N layers costs N names and N x caches-per-layer records, nothing more per layer."""
    layers = config.num_layers_with_mtp if options.mtp else config.num_hidden_layers
    by_ratio: dict[int, tuple[tuple, ...]] = {}
    out: list[CacheSpec] = []
    for layer in range(layers):
        ratio = config.ratio(layer)
        templates = by_ratio.get(ratio)
        if templates is None:  # the first layer of this ratio derives (and validates) its caches
            templates = by_ratio[ratio] = _layer_templates(config, layer, options)
        _named_caches(layer, templates, out)
    return tuple(out)


def custom_cache(name: str, page_bytes: int, *, kind: CacheKind = CacheKind.CUSTOM, tokens_per_block: int = BLOCK_SIZE,
                 sliding_window: int | None = None) -> CacheSpec:
    """A cache known only by its page size (groups given as JSON)."""
    if not (isinstance(page_bytes, int) and page_bytes > 0):  # the message only when it fails
        raise KvvizError(f"{name}: page_bytes={page_bytes!r} must be a positive integer")
    return CacheSpec(name=name, kind=kind, layer=None, row_format=formats.opaque_row(page_bytes), rows=1,
                     tokens_per_block=tokens_per_block, sliding_window=sliding_window)
