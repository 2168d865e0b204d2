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
    # kvviz.families.wrappers plans every wrapper of wrapper_table.WRAPPERS; these are left, each for its rule
    # step_vl.py StepVLForConditionalGeneration.__init__: init_vllm_registered_model(hf_config=config.text_config),
    # a Step3TextConfig (transformers_utils/configs/step3_vl.py Step3VLConfig) -> Step3TextForCausalLM
    "multimodal wrapper whose language model kvviz does not plan yet (Step3TextForCausalLM)": (
        "StepVLForConditionalGeneration"
    ),
    "multimodal wrapper whose text config comes from another checkout or a version switch (text_model_id, "
    "MiniCPM-V version, Isaac's rewritten rope): reader not written yet": (
        "UltravoxModel MiniCPMO MiniCPMV IsaacForConditionalGeneration"
    ),
    "multimodal wrapper building its language model from a config vLLM rewrites (Ovis llm_config, "
    "MossAudio language_config, PaddleOCR-VL top config): not read yet": (
        "Ovis MossAudioModel PaddleOCRVLForConditionalGeneration"
    ),
    "speech encoder + bare decoder model under model.decoder (FireRedASR2, FunASR): prefix not read yet": (
        "FireRedASR2ForConditionalGeneration FunASRForConditionalGeneration"
    ),
    "DeepSeek-OCR text config (DeepseekV2 with or without MLA by use_mla): rule not written yet": (
        "DeepseekOCRForCausalLM DeepseekOCR2ForCausalLM UnlimitedOCRForCausalLM"
    ),
    "own text model class (MuseGlimmerModel under the wrapper): names not read yet": (
        "MuseGlimmerForConditionalGeneration"
    ),
    "decoder architecture name not registered yet (key mapping in docs/registry-work.md)": (
        "AfmoeForCausalLM ApertusForCausalLM BailingMoeForCausalLM BailingMoeV2ForCausalLM CohereForCausalLM "
        "Cohere2MoeForCausalLM Ernie4_5ForCausalLM Ernie4_5_MoeForCausalLM Exaone4ForCausalLM "
        "ExaoneMoeForCausalLM ExaoneMoEForCausalLM GemmaForCausalLM Glm4ForCausalLM "
        "GraniteForCausalLM GraniteMoeForCausalLM GraniteMoeSharedForCausalLM GraniteMoeSWAForCausalLM "
        "GraniteSWAForCausalLM HYV3ForCausalLM HyperCLOVAXForCausalLM InternLM3ForCausalLM "
        "IQuestCoderForCausalLM LagunaForCausalLM LLaMAForCausalLM Ministral3ForCausalLM "
        "MiMoForCausalLM NemotronForCausalLM MuseGlimmerForCausalLM Param2MoEForCausalLM PhiMoEForCausalLM "
        "SolarForCausalLM TeleChat2ForCausalLM TeleChat3ForCausalLM TeleFLMForCausalLM"
    ),
    "head size hidden_size // num_attention_heads whatever head_dim says: rule not generalised yet": (
        "BloomForCausalLM DeepseekForCausalLM GPT2LMHeadModel GPTJForCausalLM InternLM2ForCausalLM "
        "MiniCPMForCausalLM OlmoeForCausalLM OPTForCausalLM OrionForCausalLM Step1ForCausalLM "
        "StableLmForCausalLM"
    ),
    "hybrid state layers: state-family reader not written yet": (
        "AliceAIForCausalLM BailingMoeV2_5ForCausalLM BailingMoeV3ForCausalLM InklingForCausalLM "
        "BailingMoeV3VLForConditionalGeneration InternS2MobiusForConditionalGeneration "
        "KimiK3ForConditionalGeneration InklingForConditionalGeneration"
    ),
    "own attention class: kwargs (KV heads, window) not read yet": (
        "K2HorizonForCausalLM Ernie4_5_VLMoeForConditionalGeneration Molmo2ForConditionalGeneration "
        "Moondream3ForCausalLM HfMoondream MuseSparkForConditionalGeneration "
        "CohereCompassForConditionalGeneration Cosmos3EdgeForConditionalGeneration "
        "InternS1ProForConditionalGeneration"
    ),
    "multimodal wrapper around a Qwen3.5 LM (MiniCPM-V 4.6 / 4.7 / OCR): wrapper prefix not read yet": (
        "MiniCPMV4_7ForConditionalGeneration MiniCPMOcrForConditionalGeneration MiniCPMV4_6ForConditionalGeneration"
    ),
    "per-kind KV heads / head size: rule not written yet": (
        "MiMoV2FlashForCausalLM Step3p5ForCausalLM MiMoV2OmniForCausalLM "
        "Step3p7ForConditionalGeneration MiMoV2ForCausalLM Gemma4ForConditionalGeneration "
        "Gemma4UnifiedForConditionalGeneration"
    ),
    # model_arch_config_convertor.py is_deepseek_mla lacks sarvam_mla: ModelConfig.use_mla is False
    "MLA layers of a model type vLLM's use_mla does not list (sarvam_mla): backend / block size not modelled": (
        "SarvamMLAForCausalLM"
    ),
    "encoder-decoder cross-attention (not in the KV pool)": (
        "CohereAsrForConditionalGeneration NemotronParseForConditionalGeneration RadioMBartPrefixForCausalLM "
        "WhisperForConditionalGeneration"
    ),
    "state-family architecture name not registered yet": ("InternS2PreviewForConditionalGeneration"),
    "KV heads read from multi_query_group_num: reader not written yet": (
        "ChatGLMModel ChatGLMForConditionalGeneration GLM4VForCausalLM"
    ),
    "looped / stacked layers: layer count and names not read yet": ("IQuestLoopCoderForCausalLM"),
    "static-sink attention (extra KV tokens): rule not written yet": (
        "PanguEmbeddedForCausalLM PanguProMoEV2ForCausalLM OpenPanguVLForConditionalGeneration"
    ),
    "KV sharing across layers (kv_sharing_target_layer_name): rule not written yet": ("FlintForCausalLM"),
    "per-layer window list: rule not written yet": ("DomynEdgeForCausalLM Plamo3ForCausalLM"),
    "QSA sparse-attention cache (own indexer) not modelled": ("Qwen4ExpForCausalLM Qwen4ExpForConditionalGeneration"),
    "custom code config with no public schema": ("Glm5NextForCausalLM Glm5NextForConditionalGeneration"),
    "two MLA caches a layer: rule not written yet": ("LongcatFlashNgramForCausalLM LongcatFlashForCausalLM"),
    "Step3 KV heads (1, not TP-split): rule not written yet": ("Step3TextForCausalLM Step3VLForConditionalGeneration"),
    "sparse-attention index cache not modelled": ("MiniMaxM3SparseForCausalLM MiniMaxM3SparseForConditionalGeneration"),
    "sparse summary / tail-ring caches not modelled": ("Step5ForCausalLM Step5ForConditionalGeneration"),
    "DeepSeek V4 under a wrapper / V4.1 config: not read yet": (
        "DeepseekV4ForConditionalGeneration DeepseekV41ForCausalLM"
    ),
    "KV heads in nested attn_config: reader not written yet": ("DbrxForCausalLM"),
    "per-layer KV heads / attention-free layers (block_configs): rule not written yet": ("DeciLMForCausalLM"),
    "layer names other than model.layers.N.self_attn.attn: reader not written yet": ("ExaoneForCausalLM"),
    "chunk_lookback windows: rule not confirmed": ("Rnj1ForCausalLM"),
    "causal audio encoder that may register KV: not confirmed": ("VoxtralRealtimeGeneration"),
    "own sparse-attention LM: cache layout not read yet": ("Dots3NoteForCausalLM"),
    "block-diffusion (non-causal) decoding: cache rule not modelled": ("DiffusionGemmaForBlockDiffusion"),
    "own attention class and layer names: reader not written yet": ("MolmoForCausalLM"),
    # registry.py _TRANSFORMERS_SUPPORTED_MODELS: TransformersMultiModalForCausalLM (transformers/multimodal.py)
    "multimodal model of vLLM's Transformers backend (transformers/multimodal.py): language model's module "
    "names not read yet": (
        "Emu3ForConditionalGeneration HunYuanVLForConditionalGeneration VibeVoiceAsrForConditionalGeneration"
    ),
    "Transformers-backend architecture whose config class transformers does not ship (custom code)": (
        "NanbeigeForCausalLM"
    ),
    # issue 27 (helper mm): the multimodal wrappers of the work list still refused, each for its rule
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
