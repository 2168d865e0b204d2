"""Row and page anatomy, byte-exact (docs/row-formats.md#row-formats).

A `RowFormat` is a list of named fields; every byte count is built from those fields, never
typed in. Inside a page all rows' payloads come first, then all rows' footers, then alignment
padding: `PageAnatomy` states that rule once (docs/row-formats.md#page-anatomy), and
`page_regions` and `kvviz.quant`'s page writers and readers ask it.

This module is the one home of the sizes the kernels fix (block of values per scale, footer
alignment, RoPE dims of the fp8_ds_mla row, element widths): `kvviz.quant` imports them and
builds its row sizes from the `RowFormat`s here, never typing them again.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from functools import cached_property

from kvviz.base.errors import KvvizError, require


class Element(enum.Enum):
    """Storage element types, with their size in bits."""

    E4M3 = ("E4M3", 8)
    E2M1 = ("E2M1", 4)  # two per byte: element 2i in the low nibble, 2i+1 in the high nibble
    UE8M0 = ("UE8M0", 8)  # power-of-two scale 2^(byte-127); 0xFF is NaN, no zero
    BF16 = ("bf16", 16)
    FP32 = ("fp32", 32)
    PAD = ("pad", 8)
    BYTE = ("byte", 8)  # opaque bytes (pages given only by size)

    def __init__(self, label: str, bits: int) -> None:
        self.label = label
        self.bits = bits


# The element names a model family declares its caches in (core.declare), and their element.
# float16 is sized and written like bf16 (2 bytes an element; kvviz writes bf16 bytes for both).
ELEMENTS = {"bf16": Element.BF16, "fp16": Element.BF16, "fp32": Element.FP32, "fp8": Element.E4M3}
ELEMENT_BYTES = {name: e.bits // 8 for name, e in ELEMENTS.items()}
_VIEW_DTYPES = {Element.BF16: "bfloat16", Element.FP32: "float32"}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Field:
    """`count` elements of one type inside a row, e.g. 448 E4M3 NoPE values."""

    name: str
    element: Element
    count: int

    @property
    def num_bytes(self) -> int:
        """Bytes the field takes: count x the element's bits / 8 (two E2M1 share a byte)."""
        return self.count * self.element.bits // 8

    def describe(self) -> str:
        """'448 E4M3 NoPE'; a field named like its element ('pad') is not named twice."""
        return f"{self.count} {self.element.label}" + ("" if self.name == self.element.label else f" {self.name}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class RowFormat:
    """One row (one token, or one state slot) of a cache page."""

    name: str  # format name, also the key of its codec in kvviz.quant
    dims: int  # values a row holds
    payload: tuple[Field, ...]  # bytes that go first in the page, row after row
    footer: tuple[Field, ...] = ()  # bytes that follow all payloads (scales, pad)
    view_dtype: str = "uint8"  # torch dtype of the layer's view
    # What the two parts are called where a reader sees them: a quantized row's payload and its
    # footer of scales; an attention page's K and V halves; a recurrent state's conv and SSM parts.
    part_names: tuple[str, str] = ("payload", "footer")
    # The kvviz.quant codec that writes the row; None: the codec named like the format. Rows made
    # of plain elements part by part (hybrid models' K|V and conv|SSM rows) say "parts".
    codec: str | None = None

    @property
    def codec_name(self) -> str:
        """The kvviz.quant codec that writes the row (`codec`, else the format's own name)."""
        return self.codec or self.name

    @cached_property
    def payload_bytes(self) -> int:
        """Bytes of the payload fields (what goes first in the page, row after row)."""
        return sum(f.num_bytes for f in self.payload)

    @cached_property
    def footer_bytes(self) -> int:
        """Bytes of the footer fields (what follows all payloads: scales, pad; 0 for none)."""
        return sum(f.num_bytes for f in self.footer)

    @cached_property
    def row_bytes(self) -> int:
        """Bytes of one row, payload and footer together."""
        return self.payload_bytes + self.footer_bytes

    @property
    def dtype_size(self) -> int:
        """Bytes of one element of the layer's view dtype (from the Element widths)."""
        return {"uint8": Element.BYTE.bits // 8, "bfloat16": Element.BF16.bits // 8, "float32": Element.FP32.bits // 8}[
            self.view_dtype
        ]

    def field(self, name: str) -> Field:
        """The field called `name` (payload or footer), e.g. ``row.field("scale").count``."""
        for f in self.payload + self.footer:
            if f.name == name:
                return f
        raise KvvizError(f"field={name!r}: row format {self.name!r} has no such field")

    def describe(self) -> str:
        """e.g. '448 E4M3 NoPE + 64 bf16 RoPE | footer 7 UE8M0 scale + 1 pad = 584 B'
        (thousands separated: '1,024 B')."""
        text = " + ".join(f.describe() for f in self.payload)
        if self.footer:
            text += f" | {self.part_names[1]} " + " + ".join(f.describe() for f in self.footer)
        return f"{text} = {self.row_bytes:,} B"


# ---- sizes the kernels fix (docs/row-formats.md#row-formats); kvviz.quant asks for them here ----

# fp8_ds_mla: one UE8M0 scale per this many NoPE dims (DeepSeek V4's FlashMLA sparse kernel and
# vLLM's fp8_ds_mla cache writer; docs/row-formats.md#fp8_ds_mla).
DS_MLA_SCALE_BLOCK = 64
# The fp8_ds_mla footer (scales) is padded with zero bytes to a multiple of this: 7 scales + 1 pad
# (the same writer; docs/row-formats.md#fp8_ds_mla).
DS_MLA_FOOTER_ALIGN = 8
# RoPE dims of the fp8_ds_mla row when none are given: DeepSeek V4's qk_rope_head_dim, the
# 64 bf16 tail the FlashMLA kernel reads after 448 E4M3 NoPE dims (docs/row-formats.md#fp8_ds_mla).
# Layouts pass the model config's qk_rope_head_dim; this is only kvviz.quant's default.
DS_MLA_ROPE_DIMS = 64
# Indexer FP8: one fp32 scale per this many values (vLLM's indexer_k_quant_and_cache
# quant_block_size; docs/row-formats.md#fp8-indexer-row).
INDEXER_FP8_BLOCK = 128
# MXFP4: one UE8M0 scale per 32 values (the OCP MX block size; vLLM #48993's MXFP4 indexer
# writer; docs/row-formats.md#mxfp4-indexer-row).
MXFP4_BLOCK = 32


@functools.lru_cache(maxsize=None)
def ds_mla_row(head_dim: int, qk_rope_head_dim: int, scale_block: int = DS_MLA_SCALE_BLOCK) -> RowFormat:
    """DeepSeek V4 `fp8_ds_mla`: NoPE dims as E4M3 + RoPE dims as bf16; footer of UE8M0 scales + pad.

    Mirrors vLLM 0.33's ``quantize_and_insert_k_cache`` (models/deepseek_v4/common/ops/
    cache_utils.py: "Each token: 448 bytes (fp8) + 128 bytes (bf16) ... 8 bytes (uint8 scales,
    7 real + 1 padding)"). One scale per `scale_block` NoPE dims (the kernel's 64; other values
    only for kvviz.quant's what-ifs); the footer is padded to a multiple of DS_MLA_FOOTER_ALIGN.
    """
    rope_dims = qk_rope_head_dim
    nope = head_dim - rope_dims
    require(nope > 0, f"qk_rope_head_dim={rope_dims}: must be smaller than head_dim={head_dim}")
    require(
        nope % scale_block == 0,
        f"head_dim={head_dim}: fp8_ds_mla needs head_dim - qk_rope_head_dim ({nope}) to be a multiple of "
        f"scale_block={scale_block}",
    )
    scales = nope // scale_block
    pad = -scales % DS_MLA_FOOTER_ALIGN
    footer = [Field(name="scale", element=Element.UE8M0, count=scales)]
    if pad:
        footer.append(Field(name="pad", element=Element.PAD, count=pad))
    return RowFormat(
        name="fp8_ds_mla",
        dims=head_dim,
        payload=(
            Field(name="NoPE", element=Element.E4M3, count=nope),
            Field(name="RoPE", element=Element.BF16, count=rope_dims),
        ),
        footer=tuple(footer),
    )


@functools.lru_cache(maxsize=None)
def ds_mla_v32_row(kv_lora_rank: int, qk_rope_head_dim: int, block: int = INDEXER_FP8_BLOCK) -> RowFormat:
    """DeepSeek V3.2 `fp8_ds_mla` (sparse MLA on FLASHMLA_SPARSE with an fp8 cache): per token the latent as
    E4M3, one fp32 scale per 128 of it, then the RoPE dims as bf16, one contiguous row (656 B at 512 + 64:
    vLLM 0.33 v1/attention/backends/mla/flashmla_sparse.py's format note; MLAAttention.get_kv_cache_spec
    state_content_bytes)."""
    require(kv_lora_rank % block == 0, f"kv_lora_rank={kv_lora_rank}: fp8_ds_mla scales every {block} latent values")
    return RowFormat(
        name="fp8_ds_mla_v32",
        dims=kv_lora_rank + qk_rope_head_dim,
        payload=(
            Field(name="NoPE", element=Element.E4M3, count=kv_lora_rank),
            Field(name="scale", element=Element.FP32, count=kv_lora_rank // block),
            Field(name="RoPE", element=Element.BF16, count=qk_rope_head_dim),
        ),
        codec="parts",
    )


@functools.lru_cache(maxsize=None)
def fp8_row(head_dim: int) -> RowFormat:
    """FlashInfer DSV4 FP8: every dim (RoPE too) as E4M3; the per-tensor scale lives outside the cache
    (vLLM 0.33's ``fused_deepseek_v4_qnorm_rope_kv_rope_full_cache_fp8_insert``)."""
    return RowFormat(name="fp8", dims=head_dim, payload=(Field(name="KV", element=Element.E4M3, count=head_dim),))


@functools.lru_cache(maxsize=None)
def bf16_row(head_dim: int) -> RowFormat:
    """Unquantized bf16 latent (vLLM 0.33's ``fused_deepseek_v4_qnorm_rope_kv_rope_full_cache_bf16_insert``)."""
    return RowFormat(
        name="bf16",
        dims=head_dim,
        payload=(Field(name="KV", element=Element.BF16, count=head_dim),),
        view_dtype="bfloat16",
    )


@functools.lru_cache(maxsize=None)
def indexer_fp8_row(index_head_dim: int, block: int = INDEXER_FP8_BLOCK) -> RowFormat:
    """Indexer K as FP8: E4M3 values, footer of one fp32 scale per `block` (128) values (132 B at 128 dims;
    vLLM 0.33's ``indexer_k_quant_and_cache``, quant_block_size 128)."""
    require(
        index_head_dim % block == 0,
        f"index_head_dim={index_head_dim}: the FP8 indexer needs a multiple of {block}",
    )
    return RowFormat(
        name="indexer_fp8",
        dims=index_head_dim,
        payload=(Field(name="K", element=Element.E4M3, count=index_head_dim),),
        footer=(Field(name="scale", element=Element.FP32, count=index_head_dim // block),),
    )


@functools.lru_cache(maxsize=None)
def indexer_mxfp4_row(index_head_dim: int) -> RowFormat:
    """Indexer K as MXFP4 (vLLM #48993): packed E2M1 + one UE8M0 scale per 32 values (68 B at 128 dims;
    vLLM 0.33's ``_fused_kv_compress_norm_rope_insert_indexer_mxfp4_attn``)."""
    require(
        index_head_dim % MXFP4_BLOCK == 0,
        f"index_head_dim={index_head_dim}: MXFP4 needs a multiple of {MXFP4_BLOCK}",
    )
    return RowFormat(
        name="indexer_mxfp4",
        dims=index_head_dim,
        payload=(Field(name="K", element=Element.E2M1, count=index_head_dim),),
        footer=(Field(name="scale", element=Element.UE8M0, count=index_head_dim // MXFP4_BLOCK),),
    )


@functools.lru_cache(maxsize=None)
def state_row(floats: int) -> RowFormat:
    """Compressor state slot: fp32 values stored as they are (vLLM 0.33's DeepSeek V4 ``CompressorStateCache``)."""
    return RowFormat(
        name="fp32",
        dims=floats,
        payload=(Field(name="state", element=Element.FP32, count=floats),),
        view_dtype="float32",
    )


@functools.lru_cache(maxsize=None)
def opaque_row(num_bytes: int) -> RowFormat:
    """A page known only by its size (groups given as JSON)."""
    return RowFormat(
        name="opaque", dims=num_bytes, payload=(Field(name="bytes", element=Element.BYTE, count=num_bytes),)
    )


MAIN_FORMATS = {
    "fp8_ds_mla": ds_mla_row,
    "fp8": lambda head_dim, rope_dims: fp8_row(head_dim),
    "bf16": lambda head_dim, rope_dims: bf16_row(head_dim),
}
INDEXER_FORMATS = {"fp8": indexer_fp8_row, "mxfp4": indexer_mxfp4_row}


def main_row(fmt: str, head_dim: int, rope_dims: int) -> RowFormat:
    """The DeepSeek V4 main KV row of format `fmt` (a key of MAIN_FORMATS); one line naming
    main_format for an unknown one (the model option it comes from)."""
    if fmt not in MAIN_FORMATS:
        raise KvvizError(f"main_format={fmt!r}: unknown; choose one of {', '.join(MAIN_FORMATS)}")
    return MAIN_FORMATS[fmt](head_dim, rope_dims)


def indexer_row(fmt: str, index_head_dim: int) -> RowFormat:
    """The DeepSeek V4 indexer K row of format `fmt` (a key of INDEXER_FORMATS); one line naming
    indexer_format for an unknown one (the model option it comes from)."""
    if fmt not in INDEXER_FORMATS:
        raise KvvizError(f"indexer_format={fmt!r}: unknown; choose one of {', '.join(INDEXER_FORMATS)}")
    return INDEXER_FORMATS[fmt](index_head_dim)


# ---- rows of the declared caches (core.declare): plain elements, part by part ------------------
@functools.lru_cache(maxsize=None)
def kv_row(num_kv_heads: int, head_size: int, head_size_v: int, kv_dtype: str) -> RowFormat:
    """One token of one attention layer: K of every KV head, then V (AttentionSpec's
    num_kv_heads x (head_size + head_size_v) x dtype). kvviz draws all K rows of a page before all
    V rows (payload / footer regions); where each byte sits depends on the backend's layout, the
    sizes do not."""
    element = ELEMENTS[kv_dtype]
    k, v = num_kv_heads * head_size, num_kv_heads * head_size_v
    return RowFormat(
        name=f"kv_{kv_dtype}",
        dims=k + v,
        payload=(Field(name="K", element=element, count=k),),
        footer=(Field(name="V", element=element, count=v),),
        view_dtype=_VIEW_DTYPES.get(element, "uint8"),
        part_names=("K", "V"),
        codec="parts",
    )


@functools.lru_cache(maxsize=None)
def mla_row(kv_lora_rank: int, qk_rope_head_dim: int, kv_dtype: str) -> RowFormat:
    """One token of an MLA layer (MLAAttentionSpec, head_size = kv_lora_rank + qk_rope_head_dim,
    one head, no V): the compressed latent, then its RoPE part."""
    element = ELEMENTS[kv_dtype]
    return RowFormat(
        name=f"mla_{kv_dtype}",
        dims=kv_lora_rank + qk_rope_head_dim,
        payload=(Field(name="latent", element=element, count=kv_lora_rank),),
        footer=(Field(name="rope", element=element, count=qk_rope_head_dim),),
        view_dtype=_VIEW_DTYPES.get(element, "uint8"),
        part_names=("latent", "rope"),
        codec="parts",
    )


@functools.lru_cache(maxsize=None)
def recurrent_state_row(mamba_type: str, parts: tuple[tuple[str, int, str], ...]) -> RowFormat:
    """One recurrent state (MambaSpec: sum of prod(shape) x dtype over its shapes), from
    (name, element count, element name) per tensor. The last tensor is the state proper (SSM or
    recurrent state) and forms the footer; the ones before it (conv states, all of one element)
    form the payload, one field each. A state of one tensor (short conv) is one payload field."""
    fields = [Field(name=name, element=ELEMENTS[dtype], count=count) for name, count, dtype in parts]
    if len(fields) == 1:
        f = fields[0]
        codec = {Element.BF16: "bf16", Element.FP32: "fp32"}[f.element]
        return RowFormat(
            name=codec, dims=f.count, payload=(f,), view_dtype=_VIEW_DTYPES[f.element], part_names=(f.name, "")
        )
    head, last = fields[:-1], fields[-1]
    if len({f.element for f in head}) != 1:
        raise KvvizError(f"{mamba_type} state: its conv tensors have different dtypes")
    conv = Field(
        name=" + ".join(f.name for f in head) if len(head) > 1 else head[0].name,
        element=head[0].element,
        count=sum(f.count for f in head),
    )
    view = _VIEW_DTYPES[conv.element] if conv.element is last.element else "uint8"
    return RowFormat(
        name=f"{mamba_type}_state",
        dims=conv.count + last.count,
        payload=(conv,),
        footer=(last,),
        view_dtype=view,
        part_names=(conv.name, last.name),
        codec="parts",
    )
