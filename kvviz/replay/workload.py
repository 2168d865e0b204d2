"""The replay's workload: JSON Lines, one request a line, in the format of vLLM 0.33's reference
replays (`{"id", "arrival_step", "prompt_len", "output_len", "prefix_group", "prefix_len"}`), or with
hash chains instead of a prefix group (`"hash_ids": [int, ...], "hash_block_tokens": 512`), the form of
the real-trace references (shared/data/vllm-0.33/replay-traces/README.md, docs/replay.md).

Requests of one `prefix_group` share their first `prefix_len` prompt tokens (two of one group with
different lengths share the shorter); everything else in a prompt is unique. With hash chains the prompt
is built block by block, `hash_block_tokens` tokens of block `h`'s own token stream for each id `h`, cut
at `prompt_len`; the rest past the ids is unique: two requests share exactly their common leading ids'
tokens (an id stands for its block and every block before it). Bad input raises `KvvizError` in one line
naming the line number and the field, bounded to a few hundred characters whatever the input holds (a key of
megabytes, a list as id, an integer of a million digits); a file is streamed line by line
(kvviz.base.files.read_lines: regular files only, each line at most MAX_LINE_BYTES), never read whole."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from kvviz.base.errors import KvvizError
from kvviz.base.files import parse_json_text, read_lines
from kvviz.base.inputs import short_repr

FIELDS = ("id", "arrival_step", "prompt_len", "output_len", "prefix_group", "prefix_len")
HASH_FIELDS = ("hash_ids", "hash_block_tokens")  # the hash-chain form's optional pair


@dataclasses.dataclass(frozen=True, slots=True)
class WorkloadRequest:
    """One request: added at the start of engine step `arrival_step`, `output_len` tokens generated."""

    id: str
    arrival_step: int
    prompt_len: int
    output_len: int
    prefix_group: str | None = None
    prefix_len: int = 0
    hash_ids: tuple[int, ...] | None = None  # chained block ids (Mooncake's form); None: no hash chain
    hash_block_tokens: int | None = None  # tokens of one hash id's block (Mooncake: 512)

    def to_json(self) -> dict:
        """The request as one JSON Lines record of the workload format (the hash-chain pair only when set)."""
        out = {k: getattr(self, k) for k in FIELDS}
        if self.hash_ids is not None:
            out["hash_ids"] = list(self.hash_ids)
            out["hash_block_tokens"] = self.hash_block_tokens
        return out


def _int(value, where: str, field: str, low: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise KvvizError(f"{where}: {field}={short_repr(value)}: must be an integer")
    if value < low:
        raise KvvizError(f"{where}: {field}={short_repr(value)}: must be at least {low}")
    return value


def request_from(obj, where: str) -> WorkloadRequest:
    """One request from a decoded JSON object; `where` names it in errors ('workload line 3')."""
    if not isinstance(obj, dict):
        raise KvvizError(f"{where}: not a JSON object")
    for field in ("id", "arrival_step", "prompt_len", "output_len"):
        if field not in obj:
            raise KvvizError(f"{where}: {field}: missing")
    unknown = [k for k in obj if k not in FIELDS and k not in HASH_FIELDS]
    if unknown:
        raise KvvizError(
            f"{where}: {short_repr(unknown[0])}: unknown field (fields are {', '.join(FIELDS + HASH_FIELDS)})"
        )
    rid = obj["id"]
    if not isinstance(rid, str) or not rid:
        raise KvvizError(f"{where}: id={short_repr(rid)}: must be a non-empty string")
    group = obj.get("prefix_group")
    if group is not None and (not isinstance(group, str) or not group):
        raise KvvizError(f"{where}: prefix_group={short_repr(group)}: must be a non-empty string or null")
    prompt = _int(obj["prompt_len"], where, "prompt_len", 1)
    plen = _int(obj.get("prefix_len", 0), where, "prefix_len", 0)
    if plen > prompt:
        raise KvvizError(f"{where}: prefix_len={plen}: longer than prompt_len={prompt}")
    if plen and group is None:
        raise KvvizError(f"{where}: prefix_len={plen}: needs a prefix_group")
    ids, block = _hash_chain(obj, where, group)
    return WorkloadRequest(
        rid,
        _int(obj["arrival_step"], where, "arrival_step", 0),
        prompt,
        _int(obj["output_len"], where, "output_len", 1),
        group,
        plen,
        ids,
        block,
    )


def _hash_chain(obj: dict, where: str, group) -> tuple[tuple[int, ...] | None, int | None]:
    """The optional hash-chain pair: both or neither, and never beside a prefix group."""
    ids, block = obj.get("hash_ids"), obj.get("hash_block_tokens")
    if ids is None and block is None:
        return None, None
    if ids is None or block is None:
        missing = "hash_ids" if ids is None else "hash_block_tokens"
        raise KvvizError(f"{where}: {missing}: missing (hash_ids and hash_block_tokens come together)")
    if group is not None:
        raise KvvizError(f"{where}: prefix_group={short_repr(group)}: must be null on a line with hash_ids")
    if not isinstance(ids, list):
        raise KvvizError(f"{where}: hash_ids: must be a list of integers")
    for k, h in enumerate(ids):
        _int(h, where, f"hash_ids[{k}]", 0)
    return tuple(ids), _int(block, where, "hash_block_tokens", 1)


def check(requests, max_model_len: int | None = None, what: str = "workload") -> tuple[WorkloadRequest, ...]:
    """Refuse duplicate ids and (with `max_model_len`) requests longer than it; return them as a tuple.
    `requests`: WorkloadRequests or dicts of the JSON Lines fields (named 'workload line N' in errors)."""
    if isinstance(requests, (str, bytes, dict)) or not hasattr(requests, "__iter__"):
        raise KvvizError(
            f"{what}={short_repr(requests)}: give WorkloadRequests, dicts of the workload fields, or a file path"
        )
    return _checked(
        (
            (i, r if isinstance(r, WorkloadRequest) else request_from(r, f"{what} line {i}"))
            for i, r in enumerate(requests, 1)
        ),
        max_model_len,
        what,
    )


def _checked(numbered, max_model_len: int | None, what: str) -> tuple[WorkloadRequest, ...]:
    """(line number, request) pairs, each checked as it comes: no duplicate id, none longer than max_model_len."""
    seen: dict = {}
    out = []
    for i, r in numbered:
        first = seen.setdefault(r.id, i)
        if first != i:
            raise KvvizError(f"{what} line {i}: id={short_repr(r.id)}: duplicate of line {first}")
        if max_model_len is not None and r.prompt_len + r.output_len > max_model_len:
            raise KvvizError(
                f"{what} line {i}: prompt_len + output_len = {r.prompt_len + r.output_len}: longer than "
                f"max_model_len={max_model_len}"
            )
        out.append(r)
    return tuple(out)


def parsed_lines(lines, what: str):
    """(line number, request) for each non-blank line of (line number, text) pairs."""
    for i, line in lines:
        if line.strip():
            yield i, request_from(parse_json_text(line, what=f"{what} line {i}"), f"{what} line {i}")


def loads(text: str, max_model_len: int | None = None, what: str = "workload") -> tuple[WorkloadRequest, ...]:
    """Requests from JSON Lines text (blank lines skipped)."""
    return _checked(parsed_lines(enumerate(text.splitlines(), 1), what), max_model_len, what)


def read_jsonl(path, max_model_len: int | None = None) -> tuple[WorkloadRequest, ...]:
    """Requests from a JSON Lines file, streamed line by line (kvviz.base.files.read_lines)."""
    what = f"workload {short_repr(Path(path).name)}" if str(path) else "workload"
    lines = read_lines(path, what=what, give="a JSON Lines workload")
    return _checked(parsed_lines(lines, what), max_model_len, what)


def dumps(requests) -> str:
    """Requests as JSON Lines."""
    return "".join(json.dumps(r.to_json()) + "\n" for r in requests)
