"""vLLM 0.33's model registry, read from its wheel with `ast` (vllm is never imported).

Writes tests/data/vllm-0.33/registry-architectures.json: for `_TEXT_GENERATION_MODELS`,
`_MULTIMODAL_MODELS` and `_TRANSFORMERS_SUPPORTED_MODELS` (the architectures vLLM serves through its
Transformers modeling backend, vllm/model_executor/models/transformers/: 20 text, 3 multimodal) of
vllm/model_executor/models/registry.py (and any dict they are built from with `**other`), every
architecture -> its module (as the registry resolves it:
`vllm.model_executor.models.<name>`, or a `vllm.` path kept as it is), the module's file in the
wheel and the class name, in registry order, with the wheel's version and sha256.

With --models-md it (re)writes docs/models.md from the committed JSON and kvviz's status of each
architecture (kvviz.families.catalog), and copies the JSON into the package
(kvviz/families/vllm_registry.json, for `kvviz models --architectures`); without a wheel it does only that.

What each architecture's model file registers, and what kvviz needs to plan it:
docs/registry-work.md#findings-that-change-the-plan.

usage: python scripts/vllm_registry.py [WHEEL] [--out JSON] [--models-md MD]
       python scripts/vllm_registry.py --models-md docs/models.md  (after registering an architecture)
       WHEEL defaults to the one vllm-0.33.0 wheel in build/wheels (fetch it with
       `python -m pip download --no-deps vllm==0.33.0 -d build/wheels`).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WHEELS = ROOT / "build" / "wheels"
OUT = ROOT / "tests" / "data" / "vllm-0.33" / "registry-architectures.json"
PACKAGED = ROOT / "kvviz" / "families" / "vllm_registry.json"
REGISTRY = "vllm/model_executor/models/registry.py"
# `_TRANSFORMERS_BACKEND_MODELS` is left out: its keys are the backend's own class names
# (TransformersForCausalLM, ...Embedding / SequenceClassification / MTP), which vLLM's
# ModelConfig substitutes for an architecture (model_impl="transformers"), not checkpoint architectures.
TABLES = ("_TEXT_GENERATION_MODELS", "_MULTIMODAL_MODELS", "_TRANSFORMERS_SUPPORTED_MODELS")
VERSION = "0.33.0"


def find_wheel(wheels: Path = WHEELS, version: str = VERSION) -> Path | None:
    """The one vllm-<version> wheel in `wheels`, or None."""
    found = sorted(wheels.glob(f"vllm-{version}-*.whl")) if wheels.is_dir() else []
    return found[0] if found else None


def _dicts(tree: ast.Module) -> dict[str, ast.Dict]:
    """Every module-level `NAME = {...}` (or annotated) dict literal of the registry."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            target, value = node.target.id, node.value
        else:
            continue
        if isinstance(value, ast.Dict):
            out[target] = value
    return out


def _entries(name: str, dicts: dict[str, ast.Dict], seen: tuple[str, ...] = ()) -> list[tuple[str, str, str, str]]:
    """(architecture, module as written, class, the dict it is written in) of dict `name`, in order,
    expanding `**other` where it stands (a later key replaces an earlier one in place, as in Python)."""
    if name in seen:
        raise ValueError(f"{name}: built from itself ({' -> '.join(seen + (name,))})")
    if name not in dicts:
        raise ValueError(f"{name}: no module-level dict literal of that name in {REGISTRY}")
    out: dict[str, tuple[str, str, str, str]] = {}
    for key, value in zip(dicts[name].keys, dicts[name].values):
        if key is None:  # **other
            if not isinstance(value, ast.Name):
                raise ValueError(f"{name}: ** of a non-name expression at line {value.lineno}")
            for entry in _entries(value.id, dicts, seen + (name,)):
                out[entry[0]] = entry
            continue
        arch = ast.literal_eval(key)
        module, cls = ast.literal_eval(value)
        if not (isinstance(arch, str) and isinstance(module, str) and isinstance(cls, str)):
            raise ValueError(f"{name}: line {key.lineno}: not a str -> (str, str) entry")
        out[arch] = (arch, module, cls, name)
    return list(out.values())


def resolve_module(module: str) -> str:
    """As registry.py _resolve_module_name: a `vllm.` path as it is, else under vllm.model_executor.models."""
    return module if module.startswith("vllm.") else f"vllm.model_executor.models.{module}"


def module_file(module: str, names: set[str]) -> str:
    """The wheel path of a resolved module: its .py, or its package's __init__.py."""
    base = module.replace(".", "/")
    for path in (f"{base}.py", f"{base}/__init__.py"):
        if path in names:
            return path
    raise ValueError(f"{module}: neither {base}.py nor {base}/__init__.py is in the wheel")


def read_registry(wheel: Path) -> dict:
    """The registry's text-generation, multimodal and Transformers-backend tables, as the JSON this script writes."""
    data = wheel.read_bytes()
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        source = zf.read(REGISTRY).decode()
    dicts = _dicts(ast.parse(source, REGISTRY))
    tables = {}
    for table in TABLES:
        rows = []
        for arch, module, cls, written_in in _entries(table, dicts):
            resolved = resolve_module(module)
            row = {"architecture": arch, "module": resolved, "file": module_file(resolved, names), "class": cls}
            if written_in != table:
                row["from"] = written_in
            rows.append(row)
        tables[table] = rows
    return {
        "vllm_version": wheel.name.split("-")[1],
        "wheel": wheel.name,
        "wheel_sha256": hashlib.sha256(data).hexdigest(),
        "registry_file": REGISTRY,
        "registry_sha256": hashlib.sha256(source.encode()).hexdigest(),
        "how": "scripts/vllm_registry.py: the registry read with ast from the wheel, never imported; "
        "module resolved as registry.py _resolve_module_name does",
        "counts": {t: len(rows) for t, rows in tables.items()},
        "tables": tables,
    }


def dumps(registry: dict) -> str:
    """The JSON as committed: one row a line inside each table, so a diff names the architecture."""
    head = {k: v for k, v in registry.items() if k != "tables"}
    lines = ["{"] + [f"  {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()] + ['  "tables": {']
    for t, (table, rows) in enumerate(registry["tables"].items()):
        lines.append(f"    {json.dumps(table)}: [")
        lines += [f"      {json.dumps(r)}" + ("," if i < len(rows) - 1 else "") for i, r in enumerate(rows)]
        lines.append("    ]" + ("," if t < len(registry["tables"]) - 1 else ""))
    return "\n".join(lines + ["  }", "}"]) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("wheel", nargs="?", type=Path)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--models-md", type=Path, help="also write this markdown table (docs/models.md)")
    args = ap.parse_args(argv)
    wheel = args.wheel or find_wheel()
    if wheel is None and not args.models_md:
        print(
            f"no vllm-{VERSION} wheel in {WHEELS}: python -m pip download --no-deps vllm=={VERSION} -d {WHEELS}",
            file=sys.stderr,
        )
        return 2
    if wheel is not None:
        registry = read_registry(wheel)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(dumps(registry))
        print(f"{args.out}: " + ", ".join(f"{t} {n}" for t, n in registry["counts"].items()))
    if args.models_md:
        text = args.out.read_text()
        PACKAGED.write_text(text)
        sys.path.insert(0, str(ROOT))
        from kvviz.families.catalog import models_table

        args.models_md.write_text(models_table(json.loads(text)))
        print(f"{PACKAGED}, {args.models_md}: written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
