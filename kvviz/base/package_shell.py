"""One module of a large package imported without first running the package's own `__init__`.

Python runs every parent package's `__init__` before a submodule. transformers 5's two top ones build
its lazy-import index (`transformers.utils.import_utils.define_import_structure`): `transformers/__init__.py`
and `transformers/models/__init__.py` each read every file under `models/` for its `__all__`, 3,342 files
twice, about a second of CPU here, which a config class (`models/<type>/configuration_<type>.py`, its
`configuration_utils` and `utils`) never uses. `import_in_shell` puts a *shell* in `sys.modules` for each
such package instead: a module with the package's own spec, `__path__` and `__file__` (so its submodules are
found and run exactly as transformers ships them), the attributes the caller gives, and a module
`__getattr__` that, at the first name asked of the shell that it lacks, runs the package's real `__init__`
and answers from the real package (and so does every later miss). Code that imports the package after
kvviz did (`import transformers; transformers.AutoConfig`) gets the whole package as usual, one index build
later. An import that fails inside the shells takes every module it added out of `sys.modules` again, so
the caller can import the plain way.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import types

__all__ = ["import_in_shell"]


def _shell(name: str, spec, attrs: dict) -> types.ModuleType:
    """A module standing for package `name` (its real `spec`) whose first missing attribute runs the real
    package's `__init__` (module docstring)."""
    shell = types.ModuleType(name)
    shell.__spec__ = spec
    shell.__loader__ = spec.loader
    shell.__package__ = name
    shell.__path__ = list(spec.submodule_search_locations)
    shell.__file__ = spec.origin
    shell.__dict__.update(attrs)
    real: list = []  # the real package, once run

    def whole_package(attr: str):
        if attr.startswith("__") and attr.endswith("__"):  # probes (copy, pickle, inspect): never worth a run
            raise AttributeError(attr)
        if not real:
            module = importlib.util.module_from_spec(spec)
            # the submodules imported so far (set on the shell by the import system) and the caller's attrs
            kept = {k: v for k, v in shell.__dict__.items() if k != "__getattr__" and k not in module.__dict__}
            module.__dict__.update(kept)
            sys.modules[name] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                sys.modules[name] = shell
                raise
            real.append(sys.modules[name])  # the package may put another object there (transformers: a _LazyModule)
        return getattr(real[0], attr)

    shell.__getattr__ = whole_package  # type: ignore[method-assign]
    return shell


def import_in_shell(module: str, packages: tuple[str, ...], attrs: dict | None = None) -> types.ModuleType:
    """`importlib.import_module(module)` with each of `packages` (outermost first, each a parent of `module`,
    none imported yet) a shell instead of its own `__init__`; `attrs` are set on the outermost shell (what the
    package's own modules import from it, e.g. `__version__`). ImportError when the outermost package is not
    installed; on any failure the modules this call added are taken out of `sys.modules` again."""
    if any(p in sys.modules for p in packages):
        raise ImportError(f"{packages[0]} is imported already")
    before = set(sys.modules)
    try:
        path = None
        for i, name in enumerate(packages):
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is None or spec.submodule_search_locations is None:
                raise ImportError(f"No module named {name!r}")
            shell = _shell(name, spec, (attrs or {}) if i == 0 else {})
            sys.modules[name] = shell
            if i:  # what the import system sets on a parent when it imports a child
                setattr(sys.modules[packages[i - 1]], name.rpartition(".")[2], shell)
            path = list(spec.submodule_search_locations)
        return importlib.import_module(module)
    except BaseException:
        for added in set(sys.modules) - before:
            del sys.modules[added]
        raise
