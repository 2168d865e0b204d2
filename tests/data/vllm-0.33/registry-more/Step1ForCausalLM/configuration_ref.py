"""Reference config class for Step1ForCausalLM (custom code on the hub; written for vLLM's reference run)."""

from transformers import PretrainedConfig


class RefConfig(PretrainedConfig):
    model_type = "step1"

    def __init__(self, **kwargs):
        self.vocab_size = kwargs.pop('vocab_size', None)
        self.hidden_size = kwargs.pop('hidden_size', None)
        self.intermediate_size = kwargs.pop('intermediate_size', None)
        self.num_hidden_layers = kwargs.pop('num_hidden_layers', None)
        self.num_attention_heads = kwargs.pop('num_attention_heads', None)
        self.num_attention_groups = kwargs.pop('num_attention_groups', None)
        self.max_seq_len = kwargs.pop('max_seq_len', None)
        self.rms_norm_eps = kwargs.pop('rms_norm_eps', None)
        self.tie_word_embeddings = kwargs.pop('tie_word_embeddings', None)
        self.attention_bias = kwargs.pop('attention_bias', None)
        self.mlp_bias = kwargs.pop('mlp_bias', None)
        super().__init__(**kwargs)
