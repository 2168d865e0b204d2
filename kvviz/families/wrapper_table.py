"""The multimodal wrappers kvviz reads (kvviz.families.wrappers): per architecture, the vLLM 0.33 model
file (vllm/model_executor/models/<file>) and what its `__init__` does with the language model:
which part of the config it hands it (`source`), the class it asks for (`lm`, None: the text
config's own architectures, VllmConfig.with_hf_config), and the prefix its layers get (`head`:
maybe_prefix(prefix, "language_model") gives `language_model.`; `strip`: the part of the class's own
names the wrapper does not build, e.g. `model.` where it builds the bare LlamaModel).
"""

from __future__ import annotations

import dataclasses

LM = "language_model."


@dataclasses.dataclass(frozen=True)
class Wrapper:
    """How one wrapper's model file builds its language model (see the module docstring)."""

    file: str  # the model file and function read, e.g. "llava.py LlavaForConditionalGeneration.__init__"
    source: str  # "text_config", "get_text_config()", "llm_config", "thinker_config.text_config", "top config"
    lm: str | None = None  # the architectures override; None: the text config's architectures
    head: str = LM
    strip: str = ""
    # where the model file rewrites the config or picks the class from it (a version switch):
    # rule(raw, text, hf_text, name=...) -> (text, hf_text, lm or None); kvviz.families.wrapper_table_more
    rule: object = None
    rename: tuple[str, str] = ("", "")  # a part of every layer name the wrapper's own modules name otherwise

    @property
    def source_path(self) -> tuple[str, ...]:
        """The attributes walked from the top config to the text config (none for the top config and
        get_text_config())."""
        if self.source in ("get_text_config()", "top config"):
            return ()
        return tuple(self.source.split("."))


def _w(file: str, source: str = "text_config", lm: str | None = None, head: str = LM, strip: str = "") -> Wrapper:
    return Wrapper(file, source, lm, head, strip)


# The model_type a language model class is read with where the text config's own model_type is a
# multimodal one its family does not read (qwen2_vl_text, aria_text, ...): the type whose rules the
# class applies (transformers' MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, read backwards).
LM_MODEL_TYPES = {
    "Gemma4ForCausalLM": "gemma4_text",
    "Glm4MoeForCausalLM": "glm4_moe",
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe",
    "Glm4ForCausalLM": "glm4",
    "GraniteForCausalLM": "granite",
    "Phi3ForCausalLM": "phi3",
    "Exaone4ForCausalLM": "exaone4",
    "DeepseekV2ForCausalLM": "deepseek_v2",
    # transformers_utils/configs/step3_vl.py Step3VLConfig.__init__: its text_config is a Step3TextConfig
    "Step3TextForCausalLM": "step3_text",
}

_INIT = ".__init__ (init_vllm_registered_model)"
WRAPPERS: dict[str, Wrapper] = {
    # hf_config=config.text_config, prefix=maybe_prefix(prefix, "language_model"), the text config's class
    "LlavaForConditionalGeneration": _w("llava.py LlavaForConditionalGeneration" + _INIT),
    "LlavaNextForConditionalGeneration": _w("llava_next.py LlavaNextForConditionalGeneration" + _INIT),
    "LlavaNextVideoForConditionalGeneration": _w("llava_next_video.py LlavaNextVideoForConditionalGeneration" + _INIT),
    "LlavaOnevisionForConditionalGeneration": _w("llava_onevision.py LlavaOnevisionForConditionalGeneration" + _INIT),
    # bee.py / rvl.py: subclasses of LlavaOnevisionForConditionalGeneration calling its __init__
    "BeeForConditionalGeneration": _w("bee.py BeeForConditionalGeneration -> llava_onevision.py" + _INIT),
    "RForConditionalGeneration": _w("rvl.py RForConditionalGeneration -> llava_onevision.py" + _INIT),
    "Mistral3ForConditionalGeneration": _w("mistral3.py Mistral3ForConditionalGeneration" + _INIT),
    "LightOnOCRForConditionalGeneration": _w("lightonocr.py LightOnOCRForConditionalGeneration" + _INIT),
    "PixtralForConditionalGeneration": _w("pixtral.py PixtralForConditionalGeneration" + _INIT),
    "PaliGemmaForConditionalGeneration": _w("paligemma.py PaliGemmaForConditionalGeneration" + _INIT),
    "InternVLChatModel": _w("internvl.py InternVLChatModel" + _INIT),
    # h2ovl.py, nvlm_d.py, qianfan_ocr.py: subclasses of InternVLChatModel calling its __init__
    "H2OVLChatModel": _w("h2ovl.py H2OVLChatModel -> internvl.py InternVLChatModel" + _INIT),
    "NVLM_D": _w("nvlm_d.py NVLM_D_Model -> internvl.py InternVLChatModel" + _INIT),
    "QianfanOCRForConditionalGeneration": _w("qianfan_ocr.py -> internvl.py InternVLChatModel" + _INIT),
    "InternS1ForConditionalGeneration": _w("interns1.py InternS1ForConditionalGeneration" + _INIT),
    "InternVLForConditionalGeneration": _w("interns1.py InternS1ForConditionalGeneration" + _INIT),
    "SkyworkR1VChatModel": _w("skyworkr1v.py SkyworkR1VChatModel" + _INIT),
    "Eagle2_5_VLForConditionalGeneration": _w("eagle2_5_vl.py Eagle2_5_VLForConditionalGeneration" + _INIT),
    "GraniteSpeechForConditionalGeneration": _w("granite_speech.py GraniteSpeechForConditionalGeneration" + _INIT),
    "GraniteSpeechPlusForConditionalGeneration": _w(
        "granite_speech_plus.py -> granite_speech.py GraniteSpeechForConditionalGeneration" + _INIT
    ),
    "OpenVLAForActionPrediction": _w("openvla.py OpenVLAForActionPrediction" + _INIT),
    "VoxtralForConditionalGeneration": _w("voxtral.py VoxtralForConditionalGeneration" + _INIT),
    "Blip2ForConditionalGeneration": _w("blip2.py Blip2ForConditionalGeneration" + _INIT),
    "Cohere2VisionForConditionalGeneration": _w("cohere2_vision.py Cohere2VisionForConditionalGeneration" + _INIT),
    "Llama_Nemotron_Nano_VL": _w("nemotron_vl.py LlamaNemotronVLChatModel" + _INIT, "get_text_config()"),
    # the class named by the model file (architectures=[...])
    "AudioFlamingo3ForConditionalGeneration": _w(
        "audioflamingo3.py AudioFlamingo3ForConditionalGeneration" + _INIT, lm="Qwen2ForCausalLM"
    ),
    "Qwen2AudioForConditionalGeneration": _w(
        "qwen2_audio.py Qwen2AudioForConditionalGeneration" + _INIT, lm="Qwen2ForCausalLM"
    ),
    "OpenCUAForConditionalGeneration": _w("opencua.py OpenCUAForConditionalGeneration" + _INIT, lm="Qwen2ForCausalLM"),
    "FunAudioChatForConditionalGeneration": _w(
        "funaudiochat.py FunAudioChatForConditionalGeneration" + _INIT, lm="Qwen3ForCausalLM"
    ),
    "MossTranscribeDiarizeForConditionalGeneration": _w(
        "moss_transcribe_diarize.py MossTranscribeDiarizeForConditionalGeneration" + _INIT, lm="Qwen3ForCausalLM"
    ),
    "LlavaOnevision2ForConditionalGeneration": _w(
        "llava_onevision2.py LlavaOnevision2ForConditionalGeneration" + _INIT, lm="Qwen3ForCausalLM"
    ),
    "GlmAsrForConditionalGeneration": _w("glmasr.py GlmAsrForConditionalGeneration" + _INIT, lm="LlamaForCausalLM"),
    "Exaone4_5_ForConditionalGeneration": _w(
        "exaone4_5.py Exaone4_5_ForConditionalGeneration" + _INIT, "get_text_config()", lm="Exaone4ForCausalLM"
    ),
    # glm4_1v.py Glm4vForConditionalGeneration.__init__: model_type glm4v / glm_ocr -> Glm4ForCausalLM
    "Glm4vForConditionalGeneration": _w("glm4_1v.py Glm4vForConditionalGeneration" + _INIT, lm="Glm4ForCausalLM"),
    "GlmOcrForConditionalGeneration": _w(
        "glm_ocr.py -> glm4_1v.py Glm4vForConditionalGeneration" + _INIT, lm="Glm4ForCausalLM"
    ),
    "MiDashengLMModel": _w("midashenglm.py MiDashengLMModel" + _INIT, lm="Qwen2ForCausalLM", head="decoder."),
    "KananaVForConditionalGeneration": _w(
        "kanana_v.py KananaVForConditionalGeneration" + _INIT, lm="LlamaForCausalLM", head="model."
    ),
    "Qwen2_5OmniModel": _w(
        "qwen2_5_omni_thinker.py Qwen2_5OmniThinkerForConditionalGeneration" + _INIT,
        "thinker_config.text_config",
        lm="Qwen2ForCausalLM",
    ),
    "Qwen2_5OmniForConditionalGeneration": _w(
        "qwen2_5_omni_thinker.py Qwen2_5OmniThinkerForConditionalGeneration" + _INIT,
        "thinker_config.text_config",
        lm="Qwen2ForCausalLM",
    ),
    # MLA language models (DeepseekV2ForCausalLM)
    "KimiVLForConditionalGeneration": _w(
        "kimi_vl.py KimiVLForConditionalGeneration" + _INIT, lm="DeepseekV2ForCausalLM"
    ),
    "KimiK25ForConditionalGeneration": _w(
        "kimi_k25.py KimiK25ForConditionalGeneration" + _INIT, lm="DeepseekV2ForCausalLM"
    ),
    "DeepseekVLV2ForCausalLM": _w("deepseek_vl2.py DeepseekVLV2ForCausalLM" + _INIT, head="language."),
    # state-family language models
    "Lfm2VlForConditionalGeneration": _w("lfm2_vl.py Lfm2VLForConditionalGeneration" + _INIT, head="language."),
    "NemotronH_Nano_VL_V2": _w("nano_nemotron_vl.py NemotronH_Nano_VL_V2" + _INIT),
    "NemotronH_Nano_Omni_Reasoning_V3": _w("nano_nemotron_vl.py NemotronH_Nano_VL_V2" + _INIT),
    "NemotronH_Super_Omni_Reasoning_V3": _w("nano_nemotron_vl.py NemotronH_Nano_VL_V2" + _INIT),
    "NemotronH_Omni_Reasoning_V3": _w("nano_nemotron_vl.py NemotronH_Nano_VL_V2" + _INIT),
    # no hf_config: the top config, which Qwen2ForCausalLM reads through get_text_config() (qwen2.py)
    "Qwen2VLForConditionalGeneration": _w(
        "qwen2_vl.py Qwen2VLForConditionalGeneration" + _INIT, "get_text_config()", lm="Qwen2ForCausalLM"
    ),
    "Qwen2_5_VLForConditionalGeneration": _w(
        "qwen2_5_vl.py Qwen2_5_VLForConditionalGeneration" + _INIT, "get_text_config()", lm="Qwen2ForCausalLM"
    ),
    # the class constructed directly: Cls(vllm_config.with_hf_config(<config>, architectures=[...]),
    # prefix=maybe_prefix(prefix, "language_model")); a subclass of the named class with its attention
    "Qwen3VLForConditionalGeneration": _w(
        "qwen3_vl.py Qwen3VLForConditionalGeneration.__init__ (Qwen3LLMForCausalLM)", lm="Qwen3ForCausalLM"
    ),
    "Cosmos3ForConditionalGeneration": _w(
        "cosmos3.py -> qwen3_vl.py Qwen3VLForConditionalGeneration.__init__", lm="Qwen3ForCausalLM"
    ),
    "Alpamayo2Super": _w(
        "alpamayo2_super.py -> qwen3_vl.py Qwen3VLForConditionalGeneration.__init__", lm="Qwen3ForCausalLM"
    ),
    "Qwen3VLMoeForConditionalGeneration": _w(
        "qwen3_vl_moe.py Qwen3VLMoeForConditionalGeneration.__init__ (Qwen3MoeLLMForCausalLM)",
        lm="Qwen3MoeForCausalLM",
    ),
    "Qwen3OmniMoeForConditionalGeneration": _w(
        "qwen3_omni_moe_thinker.py Qwen3OmniMoeThinkerForConditionalGeneration.__init__ (Qwen3MoeLLMForCausalLM)",
        "thinker_config.text_config",
        lm="Qwen3MoeForCausalLM",
    ),
    "Qwen3ASRForConditionalGeneration": _w(
        "qwen3_asr.py Qwen3ASRForConditionalGeneration.__init__ (Qwen3ForCausalLM)",
        "thinker_config.text_config",
        lm="Qwen3ForCausalLM",
    ),
    "Qwen3ASRRealtimeGeneration": _w(
        "qwen3_asr_realtime.py -> qwen3_asr.py Qwen3ASRForConditionalGeneration.__init__",
        "thinker_config.text_config",
        lm="Qwen3ForCausalLM",
    ),
    "Granite4VisionForConditionalGeneration": _w(
        "granite4_vision.py Granite4VisionForConditionalGeneration.__init__ (Granite4VisionLLMForCausalLM)",
        lm="GraniteForCausalLM",
    ),
    # AriaTextModel(LlamaModel) under maybe_prefix(prefix, "language_model.model"): Llama's own names
    "AriaForConditionalGeneration": _w(
        "aria.py AriaForConditionalGeneration.__init__ (AriaTextModel)", lm="LlamaForCausalLM"
    ),
    # Idefics3Model under "model", its LlamaModel under "text_model": model.text_model.layers.N...
    "Idefics3ForConditionalGeneration": _w(
        "idefics3.py Idefics3Model.__init__ (LlamaModel)",
        lm="LlamaForCausalLM",
        head="model.text_model.",
        strip="model.",
    ),
    "SmolVLMForConditionalGeneration": _w(
        "smolvlm.py -> idefics3.py Idefics3Model.__init__ (LlamaModel)",
        lm="LlamaForCausalLM",
        head="model.text_model.",
        strip="model.",
    ),
    # the language model built from the top config itself
    "Phi4ForCausalLMV": _w("phi4siglip.py Phi4ForCausalLMV" + _INIT, "top config", lm="Phi3ForCausalLM"),
    "DotsOCRForCausalLM": _w("dots_ocr.py DotsOCRForCausalLM" + _INIT, "top config", lm="Qwen2ForCausalLM"),
    # phi3v.py Phi3VForCausalLM.__init__: prefix="" "because default prefix of LlamaForCausalLM is 'model'"
    "Phi3VForCausalLM": _w("phi3v.py Phi3VForCausalLM" + _INIT, "top config", lm="LlamaForCausalLM", head=""),
    # phi4mm.py Phi4MMForCausalLM.__init__: LlamaModel(vllm_config, prefix=maybe_prefix(prefix, "model"))
    "Phi4MMForCausalLM": _w(
        "phi4mm.py Phi4MMForCausalLM.__init__ (LlamaModel)", "top config", lm="LlamaForCausalLM", head=""
    ),
    # keye.py BaseKeyeModule.__init__: architectures=["Qwen3ForCausalLM"], no hf_config: the top config,
    # which Qwen3ForCausalLM reads as it is (qwen3.py Qwen3ForCausalLM.__init__)
    "KeyeForConditionalGeneration": _w("keye.py BaseKeyeModule" + _INIT, "top config", lm="Qwen3ForCausalLM"),
    "KeyeVL1_5ForConditionalGeneration": _w(
        "keye_vl1_5.py -> keye.py BaseKeyeModule" + _INIT, "top config", lm="Qwen3ForCausalLM"
    ),
    # kimi_audio.py KimiAudioForConditionalGeneration.__init__: with_hf_config(self.config, ["Qwen2ForCausalLM"])
    "MoonshotKimiaForCausalLM": _w(
        "kimi_audio.py KimiAudioForConditionalGeneration" + _INIT, "top config", lm="Qwen2ForCausalLM"
    ),
    "BagelForConditionalGeneration": _w(
        "bagel.py BagelForConditionalGeneration" + _INIT, "llm_config", lm="Qwen2ForCausalLM"
    ),
    # ovis2_5.py Ovis2_5.__init__: with_hf_config(config.text_config), prefix=maybe_prefix(prefix, "llm")
    "Ovis2_5": _w("ovis2_5.py Ovis2_5" + _INIT, head="llm."),
    "Ovis2_6ForCausalLM": _w("ovis2_5.py Ovis2_5" + _INIT, head="llm."),
    "Ovis2_6_MoeForCausalLM": _w("ovis2_5.py Ovis2_5" + _INIT, head="llm."),
    # registered once the language model's own architecture is (wrappers.planned_wrappers)
    "Gemma4ForConditionalGeneration": _w("gemma4_mm.py Gemma4ForConditionalGeneration" + _INIT, lm="Gemma4ForCausalLM"),
    "Glm4vMoeForConditionalGeneration": _w(
        "glm4_1v.py Glm4vForConditionalGeneration" + _INIT + ": model_type glm4v_moe", lm="Glm4MoeForCausalLM"
    ),
    # openpangu_vl.py OpenPanguVLForConditionalGeneration.__init__: architectures=["PanguEmbeddedForCausalLM"],
    # no hf_config (the top config), prefix=maybe_prefix(prefix, "openpangu.language_model")
    "OpenPanguVLForConditionalGeneration": _w(
        "openpangu_vl.py OpenPanguVLForConditionalGeneration" + _INIT,
        "top config",
        lm="PanguEmbeddedForCausalLM",
        head="openpangu.language_model.",
    ),
    # issue 27, decc: language models of decoder_kinds. step3_vl.py / step_vl.py / step3p7.py: hf_config=
    # config.text_config, its own architectures (Step3TextForCausalLM, Step3p5ForCausalLM, ...), prefix
    # "language_model"; Step3TextForCausalLM builds its layers at f"{prefix}.layers" (Wrapper.layer_name)
    "Step3VLForConditionalGeneration": _w("step3_vl.py Step3VLForConditionalGeneration" + _INIT),
    "StepVLForConditionalGeneration": _w("step_vl.py StepVLForConditionalGeneration" + _INIT),
    "Step3p7ForConditionalGeneration": _w("step3p7.py Step3p7ForConditionalGeneration" + _INIT),
    # mimo_v2_omni.py MiMoV2OmniForCausalLM.__init__: MiMoV2FlashForCausalLM(vllm_config, prefix=
    # maybe_prefix(prefix, "language_model")), which reads hf_config.get_text_config() (mimo_v2.py MiMoV2Model)
    "MiMoV2OmniForCausalLM": _w(
        "mimo_v2_omni.py MiMoV2OmniForCausalLM.__init__ (MiMoV2FlashForCausalLM)",
        "get_text_config()",
        lm="MiMoV2FlashForCausalLM",
    ),
    # gemma4_unified.py: hf_config=config.text_config, architectures=["Gemma4ForCausalLM"]
    "Gemma4UnifiedForConditionalGeneration": _w(
        "gemma4_unified.py Gemma4UnifiedForConditionalGeneration" + _INIT, lm="Gemma4ForCausalLM"
    ),
}

# issue 27 (mla): the DeepSeek-OCR wrappers. transformers_utils/configs/deepseek_vl2.py DeepseekVLV2Config reads
# config.json's language_config into DeepseekVLV2TextConfig (kv_lora_rank may be None: no MLA); each builds it
# with init_vllm_registered_model(hf_config=self.text_config, prefix=maybe_prefix(prefix, "language_model"))
WRAPPERS["DeepseekOCRForCausalLM"] = _w("deepseek_ocr.py DeepseekOCRForCausalLM" + _INIT, "language_config")
WRAPPERS["DeepseekOCR2ForCausalLM"] = _w("deepseek_ocr2.py DeepseekOCR2ForCausalLM" + _INIT, "language_config")
# unlimited_ocr.py UnlimitedOCRForCausalLM(DeepseekOCRForCausalLM): the same __init__; its rswa_window makes
# DeepseekAttention an RSWAAttention, whose RSWASpec the planner treats as a FullAttentionSpec
WRAPPERS["UnlimitedOCRForCausalLM"] = _w(
    "unlimited_ocr.py UnlimitedOCRForCausalLM -> deepseek_ocr.py DeepseekOCRForCausalLM" + _INIT, "language_config"
)
# vllm/models/deepseek_v4/common/vl_model.py DeepseekV4ForConditionalGeneration.__init__ (CUDA / ROCm; the CPU and
# XPU builds import vl_stub.py, which refuses): init_vllm_registered_model(hf_config=config,
# prefix=maybe_prefix(prefix, "language_model"), architectures=["DeepseekV4ForCausalLM"]): the whole config
WRAPPERS["DeepseekV4ForConditionalGeneration"] = _w(
    "deepseek_v4/common/vl_model.py DeepseekV4ForConditionalGeneration" + _INIT,
    "top config",
    lm="DeepseekV4ForCausalLM",
)
