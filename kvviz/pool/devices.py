"""Devices and memory: which torch device a name means, and how much a process may still allocate
on it (free memory, RLIMIT_AS, a cgroup's memory.max), so that a pool is refused in one line
before it is allocated."""

from __future__ import annotations

import mmap
import os
import re
import warnings

import torch

from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import MAX_BUDGET_BYTES, bounded_int, of_type, short_repr
from kvviz.base.text import bytes_label

_DEVICE_RE = re.compile(r"^(auto|cpu|cuda)(?::(\d+))?$")


def resolve_device(name: str | torch.device | None = "auto", what: str = "device") -> torch.device:
    """ "auto" (CUDA when available, else CPU), "cpu", "cuda" or "cuda:N" -> torch.device.

    Unknown strings, and CUDA when this torch sees no GPU (or not that index), raise KvvizError
    naming `what`: the Python argument by default; a command-line tool passes its flag ("--device").
    """
    of_type(what, str, field="what", give="the argument or flag the device came from (a str)")
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
    require(
        i < count,
        f"{what}={name!r}: there {'is' if count == 1 else 'are'} only {count} CUDA device(s) (0..{count - 1})",
    )
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
    out = {
        "MemAvailable": _meminfo_available(),
        "RLIMIT_AS": _address_space_headroom(),
        "cgroup memory.max": _cgroup_headroom(),
    }
    return {k: v for k, v in out.items() if v is not None}


def free_bytes(device: str | torch.device = "auto") -> int | None:
    """Free memory of a device in bytes: torch.cuda.mem_get_info on CUDA; on the CPU the tightest
    of host_memory() (MemAvailable, RLIMIT_AS, cgroup memory.max); None when nothing says."""
    dev = resolve_device(device)
    if dev.type == "cuda":
        return int(torch.cuda.mem_get_info(dev)[0])
    limits = host_memory()
    return min(limits.values()) if limits else None


def check_fits(nbytes: int, device: str | torch.device = "auto", *, what: str = "pool") -> None:
    """Raise KvvizError (requested vs free, bytes and GiB, and which limit) unless `nbytes` fit in
    the device's free memory (free_bytes). `what` names the field the request came from, e.g.
    "num_blocks=100000"."""
    of_type(what, str, field="what", give="the field the request came from (a str)")
    require(
        isinstance(nbytes, int) and not isinstance(nbytes, bool) and nbytes >= 0,
        f"{what}: nbytes={short_repr(nbytes)} must be a non-negative integer",
    )
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
        raise KvvizError(f"{what}: needs {bytes_label(nbytes)} but {dev} has only {bytes_label(free)} {limit}")


def allocation_failed(e: BaseException) -> bool:
    """Whether an exception from torch is an allocator's refusal (out of memory), not a bug."""
    of_type(e, BaseException, field="e", give="an exception")
    if isinstance(e, (MemoryError, torch.OutOfMemoryError)):
        return True
    text = str(e).lower()
    return isinstance(e, RuntimeError) and any(
        s in text
        for s in (
            "can't allocate memory",
            "cannot allocate memory",
            "out of memory",
            "not enough memory",
            "failed to allocate",
        )
    )


HUGE_PAGE = 2**21  # bytes of one transparent huge page (x86-64 and arm64 with 4 KiB base pages)


def host_zeros(nbytes: int) -> torch.Tensor:
    """(nbytes,) uint8 of zeros in host memory, backed by transparent huge pages where the kernel
    offers them (an anonymous mmap with MADV_HUGEPAGE, its start aligned to HUGE_PAGE).

    Why: a freshly allocated pool pays a page fault per 4 KiB page on its first touch, about three
    warm copies of its bytes for a 256 MiB pool; with 2 MiB pages the kernel's zero fill is the
    only cost, and an anonymous mapping is zero already, so no pass of torch's own is needed. The
    tensor keeps the mapping alive (torch.frombuffer holds the buffer); it is unmapped with the
    last view. Pools under one huge page, or a platform without mmap / MADV_HUGEPAGE, get
    torch.zeros (same bytes, same views: every dtype's alignment holds at a page boundary).
    """
    check_fits(bounded_int(nbytes, field="nbytes", low=0, high=MAX_BUDGET_BYTES), "cpu", what=f"nbytes={nbytes:,}")
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if nbytes < HUGE_PAGE or advice is None:
        return torch.zeros(nbytes, dtype=torch.uint8)
    try:
        m = mmap.mmap(-1, nbytes + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    except (OSError, ValueError, AttributeError, OverflowError):
        return torch.zeros(nbytes, dtype=torch.uint8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns about writable buffers; this one is ours alone
        skip = -torch.frombuffer(m, dtype=torch.uint8, count=1).data_ptr() % HUGE_PAGE
        backing = torch.frombuffer(m, dtype=torch.uint8, count=nbytes, offset=skip)
    try:  # the slack around it is never touched, so never resident
        m.madvise(advice, skip, nbytes)
    except OSError:  # THP compiled out or "never": 4 KiB pages, still zero and aligned
        pass
    return backing
