"""Reference-only config class (not part of kvviz): MOSS-Audio is custom code; this holds the keys vLLM's
moss_audio.py reads. As vLLM's own MossAudioConfig (moss_audio.py), language_config is a Qwen3Config and
get_text_config() returns it."""

import transformers
from transformers import Qwen3Config


class RefConfig(transformers.PretrainedConfig):
    model_type = "moss_audio"

    def __init__(self, audio_config=None, language_config=None, adapter_hidden_size=8192, **kwargs):
        self.audio_config = audio_config or {}
        lc = language_config if isinstance(language_config, Qwen3Config) else Qwen3Config(**(language_config or {}))
        self.language_config = lc
        self.adapter_hidden_size = adapter_hidden_size
        for key in ("num_hidden_layers", "vocab_size"):
            kwargs.setdefault(key, getattr(lc, key, None))
        super().__init__(**kwargs)
        for key in ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "max_position_embeddings"):
            setattr(self, key, getattr(lc, key))

    def get_text_config(self, decoder=False, **kwargs):
        return self.language_config
