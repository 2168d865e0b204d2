"""The bytes a model's weights take on each GPU: a checkpoint folder's safetensors index when there
is one, else an estimate of the parameters from config.json."""

from __future__ import annotations

import copy
import json
import os
import struct
from pathlib import Path

from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import instance
from kvviz.deploy.gpus import GPU, GPUS, gpu_spec  # noqa: F401 (GPU, gpu_spec: kvviz.deploy.budget's names too)

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1}


def checkpoint_weight_bytes(checkpoint_dir) -> tuple[int, str] | None:
    """(bytes, source) of a checkpoint folder's weights: `model.safetensors.index.json`'s
    metadata.total_size (the tensor bytes over all shards), else a single `model.safetensors`'s
    header (sum of data_offsets spans); None when the folder holds neither."""
    instance(str, os.PathLike, what="a checkpoint folder (a str or Path)").check(checkpoint_dir, field="checkpoint_dir")
    d = Path(checkpoint_dir)
    require(d.is_dir(), f"checkpoint_dir={str(checkpoint_dir)!r}: no such folder")
    index = d / "model.safetensors.index.json"
    if index.is_file():
        from kvviz.base.files import read_json

        raw = read_json(index, what="checkpoint_dir")
        meta = raw.get("metadata") if isinstance(raw, dict) else None
        size = meta.get("total_size") if isinstance(meta, dict) else None
        if isinstance(size, float) and size.is_integer():
            size = int(size)
        require(
            type(size) is int and size > 0,
            f"checkpoint_dir: {index.name}: metadata.total_size={size!r}: must be a positive integer",
        )
        return size, f"{index.name} metadata.total_size"
    single = d / "model.safetensors"
    if single.is_file():
        with single.open("rb") as f:
            head = f.read(8)
            require(len(head) == 8, f"checkpoint_dir: {single.name}: shorter than a safetensors header")
            (n,) = struct.unpack("<Q", head)
            require(0 < n <= 100 << 20, f"checkpoint_dir: {single.name}: header length {n} is not plausible")
            try:
                header = json.loads(f.read(n))
            except (ValueError, UnicodeDecodeError):
                raise KvvizError(f"checkpoint_dir: {single.name}: header is not JSON") from None
        total = 0
        for name, t in header.items():
            if name == "__metadata__":
                continue
            offs = t.get("data_offsets") if isinstance(t, dict) else None
            require(
                isinstance(offs, list) and len(offs) == 2 and all(type(x) is int for x in offs),
                f"checkpoint_dir: {single.name}: tensor {name!r} has no data_offsets",
            )
            total += offs[1] - offs[0]
        return total, f"{single.name} header (sum of tensor data)"
    return None


def raw_config_of(model, checkpoint_dir, raw_config) -> tuple[dict | None, str]:
    """The config.json the weights estimate reads and where it came from: the given dict, a checkpoint
    folder's config.json, or what kvviz.load read the model from."""
    if raw_config is not None:
        require(isinstance(raw_config, dict), "raw_config: must be a parsed config.json (a dict)")
        return raw_config, "the given config"
    if checkpoint_dir is not None and (Path(checkpoint_dir) / "config.json").is_file():
        from kvviz.base.files import read_json

        return read_json(Path(checkpoint_dir) / "config.json", what="checkpoint_dir"), "checkpoint config.json"
    raw = getattr(model, "raw_config", None)  # what kvviz.load read the model from: its own file, or the preset's
    if raw is not None:  # (each preset carries the fields the estimate reads: kvviz/presets/README.md); a copy,
        where = f"{model.name}'s config.json" if model.config_dir is not None else f"preset {model.name}"
        return copy.deepcopy(raw), where  # so that a caller's edit never reaches the model
    return None, ""


def beside_checkpoint(model) -> str | None:
    """The folder the model's config.json was read from when it holds the checkpoint's safetensors index (the
    exact weights, as `kvviz plan --hf-config DIR` reads them), else None."""
    folder = getattr(model, "config_dir", None)
    if folder is None or not (Path(folder) / "model.safetensors.index.json").is_file():
        return None
    return folder


def estimate_parameters(raw: dict, *, model: str = "model") -> tuple[int, str]:
    """(parameters, how) a dense, MoE or MLA decoder's config.json implies (kvviz.deploy.params
    decoder_count): attention + MLP (gated: 3 h I; MoE: every routed and shared expert and the
    router) + norms per layer, + embeddings (+ lm_head unless tied). MTP layers are left out (vLLM
    loads them only with MTP speculative decoding)."""
    from kvviz.deploy.params import decoder_count

    instance(dict, what="a parsed config.json (a dict)").check(raw, field="raw")
    instance(str, what="the model's name (a str)").check(model, field="model")
    count = decoder_count(raw, model=model, hint=PYTHON_HINT)
    return sum(count.parts.values()), count.how


def estimate_weight_bytes(model, raw: dict, *, hint: str = "", tp: int = 1) -> tuple[int, str]:
    """(bytes, how) of the model's weights on one of `tp` tensor-parallel ranks (1: the whole model) estimated
    from its config.json: the parameters of each part (kvviz.deploy.params) times the bytes the checkpoint's
    `quantization_config` gives that part (kvviz.deploy.quantized), the model dtype's for the parts it leaves
    alone."""
    part_bytes, how = estimate_part_bytes(model, raw, hint=hint, tp=tp)
    return int(round(sum(part_bytes.values()))), how


def param_count(model, raw: dict, *, hint: str = "", tp: int = 1):
    """The `kvviz.deploy.params.ParamCount` of `model` (a `Model`) on one of `tp` ranks from its config.json, by
    its family: a state-space hybrid's (params_state.state_count) or a dense, MoE or MLA decoder's
    (decoder_count). DeepSeek V4 has its own count (params_dsv4, one part): refused here, in one line naming how
    to give the weights instead."""
    from kvviz.deploy.params import decoder_count
    from kvviz.deploy.params_state import state_count

    hint = hint or PYTHON_HINT
    if model.family == "state":
        return state_count(model, raw, hint=hint, tp=tp)
    if model.family in ("decoder", "mla"):
        return decoder_count(raw, model=model.name, hint=hint, tp=tp)
    raise KvvizError(
        f"weights_bytes: kvviz does not count the parameters of {model.name}, a {model.reader.title}, layer by "
        f"layer; {hint}"
    )


def price_parts(model, raw: dict, parts: dict[str, int], *, hint: str = "") -> tuple[dict[str, float], str]:
    """({part: bytes}, how): each part's parameters times the bytes the checkpoint's `quantization_config`
    gives that part (kvviz.deploy.quantized), the model dtype's for the parts it leaves alone."""
    from kvviz.deploy.params import text_config
    from kvviz.deploy.quantized import weight_format

    quant = raw.get("quantization_config") or text_config(raw).get("quantization_config")
    fmt = weight_format(quant, hint=hint or PYTHON_HINT)
    dtype_bytes = DTYPE_BYTES[model.dtype]
    part_bytes = {
        part: count * (fmt.bytes_per_param if fmt is not None and part in fmt.parts else dtype_bytes)
        for part, count in parts.items()
    }
    w = int(round(sum(part_bytes.values())))
    if fmt is None:
        return part_bytes, f" x {dtype_bytes} B ({model.dtype}) = {w:,} B"
    q = sum(parts[p] for p in fmt.parts)
    return part_bytes, (
        f"; {fmt.name}: {q:,} of them x {fmt.bytes_per_param:g} B ({fmt.source}), the rest x {dtype_bytes} B "
        f"({model.dtype}) = {w:,} B"
    )


def estimate_part_bytes(model, raw: dict, *, hint: str = "", tp: int = 1) -> tuple[dict[str, float], str]:
    """({part: bytes}, how): `estimate_weight_bytes` part by part (linear, experts (the routed ones),
    other, embeddings, ...), so a layout that splits one part differently (attention DP's routed
    experts) sizes it at the checkpoint's own bytes per parameter."""
    hint = hint or PYTHON_HINT
    if model.family == "deepseek_v4":
        from kvviz.deploy.params_dsv4 import deepseek_v4_weight_bytes

        total, how = deepseek_v4_weight_bytes(raw, DTYPE_BYTES[model.dtype], model=model.name, hint=hint)
        if tp > 1:  # not counted rank by rank: the whole / TP
            return {"whole": float(-(-total // tp))}, how + f" / TP {tp}"
        return {"whole": float(total)}, how  # one part: its own count prices each module (params_dsv4)
    if model.family not in ("state", "decoder", "mla"):
        raise KvvizError(
            f"weights_bytes: kvviz does not estimate the weights of {model.name}, a {model.reader.title}; {hint}"
        )
    count = param_count(model, raw, hint=hint, tp=tp)
    part_bytes, priced = price_parts(model, raw, count.parts, hint=hint)
    return part_bytes, count.how + priced


# How to give the weights instead of the estimate, in Python; the CLI names its flags (CLI_HINT).
PYTHON_HINT = "pass weights_bytes= (the whole checkpoint's bytes) or checkpoint_dir= (its safetensors index)"
CLI_HINT = "give --weights-bytes (the whole checkpoint's bytes) or --checkpoint DIR (its safetensors index)"
