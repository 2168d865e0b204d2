"""A stand-in for the checkpoint's custom-code config (trust_remote_code): only the keys vLLM 0.33's
model_executor/models/sarvam.py SarvamMLAForCausalLM reads, with the model type it names."""

import transformers


class RefConfig(transformers.PretrainedConfig):
    model_type = "sarvam_mla"

    def __init__(self, **kwargs):
        defaults = dict(
            vocab_size=262144,
            hidden_size=4096,
            intermediate_size=16384,
            moe_intermediate_size=2048,
            moe_shared_expert_intermediate_size=2048,
            num_hidden_layers=32,
            num_attention_heads=64,
            num_key_value_heads=64,
            q_lora_rank=None,
            kv_lora_rank=512,
            qk_nope_head_dim=128,
            qk_rope_head_dim=64,
            v_head_dim=128,
            num_experts=128,
            num_experts_per_tok=8,
            num_shared_experts=1,
            first_k_dense_replace=1,
            max_position_embeddings=131072,
            rms_norm_eps=1e-6,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        )
        for key, value in defaults.items():
            kwargs.setdefault(key, value)
        tie = kwargs.pop("tie_word_embeddings", False)
        super().__init__(tie_word_embeddings=tie, **kwargs)
