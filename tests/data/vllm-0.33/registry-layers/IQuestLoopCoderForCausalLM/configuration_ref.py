"""Reference config class for IQuestLoopCoderForCausalLM (written by ../make_configs.py): the keys the vLLM 0.33 model file
reads, as attributes; nested dicts (()) read with attribute access as the released config class's
dataclasses are."""

from transformers import PretrainedConfig


class _Attr(dict):
    def __getattr__(self, key):
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None


def _wrap(value):
    if isinstance(value, dict):
        return _Attr({k: _wrap(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


class RefConfig(PretrainedConfig):
    model_type = "iquestloopcoder"

    def __init__(self, **kwargs):
        for key in ():
            if key in kwargs:
                kwargs[key] = _wrap(kwargs[key])
        super().__init__(**kwargs)
