"""argparse value types that refuse a bad value in one line naming the flag: bounded integers, GiB,
non-empty strings."""

from __future__ import annotations

import argparse
import math

from kvviz.base.defaults import GIB
from kvviz.base.inputs import (
    MAX_BUDGET_BYTES,
)


# ---- option types: each refuses what it cannot use, with the bound in the message ----------
def int_in(low: int, high: int):
    """argparse type: an integer from `low` to `high`; a number too long to parse is refused by its length."""

    def parse(text: str) -> int:
        digits = text.strip().lstrip("+-").lstrip("0")
        if digits.isdigit() and len(digits) > len(str(high)):  # before int(): it refuses 4,301 digits
            raise argparse.ArgumentTypeError(
                f"a {len(digits):,}-digit number is out of range: must be from {low:,} to {high:,}"
            )
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value:,} is out of range: must be from {low:,} to {high:,}")
        return value

    parse.__name__ = "integer"
    return parse


def gib_value(text: str) -> float:
    """argparse type: a finite number of GiB above 0 and at most MAX_BUDGET_BYTES (one line otherwise)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number") from None
    high = MAX_BUDGET_BYTES / GIB
    if not (math.isfinite(value) and 0 < value <= high):
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is out of range: must be above 0 and at most {high:,.0f}")
    return value


def nonempty(what: str):
    """argparse type: a non-empty string; `what` names it in the error and in argparse's messages."""

    def parse(text: str) -> str:
        if not text:
            raise argparse.ArgumentTypeError(f"{what} is empty")
        return text

    parse.__name__ = what
    return parse
