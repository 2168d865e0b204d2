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
