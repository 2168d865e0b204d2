"""Byte-exact quantizers and decoders for the KV-cache rows kvviz writes (docs/row-formats.md#row-formats).

Everything is computed in fp32 with torch, bytes are built by hand and handed out as uint8
tensors, and every function is vectorised over arbitrary leading batch dims ``...`` (for example
``[blocks, rows, D]``). Nothing is tied to a device: outputs are allocated on the input's device,
and the same input gives the same bytes on CPU and CUDA (every division is an IEEE division on
both, see `bits.true_div`; ``python -m kvviz.tools.quant_parity`` checks it).

Rooms, each importing only those above it:

* `bits`: exact helpers (powers of two from bits, byte views, the one division).
* `elements`: element codecs, E2M1 (FP4) and its nibbles, UE8M0, E4M3, bf16, fp32, half-ulps.
* `rows`: DeepSeek V4's row codecs (``fp8_ds_mla``, FlashInfer FP8, indexer FP8, indexer MXFP4);
  `parts`: the hybrid models' part-by-part rows (K | V, latent | RoPE, conv | SSM).
* `registry`: `Codec` (encode, decode, row anatomy and error bound of one row format),
  `CODECS`, `get_codec`, `error_bound`.
* `pages`: payloads first, then footers, then zero padding, as `regions.PageAnatomy` says.

Row and page anatomy (values per scale, footer alignment, element widths, where payloads and
footers sit in a page) is `kvviz.base.formats`'s: the codecs size their rows from its `RowFormat`s
and place them with its `PageAnatomy`.

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
``error_bound(name, x, **opts)`` (each `Codec` carries its own) returns, per element, an absolute
bound ``b`` such that ``|decode(encode(x)) - x| <= b`` for every finite ``x`` (the tests check
exactly this):

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

from kvviz.quant.elements import (
    E2M1_MAX,
    E2M1_VALUES,
    E4M3_MAX,
    bf16_decode,
    bf16_encode,
    bf16_half_ulp,
    e2m1_decode,
    e2m1_encode,
    e4m3_decode,
    e4m3_encode,
    e4m3_half_ulp,
    fp32_decode,
    fp32_encode,
    pack_nibbles,
    ue8m0_decode,
    ue8m0_from_amax,
    unpack_nibbles,
)
from kvviz.quant.pages import pack_page, read_interleaved, unpack_page, write_page
from kvviz.quant.parts import parts_of
from kvviz.quant.registry import CODECS, Codec, Encoded, error_bound, get_codec
from kvviz.quant.rows import (
    FP8_AMAX_FLOOR,
    MXFP4_AMAX_FLOOR,
    ds_mla_decode,
    ds_mla_encode,
    ds_mla_row_bytes,
    fp8_indexer_decode,
    fp8_indexer_encode,
    fp8_tensor_decode,
    fp8_tensor_encode,
    mxfp4_decode,
    mxfp4_encode,
)

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
    "parts_of",
    "pack_page",
    "write_page",
    "unpack_page",
    "read_interleaved",
]
