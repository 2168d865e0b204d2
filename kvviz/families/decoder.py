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
* Cohere2 and Cohere2-MoE: a sliding layer sees sliding_window + 1 tokens (commandr.py CohereAttention,
  cohere2_moe.py Cohere2MoeAttention);
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
* per-layer-kind KV heads / K and V head sizes / windows (MiMo-V2, Step 3.5) and Step 3's one KV head:
  kvviz.families.decoder_kinds.KIND_RULES;
* TP: ModelConfig.get_num_kv_heads, max(1, kv_heads // tp).
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from kvviz.base.errors import require
from kvviz.base.inputs import MAX_DIM, bounded_int
from kvviz.core.declare import AttentionCache
from kvviz.families.decoder_keys import (
    CONFIG_AS,
    CUSTOM_CODE_TYPES,
    DEFAULT_LAYER_NAMES,
    GEMMA4_TYPES,
    HEAD_FROM_HIDDEN,
    HEAD_RULES,
    KV_HEAD_READERS,
    KV_SPLIT_ONLY,
    LAYER_NAMES,
    LOOPED,
    NO_CACHE_CONFIG,
    NOT_WRAPPERS,
    WRAPPERS,
    custom_fields,
    kv_heads_of,
    looped_layers,
)
from kvviz.families.decoder_kinds import KIND_RULES
from kvviz.families.decoder_layers import CUSTOM_CODE, NONE, check_layers, layer_plan, per_kind
from kvviz.families.decoder_mix import (  # noqa: F401
    CHUNKED,
    FULL,
    SHARED,
    SLIDING,
    _spread_full,
    config_layer_kinds,
    full_layer_positions,
)
from kvviz.families.decoder_names import NAMES
from kvviz.families.hf import check_tp_heads, derive_max_model_len, field, kv_heads_per_rank, read_config, resolve_dtype
from kvviz.families.registry import Family, Model, model_method, register
from kvviz.families.transformers_backend import BACKEND_LM, backend_head_size, backend_kv_heads
from kvviz.families.transformers_backend import LAYER_NAMES as BACKEND_LAYER_NAMES
from kvviz.families.transformers_backend import MODEL_TYPES as BACKEND_TYPES
from kvviz.families.transformers_backend import NAMES as BACKEND_NAMES
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
    layer_names: tuple[str, ...] = ()  # per cache, where not `{layer_prefix}.{i}.{attn_suffix}` (LOOPED)
    layer_windows: tuple[int | None, ...] = ()  # per cache, where the model file sets each (decoder_layers)
    head_size_v: int | None = None  # V's head size where it is not K's (decoder_layers: Pangu's sink attention)
    sink_len: int = 0  # static sink tokens (decoder_layers: StaticSinkAttention)
    attention_chunk_size: int | None = None
    tp_heads: tuple[int, ...] = ()  # other query head counts TP splits (decoder_kinds: MiMo's swa heads)

    @property
    def kind_counts(self) -> dict[str, int]:
        """Layers of each kind ('full_attention', 'sliding_attention', ...), in first-seen order."""
        return dict(Counter(self.layer_kinds))

    def layers_of(self, kind: str) -> tuple[int, ...]:
        """The indices of the layers of kind `kind`."""
        return tuple(i for i, k in enumerate(self.layer_kinds) if k == kind)


def _heads(text, model_type: str, heads: int, kv: int, head_dim: int, n: int, *, name: str):
    """(KV heads, head size, per-layer (KV heads, head size) or ()) for decoder_keys.HEAD_RULES."""
    if model_type in KV_HEAD_READERS:  # chatglm.py, step1.py, dbrx.py (decoder_keys.kv_heads_of)
        return kv_heads_of(text, model_type, heads, name=name), head_dim, ()
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
        archs = raw.get("architectures") or [raw.get("model_type")]
        kinds = LAYER_KINDS + (("mlp",) if dory else ())
        as_type = CONFIG_AS.get(raw.get("model_type"))  # MiMo: Qwen2's config class (decoder_keys.CONFIG_AS)
        top, text = read_config(
            {**raw, "model_type": as_type} if as_type else raw,
            name=name,
            known_kinds=kinds,
            custom_code=archs[0] in CUSTOM_CODE,
        )
        model_type = getattr(text, "model_type", raw.get("model_type"))
        if model_type in CUSTOM_CODE_TYPES:  # the custom class's aliases and defaults (decoder_keys.custom_fields)
            top = text = custom_fields(text, model_type, name=name)
        n = field(text, "num_hidden_layers", model=name)
        if model_type in KIND_RULES:  # per-layer-kind KV heads / head sizes / windows (decoder_kinds)
            sizes = KIND_RULES[model_type](text, n, name=name)
            return self._model(raw, top, text, model_type, name, as_type, num_hidden_layers=n, **sizes)
        heads = field(text, "num_attention_heads", model=name)
        per_layer = model_type in GEMMA4_TYPES  # per-layer attributes: transformers refuses the global read
        kv = heads if per_layer else field(text, "num_key_value_heads", model=name, required=False, default=heads)
        hidden = field(text, "hidden_size", model=name, required=False)
        head_dim = 1 if per_layer else getattr(text, "head_dim", None)
        # served by vLLM's Transformers backend (transformers_backend), or its own LM under a multimodal one
        backend = model_type in BACKEND_TYPES or archs[0] == BACKEND_LM
        if backend:
            kv, head_dim = backend_kv_heads(text, heads), backend_head_size(text, heads, hidden, name=name)
        elif model_type in HEAD_FROM_HIDDEN or not head_dim:
            require(hidden is not None and heads > 0, f"{name}: config is missing field 'head_dim'")
            head_dim = hidden // heads
        layer_heads: tuple[tuple[int, ...], ...] = ()
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
        plan = layer_plan(str(archs[0]), text, n, kv, head_dim, name=name)
        if plan is not None:
            kinds, names, layer_heads, source = list(plan.kinds), plan.names, plan.heads, plan.source
            kv, head_dim = next(h for k, h in zip(kinds, layer_heads) if k != NONE)  # the first attention layer's
            window = next((w for w in plan.windows if w), None)
        elif model_type in LOOPED:
            names, looped = looped_layers(text, model_type, name=name)
            n, window = len(names), getattr(text, "sliding_window", None)
            kinds = [SLIDING if k == SLIDING and window else FULL for k in looped]
            source = f"{model_type}: looped / stacked layers (decoder_keys.looped_layers)"
        else:
            kinds, source = config_layer_kinds(text, model_type, n, name=name)
        if plan is None:
            window = getattr(text, "sliding_window", None) if SLIDING in kinds else None
        if window is not None and model_type in ("cohere2", "cohere2_moe"):
            # commandr.py CohereAttention: "cohere swa layer sees [pos - sliding_window, pos]";
            # cohere2_moe.py Cohere2MoeAttention.__init__ passes config.sliding_window + 1 the same way
            window += 1
        shared = ()
        n_shared = 0 if backend else getattr(text, "num_kv_shared_layers", 0) or 0
        bounded_int(n_shared, field=f"{name}: num_kv_shared_layers", low=0, high=n - 1)
        if n_shared:
            first = n - n_shared
            require(0 < first, f"{name}: num_kv_shared_layers={n_shared}: leaves no layer with its own KV")
            targets = []
            for i in range(first, n):
                target = first - (2 if kinds[i] == SLIDING else 1)
                if model_type in GEMMA4_TYPES:  # gemma4.py: the last earlier layer of the same type
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
            as_type,
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

    def _model(self, raw: dict, top, text, model_type, name: str, as_type: str | None, **sizes) -> Model:
        """The Model of DecoderConfig(**sizes) with vLLM's layer names, dtype and max_model_len."""
        archs = raw.get("architectures") or [model_type]
        wrapper = str(archs[0]).endswith("ForConditionalGeneration") or archs[0] in WRAPPERS
        wrapper = wrapper and archs[0] not in NOT_WRAPPERS
        prefix, suffix = {**LAYER_NAMES, **BACKEND_LAYER_NAMES}.get(model_type, DEFAULT_LAYER_NAMES)
        config = DecoderConfig(
            layer_prefix=("language_model." if wrapper else "") + prefix, attn_suffix=suffix, **sizes
        )
        length, key = derive_max_model_len(text)
        return Model(
            name=name,
            family=self.key,
            architecture=str(archs[0]),
            model_type=str(raw.get("model_type") if as_type else model_type),
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
        for heads in (c.num_attention_heads, *c.tp_heads):
            check_tp_heads(heads, tp, model=model.name)
        require(
            tp == 1 or model.model_type != "dory",
            f"tensor_parallel_size={tp}: vLLM's Dory runs on one GPU only (dory.py DoryForCausalLM.__init__)",
        )
        require(
            model.model_type not in KV_SPLIT_ONLY or c.num_key_value_heads % tp == 0,
            f"tensor_parallel_size={tp}: {model.name}'s {c.num_key_value_heads} KV heads are not divisible by it "
            f"(vLLM's {model.model_type}.py attention asserts it)",
        )
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
        kinds = _spread_full(c.layer_kinds, full, name=model.name)
        if kinds == c.layer_kinds:
            return model
        # a layer takes the KV heads / head size (Gemma 4) and window of its new kind
        heads, windows = (per_kind(c.layer_kinds, v, kinds) for v in (c.layer_heads, c.layer_windows))
        source = f"kvviz: {full} full layers spread evenly"
        cfg = dataclasses.replace(c, layer_kinds=kinds, layer_heads=heads, layer_windows=windows, kind_source=source)
        return dataclasses.replace(model, name=f"{model.name} ({full} full)", config=cfg)


DECODER = register(DecoderFamily(), NAMES + BACKEND_NAMES)
