"""Reference config class for MiMoForCausalLM (custom code on the hub; written for vLLM's reference run)."""

from transformers import Qwen2Config


class RefConfig(Qwen2Config):
    model_type = "mimo"

    def __init__(self, **kwargs):
        self.num_nextn_predict_layers = kwargs.pop('num_nextn_predict_layers', 0)
        super().__init__(**kwargs)
