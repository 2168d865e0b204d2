"""Reading what a user hands kvviz: JSON files and the numbers in them, safely.

Every way a file can be wrong ends in one `KvvizError` naming the option and the problem, raised
where the problem arises (never a blanket catch-all further up):

* only regular files are read (a FIFO would block forever, /dev/zero would never end), and at most
  `MAX_INPUT_BYTES` of them;
* the text must be UTF-8 (a latin-1 or UTF-16 file is refused, not half-decoded);
* the JSON must parse, hold no key twice in one object, nest at most as deep as Python's parser
  allows, hold no integer longer than
  `MAX_INT_DIGITS` digits and no string that is not valid Unicode (a lone surrogate); `Infinity` and
  `NaN` are read as Python's json reads them (floats: transformers writes them), and a field kvviz
  reads refuses a non-finite value naming itself (`finite_number`);
* the counts that size work (layers, page bytes, dimensions, tokens per block) have a bound, and
  the message says it.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import stat

from kvviz.base.errors import KvvizError, require

# ---- bounds (each in the message that enforces it) -----------------------------------------
MAX_INPUT_BYTES = 32 << 20  # 32 MiB: an HF config.json is a few KiB, a groups file of MAX_LAYERS layers ~8 MiB
MAX_INT_DIGITS = 100  # JSON integers: far above every bound below, far below Python's 4,300-digit limit
MAX_LAYERS = 1 << 17  # 131,072 layers of a model (MTP included) or entries of a groups file: above the
# 100,000 layers kvviz plans, prints and renders to JSON in seconds (benchmarks/bench_scale.py)
MAX_DIM = 1 << 16  # head_dim, qk_rope_head_dim, index_head_dim
MAX_TOKENS_PER_BLOCK = 1 << 20  # --block-size and a groups file's tokens_per_block
MAX_SLIDING_WINDOW = 1 << 40  # tokens of a sliding window
MAX_PAGE_BYTES = 1 << 36  # one layer's page (64 GiB): sums of MAX_LAYERS pages (< 2^53) stay exact in float64 figures
MAX_BUDGET_BYTES = 1 << 60  # a KV budget (1 EiB)
MAX_BLOCKS = 1 << 40  # blocks of a verified pool (its bytes are checked against free memory first)
MAX_CONTEXT_TOKENS = 1 << 30  # a request's length in tokens (--context)
MAX_VARIANTS = 4096  # rows of a knob sweep / comparison table or a fit table's axis: each row is a plan
DPI_RANGE = (20, 600)  # resolution of rendered PNGs: below 20 nothing is legible, above 600 a figure is ~100 MB


def bounded_int(value: object, *, field: str, low: int, high: int) -> int:
    """`value` if it is an integer (not a bool) in [low, high]; a KvvizError naming `field` otherwise."""
    require(type(value) is int, f"{field}={short_repr(value)}: must be an integer")
    require(low <= value <= high, f"{field}={value!r}: must be from {low:,} to {high:,}")
    return value


def of_type(value: object, kind: type | tuple[type, ...], *, field: str, give: str):
    """`value` when it is an instance of `kind` (a class or a tuple of them; a bool counts as a number only where
    `kind` names bool); else one KvvizError line naming the argument: '<field>=<short repr>: give <give>'.
    Every public function asks this of an argument it would otherwise fail on deep inside (issue 37)."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, kinds) and (bool in kinds or not isinstance(value, bool)):
        return value
    raise KvvizError(f"{field}={short_repr(value)}: give {give}")


def having(value: object, attrs: tuple[str, ...], *, field: str, give: str):
    """`value` when it has every attribute of `attrs` (for a room that may not import the class it takes: the
    engines take a kvviz.load Model); else one KvvizError line as `of_type` words it."""
    if all(hasattr(value, a) for a in attrs):
        return value
    raise KvvizError(f"{field}={short_repr(value)}: give {give}")


def bounded_items(values: object, *, field: str, high: int = MAX_VARIANTS) -> tuple:
    """`values` (a list, tuple or range; a generator is read at most `high` + 1 items far) as a
    tuple of 1 to `high` items; a KvvizError naming `field` otherwise. Counted before anything is
    built from it: range(10**9) is refused from its length, not after a billion rows."""
    require(
        isinstance(values, (list, tuple, range)) or (hasattr(values, "__next__") and hasattr(values, "__iter__")),
        f"{field}={short_repr(values)}: give a list of values, e.g. [16, 32]",
    )
    if isinstance(values, (list, tuple, range)):
        require(len(values) <= high, f"{field}: {len(values):,} values; at most {high:,}")
        items = tuple(values)
    else:
        items = tuple(itertools.islice(values, high + 1))
        require(len(items) <= high, f"{field}: more than {high:,} values; at most {high:,}")
    require(len(items) > 0, f"{field}=[]: give at least one value")
    return items


def finite_number(value: object, *, field: str) -> float | int:
    """`value` if it is a finite int or float (not a bool): a KvvizError naming `field` otherwise.
    JSON's `Infinity`, `NaN` and `1e999` are read as floats (parse_json); a field that kvviz computes
    with checks it here."""
    require(
        isinstance(value, (int, float)) and not isinstance(value, bool),
        f"{field}={short_repr(value)}: must be a number",
    )
    require(math.isfinite(value), f"{field}={short_repr(value)}: must be a finite number")
    return value


def printable(path) -> str:
    """A path (or any text) as a terminal, a log or a UTF-8 file can take it: bytes that were not
    UTF-8 (the surrogate escapes os.fsdecode makes of them) shown as \\x escapes, any other lone surrogate
    as its \\u escape."""
    text = str(path)
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate os.fsdecode never makes ('\ud800'): its code point written out
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def short_repr(value: object) -> str:
    """repr() cut to one short line (a JSON list in an error message can be huge)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _parse_int(text: str) -> int:
    # json hands every integer literal here; a 5,000-digit one would hit Python's int-string limit.
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise KvvizError(f"integer of {len(text.lstrip('-')):,} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _parse_constant(name: str) -> float:
    # `Infinity`, `-Infinity` and `NaN` are not JSON, but Python's json (hence transformers and vLLM) reads
    # them, and transformers writes them: the default configs of Mamba2, FalconH1, GraniteMoeHybrid and
    # NemotronH carry `"time_step_limit": [0.0, Infinity]`. Read them as floats, as vLLM does; a field kvviz
    # reads checks its own value (an integer field refuses a float, a float field a non-finite one:
    # kvviz.base.inputs.finite_number), naming the field.
    return float(name)


def _object_without_duplicates(pairs: list) -> dict:
    # json keeps the last of two equal keys without a word; a config whose num_hidden_layers is
    # given twice is ambiguous, so it is refused naming the key.
    out = {}
    for key, value in pairs:
        if key in out:
            raise KvvizError(f"key {short_repr(key)} appears twice in one object (which one is meant?)")
        out[key] = value
    return out


def _reject_bad_strings(doc: object) -> None:
    """Refuse a string holding a lone surrogate ("\\ud800"): it cannot be printed or written."""
    stack = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise KvvizError(f"string {item!r} is not valid Unicode (a lone surrogate)") from None
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def read_bytes(path: str | os.PathLike, *, what: str, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; anything else is a KvvizError naming `what`."""
    require(str(path) != "", f"{what} '': needs a file name")
    p = str(path)
    try:
        # O_NONBLOCK: opening a FIFO for reading must not wait for a writer; it is refused below.
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise KvvizError(f"{what} {p!r}: cannot read ({e.strerror or e})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise KvvizError(f"{what} {p!r}: is {kind}; give a JSON file")
        if info.st_size > limit:
            raise KvvizError(f"{what} {p!r}: is {info.st_size:,} bytes; at most {limit:,} are read")
        chunks, size = [], 0
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:  # the file grew while being read
                raise KvvizError(f"{what} {p!r}: is more than {limit:,} bytes")
        return b"".join(chunks)
    except OSError as e:
        raise KvvizError(f"{what} {p!r}: cannot read ({e.strerror or e})") from None
    finally:
        os.close(fd)


def parse_json(data: bytes, *, what: str) -> object:
    """JSON from UTF-8 bytes, every failure a one-line KvvizError naming `what`."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise KvvizError(f"{what}: is not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start:,})") from None
    if "\x00" in text:  # valid UTF-8, but no JSON text holds a NUL: UTF-16 or binary
        raise KvvizError(f"{what}: is not UTF-8 text (a NUL byte at offset {data.index(0):,}; UTF-16?)")
    try:
        doc = json.loads(
            text, parse_int=_parse_int, parse_constant=_parse_constant, object_pairs_hook=_object_without_duplicates
        )
    except json.JSONDecodeError as e:
        raise KvvizError(f"{what}: malformed JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    except RecursionError:
        raise KvvizError(f"{what}: JSON nested too deeply") from None
    except KvvizError as e:
        raise KvvizError(f"{what}: {e}") from None
    try:
        _reject_bad_strings(doc)
    except KvvizError as e:
        raise KvvizError(f"{what}: {e}") from None
    return doc


def read_json(path: str | os.PathLike, *, what: str) -> object:
    """Parse a JSON file given as option `what` (e.g. "--groups"), safely (module doc)."""
    data = read_bytes(path, what=what)
    return parse_json(data, what=f"{what} {os.fspath(path)!r}")
