"""Reference config class for MiMoV2ForCausalLM (model_type mimo_v2: custom code on the hub, no transformers
class; written for vLLM's reference run). It keeps the keys vLLM 0.33's mimo_v2.py reads (MiMoV2Model,
MiMoV2FlashDecoderLayer, MiMoV2Attention, MiMoV2MoE) as config.json gives them."""

from transformers import PretrainedConfig

KEYS = (
    "vocab_size hidden_size intermediate_size num_hidden_layers num_attention_heads num_key_value_heads head_dim "
    "v_head_dim swa_num_attention_heads swa_num_key_value_heads swa_head_dim swa_v_head_dim sliding_window "
    "sliding_window_size hybrid_layer_pattern moe_layer_freq add_swa_attention_sink_bias "
    "add_full_attention_sink_bias attention_bias attention_value_scale attention_projection_layout "
    "layernorm_epsilon rope_theta swa_rope_theta partial_rotary_factor max_position_embeddings n_routed_experts "
    "num_experts_per_tok moe_intermediate_size norm_topk_prob n_group topk_group hidden_act scoring_func "
    "routed_scaling_factor"
).split()


class RefConfig(PretrainedConfig):
    model_type = "mimo_v2"

    def __init__(self, **kwargs):
        for key in KEYS:
            setattr(self, key, kwargs.pop(key, None))
        super().__init__(**kwargs)
