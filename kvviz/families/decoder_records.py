"""The attention-only decoders kvviz plans: one `DecoderRecord` per architecture of vLLM 0.33's registry
(and the language-model classes multimodal wrappers build), each saying what kvviz believes its model file
does (vllm/model_executor/models/<file>.py unless another path is given): its KV heads and head size, how
its layer kinds are found, its layer names, the config class it is read through. A rule that computes
something of its own is a function of kvviz.families.decoder_rules, decoder_mix, decoder_layers or
decoder_kinds, named here; the Transformers backend's architectures are in kvviz.families.transformers_backend.
"""

from __future__ import annotations

from kvviz.families import decoder_kinds as kinds
from kvviz.families import decoder_layers as layers
from kvviz.families import decoder_rules as rules
from kvviz.families.decoder_mix import alternating_kinds, no_rope_kinds
from kvviz.families.decoder_rules import FROM_HIDDEN, LM, DecoderRecord
from kvviz.families.record import JSON, Read

_TRANSFORMER_H = ("transformer.h", "attn.attn")
_ATTENTION = ("model.layers", "attention.attn")  # .attention (the block's), .attn (the Attention's)
TELECHAT_NAMES = {"num_hidden_layers": "n_layer", "num_attention_heads": "n_head"}
_GEMMA4 = dict(heads=rules.per_layer_heads, per_layer=True, share_by_kind=True)


def _r(name: str, file: str, *model_types: str, **fields) -> DecoderRecord:
    """The record of architecture `name`, whose model file and class are `file` (vllm/model_executor/models/),
    named by `model_types` in a config whose architectures kvviz does not know."""
    return DecoderRecord(name=name, vllm=file, model_types=model_types, **fields)


def _custom(*only: str) -> Read:
    """Custom code (trust_remote_code): the checkpoint's own config class, the JSON's keys as they are."""
    return Read(how=JSON, cls="the checkpoint's own config class", only=only)


RECORDS: tuple[DecoderRecord, ...] = (
    # the config's layer_types / config-wide sliding_window, head_dim (else hidden_size // heads)
    _r("LlamaForCausalLM", "llama.py LlamaAttention.__init__", "llama", lm_model_type="llama"),
    _r("InternLM3ForCausalLM", "llama.py LlamaAttention.__init__"),
    _r("IQuestCoderForCausalLM", "llama.py LlamaAttention.__init__"),
    _r("LLaMAForCausalLM", "llama.py LlamaAttention.__init__"),
    _r("TeleChat3ForCausalLM", "llama.py LlamaAttention.__init__"),
    _r("MistralForCausalLM", "mistral.py MistralAttention", "mistral", lm_model_type="mistral"),
    _r("Ministral3ForCausalLM", "mistral.py MistralAttention.__init__", "ministral3"),
    _r("MixtralForCausalLM", "mixtral.py MixtralAttention.__init__", "mixtral"),
    _r("Phi3ForCausalLM", "phi3.py (LlamaAttention)", "phi3", lm_model_type="phi3"),
    _r("PhiMoEForCausalLM", "phimoe.py PhiMoEAttention.__init__", "phimoe"),
    _r("Qwen2MoeForCausalLM", "qwen2_moe.py Qwen2MoeAttention.__init__", "qwen2_moe"),
    _r("Qwen3ForCausalLM", "qwen3.py Qwen3Attention.__init__", "qwen3", lm_model_type="qwen3"),
    _r("Qwen3MoeForCausalLM", "qwen3_moe.py Qwen3MoeAttention.__init__", "qwen3_moe", lm_model_type="qwen3_moe"),
    _r("GemmaForCausalLM", "gemma.py GemmaAttention.__init__", "gemma"),
    _r("Gemma2ForCausalLM", "gemma2.py Gemma2Attention.__init__", "gemma2"),
    _r("Gemma3ForCausalLM", "gemma3.py Gemma3Attention.__init__", "gemma3_text"),
    _r("Gemma3ForConditionalGeneration", "gemma3_mm.py (Gemma3ForCausalLM)", "gemma3", prefix=LM),
    # gemma3n.py Gemma3nAttention: the last num_kv_shared_layers layers reuse layer first - 2 (sliding) or
    # first - 1 (full) and register nothing (gpu_model_runner.get_kv_cache_spec)
    _r("Gemma3nForCausalLM", "gemma3n.py Gemma3nAttention.__init__", "gemma3n_text"),
    _r("Gemma3nForConditionalGeneration", "gemma3n_mm.py (Gemma3nForCausalLM)", "gemma3n", prefix=LM),
    _r("CohereForCausalLM", "commandr.py CohereAttention.__init__", "cohere"),
    # commandr.py CohereAttention: "cohere swa layer sees [pos - sliding_window, pos]"; cohere2_moe.py
    # Cohere2MoeAttention.__init__ passes config.sliding_window + 1 the same way
    _r("Cohere2ForCausalLM", "commandr.py CohereAttention.__init__", "cohere2", window_offset=1),
    _r("Cohere2MoeForCausalLM", "cohere2_moe.py Cohere2MoeAttention.__init__", "cohere2_moe", window_offset=1),
    _r(
        "GptOssForCausalLM",
        "gpt_oss.py OAIAttention.__init__, TransformerBlock.__init__",
        "gpt_oss",
        layer_kinds=alternating_kinds,
        layer_names=("model.layers", "attn.attn"),
    ),
    _r("Llama4ForCausalLM", "llama4.py Llama4Attention.__init__", "llama4_text", layer_kinds=no_rope_kinds),
    _r(
        "Llama4ForConditionalGeneration",
        "mllama4.py (Llama4ForCausalLM)",
        "llama4",
        layer_kinds=no_rope_kinds,
        prefix=LM,
    ),
    _r("Ernie4_5ForCausalLM", "ernie45.py (Llama)", "ernie4_5", lm_model_type="ernie4_5"),
    _r("Ernie4_5_MoeForCausalLM", "ernie45_moe.py Ernie4_5_MoeAttention.__init__", "ernie4_5_moe"),
    _r("Glm4ForCausalLM", "glm4.py Glm4Attention.__init__", "glm4", lm_model_type="glm4"),
    _r(
        "Glm4MoeForCausalLM",
        "glm4_moe.py Glm4MoeAttention.__init__ (the MTP layer is the drafter's)",
        "glm4_moe",
        lm_model_type="glm4_moe",
    ),
    _r("MiniMaxM2ForCausalLM", "minimax_m2.py MiniMaxM2DecoderLayer.__init__", "minimax_m2"),
    _r("ApertusForCausalLM", "apertus.py ApertusAttention.__init__", "apertus"),
    _r("Exaone4ForCausalLM", "exaone4.py Exaone4Attention.__init__", "exaone4", lm_model_type="exaone4"),
    _r(
        "ExaoneMoeForCausalLM",
        "exaone_moe.py ExaoneMoeAttention.__init__",
        "exaone_moe",
        aliases=("ExaoneMoEForCausalLM",),
    ),
    _r("GraniteForCausalLM", "granite.py GraniteAttention.__init__", "granite", lm_model_type="granite"),
    _r("GraniteSWAForCausalLM", "granite.py GraniteAttention.__init__", "granite_swa"),
    _r("HyperCLOVAXForCausalLM", "hyperclovax.py HyperCLOVAXAttention.__init__"),
    _r("HCXVisionV2ForCausalLM", "hyperclovax_vision_v2.py HCXVisionV2ForCausalLM.__init__", prefix=LM),
    _r("LagunaForCausalLM", "laguna.py LagunaAttention.__init__", "laguna"),
    _r("MuseGlimmerForCausalLM", "muse_glimmer.py MuseGlimmerAttention.__init__"),
    _r("AfmoeForCausalLM", "afmoe.py AfmoeAttention.__init__", "afmoe"),
    _r("HYV3ForCausalLM", "hy_v3.py HYV3Attention.__init__ (config.head_dim)", "hy_v3"),
    _r("NemotronForCausalLM", "nemotron.py NemotronAttention.__init__", "nemotron"),
    _r("K2HorizonForCausalLM", "k2_horizon.py K2HorizonAttention / K2HorizonMoVAAttention.__init__", config=_custom()),
    # head size hidden_size // num_attention_heads whatever head_dim says
    _r("Qwen2ForCausalLM", "qwen2.py Qwen2Attention.__init__", "qwen2", head_size=FROM_HIDDEN, lm_model_type="qwen2"),
    # mimo.py MiMoForCausalLM(Qwen2ForCausalLM): the hub's MiMoConfig(Qwen2Config); its MTP layers are the drafter's
    _r(
        "MiMoForCausalLM",
        "mimo.py MiMoForCausalLM (Qwen2Attention)",
        "mimo",
        head_size=FROM_HIDDEN,
        config=Read(cls="MiMoConfig(Qwen2Config)", as_type="qwen2", only=("mimo",)),
    ),
    _r("GraniteMoeForCausalLM", "granitemoe.py GraniteMoeAttention.__init__", "granitemoe", head_size=FROM_HIDDEN),
    _r(
        "GraniteMoeSharedForCausalLM",
        "granitemoeshared.py (GraniteMoeAttention)",
        "granitemoeshared",
        head_size=FROM_HIDDEN,
    ),
    _r(
        "GraniteMoeSWAForCausalLM", "granitemoeshared.py (GraniteMoeAttention)", "granitemoe_swa", head_size=FROM_HIDDEN
    ),
    _r(
        "GPT2LMHeadModel",
        "gpt2.py GPT2Model.__init__, GPT2Attention.__init__",
        "gpt2",
        head_size=FROM_HIDDEN,
        layer_names=_TRANSFORMER_H,
    ),
    _r(
        "GPTJForCausalLM",
        "gpt_j.py GPTJModel.__init__, GPTJAttention.__init__",
        "gptj",
        head_size=FROM_HIDDEN,
        layer_names=_TRANSFORMER_H,
    ),
    _r(
        "OPTForCausalLM",
        "opt.py OPTDecoder.__init__, OPTAttention.__init__",
        "opt",
        head_size=FROM_HIDDEN,
        layer_names=("model.decoder.layers", "self_attn.attn"),
    ),
    _r(
        "BloomForCausalLM",
        "bloom.py BloomBlock.__init__, BloomAttention.__init__",
        "bloom",
        head_size=FROM_HIDDEN,
        layer_names=("transformer.h", "self_attention.attn"),
    ),
    _r("OlmoeForCausalLM", "olmoe.py OlmoeAttention.__init__", "olmoe", head_size=FROM_HIDDEN),
    _r("StableLmForCausalLM", "stablelm.py StablelmAttention.__init__", "stablelm", head_size=FROM_HIDDEN),
    # Falcon's rotary and alibi Attention(...) calls pass no cache_config: kv_cache_dtype 'auto'
    _r(
        "FalconForCausalLM",
        "falcon.py FalconModel.__init__, FalconAttention.__init__",
        "falcon",
        head_size=FROM_HIDDEN,
        heads=rules.falcon_heads,
        layer_names=("transformer.h", "self_attention.attn"),
        cache_dtype_fixed=True,
    ),
    _r(
        "ExaoneForCausalLM",
        "exaone.py ExaoneDecoderLayer.__init__, ExaoneBlockAttention.__init__",
        "exaone",
        layer_names=("model.h", "attn.attention.attn"),
    ),
    _r(
        "SarvamMoEForCausalLM",
        "sarvam.py SarvamMoEForCausalLM (bailing_moe.py BailingMoeBlock, BailingAttention)",
        "sarvam_moe",
        layer_names=_ATTENTION,
    ),
    # the model file's own KV heads / head size
    _r("MiniCPM3ForCausalLM", "minicpm3.py MiniCPM3Attention.__init__", "minicpm3", heads=rules.minicpm3_heads),
    _r("Gemma4ForCausalLM", "gemma4.py Gemma4DecoderLayer.__init__", "gemma4_text", **_GEMMA4),
    # diffusion_gemma.py: gemma4.py's Gemma4Model(prefix="model") of its diffusion_gemma_text config
    _r(
        "DiffusionGemmaForBlockDiffusion",
        "diffusion_gemma.py DiffusionGemmaForConditionalGeneration (gemma4.py Gemma4Model)",
        **_GEMMA4,
    ),
    # custom-code configs: vLLM reads them with trust_remote_code, the JSON as the checkpoint's class holds it
    _r(
        "BailingMoeForCausalLM",
        "bailing_moe.py BailingMoeBlock.__init__, BailingAttention.__init__",
        "bailing_moe",
        layer_names=_ATTENTION,
        config=_custom("bailing_moe"),
    ),
    _r(
        "BailingMoeV2ForCausalLM",
        "bailing_moe.py (BailingMoeForCausalLM)",
        "bailing_moe_v2",
        layer_names=_ATTENTION,
        config=_custom("bailing_moe_v2"),
    ),
    _r(
        "Param2MoEForCausalLM",
        "param2moe.py Param2MoEAttention.__init__",
        "param2moe",
        checks=(rules.kv_heads_split,),
        config=_custom("param2moe"),
    ),
    _r("SolarForCausalLM", "solar.py SolarAttention.__init__", "solar", config=_custom("solar")),
    # telechat2.py TeleChat2Model.__init__ sets hf_config.attribute_map (n_layer, n_head); Llama's rules then
    _r(
        "TeleChat2ForCausalLM",
        "telechat2.py TeleChat2Model (Llama)",
        "telechat",
        config=Read(
            how=JSON, cls="telechat2.py TeleChat2Model's attribute_map", aliases=TELECHAT_NAMES, only=("telechat",)
        ),
    ),
    _r("TeleFLMForCausalLM", "teleflm.py TeleFLMForCausalLM (Llama)", "teleflm", config=_custom("teleflm")),
    # model_type "deepseek" is never MLA
    _r(
        "DeepseekForCausalLM",
        "deepseek_v2.py DeepseekAttention.__init__",
        "deepseek",
        head_size=FROM_HIDDEN,
        refuse=rules.refuse_rswa,
        config=_custom("deepseek"),
    ),
    _r(
        "InternLM2ForCausalLM",
        "internlm2.py InternLM2DecoderLayer.__init__, InternLM2Attention.__init__",
        "internlm2",
        head_size=FROM_HIDDEN,
        layer_names=_ATTENTION,
        config=_custom("internlm2"),
    ),
    _r(
        "MiniCPMForCausalLM",
        "minicpm.py MiniCPMAttention.__init__",
        "minicpm",
        head_size=FROM_HIDDEN,
        lm_model_type="minicpm",
        config=_custom("minicpm"),
    ),
    _r("OrionForCausalLM", "orion.py OrionAttention.__init__", "orion", head_size=FROM_HIDDEN, config=_custom("orion")),
    _r(
        "Step1ForCausalLM",
        "step1.py StepAttention.__init__",
        "step1",
        head_size=FROM_HIDDEN,
        heads=rules.step1_kv,
        config=_custom("step1"),
    ),
    # chatglm.py ChatGLMBaseModel (transformer), ChatGLMModel (.encoder), GLMTransformer (.layers), GLMBlock
    # (.self_attention), GLMAttention (.attn; kv_channels unread); registry.py maps ChatGLMForConditionalGeneration
    # to ChatGLMForCausalLM (no wrapper); glm4v.py GLM4VModel(ChatGLMModel) beside a vision encoder
    _r(
        "ChatGLMModel",
        "chatglm.py GLMAttention.__init__",
        "chatglm",
        aliases=("ChatGLMForConditionalGeneration", "GLM4VForCausalLM"),
        head_size=FROM_HIDDEN,
        heads=rules.chatglm_kv,
        layer_names=("transformer.encoder.layers", "self_attention.attn"),
        refuse=rules.refuse_without_original_rope,
        config=rules.CHATGLM_CONFIG,
    ),
    _r(
        "DbrxForCausalLM",
        "dbrx.py DbrxBlock, DbrxFusedNormAttention, DbrxAttention.__init__ (d_model // n_heads)",
        "dbrx",
        head_size=FROM_HIDDEN,
        heads=rules.dbrx_kv,
        layer_names=("transformer.blocks", "norm_attn_norm.attn.attn"),
    ),
    # vLLM's own config classes (transformers_utils/config.py _CONFIG_REGISTRY): their defaults, not transformers'
    _r(
        "BeamForCausalLM",
        "models/beam/nvidia/attention.py BeamAttention (per-layer window from layer_types)",
        "beam",
        config=rules.BEAM_CONFIG,
    ),
    # FlintAttention asserts kv_sharing_target_layer_name is None: no KV sharing
    _r(
        "FlintForCausalLM",
        "models/flint/model.py FlintAttention.__init__",
        checks=(rules.bf16_only,),
        config=rules.FLINT_CONFIG,
    ),
    _r(
        "DoryForCausalLM",
        "dory.py DoryBackbone, DoryAttention",
        "dory",
        looped=rules.dory_layers,
        checks=(rules.one_gpu,),
        extra_kinds=("mlp",),
        config=rules.DORY_CONFIG,
    ),
    _r(
        "HrmTextForCausalLM",
        "hrm_text.py HrmTextModel, HrmTextAttention.__init__",
        "hrm_text",
        heads=rules.all_heads_kv,
        looped=rules.hrm_layers,
    ),
    # the model file decides each layer's cache (decoder_layers); custom-code configs but Rnj1's
    _r(
        "DomynEdgeForCausalLM",
        "domyn_edge.py DomynEdgeDecoderLayer.__init__",
        layer_plan=layers.domyn_edge_plan,
        config=_custom(),
    ),
    _r("Plamo3ForCausalLM", "plamo3.py Plamo3AttentionMixer.__init__", layer_plan=layers.plamo3_plan, config=_custom()),
    _r(
        "DeciLMForCausalLM",
        "nemotron_nas.py DeciLMDecoderLayer.__init__",
        layer_plan=layers.decilm_plan,
        config=_custom(),
    ),
    _r(
        "PanguEmbeddedForCausalLM",
        "openpangu.py OpenPanguEmbeddedAttention / OpenPanguSinkAttention.__init__",
        layer_plan=layers.pangu_plan,
        config=_custom(),
    ),
    _r(
        "PanguProMoEV2ForCausalLM",
        "openpangu.py OpenPanguEmbeddedAttention / OpenPanguSinkAttention.__init__",
        layer_plan=layers.pangu_plan,
        config=_custom(),
    ),
    _r(
        "IQuestLoopCoderForCausalLM",
        "iquest_loopcoder.py LoopCoderAttention.__init__",
        layer_plan=layers.loopcoder_plan,
        config=_custom(),
    ),
    _r("Rnj1ForCausalLM", "rnj1.py Rnj1Attention.__init__", layer_plan=layers.rnj1_plan),
    # each layer kind its own heads, head sizes and window (decoder_kinds)
    _r(
        "MiMoV2FlashForCausalLM",
        "mimo_v2.py MiMoV2FlashDecoderLayer.__init__",
        "mimo_v2_flash",
        kind_heads=kinds.mimo_v2_kinds,
        convert=kinds.mimo_omni,
    ),
    _r(
        "MiMoV2ForCausalLM",
        "mimo_v2.py MiMoV2ForCausalLM (MiMoV2FlashForCausalLM)",
        "mimo_v2",
        kind_heads=kinds.mimo_v2_kinds,
        convert=kinds.mimo_omni,
        config=_custom("mimo_v2"),
    ),
    _r("Step3p5ForCausalLM", "step3p5.py Step3p5DecoderLayer.__init__", "step3p5", kind_heads=kinds.step3p5_kinds),
    # step3_text.py Step3TextForCausalLM.__init__: Step3TextModel(prefix=prefix), so its layers are f"{''}.layers"
    _r(
        "Step3TextForCausalLM",
        "step3_text.py Step3TextAttention.__init__",
        "step3_text",
        kind_heads=kinds.step3_text_kinds,
        layer_names=(".layers", "self_attn.attn"),
        lm_model_type="step3_text",
        config=rules.STEP3_TEXT_CONFIG,
    ),
    # language-model classes multimodal wrappers build (kvviz.families.wrapper_records), by their own rules
    _r("CohereCompassForCausalLM", "cohere_compass.py CohereCompassAttention.__init__"),
    _r(
        "InternS1ProMoeLLMForCausalLM",
        "interns1_pro.py InternS1ProMoeAttention.__init__ (Qwen3MoeAttention's rule)",
        lm_model_type="qwen3_moe",
    ),
    # molmo.py MolmoAttention: num_key_value_heads or num_attention_heads (Qwen2Config's default), hidden // heads
    _r("MolmoModel", "molmo.py MolmoAttention.__init__", head_size=FROM_HIDDEN, lm_model_type="qwen2"),
    _r("Molmo2TextModel", "molmo2.py Molmo2Attention.__init__"),
    _r(
        "Ernie4_5_VLMoeForCausalLM",
        "ernie45_vl_moe.py Ernie4_5_VLMoeDecoderLayer.__init__ (Ernie4_5_MoeAttention's rule)",
        lm_model_type="ernie4_5_moe",
    ),
    # NemotronHAttention (head_dim, else hidden_size // heads) on every other Nemotron-H layer
    _r(
        "Cosmos3EdgeForCausalLM",
        "cosmos3_edge.py Cosmos3EdgeForCausalLM (NemotronHAttention)",
        looped=rules.cosmos3_edge_layers,
    ),
    # moondream3.py Moondream3Attention.__init__: dim // n_heads, n_kv_heads, full attention (Llama's rule)
    _r("Moondream3TextModel", "moondream3.py Moondream3Attention.__init__", lm_model_type="llama"),
)
