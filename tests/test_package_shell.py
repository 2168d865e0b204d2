"""A config's first sight imports transformers' config classes without running transformers' package
`__init__`s (kvviz.base.package_shell): what that skips, and that the package stays whole for anyone after.

Checked against a package built here (whose `__init__` records each time it runs) and against transformers
itself in fresh interpreters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvviz.base.package_shell import import_in_shell

REPO = Path(__file__).resolve().parent.parent
PUBLISHED = REPO / "tests" / "data" / "vllm-0.33" / "published" / "hub"


@pytest.fixture
def package(tmp_path, monkeypatch):
    """`shellpkg` (its __init__ appends to RUNS and defines FULL), `shellpkg.models` (the same), and
    `shellpkg.models.one.conf`, which imports a name of the top package's own module and of `__version__`."""
    root = tmp_path / "shellpkg"
    (root / "models" / "one").mkdir(parents=True)
    top = "import builtins\nbuiltins.RUNS.append('top')\nFULL = 'whole'\n__version__ = '9'\n"
    (root / "__init__.py").write_text(top)
    (root / "tools.py").write_text("VALUE = 42\n")
    (root / "models" / "__init__.py").write_text("import builtins\nbuiltins.RUNS.append('models')\n")
    (root / "models" / "one" / "__init__.py").write_text("")
    (root / "models" / "one" / "conf.py").write_text(
        "from ...tools import VALUE\nfrom ... import __version__\nANSWER = (VALUE, __version__)\n"
    )
    (root / "models" / "one" / "broken.py").write_text("from ...tools import MISSING\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr("builtins.RUNS", [], raising=False)
    yield __import__("builtins").RUNS
    for name in [m for m in sys.modules if m == "shellpkg" or m.startswith("shellpkg.")]:
        del sys.modules[name]


def test_a_module_is_imported_without_its_packages_init(package):
    conf = import_in_shell("shellpkg.models.one.conf", ("shellpkg", "shellpkg.models"), {"__version__": "9"})
    assert conf.ANSWER == (42, "9")
    assert package == []  # neither __init__ ran
    assert sys.modules["shellpkg"].models is sys.modules["shellpkg.models"]


def test_the_first_missing_name_runs_the_real_init_once(package):
    import_in_shell("shellpkg.models.one.conf", ("shellpkg", "shellpkg.models"), {"__version__": "9"})
    import shellpkg

    assert shellpkg.FULL == "whole" and shellpkg.FULL == "whole"
    assert package == ["top"]
    assert sys.modules["shellpkg"].FULL == "whole"  # the real package is what an import finds from now on


def test_a_failed_import_leaves_nothing_behind(package):
    with pytest.raises(ImportError, match="MISSING"):
        import_in_shell("shellpkg.models.one.broken", ("shellpkg", "shellpkg.models"))
    assert not [m for m in sys.modules if m.startswith("shellpkg")]
    import shellpkg.models.one.conf  # the plain way still works, both __init__s run

    assert shellpkg.models.one.conf.ANSWER == (42, "9") and package == ["top", "models"]


def test_a_package_not_installed_is_an_import_error():
    with pytest.raises(ImportError, match="no_such_package_here"):
        import_in_shell("no_such_package_here.x", ("no_such_package_here",))
    assert "no_such_package_here" not in sys.modules


def _fresh(code: str, tmp_path) -> str:
    env = dict(os.environ, KVVIZ_CACHE_DIR=str(tmp_path / "cache"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_a_first_sight_indexes_no_model_file_and_transformers_stays_whole(tmp_path):
    folder = tmp_path / "jamba"
    folder.mkdir()
    (folder / "config.json").write_bytes((REPO / "tests/data/vllm-0.33/configs/jamba-v0.1/config.json").read_bytes())
    code = (
        "from kvviz.families import load_path\n"
        f"m = load_path({str(folder)!r})\n"
        "from transformers.utils import import_utils\n"
        "print(import_utils.define_import_structure.cache_info().currsize)\n"
        "import transformers\n"
        "from transformers import LlamaConfig, AutoConfig\n"
        "print(transformers.__version__ == __import__('importlib.metadata').metadata.version('transformers'))\n"
        "print(type(AutoConfig.for_model('llama')).__name__, LlamaConfig().num_hidden_layers)\n"
    )
    indexed, same_version, whole = _fresh(code, tmp_path).splitlines()
    assert int(indexed) <= 2  # the config's own model folder (and auto's), not the ~450 model folders
    assert same_version == "True"
    assert whole == "LlamaConfig 32"  # transformers' default: the package answers as if imported the plain way


def test_every_published_config_reads_in_the_shell_as_after_a_plain_import(tmp_path):
    # the same config classes, read in a process that imported transformers the plain way first
    read = (
        "import json, pathlib\nfrom kvviz.families.hf import read_config\nout = {}\n"
        f"for path in sorted(pathlib.Path({str(PUBLISHED)!r}).glob('*/config.json')):\n"
        "    try:\n"
        "        top, text = read_config(json.loads(path.read_text()), name='x')\n"
        "        got = [o.to_dict() if hasattr(o, 'to_dict') else vars(o) for o in (top, text)]\n"
        "    except Exception as e:\n"
        "        got = repr(e)\n"
        "    out[path.parent.name] = got\n"
        "print(json.dumps(out, sort_keys=True, default=str))\n"
    )
    shell = json.loads(_fresh(read, tmp_path))
    plain = json.loads(_fresh("import sys; sys.modules['torch'] = None; import transformers\n" + read, tmp_path))
    assert len(shell) >= 40 and shell == plain
