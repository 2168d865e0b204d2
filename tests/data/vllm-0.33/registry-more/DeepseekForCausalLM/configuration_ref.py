"""Reference config class for DeepseekForCausalLM (custom code on the hub; written for vLLM's reference run)."""

from transformers import PretrainedConfig


class RefConfig(PretrainedConfig):
    model_type = "deepseek"

    def __init__(self, **kwargs):
        self.vocab_size = kwargs.pop('vocab_size', None)
        self.hidden_size = kwargs.pop('hidden_size', None)
        self.intermediate_size = kwargs.pop('intermediate_size', None)
        self.moe_intermediate_size = kwargs.pop('moe_intermediate_size', None)
        self.num_hidden_layers = kwargs.pop('num_hidden_layers', None)
        self.num_attention_heads = kwargs.pop('num_attention_heads', None)
        self.num_key_value_heads = kwargs.pop('num_key_value_heads', None)
        self.hidden_act = kwargs.pop('hidden_act', None)
        self.max_position_embeddings = kwargs.pop('max_position_embeddings', None)
        self.rms_norm_eps = kwargs.pop('rms_norm_eps', None)
        self.tie_word_embeddings = kwargs.pop('tie_word_embeddings', None)
        self.rope_theta = kwargs.pop('rope_theta', None)
        self.rope_scaling = kwargs.pop('rope_scaling', None)
        self.attention_bias = kwargs.pop('attention_bias', None)
        self.n_shared_experts = kwargs.pop('n_shared_experts', None)
        self.n_routed_experts = kwargs.pop('n_routed_experts', None)
        self.num_experts_per_tok = kwargs.pop('num_experts_per_tok', None)
        self.moe_layer_freq = kwargs.pop('moe_layer_freq', None)
        self.first_k_dense_replace = kwargs.pop('first_k_dense_replace', None)
        self.norm_topk_prob = kwargs.pop('norm_topk_prob', None)
        self.scoring_func = kwargs.pop('scoring_func', None)
        self.aux_loss_alpha = kwargs.pop('aux_loss_alpha', None)
        self.seq_aux = kwargs.pop('seq_aux', None)
        super().__init__(**kwargs)
