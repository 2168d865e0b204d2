"""DeepSeek V4's parameters and weight bytes from its config.json, counted as vLLM 0.33 builds the model
(models/deepseek_v4/nvidia/model.py DeepseekV4Model / DeepseekV4DecoderLayer / DeepseekV4MoE,
attention.py DeepseekV4Attention / DeepseekV4Indexer, compressor.py DeepseekCompressor). MTP layers
are left out, as for DeepSeek V3 (vLLM loads them only with MTP speculative decoding).

Per layer: the attention (fused_wqa_wkv h x (q_lora_rank + head_dim), wq_b, the grouped output
projection wo_a / wo_b, q_norm, kv_norm and one float32 attention sink per head), a compressor on every
layer whose compress ratio is above 1 (fused_wkv_wgate h x 2 coff head_dim, unquantized; a float32 `ape`
of ratio x coff head_dim; a norm; coff = 2 when the ratio is 4, else 1), the indexer on ratio-4 layers
(wq_b, weights_proj unquantized, its own compressor of index_head_dim), the MoE (router h x E,
every routed expert 3 h I, the shared experts 3 h I n_shared, the int32 token-to-expert table
vocab x top-k on hash layers, a float32 score bias with topk_method noaux_tc elsewhere), two norms
and the hyper-connections' float32 mixers (hc_attn / hc_ffn: fn (2 + m) m x m h, base (2 + m) m,
scale 3). Once: embed_tokens and lm_head (vocab x h), the final norm, hc_head (m x m h + m + 1).
"""

from __future__ import annotations

from kvviz.base.errors import KvvizError
from kvviz.base.inputs import short_repr
from kvviz.deploy.params import Need

# The estimate's parts: the quantized linears, the routed experts, the model-dtype rest (norms, routers,
# the linears vLLM builds with quant_config=None, embeddings) and the 4-byte tensors (float32, int32).
DSV4_PARTS = ("linear", "experts", "other", "embeddings", "fp32")
_RATIO_OF_TYPE = {"sliding_attention": 0, "compressed_sparse_attention": 4, "heavily_compressed_attention": 128}


def _ratios(need: Need, n: int) -> list[int]:
    """Each layer's compress ratio: `layer_types` with `compress_rates` (transformers' DeepseekV4Config),
    else the legacy per-layer `compress_ratios` (0 / 4 / 128, the MTP layer's last)."""
    cfg = need.cfg
    types, rates = cfg.get("layer_types"), cfg.get("compress_rates")
    if isinstance(types, list) and len(types) >= n:
        table = dict(_RATIO_OF_TYPE, **(rates if isinstance(rates, dict) else {}))
        if not all(t in table for t in types[:n]):
            raise KvvizError(f"weights_bytes: {need.model}: layer_types={short_repr(types)} names an unknown layer")
        return [table[t] for t in types[:n]]
    legacy = cfg.get("compress_ratios")
    if isinstance(legacy, list) and len(legacy) >= n and all(r in (0, 4, 128) for r in legacy[:n]):
        return list(legacy[:n])
    raise KvvizError(
        f"weights_bytes: {need.model}'s config has no layer_types or compress_ratios to estimate the weights from; "
        f"{need.hint}"
    )


def _hash_layers(need: Need, n: int) -> int:
    """How many leading layers route by the token hash (`mlp_layer_types`' hash_moe, else the legacy
    `num_hash_layers`, else DeepseekV4Config's default_num_hash_layers, 3)."""
    kinds = need.cfg.get("mlp_layer_types")
    if isinstance(kinds, list):
        return kinds[:n].count("hash_moe")
    return min(n, need.get("num_hash_layers", 3))


def _compressor(h: int, ratio: int, head_dim: int) -> tuple[int, int]:
    """(model-dtype, float32) parameters of one DeepseekCompressor."""
    coff = 1 + (ratio == 4)
    return h * 2 * coff * head_dim + head_dim, ratio * coff * head_dim


def deepseek_v4_parts(raw: dict, *, model: str = "model", hint: str = "") -> tuple[dict, str]:
    """(parts, how): DeepSeek V4's parameters by part (DSV4_PARTS), MTP left out."""
    need = Need(raw, model=model, hint=hint)
    h, n, vocab = need("hidden_size"), need("num_hidden_layers"), need("vocab_size")
    heads, hd, q_lora = need("num_attention_heads"), need("head_dim"), need("q_lora_rank")
    o_lora, groups = need("o_lora_rank"), need("o_groups")
    e, topk, inter = need("n_routed_experts"), need("num_experts_per_tok"), need("moe_intermediate_size")
    shared, m = need.get("n_shared_experts", 0), need("hc_mult")
    ratios, n_hash = _ratios(need, n), _hash_layers(need, n)
    parts = dict.fromkeys(DSV4_PARTS, 0)
    mix = (2 + m) * m
    for i, ratio in enumerate(ratios):
        parts["linear"] += h * (q_lora + hd) + q_lora * heads * hd + heads * hd * o_lora + groups * o_lora * h
        parts["other"] += q_lora + hd + 2 * h  # q_norm, kv_norm, attn_norm, ffn_norm
        parts["fp32"] += heads + 2 * (mix * m * h + mix + 3)  # attention sink, hc_attn_*, hc_ffn_*
        if ratio > 1:
            other, fp32 = _compressor(h, ratio, hd)
            parts["other"] += other
            parts["fp32"] += fp32
        if ratio == 4:
            ihd, iheads = need("index_head_dim"), need("index_n_heads")
            other, fp32 = _compressor(h, ratio, ihd)
            parts["linear"] += q_lora * ihd * iheads
            parts["other"] += other + h * iheads  # + weights_proj
            parts["fp32"] += fp32
        parts["experts"] += e * 3 * h * inter
        parts["linear"] += 3 * h * inter * shared
        parts["other"] += h * e  # the router (GateLinear)
        if i < n_hash:
            parts["fp32"] += vocab * topk  # tid2eid, int32
        elif raw.get("topk_method") == "noaux_tc":
            parts["fp32"] += e  # e_score_correction_bias
    parts["embeddings"] = 2 * vocab * h  # embed_tokens + lm_head (DeepSeek V4 does not tie them)
    parts["other"] += h
    parts["fp32"] += m * m * h + m + 1  # hc_head_fn, hc_head_base, hc_head_scale
    total = sum(parts.values())
    how = (
        f"DeepSeek V4 ({e} experts, {n_hash} hash-routed layers, {sum(r == 4 for r in ratios)} with an indexer): "
        f"{n} layers: linear {parts['linear']:,} + routed experts {parts['experts']:,} + norms, routers, "
        f"compressors {parts['other']:,} + float32/int32 {parts['fp32']:,} + embeddings {parts['embeddings']:,} "
        f"(+ lm_head) = {total:,} parameters"
    )
    return parts, how


def deepseek_v4_weight_bytes(raw: dict, dtype_bytes: int, *, model: str, hint: str) -> tuple[int, str]:
    """(bytes, how) of DeepSeek V4's weights: with a `quantization_config` of quant_method fp8 vLLM picks
    DeepseekV4FP8Config (models/deepseek_v4/quant_config.py override_quantization_method): the quantized
    linears at 1 B + one scale per weight_block_size block (an E8M0 byte when the experts are fp4,
    is_scale_e8m0; else float32), the routed experts at MXFP4 (4 bits + an E8M0 scale per 32) when
    `expert_dtype` is fp4 (its default) or as the linears when fp8; the rest in the model dtype, the
    float32 / int32 tensors at 4 B."""
    parts, how = deepseek_v4_parts(raw, model=model, hint=hint)
    quant = raw.get("quantization_config")
    linear = experts = float(dtype_bytes)
    if quant is not None:
        if not isinstance(quant, dict) or quant.get("quant_method") not in ("fp8", "deepseek_v4_fp8"):
            raise KvvizError(
                f"weights_bytes: {model}: quantization_config={short_repr(quant)}: kvviz sizes DeepSeek V4's fp8 "
                f"checkpoints only; {hint}"
            )
        expert_dtype = raw.get("expert_dtype") or quant.get("expert_dtype") or "fp4"
        if expert_dtype not in ("fp4", "fp8"):
            raise KvvizError(f"weights_bytes: {model}: expert_dtype={short_repr(expert_dtype)} must be fp4 or fp8")
        block = quant.get("weight_block_size")
        ok = isinstance(block, list) and len(block) == 2 and all(type(b) is int and b > 0 for b in block)
        scale = 1 if expert_dtype == "fp4" else 4
        linear = 1 + (scale / (block[0] * block[1]) if ok else 0.0)
        experts = 4.25 / 8 if expert_dtype == "fp4" else linear
        how += f"; fp8 linears x {linear:g} B, {expert_dtype} experts x {experts:g} B"
    w = parts["linear"] * linear + parts["experts"] * experts
    w += (parts["other"] + parts["embeddings"]) * dtype_bytes + parts["fp32"] * 4
    w = int(round(w))
    return w, how + f", the rest x {dtype_bytes} B (float32/int32 x 4 B) = {w:,} B"
