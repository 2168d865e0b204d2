"""Byte-exact quantizers and decoders for DeepSeek V4 KV-cache rows (docs/row-formats.md#row-formats).

Everything is computed in fp32 with torch, bytes are built by hand and handed out as uint8
tensors, and every function is vectorised over arbitrary leading batch dims ``...`` (for example
``[blocks, rows, D]``). Nothing is tied to a device: outputs are allocated on the input's device,
and the same input gives the same bytes on CPU and CUDA (every division is an IEEE division on
both, see `_true_div`; `kvviz.quant_parity` checks it).

Row and page anatomy (values per scale, footer alignment, element widths, where payloads and
footers sit in a page) is `kvviz.formats`'s: the codecs size their rows from its `RowFormat`s
and place them with its `PageAnatomy`.

Formats
-------
* E2M1 (FP4): codes 0..7 = 0, 0.5, 1, 1.5, 2, 3, 4, 6; codes 8..15 are the negatives (8 = -0).
* UE8M0: an unsigned power-of-two scale, value = 2^(byte - 127); 0xFF is NaN, there is no zero.
* E4M3 (``float8_e4m3fn``): max 448, no infinities.
* Rows: ``fp8_ds_mla`` (584 B), FlashInfer FP8 (512 B, per-tensor scale held outside the
  cache), bf16 (1024 B), indexer FP8 (132 B), indexer MXFP4 (68 B), fp32 compressor state.
* Pages: all rows' payloads first, then all rows' footers (scale bytes), then zero padding.

Scale rules
-----------
The DeepSeek engines round scales UP: ``exponent = ceil(log2(amax / max_elem))`` so no element
saturates. The OCP MX spec floors instead (``rule="floor"``: ``floor(log2(amax)) - emax_elem``,
emax_elem = floor(log2(max_elem))); it is offered, never the default.
The amax floor is always an explicit keyword because engines differ (vLLM's MXFP4 writer:
``6 * 2**-126``; the FP8 paths: ``1e-4``).

NaN policy
----------
* E2M1 has no NaN: ``e2m1_encode`` maps NaN to code 7 (+6, the saturated maximum).
* A NaN anywhere in a scale group makes that group's amax NaN; ``ue8m0_from_amax`` then writes
  0xFF (UE8M0's NaN, the only case in which 0xFF is written), so the whole group decodes to NaN.
  Likewise a NaN makes an fp32 scale (indexer FP8, per-tensor FP8) NaN.
* E4M3/bf16/fp32 keep NaN as NaN (torch's casts).

Error bounds
------------
``error_bound(name, x, **opts)`` returns, per element, an absolute bound ``b`` such that
``|decode(encode(x)) - x| <= b`` for every finite ``x`` (the tests check exactly this):

* MXFP4: with s the group's decoded scale and u = |x|/s, half the E2M1 spacing around u:
  ``s * 0.25`` for u < 2, ``s * 0.5`` for 2 <= u < 4, ``s * 1.0`` for 4 <= u <= 6; when u > 6
  (only with ``scale_rule="floor"`` or a clamped scale byte) the saturation error ``s*(u-6)``
  if larger. Scales are powers of two, so x/s and code*s are exact and need no slack.
* E4M3 (scaled domain u): half an ulp, ``2^(max(floor(log2 u), -6) - 4)`` (3 mantissa bits;
  subnormal spacing 2^-9 gives 2^-10 below 2^-6), or ``u - 448`` beyond the clamp if larger.
  With a power-of-two scale s (fp8_ds_mla, pow2 indexer) the bound is s times that. With an
  fp32 scale (indexer FP8 default, FlashInfer per-tensor FP8) the division x/s and the
  product code*s each round once in fp32, so the half-ulp is taken at u*(1 + 2^-22) and
  ``|x| * 2^-21`` is added.
* bf16: half an ulp, ``2^(max(floor(log2|x|), -126) - 8)`` (7 mantissa bits).
* fp32: 0.
"""

from __future__ import annotations

import dataclasses
import sys
import types
from typing import Any, Callable, Mapping

import torch

from . import formats
from .errors import KvvizError, require
from .formats import DS_MLA_ROPE_DIMS, DS_MLA_SCALE_BLOCK, INDEXER_FP8_BLOCK, MXFP4_BLOCK, PageAnatomy

__all__ = [
    "E2M1_VALUES",
    "E2M1_MAX",
    "E4M3_MAX",
    "MXFP4_AMAX_FLOOR",
    "FP8_AMAX_FLOOR",
    "e2m1_encode",
    "e2m1_decode",
    "pack_nibbles",
    "unpack_nibbles",
    "ue8m0_from_amax",
    "ue8m0_decode",
    "mxfp4_encode",
    "mxfp4_decode",
    "e4m3_encode",
    "e4m3_decode",
    "fp8_indexer_encode",
    "fp8_indexer_decode",
    "ds_mla_encode",
    "ds_mla_decode",
    "ds_mla_row_bytes",
    "fp8_tensor_encode",
    "fp8_tensor_decode",
    "bf16_encode",
    "bf16_decode",
    "fp32_encode",
    "fp32_decode",
    "e4m3_half_ulp",
    "bf16_half_ulp",
    "error_bound",
    "Encoded",
    "Codec",
    "CODECS",
    "get_codec",
    "pack_page",
    "write_page",
    "unpack_page",
    "read_interleaved",
]

# --------------------------------------------------------------------------------------------
# Constants

#: The 16 E2M1 code values (index = code); code 8 is -0.0.
E2M1_VALUES = torch.tensor(
    [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0],
    dtype=torch.float32,
)
E2M1_MAX = 6.0
E4M3_MAX = 448.0
#: vLLM's MXFP4 writer floors amax at 6 * 2^-126, so an all-zero 32-group gets scale byte 1.
MXFP4_AMAX_FLOOR = 6 * 2**-126
#: The FP8 paths (indexer FP8, fp8_ds_mla NoPE scales) floor amax at 1e-4.
FP8_AMAX_FLOOR = 1e-4

_LITTLE = sys.byteorder == "little"

# --------------------------------------------------------------------------------------------
# Small helpers


def _f32(x: torch.Tensor, what: str) -> torch.Tensor:
    require(isinstance(x, torch.Tensor), f"{what}: expected a torch.Tensor, got {type(x).__name__}")
    return x.to(torch.float32)


def _u8(x: torch.Tensor, what: str) -> torch.Tensor:
    require(isinstance(x, torch.Tensor), f"{what}: expected a torch.Tensor, got {type(x).__name__}")
    require(x.dtype == torch.uint8, f"{what}: expected dtype uint8, got {x.dtype}")
    return x


def _last_dim(x: torch.Tensor, what: str) -> int:
    require(x.dim() >= 1, f"{what}: needs at least one dim (the row), got a 0-dim tensor")
    return int(x.shape[-1])


_tables: dict = {}


def _e2m1_table(device: torch.device) -> torch.Tensor:
    key = str(device)
    t = _tables.get(key)
    if t is None:
        t = _tables[key] = E2M1_VALUES.to(device)
    return t


def _e2m1_pair_table(device: torch.device) -> torch.Tensor:
    """int64[256]: for each packed byte, its two decoded fp32 values (low nibble first) as 8 bytes."""
    key = ("pairs", str(device))
    t = _tables.get(key)
    if t is None:
        pairs = torch.stack((E2M1_VALUES.repeat(16), E2M1_VALUES.repeat_interleave(16)), dim=-1)
        t = _tables[key] = pairs.contiguous().view(torch.int64).reshape(256).to(device)
    return t


def _exp2i(k: torch.Tensor) -> torch.Tensor:
    """Exact 2^k in fp32 for integer tensor k, built from bits (k clamped to [-149, 127])."""
    k = k.to(torch.int32).clamp(-149, 127)
    normal = (k + 127).clamp(min=1) << 23
    sub = torch.bitwise_left_shift(torch.ones_like(k), (k + 149).clamp(0, 22))
    return torch.where(k >= -126, normal, sub).view(torch.float32)


def _floor_log2(a: torch.Tensor) -> torch.Tensor:
    """floor(log2 a) for a > 0, exact (frexp: a = m * 2^e, m in [0.5, 1)). int32."""
    _, e = torch.frexp(a)
    return e - 1


def _to_bytes(t: torch.Tensor) -> torch.Tensor:
    """Little-endian bytes of each element: [..., n] of itemsize k -> uint8 [..., n*k]."""
    k = t.element_size()
    b = t.contiguous().view(torch.uint8)
    if not _LITTLE and k > 1:
        b = b.reshape(*b.shape[:-1], -1, k).flip(-1).reshape(b.shape)
    return b


def _from_bytes(b: torch.Tensor, dtype: torch.dtype, what: str) -> torch.Tensor:
    """Inverse of _to_bytes: uint8 [..., n*k] (little-endian) -> dtype [..., n]."""
    k = torch.empty((), dtype=dtype).element_size()
    n = _last_dim(b, what)
    require(n % k == 0, f"{what}: last dim {n} is not a multiple of {k} ({dtype} bytes)")
    if not _LITTLE and k > 1:
        b = b.reshape(*b.shape[:-1], -1, k).flip(-1).reshape(b.shape)
    if not b.is_contiguous() or b.storage_offset() % k:
        b = b.clone(memory_format=torch.contiguous_format)
    return b.view(dtype)


_constants: dict = {}  # (divisor, dtype, device) -> a 0-dim divisor tensor on that device
_MAX_CONSTANTS = 64


def _true_div(x: torch.Tensor, divisor: float | torch.Tensor) -> torch.Tensor:
    """``x / divisor`` rounded once (an IEEE division), giving the same bits on every device.

    Every division in this module goes through here. Why: on CUDA, torch computes a division by
    a Python number, or by a 0-dim CPU tensor (both count as a host scalar), as
    ``x * (1 / divisor)`` (ATen's ``div_true_kernel_cuda``: "this may lose one bit of precision
    compared to computing the division"), while the CPU kernel divides. With the rounded
    reciprocal, ``amax / 448`` and ``x / scale`` came out one bit off on an H200 for some inputs,
    so FP8 codes differed between CPU and CUDA. vLLM's kernels divide (``scale = amax / 448``,
    then ``x / scale``); a divisor tensor on x's own device and of x's dtype makes torch run its
    elementwise division on every device, which is what we do here.
    """
    if not isinstance(divisor, torch.Tensor):
        key = (float(divisor), x.dtype, str(x.device))
        d = _constants.get(key)
        if d is None:
            d = torch.tensor(float(divisor), dtype=x.dtype, device=x.device)
            if len(_constants) < _MAX_CONSTANTS:  # the module's fixed divisors; a caller's own scales pass through
                _constants[key] = d
        divisor = d
    elif divisor.device != x.device or divisor.dtype != x.dtype:
        divisor = divisor.to(device=x.device, dtype=x.dtype)
    return torch.div(x, divisor)


def _groups(x: torch.Tensor, size: int) -> torch.Tensor:
    """[..., D] -> [..., D/size, size] (caller has validated divisibility)."""
    return x.reshape(*x.shape[:-1], x.shape[-1] // size, size)


# --------------------------------------------------------------------------------------------
# E2M1 (FP4)


def e2m1_encode(x: torch.Tensor) -> torch.Tensor:
    """Round fp32 values to E2M1 codes 0..15 (uint8, same shape).

    Mirrors the MXFP4 element conversion of vLLM/DeepSeek (OCP: round to nearest, ties to even,
    saturate): values 0.25->0, 0.75->1.0, 1.25->1.0, 1.75->2.0, 2.5->2.0, 3.5->4.0, 5.0->4.0
    (the tie goes to the code whose mantissa bit, its low bit, is 0), |x| > 6 -> 6. The sign bit
    is kept, so -0.0 and small negatives that round to zero give code 8 (-0). NaN: E2M1 has no
    NaN, and this function returns code 7 (+6) for it (our choice; inside MXFP4 the group's
    scale byte becomes 0xFF, so the group decodes to NaN anyway).
    """
    x = _f32(x, "x")
    bits = x.view(torch.int32)
    # Key = the top 16 bits of the fp32 (sign, exponent, 7 mantissa bits) and one sticky bit
    # (any of the low 16 bits set). That decides the rounding exactly: every E2M1 midpoint has
    # zero low bits, so only "exactly on", "below" or "above" matters beyond the top 16 bits.
    key = (bits >> 15).bitwise_and_(0x1FFFE)
    key.bitwise_or_((bits & 0xFFFF) != 0)
    codes = torch.index_select(_e2m1_key_table(x.device), 0, key.reshape(-1))
    return codes.reshape(x.shape)


def _e2m1_key_table(device: torch.device) -> torch.Tensor:
    """uint8[2^17]: the E2M1 code of every (top-16-bits, sticky) key, built once per device."""
    key = ("e2m1_keys", str(device))
    t = _tables.get(key)
    if t is None:
        k = torch.arange(1 << 17, dtype=torch.int32)
        representative = ((k >> 1) << 16) | (k & 1)
        t = _tables[key] = _e2m1_encode_arith(representative.view(torch.float32)).to(device)
    return t


def _e2m1_encode_arith(x: torch.Tensor) -> torch.Tensor:
    """E2M1 codes by integer rounding on the fp32 bits (exact; the definition behind the table).

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
    bits = a.view(torch.int32)
    kept = (bits >> 22).bitwise_and_(1)
    bits.add_(kept).add_(0x1FFFFF - (252 << 22)).bitwise_right_shift_(22)
    code = torch.where(small, sub, bits).to(torch.uint8)
    return code.bitwise_or_(sign.view(torch.uint8).mul_(8))


def _absmax(g: torch.Tensor) -> torch.Tensor:
    """max |g| over the last dim without a full-size |g| temporary (NaN propagates)."""
    lo, hi = torch.aminmax(g, dim=-1)
    return torch.maximum(hi, lo.neg_())


def e2m1_decode(codes: torch.Tensor) -> torch.Tensor:
    """E2M1 codes (uint8, low 4 bits used) -> float32 values (table lookup)."""
    codes = _u8(codes, "codes")
    return torch.take(_e2m1_table(codes.device), (codes & 0x0F).long())


def pack_nibbles(codes: torch.Tensor) -> torch.Tensor:
    """[..., D] 4-bit codes -> uint8 [..., D/2]: element 2i in the LOW nibble, 2i+1 in the HIGH.

    Mirrors the byte order of vLLM's MXFP4 indexer row.
    """
    codes = _u8(codes, "codes")
    d = _last_dim(codes, "codes")
    require(d % 2 == 0, f"head_dim={d}: packing two E2M1 codes per byte needs an even number")
    pairs = _groups(codes, 2)
    return (pairs[..., 0] & 0x0F) | ((pairs[..., 1] & 0x0F) << 4)


def unpack_nibbles(packed: torch.Tensor) -> torch.Tensor:
    """uint8 [..., D/2] -> codes uint8 [..., D] (inverse of pack_nibbles)."""
    packed = _u8(packed, "packed")
    _last_dim(packed, "packed")
    both = torch.stack((packed & 0x0F, packed >> 4), dim=-1)
    return both.reshape(*packed.shape[:-1], packed.shape[-1] * 2)


# --------------------------------------------------------------------------------------------
# UE8M0 scales


def ue8m0_from_amax(
    amax: torch.Tensor,
    *,
    max_elem: float,
    rule: str = "ceil",
    amax_floor: float,
) -> torch.Tensor:
    """UE8M0 scale byte for each group amax (uint8, same shape).

    ``rule="ceil"`` (default) mirrors the DeepSeek engines and vLLM's writers: exponent =
    ceil(log2(A / max_elem)) with A = max(amax, amax_floor), the smallest power of two that
    keeps every element <= max_elem (no element saturates). ``rule="floor"`` is the OCP MX
    spec's rule: exponent = floor(log2(A)) - floor(log2(max_elem)) (emax_elem: 2 for E2M1, 8 for
    E4M3); elements of a group whose amax mantissa exceeds max_elem's (6 < A/2^e < 8) saturate.
    byte = exponent + 127 clamped to [0, 254], so 0xFF is never written for a number.
    Exact: A and max_elem are split with frexp into m * 2^e and only the mantissas are
    compared, so no log2 or division rounding enters (A = max_elem * 2^k gives exactly k).
    A = 0 (floor 0) gives byte 0, +inf gives 254, NaN gives 0xFF (UE8M0's NaN).
    """
    require(rule in ("ceil", "floor"), f"rule={rule!r}: must be 'ceil' or 'floor'")
    require(max_elem > 0 and max_elem < float("inf"), f"max_elem={max_elem!r}: must be positive and finite")
    require(amax_floor >= 0, f"amax_floor={amax_floor!r}: must be >= 0")
    a = _f32(amax, "amax")
    a = torch.clamp(a, min=float(torch.tensor(amax_floor, dtype=torch.float32)))  # NaN stays NaN
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
    byte = _u8(byte, "scales")
    v = _exp2i(byte.to(torch.int32) - 127)
    return torch.where(byte == 255, torch.full_like(v, float("nan")), v)


# --------------------------------------------------------------------------------------------
# MXFP4 (indexer K, 68 B rows for head_dim 128)


def _check_mxfp4_dim(d: int) -> None:
    require(d > 0 and d % MXFP4_BLOCK == 0, f"head_dim={d}: MXFP4 needs a positive multiple of {MXFP4_BLOCK}")


def mxfp4_encode(
    x: torch.Tensor,
    *,
    scale_rule: str = "ceil",
    amax_floor: float = MXFP4_AMAX_FLOOR,
) -> tuple[torch.Tensor, torch.Tensor]:
    """x [..., D] -> (packed uint8 [..., D/2], scales uint8 [..., D/32]).

    Mirrors vLLM's MXFP4 indexer K writer: one UE8M0 scale per MXFP4_BLOCK (32) values (ceil
    rule, amax floored at 6*2^-126), elements = E2M1(x / scale), element 2i in the low nibble.
    """
    x = _f32(x, "x")
    d = _last_dim(x, "x")
    _check_mxfp4_dim(d)
    g = _groups(x, MXFP4_BLOCK)
    amax = _absmax(g)
    scales = ue8m0_from_amax(amax, max_elem=E2M1_MAX, rule=scale_rule, amax_floor=amax_floor)
    q = e2m1_encode(_true_div(g, ue8m0_decode(scales).unsqueeze(-1))).reshape(x.shape)
    pairs = _groups(q, 2)
    return torch.bitwise_left_shift(pairs[..., 1], 4).bitwise_or_(pairs[..., 0]), scales


def mxfp4_decode(packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """(packed uint8 [..., D/2], scales uint8 [..., D/32]) -> float32 [..., D]."""
    packed = _u8(packed, "packed")
    scales = _u8(scales, "scales")
    d = 2 * _last_dim(packed, "packed")
    _check_mxfp4_dim(d)
    n_scales = d // MXFP4_BLOCK
    require(
        tuple(scales.shape) == tuple(packed.shape[:-1]) + (n_scales,),
        f"scales: shape {tuple(scales.shape)} does not match packed {tuple(packed.shape)} (needs [..., {n_scales}])",
    )
    # one lookup per byte gives both values (a 256-entry table of fp32 pairs)
    v = torch.take(_e2m1_pair_table(packed.device), packed.long()).view(torch.float32)
    v = v.reshape(*packed.shape[:-1], n_scales, MXFP4_BLOCK)
    return v.mul_(ue8m0_decode(scales).unsqueeze(-1)).reshape(*packed.shape[:-1], d)


# --------------------------------------------------------------------------------------------
# E4M3


def e4m3_encode(x: torch.Tensor) -> torch.Tensor:
    """fp32 -> E4M3 (``float8_e4m3fn``) bytes, uint8 same shape.

    Mirrors the saturating FP8 casts of the vLLM kernels: clamp to +-448 first (torch before 2.12
    made NaN of |x| >= 480 on CPU), then round to nearest even. NaN stays NaN (0x7F/0xFF).
    """
    x = _f32(x, "x")
    return x.clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn).view(torch.uint8)


def e4m3_decode(u8: torch.Tensor) -> torch.Tensor:
    """E4M3 bytes -> float32."""
    return _u8(u8, "codes").view(torch.float8_e4m3fn).to(torch.float32)


# --------------------------------------------------------------------------------------------
# Indexer FP8 (132 B rows for head_dim 128)


def _check_block(d: int, block: int, what: str) -> None:
    require(isinstance(block, int) and block > 0, f"block={block!r}: must be a positive integer")
    require(d > 0 and d % block == 0, f"head_dim={d}: {what} needs a positive multiple of block={block}")


def _pow2_ceil(s: torch.Tensor) -> torch.Tensor:
    """Round positive fp32 values up to a power of two, exactly."""
    m, e = torch.frexp(s)
    return _exp2i(torch.where(m == 0.5, e - 1, e))


def fp8_indexer_encode(
    x: torch.Tensor,
    *,
    block: int = INDEXER_FP8_BLOCK,
    pow2_scale: bool = False,
    amax_floor: float = FP8_AMAX_FLOOR,
) -> tuple[torch.Tensor, torch.Tensor]:
    """x [..., D] -> (codes uint8 [..., D], scales float32 [..., D/block]).

    Mirrors vLLM's ``indexer_k_quant_and_cache``: scale = max(amax, 1e-4) / 448 in fp32,
    optionally rounded UP to a power of two (its ``use_ue8m0`` variant, exp2(ceil(log2 s)), here
    computed exactly), codes = saturating E4M3(x / scale). Both divisions are true divisions
    (`_true_div`), as in the kernel, on every device. One difference: the kernel's fmaxf drops a
    NaN from amax, here a NaN propagates into that block's scale (the block decodes NaN).
    """
    x = _f32(x, "x")
    d = _last_dim(x, "x")
    _check_block(d, block, "indexer FP8")
    require(amax_floor > 0, f"amax_floor={amax_floor!r}: must be > 0 (the scale divides)")
    g = _groups(x, block)
    amax = _absmax(g)
    scales = _true_div(torch.clamp(amax, min=float(torch.tensor(amax_floor, dtype=torch.float32))), E4M3_MAX)
    if pow2_scale:
        scales = _pow2_ceil(scales)
    codes = e4m3_encode(_true_div(g, scales.unsqueeze(-1)))
    return codes.reshape(x.shape), scales


def fp8_indexer_decode(codes: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """(codes uint8 [..., D], scales float32 [..., D/block]) -> float32 [..., D]."""
    codes = _u8(codes, "codes")
    require(isinstance(scales, torch.Tensor), "scales: expected a torch.Tensor")
    d = _last_dim(codes, "codes")
    nb = _last_dim(scales, "scales")
    require(nb > 0 and d % nb == 0, f"scales: {nb} scales do not divide head_dim={d}")
    require(
        tuple(scales.shape[:-1]) == tuple(codes.shape[:-1]),
        f"scales: leading dims {tuple(scales.shape[:-1])} differ from codes {tuple(codes.shape[:-1])}",
    )
    v = e4m3_decode(codes)
    return (_groups(v, d // nb) * scales.to(torch.float32).unsqueeze(-1)).reshape(v.shape)


# --------------------------------------------------------------------------------------------
# DeepSeek V4 fp8_ds_mla (584 B rows for head_dim 512)


def _ds_mla_row(head_dim: int, rope_dims: int, scale_block: int) -> formats.RowFormat:
    """formats.ds_mla_row after checking the arguments under kvviz.quant's names."""
    require(isinstance(head_dim, int) and head_dim > 0, f"head_dim={head_dim!r}: must be a positive integer")
    require(isinstance(rope_dims, int) and rope_dims >= 0, f"rope_dims={rope_dims!r}: must be a non-negative integer")
    require(rope_dims < head_dim, f"rope_dims={rope_dims}: must be smaller than head_dim={head_dim}")
    require(isinstance(scale_block, int) and scale_block > 0, f"scale_block={scale_block!r}: must be a positive integer")
    nope = head_dim - rope_dims
    require(
        nope % scale_block == 0,
        f"head_dim={head_dim}: NoPE dims (head_dim - rope_dims = {nope}) must be a multiple of scale_block={scale_block}",
    )
    return formats.ds_mla_row(head_dim, rope_dims, scale_block)


def ds_mla_row_bytes(
    head_dim: int, *, rope_dims: int = DS_MLA_ROPE_DIMS, scale_block: int = DS_MLA_SCALE_BLOCK
) -> tuple[int, int]:
    """(payload_bytes, footer_bytes) of one fp8_ds_mla row (formats.ds_mla_row); (576, 8) for head_dim 512."""
    row = _ds_mla_row(head_dim, rope_dims, scale_block)
    return row.payload_bytes, row.footer_bytes


def ds_mla_encode(
    x: torch.Tensor,
    *,
    rope_dims: int = DS_MLA_ROPE_DIMS,
    scale_block: int = DS_MLA_SCALE_BLOCK,
    amax_floor: float = FP8_AMAX_FLOOR,
) -> tuple[torch.Tensor, torch.Tensor]:
    """x [..., D] -> (payload uint8 [..., nope + 2*rope_dims], footer uint8 [..., F]).

    Mirrors DeepSeek V4's FlashMLA ``fp8_ds_mla`` row as vLLM writes it: the first D - rope_dims
    (NoPE) dims as E4M3 with one UE8M0 scale per 64 dims (ceil rule, max 448, amax floored at
    1e-4), then the RoPE dims as bf16 little-endian. Footer = the scale bytes, then zero bytes up
    to a multiple of 8 (the row's fields: formats.ds_mla_row). head_dim 512: payload 448 + 128 =
    576, footer 7 + 1 = 8, row 584.
    """
    x = _f32(x, "x")
    d = _last_dim(x, "x")
    row = _ds_mla_row(d, rope_dims, scale_block)
    nope = row.field("NoPE").count
    g = _groups(x[..., :nope], scale_block)
    amax = _absmax(g)
    sbytes = ue8m0_from_amax(amax, max_elem=E4M3_MAX, rule="ceil", amax_floor=amax_floor)
    codes = e4m3_encode(_true_div(g, ue8m0_decode(sbytes).unsqueeze(-1))).reshape(*x.shape[:-1], nope)
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

    Pad bytes of the footer are ignored.
    """
    payload = _u8(payload, "payload")
    footer = _u8(footer, "footer")
    p = _last_dim(payload, "payload")
    require(isinstance(rope_dims, int) and rope_dims >= 0, f"rope_dims={rope_dims!r}: must be a non-negative integer")
    rope_bytes = formats.Field(name="RoPE", element=formats.Element.BF16, count=rope_dims).num_bytes
    nope = p - rope_bytes  # E4M3: one byte per NoPE dim
    require(nope > 0, f"rope_dims={rope_dims}: payload of {p} bytes leaves no NoPE dims")
    n_scales = _ds_mla_row(nope + rope_dims, rope_dims, scale_block).field("scale").count
    require(
        footer.shape[-1] >= n_scales and tuple(footer.shape[:-1]) == tuple(payload.shape[:-1]),
        f"footer: shape {tuple(footer.shape)} cannot hold {n_scales} scales for payload {tuple(payload.shape)}",
    )
    v = _groups(e4m3_decode(payload[..., :nope]), scale_block)
    v = (v * ue8m0_decode(footer[..., :n_scales]).unsqueeze(-1)).reshape(*payload.shape[:-1], nope)
    return torch.cat((v, bf16_decode(payload[..., nope:])), dim=-1)


# --------------------------------------------------------------------------------------------
# FlashInfer FP8 row (per-tensor scale), bf16, fp32


def fp8_tensor_encode(
    x: torch.Tensor,
    *,
    scale: float | torch.Tensor | None = None,
    amax_floor: float = FP8_AMAX_FLOOR,
) -> tuple[torch.Tensor, torch.Tensor]:
    """x [..., D] -> (codes uint8 [..., D], scale float32 0-dim tensor).

    Mirrors the FlashInfer DSV4 FP8 cache (512 B rows, RoPE dims quantized too): one per-tensor
    scale, held outside the cache, = max(amax, amax_floor) / 448 over the whole tensor. Pass
    ``scale=`` to use a fixed one instead (vLLM's uncalibrated ``k_scale`` is 1.0).
    """
    x = _f32(x, "x")
    _last_dim(x, "x")
    if scale is None:
        require(amax_floor > 0, f"amax_floor={amax_floor!r}: must be > 0 (the scale divides)")
        amax = _absmax(x.reshape(1, -1))[0] if x.numel() else x.new_zeros(())
        s = _true_div(torch.clamp(amax, min=float(torch.tensor(amax_floor, dtype=torch.float32))), E4M3_MAX)
    else:
        if isinstance(scale, (int, float)):
            require(0 < scale < float("inf"), f"scale={scale!r}: must be positive and finite")
        s = torch.as_tensor(scale, dtype=torch.float32, device=x.device).reshape(())
    return e4m3_encode(_true_div(x, s)), s


def fp8_tensor_decode(codes: torch.Tensor, scale: float | torch.Tensor) -> torch.Tensor:
    """(codes uint8 [..., D], per-tensor scale) -> float32 [..., D]."""
    v = e4m3_decode(codes)
    return v * torch.as_tensor(scale, dtype=torch.float32, device=v.device)


def bf16_encode(x: torch.Tensor) -> torch.Tensor:
    """x [..., D] -> bf16 little-endian bytes uint8 [..., 2D] (round to nearest even).

    Mirrors the bf16 KV cache and the RoPE part of fp8_ds_mla. 1.0 -> [0x80, 0x3F].
    """
    x = _f32(x, "x")
    _last_dim(x, "x")
    return _to_bytes(x.to(torch.bfloat16))


def bf16_decode(u8: torch.Tensor) -> torch.Tensor:
    """uint8 [..., 2D] little-endian bf16 -> float32 [..., D]."""
    return _from_bytes(_u8(u8, "payload"), torch.bfloat16, "payload").to(torch.float32)


def fp32_encode(x: torch.Tensor) -> torch.Tensor:
    """x [..., D] -> fp32 little-endian bytes uint8 [..., 4D] (compressor states, stored as is)."""
    x = _f32(x, "x")
    _last_dim(x, "x")
    return _to_bytes(x)


def fp32_decode(u8: torch.Tensor) -> torch.Tensor:
    """uint8 [..., 4D] little-endian fp32 -> float32 [..., D]."""
    return _from_bytes(_u8(u8, "payload"), torch.float32, "payload").clone()


# --------------------------------------------------------------------------------------------
# Error bounds (see module docstring for the derivation)


def e4m3_half_ulp(u: torch.Tensor) -> torch.Tensor:
    """Half the E4M3 spacing at |u|: 2^(max(floor(log2|u|), -6) - 4); 2^-10 at 0."""
    a = _f32(u, "u").abs()
    k = torch.where(a > 0, _floor_log2(a), -6).clamp(-6, 127)
    return _exp2i(k - 4)


def bf16_half_ulp(x: torch.Tensor) -> torch.Tensor:
    """Half the bf16 spacing at |x|: 2^(max(floor(log2|x|), -126) - 8)."""
    a = _f32(x, "x").abs()
    k = torch.where(a > 0, _floor_log2(a), -126).clamp(-126, 127)
    return _exp2i(k - 8)


def _e4m3_scaled_bound(x: torch.Tensor, s: torch.Tensor, *, exact_scale: bool) -> torch.Tensor:
    """Bound on |E4M3(x/s)*s - x| for scale s (broadcast to x)."""
    u = _true_div(x.abs(), s)
    if exact_scale:
        h = e4m3_half_ulp(u)
        return s * torch.maximum(h, u - E4M3_MAX)
    h = e4m3_half_ulp(u * (1 + 2.0**-22))
    return s * torch.maximum(h, u - E4M3_MAX) + x.abs() * 2.0**-21


def _mxfp4_bound(x: torch.Tensor, *, scale_rule: str = "ceil", amax_floor: float = MXFP4_AMAX_FLOOR) -> torch.Tensor:
    d = _last_dim(x, "x")
    _check_mxfp4_dim(d)
    g = _groups(x, MXFP4_BLOCK)
    sb = ue8m0_from_amax(_absmax(g), max_elem=E2M1_MAX, rule=scale_rule, amax_floor=amax_floor)
    s = ue8m0_decode(sb).unsqueeze(-1)
    u = _true_div(g.abs(), s)
    h = torch.where(u < 2, 0.25, torch.where(u < 4, 0.5, 1.0))
    return (s * torch.maximum(h, u - E2M1_MAX)).reshape(x.shape)


def _ds_mla_bound(
    x: torch.Tensor,
    *,
    rope_dims: int = DS_MLA_ROPE_DIMS,
    scale_block: int = DS_MLA_SCALE_BLOCK,
    amax_floor: float = FP8_AMAX_FLOOR,
) -> torch.Tensor:
    d = _last_dim(x, "x")
    nope = _ds_mla_row(d, rope_dims, scale_block).field("NoPE").count
    g = _groups(x[..., :nope], scale_block)
    sb = ue8m0_from_amax(_absmax(g), max_elem=E4M3_MAX, rule="ceil", amax_floor=amax_floor)
    b = _e4m3_scaled_bound(g, ue8m0_decode(sb).unsqueeze(-1), exact_scale=True)
    return torch.cat((b.reshape(*x.shape[:-1], nope), bf16_half_ulp(x[..., nope:])), dim=-1)


def _indexer_fp8_bound(
    x: torch.Tensor, *, block: int = INDEXER_FP8_BLOCK, pow2_scale: bool = False, amax_floor: float = FP8_AMAX_FLOOR
) -> torch.Tensor:
    _, s = fp8_indexer_encode(x, block=block, pow2_scale=pow2_scale, amax_floor=amax_floor)
    b = _e4m3_scaled_bound(_groups(x, block), s.unsqueeze(-1), exact_scale=pow2_scale)
    return b.reshape(x.shape)


def _fp8_tensor_bound(
    x: torch.Tensor, *, scale: float | torch.Tensor | None = None, amax_floor: float = FP8_AMAX_FLOOR
) -> torch.Tensor:
    _, s = fp8_tensor_encode(x, scale=scale, amax_floor=amax_floor)
    return _e4m3_scaled_bound(x, s, exact_scale=False)


_BOUNDS: dict[str, Callable[..., torch.Tensor]] = {
    "fp8_ds_mla": _ds_mla_bound,
    "fp8": _fp8_tensor_bound,
    "bf16": lambda x: bf16_half_ulp(x),
    "indexer_fp8": _indexer_fp8_bound,
    "indexer_mxfp4": _mxfp4_bound,
    "fp32": lambda x: torch.zeros_like(x),
}


def error_bound(name: str, x: torch.Tensor, **opts: Any) -> torch.Tensor:
    """Per-element absolute bound on |decode(encode(x)) - x| for codec `name` (float32, x's shape).

    Holds for finite x (bf16: away from the fp32 overflow edge). Derivations in the module
    docstring; `opts` are the codec's encode options.
    """
    codec = get_codec(name)
    codec._check_opts(opts)
    return _BOUNDS[codec.name](_f32(x, "x"), **opts)


# --------------------------------------------------------------------------------------------
# Codec registry


@dataclasses.dataclass(frozen=True, eq=False)
class Encoded:
    """One encoded batch of rows.

    payload: uint8 [..., P], the per-row bytes that go first in the page.
    footer:  uint8 [..., F], the per-row bytes that go in the page's footer (F may be 0).
    side:    anything held outside the cache (the per-tensor FP8 scale); None otherwise.
    opts:    the encode options used, so ``Codec.decode`` can read the row back.
    """

    payload: torch.Tensor
    footer: torch.Tensor
    side: Any = None
    codec: str = ""
    opts: Mapping[str, Any] = dataclasses.field(default_factory=lambda: types.MappingProxyType({}))


@dataclasses.dataclass(frozen=True)
class Codec:
    """A row format: encode rows to (payload, footer, side) bytes, decode them back, size them.

    ``encode(x, **opts)`` takes x [..., D]; ``row_format(dims, **opts)`` is the row's anatomy
    (a `kvviz.formats.RowFormat`, the one source of its sizes) and ``row_bytes(dims, **opts)``
    its (payload_bytes, footer_bytes); ``error_bound(x, **opts)`` gives the per-element absolute
    error bound. Unknown options raise ValueError naming them.
    """

    name: str
    description: str
    options: tuple[str, ...]
    _encode: Callable[..., tuple[torch.Tensor, torch.Tensor, Any]] = dataclasses.field(repr=False)
    _decode: Callable[..., torch.Tensor] = dataclasses.field(repr=False)
    _row: Callable[..., formats.RowFormat] = dataclasses.field(repr=False)
    # The encode option through which the side data (held outside the cache, e.g. a per-tensor
    # scale) is handed back to `error_bound` for rows encoded together with others.
    side_option: str | None = None

    def _check_opts(self, opts: Mapping[str, Any]) -> None:
        for k in opts:
            require(
                k in self.options,
                f"{k}: not an option of codec {self.name!r} (options: {', '.join(self.options) or 'none'})",
            )

    def encode(self, x: torch.Tensor, **opts: Any) -> Encoded:
        self._check_opts(opts)
        payload, footer, side = self._encode(x, **opts)
        return Encoded(payload, footer, side, self.name, types.MappingProxyType(dict(opts)))

    def decode(self, enc: Encoded) -> torch.Tensor:
        require(isinstance(enc, Encoded), f"enc: expected an Encoded, got {type(enc).__name__}")
        require(
            enc.codec in ("", self.name),
            f"enc: was encoded by codec {enc.codec!r}, cannot decode with {self.name!r}",
        )
        return self._decode(enc, **dict(enc.opts))

    def row_format(self, dims: int, **opts: Any) -> formats.RowFormat:
        """The kvviz.formats row this codec writes for head dim `dims` with these options."""
        self._check_opts(opts)
        require(isinstance(dims, int) and dims > 0, f"head_dim={dims!r}: must be a positive integer")
        return self._row(dims, **opts)

    def row_bytes(self, dims: int, **opts: Any) -> tuple[int, int]:
        """(payload_bytes, footer_bytes) of one row, from `row_format`."""
        row = self.row_format(dims, **opts)
        return row.payload_bytes, row.footer_bytes

    def error_bound(self, x: torch.Tensor, **opts: Any) -> torch.Tensor:
        return error_bound(self.name, x, **opts)


def _empty_footer(p: torch.Tensor) -> torch.Tensor:
    return p.new_zeros(*p.shape[:-1], 0)


def _enc_ds_mla(x, **o):
    p, f = ds_mla_encode(x, **o)
    return p, f, None


def _dec_ds_mla(e, rope_dims=DS_MLA_ROPE_DIMS, scale_block=DS_MLA_SCALE_BLOCK, amax_floor=None):
    return ds_mla_decode(e.payload, e.footer, rope_dims=rope_dims, scale_block=scale_block)


def _row_ds_mla(d, rope_dims=DS_MLA_ROPE_DIMS, scale_block=DS_MLA_SCALE_BLOCK, amax_floor=None):
    return _ds_mla_row(d, rope_dims, scale_block)


def _enc_fp8(x, **o):
    c, s = fp8_tensor_encode(x, **o)
    return c, _empty_footer(c), s


def _enc_idx_fp8(x, **o):
    c, s = fp8_indexer_encode(x, **o)
    return c, _to_bytes(s), None


def _dec_idx_fp8(e, **o):
    return fp8_indexer_decode(e.payload, _from_bytes(e.footer, torch.float32, "footer"))


def _row_idx_fp8(d, block=INDEXER_FP8_BLOCK, pow2_scale=False, amax_floor=None):
    _check_block(d, block, "indexer FP8")
    return formats.indexer_fp8_row(d, block)


def _enc_mxfp4(x, **o):
    p, s = mxfp4_encode(x, **o)
    return p, s, None


def _row_mxfp4(d, **o):
    _check_mxfp4_dim(d)
    return formats.indexer_mxfp4_row(d)


# Rows of plain elements, part by part: a hybrid model's attention row (all of K, then all of V)
# or a gated delta net state (conv state, then SSM state); docs/hybrid.md#hybrid-caches. `parts`
# = ((element, count) of the payload part, (element, count) of the footer part), elements "bf16",
# "fp32" or "E4M3". An E4M3 part keeps one per-tensor scale, as vLLM's FP8 KV cache keeps a
# k_scale and a v_scale per layer; the scales are the side data.
_PLAIN_ELEMENTS = {formats.Element.BF16.label: (bf16_encode, bf16_decode, bf16_half_ulp),
                   formats.Element.FP32.label: (fp32_encode, fp32_decode, lambda x: torch.zeros_like(x))}
_PART_ELEMENTS = (*_PLAIN_ELEMENTS, formats.Element.E4M3.label)


def _check_parts(parts) -> None:
    require(isinstance(parts, tuple) and len(parts) == 2
            and all(isinstance(p, tuple) and len(p) == 2 and p[0] in _PART_ELEMENTS and type(p[1]) is int and p[1] > 0
                    for p in parts),
            f"parts={parts!r}: expected two (element, count) pairs, elements {', '.join(_PART_ELEMENTS)}")


def _split_parts(x: torch.Tensor, parts) -> tuple[torch.Tensor, torch.Tensor]:
    _check_parts(parts)
    require(_last_dim(x, "x") == parts[0][1] + parts[1][1],
            f"x: last dim {x.shape[-1]} is not {parts[0][1]} + {parts[1][1]} (the parts' counts)")
    return x[..., : parts[0][1]], x[..., parts[0][1]:]


def _enc_parts(x, *, parts, scales=None):
    x = _f32(x, "x")
    out, side = [], []
    for i, ((element, _), xs) in enumerate(zip(parts, _split_parts(x, parts))):
        if element in _PLAIN_ELEMENTS:
            out.append(_PLAIN_ELEMENTS[element][0](xs))
            side.append(None)
        else:
            codes, s = fp8_tensor_encode(xs, scale=None if scales is None else scales[i])
            out.append(codes)
            side.append(s)
    return out[0], out[1], tuple(side)


def _dec_parts(e, *, parts, scales=None):
    values = [_PLAIN_ELEMENTS[element][1](u8) if element in _PLAIN_ELEMENTS else fp8_tensor_decode(u8, s)
              for (element, _), u8, s in zip(parts, (e.payload, e.footer), e.side)]
    return torch.cat(values, -1)


def _parts_bound(x, *, parts, scales=None):
    bounds = []
    for i, ((element, _), xs) in enumerate(zip(parts, _split_parts(x, parts))):
        if element in _PLAIN_ELEMENTS:
            bounds.append(_PLAIN_ELEMENTS[element][2](xs))
        else:
            bounds.append(_fp8_tensor_bound(xs, scale=None if scales is None else scales[i]))
    return torch.cat(bounds, -1)


def _row_parts(d, *, parts, scales=None):
    _check_parts(parts)
    elements = {e.label: e for e in formats.Element}
    first, second = ((formats.Field(name=name, element=elements[e], count=n),) for name, (e, n) in
                     zip(("first", "second"), parts))
    row = formats.RowFormat(name="parts", dims=d, payload=first, footer=second, codec="parts")
    require(sum(n for _, n in parts) == d, f"head_dim={d}: the parts hold {sum(n for _, n in parts)} values")
    return row


def parts_of(row: formats.RowFormat) -> tuple[tuple[str, int], tuple[str, int]]:
    """The `parts` option of the "parts" codec for a row of one payload and one footer field."""
    require(len(row.payload) == 1 and len(row.footer) == 1,
            f"{row.name}: the parts codec writes rows of one payload and one footer field")
    return tuple((f.element.label, f.count) for f in row.payload + row.footer)


_BOUNDS["parts"] = _parts_bound


CODECS: dict[str, Codec] = {
    c.name: c
    for c in (
        Codec(
            "fp8_ds_mla",
            "FlashMLA DSV4 row: E4M3 NoPE + UE8M0 per 64 dims (footer) + bf16 RoPE; 584 B at D=512",
            ("rope_dims", "scale_block", "amax_floor"),
            _enc_ds_mla,
            _dec_ds_mla,
            _row_ds_mla,
        ),
        Codec(
            "fp8",
            "FlashInfer DSV4 FP8 row: D E4M3 bytes, one per-tensor scale outside the cache; 512 B at D=512",
            ("scale", "amax_floor"),
            _enc_fp8,
            lambda e, **o: fp8_tensor_decode(e.payload, e.side),
            lambda d, **o: formats.fp8_row(d),
            side_option="scale",
        ),
        Codec(
            "bf16",
            "bf16 row: 2*D bytes; 1024 B at D=512",
            (),
            lambda x: (lambda p: (p, _empty_footer(p), None))(bf16_encode(x)),
            lambda e: bf16_decode(e.payload),
            formats.bf16_row,
        ),
        Codec(
            "indexer_fp8",
            "Indexer K FP8: D E4M3 bytes + fp32 scale per 128 values (footer); 132 B at D=128",
            ("block", "pow2_scale", "amax_floor"),
            _enc_idx_fp8,
            _dec_idx_fp8,
            _row_idx_fp8,
        ),
        Codec(
            "indexer_mxfp4",
            "Indexer K MXFP4: D/2 packed E2M1 bytes + UE8M0 per 32 values (footer); 68 B at D=128",
            ("scale_rule", "amax_floor"),
            _enc_mxfp4,
            lambda e, **o: mxfp4_decode(e.payload, e.footer),
            _row_mxfp4,
        ),
        Codec(
            "fp32",
            "fp32 row (compressor states, stored as they are): 4*D bytes",
            (),
            lambda x: (lambda p: (p, _empty_footer(p), None))(fp32_encode(x)),
            lambda e: fp32_decode(e.payload),
            formats.state_row,
        ),
        Codec(
            "parts",
            "hybrid rows part by part: K then V (bf16, fp32 or E4M3 with a per-tensor scale each), or a "
            "gated delta net state's conv then SSM parts",
            ("parts", "scales"),
            _enc_parts,
            _dec_parts,
            _row_parts,
            side_option="scales",
        ),
    )
}


def get_codec(name: str) -> Codec:
    """The codec called `name`; ValueError listing the known names otherwise."""
    codec = CODECS.get(name) if isinstance(name, str) else None
    if codec is None:
        raise KvvizError(f"codec={name!r}: unknown codec; known: {', '.join(CODECS)}")
    return codec


# --------------------------------------------------------------------------------------------
# Pages: payloads first, then footers, then zero padding


def _check_rows(payload: torch.Tensor, footer: torch.Tensor) -> tuple[int, int, int]:
    payload = _u8(payload, "payload")
    footer = _u8(footer, "footer")
    require(payload.dim() >= 2, f"payload: needs [..., rows, P], got shape {tuple(payload.shape)}")
    require(footer.dim() >= 2, f"footer: needs [..., rows, F], got shape {tuple(footer.shape)}")
    require(
        tuple(footer.shape[:-1]) == tuple(payload.shape[:-1]),
        f"footer: shape {tuple(footer.shape)} does not match payload {tuple(payload.shape)} before the last dim",
    )
    return int(payload.shape[-2]), int(payload.shape[-1]), int(footer.shape[-1])


def _anatomy(rows: int, p: int, f: int, page_bytes: int) -> PageAnatomy:
    """The page's anatomy (formats.PageAnatomy: payloads, then footers, then padding), checked."""
    return PageAnatomy(rows=rows, payload_bytes=p, footer_bytes=f, page_bytes=page_bytes)


def write_page(
    dst: torch.Tensor, payload: torch.Tensor, footer: torch.Tensor, *, zero_padding: bool = True
) -> torch.Tensor:
    """Write rows into an existing page view ``dst`` uint8 [..., page_bytes], in place.

    Mirrors the packed layout (formats.PageAnatomy): row t's payload at t*P, its footer at
    rows*P + t*F, the rest zeroed (``zero_padding=False`` leaves it untouched). ``dst`` may be a
    non-contiguous column slice of a larger backing tensor (e.g. (num_blocks, stride)[:, off:off+page]);
    it is never reallocated. Returns dst.
    """
    dst = _u8(dst, "dst")
    rows, p, f = _check_rows(payload, footer)
    page = _anatomy(rows, p, f, _last_dim(dst, "dst"))
    lead = tuple(payload.shape[:-2])
    require(
        tuple(dst.shape[:-1]) == lead,
        f"dst: leading dims {tuple(dst.shape[:-1])} differ from the rows' {lead}",
    )
    dst[..., page.payload.slice].copy_(payload.reshape(*lead, page.payload.size))
    dst[..., page.footer.slice].copy_(footer.reshape(*lead, page.footer.size))
    if zero_padding:
        dst[..., page.padding.slice].zero_()
    return dst


def pack_page(payload: torch.Tensor, footer: torch.Tensor, page_bytes: int) -> torch.Tensor:
    """(payload uint8 [..., rows, P], footer uint8 [..., rows, F]) -> page uint8 [..., page_bytes].

    All rows' payloads first (row t at t*P), then all footers (row t at rows*P + t*F), then zero
    padding (formats.PageAnatomy); ValueError naming page_bytes if rows*(P+F) > page_bytes.
    """
    rows, p, f = _check_rows(payload, footer)
    _anatomy(rows, p, f, page_bytes)
    out = torch.empty(*payload.shape[:-2], page_bytes, dtype=torch.uint8, device=payload.device)
    return write_page(out, payload, footer)


def unpack_page(page: torch.Tensor, rows: int, P: int, F: int) -> tuple[torch.Tensor, torch.Tensor]:
    """page uint8 [..., page_bytes] -> (payload [..., rows, P], footer [..., rows, F]).

    The inverse of pack_page (formats.PageAnatomy); returns views of ``page`` where torch can (reshape).
    """
    page = _u8(page, "page")
    a = _anatomy(rows, P, F, _last_dim(page, "page"))
    lead = tuple(page.shape[:-1])
    payload = page[..., a.payload.slice].reshape(*lead, rows, P)
    footer = page[..., a.footer.slice].reshape(*lead, rows, F)
    return payload, footer


def read_interleaved(page: torch.Tensor, rows: int, P: int, F: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The WRONG reader (hazard demo): assumes each row's values and scales are interleaved.

    Reads the page as ``rows`` records of P+F bytes (record t at t*(P+F): P value bytes then F
    scale bytes), as code written for a per-token layout (e.g. DeepSeek V3.2's 656 B
    ``fp8_ds_mla``) would. On a payload-first page this returns shifted payloads and scale bytes
    taken from the middle of other rows' values, except row 0's payload.
    """
    page = _u8(page, "page")
    a = _anatomy(rows, P, F, _last_dim(page, "page"))
    lead = tuple(page.shape[:-1])
    recs = page[..., a.content.slice].reshape(*lead, rows, P + F)
    return recs[..., :P], recs[..., P:]
