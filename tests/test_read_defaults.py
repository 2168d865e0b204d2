"""The config classes vLLM 0.33 ships itself (transformers_utils/configs/, models/<name>/configs.py) cannot be
imported by kvviz (vLLM is never imported), so a record that reads a config through one carries the class's
`__init__` defaults and `attribute_map` of the fields its reader reads (kvviz.families.record.Read). Here each
of them is checked against the class in vLLM 0.33's own source, parsed as text (never imported): a default
or an alias kvviz carries that the class does not have, or has otherwise, fails.

Skips where vLLM's source is absent, fails where KVVIZ_REQUIRE_VLLM_SRC is set (tests/engine_sources.py)."""

from __future__ import annotations

import ast
import re

import pytest
from engine_sources import absent, source_root

import kvviz.families  # noqa: F401 - every family registers its records
from kvviz.families.record import JSON, VLLM
from kvviz.families.registry import RECORDS

# "transformers_utils/configs/beam.py BeamConfig": a file under vllm/ and a class in it
CITED = re.compile(r"^(?P<path>[\w/]+\.py) (?P<cls>\w+)$")
READS = sorted(
    {(r.config.cls, r.config) for r in RECORDS.values() if r.config.how in (VLLM, JSON) and CITED.match(r.config.cls)},
    key=lambda pair: pair[0],
)


def _class(path: str, name: str) -> ast.ClassDef:
    root = source_root("vllm")
    file = root / "vllm" / path if root else None
    if file is None or not file.is_file():
        absent("vllm", f"vllm/{path}")
    tree = ast.parse(file.read_text())
    found = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == name]
    assert found, f"vllm/{path} has no class {name}"
    return found[0]


def _defaults(cls: ast.ClassDef) -> dict:
    """The literal defaults of the class's __init__ parameters, or of its dataclass fields (a class body's
    annotated assignments, as vLLM's `@strict` config classes declare them)."""
    out = {}
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            out[node.target.id] = ast.literal_eval(node.value)
        if isinstance(node, ast.FunctionDef) and node.name == "__init__":
            args = node.args
            positional = args.posonlyargs + args.args
            given = positional[len(positional) - len(args.defaults) :]
            out |= {a.arg: ast.literal_eval(d) for a, d in zip(given, args.defaults)}
            out |= {a.arg: ast.literal_eval(d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None}
    return out


def _aliases(cls: ast.ClassDef) -> dict:
    """{field: the config's own key} the class answers one by the other: its `attribute_map`, and its
    __init__'s `self.<field> = <parameter>` where the names differ (ChatGLMConfig's max_position_embeddings)."""
    out: dict = {}
    for node in cls.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "attribute_map" for t in node.targets
        ):
            out |= ast.literal_eval(node.value)
        if isinstance(node, ast.FunctionDef) and node.name == "__init__":
            for step in ast.walk(node):
                if isinstance(step, ast.Assign) and isinstance(step.value, ast.Name):
                    for t in step.targets:
                        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                            if t.attr != step.value.id:
                                out[t.attr] = step.value.id
    return out


def test_the_reads_checked_here_are_the_vllm_classes_kvviz_carries():
    assert {cls for cls, _ in READS} >= {
        "transformers_utils/configs/beam.py BeamConfig",
        "transformers_utils/configs/dory.py DoryConfig",
        "transformers_utils/configs/chatglm.py ChatGLMConfig",
    }


@pytest.mark.parametrize("cited,read", READS, ids=[cls for cls, _ in READS])
def test_a_carried_default_is_the_vllm_class_default(cited, read):
    m = CITED.match(cited)
    cls = _class(m["path"], m["cls"])
    defaults = _defaults(cls)
    for field, value in read.defaults.items():
        assert field in defaults, f"{cited}: __init__ has no parameter {field}"
        assert defaults[field] == value, f"{cited}: {field} defaults to {defaults[field]!r}, kvviz carries {value!r}"
    aliases = _aliases(cls)
    for field, own in read.aliases.items():
        assert aliases.get(field) == own, f"{cited}: answers {field!r} by {aliases.get(field)!r}, kvviz by {own!r}"
