"""The parsed form of a config, kept so that transformers (which imports torch: seconds) is imported
only on a cache miss (docs/model-core.md#parsed-configs).

A `Model` is frozen data (its family's config dataclasses of ints, strings and tuples), so it is
written as JSON: every dataclass as {"__dc__": "kvviz.module:Class", ...fields}, every tuple as
{"__t__": [...]}. Only classes of kvviz's own modules are rebuilt.

* user configs: `$KVVIZ_CACHE_DIR`, else `$XDG_CACHE_HOME/kvviz`, else `~/.cache/kvviz`; one file
  per (config file's bytes, transformers version, kvviz version, the readers' code), written to a temporary name and
  renamed into place (safe against concurrent runs); an entry that does not read back is a miss;
  an entry of another version is never looked at (the versions are in its key);
* shipped presets: `kvviz/presets/parsed/<name>.json`, made by `python -m kvviz.tools.remake_parsed`
  and checked by tests/test_parsed.py against what transformers gives today; used when the
  preset's bytes and the readers' code hash to what the parsed form records.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import json
import os
import time
from pathlib import Path

from kvviz.base import signals
from kvviz.base.version import __version__

SCHEMA = 1


def encode(obj):
    """`obj` as JSON-able data: dataclasses as {'__dc__': 'module:Class', fields...}, tuples as {'__t__': [...]}."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        cls = type(obj)
        out = {"__dc__": f"{cls.__module__}:{cls.__qualname__}"}
        for f in dataclasses.fields(obj):
            if f.init:
                out[f.name] = encode(getattr(obj, f.name))
        return out
    if isinstance(obj, tuple):
        return {"__t__": [encode(x) for x in obj]}
    if isinstance(obj, list):
        return [encode(x) for x in obj]
    if isinstance(obj, dict):
        return {k: encode(v) for k, v in obj.items()}
    return obj


def decode(obj):
    """The object `encode` wrote, rebuilt (kvviz dataclasses only; any other class is refused)."""
    if isinstance(obj, list):
        return [decode(x) for x in obj]
    if isinstance(obj, dict):
        if "__t__" in obj:
            return tuple(decode(x) for x in obj["__t__"])
        if "__dc__" in obj:
            module, _, name = obj["__dc__"].partition(":")
            if not module.startswith("kvviz."):
                raise ValueError(f"refusing to rebuild {obj['__dc__']}")
            cls = getattr(importlib.import_module(module), name)
            return cls(**{k: decode(v) for k, v in obj.items() if k != "__dc__"})
        return {k: decode(v) for k, v in obj.items()}
    return obj


@functools.lru_cache(maxsize=1)
def readers_hash() -> str:
    """A hash of the readers' own code (kvviz/families/*.py, sorted by name): a reader changed within one
    kvviz version must not be answered by a form the old reader made. Once per process (a lookup and a
    store both key the file)."""
    h = hashlib.sha256()
    for path in sorted(Path(__file__).resolve().parent.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def versions() -> str:
    """What a parsed form depends on besides the file: kvviz's and transformers' versions, the readers' code hash
    and the schema."""
    from kvviz.families.hf import transformers_version

    return f"kvviz {__version__}, transformers {transformers_version()}, readers {readers_hash()}, schema {SCHEMA}"


def cache_dir() -> Path:
    """The user's cache folder for parsed configs: $KVVIZ_CACHE_DIR, else $XDG_CACHE_HOME/kvviz, else
    ~/.cache/kvviz."""
    explicit = os.environ.get("KVVIZ_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kvviz"


def key(data: bytes, name: str) -> str:
    """The cache key of a config file: sha256 of `versions()`, the name and the file's bytes."""
    return hashlib.sha256(
        versions().encode() + b"\0" + name.encode("utf-8", "surrogateescape") + b"\0" + data
    ).hexdigest()


def lookup(data: bytes, name: str):
    """The cached Model of a config's bytes, or None (a miss: absent, unreadable or corrupt)."""
    path = cache_dir() / f"{key(data, name)}.json"
    try:
        return decode(json.loads(path.read_text())["model"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError, ImportError):
        return None


def store(data: bytes, name: str, model) -> None:
    """Keep `model` for next time; a cache that cannot be written is left alone (never an error)."""
    folder = cache_dir()
    tmp = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        # a fresh name, created exclusively (never through a planted file or link), as mkstemp does
        # without tempfile's import (random, shutil: ~6 ms of every first sight)
        name_tmp = folder / f".kvviz-{os.getpid()}-{time.monotonic_ns()}.tmp"
        with signals.deferred():  # created and noted for removal with no signal in between
            fd = os.open(name_tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            tmp = name_tmp
        with os.fdopen(fd, "w") as f:
            json.dump({"versions": versions(), "model": encode(model)}, f)
        os.replace(tmp, folder / f"{key(data, name)}.json")
    except OSError:
        if tmp is not None:  # only a file this call created
            try:
                os.unlink(tmp)
            except OSError:
                pass


def shipped_path(preset: str) -> Path:
    """Where the shipped parsed form of preset `preset` lives (kvviz/presets/parsed/)."""
    return Path(__file__).resolve().parent.parent / "presets" / "parsed" / f"{preset}.json"


def shipped(preset: str, data: bytes):
    """The parsed form shipped for a preset, when it was made from these very bytes."""
    try:
        doc = json.loads(shipped_path(preset).read_text())
    except (OSError, ValueError):
        return None
    if (
        doc.get("sha256") != hashlib.sha256(data).hexdigest()
        or doc.get("schema") != SCHEMA
        or doc.get("readers") != readers_hash()
    ):
        return None
    try:
        return decode(doc["model"])
    except (ValueError, KeyError, TypeError, AttributeError, ImportError):
        return None


def write_shipped(preset: str, data: bytes, model) -> Path:
    """Write the parsed form of preset `preset` (from its bytes `data` and `model`) to the package; returns its
    path."""
    path = shipped_path(preset)
    path.parent.mkdir(exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "sha256": hashlib.sha256(data).hexdigest(),
                "schema": SCHEMA,
                "readers": readers_hash(),
                "parsed_with": versions(),
                "model": encode(model),
            },
            indent=1,
        )
        + "\n"
    )
    return path
