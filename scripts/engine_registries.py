"""The architectures SGLang and TensorRT-LLM serve, read from their own source with `ast` (neither is
imported), written to kvviz/engines/served.json: the table kvviz's SGLang and TensorRT-LLM planners
check a model's architecture against (kvviz.engines.served).

* SGLang: sglang/srt/models/registry.py import_model_classes imports every module of the
  sglang.srt.models package (pkgutil.iter_modules: the package's own .py files, not its
  subpackages) and registers each class its `EntryClass` names (one class or a list) under the
  class's `__name__`. Here each name is followed to the class it binds: a `class` statement of the
  module, an assignment `A = B` (B followed), or a `from sglang.srt.models.X import B [as A]`
  (followed into X). The version is sglang/_version.py's.
* TensorRT-LLM: tensorrt_llm/_torch/models/_arch_index.py MODEL_ARCH_TO_MODULE, the static index of
  the PyTorch backend's `@register_auto_model("<arch>")` decorators (its test_lazy_model_zoo.py
  fails on any drift between the two); where a source has no such index, the decorators of its
  modeling_*.py files are read. The commit is given on the command line (an extract has none).

usage: python scripts/engine_registries.py [--sglang ROOT] [--trtllm ROOT --trtllm-commit SHA] [--out JSON]
       ROOT holds the package folder (sglang/ or tensorrt_llm/); an engine not given keeps its
       entry of the existing table.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "kvviz" / "engines" / "served.json"
SGLANG_MODELS = "sglang/srt/models"
SGLANG_PACKAGE = "sglang.srt.models"
TRTLLM_MODELS = "tensorrt_llm/_torch/models"
TRTLLM_INDEX = f"{TRTLLM_MODELS}/_arch_index.py"


def _class_name(module: Path, name: str, package_dir: Path, seen: frozenset = frozenset()) -> str:
    """The `__name__` of the class `name` is bound to in `module` (a path under package_dir)."""
    key = (module, name)
    if key in seen:
        raise ValueError(f"{module}: {name} binds itself in a cycle")
    seen = seen | {key}
    tree = ast.parse(module.read_text(), filename=str(module))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return name
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            if isinstance(node.value, ast.Name):
                return _class_name(module, node.value.id, package_dir, seen)
            raise ValueError(f"{module}: {name} = {ast.unparse(node.value)} is not a class name")
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                if (alias.asname or alias.name) == name and node.module.startswith(SGLANG_PACKAGE + "."):
                    rel = node.module[len(SGLANG_PACKAGE) + 1 :].replace(".", "/")
                    target = package_dir / f"{rel}.py"
                    if not target.is_file():
                        target = package_dir / rel / "__init__.py"
                    return _class_name(target, alias.name, package_dir, seen)
    raise ValueError(f"{module}: {name} is bound by no class, assignment or sglang.srt.models import")


def _entry_names(tree: ast.Module) -> list[str] | None:
    """The names a module's `EntryClass = X` / `EntryClass = [X, Y]` gives, or None without one."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "EntryClass" for t in node.targets):
            value = node.value
            items = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
            if not all(isinstance(i, ast.Name) for i in items):
                raise ValueError(f"EntryClass = {ast.unparse(value)}: not a class name or a list of them")
            return [i.id for i in items]
    return None


def sglang_version(root: Path) -> str:
    tree = ast.parse((root / "sglang" / "_version.py").read_text())
    for node in tree.body:  # `__version__ = version = '0.5.23'` (the annotations before it have no value)
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets
        ):
            return ast.literal_eval(node.value)
    raise ValueError(f"{root}/sglang/_version.py: no __version__")


def sglang_architectures(root: Path) -> dict[str, str]:
    """Architecture -> the model file (relative to `root`) whose EntryClass registers it, sorted."""
    package_dir = root / SGLANG_MODELS
    if not package_dir.is_dir():
        raise FileNotFoundError(f"{package_dir}: no sglang/srt/models")
    out: dict[str, str] = {}
    for module in sorted(package_dir.glob("*.py")):
        if module.name == "__init__.py":
            continue
        names = _entry_names(ast.parse(module.read_text(), filename=str(module)))
        for name in names or ():
            arch = _class_name(module, name, package_dir)
            if arch in out:  # import_model_classes asserts "Duplicated model implementation"
                raise ValueError(f"{arch}: registered by {out[arch]} and {module.relative_to(root)}")
            out[arch] = str(module.relative_to(root))
    return dict(sorted(out.items()))


def _arch_index(path: Path) -> dict[str, str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "MODEL_ARCH_TO_MODULE" for t in node.targets
        ):
            table = ast.literal_eval(node.value)
            return {arch: f"{TRTLLM_MODELS}/{module}.py" for arch, module in sorted(table.items())}
    raise ValueError(f"{path}: no MODEL_ARCH_TO_MODULE")


def _decorated(root: Path) -> dict[str, str]:
    """Every `@register_auto_model("<arch>")` of tensorrt_llm/_torch/models/modeling_*.py."""
    out: dict[str, str] = {}
    for module in sorted((root / TRTLLM_MODELS).glob("modeling_*.py")):
        for node in ast.walk(ast.parse(module.read_text(), filename=str(module))):
            if not isinstance(node, ast.ClassDef):
                continue
            for dec in node.decorator_list:
                if (
                    isinstance(dec, ast.Call)
                    and getattr(dec.func, "id", getattr(dec.func, "attr", None)) == "register_auto_model"
                    and dec.args
                    and isinstance(dec.args[0], ast.Constant)
                ):
                    out[dec.args[0].value] = str(module.relative_to(root))
    return dict(sorted(out.items()))


def trtllm_architectures(root: Path) -> dict[str, str]:
    """Architecture -> the modeling file that registers it (relative to `root`), sorted."""
    index = root / TRTLLM_INDEX
    if index.is_file():
        return _arch_index(index)
    found = _decorated(root)
    if not found:
        raise FileNotFoundError(f"{root}: neither {TRTLLM_INDEX} nor register_auto_model decorators")
    return found


def sglang_entry(root: Path) -> dict:
    version = sglang_version(root)
    return {
        "engine": f"SGLang {version}",
        "version": version,
        "source": f"{SGLANG_MODELS}/*.py EntryClass (registry.py import_model_classes), sglang=={version} wheel",
        "architectures": sglang_architectures(root),
    }


def trtllm_entry(root: Path, commit: str) -> dict:
    index = (root / TRTLLM_INDEX).is_file()
    return {
        "engine": "TensorRT-LLM",
        "commit": commit,
        "source": (
            f"{TRTLLM_INDEX} MODEL_ARCH_TO_MODULE" if index else f"{TRTLLM_MODELS}/modeling_*.py @register_auto_model"
        )
        + f" at NVIDIA/TensorRT-LLM commit {commit}",
        "architectures": trtllm_architectures(root),
    }


def dumps(table: dict) -> str:
    return json.dumps(table, indent=1, sort_keys=True) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sglang", type=Path, help="folder holding sglang/ (the unpacked wheel)")
    ap.add_argument("--trtllm", type=Path, help="folder holding tensorrt_llm/ (an extract of the repository)")
    ap.add_argument("--trtllm-commit", help="the TensorRT-LLM commit the extract is of (required with --trtllm)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    if args.trtllm and not args.trtllm_commit:
        ap.error("--trtllm needs --trtllm-commit")
    table = json.loads(args.out.read_text()) if args.out.is_file() else {}
    if args.sglang:
        table["sglang"] = sglang_entry(args.sglang)
    if args.trtllm:
        table["trtllm"] = trtllm_entry(args.trtllm, args.trtllm_commit)
    args.out.write_text(dumps(table))
    for engine, entry in sorted(table.items()):
        print(f"{engine}: {len(entry['architectures'])} architectures ({entry['source']})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
