"""DeepSeek V4's parsed config (`ModelConfig`): the fields vLLM 0.33 reads, their checks, and the
explorer's layer mix (`with_layer_mix`)."""

from __future__ import annotations

import dataclasses

from kvviz.base.errors import require
from kvviz.base.inputs import MAX_DIM, MAX_LAYERS

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
    num_attention_heads: int | None = None  # query heads: TP must divide them (None: not in the config)

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
        # Bounds on what sizes work (kvviz.base.inputs): a billion MTP layers would never finish.
        require(
            self.num_layers_with_mtp <= MAX_LAYERS,
            f"num_hidden_layers + num_nextn_predict_layers = {self.num_layers_with_mtp:,}: at most {MAX_LAYERS:,}",
        )
        for field in ("head_dim", "qk_rope_head_dim", "index_head_dim"):
            require(getattr(self, field) <= MAX_DIM, f"{field}={getattr(self, field):,}: at most {MAX_DIM:,}")
        require(
            self.qk_rope_head_dim < self.head_dim,
            f"qk_rope_head_dim={self.qk_rope_head_dim}: must be smaller than head_dim={self.head_dim}",
        )
        require(
            len(self.compress_ratios) >= self.num_hidden_layers,
            f"compress_ratios: has {len(self.compress_ratios)} entries, "
            f"needs at least num_hidden_layers={self.num_hidden_layers}",
        )
        for i, r in enumerate(self.compress_ratios):
            require(type(r) is int and r >= 0, f"compress_ratios[{i}]={r!r}: must be a non-negative integer")
        h = self.num_attention_heads
        require(
            h is None or (type(h) is int and 0 < h <= MAX_DIM),
            f"num_attention_heads={h!r}: must be a positive integer (at most {MAX_DIM:,})",
        )

    @property
    def num_layers_with_mtp(self) -> int:
        """The hidden layers plus the MTP layers (each MTP slot registers a sliding-window cache)."""
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
        num_attention_heads=raw.get("num_attention_heads"),
    )


def with_layer_mix(config: ModelConfig, *, c4: int, c128: int, swa: int) -> ModelConfig:
    """A config with a different group mix: `swa` sliding-window-only layers first, then `c4` and
    `c128` compressed layers interleaved as evenly as possible (the preset's own order is kept
    when the mix is unchanged). The MTP slot(s) stay as they are."""
    for field, n in (("c4", c4), ("c128", c128), ("swa", swa)):
        require(isinstance(n, int) and n >= 0, f"{field}={n!r}: must be a non-negative integer")
    require(c4 + c128 + swa > 0, "layer mix: needs at least one layer")
    require(
        c4 + c128 + swa + config.num_nextn_predict_layers <= MAX_LAYERS,
        f"layer mix: c4 + c128 + swa = {c4 + c128 + swa:,} layers: at most {MAX_LAYERS:,} with the MTP layers",
    )
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
    mtp = list(config.compress_ratios[config.num_hidden_layers :])
    return dataclasses.replace(
        config,
        name=f"{config.name} (c4={c4}, c128={c128}, swa={swa})",
        num_hidden_layers=c4 + c128 + swa,
        compress_ratios=tuple([0] * swa + mixed + mtp),
    )


# ---- the family ----------------------------------------------------------------------------------
DEEPSEEK_V4_MODEL_TYPE = "deepseek_v4"


def is_deepseek_v4(raw: dict) -> bool:
    """Whether a parsed config.json is of the DeepSeek V4 shape."""
    return isinstance(raw, dict) and raw.get("model_type") == DEEPSEEK_V4_MODEL_TYPE
