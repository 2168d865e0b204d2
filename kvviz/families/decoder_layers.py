"""Attention decoders whose vLLM 0.33 model file decides each layer's cache itself (issue 27): a window,
KV heads or head size per layer, layers with no attention, several caches per layer, static sink tokens.
kvviz.families.decoder asks the architecture's record for its rule (`DecoderRecord.layer_plan`); each rule
mirrors one model file (vllm/model_executor/models/<file>.py), cited on its function:

* DomynEdgeForCausalLM (domyn_edge.py): window_sizes[i][0] > 0 gives a window of that + 1, head size
  per_layer_config[i].head_dim, layers named model.layers.{i}.attention.attn;
* Plamo3ForCausalLM (plamo3.py): interleaved_sliding_window[i], named model.layers.layers.{i}.mixer.attn;
* DeciLMForCausalLM (nemotron_nas.py): block_configs[i].attention: no_op registers no attention, else
  num_attention_heads // n_heads_in_group KV heads;
* PanguEmbeddedForCausalLM, PanguProMoEV2ForCausalLM (openpangu.py): interleaved_sliding_window (an int,
  or a list read at layer % len), or, where param_sink_number > 0, StaticSinkAttention: a
  SinkFullAttentionSpec (full attention whatever the window) of qk_rope_dim + qk_nope_dim K and
  v_channels V elements per head;
* IQuestLoopCoderForCausalLM (iquest_loopcoder.py): loop_num caches per layer, loop j > 0 named
  model.layers.{j x num_hidden_layers + i} with a window of loop_window_size;
* Rnj1ForCausalLM (rnj1.py): chunked_attention layers carry config.sliding_window (chunk_lookback 1).

Where a layer passes no window of its own, vLLM's Attention takes cache_config.sliding_window
(layers/attention/attention.py Attention.__init__): the config-wide window, set only when the config
has no layer_types or all of them are sliding (engine/arg_utils.py create_engine_config): `fallback_window`.
"""

from __future__ import annotations

import dataclasses

from kvviz.base.defaults import VLLM_BLOCK_SIZE
from kvviz.base.errors import require
from kvviz.base.inputs import MAX_DIM, bounded_int
from kvviz.families.decoder_mix import FULL, SLIDING

NONE = "attention_free"  # a layer that registers no cache (nemotron_nas.py no-op attention)


@dataclasses.dataclass(frozen=True)
class LayerPlan:
    """Per cache, in vLLM's registration order: its kind, window, (KV heads, head size), name."""

    kinds: tuple[str, ...]  # FULL, SLIDING, or NONE (the layer registers no attention)
    windows: tuple[int | None, ...]
    heads: tuple[tuple[int, int], ...]
    names: tuple[str, ...]
    source: str
    head_size_v: int | None = None  # V's head size where it is not K's (Pangu's sink attention)
    sink_len: int = 0  # static sink tokens (StaticSinkAttention)


def fallback_window(text) -> int | None:
    """cache_config.sliding_window: the config's window when it has no layer_types or all are sliding."""
    types = getattr(text, "layer_types", None)
    return getattr(text, "sliding_window", None) if types is None or all(t == SLIDING for t in types) else None


def _int(value, what: str, low: int = 1) -> int:
    return bounded_int(value, field=what, low=low, high=MAX_DIM)


def _list(text, key: str, n: int, *, name: str) -> list:
    value = getattr(text, key, None)
    require(isinstance(value, (list, tuple)) and len(value) >= n, f"{name}: {key}: must list one entry per layer ({n})")
    return list(value)


def _plan(entries, source: str, **extra) -> LayerPlan:
    kinds, windows, heads, names = zip(*entries) if entries else ((), (), (), ())
    return LayerPlan(tuple(kinds), tuple(windows), tuple(heads), tuple(names), source, **extra)


def _entry(window, heads: tuple[int, int], name: str):
    return (SLIDING if window else FULL), (window or None), heads, name


def domyn_edge_plan(text, n, kv, head_dim, *, name):
    """domyn_edge.py DomynEdgeDecoderLayer: window_sizes[i][0] + 1 where positive, head size
    per_layer_config[i].head_dim."""
    windows, positions = _list(text, "window_sizes", n, name=name), _list(text, "position_layers", n, name=name)
    overrides = getattr(text, "per_layer_config", None) or {}
    require(isinstance(overrides, dict), f"{name}: per_layer_config: must map layer indices to overrides")
    entries = []
    for i in range(n):
        require(positions[i] in ("rope", "nope"), f"{name}: position_layers[{i}]={positions[i]!r}: rope or nope")
        w = windows[i][0] if isinstance(windows[i], (list, tuple)) and windows[i] else None
        w = _int(w, f"{name}: window_sizes[{i}][0]", low=-MAX_DIM)
        size = (overrides.get(str(i)) or overrides.get(i) or {}).get("head_dim", head_dim)
        size = _int(size, f"{name}: per_layer_config[{i}].head_dim")
        # DomynEdgeAttention: "HF window (w, 0) attends to w+1 keys; vLLM's window counts all keys"
        entries.append(
            _entry(w + 1 if w > 0 else fallback_window(text), (kv, size), f"model.layers.{i}.attention.attn")
        )
    return _plan(entries, "window_sizes[i][0] + 1, per_layer_config[i].head_dim (vLLM domyn_edge.py)")


def plamo3_plan(text, n, kv, head_dim, *, name):
    """plamo3.py Plamo3AttentionMixer: interleaved_sliding_window[i]."""
    windows = _list(text, "interleaved_sliding_window", n, name=name)
    _list(text, "layer_types", n, name=name)
    entries = []
    for i in range(n):
        w = None if windows[i] is None else _int(windows[i], f"{name}: interleaved_sliding_window[{i}]")
        entries.append(_entry(w or fallback_window(text), (kv, head_dim), f"model.layers.layers.{i}.mixer.attn"))
    return _plan(entries, "interleaved_sliding_window[i] (vLLM plamo3.py Plamo3AttentionMixer)")


def decilm_plan(text, n, kv, head_dim, *, name):
    """nemotron_nas.py DeciLMDecoderLayer: block_configs[i].attention (no_op: no cache; n_heads_in_group)."""
    heads = _int(getattr(text, "num_attention_heads", None), f"{name}: num_attention_heads")
    blocks = _list(text, "block_configs", n, name=name)
    types = getattr(text, "layer_types", None)
    entries = []
    for i in range(n):
        attn = _get(blocks[i], "attention")
        if _get(attn, "no_op", False):
            entries.append((NONE, None, (0, head_dim), f"model.layers.{i}.self_attn.attn"))  # no heads: no cache
            continue
        group = _int(_get(attn, "n_heads_in_group"), f"{name}: block_configs[{i}].attention.n_heads_in_group")
        k = heads // group  # DeciLMDecoderLayer.__init__: num_attention_heads // n_heads_in_group
        require(k >= 1, f"{name}: block_configs[{i}].attention.n_heads_in_group={group}: exceeds {heads} heads")
        sliding = types is not None and types[i] == SLIDING  # LlamaAttention.__init__
        window = getattr(text, "sliding_window", None) if sliding else fallback_window(text)
        entries.append(_entry(window, (k, head_dim), f"model.layers.{i}.self_attn.attn"))
    require(any(e[0] != NONE for e in entries), f"{name}: block_configs: every attention is no_op (vLLM refuses)")
    return _plan(entries, "block_configs[i].attention: no_op, n_heads_in_group (vLLM nemotron_nas.py)")


def _get(part, key, default=None):
    """A key of one of block_configs' parts (JSON dicts; the released config class makes them dataclasses)."""
    return part.get(key, default) if isinstance(part, dict) else getattr(part, key, default)


def pangu_plan(text, n, kv, head_dim, *, name):
    """openpangu.py OpenPanguEmbeddedAttention / OpenPanguSinkAttention: windows, or static sink attention."""
    mla = all(hasattr(text, k) for k in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "kv_lora_rank"))
    require(not mla, f"{name}: qk_nope_head_dim / kv_lora_rank: openPangu's MLA attention is the MLA family's")
    require(getattr(text, "is_causal", True), f"{name}: is_causal=false: encoder-only attention keeps no KV cache")
    sink = getattr(text, "param_sink_number", None) or 0
    if sink > 0:  # OpenPanguSinkAttention.__init__ -> StaticSinkAttention.get_kv_cache_spec
        sink = _int(sink, f"{name}: param_sink_number")
        rope, nope = (_int(getattr(text, k, None), f"{name}: {k}") for k in ("qk_rope_dim", "qk_nope_dim"))
        v = _int(getattr(text, "v_channels", None), f"{name}: v_channels")
        entries = [(FULL, None, (kv, rope + nope), f"model.layers.{i}.self_attn.attn") for i in range(n)]
        return _plan(
            entries,
            f"{sink} static sink tokens (vLLM openpangu.py OpenPanguSinkAttention)",
            head_size_v=v,
            sink_len=sink,
        )
    windows = getattr(text, "interleaved_sliding_window", None)  # OpenPanguEmbeddedAttention.__init__
    require(
        windows is None or isinstance(windows, (int, list)) and not isinstance(windows, bool),
        f"{name}: interleaved_sliding_window: an int or a list (vLLM refuses {type(windows).__name__})",
    )
    require(windows != [], f"{name}: interleaved_sliding_window: an empty list")
    entries = []
    for i in range(n):
        w = windows[i % len(windows)] if isinstance(windows, list) else windows
        w = None if w is None else _int(w, f"{name}: interleaved_sliding_window")
        entries.append(_entry(w or fallback_window(text), (kv, head_dim), f"model.layers.{i}.self_attn.attn"))
    return _plan(entries, "interleaved_sliding_window[i % len] (vLLM openpangu.py OpenPanguEmbeddedAttention)")


def loopcoder_plan(text, n, kv, head_dim, *, name):
    """iquest_loopcoder.py LoopCoderAttention: loop_num caches a layer, loops > 0 of loop_window_size."""
    hidden, heads = getattr(text, "hidden_size", None), getattr(text, "num_attention_heads", None)
    size = _int(hidden, f"{name}: hidden_size") // _int(heads, f"{name}: num_attention_heads")  # always
    loops = _int(getattr(text, "loop_num", 2), f"{name}: loop_num")
    local = _int(getattr(text, "loop_window_size", 64), f"{name}: loop_window_size")
    first = fallback_window(text)
    require(
        first is None or getattr(text, "max_window_layers", n) == n,
        f"{name}: max_window_layers: must equal num_hidden_layers with a sliding_window (vLLM asserts)",
    )
    require(getattr(text, "is_causal", True), f"{name}: is_causal=false: encoder-only attention keeps no KV cache")
    entries = [
        _entry(first if j == 0 else local, (kv, size), f"model.layers.{j * n + i}.self_attn.attn")
        for i in range(n)
        for j in range(loops)
    ]
    return _plan(entries, f"{loops} loops, loops > 0 of window {local} (vLLM iquest_loopcoder.py)")


def rnj1_plan(text, n, kv, head_dim, *, name):
    """rnj1.py Rnj1Attention: chunked_attention layers carry sliding_window."""
    types = _list(text, "layer_types", n, name=name)
    window = getattr(text, "sliding_window", None)
    entries = []
    for i in range(n):
        require(
            types[i] in (FULL, SLIDING, "chunked_attention"), f"{name}: layer_types[{i}]={types[i]!r}: unknown kind"
        )
        chunked = types[i] == "chunked_attention"  # Rnj1Attention.__init__: sliding_window if chunked
        w = _int(window, f"{name}: sliding_window") if chunked else fallback_window(text)
        entries.append(_entry(w, (kv, head_dim), f"model.layers.{i}.self_attn.attn"))
    source = "chunked_attention layers: sliding_window, chunk_lookback 1 (vLLM rnj1.py; it asserts the Triton backend)"
    return _plan(entries, source + ": served with --attention-backend TRITON_ATTN")


def check_layers(model, options, tp: int) -> None:
    """What the sink attention asserts of the run: SinkFullAttentionManager.__init__ (v1/core/
    single_type_kv_cache_manager.py): the sink tokens fill whole blocks; OpenPanguSinkAttention.__init__:
    no fewer KV heads than TP ranks."""
    c, name = model.config, model.name
    if c.sink_len:
        kv, block = c.num_key_value_heads, options.block_size or VLLM_BLOCK_SIZE
        require(kv >= tp, f"tensor_parallel_size={tp}: {name}'s {kv} KV heads: sink attention does not replicate them")
        require(
            c.sink_len % block == 0,
            f"block_size={block}: {name}'s {c.sink_len} static sink tokens must fill whole blocks (vLLM asserts)",
        )


def per_kind(old_kinds, values, new_kinds) -> tuple:
    """`values` (one per layer) for the layers' new kinds: each takes the value of its kind's last layer."""
    if not values:
        return values
    by_kind = dict(zip(old_kinds, values))
    return tuple(by_kind.get(k, values[i]) for i, k in enumerate(new_kinds))
