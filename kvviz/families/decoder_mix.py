"""The full-layer knob of the attention decoders (and the state hybrids): where `full` full-attention layers
sit among a model's layers, and a layer-kind list with that many full layers (kvviz's own what-if, no vLLM rule);
and the layer kinds a decoder's config gives (config_layer_kinds, each from the vLLM 0.33 model file it cites)."""

from __future__ import annotations

from kvviz.base.errors import require

# the decoders' layer kinds (vLLM's layer_types names; SHARED: a Gemma 3n layer reading another's KV)
FULL, SLIDING, CHUNKED, SHARED = "full_attention", "sliding_attention", "chunked_attention", "shared_kv"


def full_layer_positions(num_layers: int, full: int) -> tuple[int, ...]:
    """Where `full` full-attention layers sit among `num_layers`, spread evenly: the k-th ends the
    k-th of `full` equal stretches (layer (k+1) x num_layers // full - 1)."""
    return tuple((k + 1) * num_layers // full - 1 for k in range(full))


def spread_full(kinds: tuple[str, ...], full: int, *, name: str) -> tuple[str, ...]:
    """The layer kinds with `full` of them full attention, spread evenly over the layers
    (full_layer_positions) and the rest taking the other kinds in their order: the explorer's group-mix knob."""
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


def alternating_kinds(text, n: int, *, name: str) -> tuple[list[str], str]:
    """gpt_oss.py OAIAttention: `sliding_window if layer_idx % 2 == 0` whatever layer_types says."""
    window = getattr(text, "sliding_window", None)
    kinds = [SLIDING if i % 2 == 0 and window else FULL for i in range(n)]
    return kinds, "layer index % 2 == 0 is sliding (vLLM gpt_oss.py OAIAttention)"


def no_rope_kinds(text, n: int, *, name: str) -> tuple[list[str], str]:
    """llama4.py Llama4Attention: a layer with no_rope_layers[i] != 0 uses chunked local attention of
    attention_chunk_size, the NoPE layers full attention."""
    nope = getattr(text, "no_rope_layers", None)
    require(
        isinstance(nope, (list, tuple)) and len(nope) == n,
        f"{name}: no_rope_layers must list one entry per layer ({n})",
    )
    chunked = bool(getattr(text, "attention_chunk_size", None))
    kinds = [CHUNKED if (flag != 0 and chunked) else FULL for flag in nope]
    return kinds, "no_rope_layers: RoPE layers are chunked local, NoPE layers full (vLLM llama4.py)"


def config_layer_kinds(text, n: int, *, name: str) -> tuple[list[str], str]:
    """Each layer's kind as the (text) config gives it, and where kvviz read it: layer_types, or a config-wide
    sliding_window (engine/arg_utils.py create_engine_config -> CacheConfig.sliding_window: a config without
    layer_types, or whose layers are all sliding, gives every layer the window)."""
    window = getattr(text, "sliding_window", None)
    layer_types = getattr(text, "layer_types", None)
    if layer_types is None or all(k == SLIDING for k in layer_types):
        kind = SLIDING if window else FULL
        return [
            kind
        ] * n, "config-wide sliding_window (vLLM EngineArgs: no layer_types)" if window else "no sliding_window"
    require(
        isinstance(layer_types, (list, tuple)) and len(layer_types) == n,
        f"{name}: layer_types has {len(layer_types) if isinstance(layer_types, (list, tuple)) else '?'} entries, "
        f"num_hidden_layers is {n}",
    )
    model_type = getattr(text, "model_type", None)
    for i, k in enumerate(layer_types):
        require(
            k in (FULL, SLIDING),
            f"{name}: layer_types[{i}]={k!r}: unknown layer kind for {model_type}; kvviz knows {FULL}, {SLIDING}",
        )
    kinds = [SLIDING if k == SLIDING and window else FULL for k in layer_types]
    return kinds, "layer_types" + ("" if window else " (no sliding_window: sliding layers are full attention)")
