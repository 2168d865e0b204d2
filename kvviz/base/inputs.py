"""What a user hands kvviz, checked: the bounds on every count that sizes work (each in the message
that enforces it), numbers and items within them, short and printable echoes of a bad value, and
the one argument check of public functions (`Arg`, `checked`). Reading the files themselves
(regular files only, bounded, strict JSON): kvviz.base.files."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import itertools
import math
from collections.abc import Callable

from kvviz.base.errors import KvvizError, require

# ---- bounds (each in the message that enforces it) -----------------------------------------
MAX_INPUT_BYTES = 32 << 20  # 32 MiB: an HF config.json is a few KiB, a groups file of MAX_LAYERS layers ~8 MiB
MAX_LINE_BYTES = 1 << 20  # one line of a workload or trace (a Mooncake line of 374 hash ids is ~3 KiB)
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
