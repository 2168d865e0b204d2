"""The "parts" row codec: rows of plain elements, part by part (docs/hybrid.md#hybrid-caches).

A hybrid model's attention row (all of K, then all of V), an MLA row (latent, then RoPE) or a
gated delta net state (conv state, then SSM state) is two parts, each of one element: the first
part is the row's payload, the second its footer. ``parts`` = ((element, count), (element,
count)) with elements "bf16", "fp32" or "E4M3". An E4M3 part keeps one per-tensor scale, as
vLLM 0.33's FP8 KV cache keeps a ``k_scale`` and a ``v_scale`` per layer
(``reshape_and_cache_flash(key, value, ..., k_scale, v_scale)``); the scales are the side data.
The sizes are those of vLLM 0.33's ``AttentionSpec`` / ``MLAAttentionSpec`` / ``MambaSpec``
rows (`kvviz.base.formats.kv_row`, `mla_row`, `recurrent_state_row`).
"""

from __future__ import annotations

import torch

from kvviz.base import formats
from kvviz.base.errors import require
from kvviz.quant import bits
from kvviz.quant.elements import bf16_decode, bf16_encode, bf16_half_ulp, fp32_bound, fp32_decode, fp32_encode
from kvviz.quant.rows import fp8_tensor_bound, fp8_tensor_decode, fp8_tensor_encode

# element label -> (encode, decode, bound) of a part stored as it is
_PLAIN = {
    formats.Element.BF16.label: (bf16_encode, bf16_decode, bf16_half_ulp),
    formats.Element.FP32.label: (fp32_encode, fp32_decode, fp32_bound),
}
#: The elements a part may be stored in.
PART_ELEMENTS = (*_PLAIN, formats.Element.E4M3.label)


def check_parts(parts) -> None:
    """KvvizError naming `parts` unless it is two (element, count) pairs of known elements."""
    require(
        isinstance(parts, tuple)
        and len(parts) == 2
        and all(
            isinstance(p, tuple) and len(p) == 2 and p[0] in PART_ELEMENTS and type(p[1]) is int and p[1] > 0
            for p in parts
        ),
        f"parts={parts!r}: expected two (element, count) pairs, elements {', '.join(PART_ELEMENTS)}",
    )


def _split(x: torch.Tensor, parts) -> tuple[torch.Tensor, torch.Tensor]:
    check_parts(parts)
    require(
        bits.last_dim(x, "x") == parts[0][1] + parts[1][1],
        f"x: last dim {x.shape[-1]} is not {parts[0][1]} + {parts[1][1]} (the parts' counts)",
    )
    return x[..., : parts[0][1]], x[..., parts[0][1] :]


def parts_encode(x: torch.Tensor, *, parts, scales=None) -> tuple[torch.Tensor, torch.Tensor, tuple]:
    """x [..., D] -> (first part's bytes, second part's bytes, (scale or None per part)).

    A plain part is its elements' bytes; an E4M3 part is `fp8_tensor_encode` of it with its
    own per-tensor scale (``scales[i]`` when given, else amax / 448 of that part).
    """
    x = bits.as_f32(x, "x")
    out, side = [], []
    for i, ((element, _), xs) in enumerate(zip(parts, _split(x, parts))):
        if element in _PLAIN:
            out.append(_PLAIN[element][0](xs))
            side.append(None)
        else:
            codes, s = fp8_tensor_encode(xs, scale=None if scales is None else scales[i])
            out.append(codes)
            side.append(s)
    return out[0], out[1], tuple(side)


def parts_decode(payload: torch.Tensor, footer: torch.Tensor, side: tuple, *, parts) -> torch.Tensor:
    """(first part's bytes, second part's bytes, the scales `parts_encode` handed out) -> float32 [..., D]."""
    values = [
        _PLAIN[element][1](u8) if element in _PLAIN else fp8_tensor_decode(u8, s)
        for (element, _), u8, s in zip(parts, (payload, footer), side)
    ]
    return torch.cat(values, -1)


def parts_bound(x: torch.Tensor, *, parts, scales=None) -> torch.Tensor:
    """Per-element bound on the parts round trip: each part's element bound, side by side."""
    bounds = []
    for i, ((element, _), xs) in enumerate(zip(parts, _split(x, parts))):
        if element in _PLAIN:
            bounds.append(_PLAIN[element][2](xs))
        else:
            bounds.append(fp8_tensor_bound(xs, scale=None if scales is None else scales[i]))
    return torch.cat(bounds, -1)


def parts_row_format(head_dim: int, *, parts, scales=None) -> formats.RowFormat:
    """The row the parts codec writes: one payload field and one footer field, from `parts`."""
    check_parts(parts)
    elements = {e.label: e for e in formats.Element}
    first, second = (
        (formats.Field(name=name, element=elements[e], count=n),) for name, (e, n) in zip(("first", "second"), parts)
    )
    row = formats.RowFormat(name="parts", dims=head_dim, payload=first, footer=second, codec="parts")
    require(
        sum(n for _, n in parts) == head_dim, f"head_dim={head_dim}: the parts hold {sum(n for _, n in parts)} values"
    )
    return row


def parts_of(row: formats.RowFormat) -> tuple[tuple[str, int], tuple[str, int]]:
    """The `parts` option of the "parts" codec for a row of one payload and one footer field
    (formats.kv_row, mla_row, recurrent_state_row)."""
    require(
        len(row.payload) == 1 and len(row.footer) == 1,
        f"row: {row.name} is not one payload and one footer field, as the parts codec writes",
    )
    return tuple((f.element.label, f.count) for f in row.payload + row.footer)
