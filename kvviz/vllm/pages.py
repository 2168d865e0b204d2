"""vLLM 0.33's block sizes and pages: declared caches (core.declare) -> `CacheSpec`s.

Mirrors, in this order (docs/model-core.md#block-sizes-and-pages):

* `MambaModelConfig.verify_and_update_config` (model_executor/models/config.py): with prefix
  caching a model with recurrent states runs in 'align' mode and its mamba_block_size is the
  attention block size; without, 'none' mode and mamba_block_size = max_model_len;
* `Platform._align_hybrid_block_size` (platforms/interface.py): the attention block grows to the
  smallest multiple of the kernel alignment whose page holds a state, and the state page is
  padded to the attention page (`mamba_page_size_padded`);
* each mixer's `get_kv_cache_spec` (layers/mamba/): Mamba-2 and, in 'align' mode with
  FlashInfer's prefill on Hopper, the gated delta net hold one prefill checkpoint block;
* `unify_kv_cache_spec_page_size` (v1/core/kv_cache_planning.py): pages that still differ are
  unified (a divisor page gets a proportionally larger block, anything else is padded).
"""

from __future__ import annotations

import dataclasses
import math

from kvviz.base.defaults import CONTEXT_TOKENS, VLLM_BLOCK_SIZE
from kvviz.base.errors import KvvizError, require
from kvviz.base.formats import kv_row, mla_row, recurrent_state_row
from kvviz.core.declare import MambaCache, MLACache
from kvviz.core.kinds import STATE_KINDS, CacheKind
from kvviz.core.spec import CacheSpec

# vLLM's CacheConfig.DEFAULT_BLOCK_SIZE: tokens per block when nothing asks for another size.
DEFAULT_BLOCK_SIZE = VLLM_BLOCK_SIZE
# The smallest kernel block of FlashAttention / FlashInfer (`get_supported_kernel_block_sizes`,
# MultipleOf(16)): a block size vLLM derives for a hybrid model is a multiple of it.
KERNEL_BLOCK_ALIGNMENT = 16
# FlashMLA's kernel block (v1/attention/backends/mla/flashmla.py, get_supported_kernel_block_sizes [64]):
# on Hopper an fp8 MLA cache runs on FLASHMLA (FLASH_ATTN_MLA takes no fp8), whose preferred block
# size is 64 when none is configured (platforms/cuda.py _get_backend_priorities).
FLASHMLA_BLOCK_SIZE = 64
# _align_hybrid_block_size: `if use_mla: kernel_block_alignment = max(..., 128)`.
MLA_HYBRID_BLOCK_ALIGNMENT = 128


@dataclasses.dataclass(frozen=True)
class StateBackend:
    """What the default backend of one mamba_type does on Hopper (SM90) in vLLM 0.33."""

    checkpoint_blocks: int  # MambaSpec.num_prefill_checkpoint_blocks (read in 'align' mode only)
    checkpoint_alignment: int | None  # get_prefill_checkpoint_alignment() in 'align' mode


# mamba_mixer2.py MambaMixer2.get_kv_cache_spec: num_prefill_checkpoint_blocks=1, no alignment
# (get_prefill_checkpoint_alignment is not overridden: None). qwen_gdn_linear_attn.py: FlashInfer's
# GDN prefill (the SM90 default) exports a state every 64 tokens (gdn_attn.py
# FLASHINFER_GDN_CHECKPOINT_ALIGNMENT) and holds one checkpoint block. Mamba-1, short conv and
# KDA keep the base MambaBase spec (no checkpoint blocks).
STATE_BACKENDS = {
    "mamba1": StateBackend(0, None),
    "mamba2": StateBackend(1, None),
    "short_conv": StateBackend(0, None),
    "gdn": StateBackend(1, 64),
    "kda": StateBackend(0, None),
    # layers/mamba/linear/base.py LinearAttention (MiniMax / Bailing linear attention): MambaBase's spec
    "linear": StateBackend(0, None),
    # olmo_gdn_linear_attn.py OlmoHybridGatedDeltaNetAttention: a gated delta net that keeps MambaBase's
    # get_kv_cache_spec and get_prefill_checkpoint_alignment (no checkpoint block, no alignment)
    "gdn/base": StateBackend(0, None),
}

KV_DTYPES = ("bf16", "fp16", "fp32", "fp8")


@dataclasses.dataclass(frozen=True)
class PageRules:
    """The knobs vLLM's block-size rules read: the configured block size (None: 16),
    prefix caching (align mode for states) and max_model_len (mamba_block_size in 'none' mode)."""

    block_size: int | None = None
    prefix_caching: bool = True
    max_model_len: int = CONTEXT_TOKENS


def mamba_cache_mode(declared, rules: PageRules) -> str:
    """'align' with prefix caching when the model has recurrent states, else 'none'."""
    return "align" if rules.prefix_caching and any(isinstance(d, MambaCache) for d in declared) else "none"


def checkpoint_alignment(declared, mode: str) -> int | None:
    """get_mamba_prefill_checkpoint_alignment (layers/mamba/abstract.py): in 'align' mode the lcm
    of every state layer's alignment, None as soon as one layer has none."""
    if mode != "align":
        return None
    values = [_state_backend(d).checkpoint_alignment for d in declared if isinstance(d, MambaCache)]
    alignments = [v for v in values if v is not None]
    if not values or len(alignments) < len(values):
        return None
    return math.lcm(*alignments)


def _state_backend(d: MambaCache) -> StateBackend:
    key = d.backend or d.mamba_type
    if key not in STATE_BACKENDS:
        raise KvvizError(f"{d.name}: mamba_type {key!r}: kvviz knows {', '.join(STATE_BACKENDS)}")
    return STATE_BACKENDS[key]


@dataclasses.dataclass(frozen=True)
class ResolvedPages:
    """The caches as vLLM pages them, and how: the attention block size, the state block size
    (mamba_block_size), the padded state page, the Mamba cache mode and one line per step."""

    caches: tuple[CacheSpec, ...]
    block_size: int
    mamba_block_size: int | None
    mamba_page_size_padded: int | None
    mamba_cache_mode: str
    derivation: tuple[str, ...]


def _attention_spec(d, block: int, **extra) -> CacheSpec:
    if isinstance(d, MLACache):
        return CacheSpec(
            name=d.name,
            kind=CacheKind.MLA,
            layer=d.layer,
            row_format=mla_row(d.kv_lora_rank, d.qk_rope_head_dim, d.kv_dtype),
            rows=block,
            tokens_per_block=block,
            dcp_sharded=True,
            **extra,
        )
    kind = (
        CacheKind.CROSS_ATTENTION
        if d.cross_attention
        else CacheKind.CHUNKED_ATTENTION
        if d.attention_chunk_size is not None
        else CacheKind.SLIDING_ATTENTION
        if d.sliding_window is not None
        else CacheKind.FULL_ATTENTION
    )
    return CacheSpec(
        name=d.name,
        kind=kind,
        layer=d.layer,
        row_format=kv_row(d.num_kv_heads, d.head_size, d.head_size_v, d.kv_dtype),
        rows=block,
        tokens_per_block=block,
        sliding_window=d.sliding_window,
        attention_chunk_size=d.attention_chunk_size,
        dcp_sharded=not d.cross_attention,  # CrossAttentionSpec.max_memory_usage_bytes reads no DCP size
        **extra,
    )


def _state_spec(d: MambaCache, block: int, padded: int | None, mode: str) -> CacheSpec:
    row = recurrent_state_row(d.mamba_type, tuple((p.name, p.count, p.dtype) for p in d.parts))
    require(row.row_bytes == d.state_bytes, f"{d.name}: state row {row.row_bytes} B != {d.state_bytes} B")
    return CacheSpec(
        name=d.name,
        kind=STATE_KINDS[d.mamba_type],
        layer=d.layer,
        row_format=row,
        rows=1,
        tokens_per_block=block,
        padded_page_bytes=padded if padded != row.row_bytes else None,
        checkpoint_blocks=_state_backend(d).checkpoint_blocks,
    )


def default_block_size(declared) -> int:
    """vLLM's block size when none is configured: 16 (CacheConfig.DEFAULT_BLOCK_SIZE; FlashAttention,
    FlashInfer, Triton and FLASH_ATTN_MLA keep it on Hopper), 64 for an fp8 MLA cache (FLASHMLA)."""
    if any(isinstance(d, MLACache) and d.kv_dtype == "fp8" for d in declared):
        return FLASHMLA_BLOCK_SIZE
    return DEFAULT_BLOCK_SIZE


def resolve_pages(
    declared, rules: PageRules = PageRules(), *, pad_states: bool = True, raise_block: bool = True
) -> ResolvedPages:
    """vLLM 0.33's pages for a model's declared caches, in declaration (registration) order.

    pad_states=False leaves state pages at their own size (the `packed` and `separate`
    planners); raise_block=False keeps the attention block at the kernel alignment instead of
    raising it until a page holds a state (`separate`: no page has to hold one)."""
    require(len(declared) > 0, "caches: the model registers no KV caches")
    if rules.block_size is not None and rules.block_size % KERNEL_BLOCK_ALIGNMENT:
        raise KvvizError(
            f"block_size={rules.block_size}: must be a positive multiple of {KERNEL_BLOCK_ALIGNMENT} "
            f"(the attention kernels' block)"
        )
    base = rules.block_size or default_block_size(declared)
    mode = mamba_cache_mode(declared, rules)
    attention = [d for d in declared if not isinstance(d, MambaCache)]
    states = [d for d in declared if isinstance(d, MambaCache)]
    lines = []
    block, mamba_block, padded = base, None, None
    if states:
        state_bytes = max(d.state_bytes for d in states)
        mamba_block = base if mode == "align" else rules.max_model_len
        first = states[0]
        parts = " + ".join(f"{p.name} {'x'.join(map(str, p.shape))} {p.dtype}" for p in first.parts)
        lines.append(
            f"state ({first.mamba_type}) = {parts} = {state_bytes:,} B per request; mamba cache mode "
            f"{mode!r} ({'prefix caching on' if mode == 'align' else 'prefix caching off'})"
        )
        if attention and not raise_block:
            k = max(KERNEL_BLOCK_ALIGNMENT, base)
            align = checkpoint_alignment(declared, mode)
            block = math.lcm(k, align) if align else base
            if mode == "align":
                mamba_block = block
            lines.append(
                f"attention block = {block} tokens (no page holds a state: kernel"
                f"{' and checkpoint' if align else ''} alignment only)"
            )
        elif attention:
            per_token = attention[0].token_bytes
            use_mla = isinstance(attention[0], MLACache)
            k = max(KERNEL_BLOCK_ALIGNMENT, base)
            if use_mla:
                k = max(k, MLA_HYBRID_BLOCK_ALIGNMENT)
            align = checkpoint_alignment(declared, mode)
            if align:
                k = math.lcm(k, align)
            raised = k * -(-state_bytes // (k * per_token))
            raised = KERNEL_BLOCK_ALIGNMENT * -(-raised // KERNEL_BLOCK_ALIGNMENT)
            block = max(base, raised)
            if mode == "align":
                mamba_block = block
            attn_page = block * per_token
            lines.append(
                f"attention block = smallest multiple of {k} tokens whose page ({per_token:,} B a token) "
                f"holds a state = {block} tokens (_align_hybrid_block_size)"
            )
            if attn_page != state_bytes and pad_states:
                padded = attn_page
                lines.append(
                    f"state page padded {state_bytes:,} -> {attn_page:,} B "
                    f"({attn_page - state_bytes:,} B of padding per state)"
                )
        elif mode == "align":
            mamba_block = base
    specs: list[CacheSpec] = []
    for d in declared:
        if isinstance(d, MambaCache):
            assert mamba_block is not None  # set above whenever the model declares a state
            specs.append(_state_spec(d, mamba_block, padded, mode))
        else:
            specs.append(_attention_spec(d, block))
    caches = tuple(specs)
    if pad_states and not _one_attention_type(caches):
        caches = unify_page_sizes(caches)
    if attention:
        lines.extend(attention_page_lines(caches, block))
    return ResolvedPages(caches, block, mamba_block, padded, mode, tuple(lines))


def attention_page_lines(caches: tuple[CacheSpec, ...], block: int) -> list[str]:
    """The attention pages as planned, after unify_page_sizes: one line when the attention layers are of one
    type, else one per kind of page, saying where unification raised a block (Gemma 4's sliding layers: 16
    tokens x 4,096 B raised to 32 so the page equals the full layers' 16 x 8,192 = 131,072 B) or padded a page."""
    attention = [c for c in caches if not c.kind.is_state]
    if _one_attention_type(tuple(attention)):
        a = attention[0]
        return [f"attention page = {a.tokens_per_block} tokens x {a.row_bytes:,} B = {a.content_bytes:,} B"]
    kinds: dict[tuple, CacheSpec] = {}
    for c in attention:
        kinds.setdefault((c.kind, c.sliding_window, c.attention_chunk_size, c.row_bytes, c.tokens_per_block), c)
    out = []
    for c in kinds.values():
        line = f"{c.kind.label} page = {c.tokens_per_block} tokens x {c.row_bytes:,} B = {c.content_bytes:,} B"
        if c.tokens_per_block != block:
            line += (
                f" (its {block}-token block raised to {c.tokens_per_block} so the page equals the largest: "
                f"unify_kv_cache_spec_page_size)"
            )
        if c.padded_page_bytes is not None:
            line += f", padded to {c.page_bytes:,} B (unify_kv_cache_spec_page_size)"
        out.append(line)
    return out


def _one_attention_type(caches: tuple[CacheSpec, ...]) -> bool:
    """Attention layers of one type whatever their pages (UniformTypeKVCacheSpecs.is_uniform_type: one
    spec class, block size and window): vLLM's get_kv_cache_groups makes them one group before it would
    unify pages (v1/core/kv_cache_planning.py), so their pages stay as each layer registers them
    (DeciLM's per-layer KV heads)."""
    kinds = {(c.spec_class, c.sliding_window, c.attention_chunk_size, c.tokens_per_block) for c in caches}
    return len(kinds) == 1 and not any(c.kind.is_state for c in caches)


def unify_page_sizes(caches: tuple[CacheSpec, ...]) -> tuple[CacheSpec, ...]:
    """Mirrors vLLM 0.33's unify_kv_cache_spec_page_size: equal pages stay; a state page is padded
    to the largest page; an attention page that divides it gets a proportionally larger block;
    any other non-MLA attention page is padded; an MLA page that does not divide is refused."""
    pages = {c.page_bytes for c in caches}
    if len(pages) <= 1:
        return caches
    largest = max(pages)
    out = []
    for c in caches:
        if c.page_bytes == largest:
            out.append(c)
        elif c.kind.is_state:
            out.append(c.with_page_bytes(largest))
        elif largest % c.page_bytes == 0:
            out.append(c.with_block_size(c.tokens_per_block * (largest // c.page_bytes)))
        elif c.kind is not CacheKind.MLA:
            out.append(c.with_page_bytes(largest))
        else:
            raise KvvizError(
                f"{c.name}: its MLA page of {c.page_bytes:,} B does not divide the largest page "
                f"({largest:,} B) and MLA pages cannot be padded (unify_kv_cache_spec_page_size)"
            )
    return tuple(out)
