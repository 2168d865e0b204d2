"""A stand-in `torchvision` for vLLM reference runs on a CPU venv without one (README.md beside): vLLM's
step3_vl / mimo_v2_omni modules import image processors that import torchvision; every attribute here is an
inert class, so those modules import. Nothing of it runs while the model is built on the meta device and
planned (the processors are not called). Used only as PYTHONPATH of the reference run, never by kvviz."""

import importlib.abc
import importlib.machinery
import sys
import types


class _Meta(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Meta(name, (_Any,), {})


class _Any(metaclass=_Meta):
    def __init__(self, *a, **k):
        pass

    def __call__(self, *a, **k):
        return self


class _Module(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Meta(name, (_Any,), {})


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname == "torchvision" or fullname.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        m = _Module(spec.name)
        m.__path__ = []
        m.__version__ = "0.28.0"
        return m

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _Finder())
