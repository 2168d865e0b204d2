"""Block ownership: which group holds each block id (`BlockPool`), the one owner of that fact that
kvviz.verify and the figures ask. One owner per block id unless a hazard says otherwise."""

from __future__ import annotations

from typing import Hashable

import torch

from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import MAX_BLOCKS, bounded_int, of_type, short_repr

FREE = -1  # owner id of a free block
ASSIGNMENTS = ("round-robin", "contiguous")  # BlockPool.assigned
_SCAN = 4096  # blocks allocate() looks at per step when searching for free ids


def _owner_dtype(num_groups: int) -> torch.dtype:
    """The smallest signed integer type that holds FREE and the ids 0..num_groups-1."""
    return torch.int8 if num_groups < 2**7 - 1 else torch.int16 if num_groups < 2**15 - 1 else torch.int32


class BlockPool:
    """Hands block ids to groups and takes them back; one owner per block unless a hazard says so.

    `allocate` hands out the lowest free ids (deterministic). `claim(group, block, hazard=True)`
    on a block another group holds records the double ownership in `hazards` instead of raising.
    Groups are any hashable labels (verify uses group indices).

    Bookkeeping is compact, so that a pool of 10^8 blocks costs bytes, not Python objects: one
    small integer per block (`owner_ids`: the index of its first owner in `groups`, FREE = -1),
    and a dict only for the blocks a hazard gave a second owner.
    """

    def __init__(self, num_blocks: int, *, max_groups: int = 2**15 - 2) -> None:
        require(
            isinstance(num_blocks, int) and not isinstance(num_blocks, bool) and num_blocks > 0,
            f"num_blocks={short_repr(num_blocks)}: must be a positive integer",
        )
        bounded_int(num_blocks, field="num_blocks", low=1, high=MAX_BLOCKS)
        require(
            isinstance(max_groups, int) and 0 < max_groups < 2**31 - 1,
            f"max_groups={max_groups!r}: must be a positive integer below 2^31 - 1",
        )
        self.num_blocks = num_blocks
        self.max_groups = max_groups
        self.owner_ids = torch.full((num_blocks,), FREE, dtype=_owner_dtype(max_groups))
        self.groups: list[Hashable] = []  # label of each owner id
        self._ids: dict[Hashable, int] = {}
        self._extra: dict[int, list[Hashable]] = {}  # block -> owners after the first (hazards)
        self._num_free = num_blocks
        self._hint = 0  # no free block below this id
        self.hazards: list[tuple[int, tuple[Hashable, ...]]] = []

    @staticmethod
    def nbytes_for(num_blocks: int, num_groups: int) -> int:
        """Bytes of bookkeeping a BlockPool of `num_blocks` blocks keeps (for fit checks)."""
        return num_blocks * torch.empty((), dtype=_owner_dtype(num_groups)).element_size()

    def _id(self, group: Hashable) -> int:
        i = self._ids.get(group)
        if i is None:
            require(
                len(self.groups) < self.max_groups,
                f"group={group!r}: this BlockPool holds at most max_groups={self.max_groups} groups",
            )
            i = self._ids[group] = len(self.groups)
            self.groups.append(group)
        return i

    def _check_block(self, block: int) -> None:
        require(
            isinstance(block, int) and not isinstance(block, bool) and 0 <= block < self.num_blocks,
            f"block={block!r}: outside 0..{self.num_blocks - 1}",
        )

    @property
    def num_free(self) -> int:
        """Blocks no group holds."""
        return self._num_free

    def allocate(self, group: Hashable, n: int) -> list[int]:
        """The `n` lowest free block ids, now owned by `group`."""
        require(isinstance(n, int) and not isinstance(n, bool) and n >= 0, f"n={n!r}: must be a non-negative integer")
        require(n <= self._num_free, f"n={n}: group {group!r} asks for {n} blocks but only {self._num_free} are free")
        gid = self._id(group)
        out: list[int] = []
        lo = self._hint
        while len(out) < n:
            # n <= the free count, so the scan finds them before the end (a guard, never an endless loop)
            require(lo < self.num_blocks, "BlockPool: the free count and owner_ids disagree")
            hi = min(self.num_blocks, lo + max(_SCAN, 2 * (n - len(out))))
            free = (self.owner_ids[lo:hi] == FREE).nonzero().flatten()[: n - len(out)] + lo
            self.owner_ids[free] = gid
            out.extend(free.tolist())
            lo = hi
        if out:
            self._hint = out[-1] + 1 if len(out) == n else lo
        self._num_free -= n
        return out

    def assign(self, owner_ids: torch.Tensor, groups) -> None:
        """Hand out every block at once: `owner_ids[b]` indexes `groups` (FREE = -1), on a fresh pool."""
        require(self._num_free == self.num_blocks, "assign: the pool already hands out blocks")
        require(tuple(owner_ids.shape) == (self.num_blocks,), f"owner_ids: needs shape ({self.num_blocks},)")
        for g in groups:
            self._id(g)
        self.owner_ids.copy_(owner_ids)
        self._num_free = int((self.owner_ids == FREE).sum())
        self._hint = 0

    def claim(self, group: Hashable, block: int, *, hazard: bool = False) -> None:
        """Take one specific block. Held by another group: KvvizError, or with hazard=True record it."""
        self._check_block(block)
        owners = self.owners(block)
        if group in owners:
            raise KvvizError(f"block {block}: group {group!r} already owns it")
        if owners and not hazard:
            raise KvvizError(
                f"block {block}: group {group!r} claims it but group {owners[0]!r} owns it "
                f"(one owner per block id, or the overlaid groups corrupt each other)"
            )
        if owners:
            self._id(group)
            self._extra.setdefault(block, []).append(group)
            self.hazards.append((block, owners + (group,)))
        else:
            self.owner_ids[block] = self._id(group)
            self._num_free -= 1

    def free(self, group: Hashable, ids) -> None:
        """Give blocks back. Every id must be owned by `group` (checked before anything is freed)."""
        ids = list(ids)
        for b in ids:
            self._check_block(b)
            o = self.owners(b)
            if group not in o:
                raise KvvizError(
                    f"block {b}: group {group!r} frees it but " + (f"group {o[0]!r} owns it" if o else "nobody owns it")
                )
        require(len(set(ids)) == len(ids), f"ids: a block appears twice in one free() ({ids})")
        for b in ids:
            rest = [g for g in self.owners(b) if g != group]
            self._extra.pop(b, None)
            if rest:
                self.owner_ids[b] = self._ids[rest[0]]
                if rest[1:]:
                    self._extra[b] = rest[1:]
            else:
                self.owner_ids[b] = FREE
                self._num_free += 1
                self._hint = min(self._hint, b)

    def owner(self, block: int):
        """The group holding `block` (the first one, under a recorded hazard), or None."""
        self._check_block(block)
        i = int(self.owner_ids[block])
        return None if i == FREE else self.groups[i]

    def owners(self, block: int) -> tuple:
        """Every group holding `block` (more than one only after claim(..., hazard=True))."""
        first = self.owner(block)
        return () if first is None else (first, *self._extra.get(block, ()))

    def block_ids(self, group: Hashable) -> torch.Tensor:
        """The blocks `group` holds, ascending, as an int64 tensor (no Python object per block)."""
        i = self._ids.get(group)
        if i is None:
            return torch.empty(0, dtype=torch.int64)
        mine = (self.owner_ids == i).nonzero().flatten()
        extra = [b for b, o in self._extra.items() if group in o]
        return torch.cat([mine, torch.tensor(extra, dtype=torch.int64)]).sort().values if extra else mine

    def runs_of(self, group: Hashable) -> tuple[range, ...]:
        """The blocks `group` holds, ascending, as maximal runs of equally spaced ids (greedy from
        the lowest id): round robin and contiguous ownership give one run, a hazard's extra block a
        few more. What a caller that writes the group's blocks through strided views asks."""
        return ranges_of(self.block_ids(group))

    @classmethod
    def assigned(cls, num_blocks: int, num_groups: int, assignment: str = "round-robin") -> "BlockPool":
        """A BlockPool whose groups 0..num_groups-1 hold every block: "round-robin" gives block b to
        group b % num_groups (neighbouring blocks belong to different groups, as in a busy vLLM
        server); "contiguous" gives group g one run of ids, in group order. Filled in one tensor
        operation."""
        require(
            assignment in ASSIGNMENTS, f"assignment={assignment!r}: unknown; choose one of {', '.join(ASSIGNMENTS)}"
        )
        bp = cls(num_blocks, max_groups=num_groups)
        owner = torch.full((num_blocks,), FREE, dtype=bp.owner_ids.dtype)
        start = 0
        for g in range(num_groups):  # strided fills: no per-block temporary
            if assignment == "round-robin":
                owner[g::num_groups] = g
            else:
                n = num_blocks // num_groups + (g < num_blocks % num_groups)
                owner[start : start + n] = g
                start += n
        bp.assign(owner, range(num_groups))
        return bp

    def blocks_of(self, group: Hashable) -> list[int]:
        """The blocks `group` holds, ascending."""
        i = self._ids.get(group)
        if i is None:
            return []
        mine = (self.owner_ids == i).nonzero().flatten().tolist()
        extra = [b for b, o in self._extra.items() if group in o]
        return sorted(mine + extra) if extra else mine


def ranges_of(ids: torch.Tensor) -> tuple[range, ...]:
    """Ascending block ids as maximal runs of equally spaced ids, greedily from the lowest: the
    breaks are found on the tensor, so a run of 10^8 ids costs one pass, not 10^8 objects."""
    of_type(ids, torch.Tensor, field="ids", give="a 1-D integer tensor of block ids")
    require(
        ids.dim() == 1 and not ids.dtype.is_floating_point and not ids.dtype.is_complex and ids.dtype != torch.bool,
        f"ids: a {ids.dim()}-D {ids.dtype} tensor; give a 1-D integer tensor of block ids",
    )
    n = int(ids.numel())
    if n == 0:
        return ()
    if n == 1:
        b = int(ids[0])
        return (range(b, b + 1),)
    d = ids[1:] - ids[:-1]
    breaks = ((d[1:] != d[:-1]).nonzero().flatten() + 1).tolist()  # d changes between d[i-1] and d[i]
    ends = breaks + [n - 1]  # segment s of d: d[start..end) constant
    out, i, seg = [], 0, 0
    while i < n:
        if i == n - 1:
            b = int(ids[i])
            out.append(range(b, b + 1))
            break
        while ends[seg] <= i:  # the segment of d holding d[i]
            seg += 1
        j = ends[seg]  # d[i..j) equal: ids[i..j] form one run
        lo, step = int(ids[i]), int(d[i])
        out.append(range(lo, int(ids[j]) + 1, step))
        i = j + 1
    return tuple(out)
