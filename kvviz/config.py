"""Model configs: the HF `config.json` fields that decide which KV caches a layer registers.

Presets ship inside the package as `kvviz/presets/*.json` (package data, so they work from a
wheel as well as from a checkout; docs/overlay.md#models), each the real config.json fields that
matter for the KV cache. DeepSeek V4 presets load as `ModelConfig`; the others are hybrid models
read through transformers (`kvviz.hf`) and load as `HybridConfig`. Users' own configs live
anywhere (the repository's data/ folder is the documented place): `load_config(path)` for the
DeepSeek V4 shape, `kvviz.hf.load_hf_config(path)` for hybrid models, `load_any(path)` for either.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from importlib.resources import files
from pathlib import Path

from .errors import KvvizError, require
from .inputs import MAX_DIM, MAX_LAYERS
from .hf import HybridConfig, config_json_path, config_name, hybrid_config_from_dict
from .inputs import read_json

MODELS_DIR = files("kvviz") / "presets"  # a Traversable: `/ name`, `.read_text()`, `.iterdir()`
DEEPSEEK_V4_MODEL_TYPE = "deepseek_v4"

# Fields read from config.json; every one is required.
REQUIRED_FIELDS = (
    "num_hidden_layers",
    "num_nextn_predict_layers",
    "head_dim",
    "qk_rope_head_dim",
    "sliding_window",
    "index_head_dim",
    "compress_ratios",
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """The cache-relevant part of a DeepSeek-V4-style HF config."""

    name: str
    num_hidden_layers: int
    num_nextn_predict_layers: int
    head_dim: int  # one shared K=V latent; its last qk_rope_head_dim dims are RoPE
    qk_rope_head_dim: int
    sliding_window: int
    index_head_dim: int
    compress_ratios: tuple[int, ...]  # one per layer, then the MTP slot(s)
    index_n_heads: int | None = None
    index_topk: int | None = None

    def __post_init__(self) -> None:
        require(isinstance(self.name, str), f"name={self.name!r}: must be a string")
        for field in ("num_hidden_layers", "head_dim", "qk_rope_head_dim", "sliding_window", "index_head_dim"):
            value = getattr(self, field)
            # type() is int: JSON's true/false are bools, and bool is a subclass of int.
            require(type(value) is int and value > 0, f"{field}={value!r}: must be a positive integer")
        require(
            type(self.num_nextn_predict_layers) is int and self.num_nextn_predict_layers >= 0,
            f"num_nextn_predict_layers={self.num_nextn_predict_layers!r}: must be a non-negative integer",
        )
        # Bounds on what sizes work (kvviz.inputs): a billion MTP layers would never finish.
        require(self.num_layers_with_mtp <= MAX_LAYERS,
                f"num_hidden_layers + num_nextn_predict_layers = {self.num_layers_with_mtp:,}: at most {MAX_LAYERS:,}")
        for field in ("head_dim", "qk_rope_head_dim", "index_head_dim"):
            require(getattr(self, field) <= MAX_DIM, f"{field}={getattr(self, field):,}: at most {MAX_DIM:,}")
        require(
            self.qk_rope_head_dim < self.head_dim,
            f"qk_rope_head_dim={self.qk_rope_head_dim}: must be smaller than head_dim={self.head_dim}",
        )
        require(
            len(self.compress_ratios) >= self.num_hidden_layers,
            f"compress_ratios: has {len(self.compress_ratios)} entries, needs at least num_hidden_layers={self.num_hidden_layers}",
        )
        for i, r in enumerate(self.compress_ratios):
            require(type(r) is int and r >= 0, f"compress_ratios[{i}]={r!r}: must be a non-negative integer")

    @property
    def num_layers_with_mtp(self) -> int:
        return self.num_hidden_layers + self.num_nextn_predict_layers

    @property
    def layer_mix(self) -> dict[str, int]:
        """How many c4, c128 and sliding-window-only layers (MTP slots not counted)."""
        ratios = [self.ratio(i) for i in range(self.num_hidden_layers)]
        return {"c4": ratios.count(4), "c128": ratios.count(128), "swa": sum(r in (0, 1) for r in ratios)}

    def ratio(self, layer: int) -> int:
        """Compression ratio of a layer; MTP layers (index >= num_hidden_layers) count as 1 (SWA only)."""
        if layer >= self.num_hidden_layers:
            return 1
        return self.compress_ratios[layer]

    def with_overrides(self, **changes) -> "ModelConfig":
        """A copy with some fields replaced (None values are ignored)."""
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})


def config_from_dict(raw: dict, *, name: str) -> ModelConfig:
    """Build a ModelConfig from a parsed config.json, naming any missing or malformed field."""
    require(isinstance(raw, dict), f"{name}: config must be a JSON object")
    for field in REQUIRED_FIELDS:
        require(field in raw, f"{name}: config is missing field {field!r}")
    ratios = raw["compress_ratios"]
    require(isinstance(ratios, list), f"{name}: compress_ratios must be a list of integers")
    return ModelConfig(
        name=raw.get("name", name),
        num_hidden_layers=raw["num_hidden_layers"],
        num_nextn_predict_layers=raw["num_nextn_predict_layers"],
        head_dim=raw["head_dim"],
        qk_rope_head_dim=raw["qk_rope_head_dim"],
        sliding_window=raw["sliding_window"],
        index_head_dim=raw["index_head_dim"],
        compress_ratios=tuple(ratios),
        index_n_heads=raw.get("index_n_heads"),
        index_topk=raw.get("index_topk"),
    )


def load_config(path: str | Path) -> ModelConfig:
    """Load any config.json of the DeepSeek V4 shape."""
    return config_from_dict(read_json(path, what="--config"), name=Path(path).stem)


def model_names() -> list[str]:
    """The presets kvviz ships (file stems in kvviz/presets), DeepSeek V4 and hybrid alike."""
    return sorted(p.name[: -len(".json")] for p in MODELS_DIR.iterdir() if p.name.endswith(".json"))


def _preset_raw(name: str) -> dict:
    names = model_names()
    if name not in names:
        raise KvvizError(f"--model {name!r}: unknown model; known: {', '.join(names)}")
    try:
        return json.loads((MODELS_DIR / f"{name}.json").read_text())
    except json.JSONDecodeError as e:  # a broken package, not bad user input, but still one line
        raise KvvizError(f"preset {name!r}: malformed JSON at line {e.lineno}: {e.msg}") from None


def is_deepseek_v4(raw: dict) -> bool:
    """Whether a parsed config.json is of the DeepSeek V4 shape (planned by kvviz.specs)."""
    return raw.get("model_type") == DEEPSEEK_V4_MODEL_TYPE


def is_hybrid(config) -> bool:
    """Whether a loaded config is a hybrid model's (`kvviz.hf.HybridConfig`), not DeepSeek V4's."""
    return isinstance(config, HybridConfig)


def hybrid_model_names() -> list[str]:
    """The presets that load as HybridConfig (read from the raw JSON; transformers not imported)."""
    return [n for n in model_names() if not is_deepseek_v4(_preset_raw(n))]


@functools.lru_cache(maxsize=None)
def load_model(name: str):
    """Load a shipped preset by name: `ModelConfig` for DeepSeek V4 ('deepseek-v4-pro'),
    `kvviz.hf.HybridConfig` for the hybrid models ('gpt-oss-120b', ...). Configs are frozen, so
    each preset is parsed once per process (a hybrid one goes through transformers)."""
    raw = _preset_raw(name)
    if is_deepseek_v4(raw):
        return config_from_dict(raw, name=name)
    return hybrid_config_from_dict(raw, name=name)


def load_any(path: str | Path):
    """A config.json (or a folder holding one) of either shape: DeepSeek V4 -> ModelConfig,
    anything else -> HybridConfig through transformers."""
    p = config_json_path(path, what="--hf-config")
    raw = read_json(p, what="--hf-config")
    if isinstance(raw, dict) and is_deepseek_v4(raw):
        return config_from_dict(raw, name=config_name(p))
    return hybrid_config_from_dict(raw, name=config_name(p))


def preset_summary(name: str) -> str:
    """One line about a preset for `kvviz models`, from the raw JSON only (no transformers)."""
    raw = _preset_raw(name)
    if is_deepseek_v4(raw):
        c = config_from_dict(raw, name=name)
        mix = c.layer_mix
        return (f"{name}: {c.num_hidden_layers} layers (+{c.num_nextn_predict_layers} MTP): "
                f"{mix['c4']} c4, {mix['c128']} c128, {mix['swa']} SWA-only; "
                f"head_dim {c.head_dim}, index_head_dim {c.index_head_dim}")
    text = raw.get("text_config") or raw
    arch = (raw.get("architectures") or [raw.get("model_type", "?")])[0]
    parts = [f"{text.get('num_hidden_layers', '?')} layers",
             f"num_key_value_heads {text.get('num_key_value_heads', '?')}", f"head_dim {text.get('head_dim', '?')}"]
    for field in ("sliding_window", "attention_chunk_size", "full_attention_interval", "linear_num_value_heads"):
        if text.get(field) is not None:
            parts.append(f"{field} {text[field]}")
    return f"{name}: hybrid {arch}: " + ", ".join(parts)


def with_layer_mix(config: ModelConfig, *, c4: int, c128: int, swa: int) -> ModelConfig:
    """A config with a different group mix: `swa` sliding-window-only layers first, then `c4` and
    `c128` compressed layers interleaved as evenly as possible (the preset's own order is kept
    when the mix is unchanged). The MTP slot(s) stay as they are."""
    for field, n in (("c4", c4), ("c128", c128), ("swa", swa)):
        require(isinstance(n, int) and n >= 0, f"{field}={n!r}: must be a non-negative integer")
    require(c4 + c128 + swa > 0, "layer mix: needs at least one layer")
    if config.layer_mix == {"c4": c4, "c128": c128, "swa": swa}:
        return config
    mixed, placed4 = [], 0
    total = c4 + c128
    for k in range(total):
        # Bresenham: the (k+1)-th compressed layer is c4 when the c4 share falls behind.
        if placed4 * total < (k + 1) * c4 - (total - 1) // 2 or (total - k) == (c4 - placed4):
            mixed.append(4)
            placed4 += 1
        else:
            mixed.append(128)
    mtp = list(config.compress_ratios[config.num_hidden_layers:])
    return dataclasses.replace(
        config,
        name=f"{config.name} (c4={c4}, c128={c128}, swa={swa})",
        num_hidden_layers=c4 + c128 + swa,
        compress_ratios=tuple([0] * swa + mixed + mtp),
    )
