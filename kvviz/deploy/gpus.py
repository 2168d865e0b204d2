"""The accelerators kvviz sizes a deployment for, with their memory as the device reports it.

`GPUS`: each GPU's total memory in bytes as `torch.cuda.get_device_properties(i).total_memory`
(= cudaMemGetInfo's total) reports it, the number vLLM 0.33's `MemorySnapshot.measure()` budgets
from; not NVML's and not the marketing size. Each says whether the byte count is confirmed (CUDA
deviceQuery's exact bytes) or an estimate (torch's repr prints floored MiB, or no reading was
found). `kvviz.deploy.budget` builds the KV budget on these.
"""

from __future__ import annotations

import dataclasses

from kvviz.base.defaults import GIB
from kvviz.base.errors import KvvizError, require

MIB = 2**20


@dataclasses.dataclass(frozen=True)
class GPU:
    """One accelerator: `total_memory` in bytes as torch / cudaMemGetInfo report it."""

    name: str
    total_memory: int
    exact: bool  # False: an estimate (MiB precision, or no reading found)
    source: str
    vendor: str = "NVIDIA"

    @property
    def estimate(self) -> bool:
        """Whether the memory is an estimate (not exact bytes)."""
        return not self.exact

    @property
    def gib(self) -> float:
        """The total memory in GiB."""
        return self.total_memory / GIB

    @property
    def serve_max_num_batched_tokens(self) -> int:
        """`vllm serve`'s max_num_batched_tokens for this device (engine/arg_utils.py
        get_batch_defaults, OPENAI_API_SERVER): 16384 at >= 160 GiB, 8192 at >= 70 GiB unless an
        A100, else 2048 (vLLM reads NVML's total there; no catalogued device is near a threshold)."""
        if self.total_memory >= 160 * GIB:
            return 16384
        if self.total_memory >= 70 * GIB and "A100" not in self.name.upper():
            return 8192
        return 2048

    def label(self) -> str:
        """The GPU's name, marked when its memory is an estimate."""
        return self.name + ("" if self.exact else " (memory is an estimate)")

    def to_json(self) -> dict:
        """The GPU as a JSON object: name, total memory in bytes and GiB, exact or estimate, source and vendor."""
        return {
            "name": self.name,
            "total_memory": self.total_memory,
            "gib": round(self.gib, 4),
            "exact": self.exact,
            "estimate": self.estimate,
            "source": self.source,
            "vendor": self.vendor,
        }


def _mib(n: int) -> int:
    return n * MIB


# Where each figure was read (searched 2026-12 in public issues, pages and code; see
# docs/deploy.md#the-gpu-catalogue). torch's repr prints total_memory // 2**20 ("MB" = floored MiB), so
# a repr gives the bytes to within 1 MiB, and the number drifts by a few MiB with the driver
# (H100 SXM seen as 81082, 81089 and 81090 MiB). Only CUDA deviceQuery's "(N bytes)" is exact.
GPUS: dict[str, GPU] = {
    g.name: g
    for g in (
        GPU(
            "H100",
            85_028_896_768,
            True,
            "H100 80GB HBM3 SXM: CUDA deviceQuery 'Total amount of global memory: 81090 MBytes (85028896768 bytes)' "
            "(driver 12.8); torch repr total_memory=81089MB; drifts a few MiB with driver/CUDA version",
        ),
        # torch repr "_CudaDeviceProperties(name='NVIDIA H200', major=9, minor=0, total_memory=143156MB,
        # multi_processor_count=132, ...)" in a public repository's Modal run notes (src/llm/vllm/vlm/
        # skywork_r1v.py). vLLM 0.33 startup logs on other H200s print "Free memory on device
        # (139.21/139.81 GiB) ... (0.9, 125.83 GiB)", i.e. 143,161-143,172 MiB: a driver's drift of
        # 5-16 MiB. NVML (nvidia-smi) reports 143,771 MiB. No exact byte count was found.
        GPU(
            "H200",
            _mib(143156),
            False,
            "H200 141GB SXM: torch repr total_memory=143156MB, floored MiB (docs/deploy.md#the-gpu-catalogue)",
        ),
        # torch reprs total_memory=182631MB (a public benchmark's output) and 182642MB (the same Modal
        # notes as the H200); pytorch/ao PR #4002 (github.com/pytorch/ao/pull/4002) queries the device:
        # "Total Global Memory: 178.35 GB" (GiB: 182,630-182,640 MiB).
        GPU(
            "B200",
            _mib(182631),
            False,
            "B200: torch reprs total_memory=182631MB and 182642MB; pytorch/ao PR #4002 device query 178.35 GiB "
            "(floored MiB; the lower is used; exact bytes not found)",
        ),
        # No torch / deviceQuery reading of a GB200 was found (only names and SM counts in tests).
        GPU(
            "GB200",
            _mib(188_600),
            False,
            "GB200 (one Blackwell GPU): no reading found; ~184 GiB assumed from B200's torch/marketing ratio "
            "applied to 186 GB HBM3e (an estimate)",
        ),
        # bottlerocket-os/bottlerocket PR #3873 (github.com/bottlerocket-os/bottlerocket/pull/3873),
        # deviceQuery on "NVIDIA A100-SXM4-40GB", driver 12.2 / runtime 11.4.
        GPU(
            "A100-40GB",
            42_298_834_944,
            True,
            "A100-SXM4-40GB: CUDA deviceQuery '40339 MBytes (42298834944 bytes)' (driver 12.2, bottlerocket PR #3873); "
            "older drivers show 40536MB (Paddle's docs)",
        ),
        GPU(
            "A100-80GB",
            84_987_740_160,
            True,
            "A100-SXM4-80GB: CUDA deviceQuery '81051 MBytes (84987740160 bytes)' (driver 12.2, runtime 12.1)",
        ),
        # torch repr "_CudaDeviceProperties(name='NVIDIA L40S', major=8, minor=9, total_memory=45589MB,
        # multi_processor_count=142)" in a public write-up on sharing one GPU between Kubernetes pods.
        GPU("L40S", _mib(45589), False, "L40S: torch repr total_memory=45589MB (floored MiB; exact bytes not found)"),
        # torch repr "_CudaDeviceProperties(name='NVIDIA GeForce RTX 4090', major=8, minor=9,
        # total_memory=24563MB, multi_processor_count=128, ...)" in a public repository's CUDA check output.
        GPU(
            "RTX-4090",
            _mib(24563),
            False,
            "RTX 4090: torch repr total_memory=24563MB (floored MiB; exact bytes not found)",
        ),
        # ROCm/ROCm issue #4203 (github.com/ROCm/ROCm/issues/4203), torch 2.6: "_CudaDeviceProperties(name=
        # 'AMD Instinct MI300X', major=9, minor=4, gcnArchName='gfx942:sramecc+:xnack-', total_memory=196592MB,
        # multi_processor_count=304, ...)"; the same figure in a public Slurm job log (torch 2.3).
        GPU(
            "MI300X",
            _mib(196592),
            False,
            "MI300X: torch-rocm repr total_memory=196592MB (ROCm/ROCm issue #4203; 192 GiB - 16 MiB; floored MiB)",
            vendor="AMD",
        ),
        # No torch reading of an MI325X was found (only its name, gfx942 and "256 GB HBM3E").
        GPU(
            "MI325X",
            _mib(262144 - 16),
            False,
            "MI325X: no reading found; 256 GiB - 16 MiB assumed by analogy with MI300X (an estimate)",
            vendor="AMD",
        ),
    )
}


def _norm(name: str) -> str:
    text = name.strip().upper().replace("_", "-").replace(" ", "-")
    for prefix in ("NVIDIA-", "AMD-INSTINCT-", "AMD-"):
        if text.startswith(prefix):
            text = text[len(prefix) :]
    return text.replace("RTX4090", "RTX-4090").replace("GEFORCE-", "")


_BY_NORM = {_norm(k): g for k, g in GPUS.items()} | {
    "A100-SXM4-40GB": GPUS["A100-40GB"],
    "A100-SXM4-80GB": GPUS["A100-80GB"],
    "H100-80GB-HBM3": GPUS["H100"],
    "H100-SXM": GPUS["H100"],
}


def gpu_spec(gpu: "str | GPU") -> GPU:
    """The catalogued GPU of a name (case and spacing ignored); an unknown name lists the known."""
    if isinstance(gpu, GPU):
        return gpu
    require(isinstance(gpu, str) and gpu.strip(), f"gpu={gpu!r}: give a GPU name; known: {', '.join(GPUS)}")
    found = _BY_NORM.get(_norm(gpu))
    if found is None:
        raise KvvizError(f"gpu={gpu!r}: unknown GPU; known: {', '.join(GPUS)} (or give gpu_memory_gib)")
    return found
