"""The architectures of vLLM 0.33's registry that kvviz does not plan yet, each with the one vLLM rule
kvviz does not model (`REFUSED`, from docs/registry-work.md's classification), and the registry itself
(`vllm_registry.json`, shipped beside this module). Imports no family, so the loader can word its
refusal with it; kvviz.families.catalog renders the table.
"""

from __future__ import annotations

import json
from pathlib import Path

REGISTRY_FILE = "vllm_registry.json"

# The one vLLM 0.33 rule kvviz does not model yet -> the architectures it holds back
# (docs/registry-work.md#c-rules-and-d-refusals; class b: a mapping kvviz has not registered yet).
_RULES: dict[str, str] = {
    "Inkling's short-conv state as a sliding-window KV cache of its own block size (inkling/nvidia/"
    "sconv_swa_attn.py InklingConvState: SlidingWindowSpec, block = window = sconv_kernel_size, a packed "
    "power-of-two head size): not modelled": ("InklingForCausalLM InklingForConditionalGeneration"),
    # models/qwen4_exp/common/qsa_cache.py QSAKeyStateCache / QSACompressedKeyCache, nvidia/model.py
    "QSA indexer ring: CircularBufferSpec (one block a request of round_up(compress_ratio + "
    "num_speculative_tokens, compress_ratio) raw keys, qsa_cache.py QSAKeyStateCache) beside a compressed "
    "MLAAttentionSpec (tokens_per_state=compress_ratio) and a tp_replicated short_conv MambaSpec (PLE): not modelled": (
        "Qwen4ExpForCausalLM Qwen4ExpForConditionalGeneration"
    ),
    # models/glm5next/common/attention.py Glm5NextIndexerCache / Glm5NextTailCache, common/kda.py
    "kpool indexer tail ring: CircularBufferSpec (2 heads, one ring of index_kpool x next_power_of_2(cdiv("
    "index_kpool + num_speculative_tokens, index_kpool)) slots a request, Glm5NextTailCache) beside a "
    "kpool-compressed indexer MLAAttentionSpec (tokens_per_state=index_kpool) and KDA states: not modelled": (
        "Glm5NextForCausalLM Glm5NextForConditionalGeneration"
    ),
    # models/minimax_m3/nvidia/model.py get_kv_cache_spec, common/indexer.py MiniMaxM3IndexerCache
    "MiniMax M3 sparse layer: a GQA FullAttentionSpec beside a key-only indexer MLAAttentionSpec (1 head of "
    "index_head_dim, indexer_kv_dtype bf16 / fp8, cache_role=SparseCacheRole.INDEXER) in one layer, from a "
    "custom-code config: not modelled": ("MiniMaxM3SparseForCausalLM MiniMaxM3SparseForConditionalGeneration"),
    # models/step5/nvidia/sparse_summary_cache.py, csa_tail_ring.py (model.py Step5Attention)
    "Step5 sparse layer: a summary FullAttentionSpec (1 head x 256 uint8, tokens_per_state=8) and a CSA tail "
    "ring CircularBufferSpec (one main-page-sized block a request) beside the main K|V: not modelled": (
        "Step5ForCausalLM Step5ForConditionalGeneration"
    ),
    (
        "DeepSeek V4.1 (vllm/models/deepseek_v41): compressor states as CircularBufferSpec and bounded-replay "
        "sliding-window MLA (SlidingWindowMLASpec.bounded_replay): not modelled"
    ): ("DeepseekV41ForCausalLM"),
    # whisper_causal.py WhisperCausalAttentionWithBlockPooling.get_kv_cache_spec (voxtral.py whisper_encoder)
    "causal audio encoder registers KV: SlidingWindowSpec / FullAttentionSpec with tokens_per_state=Fraction(1, "
    "block_pool_size) (block_pool_size states a token) and a pooled window cdiv(sliding_window, "
    "block_pool_size) + 1, from a Mistral-format config: not modelled": ("VoxtralRealtimeGeneration"),
    # models/dots3_note/nvidia/model.py Dots3NotePaddedMLAAttention, Dots3NoteSlidingAttention
    "NOTE layers: sparse MLA (DeepSeek V3.2's, with its indexer K cache) padded to physical_head_size = "
    "swa_kv_lora_rank + swa_qk_rope_head_dim, beside sliding-window MLA (SlidingWindowMLASpec) on its own "
    "Triton MLA backend: not modelled": ("Dots3NoteForCausalLM"),
    "Transformers-backend architecture whose config class transformers does not ship (custom code)": (
        "NanbeigeForCausalLM"
    ),
    # vllm/models/muse_spark/: the layer windows are read per platform package
    "per-platform model package (vllm/models/muse_spark nvidia / amd MuseSpark1xAttention: layer_types windows, "
    "draft layers' global_attn_cfg windows): reader not written yet": ("MuseSparkForConditionalGeneration"),
}
REFUSED: dict[str, str] = {arch: rule for rule, archs in _RULES.items() for arch in archs.split()}


def vllm_registry() -> dict:
    """vLLM 0.33's registry tables as scripts/vllm_registry.py extracted them (the shipped copy)."""
    return json.loads((Path(__file__).resolve().parent / REGISTRY_FILE).read_text())


def vllm_architectures(registry: dict | None = None) -> set[str]:
    """Every architecture of vLLM 0.33's text-generation, multimodal and Transformers-backend tables."""
    registry = vllm_registry() if registry is None else registry
    return {row["architecture"] for rows in registry["tables"].values() for row in rows}


def refusal(arch: str) -> str:
    """Why kvviz does not plan `arch`, in words for an error: vLLM's rule it does not model yet, or
    that vLLM 0.33's registry does not hold it."""
    if arch in REFUSED:
        return f"vLLM 0.33 serves it; kvviz refuses it: {REFUSED[arch]}"
    try:
        known = vllm_architectures()
    except (OSError, ValueError):  # a broken install: still one line
        known = set()
    if arch in known:
        return "vLLM 0.33 serves it; kvviz has no reader for it yet"
    return "not in vLLM 0.33's registry (_TEXT_GENERATION_MODELS / _MULTIMODAL_MODELS / _TRANSFORMERS_SUPPORTED_MODELS)"
