"""The custom-code config class of BailingMoeV2_5ForCausalLM for vLLM's reference run (trust_remote_code):
a PretrainedConfig holding config.json's keys as attributes, under the model_type below."""

import transformers


class RefConfig(transformers.PretrainedConfig):
    model_type = "bailing_hybrid"
