"""The forms a downloaded config.json comes in, read as transformers 5.24 and vLLM 0.33 read them (issue 39).

tests/data/vllm-0.33/published/ holds published config.json files (`hub/`) and the same files after
`AutoConfig.from_pretrained(folder).save_pretrained(out)` with transformers 5.24.0 (`resaved/`; see that
folder's README). Each test here names a form kvviz once refused or misread; the plans themselves are
compared with vLLM's own in tests/test_published_plans.py."""

import json
import math
from pathlib import Path

import pytest

import kvviz
from kvviz.base.errors import KvvizError
from kvviz.families.loader import decode_special_floats, model_from_dict

HERE = Path(__file__).parent / "data" / "vllm-0.33" / "published"


def test_resaved_infinity_is_read_as_transformers_reads_it():
    """transformers 5.24 writes a non-finite float as {"__float__": "Infinity"}
    (PreTrainedConfig._encode_special_floats) and reads it back as float("inf") (_decode_special_floats,
    called by _dict_from_json_file): the re-saved hybrids carry `time_step_limit: [0.0, Infinity]` that way."""
    raw = json.loads((HERE / "resaved" / "granite-4.0-h-small" / "config.json").read_text())
    assert raw["time_step_limit"] == [0.0, {"__float__": "Infinity"}]
    decoded = decode_special_floats(raw)
    assert decoded["time_step_limit"][0] == 0.0 and decoded["time_step_limit"][1] == math.inf
    assert decode_special_floats({"a": [{"__float__": "-Infinity"}]})["a"][0] == -math.inf
    assert math.isnan(decode_special_floats({"__float__": "NaN"}))
    # only a one-key object whose value is one of the three tags is a float; anything else stays as given
    assert decode_special_floats({"__float__": "inf"}) == {"__float__": "inf"}
    assert decode_special_floats({"__float__": "NaN", "b": 1}) == {"__float__": "NaN", "b": 1}


def test_resaved_hybrids_plan_as_published():
    """Falcon-H1, Nemotron-H and Granite-4.0-H re-saved plan exactly as their published config.json: the
    infinite time_step_limit touches no cache size."""
    for name in ("Falcon-H1-7B-Instruct", "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "granite-4.0-h-small"):
        plans = [kvviz.plan(str(HERE / form / name), max_model_len=32768) for form in ("hub", "resaved")]
        assert plans[0].block_stride == plans[1].block_stride, name
        assert [[c.name for c in g.layers] for g in plans[0].groups] == [
            [c.name for c in g.layers] for g in plans[1].groups
        ], name


def test_transformers_4_57_save_of_a_flat_config_plans_as_the_flat_one():
    """transformers 4.57's save_pretrained of a flat Qwen2.5-VL config (resaved-4.57/, the form of many Hub
    fine-tunes) writes text_config beside the flat keys it came from, with text_config.sliding_window null
    (Qwen2_5_VLTextConfig: no window without use_sliding_window) and the top level's 32768 kept: vLLM reads the
    text config and plans full attention, exactly as the published form; kvviz no longer refuses the top-level
    copy ("sliding_window=32768 at the top level is not read")."""
    for name in ("Qwen2.5-VL-3B-Instruct", "Qwen2.5-VL-7B-Instruct"):
        raw = json.loads((HERE / "resaved-4.57" / name / "config.json").read_text())
        assert raw["sliding_window"] == 32768 and raw["text_config"]["sliding_window"] is None
        plans = [kvviz.plan(str(HERE / form / name), max_model_len=32768) for form in ("hub", "resaved-4.57")]
        assert plans[0].block_stride == plans[1].block_stride, name
        assert [[c.name for c in g.layers] for g in plans[0].groups] == [
            [c.name for c in g.layers] for g in plans[1].groups
        ], name


def test_a_top_level_field_the_text_config_overrides_is_still_refused():
    """The rule the BC copies must not weaken: Gemma 3's class leaves a top-level num_hidden_layers where it is and
    reads text_config's; a top-level value that is neither the text config's given value nor a window the text
    config turned off is refused, naming both."""
    raw = json.loads((HERE / "hub" / "gemma-3-27b-it" / "config.json").read_text())
    raw["num_hidden_layers"] = 10
    with pytest.raises(KvvizError, match="num_hidden_layers=10 at the top level is not read"):
        model_from_dict(raw, name="g")
