"""The architectures and model types the attention-decoder family (kvviz.families.decoder) registers, each
with the vLLM 0.33 model file whose rule reads it."""

# HF architectures (architectures[0]) and model types the decoder family reads.
NAMES = (
    "LlamaForCausalLM",
    "MistralForCausalLM",
    "MixtralForCausalLM",
    "Phi3ForCausalLM",
    "Qwen2ForCausalLM",
    "Qwen2MoeForCausalLM",
    "Qwen3ForCausalLM",
    "Qwen3MoeForCausalLM",
    "Gemma2ForCausalLM",
    "Gemma3ForCausalLM",
    "Gemma3ForConditionalGeneration",
    "Cohere2ForCausalLM",
    "GptOssForCausalLM",
    "Llama4ForCausalLM",
    "Llama4ForConditionalGeneration",
    "Gemma3nForCausalLM",
    "Gemma3nForConditionalGeneration",
    "llama",
    "mistral",
    "mixtral",
    "phi3",
    "qwen2",
    "qwen2_moe",
    "qwen3",
    "qwen3_moe",
    "gemma2",
    "gemma3",
    "gemma3_text",
    "cohere2",
    "gpt_oss",
    "llama4",
    "llama4_text",
    "gemma3n",
    "gemma3n_text",
    # issue 27, class (b): the rules above as each model file applies them
    "InternLM3ForCausalLM",  # vllm/model_executor/models/llama.py LlamaAttention.__init__
    "IQuestCoderForCausalLM",  # vllm/model_executor/models/llama.py LlamaAttention.__init__
    "LLaMAForCausalLM",  # vllm/model_executor/models/llama.py LlamaAttention.__init__
    "TeleChat3ForCausalLM",  # vllm/model_executor/models/llama.py LlamaAttention.__init__
    "Ministral3ForCausalLM",  # vllm/model_executor/models/mistral.py MistralAttention.__init__
    "ministral3",
    "Ernie4_5ForCausalLM",  # vllm/model_executor/models/ernie45.py Ernie4_5ForCausalLM (Llama)
    "ernie4_5",
    "Ernie4_5_MoeForCausalLM",  # vllm/model_executor/models/ernie45_moe.py Ernie4_5_MoeAttention.__init__
    "ernie4_5_moe",
    "Glm4ForCausalLM",  # vllm/model_executor/models/glm4.py Glm4Attention.__init__
    "glm4",
    # vllm/model_executor/models/glm4_moe.py Glm4MoeDecoderLayer.__init__ (head_dim=config.head_dim),
    # Glm4MoeAttention.__init__ (one Attention at {prefix}.attn; the MTP layer is the drafter's)
    "Glm4MoeForCausalLM",
    "glm4_moe",
    # vllm/model_executor/models/minimax_m2.py MiniMaxM2DecoderLayer.__init__ (head_dim, full attention)
    "MiniMaxM2ForCausalLM",
    "minimax_m2",
    "GemmaForCausalLM",  # vllm/model_executor/models/gemma.py GemmaAttention.__init__
    "gemma",
    "CohereForCausalLM",  # vllm/model_executor/models/commandr.py CohereAttention.__init__
    "cohere",
    "Cohere2MoeForCausalLM",  # vllm/model_executor/models/cohere2_moe.py Cohere2MoeAttention.__init__
    "cohere2_moe",
    "ApertusForCausalLM",  # vllm/model_executor/models/apertus.py ApertusAttention.__init__
    "apertus",
    "Exaone4ForCausalLM",  # vllm/model_executor/models/exaone4.py Exaone4Attention.__init__
    "exaone4",
    "ExaoneMoeForCausalLM",  # vllm/model_executor/models/exaone_moe.py ExaoneMoeAttention.__init__
    "ExaoneMoEForCausalLM",  # vllm/model_executor/models/exaone_moe.py ExaoneMoeAttention.__init__
    "exaone_moe",
    "GraniteForCausalLM",  # vllm/model_executor/models/granite.py GraniteAttention.__init__
    "GraniteSWAForCausalLM",  # vllm/model_executor/models/granite.py GraniteAttention.__init__
    "granite",
    "granite_swa",
    "GraniteMoeForCausalLM",  # vllm/model_executor/models/granitemoe.py GraniteMoeAttention.__init__
    "granitemoe",
    "GraniteMoeSharedForCausalLM",  # vllm/model_executor/models/granitemoeshared.py (GraniteMoeAttention)
    "GraniteMoeSWAForCausalLM",  # vllm/model_executor/models/granitemoeshared.py (GraniteMoeAttention)
    "granitemoeshared",
    "granitemoe_swa",
    "PhiMoEForCausalLM",  # vllm/model_executor/models/phimoe.py PhiMoEAttention.__init__
    "phimoe",
    "HyperCLOVAXForCausalLM",  # vllm/model_executor/models/hyperclovax.py HyperCLOVAXAttention.__init__
    "LagunaForCausalLM",  # vllm/model_executor/models/laguna.py LagunaAttention.__init__
    "laguna",
    "MuseGlimmerForCausalLM",  # vllm/model_executor/models/muse_glimmer.py MuseGlimmerAttention.__init__
    # vllm/model_executor/models/gpt2.py, gpt_j.py, opt.py, bloom.py, olmoe.py, stablelm.py, exaone.py:
    # HEAD_FROM_HIDDEN and LAYER_NAMES above
    "GPT2LMHeadModel",
    "gpt2",
    "GPTJForCausalLM",
    "gptj",
    "OPTForCausalLM",
    "opt",
    "BloomForCausalLM",
    "bloom",
    "OlmoeForCausalLM",
    "olmoe",
    "StableLmForCausalLM",
    "stablelm",
    "ExaoneForCausalLM",
    "exaone",
    "HCXVisionV2ForCausalLM",  # WRAPPERS above
    # HEAD_RULES above
    "MiniCPM3ForCausalLM",
    "minicpm3",
    "FalconForCausalLM",
    "falcon",
    "Gemma4ForCausalLM",  # vllm/model_executor/models/gemma4.py
    "gemma4_text",
    "DiffusionGemmaForBlockDiffusion",  # diffusion_gemma.py: Gemma4Model(prefix="model") of its text_config
    "BeamForCausalLM",  # vllm/models/beam/nvidia/attention.py BeamAttention: per-layer window from layer_types
    "beam",
    # LOOPED above
    "HrmTextForCausalLM",
    "hrm_text",
    "DoryForCausalLM",
    "dory",
    # LAYER_NAMES above: BailingAttention (head_dim, else hidden_size // heads; num_key_value_heads)
    "SarvamMoEForCausalLM",
    "sarvam_moe",
    # issue 27, per-layer rules of kvviz.families.decoder_layers (LAYER_RULES; K2Horizon: the rules above,
    # vllm/model_executor/models/k2_horizon.py K2HorizonAttention / K2HorizonMoVAAttention.__init__)
    "DomynEdgeForCausalLM",
    "Plamo3ForCausalLM",
    "DeciLMForCausalLM",
    "PanguEmbeddedForCausalLM",
    "PanguProMoEV2ForCausalLM",
    "IQuestLoopCoderForCausalLM",
    "Rnj1ForCausalLM",
    "K2HorizonForCausalLM",
    # vllm/models/flint/model.py FlintAttention.__init__: layer_types[i] == "sliding_attention" gives
    # config.sliding_window (the rule above), no KV sharing (it asserts kv_sharing_target_layer_name is None)
    "FlintForCausalLM",
    # issue 27, "plan them" (w-deca): the rules of the block above CUSTOM_CODE_TYPES, or the rules already here
    "AfmoeForCausalLM",  # vllm/model_executor/models/afmoe.py AfmoeAttention.__init__ (layer_types' windows)
    "afmoe",
    "BailingMoeForCausalLM",  # vllm/model_executor/models/bailing_moe.py BailingAttention.__init__
    "BailingMoeV2ForCausalLM",  # vllm/model_executor/models/bailing_moe.py (BailingMoeForCausalLM)
    "bailing_moe",
    "bailing_moe_v2",
    "HYV3ForCausalLM",  # vllm/model_executor/models/hy_v3.py HYV3Attention.__init__ (config.head_dim)
    "hy_v3",
    "MiMoForCausalLM",  # vllm/model_executor/models/mimo.py (Qwen2): CONFIG_AS
    "mimo",
    "NemotronForCausalLM",  # vllm/model_executor/models/nemotron.py NemotronAttention.__init__
    "nemotron",
    "Param2MoEForCausalLM",  # vllm/model_executor/models/param2moe.py Param2MoEAttention.__init__
    "param2moe",
    "SolarForCausalLM",  # vllm/model_executor/models/solar.py SolarAttention.__init__
    "solar",
    "TeleChat2ForCausalLM",  # vllm/model_executor/models/telechat2.py TeleChat2Model (Llama)
    "telechat",
    "TeleFLMForCausalLM",  # vllm/model_executor/models/teleflm.py TeleFLMForCausalLM (Llama)
    "teleflm",
    "DeepseekForCausalLM",  # vllm/model_executor/models/deepseek_v2.py DeepseekAttention.__init__
    "deepseek",
    "InternLM2ForCausalLM",  # vllm/model_executor/models/internlm2.py InternLM2Attention.__init__
    "internlm2",
    "MiniCPMForCausalLM",  # vllm/model_executor/models/minicpm.py MiniCPMAttention.__init__
    "minicpm",
    "OrionForCausalLM",  # vllm/model_executor/models/orion.py OrionAttention.__init__
    "orion",
    "Step1ForCausalLM",  # vllm/model_executor/models/step1.py StepAttention.__init__
    "step1",
    "ChatGLMModel",  # vllm/model_executor/models/chatglm.py GLMAttention.__init__
    "ChatGLMForConditionalGeneration",  # registry.py: chatglm.py ChatGLMForCausalLM
    "chatglm",
    "GLM4VForCausalLM",  # vllm/model_executor/models/glm4v.py GLM4VModel(ChatGLMModel)
    "DbrxForCausalLM",  # vllm/model_executor/models/dbrx.py DbrxAttention.__init__
    "dbrx",
    # decoder_kinds.KIND_RULES (issue 27, decc): per-layer-kind KV heads / head sizes, Step 3's one KV head
    "MiMoV2FlashForCausalLM",  # vllm/model_executor/models/mimo_v2.py MiMoV2FlashDecoderLayer.__init__
    "mimo_v2_flash",
    "MiMoV2ForCausalLM",  # vllm/model_executor/models/mimo_v2.py (MiMoV2FlashForCausalLM's subclass)
    "mimo_v2",
    "Step3p5ForCausalLM",  # vllm/model_executor/models/step3p5.py Step3p5DecoderLayer.__init__
    "step3p5",
    "Step3TextForCausalLM",  # vllm/model_executor/models/step3_text.py Step3TextAttention.__init__
    "step3_text",
    # issue 27, multimodal wrappers' own language model classes (kvviz.families.wrapper_table_more), the
    # rules above: vllm/model_executor/models/cohere_compass.py CohereCompassAttention.__init__ (config.head_dim,
    # num_key_value_heads, layer_types[i] == "sliding_attention" gives config.sliding_window)
    "CohereCompassForCausalLM",
    # interns1_pro.py InternS1ProMoeDecoderLayer.__init__ (hf_text_config), InternS1ProMoeAttention.__init__
    # (head_dim or hidden_size // num_attention_heads, num_key_value_heads, full attention)
    "InternS1ProMoeLLMForCausalLM",
    # molmo.py MolmoAttention.__init__: num_key_value_heads or num_attention_heads, head size hidden_size //
    # num_attention_heads, full attention: read with qwen2's rules (wrapper_table_more.LM_MODEL_TYPES)
    "MolmoModel",
    # molmo2.py Molmo2Attention.__init__: config.head_dim, num_key_value_heads, full attention
    "Molmo2TextModel",
    # ernie45_vl_moe.py Ernie4_5_VLMoeDecoderLayer.__init__ (head_dim or hidden_size // heads, num_key_value_heads)
    "Ernie4_5_VLMoeForCausalLM",
    # cosmos3_edge.py Cosmos3EdgeForCausalLM: NemotronHAttention (head_dim, else hidden_size // heads;
    # num_key_value_heads; full attention) on every other layer (LOOPED above)
    "Cosmos3EdgeForCausalLM",
    # moondream3.py Moondream3Attention.__init__: dim // n_heads, n_kv_heads, full attention (wrapper_table_more)
    "Moondream3TextModel",
)
