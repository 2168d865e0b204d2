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


# The fields a shipped preset leaves out (its config.json is trimmed to the KV-relevant part), from
# the model's Hugging Face config.json (also /work/notes/configs/<name>/config.json), so the weight
# estimate can be made for them.
PRESET_FILL = {
    "meta-llama/Llama-3.1-8B": {"intermediate_size": 14336, "vocab_size": 128256, "tie_word_embeddings": False},
    "mistralai/Mistral-7B-v0.1": {"intermediate_size": 14336, "vocab_size": 32000, "tie_word_embeddings": False},
    "microsoft/Phi-3-mini-4k-instruct": {"intermediate_size": 8192, "vocab_size": 32064, "tie_word_embeddings": False},
}


def _raw_config(model, checkpoint_dir, raw_config) -> tuple[dict | None, str]:
    if raw_config is not None:
        require(isinstance(raw_config, dict), "raw_config: must be a parsed config.json (a dict)")
        return raw_config, "the given config"
    if checkpoint_dir is not None and (Path(checkpoint_dir) / "config.json").is_file():
        from kvviz.base.inputs import read_json

        return read_json(Path(checkpoint_dir) / "config.json", what="checkpoint_dir"), "checkpoint config.json"
    from kvviz.families import preset_names, preset_raw

    if model.name in preset_names():
        raw = dict(preset_raw(model.name))
        fill = PRESET_FILL.get(raw.get("_name_or_path", ""))
        if fill:
            target = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else raw
            for k, v in fill.items():
                target.setdefault(k, v)
            return raw, f"preset {model.name} + {raw['_name_or_path']}'s config.json fields"
        return raw, f"preset {model.name}"
    return None, ""


def _int(cfg: dict, key: str, *, model: str, default=None) -> int:
    value = cfg.get(key, default)
    if value is None:
        raise KvvizError(
            f"weights_bytes: {model}'s config has no {key!r} to estimate the weights from; pass "
            f"weights_bytes= or checkpoint_dir="
        )
    require(
        type(value) is int and value >= 0, f"weights_bytes: {model}: {key}={value!r} must be a non-negative integer"
    )
    return value


def estimate_parameters(raw: dict, *, model: str = "model") -> tuple[int, str]:
    """(parameters, how) a config.json implies for a dense, MoE or MLA decoder (docs/deploy.md#the-kv-budget-on-a-gpu):
    attention (GQA q/k/v/o, or MLA's low-rank projections) + MLP (gated: 3 h I; MoE: every routed
    and shared expert and the router) + norms per layer, + embeddings (+ lm_head unless tied).
    MTP layers are left out (vLLM loads them only with MTP speculative decoding)."""
    cfg = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else raw
    h = _int(cfg, "hidden_size", model=model)
    n = _int(cfg, "num_hidden_layers", model=model)
    vocab = _int(cfg, "vocab_size", model=model)
    hq = _int(cfg, "num_attention_heads", model=model)
    tie = cfg.get("tie_word_embeddings", raw.get("tie_word_embeddings", False))
    kinds = []
    if cfg.get("kv_lora_rank"):
        rank = _int(cfg, "kv_lora_rank", model=model)
        rope = _int(cfg, "qk_rope_head_dim", model=model)
        nope = _int(cfg, "qk_nope_head_dim", model=model)
        v = _int(cfg, "v_head_dim", model=model)
        q_rank = cfg.get("q_lora_rank")
        q = (h * q_rank + q_rank + q_rank * hq * (nope + rope)) if q_rank else h * hq * (nope + rope)
        attn = q + h * (rank + rope) + rank + rank * hq * (nope + v) + hq * v * h
        kinds.append("MLA")
    else:
        hkv = _int(cfg, "num_key_value_heads", model=model, default=hq)
        d = cfg.get("head_dim") or h // hq
        attn = h * hq * d + 2 * h * hkv * d + hq * d * h
        if cfg.get("attention_bias") or cfg.get("model_type") == "qwen2":
            attn += (hq + 2 * hkv) * d
        kinds.append("GQA" if hkv != hq else "MHA")
    experts = next((cfg[k] for k in ("n_routed_experts", "num_experts", "num_local_experts") if cfg.get(k)), 0)
    dense_mlp = 0
    if (
        not experts
        or cfg.get("first_k_dense_replace")
        or cfg.get("mlp_only_layers")
        or (cfg.get("decoder_sparse_step") or 1) > 1
    ):
        dense_mlp = 3 * h * _int(cfg, "intermediate_size", model=model)
    if experts:
        i_moe = cfg.get("moe_intermediate_size") or _int(cfg, "intermediate_size", model=model)
        moe = experts * 3 * h * i_moe + h * experts
        moe += (cfg.get("n_shared_experts") or 0) * 3 * h * i_moe
        if cfg.get("shared_expert_intermediate_size"):
            moe += 3 * h * cfg["shared_expert_intermediate_size"] + h
        first_dense = cfg.get("first_k_dense_replace") or 0
        only_dense = set(cfg.get("mlp_only_layers") or ())
        step = cfg.get("decoder_sparse_step") or 1
        is_moe = [i >= first_dense and i not in only_dense and (i + 1) % step == 0 for i in range(n)]
        mlp_total = sum(moe if m else dense_mlp for m in is_moe)
        kinds.append(f"MoE ({experts} experts, {sum(is_moe)} MoE layers)")
    else:
        mlp_total = n * dense_mlp
        kinds.append("dense")
    norms = n * 2 * h + h
    embed = vocab * h * (1 if tie else 2)
    total = n * attn + mlp_total + norms + embed
    how = (
        f"{' '.join(kinds)}: {n} layers x attention {attn:,} + MLP {mlp_total:,} + norms {norms:,} + "
        f"embeddings {embed:,}{' (tied)' if tie else ' (+ lm_head)'} = {total:,} parameters"
    )
    return total, how
