"""Hybrid models' HF configs read through transformers, and the presets that ship in the package
(docs/hybrid.md#hybrid-caches). Each preset is parsed once per session (families.load_preset caches)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvviz.base.errors import KvvizError
from kvviz.families import PRESETS_DIR as MODELS_DIR
from kvviz.families import Model, load, load_path, preset_summary
from kvviz.families import load_preset as load_model
from kvviz.families import preset_names as model_names
from kvviz.families.decoder import CHUNKED, FULL, SLIDING, DecoderConfig
from kvviz.families.deepseek_v4_config import ModelConfig
from kvviz.families.state_config import ATTN, STATE, StateConfig
from kvviz.families.state_shapes import state_shapes

# layer_types' name of a gated delta net layer (Qwen3-Next's config.json)
LINEAR = "linear_attention"
load_hf_config = load_path

HYBRID = ("gpt-oss-120b", "gemma-3-27b", "qwen3-next-80b-a3b", "llama-4-scout")
REPO = Path(__file__).resolve().parent.parent


def small_raw(**changes) -> dict:
    """A small qwen3 config with explicit layer_types (any architecture with layer_types plans)."""
    raw = {
        "model_type": "qwen3",
        "architectures": ["Qwen3ForCausalLM"],
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "hidden_size": 512,
        "use_sliding_window": True,
        "sliding_window": 256,
        "layer_types": [FULL, SLIDING, FULL, SLIDING],
        "torch_dtype": "bfloat16",
    }
    raw.update(changes)
    return raw


def test_presets_ship_inside_the_package():
    # Package data (issue 10): found next to the modules, not in the repository's data/ folder.
    assert Path(str(MODELS_DIR)).resolve().parent == (REPO / "kvviz").resolve()
    # the presets this file reads ship (more families ship presets of their own)
    assert set(model_names()) >= {"deepseek-v4-pro", "deepseek-v4-flash", *HYBRID}
    for name in model_names():
        raw = json.loads((MODELS_DIR / f"{name}.json").read_text())
        assert "model_type" in raw


def test_deepseek_presets_load_as_before():
    pro = load_model("deepseek-v4-pro")
    assert isinstance(pro, Model) and pro.family == "deepseek_v4" and isinstance(pro.config, ModelConfig)
    assert pro.config.num_hidden_layers == 61 and pro.config.layer_mix == {"c4": 30, "c128": 31, "swa": 0}


@pytest.mark.parametrize("name", HYBRID)
def test_hybrid_presets_load_as_hybrid_configs(name):
    m = load_model(name)
    assert m.family != "deepseek_v4" and isinstance(m.config, (DecoderConfig, StateConfig))
    c = m.config
    kinds = c.layer_kinds if isinstance(c, DecoderConfig) else tuple({s.layer for s in c.slots})
    assert len(kinds) == c.num_hidden_layers


def test_gpt_oss_alternates_starting_with_sliding():
    c = load_model("gpt-oss-120b").config
    assert c.num_hidden_layers == 36 and (c.num_key_value_heads, c.head_dim, c.sliding_window) == (8, 64, 128)
    assert c.layer_kinds == tuple(SLIDING if i % 2 == 0 else FULL for i in range(36))


def test_gemma3_text_config_and_sliding_window_pattern():
    m = load_model("gemma-3-27b")  # multimodal: the text config is read
    assert m.model_type == "gemma3_text" and m.architecture == "Gemma3ForConditionalGeneration"
    c = m.config
    assert (c.num_hidden_layers, c.num_key_value_heads, c.head_dim, c.sliding_window) == (62, 16, 128, 1024)
    assert c.layer_kinds == tuple(FULL if (i + 1) % 6 == 0 else SLIDING for i in range(62))


def test_qwen3_next_full_attention_interval_and_gdn_fields():
    c = load_model("qwen3-next-80b-a3b").config
    assert c.mamba_type == "gdn"
    assert tuple((s.layer, s.kind) for s in c.slots) == tuple(
        (i, ATTN if (i + 1) % 4 == 0 else STATE) for i in range(48)
    )
    assert (c.num_kv_heads, c.head_dim) == (2, 256)
    a = c.args
    assert (a["num_k_heads"], a["num_v_heads"], a["head_k_dim"], a["head_v_dim"], a["conv_kernel"]) == (
        16,
        32,
        128,
        128,
        4,
    )
    conv = dict(state_shapes(c, 1, model="qwen3-next-80b-a3b"))["conv"]
    assert conv == (4 - 1, 2 * 16 * 128 + 32 * 128)


def test_llama4_chunked_layers_follow_no_rope_layers():
    c = load_model("llama-4-scout").config
    # vLLM's llama4.py: a layer is NoPE (global, full attention) when no_rope_layers[i] == 0; the
    # others use chunked local attention. transformers fills no_rope_layers every 4th layer.
    assert "no_rope_layers" in c.kind_source
    assert c.layer_kinds == tuple(FULL if (i + 1) % 4 == 0 else CHUNKED for i in range(48))
    assert (c.num_key_value_heads, c.head_dim, c.attention_chunk_size) == (8, 128, 8192)


def test_load_hf_config_reads_a_file_or_a_folder(tmp_path):
    folder = tmp_path / "tiny-model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(small_raw()))
    by_folder = load_hf_config(folder)
    by_file = load_hf_config(folder / "config.json")
    assert by_folder == by_file
    assert by_folder.name == "tiny-model"
    assert by_folder.config.layer_kinds == (FULL, SLIDING, FULL, SLIDING) and by_folder.config.sliding_window == 256


def test_load_any_keeps_deepseek_on_its_own_path(tmp_path):
    p = tmp_path / "v4.json"
    p.write_text((MODELS_DIR / "deepseek-v4-flash.json").read_text())
    assert isinstance(load(p).config, ModelConfig)
    q = tmp_path / "gemma.json"
    q.write_text((MODELS_DIR / "gemma-3-27b.json").read_text())
    assert load(q) == dataclass_replace_name(load_model("gemma-3-27b"), "gemma")


def dataclass_replace_name(c, name):
    import dataclasses

    return dataclasses.replace(c, name=name)


@pytest.mark.parametrize(
    "raw,field",
    [
        (small_raw(layer_types=[FULL, "mystery_attention", FULL, FULL]), "layer_types[1]='mystery_attention'"),
        (small_raw(layer_types=[FULL, "conv", FULL, FULL]), "layer_types[1]='conv'"),
        (small_raw(model_type="no_such_model"), "model_type 'no_such_model'"),
        # an architecture kvviz has no reader for (a plain llama now plans: an attention-only decoder)
        (
            {
                "model_type": "bert",
                "architectures": ["BertModel"],
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "hidden_size": 64,
            },
            "'BertModel'",
        ),
        ({"num_hidden_layers": 2}, "model_type"),
        (small_raw(layer_types=[FULL] * 3), "layer_types"),
    ],
)
def test_bad_configs_are_refused_in_one_line(tmp_path, raw, field):
    p = tmp_path / "config.json"
    p.write_text(json.dumps(raw))
    with pytest.raises(KvvizError) as e:
        load_hf_config(p)
    assert field in str(e.value) and "\n" not in str(e.value)


def test_sliding_layer_types_without_a_window_are_full_attention(tmp_path):
    # vLLM: a layer_types 'sliding_attention' layer with no sliding_window is full attention
    p = tmp_path / "config.json"
    p.write_text(json.dumps(small_raw(sliding_window=None, use_sliding_window=False)))
    c = load_hf_config(p).config
    assert c.layer_kinds == (FULL,) * 4 and c.sliding_window is None


def test_bad_paths_and_json_are_one_line(tmp_path):
    with pytest.raises(KvvizError, match="no such file"):
        load_hf_config(tmp_path / "missing.json")
    with pytest.raises(KvvizError, match="no config.json"):
        load_hf_config(tmp_path)
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(KvvizError, match="malformed JSON"):
        load_hf_config(bad)


def test_unknown_model_lists_the_presets():
    with pytest.raises(KvvizError) as e:
        load_model("llama-2")
    assert "\n" not in str(e.value) and all(n in str(e.value) for n in model_names())


def test_preset_summaries_do_not_import_transformers():
    code = (
        "import sys; from kvviz import families; "
        "lines = [families.preset_summary(n) for n in families.preset_names()]; "
        "assert 'transformers' not in sys.modules and 'torch' not in sys.modules; print(len(lines))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": ""},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(len(model_names()))


def test_preset_summary_of_deepseek_matches_the_models_command_line():
    pro = preset_summary("deepseek-v4-pro")  # the preset's 61 layers and its compress_ratios' mix
    assert (
        pro.startswith(
            "deepseek-v4-pro: 61 layers (+1 MTP): 30 c4, 31 c128, 0 SWA-only; head_dim 512, index_head_dim 128"
        )
        and "\n" not in pro
    )
    qwen = preset_summary("qwen3-next-80b-a3b")
    assert qwen.startswith("qwen3-next-80b-a3b (") and "Qwen3NextForCausalLM" in qwen and "\n" not in qwen


def _read_changed(tmp_path, preset, **changes):
    raw = json.loads((MODELS_DIR / f"{preset}.json").read_text())
    raw.update(changes)
    (tmp_path / "config.json").write_text(json.dumps(raw))
    return load_hf_config(tmp_path)


def test_hybrid_config_validates_its_own_fields(tmp_path):
    # A bad field is refused when the config is read, in one line naming the field.
    good = json.loads((MODELS_DIR / "gpt-oss-120b.json").read_text())
    for changes, needle in (
        (dict(head_dim=-3), "head_dim"),
        (dict(layer_types=good["layer_types"][:-1]), "layer_types"),
    ):
        with pytest.raises(KvvizError, match=needle) as e:
            _read_changed(tmp_path, "gpt-oss-120b", **changes)
        assert "\n" not in str(e.value)
    with pytest.raises(KvvizError, match="linear_num_key_heads"):
        _read_changed(tmp_path, "qwen3-next-80b-a3b", linear_num_key_heads=0)


def test_without_transformers_a_hybrid_config_is_one_line(monkeypatch, tmp_path):
    # A GPU box may hold torch alone: DeepSeek V4 still plans, a hybrid config says what it needs.
    import sys

    from kvviz.base.errors import KvvizError
    from kvviz.families import PRESETS_DIR as MODELS_DIR
    from kvviz.families import load_path as load_hf_config

    gemma4 = Path(__file__).parent / "data" / "vllm-0.33" / "registry" / "configs" / "Gemma4ForCausalLM"
    (tmp_path / "config.json").write_text((gemma4 / "config.json").read_text())
    monkeypatch.setitem(sys.modules, "transformers", None)  # `import transformers` now raises ImportError
    with pytest.raises(KvvizError, match="needs transformers") as e:
        load_hf_config(tmp_path)  # a config's first sight is read by transformers' config class
    assert "\n" not in str(e.value)
    from kvviz.families import parsed

    data = (MODELS_DIR / "jamba-v0.1.json").read_bytes()
    assert parsed.shipped("jamba-v0.1", data).name == "jamba-v0.1"  # a preset: its parsed form ships with kvviz
    from kvviz.cli import main

    assert main(["plan", "--model", "deepseek-v4-pro", "--json"]) == 0  # DeepSeek V4 needs no transformers


def test_sliding_layers_without_a_window_are_full_attention(tmp_path):
    # vLLM's gpt_oss passes sliding_window=config.sliding_window to its even layers: None = full
    import json

    from kvviz.families import PRESETS_DIR as MODELS_DIR
    from kvviz.families import load_path as load_hf_config
    from kvviz.families.decoder import FULL

    raw = json.loads((MODELS_DIR / "gpt-oss-120b.json").read_text())
    raw["sliding_window"] = None
    (tmp_path / "config.json").write_text(json.dumps(raw))
    config = load_hf_config(tmp_path).config
    assert set(config.layer_kinds) == {FULL} and config.sliding_window is None
