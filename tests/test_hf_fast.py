"""kvviz reads a config.json without transformers (kvviz/families/hf_fast.py, its table
kvviz/families/hf_table.json made by scripts/hf_config_table.py): the table agrees with the
installed transformers, and every config kvviz ships or tests against gives the same Model through
the table as through transformers' config classes."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvviz.families import hf, hf_fast, preset_names, preset_raw
from kvviz.families.loader import model_from_dict

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = sorted((ROOT / "tests" / "data").rglob("config.json"))


def _script():
    spec = importlib.util.spec_from_file_location("hf_config_table", ROOT / "scripts" / "hf_config_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sources():
    for name in preset_names():
        yield f"preset {name}", name, preset_raw(name)
    for path in CONFIGS:
        yield str(path.relative_to(ROOT)), path.parent.name, json.loads(path.read_text())


SOURCES = list(_sources())


def test_table_matches_installed_transformers():
    """Each model type the test configs use: the shipped entry is what the script makes today."""
    transformers = pytest.importorskip("transformers")
    from transformers import CONFIG_MAPPING

    doc = json.loads(hf_fast.TABLE.read_text())
    if doc["transformers"] != transformers.__version__:
        # kvviz then reads every config through transformers itself (hf_fast.table() is empty): right, not fast
        assert hf_fast.table() == {"models": {}}
        pytest.skip(
            f"table made from transformers {doc['transformers']}, {transformers.__version__} installed: "
            "remake with python scripts/hf_config_table.py"
        )
    assert hf_fast.table() == doc
    script = _script()
    types = {raw.get("model_type") for _, _, raw in SOURCES} | {
        (raw.get("text_config") or {}).get("model_type") for _, _, raw in SOURCES
    }
    checked = 0
    for model_type in sorted(t for t in types if t in doc["models"]):
        made = json.loads(json.dumps(script.make_entry(CONFIG_MAPPING[model_type], model_type)))
        shipped = dict(doc["models"][model_type])  # each field's type code is held once, in the table's types
        shipped["types"] = {k: doc["types"][i] for k, i in shipped["types"].items()}
        assert shipped == made, model_type
        checked += 1
    assert checked >= 20


@pytest.mark.parametrize("label, name, raw", SOURCES, ids=[s[0] for s in SOURCES])
def test_table_reader_gives_transformers_model(label, name, raw, monkeypatch):
    from kvviz.base.errors import KvvizError

    def read(use_table: bool):
        if not use_table:
            monkeypatch.setattr(hf, "fast_read", lambda raw: None)
        try:
            return model_from_dict(raw, name=name)
        except KvvizError as e:
            return f"refused: {e}"
        finally:
            monkeypatch.undo()

    assert read(True) == read(False)


def test_most_configs_take_the_table():
    # configs kvviz reads as their JSON (custom code: an auto_map or a model_type transformers does not
    # know; vLLM-own config classes) never reach transformers, so they are not the table's concern
    from transformers import CONFIG_MAPPING

    own = set(hf._NATIVE_ONLY) | set(hf.VLLM_OWN_DEFAULTS)
    sources = [
        raw
        for _, _, raw in SOURCES
        if raw.get("model_type") in CONFIG_MAPPING and raw["model_type"] not in own and "auto_map" not in raw
    ]
    taken = sum(hf_fast.fast_read(raw) is not None for raw in sources)
    # 164 of 174 on 2026-12-03 (116 before kvviz/families/hf_fast_rules.py mirrored the state hybrids', DeepSeek-V2 /
    # V3.2's, Llama 4's, Qwen3.5's, ... config-class rules). Still transformers': DeepSeek V4 (its family reads the
    # JSON itself), Gemma 4's per_layer_config, Step3p5's, Mellum's, VibeVoice's; and since the table mirrors the
    # classes' @strict validation (kvviz/families/hf_fast_strict.py; 166 of 181 on 2026-12-03), the classes whose
    # validators are more than it evaluates: Laguna's, OLMo-Hybrid's, Cosmos3-Edge's, Molmo2's, Muse Spark's
    assert taken >= 164, f"{taken} of {len(sources)}"


def test_first_sight_imports_no_torch(tmp_path):
    config = ROOT / "tests" / "data" / "own-configs" / "deepseek-v3"
    code = (
        "import sys, kvviz; kvviz.load(sys.argv[1]);"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(config)],
        capture_output=True,
        text=True,
        env={"KVVIZ_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        check=True,
    )
    assert out.stdout.strip() == "[]"
