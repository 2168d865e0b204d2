"""The custom-code config class of InternS2MobiusForConditionalGeneration for vLLM's reference run (trust_remote_code):
transformers' Qwen3_5MoeConfig (its text_config and vision_config sub-configs) under the model_type below."""

from transformers import Qwen3_5MoeConfig


class RefConfig(Qwen3_5MoeConfig):
    model_type = "interns2_mobius"
