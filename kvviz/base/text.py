"""Words and numbers in kvviz's text output, in one place: a count with its noun in the right
number ("1 block", "2 blocks"), and numbers as tables show them (no float noise such as
26.459999999962747)."""

from __future__ import annotations

# Nouns whose plural is not noun + "s".
_IRREGULAR = {"entry": "entries", "its": "their"}


def plural(n: int, noun: str, plural_form: str | None = None) -> str:
    """'{n:,} {noun}' with the noun in the plural unless n is 1 or -1 ("1 block", "0 blocks",
    "2,048 tokens"); `plural_form` for nouns that do not take an s."""
    word = noun if abs(n) == 1 else (plural_form or _IRREGULAR.get(noun, noun + "s"))
    return f"{n:,} {word}"


def tidy(x: float, digits: int = 6) -> float:
    """`x` rounded to `digits` decimals: a GiB figure computed back from bytes (26.46 GiB ->
    28,411,208,663 B -> 26.459999999962747) reads as the number given."""
    return round(x, digits)


_BINARY_UNITS = ("KiB", "MiB", "GiB", "TiB")


def binary_size(n: int) -> str:
    """A byte count rounded to two decimals of the largest binary unit it holds at least one of:
    "512 B", "3.50 KiB", "80.26 MiB", "1.25 GiB" (never "0.00 GiB" for a small pool; kvviz says
    GiB, not GB, for 2^30 bytes everywhere but in an engine's own log line). For a label that
    must be exact, kvviz.views.style.format_bytes."""
    size, unit = float(n), "B"
    for next_unit in _BINARY_UNITS:
        if abs(size) < 1024:
            break
        size, unit = size / 1024, next_unit
    return f"{n:,} B" if unit == "B" else f"{size:.2f} {unit}"


def bytes_label(n: int) -> str:
    """'{n:,} B' with its binary size beside it when that says more: "4,096 B (4.00 KiB)"."""
    return f"{n:,} B" if abs(n) < 1024 else f"{n:,} B ({binary_size(n)})"


def format_gib(num_bytes: int) -> str:
    """vLLM's utils/mem_utils.py format_gib, as its log and start-up errors print GiB: f"{round(b / 2**30, 2)}"."""
    from kvviz.base.inputs import of_type

    of_type(num_bytes, (int, float), field="num_bytes", give="a number of bytes")
    return f"{round(num_bytes / (1 << 30), 2)}"
