"""The bytes one weight takes in a checkpoint, by its `quantization_config` (the method vLLM 0.33
picks from it: model_executor/layers/quantization/), for the weight estimate of kvviz.deploy.weights.

Each method says which of the estimate's parts it quantizes and at how many bytes a parameter
(scales included); every other part stays in the model dtype:

* `fp8` (fp8.py Fp8Config): every linear layer and the routed experts at 1 B, plus one float32 scale
  per `weight_block_size` block (per tensor without one); embeddings, lm_head, norms and routers
  stay in the model dtype (DeepSeek's router is a ReplicatedLinear built without quant_config);
* `mxfp4` (mxfp4.py Mxfp4Config.get_quant_method): routed experts only (RoutedExperts), 4 bits plus
  one E8M0 scale per 32 = 4.25 bits; linear layers fall back to UnquantizedLinearMethod;
* NVFP4 (`modelopt` with quant_algo NVFP4, or `compressed-tensors` nvfp4-pack-quantized): linear
  layers and experts at 4 bits plus one FP8 scale per 16 = 4.5 bits;
* `awq` / `gptq` (auto_awq.py / auto_gptq.py): linear layers and experts at `bits` plus a float16
  scale and a packed `bits`-wide zero point per `group_size` weights;
* `compressed-tensors` (its config_groups' weights: num_bits, group_size): the same as AWQ/GPTQ for
  integers, 1 B + a scale for 8-bit floats.

Anything else is refused in one line naming how to give the weights instead.
"""

from __future__ import annotations

import dataclasses

from kvviz.base.errors import KvvizError
from kvviz.base.inputs import short_repr

# The estimate's parts (kvviz.deploy.params): which a method quantizes.
LINEAR_PARTS = ("linear", "experts")


@dataclasses.dataclass(frozen=True)
class WeightFormat:
    """How a checkpoint stores its weights: bytes per parameter of the parts it quantizes (`parts`);
    every other part is in the model dtype."""

    name: str
    bytes_per_param: float
    parts: tuple[str, ...]
    source: str


def _int_field(q: dict, keys, default, *, hint: str) -> int:
    for k in keys:
        if k in q and q[k] is not None:
            value = q[k]
            if type(value) is not int or not 1 <= value <= 1 << 20:
                raise KvvizError(f"quantization_config.{k}={short_repr(value)}: must be a positive integer; {hint}")
            return value
    return default


def _integer_format(name: str, bits: int, group: int, source: str) -> WeightFormat:
    # packed bits + a float16 scale and a packed zero point per group (group -1 or 0: per channel, ~0)
    per_group = 0.0 if group <= 0 else (2 + bits / 8) / group
    return WeightFormat(name, bits / 8 + per_group, LINEAR_PARTS, source)


def weight_format(quant, *, hint: str) -> WeightFormat | None:
    """The WeightFormat a config's quantization_config names; None when it has none (the model dtype
    throughout). `hint` says how to give the weights instead (CLI flags or Python arguments) in the
    refusal of a method kvviz does not size."""
    if quant is None:
        return None
    if not isinstance(quant, dict):
        raise KvvizError(f"quantization_config={short_repr(quant)}: must be a JSON object; {hint}")
    method = str(quant.get("quant_method", "")).lower()
    algo = str(quant.get("quant_algo", "") or "").upper()
    if method == "fp8" or (method == "modelopt" and algo == "FP8"):
        block = quant.get("weight_block_size")
        per = (
            4 / (block[0] * block[1])
            if isinstance(block, list) and len(block) == 2 and all(type(b) is int and b > 0 for b in block)
            else 0.0
        )
        how = f"fp8 (1 B + a float32 scale per {block[0]}x{block[1]} block)" if per else "fp8 (1 B)"
        return WeightFormat(how, 1 + per, LINEAR_PARTS, "quantization/fp8.py Fp8Config")
    if method == "mxfp4":
        return WeightFormat(
            "mxfp4 (4 bits + an E8M0 scale per 32) on the routed experts",
            4.25 / 8,
            ("experts",),
            "quantization/mxfp4.py Mxfp4Config.get_quant_method",
        )
    if (method == "modelopt" and "NVFP4" in algo) or (method == "modelopt_fp4"):
        return WeightFormat("NVFP4 (4 bits + an FP8 scale per 16)", 4.5 / 8, LINEAR_PARTS, "quantization/modelopt.py")
    if method in ("awq", "gptq", "awq_marlin", "gptq_marlin"):
        bits = _int_field(quant, ("bits", "w_bit"), 4, hint=hint)
        group = quant.get("group_size", quant.get("q_group_size", 128))
        group = group if type(group) is int else 128
        return _integer_format(f"{method} {bits}-bit, group {group}", bits, group, f"quantization/auto_{method[:4]}.py")
    if method == "compressed-tensors":
        groups = quant.get("config_groups")
        found = [g.get("weights") for g in groups.values() if isinstance(g, dict)] if isinstance(groups, dict) else []
        weights = next((w for w in found if isinstance(w, dict)), None)
        if isinstance(weights, dict):
            bits = _int_field(weights, ("num_bits",), 8, hint=hint)
            group = weights.get("group_size")
            group = group if type(group) is int else 0
            if weights.get("type") == "float" and bits == 4:
                return WeightFormat("NVFP4 (4 bits + an FP8 scale per 16)", 4.5 / 8, LINEAR_PARTS, "compressed_tensors")
            if weights.get("type") == "float":
                return WeightFormat(f"fp{bits} ({bits // 8} B)", bits / 8, LINEAR_PARTS, "compressed_tensors")
            return _integer_format(f"int{bits}, group {group}", bits, group, "compressed_tensors")
    raise KvvizError(
        f"quantization_config: quant_method {short_repr(quant.get('quant_method'))}"
        f"{f' ({algo})' if algo else ''}: kvviz sizes fp8, mxfp4, NVFP4, AWQ, GPTQ and compressed-tensors "
        f"checkpoints; {hint}"
    )
