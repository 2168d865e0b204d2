"""SGLang 0.5.23's defaults (arg_groups/fields/schedule.py, overrides.py, memory_hook.py on an
H200-class GPU) and the architecture lists its model runner checks by name."""

from __future__ import annotations

from kvviz.base.defaults import GIB

VERSION = "0.5.23"


GB = GIB  # SGLang's GB in its logs and its GiB arithmetic


SWA_FULL_TOKENS_RATIO = 0.8  # arg_groups/fields/schedule.py swa_full_tokens_ratio fallback


MAMBA_FULL_MEMORY_RATIO = 0.9  # arg_groups/fields/schedule.py mamba_full_memory_ratio fallback


DEFAULT_PAGE_SIZE = 1  # arg_groups/overrides.py _page_size_default on CUDA


CHUNKED_PREFILL_SIZE = 8192  # arg_groups/memory_hook.py: H20 / H200 (< 160 GiB)


MAX_PREFILL_TOKENS = 16384  # arg_groups/fields/schedule.py max_prefill_tokens


# mem_cache/kv_cache_configurator.py MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO
MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO = 3


# configs/model_config.py is_hybrid_swa_model (hybrid_swa_archs, SWA_SINK_ARCHS, MIMO_V2_MODEL_ARCHS): the
# architectures whose sliding layers get their own SWA pool.
HYBRID_SWA_ARCHS = frozenset(
    {
        "BeamForCausalLM",
        "Llama4ForConditionalGeneration",
        "DeepseekV4ForCausalLM",
        "DeepseekV4ForCausalLMNextN",
        "DeepseekV4ForCausalLMDSpark",
        "GptOssForCausalLM",
        "GraniteSWAForCausalLM",
        "GraniteMoeSWAForCausalLM",
        "IQuestQ1ForCausalLM",
        "IQuestQ1MTP",
        "MiMoV2MTP",
        "Step3p5ForCausalLM",
        "Step3p5MTP",
        "Step3p7ForConditionalGeneration",
        "Gemma4ForCausalLM",
        "Gemma4ForConditionalGeneration",
        "EmbeddingGemma2Model",
        "Gemma4UnifiedForConditionalGeneration",
        "DiffusionGemmaForBlockDiffusion",
        "LagunaForCausalLM",
        "MellumForCausalLM",
        "MuseGlimmerForCausalLM",
        "MuseGlimmerForConditionalGeneration",
        "InklingForConditionalGeneration",
        "InklingForConditionalGenerationMTP",
        "UnlimitedOCRForCausalLM",
    }
)


# arg_groups/model_overrides/gemma2_gemma3.py (and exaone.py, olmo2.py) force disable_hybrid_swa_memory:
# these are sized as all full attention even where their sliding layers would allow less.
DISABLE_HYBRID_SWA_ARCHS = frozenset(
    {
        "Gemma2ForCausalLM",
        "Gemma3ForCausalLM",
        "Gemma3ForConditionalGeneration",
        "Gemma3nForCausalLM",
        "Gemma3nForConditionalGeneration",
    }
)


# arg_groups/overrides.py _MAMBA_EXTRA_BUFFER_ARCHS: with radix cache and overlap (or page > 1) on,
# the 'auto' mamba radix cache strategy resolves to extra_buffer (_mamba_radix_cache_resolution).
MAMBA_EXTRA_BUFFER_ARCHS = frozenset(
    {
        "KimiLinearForCausalLM",
        "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration",
        "Qwen3_5MoeForCausalLM",
        "Qwen3_5ForCausalLM",
        "Qwen3NextForCausalLM",
        "Qwen4ExpForConditionalGeneration",
        "InternS2PreviewForConditionalGeneration",
        "MiniCPMV4_6ForConditionalGeneration",
        "MiniCPMV4_7ForConditionalGeneration",
        "BailingMoeV2_5ForCausalLM",
        "BailingMoeV3ForCausalLM",
        "BailingMoeV3VLForConditionalGeneration",
        "FalconH1ForCausalLM",
        "GraniteMoeHybridForCausalLM",
        "Glm5NextForConditionalGeneration",
        "NemotronHForCausalLM",
        "NemotronHPuzzleForCausalLM",
        "NemotronH_Omni_Reasoning_V3",
    }
)


# Gemma 3n shares KV between its last layers (gemma3n_causal.py: is_kv_shared_layer reads another
# layer's cache), yet SGLang's pool still has one buffer per layer:
# model_executor/model_runner_components/layer_setup.py resolve_layer_indices gives
# num_effective_layers = end_layer - start_layer, with no KV-sharing reduction.
KV_SHARING_ARCHS = frozenset({"Gemma3nForConditionalGeneration", "Gemma3nForCausalLM"})


TORCH_DTYPE = {
    "bf16": "torch.bfloat16",
    "fp16": "torch.float16",
    "fp32": "torch.float32",
    "fp8": "torch.float8_e4m3fn",
}


SSM = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
