"""State-space / linear-attention hybrids: layers that register a recurrent state (vLLM MambaSpec)
beside attention or MLA layers (docs/model-core.md#families).

Each architecture's reader says, per layer and in vLLM's registration order, which caches it
registers and under which name; the state shapes and dtypes are vLLM 0.33's
(model_executor/layers/mamba/mamba_utils.py MambaStateShapeCalculator / MambaStateDtypeCalculator,
fed as each model's get_mamba_state_shape_from_config feeds them), at tensor-parallel size tp:

* Jamba (models/jamba.py): Mamba-1 `model.layers.{i}.mixer`, attention `model.layers.{i}.attn`,
  by layers_block_type; mamba1_state_shape(intermediate = mamba_expand x hidden_size);
* Nemotron-H (models/nemotron_h.py): hybrid_override_pattern 'M' -> Mamba-2 `model.layers.{i}.mixer`,
  '*' -> attention `model.layers.{i}.mixer.attn`, '-' / 'E' no cache; SSM dtype from the config's
  mamba_ssm_cache_dtype (default float32: models/config.py NemotronHForCausalLMConfig);
* Falcon-H1 (models/falcon_h1.py FalconH1ParallelHybrid): every layer registers attention
  `model.layers.{i}.attn` and then Mamba-2 `model.{L + i}.mixer`;
* Granite-4.0-H (models/granitemoehybrid.py): layer_types 'linear_attention' is Mamba-2
  `model.layers.{i}.mixer`, 'full_attention' `model.layers.{i}.self_attn.attn`;
* Zamba2 (models/zamba2.py Zamba2Model): the shared attention blocks are built first, block b
  naming its slots `model.attn.{j}` from j = b x (H + M - 1) // M; then every layer's Mamba-2
  `{H + i}.mixer` (H hybrid layers, M num_mem_blocks);
* LFM2 (models/lfm2.py): 'conv' -> short conv `model.layers.{i}.short_conv`, 'full_attention' ->
  `model.layers.{i}.self_attn.attn`; LFM2-MoE (models/lfm2_moe.py) alike, its conv dim hidden_size;
* Mamba / FalconMamba (models/mamba.py) and Mamba2 (models/mamba2.py): no attention; every layer's
  Mamba-1 / Mamba-2 state at `backbone.layers.{i}.mixer` (Mamba2: intermediate expand x hidden_size);
* OLMo-hybrid (models/olmo_hybrid.py): a gated delta net hybrid like Qwen3-Next, its attention head
  size hidden_size // num_attention_heads;
* Qwen3-Next / Qwen3.5 (models/qwen3_next.py, qwen3_5.py): 'linear_attention' is a gated delta net
  `model.layers.{i}.linear_attn`; the ConditionalGeneration wrappers put it under `language_model.`;
  Qwen3.5's SSM dtype is the text config's mamba_ssm_dtype when given
  (models/config.py Qwen3_5ForConditionalGenerationConfig);
* Kimi-Linear (models/kimi_k3/nvidia/model.py KimiDecoderLayer): layer i is KDA when i + 1 is in
  linear_attn_config.kda_layers (1-based), else MLA; both at `model.layers.{i}.self_attn`; the
  KDA recurrent state is float32 (kda_state_dtype with 'auto'; the layer's own get_state_dtype is
  always float32).

* Bailing-V2.5 / V3 (+ VL), AliceAI, InternS2-Preview / Mobius, Kimi-K3 (linear attention:
  linear_attention_state_shape, one tensor of the model dtype).

Each architecture is one record (kvviz.families.state_records) naming its reader (kvviz.families.state_mamba,
state_delta, state_bailing).

Dtypes: conv states are the model dtype (mamba_cache_dtype 'auto'); the SSM state is
options.mamba_ssm_dtype, else the config's own field where vLLM reads one, else the model dtype.
A TP that vLLM refuses (`divide` in the shape calculators, the heads checks) is one line naming
tensor_parallel_size.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from kvviz.base.errors import require
from kvviz.core.declare import AttentionCache, MambaCache, MLACache, StatePart
from kvviz.families.hf import check_tp_heads, derive_max_model_len, kv_heads_per_rank, read_config, resolve_dtype
from kvviz.families.hf_bounds import bound_layers
from kvviz.families.registry import Family, Model, model_method, register
from kvviz.families.state_config import (
    ATTN,
    ELEMENT,
    MLA,
    STATE,
    TITLES,
    Slot,
    StateConfig,
)
from kvviz.families.state_records import RECORDS, StateRecord
from kvviz.families.state_shapes import state_shapes
from kvviz.options import Options

# -- reading the configs -------------------------------------------------------------------------


class StateFamily(Family):
    """State-space / linear-attention hybrids: layers that register a recurrent state (vLLM 0.33 MambaSpec) beside
    attention or MLA layers."""

    key = "state"
    title = "state-space / linear-attention hybrid"
    knobs = (
        "kv_dtype",
        "block_size",
        "mamba_ssm_dtype",
        "prefix_caching",
        "max_model_len",
        "max_num_batched_tokens",
        "async_scheduling",
        "tensor_parallel_size",
    )

    def read(self, raw: dict, *, name: str, record: StateRecord) -> Model:
        require(isinstance(raw, dict), f"{name}: config must be a JSON object")
        archs = raw.get("architectures") or []
        model_type = raw.get("model_type")
        own = record.own(raw, name=name) if record.own is not None else None
        if own is not None:
            bound_layers(raw, name=name)
            top, text = own
        else:
            top, text = read_config(raw, name=name, read=record.config)
        config = record.reader(raw, top, text, name=name)
        require(any(s.kind == STATE for s in config.slots), f"{name}: no layer registers a recurrent state")
        length, source = derive_max_model_len(text)
        if (
            record.max_len_default is not None
            and getattr(text, "max_position_embeddings", None) is None
            and not any(isinstance(getattr(text, k, None), int) for k in ("model_max_length", "max_seq_len"))
        ):
            length, source = record.max_len_default, "max_position_embeddings (KimiLinearConfig default)"
        return Model(
            name=name,
            family=self.key,
            architecture=str((archs or [model_type])[0]),
            model_type=str(model_type),
            dtype=resolve_dtype(top, text, raw, name=name),
            max_model_len=length,
            config=config,
            max_model_len_source=source,
        )

    @model_method
    def knobs_for(self, model: Model) -> tuple[str, ...]:
        # LFM2's state has no SSM part; Kimi-Linear's KDA layers keep float32 whatever is asked
        # (kimi_gdn_linear_attn get_state_dtype), so the knob would not change its pages.
        no_ssm = model.config.mamba_type in ("short_conv", "kda", "linear")
        return tuple(k for k in self.knobs if k != "mamba_ssm_dtype" or not no_ssm)

    @model_method
    def state_parts(self, model: Model, options: Options) -> tuple[StatePart, ...]:
        """The recurrent state's tensors at the options' TP size: name, shape and dtype each, conv first
        (MambaStateShapeCalculator / MambaStateDtypeCalculator)."""
        c: StateConfig = model.config
        tp = options.tensor_parallel_size or 1
        shapes = state_shapes(c, tp, model=model.name)
        conv = model.dtype
        if c.mamba_type == "kda":
            ssm = "fp32"
        else:
            ssm = ELEMENT[options.mamba_ssm_dtype] if options.mamba_ssm_dtype else (c.ssm_dtype or model.dtype)
        return tuple(
            StatePart(part, shape, ssm if i == len(shapes) - 1 and len(shapes) > 1 else conv)
            for i, (part, shape) in enumerate(shapes)
        )

    @model_method
    def caches(self, model: Model, options: Options) -> tuple:
        c: StateConfig = model.config
        tp = options.tensor_parallel_size or 1
        check_tp_heads(c.num_attention_heads, tp, model=model.name)
        parts = self.state_parts(model, options)
        kv_dtype = options.kv_dtype or model.dtype
        kv = None
        if c.count(ATTN):
            kv = (
                c.num_kv_heads // tp
                if c.kv_heads_replicated
                else kv_heads_per_rank(c.num_kv_heads, tp, model=model.name)
            )
        out = []
        for s in c.slots:
            if s.kind == STATE:
                out.append(
                    MambaCache(
                        name=s.name, layer=s.layer, mamba_type=c.mamba_type, parts=parts, backend=c.state_backend
                    )
                )
            elif s.kind == MLA:
                out.append(
                    MLACache(
                        name=s.name,
                        layer=s.layer,
                        kv_lora_rank=c.kv_lora_rank,
                        qk_rope_head_dim=c.qk_rope_head_dim,
                        kv_dtype=kv_dtype,
                    )
                )
            else:
                out.append(
                    AttentionCache(
                        name=s.name,
                        layer=s.layer,
                        num_kv_heads=kv,
                        head_size=c.head_dim,
                        head_size_v=c.head_dim,
                        kv_dtype=kv_dtype,
                    )
                )
        return tuple(out)

    @model_method
    def describe(self, model: Model) -> str:
        c: StateConfig = model.config
        counts = Counter(s.kind for s in c.slots)
        mix = [f"{counts[STATE]} {TITLES[c.mamba_type]}"]
        if counts[ATTN]:
            mix.append(f"{counts[ATTN]} attention ({c.num_kv_heads} KV heads x head_dim {c.head_dim})")
        if counts[MLA]:
            mix.append(f"{counts[MLA]} MLA ({c.kv_lora_rank} + {c.qk_rope_head_dim})")
        parts = self.state_parts(model, Options())
        state = " + ".join(f"{p.name} {'x'.join(map(str, p.shape))} {p.dtype}" for p in parts)
        return (
            f"{model.name} ({model.architecture}): {c.num_hidden_layers} layers, caches {', '.join(mix)}; "
            f"state {state} = {sum(p.num_bytes for p in parts):,} B; {model.dtype}; "
            f"max_model_len {model.max_model_len:,}"
        )


STATE_FAMILY = register(StateFamily(), RECORDS)


def _with_full_layers(model: Model, full: int) -> Model:
    """The model with `full` attention layers spread evenly (the explorer's layer mix), for
    hybrids whose every layer registers one attention or one state cache (Qwen3-Next, Qwen3.5,
    LFM2, Jamba, ...): each layer keeps its own names, only its kind moves."""
    from kvviz.families.decoder import full_layer_positions

    c: StateConfig = model.config
    n = c.num_hidden_layers
    require(
        isinstance(full, int) and not isinstance(full, bool) and 0 <= full <= n,
        f"full_layers={full!r}: must be an integer from 0 to {n} (the model's layers)",
    )
    by_layer: dict[int, list[Slot]] = {}
    for slot in c.slots:
        by_layer.setdefault(slot.layer, []).append(slot)
    require(
        len(by_layer) == n and all(len(v) == 1 for v in by_layer.values()),
        f"full_layers: {model.name}'s layers do not each register one cache; its mix is fixed",
    )
    names = {}
    for slot in c.slots:  # a name template per kind, from the layer's own index
        names.setdefault(slot.kind, (slot.name, slot.layer))
    require(len(names) >= 2 or full in (0, n) and len(names) == 1, f"full_layers: {model.name} has one cache kind only")
    if full == c.count(ATTN):
        return model
    is_full = set(full_layer_positions(n, full)) if full else set()
    slots = []
    for i in range(n):
        kind = ATTN if i in is_full else STATE
        require(kind in names, f"full_layers={full}: {model.name} has no {kind} layer to copy")
        template, at = names[kind]
        slots.append(Slot(kind=kind, name=template.replace(f".{at}.", f".{i}.", 1), layer=i))
    cfg = dataclasses.replace(c, slots=tuple(slots))
    return dataclasses.replace(model, name=f"{model.name} ({full} full)", config=cfg)


def _mixes_full_layers(model: Model) -> bool:
    """Whether the explorer's full_layers knob applies: every layer registers one cache, attention
    or state, so a layer's kind can move."""
    c: StateConfig = model.config
    layers = [s.layer for s in c.slots]
    return len(set(layers)) == len(layers) == c.num_hidden_layers and {s.kind for s in c.slots} == {ATTN, STATE}


def _as_method(fn):
    """`fn(model, ...)` as a StateFamily method (checked by `model_method`), under fn's name without the
    underscore and with its docstring."""

    def method(self, *args, **kwargs):
        return fn(*args, **kwargs)

    method.__doc__, method.__name__ = fn.__doc__, fn.__name__.lstrip("_")
    return model_method(method)


def _full_layer_count(model: Model) -> int:
    """How many layers register full attention (the explorer's full_layers knob)."""
    return model.config.count(ATTN)


def _kind_counts(model: Model) -> dict[str, int]:
    """Layers of each kind: 'full', the state's kind ('linear' for the gated delta net) and 'mla'."""
    c: StateConfig = model.config
    state = "linear" if c.mamba_type == "gdn" else c.mamba_type
    return {"full": c.count(ATTN), state: c.count(STATE)} | ({"mla": c.count(MLA)} if c.count(MLA) else {})


def _attention_free(model: Model) -> bool:
    """Whether vLLM's class is IsAttentionFree (mamba.py, mamba2.py): prefix caching is then off by default
    (ModelConfig.is_prefix_caching_supported), so the state runs in 'none' mode, mamba_block_size = max_model_len."""
    return model.config.attention_free


def _resolved_ssm_dtype(model: Model) -> str:
    """The SSM state's dtype when the knob is 'auto': the config's own, else the model dtype
    (KDA: float32), as vLLM's name."""
    c: StateConfig = model.config
    element = "fp32" if c.mamba_type == "kda" else (c.ssm_dtype or model.dtype)
    return {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}[element]


for _fn in (
    _with_full_layers,
    _mixes_full_layers,
    _full_layer_count,
    _kind_counts,
    _resolved_ssm_dtype,
    _attention_free,
):
    setattr(StateFamily, _fn.__name__.lstrip("_"), _as_method(_fn))
