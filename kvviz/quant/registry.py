"""The codec registry: every row format kvviz writes, by name, with its encoder, decoder, row
anatomy and error bound in one `Codec` (docs/row-formats.md#row-formats).

`CODECS` maps a `formats.RowFormat.codec_name` to its `Codec`; `get_codec` refuses an unknown
name in one line naming the ``codec`` argument. A new row format is one new `Codec` entry in
`_REGISTERED` (its functions in `kvviz.quant.rows` or a module of its own, like `parts`).
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any, Callable, Mapping

import torch

from kvviz.base import formats
from kvviz.base.errors import KvvizError, require
from kvviz.quant import bits, parts, rows
from kvviz.quant.elements import bf16_decode, bf16_encode, bf16_half_ulp, fp32_bound, fp32_decode, fp32_encode


@dataclasses.dataclass(frozen=True, eq=False)
class Encoded:
    """One encoded batch of rows, as `Codec.encode` returns it.

    payload: uint8 [..., P], the per-row bytes that go first in the page.
    footer:  uint8 [..., F], the per-row bytes that go in the page's footer (F may be 0).
    side:    anything held outside the cache (the per-tensor FP8 scale); None otherwise.
    codec:   the name of the codec that wrote it ("" for any).
    opts:    the encode options used, so ``Codec.decode`` can read the row back.
    """

    payload: torch.Tensor
    footer: torch.Tensor
    side: Any = None
    codec: str = ""
    opts: Mapping[str, Any] = dataclasses.field(default_factory=lambda: types.MappingProxyType({}))


@dataclasses.dataclass(frozen=True)
class Codec:
    """A row format: encode rows to (payload, footer, side) bytes, decode them back, size them,
    bound their error.

    ``encode(x, **opts)`` takes x [..., D]; ``row_format(head_dim, **opts)`` is the row's anatomy
    (a `kvviz.base.formats.RowFormat`, the one source of its sizes) and ``row_bytes(head_dim, **opts)``
    its (payload_bytes, footer_bytes); ``error_bound(x, **opts)`` gives the per-element absolute
    bound on |decode(encode(x)) - x| for finite x. `mirrors` names the vLLM 0.33 function that
    writes the row. An unknown option raises KvvizError naming it.
    """

    name: str
    description: str
    options: tuple[str, ...]
    mirrors: str
    _encode: Callable[..., tuple[torch.Tensor, torch.Tensor, Any]] = dataclasses.field(repr=False)
    _decode: Callable[..., torch.Tensor] = dataclasses.field(repr=False)
    _row: Callable[..., formats.RowFormat] = dataclasses.field(repr=False)
    _bound: Callable[..., torch.Tensor] = dataclasses.field(repr=False)
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
        """Rows x [..., D] -> their `Encoded` bytes (payload, footer, side) under these options."""
        self._check_opts(opts)
        payload, footer, side = self._encode(x, **opts)
        return Encoded(payload, footer, side, self.name, types.MappingProxyType(dict(opts)))

    def decode(self, enc: Encoded) -> torch.Tensor:
        """An `Encoded` of this codec -> float32 values [..., D], read with the options it was written with."""
        require(isinstance(enc, Encoded), f"enc: expected an Encoded, got {type(enc).__name__}")
        require(
            enc.codec in ("", self.name),
            f"enc: was encoded by codec {enc.codec!r}, cannot decode with {self.name!r}",
        )
        return self._decode(enc, **dict(enc.opts))

    def row_format(self, head_dim: int, **opts: Any) -> formats.RowFormat:
        """The kvviz.base.formats row this codec writes for `head_dim` values with these options."""
        self._check_opts(opts)
        require(isinstance(head_dim, int) and head_dim > 0, f"head_dim={head_dim!r}: must be a positive integer")
        return self._row(head_dim, **opts)

    def row_bytes(self, head_dim: int, **opts: Any) -> tuple[int, int]:
        """(payload_bytes, footer_bytes) of one row, from `row_format`."""
        row = self.row_format(head_dim, **opts)
        return row.payload_bytes, row.footer_bytes

    def error_bound(self, x: torch.Tensor, **opts: Any) -> torch.Tensor:
        """Per-element absolute bound on |decode(encode(x)) - x| (float32, x's shape), for finite x."""
        self._check_opts(opts)
        return self._bound(bits.as_f32(x, "x"), **opts)


def _no_footer(p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:
    return p, p.new_zeros(*p.shape[:-1], 0), None


def _ds_mla_encode(x, **o):
    return (*rows.ds_mla_encode(x, **o), None)


def _ds_mla_decode(e, rope_dims=formats.DS_MLA_ROPE_DIMS, scale_block=formats.DS_MLA_SCALE_BLOCK, amax_floor=None):
    return rows.ds_mla_decode(e.payload, e.footer, rope_dims=rope_dims, scale_block=scale_block)


def _fp8_tensor_encode(x, **o):
    codes, scale = rows.fp8_tensor_encode(x, **o)
    return (*_no_footer(codes)[:2], scale)


def _indexer_fp8_encode(x, **o):
    codes, scales = rows.fp8_indexer_encode(x, **o)
    return codes, bits.to_bytes(scales), None


def _indexer_fp8_decode(e, **o):
    return rows.fp8_indexer_decode(e.payload, bits.from_bytes(e.footer, torch.float32, "footer"))


def _mxfp4_encode(x, **o):
    return (*rows.mxfp4_encode(x, **o), None)


_REGISTERED = (
    Codec(
        "fp8_ds_mla",
        "FlashMLA DSV4 row: E4M3 NoPE + UE8M0 per 64 dims (footer) + bf16 RoPE; 584 B at D=512",
        ("rope_dims", "scale_block", "amax_floor"),
        "quantize_and_insert_k_cache (vllm/models/deepseek_v4/common/ops/cache_utils.py)",
        _ds_mla_encode,
        _ds_mla_decode,
        rows.ds_mla_row_format,
        rows.ds_mla_bound,
    ),
    Codec(
        "fp8",
        "FlashInfer DSV4 FP8 row: D E4M3 bytes, one per-tensor scale outside the cache; 512 B at D=512",
        ("scale", "amax_floor"),
        "fused_deepseek_v4_qnorm_rope_kv_rope_full_cache_fp8_insert (vllm/models/deepseek_v4/attention.py)",
        _fp8_tensor_encode,
        lambda e, **o: rows.fp8_tensor_decode(e.payload, e.side),
        lambda d, **o: formats.fp8_row(d),
        rows.fp8_tensor_bound,
        side_option="scale",
    ),
    Codec(
        "bf16",
        "bf16 row: 2*D bytes; 1024 B at D=512",
        (),
        "fused_deepseek_v4_qnorm_rope_kv_rope_full_cache_bf16_insert (vllm/models/deepseek_v4/attention.py)",
        lambda x: _no_footer(bf16_encode(x)),
        lambda e: bf16_decode(e.payload),
        formats.bf16_row,
        bf16_half_ulp,
    ),
    Codec(
        "indexer_fp8",
        "Indexer K FP8: D E4M3 bytes + fp32 scale per 128 values (footer); 132 B at D=128",
        ("block", "pow2_scale", "amax_floor"),
        "indexer_k_quant_and_cache (vllm/_custom_ops.py)",
        _indexer_fp8_encode,
        _indexer_fp8_decode,
        rows.fp8_indexer_row_format,
        rows.fp8_indexer_bound,
    ),
    Codec(
        "indexer_mxfp4",
        "Indexer K MXFP4: D/2 packed E2M1 bytes + UE8M0 per 32 values (footer); 68 B at D=128",
        ("scale_rule", "amax_floor"),
        "_fused_kv_compress_norm_rope_insert_indexer_mxfp4_attn "
        "(vllm/models/deepseek_v4/common/ops/fused_compress_quant_cache.py)",
        _mxfp4_encode,
        lambda e, **o: rows.mxfp4_decode(e.payload, e.footer),
        rows.mxfp4_row_format,
        rows.mxfp4_bound,
    ),
    Codec(
        "fp32",
        "fp32 row (compressor states, stored as they are): 4*D bytes",
        (),
        "CompressorStateCache's fp32 states (vllm/models/deepseek_v4/compressor.py)",
        lambda x: _no_footer(fp32_encode(x)),
        lambda e: fp32_decode(e.payload),
        formats.state_row,
        fp32_bound,
    ),
    Codec(
        "parts",
        "hybrid rows part by part: K then V (bf16, fp32 or E4M3 with a per-tensor scale each), or a "
        "gated delta net state's conv then SSM parts",
        ("parts", "scales"),
        "reshape_and_cache_flash's K and V with k_scale, v_scale (vllm/_custom_ops.py); MambaSpec states",
        parts.parts_encode,
        lambda e, **o: parts.parts_decode(e.payload, e.footer, e.side, parts=o["parts"]),
        parts.parts_row_format,
        parts.parts_bound,
        side_option="scales",
    ),
)


#: Every codec by name (the `codec_name` of the `formats.RowFormat` it writes).
CODECS: dict[str, Codec] = {c.name: c for c in _REGISTERED}


def get_codec(codec: str) -> Codec:
    """The `Codec` called `codec` (a key of CODECS); one-line KvvizError naming ``codec`` and
    listing the known names otherwise."""
    found = CODECS.get(codec) if isinstance(codec, str) else None
    if found is None:
        raise KvvizError(f"codec={codec!r}: unknown codec; known: {', '.join(CODECS)}")
    return found


def error_bound(codec: str, x: torch.Tensor, **opts: Any) -> torch.Tensor:
    """Per-element absolute bound on |decode(encode(x)) - x| for codec `codec` (float32, x's shape).

    Holds for finite x (bf16: away from the fp32 overflow edge); `opts` are the codec's encode
    options. The bound is the codec's own (`Codec.error_bound`); derivations in `kvviz.quant`.
    """
    return get_codec(codec).error_bound(x, **opts)
