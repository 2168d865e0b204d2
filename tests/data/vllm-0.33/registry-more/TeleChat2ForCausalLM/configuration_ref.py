"""Reference config class for TeleChat2ForCausalLM (custom code on the hub; written for vLLM's reference run)."""

from transformers import PretrainedConfig


class RefConfig(PretrainedConfig):
    model_type = "telechat"
    attribute_map = {'num_hidden_layers': 'n_layer', 'num_attention_heads': 'n_head', 'intermediate_size': 'ffn_hidden_size', 'rms_norm_eps': 'layer_norm_epsilon'}

    def __init__(self, **kwargs):
        self.vocab_size = kwargs.pop('vocab_size', None)
        self.hidden_size = kwargs.pop('hidden_size', None)
        self.ffn_hidden_size = kwargs.pop('ffn_hidden_size', None)
        self.n_layer = kwargs.pop('n_layer', None)
        self.n_head = kwargs.pop('n_head', None)
        self.layer_norm_epsilon = kwargs.pop('layer_norm_epsilon', None)
        self.seq_length = kwargs.pop('seq_length', None)
        self.max_position_embeddings = kwargs.pop('max_position_embeddings', None)
        self.rope_theta = kwargs.pop('rope_theta', None)
        self.tie_word_embeddings = kwargs.pop('tie_word_embeddings', None)
        self.embed_layernorm = kwargs.pop('embed_layernorm', None)
        self.apply_residual_connection_post_layernorm = kwargs.pop('apply_residual_connection_post_layernorm', None)
        super().__init__(**kwargs)
