"""Reading what a user hands kvviz: JSON files and the numbers in them, safely.

Every way a file can be wrong ends in one `KvvizError` naming the option and the problem, raised
where the problem arises (never a blanket catch-all further up):

* only regular files are read (a FIFO would block forever, /dev/zero would never end), and at most
  `MAX_INPUT_BYTES` of them; files of one record a line (workloads, traces) are streamed line by line
  (`read_lines`), never read whole, each line at most `MAX_LINE_BYTES`;
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

import dataclasses
import functools
import inspect
import itertools
import json
import math
import os
import re
import stat
from collections.abc import Callable

from kvviz.base.errors import KvvizError, require

# ---- bounds (each in the message that enforces it) -----------------------------------------
MAX_INPUT_BYTES = 32 << 20  # 32 MiB: an HF config.json is a few KiB, a groups file of MAX_LAYERS layers ~8 MiB
MAX_LINE_BYTES = 1 << 20  # one line of a workload or trace (a Mooncake line of 374 hash ids is ~3 KiB)
MAX_INT_DIGITS = 100  # JSON integers: far above every bound below, far below Python's 4,300-digit limit
_LONG_DIGITS = re.compile(rf"\d{{{MAX_INT_DIGITS + 1}}}")
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
    """`value` if it is an integer (not a bool) in [low, high]; a KvvizError naming `field` otherwise (the argument
    check `integer(low, high).check`, below, for a count read from a file or a flag)."""
    return integer(low, high).check(value, field=field)


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
    """repr() cut to one short line (a JSON list in an error message can be huge; an integer of more than
    4,300 digits, which Python will not print, by its size)."""
    if type(value) is int and value.bit_length() > 200:
        return f"<an integer of {value.bit_length():,} bits>"
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


def open_regular(path: str | os.PathLike, *, what: str, give: str = "a JSON file") -> int:
    """A read-only file descriptor of the regular file `path`; a FIFO, a device (/dev/zero, /dev/urandom), a
    socket or a folder is refused in one line naming `what`, before a byte is read (opened with O_NONBLOCK, so a
    FIFO without a writer is refused at once instead of waiting forever)."""
    require(str(path) != "", f"{what} '': needs a file name")
    p = str(path)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError) as e:  # ValueError: a NUL in the name
        raise KvvizError(f"{what} {short_repr(p)}: cannot read ({getattr(e, 'strerror', None) or e})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = {stat.S_IFIFO: " (a FIFO)", stat.S_IFCHR: " (a device)", stat.S_IFSOCK: " (a socket)"}.get(
            stat.S_IFMT(mode), ""
        )
        kind = "a folder" if stat.S_ISDIR(mode) else f"not a regular file{kind}"
        raise KvvizError(f"{what} {short_repr(p)}: is {kind}; give {give}")
    return fd


def read_lines(path: str | os.PathLike, *, what: str, give: str, max_line_bytes: int = MAX_LINE_BYTES):
    """The lines of a regular text file as (line number, text without its line end), streamed: at most
    `max_line_bytes` + 1 bytes are read for one line, so a file of zeros or a line of megabytes is refused at
    that line, never read whole. Not UTF-8, a NUL byte (binary data, UTF-16) or a line too long: one KvvizError
    naming `what` and the line number."""
    with os.fdopen(open_regular(path, what=what, give=give), "rb", buffering=1 << 16) as f:
        for number in itertools.count(1):
            try:
                raw = f.readline(max_line_bytes + 1)
            except OSError as e:
                raise KvvizError(f"{what} line {number:,}: cannot read ({e.strerror or e})") from None
            if not raw:
                return
            if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                raise KvvizError(f"{what} line {number:,}: longer than {max_line_bytes:,} bytes (not {give}?)")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise KvvizError(
                    f"{what} line {number:,}: not UTF-8 text (byte 0x{raw[e.start]:02x} at column {e.start + 1:,})"
                ) from None
            if "\x00" in text:
                raise KvvizError(
                    f"{what} line {number:,}: a NUL byte at column {text.index(chr(0)) + 1:,} (binary data?)"
                )
            yield number, (text.lstrip("\ufeff") if number == 1 else text).rstrip("\r\n")  # a BOM is no content


def read_bytes(path: str | os.PathLike, *, what: str, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; anything else is a KvvizError naming `what`."""
    p = str(path)
    fd = open_regular(path, what=what)
    try:
        info = os.fstat(fd)
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
    return parse_json_text(text, what=what)


_DECODER = json.JSONDecoder(parse_constant=_parse_constant, object_pairs_hook=_object_without_duplicates)
_CHECKED_INTS = json.JSONDecoder(
    parse_int=_parse_int, parse_constant=_parse_constant, object_pairs_hook=_object_without_duplicates
)


def parse_json_text(text: str, *, what: str) -> object:
    """JSON from text (one file, or one line of a JSON Lines file), with the rules of the module docstring;
    every failure a one-line KvvizError naming `what`."""
    # the hooks in Python cost ~1 us an integer: a text without a run of MAX_INT_DIGITS + 1 digits holds no
    # integer too long, so C's int parser reads it (one line of a trace holds hundreds of integers)
    decoder = _CHECKED_INTS if _LONG_DIGITS.search(text) is not None else _DECODER
    try:
        doc = decoder.decode(text)
    except json.JSONDecodeError as e:
        where = f"line {e.lineno} column {e.colno}" if "\n" in text else f"column {e.colno}"
        raise KvvizError(f"{what}: malformed JSON at {where}: {e.msg}") from None
    except RecursionError:
        raise KvvizError(f"{what}: JSON nested too deeply") from None
    except KvvizError as e:
        raise KvvizError(f"{what}: {e}") from None
    if "\\u" not in text:  # a lone surrogate can only come from a \\u escape (an encoded one is not UTF-8)
        return doc
    try:
        _reject_bad_strings(doc)
    except KvvizError as e:
        raise KvvizError(f"{what}: {e}") from None
    return doc


def read_json(path: str | os.PathLike, *, what: str) -> object:
    """Parse a JSON file given as option `what` (e.g. "--groups"), safely (module doc)."""
    data = read_bytes(path, what=what)
    return parse_json(data, what=f"{what} {os.fspath(path)!r}")


# ---- arguments of public library functions ---------------------------------------------------
# One way to check an argument, for every room (issue 37 item 6): what an argument must be is an `Arg` (`integer`,
# `instance`, `duck`, `optional` ...). A public function declares its arguments with `checked`, next to its
# signature, checked before it runs; a check that belongs inside a function (a helper many public functions share,
# each item of a list) asks `Arg.check`. Either way a wrong type or value is one KvvizError naming the argument
# ('<field>=<short repr>: must be <what>', `checked` puts the function's name first), never an AttributeError, a
# ZeroDivisionError or a matplotlib ValueError from deep inside.
_POSITIONAL_ONLY, _POSITIONAL_OR_KEYWORD = inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD
_KEYWORD_ONLY, _VAR_POSITIONAL = inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.VAR_POSITIONAL
_VAR_KEYWORD = inspect.Parameter.VAR_KEYWORD
_NAMED = (_POSITIONAL_ONLY, _POSITIONAL_OR_KEYWORD, _KEYWORD_ONLY)


@dataclasses.dataclass(frozen=True)
class Arg:
    """What one argument must be: `test(value)` is True for a good value; `what` says it ('a positive integer')."""

    test: Callable[[object], bool]
    what: str

    def ok(self, value: object) -> bool:
        """Whether `value` is good (a test that raises on a strange value counts as False)."""
        try:
            return bool(self.test(value))
        except Exception:  # noqa: BLE001 - a value too strange to test is a wrong value
            return False

    def check(self, value: object, *, field: str):
        """`value` when it is good; else one KvvizError line naming the argument: '<field>=<short repr>: must be
        <what>'. For a check inside a function (a helper many public functions share, each item of a list); an
        argument as the caller gives it is declared with `checked`, which refuses in the same words."""
        if self.ok(value):
            return value
        raise KvvizError(f"{field}={short_repr(value)}: must be {self.what}")


def integer(low: int, high: int) -> Arg:
    """An int (not a bool) in [low, high]."""
    return Arg(lambda v: type(v) is int and low <= v <= high, f"an integer from {low:,} to {high:,}")


def number(low: float, high: float, *, low_open: bool = True) -> Arg:
    """A finite int or float (not a bool) in (low, high] (or [low, high])."""

    def test(v):
        real = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        return real and (low < v if low_open else low <= v) and v <= high

    bounds = f"above {low:g} and at most {high:g}" if low_open else f"from {low:g} to {high:g}"
    return Arg(test, f"a number {bounds}")


def text(*, empty: bool = False) -> Arg:
    """A str (non-empty unless `empty`)."""
    return Arg(lambda v: isinstance(v, str) and (empty or v != ""), "a string" if empty else "a non-empty string")


def flag() -> Arg:
    """True or False."""
    return Arg(lambda v: isinstance(v, bool), "True or False")


def instance(*types: type, what: str) -> Arg:
    """An instance of one of `types` (a bool counts as a number only where `types` names bool)."""
    return Arg(lambda v: isinstance(v, types) and (bool in types or not isinstance(v, bool)), what)


def duck(*attributes: str, what: str) -> Arg:
    """Any object with every one of `attributes` (a replay, a figure: read duck-typed)."""
    return Arg(lambda v: all(hasattr(v, a) for a in attributes), what)


def one_of(*values: object) -> Arg:
    """One of `values`."""
    return Arg(lambda v: any(v == x and type(v) is type(x) for x in values), "one of " + ", ".join(map(repr, values)))


def optional(arg: Arg) -> Arg:
    """None, or what `arg` says."""
    return Arg(lambda v: v is None or arg.test(v), f"None or {arg.what}")


def items_of(arg: Arg, *, high: int = MAX_VARIANTS) -> Arg:
    """A list, tuple or range of 0 to `high` items, each what `arg` says."""

    def test(v):
        return isinstance(v, (list, tuple, range)) and len(v) <= high and all(arg.test(x) for x in v)

    return Arg(test, f"a list of at most {high:,} items, each {arg.what}")


def checked(**arguments: Arg):
    """Decorator of a public function (or a class's `__init__`): every argument named here that the caller gives is
    checked before the function runs, and a wrong one is one KvvizError naming the function and the argument
    ("pool_map: columns=0: must be an integer from 1 to 4,096"); so is a call Python itself cannot bind (a
    missing or unknown argument). Defaults are not checked (they are the function's own)."""

    def wrap(func):
        signature = inspect.signature(func)
        unknown = set(arguments) - set(signature.parameters)
        if unknown:  # a typo in the declaration is the library's bug, found at import
            raise TypeError(f"checked({', '.join(sorted(unknown))}): not arguments of {func.__qualname__}")
        name = func.__qualname__.removesuffix(".__init__")
        # What a plain call looks like, so that the common one is checked without inspect's bind (figures call the
        # views' helpers thousands of times a draw): positional names in order, the keywords, the required.
        kinds = {p.name: p.kind for p in signature.parameters.values()}
        positional = [n for n, k in kinds.items() if k in (_POSITIONAL_ONLY, _POSITIONAL_OR_KEYWORD)]
        keywords = {n for n, k in kinds.items() if k in (_POSITIONAL_OR_KEYWORD, _KEYWORD_ONLY)}
        required = {n for n, p in signature.parameters.items() if p.default is p.empty and p.kind in _NAMED}
        var_args, var_kwargs = _VAR_POSITIONAL in kinds.values(), _VAR_KEYWORD in kinds.values()

        def refuse(arg: str, value: object):
            rule = arguments.get(arg)
            if rule is not None and not rule.ok(value):
                raise KvvizError(f"{name}: {arg}={short_repr(value)}: must be {rule.what}")  # Arg.check's words

        @functools.wraps(func)
        def call(*args, **kwargs):
            given = positional[: len(args)]
            plain = (
                (var_args or len(args) <= len(positional))
                and (var_kwargs or kwargs.keys() <= keywords)
                and not kwargs.keys() & given
                and required <= kwargs.keys() | set(given)
            )
            if not plain:  # a call Python cannot bind, or one through *args: inspect says which and why
                try:
                    signature.bind(*args, **kwargs)
                except TypeError as e:
                    raise KvvizError(f"{name}: {e}") from None
            for arg, value in zip(given, args):
                refuse(arg, value)
            for arg, value in kwargs.items():
                refuse(arg, value)
            return func(*args, **kwargs)

        return call

    return wrap
