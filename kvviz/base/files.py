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

import itertools
import json
import os
import re
import stat

from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import MAX_INPUT_BYTES, MAX_INT_DIGITS, MAX_LINE_BYTES, short_repr

_LONG_DIGITS = re.compile(rf"\d{{{MAX_INT_DIGITS + 1}}}")  # a JSON integer past the bound: parsed with the check


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
