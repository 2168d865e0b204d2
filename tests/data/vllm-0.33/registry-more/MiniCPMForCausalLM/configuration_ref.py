"""Reference config class for MiniCPMForCausalLM (custom code on the hub; written for vLLM's reference run)."""

from transformers import PretrainedConfig


class RefConfig(PretrainedConfig):
    model_type = "minicpm"

    def __init__(self, **kwargs):
        self.vocab_size = kwargs.pop('vocab_size', None)
        self.hidden_size = kwargs.pop('hidden_size', None)
        self.intermediate_size = kwargs.pop('intermediate_size', None)
        self.num_hidden_layers = kwargs.pop('num_hidden_layers', None)
        self.num_attention_heads = kwargs.pop('num_attention_heads', None)
        self.num_key_value_heads = kwargs.pop('num_key_value_heads', None)
        self.hidden_act = kwargs.pop('hidden_act', None)
        self.max_position_embeddings = kwargs.pop('max_position_embeddings', None)
        self.rms_norm_eps = kwargs.pop('rms_norm_eps', None)
        self.tie_word_embeddings = kwargs.pop('tie_word_embeddings', None)
        self.rope_theta = kwargs.pop('rope_theta', None)
        self.rope_scaling = kwargs.pop('rope_scaling', None)
        self.scale_emb = kwargs.pop('scale_emb', None)
        self.dim_model_base = kwargs.pop('dim_model_base', None)
        self.scale_depth = kwargs.pop('scale_depth', None)
        super().__init__(**kwargs)
