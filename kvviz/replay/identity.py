"""Which prompt tokens two requests share, as the identities the replay hashes blocks by.

vLLM 0.33 hashes a block as its parent's hash and its own tokens (`hash_block_tokens` in
vllm/v1/core/kv_cache_utils.py), so a block's hash names every token before its end. The replay
never builds tokens: the tokens [0, end) of a request are named by a pair (identity, end), where the
identity is a node of a trie over what the workload says is shared.

* Hash chains (`hash_ids`, `hash_block_tokens`: shared/data/vllm-0.33/replay-traces/README.md): the
  prompt is chunk by chunk each id's own tokens, cut at prompt_len. Chunk k's node is the trie node
  of ids[0..k] (the node of (chunk k-1's node, ids[k])): two requests reach one node exactly when their
  ids agree up to there, so they share every token of it. Tokens [0, end) with end inside the chained
  part (end <= min(prompt_len, len(ids) x chunk)) are (node of the chunk holding token end - 1, end): a
  partial chunk is the first tokens of the same id's chunk elsewhere. Past it, the tokens are the
  request's own: (request id, end).
* A prefix group (`prefix_group`, `prefix_len`): one chunk, the group's node, `prefix_len` tokens long;
  two requests of one group share the shorter prefix.

A node is an int, a request id a str: the two never collide."""

from __future__ import annotations

from kvviz.base.errors import KvvizError


class Identities:
    """The trie of shared chunks of one workload: `of(w)` gives a request's (chain, chunk, shared)."""

    def __init__(self) -> None:
        self.nodes: dict = {}
        self.chunk: int | None = None  # the workload's hash_block_tokens (one for every line)

    def _node(self, key) -> int:
        node = self.nodes.get(key)
        if node is None:
            node = self.nodes[key] = len(self.nodes)
        return node

    def of(self, w) -> tuple[tuple[int, ...], int, int]:
        """(chain, chunk, shared) of a WorkloadRequest: the node of each shared chunk, the tokens per chunk
        and how many leading prompt tokens are shared at all; ((), 1, 0) when nothing is."""
        if w.hash_ids is not None:
            chunk = w.hash_block_tokens
            if self.chunk is None:
                self.chunk = chunk
            elif chunk != self.chunk:
                raise KvvizError(
                    f"{w.id}: hash_block_tokens={chunk}: an earlier request has {self.chunk}; one workload's "
                    f"hash chains have one block size"
                )
            shared = min(w.prompt_len, len(w.hash_ids) * chunk)
            chain = []
            node = -1  # the root
            for h in w.hash_ids[: -(-shared // chunk)]:
                node = self._node((node, h))
                chain.append(node)
            return tuple(chain), chunk, shared
        if w.prefix_group is not None and w.prefix_len > 0:
            return (self._node(("group", w.prefix_group)),), w.prefix_len, w.prefix_len
        return (), 1, 0
