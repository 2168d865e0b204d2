"""Element codecs: one value at a time, byte-exact (docs/row-formats.md#row-formats).

E2M1 (FP4) codes and their nibble packing, UE8M0 power-of-two scale bytes, E4M3
(``float8_e4m3fn``), bf16 and fp32 bytes, and the half-ulp of each element, from which the row
codecs (`kvviz.quant.rows`) build their error bounds. Every function is vectorised over any
leading dims and allocates on its input's device.

* E2M1: codes 0..7 = 0, 0.5, 1, 1.5, 2, 3, 4, 6; codes 8..15 are the negatives (8 = -0).
* UE8M0: an unsigned power-of-two scale, value = 2^(byte - 127); 0xFF is NaN, there is no zero.
* E4M3 (``float8_e4m3fn``): max 448, no infinities.
"""

from __future__ import annotations

import torch

from kvviz.base.errors import require
from kvviz.quant import bits

#: The 16 E2M1 code values (index = code); code 8 is -0.0.
E2M1_VALUES = torch.tensor(
    [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0],
    dtype=torch.float32,
)
#: The largest E2M1 magnitude (code 7).
E2M1_MAX = 6.0
#: The largest finite E4M3 (``float8_e4m3fn``) magnitude; vLLM 0.33's FP8 writers clamp to it (fp8_max).
E4M3_MAX = 448.0

# ---------------------------------------------------------------------------------------- E2M1


def e2m1_encode(x: torch.Tensor) -> torch.Tensor:
    """Round fp32 values to E2M1 codes 0..15 (uint8, same shape).

    Mirrors the element conversion of vLLM 0.33's MXFP4 indexer writer
    (``_fused_kv_compress_norm_rope_insert_indexer_mxfp4_attn``; OCP: round to nearest, ties to
    even, saturate): 0.25->0, 0.75->1.0, 1.25->1.0, 1.75->2.0, 2.5->2.0, 3.5->4.0, 5.0->4.0 (the
    tie goes to the code whose mantissa bit, its low bit, is 0), |x| > 6 -> 6. The sign bit is
    kept, so -0.0 and small negatives that round to zero give code 8 (-0). NaN: E2M1 has no NaN,
    and this returns code 7 (+6) for it (our choice; inside MXFP4 the group's scale byte becomes
    0xFF, so the group decodes to NaN anyway).
    """
    x = bits.as_f32(x, "x")
    b = x.view(torch.int32)
    # Key = the top 16 bits of the fp32 (sign, exponent, 7 mantissa bits) and one sticky bit
    # (any of the low 16 bits set). That decides the rounding exactly: every E2M1 midpoint has
    # zero low bits, so only "exactly on", "below" or "above" matters beyond the top 16 bits.
    key = (b >> 15).bitwise_and_(0x1FFFE)
    key.bitwise_or_((b & 0xFFFF) != 0)
    codes = torch.index_select(bits.cached_table("e2m1_keys", x.device, _e2m1_key_table), 0, key.reshape(-1))
    return codes.reshape(x.shape)


def _e2m1_key_table() -> torch.Tensor:
    """uint8[2^17]: the E2M1 code of every (top-16-bits, sticky) key."""
    k = torch.arange(1 << 17, dtype=torch.int32)
    representative = ((k >> 1) << 16) | (k & 1)
    return e2m1_encode_arith(representative.view(torch.float32))


def e2m1_encode_arith(x: torch.Tensor) -> torch.Tensor:
    """E2M1 codes by integer rounding on the fp32 bits: the exact definition behind
    `e2m1_encode`'s lookup table (same codes for every fp32 bit pattern).

    * |x| < 1 (E2M1 subnormals, step 0.5): 2|x| + 2^23 rounds 2|x| to an integer, ties to even,
      and leaves it in the low mantissa bits; that integer (0, 1 or 2) is the code.
    * 1 <= |x| <= 6: round the fp32 mantissa to 1 bit, ties to even (add 0x1FFFFF + the kept
      bit; the carry of 1.75 moves into the exponent), then bits >> 22 = exponent:mantissa-bit,
      which minus 252 (the bits of 0.5 >> 22) is the code: 1.0 -> 2, 1.5 -> 3, ..., 6.0 -> 7.
    * larger values and +-inf saturate to 7; NaN -> 7 (sign dropped); the sign bit -> bit 3.
    """
    sign = torch.signbit(x)
    sign.masked_fill_(torch.isnan(x), False)
    a = x.abs().nan_to_num_(nan=E2M1_MAX, posinf=E2M1_MAX).clamp_(max=E2M1_MAX)
    small = a < 1.0
    sub = (a * 2.0).add_(2.0**23).view(torch.int32).bitwise_and_(7)
    b = a.view(torch.int32)
    kept = (b >> 22).bitwise_and_(1)
    b.add_(kept).add_(0x1FFFFF - (252 << 22)).bitwise_right_shift_(22)
    code = torch.where(small, sub, b).to(torch.uint8)
    return code.bitwise_or_(sign.view(torch.uint8).mul_(8))


def e2m1_decode(codes: torch.Tensor) -> torch.Tensor:
    """E2M1 codes (uint8, low 4 bits used) -> float32 values (a table lookup)."""
    codes = bits.as_u8(codes, "codes")
    return torch.take(bits.cached_table("e2m1", codes.device, lambda: E2M1_VALUES), (codes & 0x0F).long())


def e2m1_pair_table(device: torch.device) -> torch.Tensor:
    """int64[256]: for each packed byte, its two decoded fp32 values (low nibble first) as 8 bytes."""

    def build() -> torch.Tensor:
        pairs = torch.stack((E2M1_VALUES.repeat(16), E2M1_VALUES.repeat_interleave(16)), dim=-1)
        return pairs.contiguous().view(torch.int64).reshape(256)

    return bits.cached_table("e2m1_pairs", device, build)


def pack_nibbles(codes: torch.Tensor) -> torch.Tensor:
    """[..., D] 4-bit codes -> uint8 [..., D/2]: element 2i in the LOW nibble, 2i+1 in the HIGH.

    Mirrors the byte order of vLLM 0.33's MXFP4 indexer row
    (``_fused_kv_compress_norm_rope_insert_indexer_mxfp4_attn``: "low nibble first, then high").
    """
    codes = bits.as_u8(codes, "codes")
    d = bits.last_dim(codes, "codes")
    require(d % 2 == 0, f"codes: head_dim={d}: packing two E2M1 codes per byte needs an even number")
    pairs = bits.groups(codes, 2)
    return (pairs[..., 0] & 0x0F) | ((pairs[..., 1] & 0x0F) << 4)


def unpack_nibbles(packed: torch.Tensor) -> torch.Tensor:
    """uint8 [..., D/2] -> codes uint8 [..., D] (the inverse of `pack_nibbles`)."""
    packed = bits.as_u8(packed, "packed")
    bits.last_dim(packed, "packed")
    both = torch.stack((packed & 0x0F, packed >> 4), dim=-1)
    return both.reshape(*packed.shape[:-1], packed.shape[-1] * 2)


# --------------------------------------------------------------------------------------- UE8M0


def ue8m0_from_amax(
    amax: torch.Tensor,
    *,
    max_elem: float,
    rule: str = "ceil",
    amax_floor: float,
) -> torch.Tensor:
    """UE8M0 scale byte for each group amax (uint8, same shape).

    ``rule="ceil"`` (default) mirrors vLLM 0.33's DeepSeek V4 writers (``exponents =
    tl.ceil(tl.log2(raw_scales))`` in ``_finalize_norm_rope_quant_store_sparse_attn`` and the
    MXFP4 indexer writer): exponent = ceil(log2(A / max_elem)) with A = max(amax, amax_floor),
    the smallest power of two that keeps every element <= max_elem (no element saturates).
    ``rule="floor"`` is the OCP MX spec's rule: exponent = floor(log2(A)) - floor(log2(max_elem))
    (emax_elem: 2 for E2M1, 8 for E4M3); elements of a group whose amax mantissa exceeds
    max_elem's (6 < A/2^e < 8) saturate. byte = exponent + 127 clamped to [0, 254], so 0xFF is
    never written for a number. Exact: A and max_elem are split with frexp into m * 2^e and only
    the mantissas are compared, so no log2 or division rounding enters (A = max_elem * 2^k gives
    exactly k). A = 0 (floor 0) gives byte 0, +inf gives 254, NaN gives 0xFF (UE8M0's NaN).
    """
    require(rule in ("ceil", "floor"), f"rule={rule!r}: must be 'ceil' or 'floor'")
    require(max_elem > 0 and max_elem < float("inf"), f"max_elem={max_elem!r}: must be positive and finite")
    require(amax_floor >= 0, f"amax_floor={amax_floor!r}: must be >= 0")
    a = bits.as_f32(amax, "amax")
    a = torch.clamp(a, min=bits.f32_floor(amax_floor))  # NaN stays NaN
    ma, ea = torch.frexp(a)
    mm, em = torch.frexp(torch.tensor(float(max_elem), dtype=torch.float32))
    mm, em = float(mm), int(em)
    if rule == "ceil":
        # a / max_elem = (ma / mm) * 2^(ea - em) with ma / mm in (0.5, 2): round up iff ma > mm.
        e = ea - em + (ma > mm).to(torch.int32)
    else:
        # floor(log2 a) - floor(log2 max_elem) = (ea - 1) - (em - 1)
        e = ea - em
    byte = (e + 127).clamp(0, 254)
    byte = torch.where(a == 0, 0, byte)
    byte = torch.where(torch.isinf(a), 254, byte)
    byte = torch.where(torch.isnan(a), 255, byte)
    return byte.to(torch.uint8)


def ue8m0_decode(byte: torch.Tensor) -> torch.Tensor:
    """UE8M0 bytes -> float32 2^(byte-127) (byte 0 = 2^-127, a subnormal); 0xFF -> NaN.

    Same values as torch's ``float8_e8m0fnu``, built from bits.
    """
    byte = bits.as_u8(byte, "scales")
    v = bits.exp2i(byte.to(torch.int32) - 127)
    return torch.where(byte == 255, torch.full_like(v, float("nan")), v)


# ------------------------------------------------------------------------------ E4M3, bf16, fp32


def e4m3_encode(x: torch.Tensor) -> torch.Tensor:
    """fp32 -> E4M3 (``float8_e4m3fn``) bytes, uint8 of the same shape.

    Mirrors the saturating FP8 casts of vLLM 0.33's cache writers (clamp to +-fp8_max, then
    cast; ``quantize_and_insert_k_kernel``): clamp to +-448 first (torch before 2.12 made NaN of
    |x| >= 480 on CPU), then round to nearest even. NaN stays NaN (0x7F/0xFF).
    """
    x = bits.as_f32(x, "x")
    return x.clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn).view(torch.uint8)


def e4m3_decode(u8: torch.Tensor) -> torch.Tensor:
    """E4M3 bytes (uint8) -> float32."""
    return bits.as_u8(u8, "codes").view(torch.float8_e4m3fn).to(torch.float32)


def bf16_encode(x: torch.Tensor) -> torch.Tensor:
    """x [..., D] -> bf16 little-endian bytes uint8 [..., 2D] (round to nearest even).

    Mirrors the bf16 KV cache (vLLM 0.33's ``fused_deepseek_v4_qnorm_rope_kv_rope_full_cache_bf16_insert``)
    and the RoPE part of fp8_ds_mla (``quantize_and_insert_k_kernel`` stores it as bf16).
    1.0 -> [0x80, 0x3F].
    """
    x = bits.as_f32(x, "x")
    bits.last_dim(x, "x")
    return bits.to_bytes(x.to(torch.bfloat16))


def bf16_decode(u8: torch.Tensor) -> torch.Tensor:
    """uint8 [..., 2D] little-endian bf16 -> float32 [..., D]."""
    return bits.from_bytes(bits.as_u8(u8, "payload"), torch.bfloat16, "payload").to(torch.float32)


def fp32_encode(x: torch.Tensor) -> torch.Tensor:
    """x [..., D] -> fp32 little-endian bytes uint8 [..., 4D].

    Mirrors vLLM 0.33's DeepSeek V4 compressor state cache (``CompressorStateCache`` in
    models/deepseek_v4/compressor.py, ``assert self.dtype == torch.float32``: states stored as
    they are).
    """
    x = bits.as_f32(x, "x")
    bits.last_dim(x, "x")
    return bits.to_bytes(x)


def fp32_decode(u8: torch.Tensor) -> torch.Tensor:
    """uint8 [..., 4D] little-endian fp32 -> float32 [..., D] (a copy, never a view of the page)."""
    return bits.from_bytes(bits.as_u8(u8, "payload"), torch.float32, "payload").clone()


# ------------------------------------------------------------------------ half-ulps (error bounds)


def e4m3_half_ulp(u: torch.Tensor) -> torch.Tensor:
    """Half the E4M3 spacing at |u|: 2^(max(floor(log2|u|), -6) - 4) (3 mantissa bits); 2^-10 at 0."""
    a = bits.as_f32(u, "u").abs()
    k = torch.where(a > 0, bits.floor_log2(a), -6).clamp(-6, 127)
    return bits.exp2i(k - 4)


def bf16_half_ulp(x: torch.Tensor) -> torch.Tensor:
    """Half the bf16 spacing at |x|: 2^(max(floor(log2|x|), -126) - 8) (7 mantissa bits)."""
    a = bits.as_f32(x, "x").abs()
    k = torch.where(a > 0, bits.floor_log2(a), -126).clamp(-126, 127)
    return bits.exp2i(k - 8)


def fp32_bound(x: torch.Tensor) -> torch.Tensor:
    """The round-trip error of fp32 bytes: zero everywhere (x's shape)."""
    return torch.zeros_like(x)


def e4m3_scaled_bound(x: torch.Tensor, s: torch.Tensor, *, exact_scale: bool) -> torch.Tensor:
    """Bound on |E4M3(x/s)*s - x| for scale s (broadcast to x).

    In the scaled domain u = |x|/s: half an E4M3 ulp, or ``u - 448`` beyond the clamp if larger,
    times s. A power-of-two scale (``exact_scale``) makes x/s and code*s exact; an fp32 scale
    rounds each once, so the half-ulp is taken at u*(1 + 2^-22) and ``|x| * 2^-21`` is added.
    """
    u = bits.true_div(x.abs(), s)
    if exact_scale:
        h = e4m3_half_ulp(u)
        return s * torch.maximum(h, u - E4M3_MAX)
    h = e4m3_half_ulp(u * (1 + 2.0**-22))
    return s * torch.maximum(h, u - E4M3_MAX) + x.abs() * 2.0**-21
