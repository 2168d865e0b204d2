"""Weights derived by hand from a config's shapes and vLLM 0.33's layer classes, for the tests that need them in
more than one file (tests/test_weights.py, tests/test_deploy_parallel.py)."""

from __future__ import annotations


def deepseek_v3_rank_bytes(tp: int) -> int:
    """One TP rank of DeepSeek-V3 (FP8) by hand, as deepseek_v2.py builds it: the MLA latent down-projections
    (fused_qkv_a_proj, ReplicatedLinear) and every norm, the router and its bias whole on each rank; q_b_proj,
    kv_b_proj, o_proj, the MLPs, the shared and routed experts and the vocabulary / TP."""
    h, n, hq, e, i_moe, inter, vocab = 7168, 61, 128, 256, 2048, 18432, 129280
    rank, rope, nope, v, q_rank = 512, 64, 128, 128, 1536
    heads = hq // tp
    mla = h * (q_rank + rank + rope) + q_rank * heads * (nope + rope) + rank * heads * (nope + v) + heads * v * h
    dense, moe_layers = 3, 58
    linear = n * mla + dense * 3 * h * (inter // tp) + moe_layers * 3 * h * (i_moe // tp)  # + the shared expert
    experts = moe_layers * e * 3 * h * (i_moe // tp)
    small = n * (rank + q_rank + 2 * h) + moe_layers * (h * e + e) + h  # whole on every rank
    embed = 2 * vocab * h // tp
    return round((linear + experts) * (1 + 4 / (128 * 128)) + 2 * (small + embed))
