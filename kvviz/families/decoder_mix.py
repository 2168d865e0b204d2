"""The full-layer knob of the attention decoders (and the state hybrids): where `full` full-attention layers
sit among a model's layers, and a layer-kind list with that many full layers (kvviz's own what-if, no vLLM rule)."""

from __future__ import annotations

from kvviz.base.errors import require

# the decoders' layer kinds (vLLM's layer_types names; SHARED: a Gemma 3n layer reading another's KV)
FULL, SLIDING, CHUNKED, SHARED = "full_attention", "sliding_attention", "chunked_attention", "shared_kv"


def full_layer_positions(num_layers: int, full: int) -> tuple[int, ...]:
    """Where `full` full-attention layers sit among `num_layers`, spread evenly: the k-th ends the
    k-th of `full` equal stretches (layer (k+1) x num_layers // full - 1)."""
    return tuple((k + 1) * num_layers // full - 1 for k in range(full))


def _spread_full(kinds: tuple[str, ...], full: int, *, name: str) -> tuple[str, ...]:
    n = len(kinds)
    require(
        isinstance(full, int) and not isinstance(full, bool) and 0 <= full <= n,
        f"full_layers={full!r}: must be an integer from 0 to {n} (the model's layers)",
    )
    if full == kinds.count(FULL):
        return kinds
    others = [k for k in kinds if k != FULL]
    require(
        others or full == n,
        f"full_layers={full}: {name} has only full-attention layers; no other kind to give the rest",
    )
    is_full = set(full_layer_positions(n, full)) if full else set()
    rest, out, j = n - full, [], 0
    for i in range(n):
        if i in is_full:
            out.append(FULL)
        else:
            out.append(others[j * len(others) // rest])
            j += 1
    return tuple(out)
