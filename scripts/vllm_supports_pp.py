"""Which of vLLM 0.33's registered architectures support pipeline parallel: `_ModelInfo.supports_pp` (the class
implements `SupportsPP`), as `ModelConfig.verify_with_parallel_config` asks it through
`ModelRegistry.is_pp_supported_model` before refusing PP > 1 ("Pipeline parallelism is not supported for this
model. Supported models implement the `SupportsPP` interface.").

Runs ONLY in the throwaway venv (/root/vllm-ref); kvviz never imports it. Each architecture's class is loaded as the
registry loads it (`_LazyRegisteredModel.load_model_cls`: its module imported in this process) and inspected as
the registry inspects it (`_ModelInfo.from_model_cls(cls).supports_pp`, interfaces.supports_pp); an architecture
whose module cannot be imported on this CPU is recorded with its error, never guessed.

usage: VENV/bin/python scripts/vllm_supports_pp.py --out kvviz/vllm/supports_pp.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ns = ap.parse_args(argv)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    import vllm
    from vllm.model_executor.models.registry import ModelRegistry, _ModelInfo

    supports, refuses, unknown = [], [], {}
    for arch in sorted(ModelRegistry.get_supported_archs()):
        try:
            info = _ModelInfo.from_model_cls(ModelRegistry.models[arch].load_model_cls())
        except Exception as e:  # recorded, not guessed
            unknown[arch] = f"{type(e).__name__}: {str(e)[:200]}"
            continue
        (supports if info.supports_pp else refuses).append(arch)
        print(arch, info.supports_pp, file=sys.stderr, flush=True)
    out = {
        "vllm_version": vllm.__version__,
        "how": "scripts/vllm_supports_pp.py: _ModelInfo.from_model_cls(ModelRegistry.models[arch].load_model_cls())"
        ".supports_pp for every architecture of ModelRegistry.get_supported_archs()",
        "supports_pp": supports,
        "no_supports_pp": refuses,
        "not_inspected": unknown,
    }
    with open(ns.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
