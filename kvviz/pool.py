"""A real KV-cache pool: one uint8 backing, every layer a zero-copy view into it
(docs/planners.md#overlay, docs/hazards.md#shared-block).

vLLM's worker allocates one flat uint8 tensor of ``num_blocks * block_stride`` bytes, sees it as
``(num_blocks, block_stride)`` and gives each layer the columns ``[offset, offset + page)``,
reinterpreted as the layer's dtype. `Pool` does exactly that, on CPU or CUDA, so that
``pool.page_view(name)[b].data_ptr() == backing.data_ptr() + b * stride + offset``.

`BlockPool` is the other half of the overlay's contract: block ids are handed to groups, and a
block id belongs to at most one group at a time. ``claim(..., hazard=True)`` breaks that rule on
purpose and records it, so that `kvviz.verify` can show the damage on real memory.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Hashable

import torch

from . import formats
from .defaults import GIB
from .errors import KvvizError, require
from .core.layout import Layout, Placement, SharedTensor

VIEW_DTYPES = {"uint8": torch.uint8, "bfloat16": torch.bfloat16, "float32": torch.float32}

_DEVICE_RE = re.compile(r"^(auto|cpu|cuda)(?::(\d+))?$")


# ---- devices -----------------------------------------------------------------------------------
def resolve_device(name: str | torch.device | None = "auto", what: str = "--device") -> torch.device:
    """"auto" (CUDA when available, else CPU), "cpu", "cuda" or "cuda:N" -> torch.device.

    Unknown strings, and CUDA when this torch sees no GPU (or not that index), raise KvvizError
    naming `what` (the library passes "device"; the default, "--device", is for command-line tools).
    """
    if isinstance(name, torch.device):
        name = str(name)
    if name is None:
        name = "auto"
    m = _DEVICE_RE.match(name.strip().lower()) if isinstance(name, str) else None
    if m is None or (m.group(1) == "auto" and m.group(2) is not None):
        raise KvvizError(f"{what}={name!r}: unknown; choose auto, cpu, cuda or cuda:N")
    kind, index = m.group(1), m.group(2)
    if kind == "auto":
        return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    if kind == "cpu":
        require(index in (None, "0"), f"{what}={name!r}: there is one CPU device; use cpu")
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise KvvizError(f"{what}={name!r}: this torch ({torch.__version__}) sees no CUDA device; use cpu or auto")
    count = torch.cuda.device_count()
    i = torch.cuda.current_device() if index is None else int(index)
    require(i < count, f"{what}={name!r}: there {'is' if count == 1 else 'are'} only {count} CUDA device(s) (0..{count - 1})")
    return torch.device("cuda", i)


def _meminfo_available() -> int | None:
    """MemAvailable from /proc/meminfo in bytes (None where there is no such file)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


CGROUP_ROOT = "/sys/fs/cgroup"  # where cgroup v2 (and v1's memory/ controller) are mounted


def _read_int(path: str) -> int | None:
    """An integer file of the cgroup fs ("max" or an absurd v1 limit: None)."""
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    if not text.isdigit() or int(text) >= 2**62:
        return None
    return int(text)


def _cgroup_headroom() -> int | None:
    """memory.max - memory.current of this process's cgroup (v2; v1: memory.limit_in_bytes -
    memory.usage_in_bytes), None without a limit. What the kernel's OOM killer enforces."""
    rel = ""
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                if line.startswith("0::"):
                    rel = line[3:].strip().lstrip("/")
    except OSError:
        pass
    for d in dict.fromkeys([os.path.join(CGROUP_ROOT, rel), CGROUP_ROOT]):
        limit = _read_int(os.path.join(d, "memory.max"))
        if limit is not None:
            return max(0, limit - (_read_int(os.path.join(d, "memory.current")) or 0))
    v1 = os.path.join(CGROUP_ROOT, "memory")
    limit = _read_int(os.path.join(v1, "memory.limit_in_bytes"))
    if limit is not None:
        return max(0, limit - (_read_int(os.path.join(v1, "memory.usage_in_bytes")) or 0))
    return None


def _address_space_headroom() -> int | None:
    """RLIMIT_AS (soft) minus the address space this process maps now (VmSize), None unlimited."""
    try:
        import resource
    except ImportError:  # not on this platform
        return None
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        with open("/proc/self/status") as f:
            used = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    except (OSError, StopIteration, ValueError, IndexError):
        used = 0
    return max(0, soft - used)


def host_memory() -> dict[str, int]:
    """What this process may still allocate on the host, by each limit that applies: MemAvailable,
    RLIMIT_AS (address space left) and the cgroup's memory.max (left), bytes; absent ones left out."""
    out = {"MemAvailable": _meminfo_available(), "RLIMIT_AS": _address_space_headroom(),
           "cgroup memory.max": _cgroup_headroom()}
    return {k: v for k, v in out.items() if v is not None}


def free_bytes(device: str | torch.device = "auto") -> int | None:
    """Free memory of a device in bytes: torch.cuda.mem_get_info on CUDA; on the CPU the tightest
    of host_memory() (MemAvailable, RLIMIT_AS, cgroup memory.max); None when nothing says."""
    dev = resolve_device(device)
    if dev.type == "cuda":
        return int(torch.cuda.mem_get_info(dev)[0])
    limits = host_memory()
    return min(limits.values()) if limits else None


def _gib(n: int) -> str:
    return f"{n:,} B ({n / GIB:.2f} GiB)"


def check_fits(nbytes: int, device: str | torch.device = "auto", *, what: str = "pool") -> None:
    """Raise KvvizError (requested vs free, bytes and GiB, and which limit) unless `nbytes` fit in
    the device's free memory (free_bytes). `what` names the field the request came from, e.g.
    "num_blocks=100000"."""
    require(isinstance(nbytes, int) and nbytes >= 0, f"{what}: nbytes={nbytes!r} must be a non-negative integer")
    dev = resolve_device(device)
    if dev.type == "cuda":
        free, limit = free_bytes(dev), "free"
    else:
        limits = host_memory()
        if not limits:  # the platform does not say; let the allocator decide
            return
        name = min(limits, key=limits.get)
        free, limit = limits[name], "free" if name == "MemAvailable" else f"free under {name}"
    if nbytes > free:
        raise KvvizError(f"{what}: needs {_gib(nbytes)} but {dev} has only {_gib(free)} {limit}")


def allocation_failed(e: BaseException) -> bool:
    """Whether an exception from torch is an allocator's refusal (out of memory), not a bug."""
    if isinstance(e, (MemoryError, torch.OutOfMemoryError)):
        return True
    text = str(e).lower()
    return isinstance(e, RuntimeError) and any(s in text for s in (
        "can't allocate memory", "cannot allocate memory", "out of memory", "not enough memory",
        "failed to allocate"))


# ---- the pool ----------------------------------------------------------------------------------
def check_views(layout: Layout) -> None:
    """Refuse layouts in which some layer cannot be viewed as its dtype (docs/caches.md#backend-alignment)."""
    stride = layout.block_stride
    for p in layout.placements:
        size = p.cache.dtype_size
        dtype = p.cache.row_format.view_dtype
        where = f"layer {p.name!r} (group {layout.groups[p.group].name!r})"
        require(p.page_bytes > 0, f"{where}: page_bytes=0, a zero-size page has no view")
        require(p.offset >= 0 and p.end <= stride,
                f"{where}: offset {p.offset} + page {p.page_bytes} lies outside the block stride {stride}")
        require(p.offset % size == 0,
                f"{where}: offset={p.offset} is not divisible by the {dtype} size {size}; its view is impossible")
        require(stride % size == 0,
                f"{where}: block_stride={stride} is not divisible by the {dtype} size {size}; its view is impossible")
        require(p.page_bytes % size == 0,
                f"{where}: page_bytes={p.page_bytes} is not divisible by the {dtype} size {size}; its view is impossible")


@dataclasses.dataclass(frozen=True)
class TensorView:
    """One of the layout's shared tensors over the pool.

    PR-era planners (``layer_stride is None``): ``view`` is (num_blocks, extent) uint8 from the
    tensor's offset, extent = the largest page of the layers that share it. vLLM 0.33
    (``layer_stride`` set): ``view`` is (num_blocks, len(layers), layer_stride) uint8.
    """

    tensor: SharedTensor
    view: torch.Tensor


class Pool:
    """ONE uint8 backing of num_blocks * block_stride bytes and zero-copy views of every layer."""

    def __init__(self, layout: Layout, num_blocks: int, device: str | torch.device = "auto", *,
                 zero: bool = True) -> None:
        """Allocate the backing (zeroed, as vLLM's worker does with torch.zeros; zero=False leaves
        the bytes as the allocator gives them, for a caller that writes every byte it reads, as
        kvviz.verify does) and check that every layer has a view."""
        require(isinstance(layout, Layout), f"layout: expected a kvviz Layout, got {type(layout).__name__}")
        require(isinstance(num_blocks, int) and not isinstance(num_blocks, bool) and num_blocks > 0,
                f"num_blocks={num_blocks!r}: must be a positive integer")
        self.layout = layout
        self.num_blocks = num_blocks
        self.block_stride = layout.block_stride
        self.device = resolve_device(device, "device")
        check_views(layout)
        self.nbytes = num_blocks * layout.block_stride
        check_fits(self.nbytes, self.device, what=f"num_blocks={num_blocks} x block_stride={layout.block_stride}")
        try:
            make = torch.zeros if zero else torch.empty
            self.backing = make(self.nbytes, dtype=torch.uint8, device=self.device)
        except (MemoryError, RuntimeError) as e:  # the free-memory check raced or lied
            if not allocation_failed(e):
                raise
            raise KvvizError(f"num_blocks={num_blocks}: allocating {_gib(self.nbytes)} on {self.device} failed "
                             f"({str(e).splitlines()[0]})") from None
        self.blocks = self.backing.view(num_blocks, layout.block_stride)

    @classmethod
    def from_budget(cls, layout: Layout, budget_bytes: int, device: str | torch.device = "auto") -> "Pool":
        """floor(budget / stride) blocks (Layout.num_blocks)."""
        n = layout.num_blocks(budget_bytes)
        require(n > 0, f"budget_bytes={budget_bytes}: smaller than one block stride ({layout.block_stride:,} B); "
                       f"num_blocks would be 0")
        return cls(layout, n, device)

    # ---- lookups -------------------------------------------------------------------------------
    def placement(self, name: str) -> Placement:
        p = self.layout.by_name.get(name)
        if p is None:
            raise KvvizError(f"layer={name!r}: not in this layout")
        return p

    @property
    def data_ptr(self) -> int:
        return self.backing.data_ptr()

    def byte_address(self, block: int, name: str) -> int:
        """Where layer `name`'s page of block `block` starts: base + block * stride + offset."""
        require(0 <= block < self.num_blocks, f"block={block}: outside 0..{self.num_blocks - 1}")
        return self.data_ptr + block * self.block_stride + self.placement(name).offset

    # ---- views ---------------------------------------------------------------------------------
    def page_view(self, name: str) -> torch.Tensor:
        """(num_blocks, page_bytes) uint8: the backing as (num_blocks, stride), columns [offset, offset+page)."""
        p = self.placement(name)
        return self.blocks[:, p.offset:p.end]

    def typed_view(self, name: str) -> torch.Tensor:
        """(num_blocks, page_bytes / dtype_size) in the layer's view dtype (uint8, bfloat16, float32)."""
        p = self.placement(name)
        return self.page_view(name).view(VIEW_DTYPES[p.cache.row_format.view_dtype])

    def row_view(self, name: str) -> torch.Tensor:
        """(num_blocks, rows, row_bytes / dtype_size) over the content region (padding left out).

        Only for formats without a footer: with a footer, a row's payload and its scales are
        `rows * payload_bytes` apart, so a row is not one contiguous run (use payload_view and
        footer_view).
        """
        p = self.placement(name)
        fmt = p.cache.row_format
        if fmt.footer_bytes:
            raise KvvizError(
                f"layer {name!r}: format {fmt.name} keeps its scales in a footer after all rows' payloads, "
                f"so a row is not contiguous; use payload_view/footer_view"
            )
        content = p.cache.rows * fmt.row_bytes
        typed = self.blocks[:, p.offset:p.offset + content].view(VIEW_DTYPES[fmt.view_dtype])
        return typed.unflatten(1, (p.cache.rows, fmt.row_bytes // fmt.dtype_size))

    def _region(self, name: str, region: str) -> tuple[int, int]:
        """[start, end) inside the block of one region ("payload", "footer") of layer `name`'s page,
        as kvviz.formats lays a page out (docs/row-formats.md#page-anatomy)."""
        p = self.placement(name)
        for r in formats.page_regions(p.cache.row_format, p.cache.rows, p.page_bytes):
            if r.name == region:
                return p.offset + r.start, p.offset + r.end
        return p.offset, p.offset  # the format has no such region (a format without footer)

    def payload_view(self, name: str) -> torch.Tensor:
        """(num_blocks, rows, payload_bytes) uint8: every row's payload (the page's first region)."""
        p = self.placement(name)
        lo, hi = self._region(name, "payload")
        return self.blocks[:, lo:hi].unflatten(1, (p.cache.rows, p.cache.row_format.payload_bytes))

    def footer_view(self, name: str) -> torch.Tensor:
        """(num_blocks, rows, footer_bytes) uint8: every row's footer (scales), after all payloads."""
        p = self.placement(name)
        lo, hi = self._region(name, "footer")
        return self.blocks[:, lo:hi].unflatten(1, (p.cache.rows, p.cache.row_format.footer_bytes))

    def stacked_view(self, names, blocks: slice = slice(None)) -> torch.Tensor:
        """(blocks, len(names), page_bytes) uint8: the pages of layers whose offsets are equally
        spaced (one spec of one group in vLLM 0.33's overlay-by-spec tensors, `layer_stride` apart),
        as ONE zero-copy strided view, so a batch of layers is copied or compared in one operation.

        `blocks` is a basic slice of block ids (a step is allowed). KvvizError unless the layers
        have one page size and equally spaced offsets.
        """
        ps = [self.placement(n) for n in names]
        require(ps, "names: give at least one layer")
        page = ps[0].page_bytes
        require(all(p.page_bytes == page for p in ps), f"names: pages of {names!r} differ in size")
        step = ps[1].offset - ps[0].offset if len(ps) > 1 else page
        require(step > 0 and all(b.offset - a.offset == step for a, b in zip(ps, ps[1:])),
                f"names: offsets of {names!r} are not equally spaced")
        start, stop, bstep = blocks.indices(self.num_blocks)
        n = len(range(start, stop, bstep))
        return torch.as_strided(self.backing, (n, len(ps), page), (bstep * self.block_stride, step, 1),
                                start * self.block_stride + ps[0].offset)

    def group_view(self, group: int, blocks: slice = slice(None)) -> torch.Tensor:
        """(blocks, span) uint8: the columns from the group's first page offset to its last page end,
        every layer of the group (and any hole between its pages) in ONE strided view."""
        ps = self.layout.group_placements(group)
        require(bool(ps), f"group={group!r}: not a group of this layout with pages")
        lo, hi = min(p.offset for p in ps), max(p.end for p in ps)
        return self.blocks[blocks, lo:hi]

    def tensor_views(self) -> tuple[TensorView, ...]:
        """Views of the layout's shared tensors (see TensorView), in the layout's order."""
        out = []
        for t in self.layout.tensors:
            if t.layer_stride is None:
                extent = max(self.layout.by_name[n].page_bytes for n in t.layers)
                out.append(TensorView(t, self.blocks[:, t.offset:t.offset + extent]))
            else:
                n = len(t.layers)
                v = self.blocks[:, t.offset:t.offset + n * t.layer_stride].unflatten(1, (n, t.layer_stride))
                out.append(TensorView(t, v))
        return tuple(out)

    def __repr__(self) -> str:
        return (f"Pool({self.layout.planner}, num_blocks={self.num_blocks}, block_stride={self.block_stride}, "
                f"{_gib(self.nbytes)} on {self.device})")


# ---- block ownership ---------------------------------------------------------------------------
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
        require(isinstance(num_blocks, int) and not isinstance(num_blocks, bool) and num_blocks > 0,
                f"num_blocks={num_blocks!r}: must be a positive integer")
        require(isinstance(max_groups, int) and 0 < max_groups < 2**31 - 1,
                f"max_groups={max_groups!r}: must be a positive integer below 2^31 - 1")
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
            require(len(self.groups) < self.max_groups,
                    f"group={group!r}: this BlockPool holds at most max_groups={self.max_groups} groups")
            i = self._ids[group] = len(self.groups)
            self.groups.append(group)
        return i

    def _check_block(self, block: int) -> None:
        require(isinstance(block, int) and not isinstance(block, bool) and 0 <= block < self.num_blocks,
                f"block={block!r}: outside 0..{self.num_blocks - 1}")

    @property
    def num_free(self) -> int:
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
            free = (self.owner_ids[lo:hi] == FREE).nonzero().flatten()[:n - len(out)] + lo
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
            raise KvvizError(f"block {block}: group {group!r} claims it but group {owners[0]!r} owns it "
                             f"(one owner per block id, or the overlaid groups corrupt each other)")
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
                raise KvvizError(f"block {b}: group {group!r} frees it but "
                                 + (f"group {o[0]!r} owns it" if o else "nobody owns it"))
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
        require(assignment in ASSIGNMENTS, f"assignment={assignment!r}: unknown; choose one of {', '.join(ASSIGNMENTS)}")
        bp = cls(num_blocks, max_groups=num_groups)
        owner = torch.full((num_blocks,), FREE, dtype=bp.owner_ids.dtype)
        start = 0
        for g in range(num_groups):  # strided fills: no per-block temporary
            if assignment == "round-robin":
                owner[g::num_groups] = g
            else:
                n = num_blocks // num_groups + (g < num_blocks % num_groups)
                owner[start:start + n] = g
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
