"""The parsed config of a state-space / linear-attention hybrid (`StateConfig`, one `Slot` per
cache a layer registers) and the field readers every architecture's reader shares."""

from __future__ import annotations

import dataclasses
import types

from kvviz.base.errors import require
from kvviz.base.inputs import MAX_DIM, bounded_int, short_repr
from kvviz.families.hf_bounds import field

ATTN, MLA, STATE = "attention", "mla", "state"


# vLLM's dtype names (STR_DTYPE_TO_TORCH_DTYPE) -> kvviz's element names.
ELEMENT = {
    "bfloat16": "bf16",
    "float16": "fp16",
    "float32": "fp32",
    "bf16": "bf16",
    "fp16": "fp16",
    "fp32": "fp32",
    "torch.bfloat16": "bf16",
    "torch.float16": "fp16",
    "torch.float32": "fp32",
}


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

    mamba_type: str  # 'mamba1', 'mamba2', 'short_conv', 'gdn', 'kda', 'linear'
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
    state_backend: str = ""  # the state layers' kvviz.vllm.pages.STATE_BACKENDS key when not the mamba_type's
    attention_free: bool = False  # vLLM's class is IsAttentionFree (Mamba, Mamba2): prefix caching off by default

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


def with_prefix(config: StateConfig, prefix: str) -> StateConfig:
    """`config` with every cache name under `prefix` (a wrapper's `language_model.`)."""
    return dataclasses.replace(config, slots=tuple(dataclasses.replace(s, name=prefix + s.name) for s in config.slots))


def int_of(text, key: str, *, name: str, default=None, positive: bool = True) -> int:
    """The integer config field `key` (its default where given; positive unless `positive` is False),
    one KvvizError naming `name` and the field otherwise."""
    value = field(text, key, model=name, required=default is None, default=default)
    require(not positive or value > 0, f"{name}: {key}={value}: must be positive")
    return value


def list_of(text, key: str, n: int, *, name: str) -> list:
    """The per-layer config list `key`: present, with one entry per layer (`n`), or one KvvizError."""
    value = getattr(text, key, None)
    require(value is not None, f"{name}: config is missing field {key!r}")
    require(
        isinstance(value, (list, tuple, str)) and len(value) == n,
        f"{name}: {key}={short_repr(value)}: must have one entry per layer ({n})",
    )
    return list(value)


def ssm_element(value, key: str, *, name: str) -> str:
    """The element name of a state dtype given as `key` (bfloat16, float16, float32), or one KvvizError."""
    element = ELEMENT.get(str(value))
    require(element is not None, f"{name}: {key}={short_repr(value)}: kvviz knows bfloat16, float16, float32")
    return element


def attn_fields(text, *, name: str, head_dim: int | None = None) -> dict:
    """The attention layers' heads, KV heads and head_dim (hidden_size // heads unless given), as
    StateConfig's fields."""
    heads = int_of(text, "num_attention_heads", name=name)
    kv = int_of(text, "num_key_value_heads", name=name, default=heads)
    if head_dim is None:
        hidden = int_of(text, "hidden_size", name=name)
        head_dim = bounded_int(
            hidden // heads,
            field=f"{name}: head_dim (hidden_size {hidden:,} // num_attention_heads {heads:,})",
            low=1,
            high=MAX_DIM,
        )
    return dict(num_attention_heads=heads, num_kv_heads=kv, head_dim=head_dim)


def head_dim_or_split(text, *, name: str) -> int:
    """The config's head_dim when it gives one (a positive integer), else hidden_size // num_attention_heads."""
    hd = getattr(text, "head_dim", None)
    if hd:
        require(
            isinstance(hd, int) and not isinstance(hd, bool) and hd > 0,
            f"{name}: head_dim={short_repr(hd)}: must be a positive integer",
        )
        return hd
    hidden, heads = int_of(text, "hidden_size", name=name), int_of(text, "num_attention_heads", name=name)
    return bounded_int(
        hidden // heads,
        field=f"{name}: head_dim (hidden_size {hidden:,} // num_attention_heads {heads:,})",
        low=1,
        high=MAX_DIM,
    )


def one_cache_a_layer(
    text,
    field: str,
    n: int,
    *,
    name: str,
    model: str,
    state: tuple[str, str],
    attention: tuple[str, str],
    prefix: str = "",
) -> tuple[Slot, ...]:
    """The slots of a hybrid whose `field` names each layer's kind: (kind value, vLLM name suffix)
    for its state layers and its attention layers, each named `{prefix}model.layers.{i}.{suffix}`, every
    other value refused naming the field."""
    slots = []
    for i, k in enumerate(list_of(text, field, n, name=name)):
        require(
            k in (state[0], attention[0]),
            f"{name}: {field}[{i}]={short_repr(k)}: {model} layers are {state[0]!r} or {attention[0]!r}",
        )
        slots.append(
            Slot(STATE, f"{prefix}model.layers.{i}.{state[1]}", i)
            if k == state[0]
            else Slot(ATTN, f"{prefix}model.layers.{i}.{attention[1]}", i)
        )
    return tuple(slots)


def kda_beside_mla(text, slots, n: int, args, rank: int, rope: int, *, name: str) -> StateConfig:
    """A hybrid of Kimi delta attention states beside MLA layers (Kimi-Linear, Bailing-V3): the KDA recurrent
    state is float32 (kda_state_dtype), the MLA layers one latent of kv_lora_rank + qk_rope_head_dim."""
    return StateConfig(
        mamba_type="kda",
        slots=tuple(slots),
        num_hidden_layers=n,
        state_args=tuple(args),
        num_attention_heads=int_of(text, "num_attention_heads", name=name),
        kv_lora_rank=rank,
        qk_rope_head_dim=rope,
        ssm_dtype="fp32",
        ssm_dtype_source="KDA recurrent state is float32 (kda_state_dtype)",
    )


TITLES = {
    "mamba1": "Mamba-1",
    "mamba2": "Mamba-2",
    "short_conv": "short conv",
    "gdn": "gated delta net",
    "kda": "Kimi delta attention",
    "linear": "linear attention",
}


def custom_code_config(raw: dict, *, name: str):
    """(top, text) of a custom-code config (no transformers class in vLLM 0.33's pin, config.json's
    auto_map): the JSON's keys as the repository's own class holds them, read by vLLM with
    trust_remote_code (transformers' later BailingHybridConfig maps other fields and is not what vLLM reads);
    None for a VL architecture (its config class is read as the record's config says)."""
    archs = raw.get("architectures") or []
    if archs and "VL" in str(archs[0]):
        return None
    top = types.SimpleNamespace(**{k: v for k, v in raw.items() if isinstance(k, str) and k.isidentifier()})
    return top, top
