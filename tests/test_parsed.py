"""The parsed form of a config (kvviz.families.parsed): the shipped presets' parsed forms equal what
transformers gives today, a user config is parsed once and then read back without transformers,
and a cache entry that is corrupt, of another version or of other bytes is never used."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvviz.families import PRESETS_DIR, Model, load_path, load_preset, model_from_dict, parsed, preset_names

REPO = Path(__file__).resolve().parents[1]
CONFIGS = Path(__file__).parent / "data" / "vllm-0.33" / "configs"


@pytest.mark.parametrize("name", preset_names())
def test_shipped_parsed_form_equals_a_fresh_parse(name):
    data = (PRESETS_DIR / f"{name}.json").read_bytes()
    shipped = parsed.shipped(name, data)
    assert shipped is not None, (
        f"kvviz/presets/parsed/{name}.json is missing or stale: run python -m kvviz.tools.remake_parsed"
    )
    assert shipped == model_from_dict(json.loads(data), name=name)


def test_a_preset_of_changed_bytes_is_parsed_again():
    assert parsed.shipped("gemma-3-27b", b"{}") is None


def test_encode_decode_round_trip_keeps_tuples_and_dataclasses():
    m = load_preset("nemotron-nano-9b-v2")
    assert parsed.decode(json.loads(json.dumps(parsed.encode(m)))) == m


def test_decode_rebuilds_only_kvviz_classes():
    with pytest.raises(ValueError):
        parsed.decode({"__dc__": "os:system"})


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KVVIZ_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _copy(tmp_path, model="jamba-v0.1"):
    folder = tmp_path / model
    folder.mkdir()
    (folder / "config.json").write_bytes((CONFIGS / model / "config.json").read_bytes())
    return folder


def test_second_load_is_a_cache_hit(cache, tmp_path):
    folder = _copy(tmp_path)
    first = load_path(folder)
    entries = list(cache.glob("*.json"))
    assert len(entries) == 1
    assert load_path(folder) == first


def test_corrupt_entry_is_a_miss(cache, tmp_path):
    folder = _copy(tmp_path)
    first = load_path(folder)
    (entry,) = cache.glob("*.json")
    entry.write_text("{not json")
    assert load_path(folder) == first  # parsed again, and the entry rewritten
    assert json.loads(entry.read_text())["model"]


def test_entry_of_other_bytes_or_versions_is_not_used(cache, tmp_path, monkeypatch):
    folder = _copy(tmp_path)
    load_path(folder)
    data = (folder / "config.json").read_bytes()
    assert parsed.lookup(data, "jamba-v0.1") is not None
    monkeypatch.setattr(parsed, "versions", lambda: "kvviz 0.0.0, transformers 0, schema 0")
    assert parsed.lookup(data, "jamba-v0.1") is None


def test_unwritable_cache_is_not_an_error(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("KVVIZ_CACHE_DIR", str(blocker / "sub"))
    assert isinstance(load_path(_copy(tmp_path)), Model)


def _imports_after(argv, env):
    code = (
        "import sys, runpy; sys.argv = ['kvviz'] + sys.argv[1:]\n"
        "from kvviz.cli import main\nrc = main(sys.argv[1:])\n"
        "print('HEAVY', sorted(m for m in ('torch', 'transformers', 'matplotlib') if m in sys.modules),"
        " file=sys.stderr)\n"
        "sys.exit(rc)"
    )
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env, cwd=REPO)
    assert out.returncode == 0, out.stderr
    return out.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("model", ["gemma-3-27b", "qwen3-next-80b-a3b", "jamba-v0.1", "deepseek-v3"])
def test_presets_plan_without_transformers_or_torch(model):
    assert _imports_after(["plan", "--model", model, "--json"], dict(os.environ)) == "HEAVY []"


def test_user_config_on_a_cache_hit_plans_without_transformers(tmp_path):
    env = dict(os.environ, KVVIZ_CACHE_DIR=str(tmp_path / "cache"))
    folder = tmp_path / "gemma4"
    folder.mkdir()
    source = REPO / "tests" / "data" / "vllm-0.33" / "registry" / "configs" / "Gemma4ForCausalLM" / "config.json"
    (folder / "config.json").write_bytes(source.read_bytes())
    assert _imports_after(["plan", "--hf-config", str(folder), "--json"], env) == "HEAVY ['transformers']"  # the miss
    assert _imports_after(["plan", "--hf-config", str(folder), "--json"], env) == "HEAVY []"  # the hit


@pytest.mark.parametrize("model", ["jamba-v0.1", "nemotron-nano-9b-v2"])
def test_first_sight_reads_through_transformers_without_torch(model, tmp_path):
    # transformers' own config classes read the config (their properties give the layer kinds); torch, which
    # transformers would import when it can, is kept out of the process (kvviz.families.hf.transformers_config)
    env = dict(os.environ, KVVIZ_CACHE_DIR=str(tmp_path / "cache"))
    folder = _copy(tmp_path, model)
    assert _imports_after(["plan", "--hf-config", str(folder), "--json"], env) == "HEAVY ['transformers']"  # the miss


def test_a_wrapper_naming_no_class_is_read_without_torch(tmp_path):
    # a Llava text_config without architectures: the language model's class is transformers' causal LM of its
    # model_type (VllmConfig.with_hf_config), from transformers' modeling_auto table, imported without torch
    env = dict(os.environ, KVVIZ_CACHE_DIR=str(tmp_path / "cache"))
    text = {"model_type": "llama", "num_hidden_layers": 4, "hidden_size": 512, "num_attention_heads": 8}
    raw = {"architectures": ["LlavaForConditionalGeneration"], "model_type": "llava", "text_config": text}
    (tmp_path / "config.json").write_text(json.dumps(raw))
    assert _imports_after(["plan", "--hf-config", str(tmp_path), "--json"], env) == "HEAVY ['transformers']"


def _run_with_a_read(tmp_path, before: str, after: str) -> str:
    """stdout of a fresh interpreter that runs `before`, reads Jamba's config.json (a first sight), then `after`."""
    code = f"{before}\nfrom kvviz.families import load_path\nm = load_path({str(_copy(tmp_path))!r})\n{after}"
    env = dict(os.environ, KVVIZ_CACHE_DIR=str(tmp_path / "cache"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_a_process_that_imported_torch_reads_configs_with_it(tmp_path):
    # kvviz keeps torch out only of a process that has not imported it: one that has keeps it working
    after = "print(m.dtype, torch.zeros(2).sum().item(), sys.modules['torch'] is torch)"
    assert _run_with_a_read(tmp_path, "import torch, sys", after).split() == ["bf16", "0.0", "True"]


def test_torch_is_importable_after_a_config_was_read_without_it(tmp_path):
    after = "assert 'torch' not in sys.modules\nimport torch\nprint(torch.ones(3).sum().item())"
    assert _run_with_a_read(tmp_path, "import sys", after) == "3.0"
