"""vLLM 0.33's registry as kvviz's work list: the committed extract
(tests/data/vllm-0.33/registry-architectures.json) equals what scripts/vllm_registry.py reads from
the wheel (when build/wheels holds it), kvviz.families.catalog renders it, and the committed
docs/models.md and kvviz/families/vllm_registry.json are what it renders now."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from engine_sources import absent

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "vllm-0.33" / "registry-architectures.json"


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


vllm_registry = _script("vllm_registry")
from kvviz.base.errors import KvvizError  # noqa: E402
from kvviz.families import catalog  # noqa: E402
from kvviz.families.loader import model_from_dict  # noqa: E402

models_table = catalog.models_table
MODELS_MD = ROOT / "docs" / "models.md"
PACKAGED = ROOT / "kvviz" / "families" / "vllm_registry.json"
REGENERATE = (
    f"stale: run `PYTHONPATH=. {catalog.REGENERATE}` (rewrites docs/models.md and kvviz/families/vllm_registry.json)"
)


def test_committed_extract_has_every_architecture():
    data = json.loads(DATA.read_text())
    tables = data["tables"]
    assert data["vllm_version"] == "0.33.0" and len(data["wheel_sha256"]) == 64
    assert (
        {t: len(rows) for t, rows in tables.items()}
        == {"_TEXT_GENERATION_MODELS": 124, "_MULTIMODAL_MODELS": 127, "_TRANSFORMERS_SUPPORTED_MODELS": 23}
        == data["counts"]
    )
    for rows in tables.values():
        archs = [r["architecture"] for r in rows]
        assert len(set(archs)) == len(archs)
        for r in rows:
            assert r["file"].endswith(".py") and r["file"].startswith("vllm/"), r
            assert r["module"].replace(".", "/") in r["file"], r
    # registry order and module resolution, spot-checked against registry.py as read by hand
    text = tables["_TEXT_GENERATION_MODELS"]
    assert text[0] == {
        "architecture": "AfmoeForCausalLM",
        "module": "vllm.model_executor.models.afmoe",
        "file": "vllm/model_executor/models/afmoe.py",
        "class": "AfmoeForCausalLM",
    }
    by = {r["architecture"]: r for r in text}
    assert by["DeepseekV32ForCausalLM"]["file"] == "vllm/models/deepseek_v32/__init__.py"
    assert by["InternLM3ForCausalLM"]["class"] == "LlamaForCausalLM"
    assert tables["_MULTIMODAL_MODELS"][-1]["architecture"] == "WhisperForConditionalGeneration"
    backend = {r["architecture"]: r for r in tables["_TRANSFORMERS_SUPPORTED_MODELS"]}
    assert backend["SmolLM3ForCausalLM"] == {
        "architecture": "SmolLM3ForCausalLM",
        "module": "vllm.model_executor.models.transformers",
        "file": "vllm/model_executor/models/transformers/__init__.py",
        "class": "TransformersForCausalLM",
    }
    assert backend["HunYuanMoEV1ForCausalLM"]["class"] == "TransformersMoEForCausalLM"
    assert list(backend)[-1] == "VibeVoiceAsrForConditionalGeneration"


def test_extract_matches_the_wheel():
    wheel = vllm_registry.find_wheel()
    if wheel is None:  # .ci/run downloads it and sets KVVIZ_REQUIRE_VLLM_SRC: there it must run
        absent("vllm", "wheel (python -m pip download --no-deps vllm==0.33.0 -d build/wheels)", where="build/wheels")
    fresh = vllm_registry.read_registry(wheel)
    assert vllm_registry.dumps(fresh) == DATA.read_text(), (
        "stale: python scripts/vllm_registry.py rewrites tests/data/vllm-0.33/registry-architectures.json"
    )


def test_entries_follow_star_star_in_place():
    import ast

    src = "_A = {'X': ('x', 'X'), 'Y': ('y', 'Y')}\n_B = {'W': ('w', 'W'), **_A, 'X': ('x2', 'X2')}\n"
    dicts = vllm_registry._dicts(ast.parse(src))
    assert vllm_registry._entries("_B", dicts) == [
        ("W", "w", "W", "_B"),
        ("X", "x2", "X2", "_B"),
        ("Y", "y", "Y", "_A"),
    ]
    assert vllm_registry.resolve_module("vllm.models.beam") == "vllm.models.beam"
    assert vllm_registry.resolve_module("llama") == "vllm.model_executor.models.llama"


SMALL = {
    "vllm_version": "0.33.0",
    "tables": {
        "_TEXT_GENERATION_MODELS": [
            {
                "architecture": "LlamaForCausalLM",
                "module": "vllm.model_executor.models.llama",
                "file": "vllm/model_executor/models/llama.py",
                "class": "LlamaForCausalLM",
            },
            {
                "architecture": "BartForCausalLM",
                "module": "vllm.model_executor.models.bart",
                "file": "vllm/model_executor/models/bart.py",
                "class": "Bart|Model",
            },
        ],
        "_MULTIMODAL_MODELS": [
            {
                "architecture": "WhisperForConditionalGeneration",
                "module": "vllm.model_executor.models.whisper",
                "file": "vllm/model_executor/models/whisper.py",
                "class": "WhisperForConditionalGeneration",
            },
        ],
    },
}


def _status(arch: str) -> tuple[str, str]:
    return {"LlamaForCausalLM": ("planned", "decoder")}.get(arch, ("refused", "encoder-decoder cross-attention"))


def test_models_table_small_example():
    md = models_table(SMALL, _status)
    assert md.startswith("# Architectures of vLLM 0.33.0\n")
    assert "- Text generation: 1 of 2 planned (`_TEXT_GENERATION_MODELS`)" in md
    assert "- Multimodal: 0 of 1 planned (`_MULTIMODAL_MODELS`)" in md
    assert "## Text generation (`_TEXT_GENERATION_MODELS`): 1 of 2 planned" in md
    assert "| `LlamaForCausalLM` | `llama.py` | `LlamaForCausalLM` | planned | decoder |" in md
    assert "| `BartForCausalLM` | `bart.py` | `Bart\\|Model` | refused | encoder-decoder cross-attention |" in md
    assert md.index("LlamaForCausalLM") < md.index("BartForCausalLM") < md.index("WhisperForConditionalGeneration")
    assert md == models_table(SMALL, _status)  # deterministic: a stale page is a diff


@pytest.mark.parametrize("bad", [("maybe", "x"), ("planned", "")])
def test_models_table_refuses_an_unknown_status(bad):
    with pytest.raises(ValueError, match="LlamaForCausalLM"):
        models_table(
            {"tables": {"_TEXT_GENERATION_MODELS": SMALL["tables"]["_TEXT_GENERATION_MODELS"][:1]}}, lambda arch: bad
        )


def test_docs_models_md_is_current():
    """docs/models.md is the table of the committed extract and kvviz's family table as they are now."""
    registry = json.loads(DATA.read_text())
    assert MODELS_MD.read_text() == models_table(registry), REGENERATE
    assert PACKAGED.read_text() == DATA.read_text(), REGENERATE


def test_every_vllm_architecture_is_planned_or_refused_with_a_rule():
    registry = catalog.vllm_registry()
    for arch in catalog.vllm_architectures(registry):
        state, detail = catalog.architecture_status(arch)
        assert state in catalog.STATUSES and detail, arch
    assert set(catalog.REFUSED) <= catalog.vllm_architectures(registry)
    counts = catalog.table_counts(registry, catalog.architecture_status)
    assert {t: n for t, (_, n) in counts.items()} == {
        "_TEXT_GENERATION_MODELS": 124,
        "_MULTIMODAL_MODELS": 127,
        "_TRANSFORMERS_SUPPORTED_MODELS": 23,
    }
    assert catalog.architecture_status("LlamaForCausalLM")[0] == "planned"
    assert catalog.architecture_status("WhisperForConditionalGeneration") == (
        "planned",
        "encoder-decoder (self- and cross-attention) (encdec): vLLM 0.33 whisper.py WhisperDecoderLayer "
        "(self_attn: Attention, encoder_attn: WhisperCrossAttention)",
    )
    assert catalog.architecture_status("Step5ForCausalLM")[0] == "refused"
    with pytest.raises(KeyError, match="FooForCausalLM"):
        catalog.architecture_status("FooForCausalLM")


def test_unknown_architecture_says_vllms_rule():
    with pytest.raises(
        KvvizError, match=r"vLLM 0.33 serves it; kvviz refuses it: Step5 sparse layer.*CircularBufferSpec"
    ):
        model_from_dict({"architectures": ["Step5ForCausalLM"], "model_type": "step5"}, name="s")
    # chatglm.py GLMAttention.__init__ reads config.original_rope, which vLLM's ChatGLMConfig does not default
    with pytest.raises(KvvizError, match=r"original_rope"):
        model_from_dict({"architectures": ["ChatGLMModel"], "model_type": "chatglm"}, name="g")


def test_architecture_not_in_vllms_registry_says_so():
    with pytest.raises(KvvizError, match=r"FooForCausalLM.*not in vLLM 0.33's registry"):
        model_from_dict({"architectures": ["FooForCausalLM"], "model_type": "foo"}, name="f")


def test_transformers_backend_architectures_are_vllms():
    """vLLM 0.33 serves these through its Transformers backend: kvviz never calls them outside its registry."""
    with pytest.raises(KvvizError, match=r"NanbeigeForCausalLM.*vLLM 0.33 serves it; kvviz refuses it"):
        model_from_dict({"architectures": ["NanbeigeForCausalLM"], "model_type": "nanbeige"}, name="n")
    assert catalog.architecture_status("Emu3ForConditionalGeneration")[0] == "planned"
    assert catalog.architecture_status("SmolLM3ForCausalLM")[0] == "planned"
    assert catalog.architecture_status("HunYuanMoEV1ForCausalLM")[0] == "planned"


def test_no_planned_architecture_keeps_a_refusal():
    # a refusal names the rule kvviz lacks; once a family plans the architecture, its old rule would be a
    # false statement wherever REFUSED is read (the loader's message, `kvviz models --architectures`)
    from kvviz.families import loader  # noqa: F401  (registers every family's architectures)
    from kvviz.families.refused import REFUSED
    from kvviz.families.registry import ARCHITECTURES

    assert sorted(set(REFUSED) & set(ARCHITECTURES)) == []
