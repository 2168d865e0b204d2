"""Row codecs of DeepSeek V4's quantized caches: one row (a token) of values at a time.

Each row format has its encoder, decoder, error bound and row anatomy here, and nothing else:
the MXFP4 indexer K row, the FP8 indexer K row, the ``fp8_ds_mla`` main KV row, and the
FlashInfer FP8 row (one per-tensor scale). Their sizes come from `kvviz.base.formats` (the one home
of the sizes the kernels fix); `kvviz.quant.registry` names them as codecs. Every function
takes rows [..., D] and is vectorised over the leading dims.

Scales are rounded UP (``exponent = ceil(log2(amax / max_elem))``) as the DeepSeek V4 writers do,
so no element saturates; the amax floor is an explicit keyword because the writers differ
(`MXFP4_AMAX_FLOOR`, `FP8_AMAX_FLOOR`). A NaN in a scale group makes that group's scale NaN
(UE8M0 0xFF, or a NaN fp32 scale), so the whole group decodes to NaN.
"""

from __future__ import annotations

import torch

from kvviz.base import formats
from kvviz.base.errors import require
from kvviz.base.formats import DS_MLA_ROPE_DIMS, DS_MLA_SCALE_BLOCK, INDEXER_FP8_BLOCK, MXFP4_BLOCK
from kvviz.quant import bits
from kvviz.quant.elements import (
    E2M1_MAX,
    E4M3_MAX,
    bf16_decode,
    bf16_encode,
    bf16_half_ulp,
    e2m1_encode,
    e2m1_pair_table,
    e4m3_decode,
    e4m3_encode,
    e4m3_scaled_bound,
    ue8m0_decode,
    ue8m0_from_amax,
)

#: vLLM 0.33's MXFP4 indexer writer floors amax at 6 * 2^-126 (``tl.maximum(amax, 6.0 * (2**-126))``
#: in ``_fused_kv_compress_norm_rope_insert_indexer_mxfp4_attn``): an all-zero 32-group gets scale byte 1.
MXFP4_AMAX_FLOOR = 6 * 2**-126
#: The FP8 writers (indexer FP8, fp8_ds_mla NoPE scales) floor amax at 1e-4
#: (``tl.maximum(block_absmax, 1e-4)`` in vLLM 0.33's DeepSeek V4 ``fused_compress_quant_cache``).
FP8_AMAX_FLOOR = 1e-4

# ------------------------------------------------------------------ MXFP4 (indexer K, 68 B at 128)


def check_mxfp4_dims(d: int, arg: str = "") -> None:
    """KvvizError unless head_dim `d` is a positive multiple of MXFP4_BLOCK (32); the message
    starts with the argument `arg` the dims come from ("x: "), if any."""
    require(d > 0 and d % MXFP4_BLOCK == 0, f"{arg}head_dim={d}: MXFP4 needs a positive multiple of {MXFP4_BLOCK}")


def mxfp4_encode(
    x: torch.Tensor,
    *,
    scale_rule: str = "ceil",
    amax_floor: float = MXFP4_AMAX_FLOOR,
) -> tuple[torch.Tensor, torch.Tensor]:
    """x [..., D] -> (packed uint8 [..., D/2], scales uint8 [..., D/32]).

    Mirrors vLLM 0.33's MXFP4 indexer K writer
    (``_fused_kv_compress_norm_rope_insert_indexer_mxfp4_attn``): one UE8M0 scale per
    MXFP4_BLOCK (32) values (ceil rule, amax floored at 6*2^-126), elements = E2M1(x / scale),
    element 2i in the low nibble. The error: per element ``s * 0.25`` for u = |x|/s < 2,
    ``s * 0.5`` for 2 <= u < 4, ``s * 1.0`` up to 6, the saturation ``s*(u-6)`` beyond (only with
    ``scale_rule="floor"``); powers of two make x/s and code*s exact.
    """
    x = bits.as_f32(x, "x")
    check_mxfp4_dims(bits.last_dim(x, "x"), "x: ")
    g = bits.groups(x, MXFP4_BLOCK)
    scales = ue8m0_from_amax(bits.absmax(g), max_elem=E2M1_MAX, rule=scale_rule, amax_floor=amax_floor)
    q = e2m1_encode(bits.true_div(g, ue8m0_decode(scales).unsqueeze(-1))).reshape(x.shape)
    pairs = bits.groups(q, 2)
    return torch.bitwise_left_shift(pairs[..., 1], 4).bitwise_or_(pairs[..., 0]), scales


def mxfp4_decode(packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """(packed uint8 [..., D/2], scales uint8 [..., D/32]) -> float32 [..., D].

    The reader of vLLM 0.33's MXFP4 indexer row (`mxfp4_encode`): code value times 2^(byte-127).
    """
    packed = bits.as_u8(packed, "packed")
    scales = bits.as_u8(scales, "scales")
    d = 2 * bits.last_dim(packed, "packed")
    check_mxfp4_dims(d, "packed: ")
    n_scales = d // MXFP4_BLOCK
    require(
        tuple(scales.shape) == tuple(packed.shape[:-1]) + (n_scales,),
        f"scales: shape {tuple(scales.shape)} does not match packed {tuple(packed.shape)} (needs [..., {n_scales}])",
    )
    # one lookup per byte gives both values (a 256-entry table of fp32 pairs)
    v = torch.take(e2m1_pair_table(packed.device), packed.long()).view(torch.float32)
    v = v.reshape(*packed.shape[:-1], n_scales, MXFP4_BLOCK)
    return v.mul_(ue8m0_decode(scales).unsqueeze(-1)).reshape(*packed.shape[:-1], d)


def mxfp4_bound(x: torch.Tensor, *, scale_rule: str = "ceil", amax_floor: float = MXFP4_AMAX_FLOOR) -> torch.Tensor:
    """Per-element bound on |mxfp4_decode(mxfp4_encode(x)) - x| (see `mxfp4_encode`)."""
    check_mxfp4_dims(bits.last_dim(x, "x"), "x: ")
    g = bits.groups(x, MXFP4_BLOCK)
    sb = ue8m0_from_amax(bits.absmax(g), max_elem=E2M1_MAX, rule=scale_rule, amax_floor=amax_floor)
    s = ue8m0_decode(sb).unsqueeze(-1)
    u = bits.true_div(g.abs(), s)
    h = torch.where(u < 2, 0.25, torch.where(u < 4, 0.5, 1.0))
    return (s * torch.maximum(h, u - E2M1_MAX)).reshape(x.shape)


def mxfp4_row_format(head_dim: int, **_: object) -> formats.RowFormat:
    """The MXFP4 indexer row at `head_dim` (formats.indexer_mxfp4_row), checked under this name."""
    check_mxfp4_dims(head_dim)
    return formats.indexer_mxfp4_row(head_dim)


# --------------------------------------------------------------- indexer FP8 (132 B rows at 128)


def check_block(d: int, block: int, what: str, arg: str = "") -> None:
    """KvvizError naming `block`, or head_dim (after the argument `arg` it comes from, "x: "),
    unless head_dim `d` is a positive multiple of a positive `block`."""
    require(isinstance(block, int) and block > 0, f"block={block!r}: must be a positive integer")
    require(d > 0 and d % block == 0, f"{arg}head_dim={d}: {what} needs a positive multiple of block={block}")


def fp8_indexer_encode(
    x: torch.Tensor,
    *,
    block: int = INDEXER_FP8_BLOCK,
    pow2_scale: bool = False,
    amax_floor: float = FP8_AMAX_FLOOR,
) -> tuple[torch.Tensor, torch.Tensor]:
    """x [..., D] -> (codes uint8 [..., D], scales float32 [..., D/block]).

    Mirrors vLLM 0.33's ``indexer_k_quant_and_cache`` (``_custom_ops``; the fused DeepSeek V4
    writer ``_fused_kv_compress_norm_rope_insert_indexer_attn``): scale = max(amax, 1e-4) / 448
    in fp32, optionally rounded UP to a power of two (its ``use_ue8m0`` variant, exp2(ceil(log2
    s)), here computed exactly), codes = saturating E4M3(x / scale). Both divisions are true
    divisions (`bits.true_div`), as in the kernel, on every device. One difference: the
    kernel's fmaxf drops a NaN from amax, here a NaN propagates into that block's scale (the
    block decodes NaN).
    """
    x = bits.as_f32(x, "x")
    check_block(bits.last_dim(x, "x"), block, "indexer FP8", "x: ")
    require(amax_floor > 0, f"amax_floor={amax_floor!r}: must be > 0 (the scale divides)")
    g = bits.groups(x, block)
    scales = bits.true_div(torch.clamp(bits.absmax(g), min=bits.f32_floor(amax_floor)), E4M3_MAX)
    if pow2_scale:
        scales = bits.pow2_ceil(scales)
    codes = e4m3_encode(bits.true_div(g, scales.unsqueeze(-1)))
    return codes.reshape(x.shape), scales


def fp8_indexer_decode(codes: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """(codes uint8 [..., D], scales float32 [..., D/block]) -> float32 [..., D] (code times its block's scale)."""
    codes = bits.as_u8(codes, "codes")
    require(isinstance(scales, torch.Tensor), "scales: expected a torch.Tensor")
    d = bits.last_dim(codes, "codes")
    nb = bits.last_dim(scales, "scales")
    require(nb > 0 and d % nb == 0, f"scales: {nb} scales do not divide the {d} codes of a row")
    require(
        tuple(scales.shape[:-1]) == tuple(codes.shape[:-1]),
        f"scales: leading dims {tuple(scales.shape[:-1])} differ from codes {tuple(codes.shape[:-1])}",
    )
    v = e4m3_decode(codes)
    return (bits.groups(v, d // nb) * scales.to(torch.float32).unsqueeze(-1)).reshape(v.shape)


def fp8_indexer_bound(
    x: torch.Tensor, *, block: int = INDEXER_FP8_BLOCK, pow2_scale: bool = False, amax_floor: float = FP8_AMAX_FLOOR
) -> torch.Tensor:
    """Per-element bound on the indexer FP8 round trip (`elements.e4m3_scaled_bound`; exact with pow2 scales)."""
    _, s = fp8_indexer_encode(x, block=block, pow2_scale=pow2_scale, amax_floor=amax_floor)
    b = e4m3_scaled_bound(bits.groups(x, block), s.unsqueeze(-1), exact_scale=pow2_scale)
    return b.reshape(x.shape)


def fp8_indexer_row_format(head_dim: int, *, block: int = INDEXER_FP8_BLOCK, **_: object) -> formats.RowFormat:
    """The FP8 indexer row at `head_dim` (formats.indexer_fp8_row), checked under this module's names."""
    check_block(head_dim, block, "indexer FP8")
    return formats.indexer_fp8_row(head_dim, block)


# ---------------------------------------------------- DeepSeek V4 fp8_ds_mla (584 B rows at 512)


def ds_mla_row_format(
    head_dim: int,
    *,
    rope_dims: int = DS_MLA_ROPE_DIMS,
    scale_block: int = DS_MLA_SCALE_BLOCK,
    arg: str = "",
    **_: object,
) -> formats.RowFormat:
    """formats.ds_mla_row after checking the arguments under kvviz.quant's names (head_dim,
    after the argument `arg` it comes from, "x: "; rope_dims; scale_block)."""
    require(isinstance(head_dim, int) and head_dim > 0, f"{arg}head_dim={head_dim!r}: must be a positive integer")
    require(isinstance(rope_dims, int) and rope_dims >= 0, f"rope_dims={rope_dims!r}: must be a non-negative integer")
    require(rope_dims < head_dim, f"rope_dims={rope_dims}: must be smaller than head_dim={head_dim}")
    require(
        isinstance(scale_block, int) and scale_block > 0, f"scale_block={scale_block!r}: must be a positive integer"
    )
    nope = head_dim - rope_dims
    require(
        nope % scale_block == 0,
        f"{arg}head_dim={head_dim}: NoPE dims (head_dim - rope_dims = {nope}) must be a multiple of "
        f"scale_block={scale_block}",
    )
    return formats.ds_mla_row(head_dim, rope_dims, scale_block)


def ds_mla_row_bytes(
    head_dim: int, *, rope_dims: int = DS_MLA_ROPE_DIMS, scale_block: int = DS_MLA_SCALE_BLOCK
) -> tuple[int, int]:
    """(payload_bytes, footer_bytes) of one fp8_ds_mla row (formats.ds_mla_row); (576, 8) for head_dim 512."""
    row = ds_mla_row_format(head_dim, rope_dims=rope_dims, scale_block=scale_block)
    return row.payload_bytes, row.footer_bytes


def ds_mla_encode(
    x: torch.Tensor,
    *,
    rope_dims: int = DS_MLA_ROPE_DIMS,
    scale_block: int = DS_MLA_SCALE_BLOCK,
    amax_floor: float = FP8_AMAX_FLOOR,
) -> tuple[torch.Tensor, torch.Tensor]:
    """x [..., D] -> (payload uint8 [..., nope + 2*rope_dims], footer uint8 [..., F]).

    Mirrors DeepSeek V4's FlashMLA ``fp8_ds_mla`` row as vLLM 0.33 writes it
    (``quantize_and_insert_k_cache`` / ``quantize_and_insert_k_kernel``, and the fused
    ``_finalize_norm_rope_quant_store_sparse_attn``): the first D - rope_dims (NoPE) dims as
    E4M3 with one UE8M0 scale per 64 dims (ceil rule, max 448, amax floored at 1e-4), then the
    RoPE dims as bf16 little-endian. Footer = the scale bytes, then zero bytes up to a multiple
    of 8 (the row's fields: formats.ds_mla_row). head_dim 512: payload 448 + 128 = 576, footer
    7 + 1 = 8, row 584.
    """
    x = bits.as_f32(x, "x")
    row = ds_mla_row_format(bits.last_dim(x, "x"), rope_dims=rope_dims, scale_block=scale_block, arg="x: ")
    nope = row.field("NoPE").count
    g = bits.groups(x[..., :nope], scale_block)
    sbytes = ue8m0_from_amax(bits.absmax(g), max_elem=E4M3_MAX, rule="ceil", amax_floor=amax_floor)
    codes = e4m3_encode(bits.true_div(g, ue8m0_decode(sbytes).unsqueeze(-1))).reshape(*x.shape[:-1], nope)
    payload = torch.cat((codes, bf16_encode(x[..., nope:])), dim=-1)
    pad = sbytes.new_zeros(*sbytes.shape[:-1], row.footer_bytes - sbytes.shape[-1])
    footer = torch.cat((sbytes, pad), dim=-1)
    return payload, footer


def ds_mla_decode(
    payload: torch.Tensor,
    footer: torch.Tensor,
    *,
    rope_dims: int = DS_MLA_ROPE_DIMS,
    scale_block: int = DS_MLA_SCALE_BLOCK,
) -> torch.Tensor:
    """(payload [..., nope + 2*rope_dims], footer [..., F]) -> float32 [..., nope + rope_dims].

    The reader of the fp8_ds_mla row (vLLM 0.33's ``dequantize_and_gather_k_cache``); the
    footer's pad bytes are ignored.
    """
    payload = bits.as_u8(payload, "payload")
    footer = bits.as_u8(footer, "footer")
    p = bits.last_dim(payload, "payload")
    require(isinstance(rope_dims, int) and rope_dims >= 0, f"rope_dims={rope_dims!r}: must be a non-negative integer")
    rope_bytes = formats.Field(name="RoPE", element=formats.Element.BF16, count=rope_dims).num_bytes
    nope = p - rope_bytes  # E4M3: one byte per NoPE dim
    require(nope > 0, f"rope_dims={rope_dims}: payload of {p} bytes leaves no NoPE dims")
    n_scales = (
        ds_mla_row_format(nope + rope_dims, rope_dims=rope_dims, scale_block=scale_block, arg="payload: ")
        .field("scale")
        .count
    )
    require(
        footer.shape[-1] >= n_scales and tuple(footer.shape[:-1]) == tuple(payload.shape[:-1]),
        f"footer: shape {tuple(footer.shape)} cannot hold {n_scales} scales for payload {tuple(payload.shape)}",
    )
    v = bits.groups(e4m3_decode(payload[..., :nope]), scale_block)
    v = (v * ue8m0_decode(footer[..., :n_scales]).unsqueeze(-1)).reshape(*payload.shape[:-1], nope)
    return torch.cat((v, bf16_decode(payload[..., nope:])), dim=-1)


def ds_mla_bound(
    x: torch.Tensor,
    *,
    rope_dims: int = DS_MLA_ROPE_DIMS,
    scale_block: int = DS_MLA_SCALE_BLOCK,
    amax_floor: float = FP8_AMAX_FLOOR,
) -> torch.Tensor:
    """Per-element bound on the fp8_ds_mla round trip: the exact-scale E4M3 bound on the NoPE
    dims (power-of-two scales), half a bf16 ulp on the RoPE dims."""
    nope = (
        ds_mla_row_format(bits.last_dim(x, "x"), rope_dims=rope_dims, scale_block=scale_block, arg="x: ")
        .field("NoPE")
        .count
    )
    g = bits.groups(x[..., :nope], scale_block)
    sb = ue8m0_from_amax(bits.absmax(g), max_elem=E4M3_MAX, rule="ceil", amax_floor=amax_floor)
    b = e4m3_scaled_bound(g, ue8m0_decode(sb).unsqueeze(-1), exact_scale=True)
    return torch.cat((b.reshape(*x.shape[:-1], nope), bf16_half_ulp(x[..., nope:])), dim=-1)


# ---------------------------------------------------------- FlashInfer FP8 row (per-tensor scale)


def fp8_tensor_encode(
    x: torch.Tensor,
    *,
    scale: float | torch.Tensor | None = None,
    amax_floor: float = FP8_AMAX_FLOOR,
) -> tuple[torch.Tensor, torch.Tensor]:
    """x [..., D] -> (codes uint8 [..., D], scale float32 0-dim tensor).

    Mirrors the FlashInfer DSV4 FP8 cache as vLLM 0.33 writes it
    (``fused_deepseek_v4_qnorm_rope_kv_rope_full_cache_fp8_insert`` with the layer's
    ``_flashinfer_fp8_kv_scale``; 512 B rows, RoPE dims quantized too): one per-tensor scale,
    held outside the cache, = max(amax, amax_floor) / 448 over the whole tensor. Pass
    ``scale=`` to use a fixed one instead (vLLM's uncalibrated ``k_scale`` is 1.0).
    """
    x = bits.as_f32(x, "x")
    bits.last_dim(x, "x")
    if scale is None:
        require(amax_floor > 0, f"amax_floor={amax_floor!r}: must be > 0 (the scale divides)")
        amax = bits.absmax(x.reshape(1, -1))[0] if x.numel() else x.new_zeros(())
        s = bits.true_div(torch.clamp(amax, min=bits.f32_floor(amax_floor)), E4M3_MAX)
    else:
        if isinstance(scale, (int, float)):
            require(0 < scale < float("inf"), f"scale={scale!r}: must be positive and finite")
        s = torch.as_tensor(scale, dtype=torch.float32, device=x.device).reshape(())
    return e4m3_encode(bits.true_div(x, s)), s


def fp8_tensor_decode(codes: torch.Tensor, scale: float | torch.Tensor) -> torch.Tensor:
    """(codes uint8 [..., D], per-tensor scale) -> float32 [..., D] (code times the scale)."""
    v = e4m3_decode(codes)
    return v * torch.as_tensor(scale, dtype=torch.float32, device=v.device)


def fp8_tensor_bound(
    x: torch.Tensor, *, scale: float | torch.Tensor | None = None, amax_floor: float = FP8_AMAX_FLOOR
) -> torch.Tensor:
    """Per-element bound on the per-tensor FP8 round trip (an fp32 scale: both roundings counted)."""
    _, s = fp8_tensor_encode(x, scale=scale, amax_floor=amax_floor)
    return e4m3_scaled_bound(x, s, exact_scale=False)
