"""The multimodal wrappers kvviz plans (kvviz.families.wrappers): one `WrapperRecord` per architecture of vLLM
0.33's registry whose model file builds a language model another family reads, each citing that file
(vllm/model_executor/models/<file>) and what its `__init__` does with the language model: which part of
the config it hands it (`source`), the class it asks for (`lm`, None: the text config's own architectures,
VllmConfig.with_hf_config), the prefix its layers get (`head`: maybe_prefix(prefix, "language_model") gives
`language_model.`; `strip`: the part of the class's own names the wrapper does not build, e.g. `model.` where
it builds the bare LlamaModel), and where it rewrites the config or picks the class (`rule`; the record type
and the rules: kvviz.families.wrapper_rules).
"""

from __future__ import annotations

from kvviz.families import wrapper_rules as rules
from kvviz.families.wrapper_rules import WrapperRecord

_I = ".__init__ (init_vllm_registered_model)"
TOP, TEXT, THINKER = "top config", "get_text_config()", "thinker_config.text_config"
LLAMA = "LlamaForCausalLM"
QWEN2 = "Qwen2ForCausalLM"
QWEN3 = "Qwen3ForCausalLM"
QWEN3_MOE = "Qwen3MoeForCausalLM"


def _w(name: str, file: str, *aliases: str, **fields) -> WrapperRecord:
    """The record of `name` (and its aliases: registry names of the same class) whose model file is `file`: its
    function (`__init__ (init_vllm_registered_model)` where `file` names none)."""
    function = "" if "__init__" in file or "__new__" in file else _I
    return WrapperRecord(name=name, aliases=aliases, vllm=file + function, **fields)


RECORDS: tuple[WrapperRecord, ...] = (
    # hf_config=config.text_config, prefix=maybe_prefix(prefix, "language_model"), the text config's class
    _w("LlavaForConditionalGeneration", "llava.py LlavaForConditionalGeneration"),
    _w("LlavaNextForConditionalGeneration", "llava_next.py LlavaNextForConditionalGeneration"),
    _w("LlavaNextVideoForConditionalGeneration", "llava_next_video.py LlavaNextVideoForConditionalGeneration"),
    _w("LlavaOnevisionForConditionalGeneration", "llava_onevision.py LlavaOnevisionForConditionalGeneration"),
    # bee.py / rvl.py: subclasses of LlavaOnevisionForConditionalGeneration calling its __init__
    _w("BeeForConditionalGeneration", "bee.py BeeForConditionalGeneration -> llava_onevision.py"),
    _w("RForConditionalGeneration", "rvl.py RForConditionalGeneration -> llava_onevision.py"),
    _w("Mistral3ForConditionalGeneration", "mistral3.py Mistral3ForConditionalGeneration"),
    _w("LightOnOCRForConditionalGeneration", "lightonocr.py LightOnOCRForConditionalGeneration"),
    _w("PixtralForConditionalGeneration", "pixtral.py PixtralForConditionalGeneration"),
    _w("PaliGemmaForConditionalGeneration", "paligemma.py PaliGemmaForConditionalGeneration"),
    _w("InternVLChatModel", "internvl.py InternVLChatModel"),
    # h2ovl.py, nvlm_d.py, qianfan_ocr.py: subclasses of InternVLChatModel calling its __init__
    _w("H2OVLChatModel", "h2ovl.py H2OVLChatModel -> internvl.py InternVLChatModel"),
    _w("NVLM_D", "nvlm_d.py NVLM_D_Model -> internvl.py InternVLChatModel"),
    _w("QianfanOCRForConditionalGeneration", "qianfan_ocr.py -> internvl.py InternVLChatModel"),
    _w(
        "InternS1ForConditionalGeneration",
        "interns1.py InternS1ForConditionalGeneration",
        "InternVLForConditionalGeneration",
    ),
    _w("SkyworkR1VChatModel", "skyworkr1v.py SkyworkR1VChatModel"),
    _w("Eagle2_5_VLForConditionalGeneration", "eagle2_5_vl.py Eagle2_5_VLForConditionalGeneration"),
    _w("GraniteSpeechForConditionalGeneration", "granite_speech.py GraniteSpeechForConditionalGeneration"),
    _w(
        "GraniteSpeechPlusForConditionalGeneration",
        "granite_speech_plus.py -> granite_speech.py GraniteSpeechForConditionalGeneration",
    ),
    _w("OpenVLAForActionPrediction", "openvla.py OpenVLAForActionPrediction"),
    _w("VoxtralForConditionalGeneration", "voxtral.py VoxtralForConditionalGeneration"),
    _w("Blip2ForConditionalGeneration", "blip2.py Blip2ForConditionalGeneration"),
    _w("Cohere2VisionForConditionalGeneration", "cohere2_vision.py Cohere2VisionForConditionalGeneration"),
    _w("Llama_Nemotron_Nano_VL", "nemotron_vl.py LlamaNemotronVLChatModel", source=TEXT),
    # the class named by the model file (architectures=[...])
    _w("AudioFlamingo3ForConditionalGeneration", "audioflamingo3.py AudioFlamingo3ForConditionalGeneration", lm=QWEN2),
    _w("Qwen2AudioForConditionalGeneration", "qwen2_audio.py Qwen2AudioForConditionalGeneration", lm=QWEN2),
    _w("OpenCUAForConditionalGeneration", "opencua.py OpenCUAForConditionalGeneration", lm=QWEN2),
    _w("FunAudioChatForConditionalGeneration", "funaudiochat.py FunAudioChatForConditionalGeneration", lm=QWEN3),
    _w(
        "MossTranscribeDiarizeForConditionalGeneration",
        "moss_transcribe_diarize.py MossTranscribeDiarizeForConditionalGeneration",
        lm=QWEN3,
    ),
    _w(
        "LlavaOnevision2ForConditionalGeneration",
        "llava_onevision2.py LlavaOnevision2ForConditionalGeneration",
        lm=QWEN3,
    ),
    _w("GlmAsrForConditionalGeneration", "glmasr.py GlmAsrForConditionalGeneration", lm=LLAMA),
    _w(
        "Exaone4_5_ForConditionalGeneration",
        "exaone4_5.py Exaone4_5_ForConditionalGeneration",
        source=TEXT,
        lm="Exaone4ForCausalLM",
    ),
    # glm4_1v.py Glm4vForConditionalGeneration.__init__: model_type glm4v / glm_ocr -> Glm4ForCausalLM
    _w("Glm4vForConditionalGeneration", "glm4_1v.py Glm4vForConditionalGeneration", lm="Glm4ForCausalLM"),
    _w(
        "GlmOcrForConditionalGeneration", "glm_ocr.py -> glm4_1v.py Glm4vForConditionalGeneration", lm="Glm4ForCausalLM"
    ),
    _w("MiDashengLMModel", "midashenglm.py MiDashengLMModel", lm=QWEN2, head="decoder."),
    _w("KananaVForConditionalGeneration", "kanana_v.py KananaVForConditionalGeneration", lm=LLAMA, head="model."),
    _w(
        "Qwen2_5OmniModel",
        "qwen2_5_omni_thinker.py Qwen2_5OmniThinkerForConditionalGeneration",
        "Qwen2_5OmniForConditionalGeneration",
        source=THINKER,
        lm=QWEN2,
    ),
    _w("KimiVLForConditionalGeneration", "kimi_vl.py KimiVLForConditionalGeneration", lm="DeepseekV2ForCausalLM"),
    _w("KimiK25ForConditionalGeneration", "kimi_k25.py KimiK25ForConditionalGeneration", lm="DeepseekV2ForCausalLM"),
    _w("DeepseekVLV2ForCausalLM", "deepseek_vl2.py DeepseekVLV2ForCausalLM", head="language."),
    _w("Lfm2VlForConditionalGeneration", "lfm2_vl.py Lfm2VLForConditionalGeneration", head="language."),
    _w(
        "NemotronH_Nano_VL_V2",
        "nano_nemotron_vl.py NemotronH_Nano_VL_V2",
        "NemotronH_Nano_Omni_Reasoning_V3",
        "NemotronH_Super_Omni_Reasoning_V3",
        "NemotronH_Omni_Reasoning_V3",
    ),
    # no hf_config: the top config, which Qwen2ForCausalLM reads through get_text_config() (qwen2.py)
    _w("Qwen2VLForConditionalGeneration", "qwen2_vl.py Qwen2VLForConditionalGeneration", source=TEXT, lm=QWEN2),
    _w("Qwen2_5_VLForConditionalGeneration", "qwen2_5_vl.py Qwen2_5_VLForConditionalGeneration", source=TEXT, lm=QWEN2),
    # the class constructed directly, Cls(vllm_config.with_hf_config(...)) under "language_model"
    _w(
        "Qwen3VLForConditionalGeneration",
        "qwen3_vl.py Qwen3VLForConditionalGeneration.__init__ (Qwen3LLMForCausalLM)",
        lm=QWEN3,
    ),
    _w(
        "Cosmos3ForConditionalGeneration",
        "cosmos3.py -> qwen3_vl.py Qwen3VLForConditionalGeneration.__init__",
        lm=QWEN3,
    ),
    _w("Alpamayo2Super", "alpamayo2_super.py -> qwen3_vl.py Qwen3VLForConditionalGeneration.__init__", lm=QWEN3),
    _w(
        "Qwen3VLMoeForConditionalGeneration",
        "qwen3_vl_moe.py Qwen3VLMoeForConditionalGeneration.__init__ (Qwen3MoeLLMForCausalLM)",
        lm=QWEN3_MOE,
    ),
    _w(
        "Qwen3OmniMoeForConditionalGeneration",
        "qwen3_omni_moe_thinker.py Qwen3OmniMoeThinkerForConditionalGeneration.__init__ (Qwen3MoeLLMForCausalLM)",
        source=THINKER,
        lm=QWEN3_MOE,
    ),
    _w(
        "Qwen3ASRForConditionalGeneration",
        "qwen3_asr.py Qwen3ASRForConditionalGeneration.__init__ (Qwen3ForCausalLM)",
        source=THINKER,
        lm=QWEN3,
    ),
    _w(
        "Qwen3ASRRealtimeGeneration",
        "qwen3_asr_realtime.py -> qwen3_asr.py Qwen3ASRForConditionalGeneration.__init__",
        source=THINKER,
        lm=QWEN3,
    ),
    _w(
        "Granite4VisionForConditionalGeneration",
        "granite4_vision.py Granite4VisionForConditionalGeneration.__init__ (Granite4VisionLLMForCausalLM)",
        lm="GraniteForCausalLM",
    ),
    # AriaTextModel(LlamaModel) under maybe_prefix(prefix, "language_model.model"): Llama's own names
    _w("AriaForConditionalGeneration", "aria.py AriaForConditionalGeneration.__init__ (AriaTextModel)", lm=LLAMA),
    # Idefics3Model under "model", its LlamaModel under "text_model"
    _w(
        "Idefics3ForConditionalGeneration",
        "idefics3.py Idefics3Model.__init__ (LlamaModel)",
        lm=LLAMA,
        head="model.text_model.",
        strip="model.",
    ),
    _w(
        "SmolVLMForConditionalGeneration",
        "smolvlm.py -> idefics3.py Idefics3Model.__init__ (LlamaModel)",
        lm=LLAMA,
        head="model.text_model.",
        strip="model.",
    ),
    # the language model built from the top config itself
    _w("Phi4ForCausalLMV", "phi4siglip.py Phi4ForCausalLMV", source=TOP, lm="Phi3ForCausalLM"),
    _w("DotsOCRForCausalLM", "dots_ocr.py DotsOCRForCausalLM", source=TOP, lm=QWEN2),
    # prefix="" "because default prefix of LlamaForCausalLM is 'model'"
    _w("Phi3VForCausalLM", "phi3v.py Phi3VForCausalLM", source=TOP, lm=LLAMA, head=""),
    # phi4mm.py Phi4MMForCausalLM.__init__: LlamaModel(vllm_config, prefix=maybe_prefix(prefix, "model"))
    _w("Phi4MMForCausalLM", "phi4mm.py Phi4MMForCausalLM.__init__ (LlamaModel)", source=TOP, lm=LLAMA, head=""),
    # keye.py BaseKeyeModule.__init__: architectures=["Qwen3ForCausalLM"], no hf_config: the top config
    _w("KeyeForConditionalGeneration", "keye.py BaseKeyeModule", source=TOP, lm=QWEN3),
    _w("KeyeVL1_5ForConditionalGeneration", "keye_vl1_5.py -> keye.py BaseKeyeModule", source=TOP, lm=QWEN3),
    # kimi_audio.py KimiAudioForConditionalGeneration.__init__: with_hf_config(self.config, ["Qwen2ForCausalLM"])
    _w("MoonshotKimiaForCausalLM", "kimi_audio.py KimiAudioForConditionalGeneration", source=TOP, lm=QWEN2),
    _w("BagelForConditionalGeneration", "bagel.py BagelForConditionalGeneration", source="llm_config", lm=QWEN2),
    # ovis2_5.py Ovis2_5.__init__: with_hf_config(config.text_config), prefix=maybe_prefix(prefix, "llm")
    _w("Ovis2_5", "ovis2_5.py Ovis2_5", "Ovis2_6ForCausalLM", "Ovis2_6_MoeForCausalLM", head="llm."),
    # registered once the language model's own architecture is (wrappers.planned_wrappers)
    _w("Gemma4ForConditionalGeneration", "gemma4_mm.py Gemma4ForConditionalGeneration", lm="Gemma4ForCausalLM"),
    _w(
        "Glm4vMoeForConditionalGeneration",
        "glm4_1v.py Glm4vForConditionalGeneration.__init__ (init_vllm_registered_model): model_type glm4v_moe",
        lm="Glm4MoeForCausalLM",
    ),
    # no hf_config (the top config), prefix=maybe_prefix(prefix, "openpangu.language_model")
    _w(
        "OpenPanguVLForConditionalGeneration",
        "openpangu_vl.py OpenPanguVLForConditionalGeneration",
        source=TOP,
        lm="PanguEmbeddedForCausalLM",
        head="openpangu.language_model.",
    ),
    # text_config's own architectures; Step3TextForCausalLM's layers at f"{prefix}.layers" (WrappedConfig.layer_name)
    _w("Step3VLForConditionalGeneration", "step3_vl.py Step3VLForConditionalGeneration"),
    _w("StepVLForConditionalGeneration", "step_vl.py StepVLForConditionalGeneration"),
    _w("Step3p7ForConditionalGeneration", "step3p7.py Step3p7ForConditionalGeneration"),
    # MiMoV2FlashForCausalLM under "language_model", which reads hf_config.get_text_config() (mimo_v2.py)
    _w(
        "MiMoV2OmniForCausalLM",
        "mimo_v2_omni.py MiMoV2OmniForCausalLM.__init__ (MiMoV2FlashForCausalLM)",
        source=TEXT,
        lm="MiMoV2FlashForCausalLM",
    ),
    # gemma4_unified.py: hf_config=config.text_config, architectures=["Gemma4ForCausalLM"]
    _w(
        "Gemma4UnifiedForConditionalGeneration",
        "gemma4_unified.py Gemma4UnifiedForConditionalGeneration",
        lm="Gemma4ForCausalLM",
    ),
    # deepseek_vl2.py DeepseekVLV2Config: language_config as DeepseekVLV2TextConfig (kv_lora_rank may be None)
    _w("DeepseekOCRForCausalLM", "deepseek_ocr.py DeepseekOCRForCausalLM", source="language_config"),
    _w("DeepseekOCR2ForCausalLM", "deepseek_ocr2.py DeepseekOCR2ForCausalLM", source="language_config"),
    # its rswa_window makes DeepseekAttention an RSWAAttention: an RSWASpec, a FullAttentionSpec to the planner
    _w(
        "UnlimitedOCRForCausalLM",
        "unlimited_ocr.py UnlimitedOCRForCausalLM -> deepseek_ocr.py DeepseekOCRForCausalLM",
        source="language_config",
    ),
    # CUDA / ROCm (the CPU and XPU builds' vl_stub.py refuses): the whole config to DeepseekV4ForCausalLM
    _w(
        "DeepseekV4ForConditionalGeneration",
        "deepseek_v4/common/vl_model.py DeepseekV4ForConditionalGeneration",
        source=TOP,
        lm="DeepseekV4ForCausalLM",
    ),
    # the class by version (MiniCPMV.__new__ / MiniCPMO.__new__), init_llm of the top config under "llm"
    _w(
        "MiniCPMV",
        "minicpmv.py MiniCPMV.__new__ -> MiniCPMVBaseModel.__init__ (init_llm)",
        source=TOP,
        head="llm.",
        rule=rules.minicpmv_llm,
    ),
    _w(
        "MiniCPMO",
        "minicpmo.py MiniCPMO.__new__ -> minicpmv.py MiniCPMVBaseModel.__init__ (init_llm)",
        source=TOP,
        head="llm.",
        rule=rules.minicpmo_llm,
    ),
    # architectures=["Qwen3ForCausalLM"], no hf_config: Qwen3's layers read get_text_config()
    _w(
        "IsaacForConditionalGeneration",
        "isaac.py IsaacForConditionalGeneration",
        source=TEXT,
        lm=QWEN3,
        rule=rules.isaac_text,
    ),
    _w(
        "UltravoxModel",
        "ultravox.py UltravoxModel.__init__ (init_vllm_registered_model) (hf_config=config.wrapped_model_config)",
        rule=rules.ultravox_text,
    ),
    # Qwen3_5ForCausalLM(vllm_config, prefix=maybe_prefix(prefix, "language_model")): it reads hf_text_config
    _w(
        "MiniCPMV4_6ForConditionalGeneration",
        "minicpmv4_6.py MiniCPMV4_6ForConditionalGeneration.__init__ (Qwen3_5ForCausalLM)",
        lm="Qwen3_5ForCausalLM",
        rule=rules.no_ssm_dtype_hook,
    ),
    _w(
        "MiniCPMV4_7ForConditionalGeneration",
        "minicpmv4_7.py -> minicpmv4_6.py MiniCPMV4_6ForConditionalGeneration.__init__ (Qwen3_5ForCausalLM)",
        lm="Qwen3_5ForCausalLM",
        rule=rules.no_ssm_dtype_hook,
    ),
    _w(
        "MiniCPMOcrForConditionalGeneration",
        "minicpm_ocr.py -> minicpmv4_6.py MiniCPMV4_6ForConditionalGeneration.__init__ (Qwen3_5ForCausalLM)",
        lm="Qwen3_5ForCausalLM",
        rule=rules.no_ssm_dtype_hook,
    ),
    _w(
        "Ovis",
        "ovis.py Ovis.__init__ (init_vllm_registered_model) (with_hf_config(config.get_text_config()))",
        source="llm_config",
        head="llm.",
        rule=rules.ovis_text,
    ),
    _w(
        "MossAudioModel",
        "moss_audio.py MossAudioModel.__init__ (MossQwen3ForCausalLM)",
        source="language_config",
        lm=QWEN3,
        rule=rules.moss_audio_text,
    ),
    _w(
        "PaddleOCRVLForConditionalGeneration",
        "paddleocr_vl.py PaddleOCRVLForConditionalGeneration.__init__ (Ernie4_5ForCausalLM)",
        source=TOP,
        lm="Ernie4_5ForCausalLM",
        rule=rules.paddleocr_vl_text,
    ),
    # the decoder under the wrapper's own module "model.decoder", from the top config
    _w(
        "FireRedASR2ForConditionalGeneration",
        "fireredasr2.py FireRedASR2Model.__init__ (Qwen2ForCausalLM)",
        source=TOP,
        lm=QWEN2,
        head="model.decoder.",
    ),
    _w(
        "FunASRForConditionalGeneration",
        "funasr.py FunASRModel.__init__ (Qwen3Model)",
        source=TOP,
        lm=QWEN3,
        head="model.decoder.",
        strip="model.",
    ),
    # registry.py maps it to MuseGlimmerForCausalLM itself (text_config, else the config)
    _w(
        "MuseGlimmerForConditionalGeneration",
        "muse_glimmer.py MuseGlimmerForCausalLM.__init__ (MuseGlimmerModel)",
        source=TEXT,
        lm="MuseGlimmerForCausalLM",
        head="",
    ),
    _w(
        "CohereCompassForConditionalGeneration",
        "cohere_compass.py CohereCompassForConditionalGeneration.__init__ (CohereCompassForCausalLM)",
        lm="CohereCompassForCausalLM",
    ),
    _w(
        "InternS1ProForConditionalGeneration",
        "interns1_pro.py InternS1ProForConditionalGeneration.__init__ (InternS1ProMoeLLMForCausalLM)",
        lm="InternS1ProMoeLLMForCausalLM",
    ),
    # molmo.py MolmoForCausalLM.__init__: MolmoModel(prefix=maybe_prefix(prefix, "model")) from the top config
    _w(
        "MolmoForCausalLM",
        "molmo.py MolmoForCausalLM.__init__ (MolmoModel)",
        source=TOP,
        lm="MolmoModel",
        head="model.",
        strip="model.",
    ),
    # Molmo2TextModel under "model" reads config.text_config (else llm_config)
    _w(
        "Molmo2ForConditionalGeneration",
        "molmo2.py Molmo2ForConditionalGeneration.__init__ (Molmo2TextModel)",
        lm="Molmo2TextModel",
        head="model.",
        strip="model.",
        rule=rules.molmo2_text,
    ),
    # Ernie4_5_VLMoeForCausalLM reads the top config's own fields (model_config.hf_config)
    _w(
        "Ernie4_5_VLMoeForConditionalGeneration",
        "ernie45_vl.py Ernie4_5_VLMoeForConditionalGeneration.__init__ (Ernie4_5_VLMoeForCausalLM)",
        source=TOP,
        lm="Ernie4_5_VLMoeForCausalLM",
        rule=rules.top_fields,
    ),
    # Cosmos3EdgeForCausalLM of config.text_config: a Nemotron-H of attention + MLP layers
    _w(
        "Cosmos3EdgeForConditionalGeneration",
        "cosmos3_edge.py Cosmos3EdgeForConditionalGeneration.__init__ (Cosmos3EdgeForCausalLM)",
        lm="Cosmos3EdgeForCausalLM",
    ),
    # Moondream3TextModel under "text": blocks (make_layers), Moondream3Attention at .attn
    _w(
        "Moondream3ForCausalLM",
        "moondream3.py Moondream3ForCausalLM.__init__ (Moondream3TextModel)",
        "HfMoondream",
        source="config.text",
        lm="Moondream3TextModel",
        head="text.blocks.",
        strip="model.layers.",
        rule=rules.moondream3_text,
        rename=(".self_attn.attn", ".attn.attn"),
    ),
    # TransformersMultiModalForCausalLM: each layer's cache named after its HF attention module under `model`
    _w(
        "Emu3ForConditionalGeneration",
        "transformers/multimodal.py TransformersMultiModalForCausalLM (base.py Base._create_attention_instances)",
        source=TEXT,
        lm="TransformersForCausalLM",
        head="model.text_model.",
        strip="model.",
    ),
    _w(
        "HunYuanVLForConditionalGeneration",
        "transformers/multimodal.py TransformersMultiModalForCausalLM (base.py Base._create_attention_instances)",
        "VibeVoiceAsrForConditionalGeneration",
        source=TEXT,
        lm="TransformersForCausalLM",
        head="model.language_model.",
        strip="model.",
    ),
)
