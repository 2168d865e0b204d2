"""Hugging Face configs of hybrid models: which KV cache each layer registers.

`load_hf_config(path)` reads a `config.json` (or a folder holding one) through transformers'
configuration classes, which fill in each architecture's defaults and derived fields (such as
`layer_types`), and keeps only what decides the KV cache (docs/hybrid.md#hybrid-caches).
Multimodal configs contribute their text config. Nothing is downloaded: the JSON is handed to
the config class directly (`from_dict`, the last step of `AutoConfig.from_pretrained`).

transformers imports torch (seconds), so it is imported inside `_transformers_config`, only when
a config is parsed; `kvviz models` and everything else stay light.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

from .inputs import MAX_DIM, MAX_LAYERS, MAX_SLIDING_WINDOW, bounded_int, printable, read_json, short_repr
from .errors import KvvizError, require
from .quiet import quiet_library

# The layer kinds kvviz plans, named as transformers' `layer_types` names them.
FULL = "full_attention"
SLIDING = "sliding_attention"
CHUNKED = "chunked_attention"
LINEAR = "linear_attention"
LAYER_KINDS = (FULL, SLIDING, CHUNKED, LINEAR)

# Where a model's per-layer kind comes from when vLLM does not read `layer_types`.
#   gpt_oss:     vLLM's gpt_oss.py: `sliding_window if self.layer_idx % 2 == 0 else None`.
#   llama4_text: vLLM's llama4.py: `use_chunked_local_attn = not self.nope and
#                config.attention_chunk_size`, with `self.nope = config.no_rope_layers[i] == 0`;
#                transformers fills `no_rope_layers` (a NoPE layer every `no_rope_layer_interval`,
#                default 4, layers) when the config leaves it empty.
# Every other model type: the text config's `layer_types` (vLLM's gemma3.py and qwen3_next.py
# read `config.layer_types[layer_idx]`).
KIND_SOURCES = {
    "gpt_oss": "layer index % 2 == 0 is sliding (vLLM gpt_oss.py)",
    "llama4_text": "no_rope_layers: RoPE layers are chunked local, NoPE layers full (vLLM llama4.py)",
}

# The model dtypes kvviz sizes (2, 2 and 4 bytes an element).
MODEL_DTYPES = ("bfloat16", "float16", "float32")
_DTYPE_NAMES = {"torch.bfloat16": "bfloat16", "torch.float16": "float16", "torch.float32": "float32"}


@dataclasses.dataclass(frozen=True, kw_only=True)
class HybridConfig:
    """The cache-relevant part of a hybrid model's HF config (text config for multimodal ones)."""

    name: str
    model_type: str  # the text config's model_type, e.g. gemma3_text
    architecture: str  # architectures[0] of the top-level config
    num_hidden_layers: int
    layer_types: tuple[str, ...]  # one kvviz kind per layer (LAYER_KINDS)
    num_key_value_heads: int
    head_dim: int
    sliding_window: int | None = None
    attention_chunk_size: int | None = None
    linear_num_key_heads: int | None = None
    linear_num_value_heads: int | None = None
    linear_key_head_dim: int | None = None
    linear_value_head_dim: int | None = None
    linear_conv_kernel_dim: int | None = None
    torch_dtype: str = "bfloat16"
    mamba_ssm_dtype: str | None = None  # the config's own choice, if it makes one
    kind_source: str = "layer_types"  # which field decided layer_types

    def __post_init__(self) -> None:
        # every count that sizes work is bounded, the bound in the message (kvviz.inputs)
        for field, high in (("num_hidden_layers", MAX_LAYERS), ("num_key_value_heads", MAX_DIM), ("head_dim", MAX_DIM)):
            bounded_int(getattr(self, field), field=f"{self.name}: {field}", low=1, high=high)
        for field, high in (("sliding_window", MAX_SLIDING_WINDOW), ("attention_chunk_size", MAX_SLIDING_WINDOW),
                            ("linear_num_key_heads", MAX_DIM), ("linear_num_value_heads", MAX_DIM),
                            ("linear_key_head_dim", MAX_DIM), ("linear_value_head_dim", MAX_DIM),
                            ("linear_conv_kernel_dim", MAX_DIM)):
            if getattr(self, field) is not None:
                bounded_int(getattr(self, field), field=f"{self.name}: {field}", low=1, high=high)
        # float16 is sized like bfloat16 (2 B an element); kvviz writes both as bf16 bytes
        require(self.torch_dtype in MODEL_DTYPES,
                f"{self.name}: torch_dtype={short_repr(self.torch_dtype)}: kvviz sizes {', '.join(MODEL_DTYPES)}")
        require(self.mamba_ssm_dtype is None or isinstance(self.mamba_ssm_dtype, str),
                f"{self.name}: mamba_ssm_dtype={short_repr(self.mamba_ssm_dtype)}: must be a dtype name")
        require(len(self.layer_types) == self.num_hidden_layers,
                f"{self.name}: layer_types has {len(self.layer_types)} entries, "
                f"num_hidden_layers={self.num_hidden_layers}")
        for i, kind in enumerate(self.layer_types):
            require(kind in LAYER_KINDS,
                    f"{self.name}: layer_types[{i}]={kind!r}: unknown layer kind; kvviz knows {', '.join(LAYER_KINDS)}")
        needs = {SLIDING: ("sliding_window",), CHUNKED: ("attention_chunk_size",),
                 LINEAR: ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                          "linear_value_head_dim", "linear_conv_kernel_dim")}
        for kind, fields in needs.items():
            if kind not in self.layer_types:
                continue
            for field in fields:
                value = getattr(self, field)
                require(isinstance(value, int) and not isinstance(value, bool) and value > 0,
                        f"{self.name}: {field}={value!r}: {kind} layers need a positive integer")
        require(self.linear_conv_kernel_dim is None or self.linear_conv_kernel_dim >= 2 or LINEAR not in self.layer_types,
                f"{self.name}: linear_conv_kernel_dim={self.linear_conv_kernel_dim}: must be at least 2")

    # ---- derived -----------------------------------------------------------------------------
    @property
    def kind_counts(self) -> dict[str, int]:
        """Layers of each kind, kinds in first-seen order."""
        return dict(Counter(self.layer_types))

    @property
    def has_linear_attention(self) -> bool:
        return LINEAR in self.layer_types

    @property
    def conv_dim(self) -> int:
        """Channels of the gated delta net's causal conv: q and k heads, then v heads (vLLM's
        MambaStateShapeCalculator.gated_delta_net_state_shape)."""
        return (2 * self.linear_num_key_heads * self.linear_key_head_dim
                + self.linear_num_value_heads * self.linear_value_head_dim)

    def layers_of(self, kind: str) -> tuple[int, ...]:
        return tuple(i for i, k in enumerate(self.layer_types) if k == kind)

    def with_overrides(self, **changes) -> "HybridConfig":
        """A copy with some fields replaced (None values are ignored)."""
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})

    def describe(self) -> str:
        """One line: layers by kind and the attention geometry."""
        mix = ", ".join(f"{n} {k.replace('_attention', '')}" for k, n in self.kind_counts.items())
        text = f"{self.num_hidden_layers} layers ({mix}); {self.num_key_value_heads} KV heads x head_dim {self.head_dim}"
        if SLIDING in self.layer_types:
            text += f", sliding_window {self.sliding_window}"
        if CHUNKED in self.layer_types:
            text += f", attention_chunk_size {self.attention_chunk_size}"
        if self.has_linear_attention:
            text += (f"; gated delta net {self.linear_num_key_heads}/{self.linear_num_value_heads} k/v heads "
                     f"x {self.linear_key_head_dim}/{self.linear_value_head_dim}, conv kernel {self.linear_conv_kernel_dim}")
        return text


# ---- parsing -------------------------------------------------------------------------------------
def _transformers_config(raw: dict, *, name: str):
    """The transformers config object for a parsed config.json (no download)."""
    model_type = raw.get("model_type")
    require(isinstance(model_type, str), f"{name}: config is missing field 'model_type'")
    # Heavy import (transformers pulls in torch); only reached when an HF config is parsed.
    try:
        from transformers import CONFIG_MAPPING
    except ImportError:  # e.g. a GPU box with torch alone: DeepSeek V4 and --groups still work
        raise KvvizError(f"{name}: reading a hybrid model's config needs transformers, which is not "
                         f"importable here (pip install transformers)") from None

    if model_type not in CONFIG_MAPPING:
        raise KvvizError(f"{name}: model_type {model_type!r}: unknown to transformers; kvviz cannot read this architecture")
    for where, part in (("", raw), ("text_config.", raw.get("text_config"))):
        kinds = part.get("layer_types") if isinstance(part, dict) else None
        if isinstance(kinds, list):  # name an unknown kind before transformers' own multi-line error
            for i, kind in enumerate(kinds):
                if kind not in LAYER_KINDS:
                    raise KvvizError(f"{name}: {where}layer_types[{i}]={kind!r}: unknown layer kind; "
                                     f"kvviz knows {', '.join(LAYER_KINDS)}")
    try:
        return CONFIG_MAPPING[model_type].from_dict(raw)
    except Exception as e:  # noqa: BLE001 - any rejection by transformers becomes one line
        cause = e.__cause__ or e
        lines = [line.strip() for line in str(cause).splitlines() if line.strip()]
        raise KvvizError(f"{name}: transformers rejects the {model_type} config: "
                         f"{lines[0] if lines else type(cause).__name__}") from None


def _int_or_none(text, field: str, *, name: str) -> int | None:
    value = getattr(text, field, None)
    if value is None:
        return None
    require(isinstance(value, int) and not isinstance(value, bool), f"{name}: {field}={value!r}: must be an integer")
    return value


def _layer_kinds(text, *, name: str) -> tuple[tuple[str, ...], str]:
    """Per-layer kinds, by the rule vLLM's model file applies (KIND_SOURCES)."""
    model_type = text.model_type
    n = text.num_hidden_layers
    if model_type == "gpt_oss":
        return tuple(SLIDING if i % 2 == 0 else FULL for i in range(n)), KIND_SOURCES[model_type]
    if model_type == "llama4_text":
        nope = getattr(text, "no_rope_layers", None)
        require(isinstance(nope, (list, tuple)) and len(nope) == n,
                f"{name}: no_rope_layers must list one entry per layer ({n})")
        chunked = bool(getattr(text, "attention_chunk_size", None))
        return tuple(CHUNKED if (flag != 0 and chunked) else FULL for flag in nope), KIND_SOURCES[model_type]
    layer_types = getattr(text, "layer_types", None)
    if layer_types is None:
        raise KvvizError(f"model_type {model_type!r}: unknown architecture; its config has no layer_types and kvviz "
                         f"knows no rule for its layers (it plans gpt_oss, llama4 and any config whose layer_types "
                         f"name {', '.join(LAYER_KINDS)}, e.g. gemma3_text, qwen3_next)")
    require(isinstance(layer_types, (list, tuple)), f"{name}: layer_types must be a list of strings")
    for i, kind in enumerate(layer_types):
        if kind not in LAYER_KINDS:
            raise KvvizError(f"{name}: layer_types[{i}]={kind!r}: unknown layer kind; kvviz knows {', '.join(LAYER_KINDS)}")
    return tuple(layer_types), "layer_types"


def hybrid_config_from_dict(raw: dict, *, name: str) -> HybridConfig:
    """A HybridConfig from a parsed config.json (multimodal: its text config)."""
    require(isinstance(raw, dict), f"{name}: config must be a JSON object")
    if raw.get("model_type") == "deepseek_v4":
        raise KvvizError(f"{name}: model_type 'deepseek_v4' is planned by kvviz.config.load_config (--config), "
                         f"not as a hybrid model")
    for where, part in (("", raw), ("text_config.", raw.get("text_config"))):
        if isinstance(part, dict) and "num_hidden_layers" in part:  # bounded before transformers builds per-layer lists
            bounded_int(part["num_hidden_layers"], field=f"{name}: {where}num_hidden_layers", low=1, high=MAX_LAYERS)
    architectures = raw.get("architectures")
    require(architectures is None or (isinstance(architectures, list) and architectures
                                      and all(isinstance(a, str) and a for a in architectures)),
            f"{name}: architectures={short_repr(architectures)}: must be a list of class names")
    with quiet_library():  # transformers' warnings: kvviz says what is wrong, in one line
        top = _transformers_config(raw, name=name)
    text = top.get_text_config()
    for field in ("num_hidden_layers",):
        require(getattr(text, field, None) is not None, f"{name}: config is missing field {field!r}")
    kinds, source = _layer_kinds(text, name=name)
    if SLIDING in kinds and getattr(text, "sliding_window", None) is None and text.model_type in ("gpt_oss",
                                                                                                 "gemma3_text"):
        # vLLM's gpt_oss / gemma3 give a layer sliding_window=config.sliding_window: with none set,
        # the "sliding" layers attend to everything, as full-attention layers
        kinds = tuple(FULL if k == SLIDING else k for k in kinds)
        source += " (no sliding_window: sliding layers are full attention)"
    heads = getattr(text, "num_key_value_heads", None)
    if heads is None:  # vLLM: a model without GQA has as many KV heads as query heads
        heads = getattr(text, "num_attention_heads", None)
    require(heads is not None, f"{name}: config is missing field 'num_key_value_heads'")
    head_dim = getattr(text, "head_dim", None)
    if head_dim is None:  # vLLM's ModelConfig.get_head_size falls back to hidden_size // heads
        hidden, q_heads = getattr(text, "hidden_size", None), getattr(text, "num_attention_heads", None)
        require(type(hidden) is int and type(q_heads) is int and q_heads > 0,
                f"{name}: config is missing field 'head_dim'")
        head_dim = hidden // q_heads
    dtype = getattr(text, "dtype", None) or getattr(top, "dtype", None) or raw.get("torch_dtype") or "bfloat16"
    dtype = _DTYPE_NAMES.get(str(dtype), str(dtype))
    architectures = architectures or [text.model_type]
    return HybridConfig(
        name=name,
        model_type=text.model_type,
        architecture=str(architectures[0]),
        num_hidden_layers=text.num_hidden_layers,
        layer_types=kinds,
        num_key_value_heads=heads,
        head_dim=head_dim,
        sliding_window=_int_or_none(text, "sliding_window", name=name) if SLIDING in kinds else None,
        attention_chunk_size=_int_or_none(text, "attention_chunk_size", name=name) if CHUNKED in kinds else None,
        linear_num_key_heads=_int_or_none(text, "linear_num_key_heads", name=name),
        linear_num_value_heads=_int_or_none(text, "linear_num_value_heads", name=name),
        linear_key_head_dim=_int_or_none(text, "linear_key_head_dim", name=name),
        linear_value_head_dim=_int_or_none(text, "linear_value_head_dim", name=name),
        linear_conv_kernel_dim=_int_or_none(text, "linear_conv_kernel_dim", name=name),
        torch_dtype=dtype,
        mamba_ssm_dtype=getattr(text, "mamba_ssm_dtype", None) or raw.get("mamba_ssm_dtype"),
        kind_source=source,
    )


def config_json_path(path: str | Path, *, what: str = "--hf-config") -> Path:
    """The config.json a path names: the file itself, or `config.json` inside a folder."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
        require(p.is_file(), f"{what} {str(path)!r}: folder holds no config.json")
        return p
    require(p.is_file(), f"{what} {str(path)!r}: no such file or folder")
    return p


def config_name(p: Path) -> str:
    """A config's name: its folder's for a `config.json` (the model's checkout), else the file stem;
    bytes that are not UTF-8 shown as \\x escapes (it is printed and written into reports)."""
    return printable(p.parent.name if p.name == "config.json" and p.parent.name else p.stem)


def load_hf_config(path: str | Path) -> HybridConfig:
    """Read a hybrid model's config.json (or a folder holding one)."""
    p = config_json_path(path)
    return hybrid_config_from_dict(read_json(p, what="--hf-config"), name=config_name(p))
