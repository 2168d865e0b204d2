"""Each engine plans only what its own registry lists (kvviz.engines.served, kvviz/engines/served.json).

* the shipped table equals what scripts/engine_registries.py reads from the engine's source: SGLang
  0.5.23's wheel (KVVIZ_SGLANG_SRC; .ci/run fetches it and requires it), TensorRT-LLM's
  _torch/models/_arch_index.py where KVVIZ_TRTLLM_SRC points at an extract (tests/engine_sources.py);
* every architecture in the table is accepted, and an architecture the registry lacks is refused
  in one line naming the engine, by the planners themselves (not only by the table's lookup);
* the script follows EntryClass names to the classes they bind, as import_model_classes registers
  them by `__name__` (a synthetic package, run everywhere).
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import pytest
from engine_sources import absent, source_root

from kvviz.base.errors import KvvizError
from kvviz.engines import plan_engine
from kvviz.engines.served import check_served, refusal, served_architectures, served_table
from kvviz.families import load, preset_names, preset_raw
from kvviz.families.loader import model_from_dict

ROOT = Path(__file__).resolve().parent.parent
BUDGET = 60 * 2**30


def _script():
    spec = importlib.util.spec_from_file_location("engine_registries", ROOT / "scripts" / "engine_registries.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("engine_registries", module)
    spec.loader.exec_module(module)
    return module


registries = _script()


def test_sglang_table_is_what_the_script_reads_from_the_wheel():
    root = source_root("sglang")
    if root is None or not (root / registries.SGLANG_MODELS / "registry.py").is_file():
        absent("sglang", "sglang/srt/models/registry.py")
    assert served_table()["sglang"] == registries.sglang_entry(root), (
        "stale: python scripts/engine_registries.py --sglang $KVVIZ_SGLANG_SRC rewrites kvviz/engines/served.json"
    )


def test_trtllm_table_is_what_the_script_reads_from_the_source():
    root = source_root("trtllm")
    if root is None or not (root / registries.TRTLLM_MODELS).is_dir():
        absent("trtllm", f"{registries.TRTLLM_MODELS}/ (_arch_index.py or modeling_*.py)")
    entry = served_table()["trtllm"]
    assert entry["architectures"] == registries.trtllm_architectures(root)
    assert entry == registries.trtllm_entry(root, entry["commit"])


def test_the_table_cites_its_source():
    from kvviz.engines.sglang.constants import VERSION

    sgl, trt = served_table()["sglang"], served_table()["trtllm"]
    assert sgl["version"] == VERSION and sgl["engine"] == f"SGLang {VERSION}"
    assert "EntryClass" in sgl["source"] and f"sglang=={VERSION}" in sgl["source"]
    assert len(trt["commit"]) == 40 and trt["commit"] in trt["source"] and "_arch_index.py" in trt["source"]
    # the model file each registers it from (sglang/srt/models/qwen3_next.py `EntryClass = Qwen3NextForCausalLM`;
    # _arch_index.py "Qwen3NextForCausalLM": "modeling_qwen3_next")
    assert sgl["architectures"]["Qwen3NextForCausalLM"] == "sglang/srt/models/qwen3_next.py"
    assert trt["architectures"]["Qwen3NextForCausalLM"] == "tensorrt_llm/_torch/models/modeling_qwen3_next.py"


@pytest.mark.parametrize("engine", ["sglang", "trtllm"])
def test_every_architecture_in_the_table_is_accepted(engine):
    archs = served_architectures(engine)
    assert archs
    for arch in sorted(archs):
        assert refusal(engine, arch) is None, arch
        check_served(engine, types.SimpleNamespace(name="m", architecture=arch))


@pytest.mark.parametrize("engine,name", [("sglang", "SGLang 0.5.23"), ("trtllm", "TensorRT-LLM")])
def test_an_architecture_the_registry_lacks_is_refused_in_one_line(engine, name):
    # a Llama config under an architecture no engine registers: kvviz reads it (by its model_type)
    raw = dict(preset_raw("llama-3.1-8b"), architectures=["NotInAnyRegistryForCausalLM"])
    model = model_from_dict(raw, name="renamed-llama")
    with pytest.raises(KvvizError) as err:
        plan_engine(engine, model, kv_budget_bytes=BUDGET)
    line = str(err.value)
    assert f"{name} does not serve NotInAnyRegistryForCausalLM" in line and "\n" not in line
    plan_engine(engine, load("llama-3.1-8b"), kv_budget_bytes=BUDGET)  # the same config as LlamaForCausalLM plans


def test_each_preset_is_refused_exactly_where_its_engine_lacks_it():
    for preset in preset_names():
        model = load(preset)
        for engine in ("sglang", "trtllm"):
            try:
                plan_engine(engine, model, kv_budget_bytes=BUDGET)
                said = ""
            except KvvizError as e:
                said = str(e)
            assert ("does not serve" in said) == (model.architecture not in served_architectures(engine)), (
                engine,
                preset,
                said,
            )


def test_sglang_unified_memory_refuses_too():
    from kvviz.engines import EngineKnobs

    with pytest.raises(KvvizError, match="SGLang 0.5.23 does not serve JambaForCausalLM"):
        plan_engine("sglang", load("jamba-v0.1"), kv_budget_bytes=BUDGET, knobs=EngineKnobs(unified_memory=True))


def test_script_follows_entry_class_names_to_their_classes(tmp_path):
    models = tmp_path / "sglang" / "srt" / "models"
    (models / "sub").mkdir(parents=True)
    (tmp_path / "sglang" / "_version.py").write_text("__version__: str\n__version__ = version = '9.9.9'\n")
    (models / "registry.py").write_text("")
    (models / "a.py").write_text("class AForCausalLM:\n    pass\n\n\nEntryClass = AForCausalLM\n")
    (models / "b.py").write_text(
        "from sglang.srt.models.a import AForCausalLM as Base\n\n\nclass BForCausalLM(Base):\n    pass\n\n\n"
        "Alias = BForCausalLM\nEntryClass = [Alias]\n"
    )
    (models / "c.py").write_text("from sglang.srt.models.sub.impl import CForCausalLM\n\nEntryClass = [CForCausalLM]\n")
    (models / "sub" / "impl.py").write_text("class CForCausalLM:\n    pass\n\n\nEntryClass = CForCausalLM\n")
    (models / "d.py").write_text("class Helper:\n    pass\n")  # no EntryClass: registers nothing
    entry = registries.sglang_entry(tmp_path)
    assert entry["version"] == "9.9.9" and entry["engine"] == "SGLang 9.9.9"
    # sub/ is a subpackage: pkgutil.iter_modules does not list its modules, c.py's import reaches it
    assert entry["architectures"] == {
        "AForCausalLM": "sglang/srt/models/a.py",
        "BForCausalLM": "sglang/srt/models/b.py",
        "CForCausalLM": "sglang/srt/models/c.py",
    }
    (models / "e.py").write_text("from sglang.srt.models.a import AForCausalLM\n\nEntryClass = AForCausalLM\n")
    with pytest.raises(ValueError, match="AForCausalLM: registered by sglang/srt/models/a.py and"):
        registries.sglang_architectures(tmp_path)  # import_model_classes: "Duplicated model implementation"


def test_script_reads_trtllm_decorators_where_no_index(tmp_path):
    models = tmp_path / "tensorrt_llm" / "_torch" / "models"
    models.mkdir(parents=True)
    (models / "modeling_x.py").write_text(
        '@register_auto_model("XForCausalLM")\nclass X:\n    pass\n\n\n'
        '@mod.register_auto_model("YForCausalLM")\nclass Y:\n    pass\n'
    )
    assert registries.trtllm_architectures(tmp_path) == {
        "XForCausalLM": "tensorrt_llm/_torch/models/modeling_x.py",
        "YForCausalLM": "tensorrt_llm/_torch/models/modeling_x.py",
    }
    (models / "_arch_index.py").write_text('MODEL_ARCH_TO_MODULE = {"ZForCausalLM": "modeling_z"}\n')
    assert registries.trtllm_architectures(tmp_path) == {"ZForCausalLM": "tensorrt_llm/_torch/models/modeling_z.py"}
