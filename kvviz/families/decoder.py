"""Attention-only decoders: every layer registers one K|V attention cache (full, sliding window or
chunked local), or none when it shares another layer's KV (docs/model-core.md#attention-decoders).

Rules, each from vLLM 0.33's model file (vllm/model_executor/models/):

* the window of a layer: `layer_types[i] == "sliding_attention"` gives config.sliding_window
  (gemma2.py, gemma3.py, llama.py, the Transformers backend's transformers/base.py); a config without
  layer_types, or whose layers are all sliding, gives every layer the config-wide window
  (engine/arg_utils.py create_engine_config -> CacheConfig.sliding_window: Mistral, Phi-3);
* gpt-oss: `sliding_window if layer_idx % 2 == 0` whatever layer_types says (gpt_oss.py);
* Llama 4: a layer with `no_rope_layers[i] != 0` uses chunked local attention of
  attention_chunk_size, the NoPE layers full attention (llama4.py Llama4Attention);
* Cohere2: a sliding layer sees sliding_window + 1 tokens (commandr.py CohereAttention);
* Qwen2, GPT-2, OPT, OLMoE, ... (decoder_keys.HEAD_FROM_HIDDEN): head_size = hidden_size //
  num_attention_heads always (qwen2.py Qwen2Attention, ...); elsewhere head_dim, or that quotient
  when the config has none;
* Gemma 3n: the last num_kv_shared_layers layers reuse layer first - 2 (sliding) or first - 1
  (full) and register no cache (gemma3n.py Gemma3nAttention, gpu_model_runner.get_kv_cache_spec);
* names: model.layers.{i}.self_attn.attn, or the model type's (decoder_keys.LAYER_NAMES: gpt-oss
  .attn.attn, GPT-2 transformer.h.{i}.attn.attn, ...); a multimodal wrapper (…ForConditionalGeneration,
  decoder_keys.WRAPPERS) puts its language model under `language_model.`;
* KV heads / head size other than num_key_value_heads / head_dim (decoder_keys.HEAD_RULES): MiniCPM3
  (heads, qk_nope_head_dim + qk_rope_head_dim), Falcon (num_kv_heads, 1 or heads by
  new_decoder_architecture / multi_query), Gemma 4 (per layer: per_layer_config[i]); Gemma 4's KV-shared
  layers reuse the last earlier layer of their own type (gemma4.py Gemma4Attention);
* Falcon's Attention gets no cache_config: its cache is the model dtype whatever kv_dtype says, so the
  knob does not apply (decoder_keys.NO_CACHE_CONFIG);
* the architectures vLLM serves through its Transformers backend (OLMo 2/3, SmolLM3, HunYuan, ...):
  that backend's rule (kvviz.families.transformers_backend: KV heads, head size, names, no KV sharing);
* TP: ModelConfig.get_num_kv_heads, max(1, kv_heads // tp).
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from kvviz.base.errors import require
from kvviz.base.inputs import MAX_DIM, bounded_int
from kvviz.core.declare import AttentionCache
from kvviz.families.decoder_keys import (
    DEFAULT_LAYER_NAMES,
    HEAD_FROM_HIDDEN,
    HEAD_RULES,
    LAYER_NAMES,
    LOOPED,
    NAMES,
    NO_CACHE_CONFIG,
    WRAPPERS,
    looped_layers,
)
from kvviz.families.hf import check_tp_heads, derive_max_model_len, field, kv_heads_per_rank, read_config, resolve_dtype
from kvviz.families.registry import Family, Model, model_method, register
from kvviz.families.transformers_backend import BACKEND_LM, backend_head_size, backend_kv_heads
from kvviz.families.transformers_backend import LAYER_NAMES as BACKEND_LAYER_NAMES
from kvviz.families.transformers_backend import MODEL_TYPES as BACKEND_TYPES
from kvviz.families.transformers_backend import NAMES as BACKEND_NAMES
from kvviz.options import Options

FULL, SLIDING, CHUNKED, SHARED = "full_attention", "sliding_attention", "chunked_attention", "shared_kv"
LAYER_KINDS = (FULL, SLIDING, CHUNKED)
SOURCE_LAYER_TYPES = "layer_types"


@dataclasses.dataclass(frozen=True)
class DecoderConfig:
    """The cache-relevant part of an attention-only decoder's (text) config, per layer."""

    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    layer_kinds: tuple[str, ...]  # one of FULL, SLIDING, CHUNKED, SHARED per layer
    sliding_window: int | None  # the window a sliding layer's spec carries (Cohere2: + 1)
    attention_chunk_size: int | None
    layer_prefix: str  # "model.layers" or "language_model.model.layers"
    attn_suffix: str  # "self_attn.attn" or "attn.attn"
    kind_source: str
    shared_targets: tuple[tuple[int, int], ...] = ()  # (layer, the layer whose KV it reuses)
    layer_heads: tuple[tuple[int, int], ...] = ()  # per layer (KV heads, head size) where they differ (Gemma 4)
    layer_names: tuple[str, ...] = ()  # per cache, where not `{layer_prefix}.{i}.{attn_suffix}` (LOOPED)

    @property
    def kind_counts(self) -> dict[str, int]:
        """Layers of each kind ('full_attention', 'sliding_attention', ...), in first-seen order."""
        return dict(Counter(self.layer_kinds))

    def layers_of(self, kind: str) -> tuple[int, ...]:
        """The indices of the layers of kind `kind`."""
        return tuple(i for i, k in enumerate(self.layer_kinds) if k == kind)


def _kinds(text, model_type: str, n: int, *, name: str) -> tuple[list[str], str]:
    window = getattr(text, "sliding_window", None)
    if model_type == "gpt_oss":
        return [
            SLIDING if i % 2 == 0 and window else FULL for i in range(n)
        ], "layer index % 2 == 0 is sliding (vLLM gpt_oss.py OAIAttention)"
    if model_type == "llama4_text":
        nope = getattr(text, "no_rope_layers", None)
        require(
            isinstance(nope, (list, tuple)) and len(nope) == n,
            f"{name}: no_rope_layers must list one entry per layer ({n})",
        )
        chunked = bool(getattr(text, "attention_chunk_size", None))
        return [
            CHUNKED if (flag != 0 and chunked) else FULL for flag in nope
        ], "no_rope_layers: RoPE layers are chunked local, NoPE layers full (vLLM llama4.py)"
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
    for i, k in enumerate(layer_types):
        require(
            k in (FULL, SLIDING),
            f"{name}: layer_types[{i}]={k!r}: unknown layer kind for {model_type}; kvviz knows {FULL}, {SLIDING}",
        )
    kinds = [SLIDING if k == SLIDING and window else FULL for k in layer_types]
    return kinds, SOURCE_LAYER_TYPES + ("" if window else " (no sliding_window: sliding layers are full attention)")


def _heads(text, model_type: str, heads: int, kv: int, head_dim: int, n: int, *, name: str):
    """(KV heads, head size, per-layer (KV heads, head size) or ()) for decoder_keys.HEAD_RULES."""
    if model_type == "minicpm3":  # minicpm3.py: Attention(num_local_heads, qk_head_dim, num_kv_heads=num_local_heads)
        nope, rope = field(text, "qk_nope_head_dim", model=name), field(text, "qk_rope_head_dim", model=name)
        return heads, nope + rope, ()
    if model_type == "hrm_text":  # hrm_text.py HrmTextAttention: total_num_kv_heads = num_attention_heads
        return heads, head_dim, ()
    if model_type == "falcon":  # falcon.py FalconAttention.__init__
        if getattr(text, "new_decoder_architecture", False):
            return field(text, "num_kv_heads", model=name, required=False, default=heads), head_dim, ()
        return (1 if getattr(text, "multi_query", True) else heads), head_dim, ()
    per_layer = getattr(text, "per_layer_config", None)  # gemma4.py Gemma4DecoderLayer.__init__
    require(per_layer is not None and len(per_layer) == n, f"{name}: config has no per_layer_config for {n} layers")
    pairs = []
    for i in range(n):
        lc = per_layer[i]
        pairs.append(
            (
                bounded_int(
                    lc.num_key_value_heads,
                    field=f"{name}: per_layer_config[{i}].num_key_value_heads",
                    low=1,
                    high=MAX_DIM,
                ),
                bounded_int(lc.head_dim, field=f"{name}: per_layer_config[{i}].head_dim", low=1, high=MAX_DIM),
            )
        )
    for i, (k, _) in enumerate(pairs):
        require(heads % k == 0, f"{name}: per_layer_config[{i}].num_key_value_heads={k}: must divide {heads} heads")
    return pairs[0][0], pairs[0][1], tuple(pairs)


class DecoderFamily(Family):
    """Attention-only decoders (Llama, Mistral, Phi-3, Qwen2/3, Gemma 2/3/3n, Cohere2, OLMo 3, gpt-oss, Llama 4):
    one K|V page per layer as vLLM 0.33's model files register it (docs/model-core.md#attention-decoders)."""

    key = "decoder"
    title = "attention-only decoder"
    knobs = (
        "kv_dtype",
        "block_size",
        "sliding_window",
        "max_model_len",
        "max_num_batched_tokens",
        "async_scheduling",
        "tensor_parallel_size",
    )

    def read(self, raw: dict, *, name: str) -> Model:
        dory = raw.get("model_type") == "dory"  # its layer_types also names MLP-only layers (dory.py)
        top, text = read_config(raw, name=name, known_kinds=LAYER_KINDS + (("mlp",) if dory else ()))
        model_type = getattr(text, "model_type", raw.get("model_type"))
        n = field(text, "num_hidden_layers", model=name)
        heads = field(text, "num_attention_heads", model=name)
        per_layer = model_type == "gemma4_text"  # per-layer attributes: transformers refuses the global read
        kv = heads if per_layer else field(text, "num_key_value_heads", model=name, required=False, default=heads)
        hidden = field(text, "hidden_size", model=name, required=False)
        head_dim = 1 if per_layer else getattr(text, "head_dim", None)
        archs = raw.get("architectures") or [model_type]
        # served by vLLM's Transformers backend (transformers_backend), or its own LM under a multimodal one
        backend = model_type in BACKEND_TYPES or archs[0] == BACKEND_LM
        if backend:
            kv, head_dim = backend_kv_heads(text, heads), backend_head_size(text, heads, hidden, name=name)
        elif model_type in HEAD_FROM_HIDDEN or not head_dim:
            require(hidden is not None and heads > 0, f"{name}: config is missing field 'head_dim'")
            head_dim = hidden // heads
        layer_heads: tuple[tuple[int, int], ...] = ()
        if model_type in HEAD_RULES:
            require(
                getattr(text, "use_bidirectional_attention", None) != "all",
                f"{name}: use_bidirectional_attention='all': non-causal attention is not modelled",
            )
            kv, head_dim, layer_heads = _heads(text, model_type, heads, kv, head_dim, n, name=name)
        for fname, value in (("num_attention_heads", heads), ("num_key_value_heads", kv), ("head_dim", head_dim)):
            bounded_int(value, field=f"{name}: {fname}", low=1, high=MAX_DIM)
        require(heads % kv == 0, f"{name}: num_key_value_heads={kv}: must divide num_attention_heads={heads}")
        names: tuple[str, ...] = ()
        if model_type in LOOPED:
            names, looped = looped_layers(text, model_type, name=name)
            n, window = len(names), getattr(text, "sliding_window", None)
            kinds = [SLIDING if k == SLIDING and window else FULL for k in looped]
            source = f"{model_type}: looped / stacked layers (decoder_keys.looped_layers)"
        else:
            kinds, source = _kinds(text, model_type, n, name=name)
        window = getattr(text, "sliding_window", None) if SLIDING in kinds else None
        if window is not None and model_type == "cohere2":
            window += 1  # commandr.py: "cohere swa layer sees [pos - sliding_window, pos]"
        shared = ()
        n_shared = 0 if backend else getattr(text, "num_kv_shared_layers", 0) or 0
        bounded_int(n_shared, field=f"{name}: num_kv_shared_layers", low=0, high=n - 1)
        if n_shared:
            first = n - n_shared
            require(0 < first, f"{name}: num_kv_shared_layers={n_shared}: leaves no layer with its own KV")
            targets = []
            for i in range(first, n):
                target = first - (2 if kinds[i] == SLIDING else 1)
                if model_type == "gemma4_text":  # gemma4.py: the last earlier layer of the same type
                    same = [j for j in range(first) if kinds[j] == kinds[i]]
                    target = same[-1] if same else -1
                if target >= 0:
                    targets.append((i, target))
                    kinds[i] = SHARED
            shared = tuple(targets)
            source += f"; layers {first}..{n - 1} share layer {first - 2} / {first - 1}'s KV (gemma3n.py)"
        wrapper = str(archs[0]).endswith("ForConditionalGeneration") or archs[0] in WRAPPERS
        prefix, suffix = {**LAYER_NAMES, **BACKEND_LAYER_NAMES}.get(model_type, DEFAULT_LAYER_NAMES)
        config = DecoderConfig(
            num_hidden_layers=n,
            num_attention_heads=heads,
            num_key_value_heads=kv,
            head_dim=head_dim,
            layer_kinds=tuple(kinds),
            sliding_window=window,
            attention_chunk_size=getattr(text, "attention_chunk_size", None) if CHUNKED in kinds else None,
            layer_prefix=("language_model." if wrapper else "") + prefix,
            attn_suffix=suffix,
            kind_source=source,
            shared_targets=shared,
            layer_heads=layer_heads,
            layer_names=names,
        )
        length, key = derive_max_model_len(text)
        return Model(
            name=name,
            family=self.key,
            architecture=str(archs[0]),
            model_type=str(model_type),
            dtype=resolve_dtype(top, text, raw, name=name),
            max_model_len=length,
            config=config,
            max_model_len_source=key,
        )

    @model_method
    def knobs_for(self, model: Model) -> tuple[str, ...]:
        has_sliding = SLIDING in model.config.layer_kinds
        fixed_dtype = model.model_type in NO_CACHE_CONFIG
        return tuple(
            k for k in self.knobs if (k != "sliding_window" or has_sliding) and (k != "kv_dtype" or not fixed_dtype)
        )

    @model_method
    def caches(self, model: Model, options: Options) -> tuple[AttentionCache, ...]:
        c: DecoderConfig = model.config
        tp = options.tensor_parallel_size or 1
        check_tp_heads(c.num_attention_heads, tp, model=model.name)
        require(
            tp == 1 or model.model_type != "dory",
            f"tensor_parallel_size={tp}: vLLM's Dory runs on one GPU only (dory.py DoryForCausalLM.__init__)",
        )
        kv = kv_heads_per_rank(c.num_key_value_heads, tp, model=model.name)
        dtype = options.kv_dtype or model.dtype
        window = options.sliding_window or c.sliding_window
        per_rank = {k: kv_heads_per_rank(k, tp, model=model.name) for k in {k for k, _ in c.layer_heads}}
        out = []
        for i, kind in enumerate(c.layer_kinds):
            if kind == SHARED:
                continue
            heads, size = (per_rank[c.layer_heads[i][0]], c.layer_heads[i][1]) if c.layer_heads else (kv, c.head_dim)
            out.append(
                AttentionCache(
                    name=c.layer_names[i] if c.layer_names else f"{c.layer_prefix}.{i}.{c.attn_suffix}",
                    layer=i,
                    num_kv_heads=heads,
                    head_size=size,
                    head_size_v=size,
                    kv_dtype=dtype,
                    sliding_window=window if kind == SLIDING else None,
                    attention_chunk_size=c.attention_chunk_size if kind == CHUNKED else None,
                )
            )
        return tuple(out)

    @model_method
    def describe(self, model: Model) -> str:
        c: DecoderConfig = model.config
        mix = ", ".join(
            f"{n} {k.replace('_attention', '').replace('_kv', ' (no cache)')}" for k, n in c.kind_counts.items()
        )
        text = f"{c.num_hidden_layers} layers ({mix}); {c.num_key_value_heads} KV heads x head_dim {c.head_dim}"
        if c.sliding_window:
            text += f", sliding_window {c.sliding_window}"
        if c.attention_chunk_size:
            text += f", attention_chunk_size {c.attention_chunk_size}"
        return f"{model.name} ({model.architecture}): {text}; {model.dtype}; max_model_len {model.max_model_len:,}"

    @model_method
    def mixes_full_layers(self, model: Model) -> bool:
        """True: any layer of a decoder can be made full or sliding (the full_layers knob applies)."""
        return True

    @model_method
    def full_layer_count(self, model: Model) -> int:
        """How many layers are full attention (the explorer's full_layers knob)."""
        return model.config.layer_kinds.count(FULL)

    @model_method
    def kind_counts(self, model: Model) -> dict[str, int]:
        """Layers of each kind ('full', 'sliding', 'chunked', 'shared'), first-seen order."""
        return {k.replace("_attention", "").replace("_kv", ""): n for k, n in model.config.kind_counts.items()}

    @model_method
    def with_full_layers(self, model: Model, full: int) -> Model:
        """The model with `full` full-attention layers spread evenly (the explorer's layer mix);
        the other layers keep the model's other kinds in their order."""
        c: DecoderConfig = model.config
        kinds = _spread_full(c.layer_kinds, full, name=model.name)
        if kinds == c.layer_kinds:
            return model
        heads = c.layer_heads
        if heads:  # Gemma 4: a layer takes the KV heads / head size of its new kind
            by_kind = {k: pair for k, pair in zip(c.layer_kinds, heads)}
            heads = tuple(by_kind.get(k, heads[i]) for i, k in enumerate(kinds))
        cfg = dataclasses.replace(
            c, layer_kinds=kinds, layer_heads=heads, kind_source=f"kvviz: {full} full layers spread evenly"
        )
        return dataclasses.replace(model, name=f"{model.name} ({full} full)", config=cfg)


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


DECODER = register(DecoderFamily(), NAMES + BACKEND_NAMES)
