"""Reference config class for BailingMoeForCausalLM (custom code on the hub; written for vLLM's reference run)."""

from transformers import PretrainedConfig


class RefConfig(PretrainedConfig):
    model_type = "bailing_moe"

    def __init__(self, **kwargs):
        self.vocab_size = kwargs.pop('vocab_size', None)
        self.hidden_size = kwargs.pop('hidden_size', None)
        self.intermediate_size = kwargs.pop('intermediate_size', None)
        self.num_hidden_layers = kwargs.pop('num_hidden_layers', None)
        self.num_attention_heads = kwargs.pop('num_attention_heads', None)
        self.num_key_value_heads = kwargs.pop('num_key_value_heads', None)
        self.head_dim = kwargs.pop('head_dim', None)
        self.hidden_act = kwargs.pop('hidden_act', None)
        self.max_position_embeddings = kwargs.pop('max_position_embeddings', None)
        self.rms_norm_eps = kwargs.pop('rms_norm_eps', None)
        self.tie_word_embeddings = kwargs.pop('tie_word_embeddings', None)
        self.rope_theta = kwargs.pop('rope_theta', None)
        self.rope_scaling = kwargs.pop('rope_scaling', None)
        self.num_experts = kwargs.pop('num_experts', None)
        self.num_shared_experts = kwargs.pop('num_shared_experts', None)
        self.num_experts_per_tok = kwargs.pop('num_experts_per_tok', None)
        self.moe_intermediate_size = kwargs.pop('moe_intermediate_size', None)
        self.first_k_dense_replace = kwargs.pop('first_k_dense_replace', None)
        self.norm_topk_prob = kwargs.pop('norm_topk_prob', None)
        self.norm_head = kwargs.pop('norm_head', None)
        self.use_qkv_bias = kwargs.pop('use_qkv_bias', None)
        self.use_bias = kwargs.pop('use_bias', None)
        self.use_qk_norm = kwargs.pop('use_qk_norm', None)
        self.use_rmsnorm = kwargs.pop('use_rmsnorm', None)
        self.partial_rotary_factor = kwargs.pop('partial_rotary_factor', None)
        self.rotary_dim = kwargs.pop('rotary_dim', None)
        self.embedding_dropout = kwargs.pop('embedding_dropout', None)
        self.output_dropout = kwargs.pop('output_dropout', None)
        self.moe_router_enable_expert_bias = kwargs.pop('moe_router_enable_expert_bias', None)
        self.score_function = kwargs.pop('score_function', None)
        self.routed_scaling_factor = kwargs.pop('routed_scaling_factor', None)
        self.router_dtype = kwargs.pop('router_dtype', None)
        super().__init__(**kwargs)
