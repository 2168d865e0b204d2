"""The bytes a model's weights take on each GPU: a checkpoint folder's safetensors index when there
is one, else an estimate of the parameters from config.json."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from kvviz.base.errors import KvvizError, require
from kvviz.deploy.gpus import GPU, GPUS, gpu_spec  # noqa: F401 (GPU, gpu_spec: kvviz.deploy.budget's names too)

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1}


def checkpoint_weight_bytes(checkpoint_dir) -> tuple[int, str] | None:
    """(bytes, source) of a checkpoint folder's weights: `model.safetensors.index.json`'s
    metadata.total_size (the tensor bytes over all shards), else a single `model.safetensors`'s
    header (sum of data_offsets spans); None when the folder holds neither."""
    d = Path(checkpoint_dir)
    require(d.is_dir(), f"checkpoint_dir={str(checkpoint_dir)!r}: no such folder")
    index = d / "model.safetensors.index.json"
    if index.is_file():
        from kvviz.base.inputs import read_json

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


# DeepSeek-V3's and Kimi-K2's checkpoints: block-wise FP8 (their config.json's quantization_config).
FP8_BLOCK_128 = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}
# The fields a shipped preset leaves out (its config.json is trimmed to the KV-relevant part), from
# the model's Hugging Face config.json, so the weight estimate can be made for them (the presets not
# named here either carry every field the estimate reads or are refused naming the missing field).
PRESET_FILL = {
    "meta-llama/Llama-3.1-8B": {"intermediate_size": 14336, "vocab_size": 128256, "tie_word_embeddings": False},
    "mistralai/Mistral-7B-v0.1": {"intermediate_size": 14336, "vocab_size": 32000, "tie_word_embeddings": False},
    "microsoft/Phi-3-mini-4k-instruct": {"intermediate_size": 8192, "vocab_size": 32064, "tie_word_embeddings": False},
    "google/gemma-3-27b-it": {"intermediate_size": 21504, "vocab_size": 262208, "tie_word_embeddings": True},
    "openai/gpt-oss-120b": {
        "intermediate_size": 2880,
        "vocab_size": 201088,
        "num_local_experts": 128,
        "attention_bias": True,
        "tie_word_embeddings": False,
        "quantization_config": {
            "modules_to_not_convert": [
                "model.layers.*.self_attn",
                "model.layers.*.mlp.router",
                "model.embed_tokens",
                "lm_head",
            ],
            "quant_method": "mxfp4",
        },
    },
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": {
        "intermediate_size": 8192,
        "intermediate_size_mlp": 16384,
        "vocab_size": 202048,
        "num_local_experts": 16,
        "interleave_moe_layer_step": 1,
        "tie_word_embeddings": False,
    },
    "deepseek-ai/DeepSeek-V3": {"quantization_config": FP8_BLOCK_128},
    # transformers' DeepseekV4Config defaults (configuration_deepseek_v4.py, documented on the checkpoint
    # deepseek-ai/DeepSeek-V4-Flash-Base; 284.3 B parameters, V4-Flash's published total), the same
    # values as V4-Flash's published config.json (kvviz/presets/README.md); V4-Flash ships fp8 linears
    # and fp4 (MXFP4) experts (vLLM 0.33 models/deepseek_v4/quant_config.py DeepseekV4FP8Config:
    # expert_dtype "fp4"). The deepseek-v4-pro preset carries its own published sizes.
    "deepseek-ai/DeepSeek-V4-Flash": {
        "hidden_size": 4096,
        "vocab_size": 129280,
        "num_attention_heads": 64,
        "q_lora_rank": 1024,
        "o_lora_rank": 1024,
        "o_groups": 8,
        "n_routed_experts": 256,
        "num_experts_per_tok": 6,
        "moe_intermediate_size": 2048,
        "n_shared_experts": 1,
        "hc_mult": 4,
        "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128], "expert_dtype": "fp4"},
    },
    "moonshotai/Kimi-K2-Instruct": {
        "intermediate_size": 18432,
        "topk_method": "noaux_tc",
        "tie_word_embeddings": False,
        "quantization_config": FP8_BLOCK_128,
    },
    "Qwen/Qwen3-Next-80B-A3B-Instruct": {
        "intermediate_size": 5120,
        "moe_intermediate_size": 512,
        "num_experts": 512,
        "shared_expert_intermediate_size": 512,
        "decoder_sparse_step": 1,
        "vocab_size": 151936,
        "tie_word_embeddings": False,
    },
}


def _preset_config(name: str) -> tuple[dict, str]:
    """A shipped preset's config.json with the fields PRESET_FILL restores (a copy: the text config too)."""
    from kvviz.families import preset_raw

    raw = json.loads(json.dumps(preset_raw(name)))
    fill = PRESET_FILL.get(raw.get("_name_or_path", ""))
    if not fill:
        return raw, f"preset {name}"
    target = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else raw
    for k, v in fill.items():
        target.setdefault(k, v)
    return raw, f"preset {name} + {raw['_name_or_path']}'s config.json fields"


def _raw_config(model, checkpoint_dir, raw_config) -> tuple[dict | None, str]:
    from kvviz.families import preset_names, preset_raw

    if raw_config is not None:
        require(isinstance(raw_config, dict), "raw_config: must be a parsed config.json (a dict)")
        if model.name in preset_names() and raw_config == preset_raw(model.name):
            # a shipped preset's own file (`--hf-config kvviz/presets/NAME.json`): the same trimmed config
            # `--model NAME` reads, so the same fields are restored (else e.g. DeepSeek-V3 is sized in bf16)
            return _preset_config(model.name)
        return raw_config, "the given config"
    if checkpoint_dir is not None and (Path(checkpoint_dir) / "config.json").is_file():
        from kvviz.base.inputs import read_json

        return read_json(Path(checkpoint_dir) / "config.json", what="checkpoint_dir"), "checkpoint config.json"
    if model.name in preset_names():
        return _preset_config(model.name)
    return None, ""


def estimate_parameters(raw: dict, *, model: str = "model") -> tuple[int, str]:
    """(parameters, how) a dense, MoE or MLA decoder's config.json implies (kvviz.deploy.params
    decoder_parts): attention + MLP (gated: 3 h I; MoE: every routed and shared expert and the
    router) + norms per layer, + embeddings (+ lm_head unless tied). MTP layers are left out (vLLM
    loads them only with MTP speculative decoding)."""
    from kvviz.deploy.params import decoder_parts

    parts, how = decoder_parts(raw, model=model, hint=PYTHON_HINT)
    return sum(parts.values()), how


def estimate_weight_bytes(model, raw: dict, *, hint: str = "") -> tuple[int, str]:
    """(bytes, how) of the whole model's weights estimated from its config.json: the parameters of
    each part (kvviz.deploy.params) times the bytes the checkpoint's `quantization_config` gives that
    part (kvviz.deploy.quantized), the model dtype's for the parts it leaves alone."""
    part_bytes, how = estimate_part_bytes(model, raw, hint=hint)
    return int(round(sum(part_bytes.values()))), how


def estimate_part_bytes(model, raw: dict, *, hint: str = "") -> tuple[dict[str, float], str]:
    """({part: bytes}, how): `estimate_weight_bytes` part by part (linear, experts (the routed ones),
    other, embeddings, ...), so a layout that splits one part differently (attention DP's routed
    experts) sizes it at the checkpoint's own bytes per parameter."""
    from kvviz.deploy.params import decoder_parts, state_parts, text_config
    from kvviz.deploy.quantized import weight_format

    hint = hint or PYTHON_HINT
    if model.family == "state":
        parts, how = state_parts(model, raw, hint=hint)
    elif model.family in ("decoder", "mla"):
        parts, how = decoder_parts(raw, model=model.name, hint=hint)
    elif model.family == "deepseek_v4":
        from kvviz.deploy.params_dsv4 import deepseek_v4_weight_bytes

        total, how = deepseek_v4_weight_bytes(raw, DTYPE_BYTES[model.dtype], model=model.name, hint=hint)
        return {"whole": float(total)}, how  # one part: its own count prices each module (params_dsv4)
    else:
        raise KvvizError(
            f"weights_bytes: kvviz does not estimate the weights of {model.name}, a {model.reader.title}; {hint}"
        )
    quant = raw.get("quantization_config") or text_config(raw).get("quantization_config")
    fmt = weight_format(quant, hint=hint)
    dtype_bytes = DTYPE_BYTES[model.dtype]
    part_bytes = {
        part: count * (fmt.bytes_per_param if fmt is not None and part in fmt.parts else dtype_bytes)
        for part, count in parts.items()
    }
    w = int(round(sum(part_bytes.values())))
    if fmt is None:
        how += f" x {dtype_bytes} B ({model.dtype}) = {w:,} B"
    else:
        q = sum(parts[p] for p in fmt.parts)
        how += (
            f"; {fmt.name}: {q:,} of them x {fmt.bytes_per_param:g} B ({fmt.source}), the rest x {dtype_bytes} B "
            f"({model.dtype}) = {w:,} B"
        )
    return part_bytes, how


# How to give the weights instead of the estimate, in Python; the CLI names its flags (CLI_HINT).
PYTHON_HINT = "pass weights_bytes= (the whole checkpoint's bytes) or checkpoint_dir= (its safetensors index)"
CLI_HINT = "give --weights-bytes (the whole checkpoint's bytes) or --checkpoint DIR (its safetensors index)"
