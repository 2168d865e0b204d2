"""One record per architecture (issue 39; kvviz/families/record.py, docs/architecture.md#adding-a-model-family).

Every architecture of vLLM 0.33's registry is one record of a family (what kvviz believes about it: its
vLLM source, config class, head / KV-head rules, layer kinds and names, wrapper rule) or a one-line
refusal naming the vLLM rule kvviz does not model; the family table (`ARCHITECTURES`, `RECORDS`) and
docs/models.md are built from the records; and no per-property table keyed by architecture names or
model types is written by hand in kvviz/families/ (the module-level literals are read with `ast`).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from kvviz.families import catalog, loader  # noqa: F401  (registers every family's records)
from kvviz.families.record import Record
from kvviz.families.refused import REFUSED, vllm_architectures
from kvviz.families.registry import ARCHITECTURES, FAMILIES, RECORDS, register

FAMILIES_DIR = Path(__file__).resolve().parent.parent / "kvviz" / "families"
RECORD_MODULES = ("decoder_records", "transformers_backend", "mla_records", "state_records", "encdec", "deepseek_v4")
# Lists of model types that mirror one engine table each (not kvviz's beliefs about an architecture): the
# module-level name -> the table it copies.
ENGINE_LISTS = {
    "hf.FLOAT16_NOT_SUPPORTED": "vllm/config/model.py _FLOAT16_NOT_SUPPORTED_MODELS",
    "mla.MLA_MODEL_TYPES": "transformers_utils/model_arch_config_convertor.py is_deepseek_mla",
    "transformers_backend.HEAD_DIM_REQUIRED": "transformers' HunYuan modeling files, which read config.head_dim",
    "wrapper_rules.OVIS_TEXT_TYPES": "ovis.py IMAGE_PAD_TOKEN_ID_MAP",
}


def _records() -> list[Record]:
    """Every record object the family table holds, once each."""
    return list({id(r): r for r in RECORDS.values()}.values())


def test_every_registry_architecture_has_a_record_or_a_one_line_refusal():
    for arch in sorted(vllm_architectures()):
        planned, refused = arch in RECORDS, arch in REFUSED
        assert planned != refused, f"{arch}: planned {planned}, refused {refused}"
        if planned:
            assert arch in RECORDS[arch].names, arch  # by its own name, not a model type
        else:
            rule = REFUSED[arch]
            assert rule and "\n" not in rule and len(rule) < 400, arch
            assert any(word in rule for word in ("Spec", "vllm/", ".py", "not modelled", "custom code")), rule


def test_each_planned_architecture_is_one_record():
    names = [n for r in _records() for n in (*r.names, *r.model_types)]
    assert len(names) == len(set(names)), "a name given by two records"
    for record in _records():
        assert record.family in FAMILIES and record.vllm, record.name
        assert all(RECORDS[n] is record for n in (*record.names, *record.model_types)), record.name
        assert record.mirrors.startswith("vLLM 0.33 "), record.name


def test_the_family_table_is_built_from_the_records():
    built = {n: r.family for r in _records() for n in (*r.names, *r.model_types)}
    assert built == ARCHITECTURES
    for module in RECORD_MODULES:  # every record of a family's records module is registered
        records = __import__(f"kvviz.families.{module}", fromlist=["RECORDS"]).RECORDS
        assert all(RECORDS.get(r.name) is r for r in records), module


def test_a_name_in_two_records_is_refused(monkeypatch):
    from kvviz.families.decoder_rules import DecoderRecord

    monkeypatch.setattr("kvviz.families.registry.RECORDS", dict(RECORDS))
    monkeypatch.setattr("kvviz.families.registry.ARCHITECTURES", dict(ARCHITECTURES))
    twin = DecoderRecord(name="LlamaForCausalLM", vllm="llama.py again")
    with pytest.raises(ValueError, match="LlamaForCausalLM: named by two records"):
        register(FAMILIES["decoder"], (twin,))


def test_docs_models_md_says_each_records_source():
    text = (FAMILIES_DIR.parent.parent / "docs" / "models.md").read_text()
    for arch in sorted(a for a in vllm_architectures() if a in RECORDS):
        assert f"| planned | {catalog.architecture_status(arch)[1]} |".replace("\\|", "|") in text.replace("\\|", "|")
        assert RECORDS[arch].vllm in text, arch


def _module_tables(path: Path):
    """(name, literal) of each module- and class-level assignment whose value is (or holds) a dict, set,
    list or tuple literal, outside the records tuples (`RECORDS = (...)`, each element one record)."""
    tree = ast.parse(path.read_text())
    scopes = [tree.body] + [n.body for n in tree.body if isinstance(n, ast.ClassDef)]
    for body in scopes:
        for node in body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
                if "RECORDS" in names or node.value is None:
                    continue
                for literal in ast.walk(node.value):
                    if isinstance(literal, (ast.Dict, ast.Set, ast.List, ast.Tuple)):
                        yield (names[0] if names else "?"), literal


def _strings(literal) -> list[str]:
    items = literal.keys if isinstance(literal, ast.Dict) else literal.elts
    return [k.value for k in items if isinstance(k, ast.Constant) and isinstance(k.value, str)]


def test_no_per_property_table_is_written_by_hand():
    """A dict keyed by two or more architecture names or model types, or a set / list / tuple of two or more
    architecture names (or of model types, unless it copies one engine table of ENGINE_LISTS), at a module's
    or class's top level in kvviz/families/, is a per-property table: the property belongs in the records."""
    arch_names = set(vllm_architectures()) | {n for r in _records() for n in r.names}
    model_types = {t for r in _records() for t in r.model_types}
    bad = []
    for path in sorted(FAMILIES_DIR.glob("*.py")):
        for name, literal in _module_tables(path):
            strings = _strings(literal)
            archs = [s for s in strings if s in arch_names]
            types = [s for s in strings if s in model_types]
            where = f"{path.stem}.{name}"
            if len(archs) >= 2 or (isinstance(literal, ast.Dict) and len(types) >= 2):
                bad.append(f"{where}: {archs or types}")
            elif len(types) >= 2 and where not in ENGINE_LISTS:
                bad.append(f"{where}: {types}")
    assert not bad, "per-property tables written by hand (make them record fields):\n" + "\n".join(bad)


def test_the_table_check_finds_a_table(tmp_path):
    src = tmp_path / "probe.py"
    src.write_text(
        'HEAD = {"qwen2", "gpt2"}\nNAMES = {"LlamaForCausalLM": 1, "GPT2LMHeadModel": 2}\nRECORDS = ("x", "y")\n'
    )
    found = {name: _strings(lit) for name, lit in _module_tables(src)}
    assert found == {"HEAD": ["qwen2", "gpt2"], "NAMES": ["LlamaForCausalLM", "GPT2LMHeadModel"]}


def test_engine_lists_are_what_they_say():
    for where in ENGINE_LISTS:
        module, name = where.split(".")
        value = getattr(__import__(f"kvviz.families.{module}", fromlist=[name]), name)
        assert len(value) >= 2, where


def test_adding_an_architecture_is_one_record(monkeypatch, tmp_path):
    """docs/architecture.md's worked example: a made-up decoder whose attention takes hidden_size //
    num_attention_heads and names its layers `model.blocks.{i}.attn.attn` is one record; nothing else
    changes, and its plan follows the record (head size 4096 // 32 = 128 whatever head_dim says)."""
    import kvviz
    from kvviz.families.decoder_rules import FROM_HIDDEN, DecoderRecord

    monkeypatch.setattr("kvviz.families.registry.RECORDS", dict(RECORDS))
    monkeypatch.setattr("kvviz.families.registry.ARCHITECTURES", dict(ARCHITECTURES))
    record = DecoderRecord(
        name="ToyForCausalLM",
        vllm="toy.py ToyAttention.__init__",
        head_size=FROM_HIDDEN,
        layer_names=("model.blocks", "attn.attn"),
    )
    register(FAMILIES["decoder"], (record,))
    raw = dict(
        json.loads((FAMILIES_DIR.parent / "presets" / "llama-3.1-8b.json").read_text()),
        architectures=["ToyForCausalLM"],
        head_dim=64,
    )
    (tmp_path / "config.json").write_text(json.dumps(raw))
    model = loader.load_path(tmp_path)
    caches = model.reader.caches(model, kvviz.Options())
    assert [c.name for c in caches[:2]] == ["model.blocks.0.attn.attn", "model.blocks.1.attn.attn"]
    assert {c.head_size for c in caches} == {raw["hidden_size"] // raw["num_attention_heads"]} == {128}
    assert kvviz.plan(model).capacity(8 << 30).num_blocks > 0


def test_a_record_answers_what_kvviz_believes_about_its_architecture():
    # internlm2.py InternLM2Attention: head size hidden_size // num_attention_heads, layers at
    # model.layers.{i}.attention.attn; its config is custom code (trust_remote_code)
    text = str(RECORDS["InternLM2ForCausalLM"])
    assert text.startswith("InternLM2ForCausalLM (decoder), vLLM 0.33 internlm2.py")
    beliefs = RECORDS["InternLM2ForCausalLM"].beliefs()
    assert beliefs["head_size"] == "hidden_size // num_attention_heads"
    assert beliefs["layer_names"] == "('model.layers', 'attention.attn')"
    assert beliefs["config"].startswith("the JSON (custom code)")
    assert RECORDS["ChatGLMModel"].beliefs()["heads"] == "chatglm_kv"
    assert "prefix" not in RECORDS["LlamaForCausalLM"].beliefs()  # a default is no belief of its own
