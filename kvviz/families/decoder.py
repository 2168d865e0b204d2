"""Attention-only decoders: every layer registers one K|V attention cache (full, sliding window or
chunked local), or none when it shares another layer's KV (docs/model-core.md#attention-decoders).

What each architecture's model file does is its record (kvviz.families.decoder_records.DecoderRecord, and
kvviz.families.transformers_backend for the Transformers backend); the rules every record shares, each
from vLLM 0.33 (vllm/model_executor/models/ unless another path is given):

* the window of a layer: `layer_types[i] == "sliding_attention"` gives config.sliding_window
  (gemma2.py, gemma3.py, llama.py, the Transformers backend's transformers/base.py); a config without
  layer_types, or whose layers are all sliding, gives every layer the config-wide window
  (engine/arg_utils.py create_engine_config -> CacheConfig.sliding_window: Mistral, Phi-3);
* head size: head_dim (when > 0), else hidden_size // num_attention_heads (get_head_size), or that quotient
  always where the record says so (qwen2.py Qwen2Attention, ...);
* KV sharing: the last num_kv_shared_layers layers reuse layer first - 2 (sliding) or first - 1 (full) and
  register no cache (gemma3n.py Gemma3nAttention, gpu_model_runner.get_kv_cache_spec), or the last earlier
  layer of their own type where the record says so (gemma4.py Gemma4Attention);
* names: `{prefix}.{i}.{suffix}` of the record's layer_names, under the record's prefix (a multimodal class
  puts its language model under `language_model.`);
* TP: ModelConfig.get_num_kv_heads, max(1, kv_heads // tp).
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from kvviz.base.errors import require
from kvviz.base.inputs import MAX_DIM, bounded_int
from kvviz.core.declare import AttentionCache
from kvviz.families.decoder_layers import NONE, check_layers, per_kind
from kvviz.families.decoder_mix import (  # noqa: F401
    CHUNKED,
    FULL,
    SHARED,
    SLIDING,
    full_layer_positions,
    spread_full,
)
from kvviz.families.decoder_records import FROM_HIDDEN, DecoderRecord
from kvviz.families.decoder_records import RECORDS as DECODER_RECORDS
from kvviz.families.hf import check_tp_heads, derive_max_model_len, kv_heads_per_rank, read_config, resolve_dtype
from kvviz.families.hf_bounds import field
from kvviz.families.registry import RECORDS, Family, Model, model_method, register
from kvviz.families.transformers_backend import RECORDS as BACKEND_RECORDS
from kvviz.families.transformers_backend import backend_head_size, backend_kv_heads
from kvviz.options import Options

LAYER_KINDS = (FULL, SLIDING, CHUNKED)


@dataclasses.dataclass(frozen=True)
class DecoderConfig:
    """The cache-relevant part of an attention-only decoder's (text) config, per layer."""

    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    layer_kinds: tuple[str, ...]  # one of FULL, SLIDING, CHUNKED, SHARED per layer
    sliding_window: int | None  # the window a sliding layer's spec carries (Cohere2: + 1)
    layer_prefix: str  # "model.layers" or "language_model.model.layers"
    attn_suffix: str  # "self_attn.attn" or "attn.attn"
    kind_source: str
    shared_targets: tuple[tuple[int, int], ...] = ()  # (layer, the layer whose KV it reuses)
    # per layer (KV heads, head size[, V head size]) where they differ (Gemma 4, decoder_kinds)
    layer_heads: tuple[tuple[int, ...], ...] = ()
    layer_names: tuple[str, ...] = ()  # per cache, where not `{layer_prefix}.{i}.{attn_suffix}` (a looped rule)
    layer_windows: tuple[int | None, ...] = ()  # per cache, where the model file sets each (decoder_layers)
    head_size_v: int | None = None  # V's head size where it is not K's (decoder_layers: Pangu's sink attention)
    sink_len: int = 0  # static sink tokens (decoder_layers: StaticSinkAttention)
    attention_chunk_size: int | None = None
    tp_heads: tuple[int, ...] = ()  # other query head counts TP splits (decoder_kinds: MiMo's swa heads)
    record: str = ""  # the architecture record that read it (decoder_records): what the model file asserts of a run

    @property
    def kind_counts(self) -> dict[str, int]:
        """Layers of each kind ('full_attention', 'sliding_attention', ...), in first-seen order."""
        return dict(Counter(self.layer_kinds))

    def layers_of(self, kind: str) -> tuple[int, ...]:
        """The indices of the layers of kind `kind`."""
        return tuple(i for i, k in enumerate(self.layer_kinds) if k == kind)


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

    def read(self, raw: dict, *, name: str, record: DecoderRecord) -> Model:
        r = record
        top, text = read_config(raw, name=name, read=r.config, known_kinds=LAYER_KINDS + r.extra_kinds)
        model_type = getattr(text, "model_type", raw.get("model_type"))
        if r.refuse is not None:  # what the model file refuses of a config (decoder_rules)
            r.refuse(text, name=name)
        n = field(text, "num_hidden_layers", model=name)
        if r.kind_heads is not None:  # per-layer-kind KV heads / head sizes / windows (decoder_kinds)
            sizes = r.kind_heads(text, n, name=name)
            return self._model(raw, top, text, model_type, name, r, num_hidden_layers=n, **sizes)
        heads = field(text, "num_attention_heads", model=name)
        per_layer = r.per_layer  # per-layer attributes (Gemma 4): transformers refuses the global read
        kv = heads if per_layer else field(text, "num_key_value_heads", model=name, required=False, default=heads)
        hidden = field(text, "hidden_size", model=name, required=False)
        head_dim = 1 if per_layer else getattr(text, "head_dim", None)
        if r.backend:  # served by vLLM's Transformers backend (transformers_backend)
            kv, head_dim = backend_kv_heads(text, heads), backend_head_size(text, heads, hidden, name=name)
        elif r.head_size == FROM_HIDDEN or not head_dim:
            require(hidden is not None and heads > 0, f"{name}: config is missing field 'head_dim'")
            head_dim = hidden // heads
        layer_heads: tuple[tuple[int, ...], ...] = ()
        if r.heads is not None:  # the model file's own KV heads / head size (decoder_rules)
            require(
                getattr(text, "use_bidirectional_attention", None) != "all",
                f"{name}: use_bidirectional_attention='all': non-causal attention is not modelled",
            )
            kv, head_dim, layer_heads = r.heads(text, heads, kv, head_dim, n, name=name)
        for fname, value in (("num_attention_heads", heads), ("num_key_value_heads", kv), ("head_dim", head_dim)):
            bounded_int(value, field=f"{name}: {fname}", low=1, high=MAX_DIM)
        require(heads % kv == 0, f"{name}: num_key_value_heads={kv}: must divide num_attention_heads={heads}")
        names: tuple[str, ...] = ()
        plan = r.layer_plan(text, n, kv, head_dim, name=name) if r.layer_plan is not None else None
        if plan is not None:
            kinds, names, layer_heads, source = list(plan.kinds), plan.names, plan.heads, plan.source
            kv, head_dim = next(h for k, h in zip(kinds, layer_heads) if k != NONE)  # the first attention layer's
            window = next((w for w in plan.windows if w), None)
        elif r.looped is not None:
            names, looped = r.looped(text, name=name)
            n, window = len(names), getattr(text, "sliding_window", None)
            kinds = [SLIDING if k == SLIDING and window else FULL for k in looped]
            source = f"{model_type}: looped / stacked layers (decoder_rules.{r.looped.__name__})"
        else:
            kinds, source = r.layer_kinds(text, n, name=name)
        if plan is None:
            window = getattr(text, "sliding_window", None) if SLIDING in kinds else None
        if window is not None:
            window += r.window_offset  # commandr.py: "cohere swa layer sees [pos - sliding_window, pos]"
        shared = ()
        n_shared = 0 if r.backend else getattr(text, "num_kv_shared_layers", 0) or 0
        bounded_int(n_shared, field=f"{name}: num_kv_shared_layers", low=0, high=n - 1)
        if n_shared:
            first = n - n_shared
            require(0 < first, f"{name}: num_kv_shared_layers={n_shared}: leaves no layer with its own KV")
            targets = []
            for i in range(first, n):
                target = first - (2 if kinds[i] == SLIDING else 1)
                if r.share_by_kind:  # gemma4.py: the last earlier layer of the same type
                    same = [j for j in range(first) if kinds[j] == kinds[i]]
                    target = same[-1] if same else -1
                if target >= 0:
                    targets.append((i, target))
                    kinds[i] = SHARED
            shared = tuple(targets)
            source += f"; layers {first}..{n - 1} share layer {first - 2} / {first - 1}'s KV (gemma3n.py)"
        return self._model(
            raw,
            top,
            text,
            model_type,
            name,
            r,
            num_hidden_layers=n,
            num_attention_heads=heads,
            num_key_value_heads=kv,
            head_dim=head_dim,
            layer_kinds=tuple(kinds),
            sliding_window=window,
            attention_chunk_size=getattr(text, "attention_chunk_size", None) if CHUNKED in kinds else None,
            kind_source=source,
            shared_targets=shared,
            layer_heads=layer_heads,
            layer_names=names,
            layer_windows=plan.windows if plan else (),
            head_size_v=plan and plan.head_size_v,
            sink_len=plan.sink_len if plan else 0,
        )

    def _model(self, raw: dict, top, text, model_type, name: str, r: DecoderRecord, **sizes) -> Model:
        """The Model of DecoderConfig(**sizes) with vLLM's layer names, dtype and max_model_len."""
        archs = raw.get("architectures") or [model_type]
        prefix, suffix = r.layer_names
        config = DecoderConfig(layer_prefix=r.prefix + prefix, attn_suffix=suffix, record=r.name, **sizes)
        length, key = derive_max_model_len(text)
        return Model(
            name=name,
            family=self.key,
            architecture=str(archs[0]),
            model_type=str(raw.get("model_type") if r.config.as_type else model_type),
            dtype=resolve_dtype(top, text, raw, name=name),
            max_model_len=length,
            config=config,
            max_model_len_source=key,
        )

    @model_method
    def knobs_for(self, model: Model) -> tuple[str, ...]:
        has_sliding = SLIDING in model.config.layer_kinds
        record = RECORDS.get(model.config.record)
        fixed_dtype = record is not None and record.cache_dtype_fixed
        return tuple(
            k for k in self.knobs if (k != "sliding_window" or has_sliding) and (k != "kv_dtype" or not fixed_dtype)
        )

    @model_method
    def caches(self, model: Model, options: Options) -> tuple[AttentionCache, ...]:
        c: DecoderConfig = model.config
        tp = options.tensor_parallel_size or 1
        for heads in (c.num_attention_heads, *c.tp_heads):
            check_tp_heads(heads, tp, model=model.name)
        record = RECORDS.get(c.record)
        for check in record.checks if record is not None else ():  # what the model file asserts (decoder_rules)
            check(model, options, tp)
        kv = kv_heads_per_rank(c.num_key_value_heads, tp, model=model.name)
        dtype = options.kv_dtype or model.dtype
        check_layers(model, options, tp)
        per_rank = {k: kv_heads_per_rank(k, tp, model=model.name) for k in {h[0] for h in c.layer_heads if h[0]}}
        out = []
        for i, kind in enumerate(c.layer_kinds):
            if kind in (SHARED, NONE):
                continue
            window = options.sliding_window or (c.layer_windows[i] if c.layer_windows else c.sliding_window)
            heads, size = (per_rank[c.layer_heads[i][0]], c.layer_heads[i][1]) if c.layer_heads else (kv, c.head_dim)
            size_v = c.layer_heads[i][2] if c.layer_heads and len(c.layer_heads[i]) > 2 else c.head_size_v or size
            out.append(
                AttentionCache(
                    name=c.layer_names[i] if c.layer_names else f"{c.layer_prefix}.{i}.{c.attn_suffix}",
                    layer=i,
                    num_kv_heads=heads,
                    head_size=size,
                    head_size_v=size_v,
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
        if c.sink_len:  # decoder_layers: openPangu's StaticSinkAttention
            text += f", V head {c.head_size_v}, {c.sink_len} static sink tokens (SinkFullAttentionSpec)"
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
        kinds = spread_full(c.layer_kinds, full, name=model.name)
        if kinds == c.layer_kinds:
            return model
        # a layer takes the KV heads / head size (Gemma 4) and window of its new kind
        heads, windows = (per_kind(c.layer_kinds, v, kinds) for v in (c.layer_heads, c.layer_windows))
        source = f"kvviz: {full} full layers spread evenly"
        cfg = dataclasses.replace(c, layer_kinds=kinds, layer_heads=heads, layer_windows=windows, kind_source=source)
        return dataclasses.replace(model, name=f"{model.name} ({full} full)", config=cfg)


DECODER = register(DecoderFamily(), DECODER_RECORDS + BACKEND_RECORDS)
