"""One error type for bad input, so the CLI can print one line and exit 2.

Every message is one line (`bounded`) of at most MAX_MESSAGE characters (kvviz's own longest refusals, a family's
rule quoted from vLLM, come to ~700) that never echoes a long input whole: in a longer line a quoted value is cut to
its start, a run without spaces (a 5,000-stage `--pp-layer-partition`) to its two ends, and what is still over in
the middle."""

import re

MAX_MESSAGE = 1000  # characters of one error line at most: kvviz's own longest refusals (~700) fit whole
MAX_QUOTED = 160  # a quoted value (a path, a repr) longer than this is cut to its first KEEP_QUOTED
KEEP_QUOTED = 80
MAX_WORD = 100  # a run without spaces (a comma-separated list, a repr) longer than this keeps its two ends
# a quoted piece: the quote opens after no letter and closes before none (an apostrophe, "kvviz's", is no quote)
_QUOTED = re.compile(r"""(?<!\w)(['"])([^'"]{%d,})\1(?!\w)""" % (MAX_QUOTED + 1))
_WORD = re.compile(r"\S{%d,}" % (MAX_WORD + 1))


def _one_line(text: str) -> str:
    """Every character a terminal cannot show on one line (line breaks, lone surrogates) escaped."""
    return text if text.isprintable() else "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


def _cut_word(m: re.Match) -> str:
    word = m.group(0)
    return f"{word[:60]}...({len(word) - 80:,} characters)...{word[-20:]}"


def bounded(message: str, limit: int = MAX_MESSAGE) -> str:
    """`message` as one line of at most about `limit` characters: unprintable characters escaped and every quoted
    piece over MAX_QUOTED characters cut to its start (an echoed path or value); a line still over `limit` has every
    run of more than MAX_WORD characters without a space cut to its two ends, and what is still over cut from the
    middle, saying how many characters went (the start names the field, the end says why)."""
    text = _QUOTED.sub(lambda m: f"{m.group(1)}{m.group(2)[: KEEP_QUOTED - 3]}...{m.group(1)}", _one_line(message))
    if len(text) <= limit:
        return text
    text = _WORD.sub(_cut_word, text)
    if len(text) <= limit:
        return text
    head, tail = limit * 2 // 3, limit // 4
    return f"{text[:head]} ...({len(text) - head - tail:,} characters)... {text[-tail:]}"


class KvvizError(ValueError):
    """Bad input: the message names the field and what is wrong with it, on one bounded line (`bounded`)."""

    def __init__(self, message: object = "", *args: object):
        super().__init__(bounded(str(message)), *args)


def require(condition: bool, message: str) -> None:
    """Raise KvvizError(message) unless condition holds (input validation, never `assert`)."""
    if not condition:
        raise KvvizError(message)
