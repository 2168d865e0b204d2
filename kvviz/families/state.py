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
  `model.layers.{i}.self_attn.attn`;
* Qwen3-Next / Qwen3.5 (models/qwen3_next.py, qwen3_5.py): 'linear_attention' is a gated delta net
  `model.layers.{i}.linear_attn`; the ConditionalGeneration wrappers put it under `language_model.`;
  Qwen3.5's SSM dtype is the text config's mamba_ssm_dtype when given
  (models/config.py Qwen3_5ForConditionalGenerationConfig);
* Kimi-Linear (models/kimi_k3/nvidia/model.py KimiDecoderLayer): layer i is KDA when i + 1 is in
  linear_attn_config.kda_layers (1-based), else MLA; both at `model.layers.{i}.self_attn`; the
  KDA recurrent state is float32 (kda_state_dtype with 'auto'; the layer's own get_state_dtype is
  always float32).

Dtypes: conv states are the model dtype (mamba_cache_dtype 'auto'); the SSM state is
options.mamba_ssm_dtype, else the config's own field where vLLM reads one, else the model dtype.
A TP that vLLM refuses (`divide` in the shape calculators, the heads checks) is one line naming
tensor_parallel_size.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from ..core.declare import AttentionCache, MambaCache, MLACache, StatePart
from ..errors import KvvizError, require
from ..inputs import MAX_DIM, bounded_int, short_repr
from ..options import Options
from . import Family, Model, register
from .hf import check_tp_heads, derive_max_model_len, field, kv_heads_per_rank, read_config, resolve_dtype
from .mla import mla_dims
from .state_shapes import state_shapes

ATTN, MLA, STATE = "attention", "mla", "state"
# vLLM's dtype names (STR_DTYPE_TO_TORCH_DTYPE) -> kvviz's element names.
_ELEMENT = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "bf16": "bf16", "fp16": "fp16", "fp32": "fp32",
            "torch.bfloat16": "bf16", "torch.float16": "fp16", "torch.float32": "fp32"}
# KimiLinearConfig's default (transformers_utils/configs/kimi_linear.py) when config.json has none.
KIMI_LINEAR_MAX_POSITION_EMBEDDINGS = 4096


@dataclasses.dataclass(frozen=True)
class Slot:
    """One cache a layer registers: its kind (ATTN, MLA, STATE), vLLM's name and the decoder layer."""

    kind: str
    name: str
    layer: int


@dataclasses.dataclass(frozen=True)
class StateConfig:
    """The cache-relevant part of a hybrid's config: the caches in registration order and what
    sizes each kind."""

    mamba_type: str  # 'mamba1', 'mamba2', 'short_conv', 'gdn', 'kda'
    slots: tuple[Slot, ...]
    num_hidden_layers: int
    state_args: tuple[tuple[str, int], ...]  # the shape calculator's arguments, (config field, value)
    num_attention_heads: int | None = None  # ModelConfig.verify_with_parallel_config
    num_kv_heads: int | None = None  # attention layers (total, before TP)
    head_dim: int | None = None
    kv_lora_rank: int | None = None  # MLA layers (Kimi-Linear)
    qk_rope_head_dim: int | None = None
    ssm_dtype: str | None = None  # the config's own SSM dtype (element name), None: the model dtype
    ssm_dtype_source: str = ""
    kv_heads_replicated: bool = False  # Zamba2: num_kv_heads = num_heads // tp, no kv-head rule

    @property
    def args(self) -> dict[str, int]:
        """The shape calculator's arguments as a dict (config field -> value)."""
        return dict(self.state_args)

    def count(self, kind: str) -> int:
        """How many cache slots are of kind `kind` (ATTN, MLA or STATE)."""
        return sum(1 for s in self.slots if s.kind == kind)

    @property
    def layer_kinds(self) -> tuple[str, ...]:
        """One kind per cache slot, named as transformers' layer_types names them
        ('full_attention' for attention and MLA, the mamba_type's state otherwise)."""
        return tuple("full_attention" if s.kind in (ATTN, MLA) else f"{self.mamba_type}_state" for s in self.slots)


# -- reading the configs -------------------------------------------------------------------------

def _int(text, key: str, *, name: str, default=None, positive: bool = True) -> int:
    value = field(text, key, model=name, required=default is None, default=default)
    require(not positive or value > 0, f"{name}: {key}={value}: must be positive")
    return value


def _list(text, key: str, n: int, *, name: str) -> list:
    value = getattr(text, key, None)
    require(value is not None, f"{name}: config is missing field {key!r}")
    require(isinstance(value, (list, tuple, str)) and len(value) == n,
            f"{name}: {key}={short_repr(value)}: must have one entry per layer ({n})")
    return list(value)


def _ssm_element(value, key: str, *, name: str) -> str:
    element = _ELEMENT.get(str(value))
    require(element is not None, f"{name}: {key}={short_repr(value)}: kvviz knows bfloat16, float16, float32")
    return element


def _attn_fields(text, *, name: str, head_dim: int | None = None) -> dict:
    heads = _int(text, "num_attention_heads", name=name)
    kv = _int(text, "num_key_value_heads", name=name, default=heads)
    if head_dim is None:
        hidden = _int(text, "hidden_size", name=name)
        head_dim = bounded_int(hidden // heads, field=f"{name}: head_dim (hidden_size {hidden:,} // num_attention_heads "
                                                      f"{heads:,})", low=1, high=MAX_DIM)
    return dict(num_attention_heads=heads, num_kv_heads=kv, head_dim=head_dim)


def _head_dim_or_split(text, *, name: str) -> int:
    hd = getattr(text, "head_dim", None)
    if hd:
        require(isinstance(hd, int) and not isinstance(hd, bool) and hd > 0, f"{name}: head_dim={short_repr(hd)}: must be a positive integer")
        return hd
    hidden, heads = _int(text, "hidden_size", name=name), _int(text, "num_attention_heads", name=name)
    return bounded_int(hidden // heads, field=f"{name}: head_dim (hidden_size {hidden:,} // num_attention_heads {heads:,})",
                       low=1, high=MAX_DIM)


def _one_cache_a_layer(text, field: str, n: int, *, name: str, model: str, state: tuple[str, str],
                       attention: tuple[str, str]) -> tuple[Slot, ...]:
    """The slots of a hybrid whose `field` names each layer's kind: (kind value, vLLM name suffix)
    for its state layers and its attention layers, every other value refused naming the field."""
    slots = []
    for i, k in enumerate(_list(text, field, n, name=name)):
        require(k in (state[0], attention[0]), f"{name}: {field}[{i}]={short_repr(k)}: {model} layers are "
                                               f"{state[0]!r} or {attention[0]!r}")
        slots.append(Slot(STATE, f"model.layers.{i}.{state[1]}", i) if k == state[0]
                     else Slot(ATTN, f"model.layers.{i}.{attention[1]}", i))
    return tuple(slots)


def _jamba(raw, top, text, *, name):
    n = _int(text, "num_hidden_layers", name=name)
    slots = _one_cache_a_layer(text, "layers_block_type", n, name=name, model="Jamba", state=("mamba", "mixer"),
                               attention=("attention", "attn"))
    hidden = _int(text, "hidden_size", name=name)
    args = (("intermediate_size", _int(text, "mamba_expand", name=name) * hidden),
            ("state_size", _int(text, "mamba_d_state", name=name)), ("conv_kernel", _int(text, "mamba_d_conv", name=name)))
    return StateConfig(mamba_type="mamba1", slots=tuple(slots), num_hidden_layers=n, state_args=args,
                       **_attn_fields(text, name=name))


def _nemotron_h(raw, top, text, *, name):
    n = _int(text, "num_hidden_layers", name=name)
    pattern = getattr(text, "hybrid_override_pattern", None)
    require(isinstance(pattern, str) and len(pattern) == n,
            f"{name}: hybrid_override_pattern={short_repr(pattern)}: must be a string of one letter per layer ({n})")
    slots = []
    for i, ch in enumerate(pattern):
        require(ch in "M*-E", f"{name}: hybrid_override_pattern[{i}]={ch!r}: Nemotron-H knows M, *, -, E")
        if ch == "M":
            slots.append(Slot(STATE, f"model.layers.{i}.mixer", i))
        elif ch == "*":
            slots.append(Slot(ATTN, f"model.layers.{i}.mixer.attn", i))
    heads, head_dim = _int(text, "mamba_num_heads", name=name), _int(text, "mamba_head_dim", name=name)
    args = (("intermediate_size", heads * head_dim), ("n_groups", _int(text, "n_groups", name=name)),
            ("num_heads", heads), ("head_dim", head_dim), ("state_size", _int(text, "ssm_state_size", name=name)),
            ("conv_kernel", _int(text, "conv_kernel", name=name)))
    ssm = getattr(text, "mamba_ssm_cache_dtype", None) or "float32"
    return StateConfig(mamba_type="mamba2", slots=tuple(slots), num_hidden_layers=n, state_args=args,
                       ssm_dtype=_ssm_element(ssm, "mamba_ssm_cache_dtype", name=name),
                       ssm_dtype_source="mamba_ssm_cache_dtype (NemotronHForCausalLMConfig, default float32)",
                       **_attn_fields(text, name=name, head_dim=_head_dim_or_split(text, name=name)))


def _falcon_h1(raw, top, text, *, name):
    n = _int(text, "num_hidden_layers", name=name)
    slots = []
    for i in range(n):  # FalconH1ParallelHybrid: self_attn built before mamba
        slots.append(Slot(ATTN, f"model.layers.{i}.attn", i))
        slots.append(Slot(STATE, f"model.{n + i}.mixer", i))
    d_ssm = getattr(text, "mamba_d_ssm", None)
    inter = int(getattr(text, "mamba_expand", 0) * _int(text, "hidden_size", name=name)) if d_ssm is None else \
        _int(text, "mamba_d_ssm", name=name)
    require(inter > 0, f"{name}: config is missing field 'mamba_d_ssm' (or mamba_expand)")
    args = (("intermediate_size", inter), ("n_groups", _int(text, "mamba_n_groups", name=name)),
            ("num_heads", _int(text, "mamba_n_heads", name=name)), ("head_dim", _int(text, "mamba_d_head", name=name)),
            ("state_size", _int(text, "mamba_d_state", name=name)), ("conv_kernel", _int(text, "mamba_d_conv", name=name)))
    return StateConfig(mamba_type="mamba2", slots=tuple(slots), num_hidden_layers=n, state_args=args,
                       **_attn_fields(text, name=name, head_dim=_head_dim_or_split(text, name=name)))


def _granite_h(raw, top, text, *, name):
    n = _int(text, "num_hidden_layers", name=name)
    kinds = _list(text, "layer_types", n, name=name)
    slots = []
    for i, k in enumerate(kinds):  # transformers remaps the legacy 'mamba' / 'attention'
        require(k in ("linear_attention", "full_attention"),
                f"{name}: layer_types[{i}]={short_repr(k)}: Granite-4.0-H layers are mamba or attention")
        slots.append(Slot(STATE, f"model.layers.{i}.mixer", i) if k == "linear_attention"
                     else Slot(ATTN, f"model.layers.{i}.self_attn.attn", i))
    hidden = _int(text, "hidden_size", name=name)
    args = (("intermediate_size", _int(text, "mamba_expand", name=name) * hidden),
            ("n_groups", _int(text, "mamba_n_groups", name=name)), ("num_heads", _int(text, "mamba_n_heads", name=name)),
            ("head_dim", _int(text, "mamba_d_head", name=name)), ("state_size", _int(text, "mamba_d_state", name=name)),
            ("conv_kernel", _int(text, "mamba_d_conv", name=name)))
    return StateConfig(mamba_type="mamba2", slots=tuple(slots), num_hidden_layers=n, state_args=args,
                       **_attn_fields(text, name=name))


def _zamba2(raw, top, text, *, name):
    n = _int(text, "num_hidden_layers", name=name)
    kinds = _list(text, "layers_block_type", n, name=name)
    hybrid = [i for i, k in enumerate(kinds) if k == "hybrid"]
    h, m = len(hybrid), _int(text, "num_mem_blocks", name=name)
    slots = []
    for b in range(m):  # the shared blocks are built (and their Attention registered) first
        j = b * (h + m - 1) // m
        for k in range(h):
            if k % m == b:
                slots.append(Slot(ATTN, f"model.attn.{j}", hybrid[k]))
                j += 1
    slots += [Slot(STATE, f"{h + i}.mixer", i) for i in range(n)]
    hidden = _int(text, "hidden_size", name=name)
    inter = _int(text, "mamba_expand", name=name) * hidden
    heads = _int(text, "n_mamba_heads", name=name)
    head_dim = _int(text, "mamba_headdim", name=name)
    # get_mamba_state_shape_from_config reads mamba_headdim, the layer intermediate // n_mamba_heads:
    # vLLM pads to the first and allocates the second, so they must agree.
    require(head_dim * heads == inter, f"{name}: mamba_headdim={head_dim} x n_mamba_heads={heads} != mamba_expand x "
                                       f"hidden_size = {inter}: vLLM's Zamba2 state would not fit its page")
    args = (("intermediate_size", inter), ("n_groups", _int(text, "mamba_ngroups", name=name)), ("num_heads", heads),
            ("head_dim", head_dim), ("state_size", _int(text, "mamba_d_state", name=name)),
            ("conv_kernel", _int(text, "mamba_d_conv", name=name)))
    heads_attn = _int(text, "num_attention_heads", name=name)
    return StateConfig(mamba_type="mamba2", slots=tuple(slots), num_hidden_layers=n, state_args=args,
                       num_attention_heads=heads_attn, num_kv_heads=heads_attn,
                       head_dim=_int(text, "attention_head_dim", name=name), kv_heads_replicated=True)


def _lfm2(raw, top, text, *, name):
    n = _int(text, "num_hidden_layers", name=name)
    slots = _one_cache_a_layer(text, "layer_types", n, name=name, model="LFM2", state=("conv", "short_conv"),
                               attention=("full_attention", "self_attn.attn"))
    args = (("conv_dim", _int(text, "conv_dim", name=name)), ("conv_kernel", _int(text, "conv_L_cache", name=name)))
    return StateConfig(mamba_type="short_conv", slots=tuple(slots), num_hidden_layers=n, state_args=args,
                       **_attn_fields(text, name=name))


def _gated_delta_net(raw, top, text, *, name, prefix: str, ssm_field: str | None):
    n = _int(text, "num_hidden_layers", name=name)
    kinds = _list(text, "layer_types", n, name=name)
    slots = []
    for i, k in enumerate(kinds):
        require(k in ("linear_attention", "full_attention"),
                f"{name}: layer_types[{i}]={short_repr(k)}: a gated delta net hybrid's layers are linear_attention "
                f"or full_attention")
        slots.append(Slot(STATE, f"{prefix}model.layers.{i}.linear_attn", i) if k == "linear_attention"
                     else Slot(ATTN, f"{prefix}model.layers.{i}.self_attn.attn", i))
    args = (("num_k_heads", _int(text, "linear_num_key_heads", name=name)),
            ("num_v_heads", _int(text, "linear_num_value_heads", name=name)),
            ("head_k_dim", _int(text, "linear_key_head_dim", name=name)),
            ("head_v_dim", _int(text, "linear_value_head_dim", name=name)),
            ("conv_kernel", _int(text, "linear_conv_kernel_dim", name=name)))
    ssm, source = None, ""
    if ssm_field and getattr(text, ssm_field, None) is not None:
        ssm = _ssm_element(getattr(text, ssm_field), ssm_field, name=name)
        source = f"{ssm_field} (Qwen3_5ForConditionalGenerationConfig)"
    return StateConfig(mamba_type="gdn", slots=tuple(slots), num_hidden_layers=n, state_args=args,
                       ssm_dtype=ssm, ssm_dtype_source=source,
                       **_attn_fields(text, name=name, head_dim=_head_dim_or_split(text, name=name)))


def _qwen3_next(raw, top, text, *, name):
    return _gated_delta_net(raw, top, text, name=name, prefix="", ssm_field=None)


def _qwen3_5(raw, top, text, *, name):
    archs = raw.get("architectures") or []
    wrapper = bool(archs) and str(archs[0]).endswith("ForConditionalGeneration")
    return _gated_delta_net(raw, top, text, name=name, prefix="language_model." if wrapper else "",
                            ssm_field="mamba_ssm_dtype")


def _kimi_linear(raw, top, text, *, name):
    n = _int(text, "num_hidden_layers", name=name)
    lac = getattr(text, "linear_attn_config", None)
    require(isinstance(lac, dict), f"{name}: linear_attn_config={short_repr(lac)}: must be an object")
    kda = lac.get("kda_layers")
    require(isinstance(kda, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in kda),
            f"{name}: linear_attn_config.kda_layers={short_repr(kda)}: must be a list of 1-based layer numbers")
    require(isinstance(lac.get("full_attn_layers"), list),
            f"{name}: linear_attn_config.full_attn_layers={short_repr(lac.get('full_attn_layers'))}: must be a list")
    kda_set = set(kda)
    slots = tuple(Slot(STATE if (i + 1) in kda_set else MLA, f"model.layers.{i}.self_attn", i) for i in range(n))
    args = []
    for key, as_ in (("num_heads", "num_heads"), ("head_dim", "head_dim"), ("short_conv_kernel_size", "conv_kernel")):
        v = lac.get(key)
        require(isinstance(v, int) and not isinstance(v, bool) and v > 0,
                f"{name}: linear_attn_config.{key}={short_repr(v)}: must be a positive integer")
        args.append((as_, v))
    rank, rope = mla_dims(raw, text, name=name)
    return StateConfig(mamba_type="kda", slots=slots, num_hidden_layers=n, state_args=tuple(args),
                       num_attention_heads=_int(text, "num_attention_heads", name=name), kv_lora_rank=rank,
                       qk_rope_head_dim=rope, ssm_dtype="fp32",
                       ssm_dtype_source="KDA recurrent state is float32 (kda_state_dtype)")


READERS = {
    "jamba": _jamba, "nemotron_h": _nemotron_h, "falcon_h1": _falcon_h1, "granitemoehybrid": _granite_h,
    "zamba2": _zamba2, "lfm2": _lfm2, "qwen3_next": _qwen3_next, "qwen3_5": _qwen3_5, "qwen3_5_moe": _qwen3_5,
    "qwen3_5_text": _qwen3_5, "qwen3_5_moe_text": _qwen3_5, "kimi_linear": _kimi_linear,
}
# architecture -> the reader's model_type, for configs whose model_type kvviz maps by architecture
ARCH_READER = {
    "JambaForCausalLM": "jamba", "NemotronHForCausalLM": "nemotron_h", "FalconH1ForCausalLM": "falcon_h1",
    "GraniteMoeHybridForCausalLM": "granitemoehybrid", "Zamba2ForCausalLM": "zamba2", "Lfm2ForCausalLM": "lfm2",
    "Qwen3NextForCausalLM": "qwen3_next", "Qwen3_5ForCausalLM": "qwen3_5", "Qwen3_5MoeForCausalLM": "qwen3_5",
    "Qwen3_5ForConditionalGeneration": "qwen3_5", "Qwen3_5MoeForConditionalGeneration": "qwen3_5",
    "KimiLinearForCausalLM": "kimi_linear",
}
TITLES = {"mamba1": "Mamba-1", "mamba2": "Mamba-2", "short_conv": "short conv", "gdn": "gated delta net",
          "kda": "Kimi delta attention"}


class StateFamily(Family):
    """State-space / linear-attention hybrids: layers that register a recurrent state (vLLM 0.33 MambaSpec) beside
    attention or MLA layers."""
    key = "state"
    title = "state-space / linear-attention hybrid"
    knobs = ("kv_dtype", "block_size", "mamba_ssm_dtype", "prefix_caching", "max_model_len", "max_num_batched_tokens",
             "async_scheduling", "tensor_parallel_size")

    def read(self, raw: dict, *, name: str) -> Model:
        top, text = read_config(raw, name=name)
        archs = raw.get("architectures") or []
        model_type = raw.get("model_type")
        key = next((ARCH_READER[a] for a in archs if a in ARCH_READER), None) or \
            (model_type if model_type in READERS else None)
        require(key is not None, f"{name}: {short_repr((archs or [model_type])[0])}: no state-family reader")
        config = READERS[key](raw, top, text, name=name)
        require(any(s.kind == STATE for s in config.slots), f"{name}: no layer registers a recurrent state")
        length, source = derive_max_model_len(text)
        if key == "kimi_linear" and getattr(text, "max_position_embeddings", None) is None and \
                not any(isinstance(getattr(text, k, None), int) for k in ("model_max_length", "max_seq_len")):
            length, source = KIMI_LINEAR_MAX_POSITION_EMBEDDINGS, "max_position_embeddings (KimiLinearConfig default)"
        return Model(name=name, family=self.key, architecture=str((archs or [model_type])[0]),
                     model_type=str(model_type), dtype=resolve_dtype(top, text, raw, name=name),
                     max_model_len=length, config=config, max_model_len_source=source)

    def knobs_for(self, model: Model) -> tuple[str, ...]:
        # LFM2's state has no SSM part; Kimi-Linear's KDA layers keep float32 whatever is asked
        # (kimi_gdn_linear_attn get_state_dtype), so the knob would not change its pages.
        no_ssm = model.config.mamba_type in ("short_conv", "kda")
        return tuple(k for k in self.knobs if k != "mamba_ssm_dtype" or not no_ssm)

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
            ssm = _ELEMENT[options.mamba_ssm_dtype] if options.mamba_ssm_dtype else (c.ssm_dtype or model.dtype)
        return tuple(StatePart(part, shape, ssm if i == len(shapes) - 1 and len(shapes) > 1 else conv)
                     for i, (part, shape) in enumerate(shapes))

    def caches(self, model: Model, options: Options) -> tuple:
        c: StateConfig = model.config
        tp = options.tensor_parallel_size or 1
        check_tp_heads(c.num_attention_heads, tp, model=model.name)
        parts = self.state_parts(model, options)
        kv_dtype = options.kv_dtype or model.dtype
        kv = None
        if c.count(ATTN):
            kv = c.num_kv_heads // tp if c.kv_heads_replicated else kv_heads_per_rank(c.num_kv_heads, tp, model=model.name)
        out = []
        for s in c.slots:
            if s.kind == STATE:
                out.append(MambaCache(name=s.name, layer=s.layer, mamba_type=c.mamba_type, parts=parts))
            elif s.kind == MLA:
                out.append(MLACache(name=s.name, layer=s.layer, kv_lora_rank=c.kv_lora_rank,
                                    qk_rope_head_dim=c.qk_rope_head_dim, kv_dtype=kv_dtype))
            else:
                out.append(AttentionCache(name=s.name, layer=s.layer, num_kv_heads=kv, head_size=c.head_dim,
                                          head_size_v=c.head_dim, kv_dtype=kv_dtype))
        return tuple(out)

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
        return (f"{model.name} ({model.architecture}): {c.num_hidden_layers} layers, caches {', '.join(mix)}; "
                f"state {state} = {sum(p.num_bytes for p in parts):,} B; {model.dtype}; "
                f"max_model_len {model.max_model_len:,}")


STATE_FAMILY = register(StateFamily(), tuple(ARCH_READER) + (
    "jamba", "nemotron_h", "falcon_h1", "granitemoehybrid", "zamba2", "lfm2", "qwen3_next", "qwen3_5", "qwen3_5_moe",
    "kimi_linear"))


def _with_full_layers(model: Model, full: int) -> Model:
    """The model with `full` attention layers spread evenly (the explorer's layer mix), for
    hybrids whose every layer registers one attention or one state cache (Qwen3-Next, Qwen3.5,
    LFM2, Jamba, ...): each layer keeps its own names, only its kind moves."""
    from .decoder import full_layer_positions

    c: StateConfig = model.config
    n = c.num_hidden_layers
    require(isinstance(full, int) and not isinstance(full, bool) and 0 <= full <= n,
            f"full_layers={full!r}: must be an integer from 0 to {n} (the model's layers)")
    by_layer: dict[int, list[Slot]] = {}
    for slot in c.slots:
        by_layer.setdefault(slot.layer, []).append(slot)
    require(len(by_layer) == n and all(len(v) == 1 for v in by_layer.values()),
            f"full_layers: {model.name}'s layers do not each register one cache; its mix is fixed")
    names = {}
    for slot in c.slots:  # a name template per kind, from the layer's own index
        names.setdefault(slot.kind, (slot.name, slot.layer))
    require(len(names) >= 2 or full in (0, n) and len(names) == 1,
            f"full_layers: {model.name} has one cache kind only")
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
    """`fn(model, ...)` as a StateFamily method, under fn's name without the underscore and with its docstring."""
    method = lambda self, *args, **kwargs: fn(*args, **kwargs)  # noqa: E731
    method.__doc__, method.__name__ = fn.__doc__, fn.__name__.lstrip("_")
    return method


def _full_layer_count(model: Model) -> int:
    """How many layers register full attention (the explorer's full_layers knob)."""
    return model.config.count(ATTN)


def _kind_counts(model: Model) -> dict[str, int]:
    """Layers of each kind: 'full', the state's kind ('linear' for the gated delta net) and 'mla'."""
    c: StateConfig = model.config
    state = "linear" if c.mamba_type == "gdn" else c.mamba_type
    return {"full": c.count(ATTN), state: c.count(STATE)} | ({"mla": c.count(MLA)} if c.count(MLA) else {})


def _resolved_ssm_dtype(model: Model) -> str:
    """The SSM state's dtype when the knob is 'auto': the config's own, else the model dtype
    (KDA: float32), as vLLM's name."""
    c: StateConfig = model.config
    element = "fp32" if c.mamba_type == "kda" else (c.ssm_dtype or model.dtype)
    return {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}[element]


for _fn in (_with_full_layers, _mixes_full_layers, _full_layer_count, _kind_counts, _resolved_ssm_dtype):
    setattr(StateFamily, _fn.__name__.lstrip("_"), _as_method(_fn))
