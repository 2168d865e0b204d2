"""vLLM 0.33's own KV cache plans of published config.json files and their transformers re-saved forms (issue 39).

Runs ONLY in the throwaway venv of ../shared/tools/README.md (vllm==0.33.0, torch CPU, transformers 5.24);
kvviz never imports it. The plan of one config is scripts/vllm_reference_plans.py's `plan_one` (vLLM's
EngineArgs, the model class built with its real `__init__` on the meta device, every layer's
`get_kv_cache_spec`, `get_kv_cache_configs`, `generate_scheduler_kv_cache_config`, `get_kv_cache_capacity`
at 8 and 40 GiB a GPU, the H200 backends of its `_h200_backends`), unchanged. What this script adds:

* `--resave SRC OUT`: the transformers re-saved form, `AutoConfig.from_pretrained(SRC).save_pretrained(OUT)`,
  which is what a user's checkpoint folder holds after any transformers save (a fine-tune, a merge);
* one process that imports vLLM once and forks a fresh child per rank of every (config, setting): each
  model still gets its own process and its own gloo group, as in vllm_reference_plans.py's `_run_one`,
  without paying vLLM's 20 s import for each of a few hundred plans;
* one output file per setting (`--setting tp1 tp2 tp1-fp8 tp2-fp8`), the cases keyed by the config's
  folder relative to `--root` (`published/<model>`, `resaved/<model>`).

usage: VENV/bin/python scripts/vllm_reference_published.py --root tests/data/vllm-0.33/published \
           --setting tp1 tp2 tp1-fp8 tp2-fp8 [FOLDER ...]     (default: every config folder under the root)
       VENV/bin/python scripts/vllm_reference_published.py --resave SRC_DIR OUT_DIR
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import vllm_reference_plans as ref  # noqa: E402  (the sibling script: plan_one, _one, _free_port)

SETTINGS = {"tp1": (1, "auto"), "tp2": (2, "auto"), "tp1-fp8": (1, "fp8"), "tp2-fp8": (2, "fp8")}
TIMEOUT_S = 900


def resave(src: Path, out: Path) -> None:
    """transformers' own reading and writing of a config folder (the form every later save has)."""
    from transformers import AutoConfig

    out.mkdir(parents=True, exist_ok=True)
    AutoConfig.from_pretrained(str(src)).save_pretrained(str(out))


def _fork_one(folder: Path, label: str, tp: int, kv_cache_dtype: str) -> dict:
    """One (config, setting) in fresh forked children, one per rank in one gloo group; rank 0 writes the
    case (or vLLM's refusal) as vllm_reference_plans._one does."""
    port = ref._free_port()
    with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
        pids = []
        for rank in range(tp):
            pid = os.fork()
            if pid == 0:  # the child: plan, write, and leave without running the parent's atexit hooks
                code = 0
                try:
                    devnull = os.open(os.devnull, os.O_WRONLY)
                    os.dup2(devnull, 1)
                    ref._one(folder, label, Path(tmp.name), tp, rank, port, kv_cache_dtype)
                except BaseException:  # a non-zero rank's failure: rank 0 records vLLM's refusal
                    code = 1
                os._exit(code)
            pids.append(pid)
        deadline = time.time() + TIMEOUT_S
        for pid in pids:
            while True:
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                if time.time() > deadline:
                    os.kill(pid, 9)
                    os.waitpid(pid, 0)
                    break
                time.sleep(0.2)
        try:
            return json.loads(Path(tmp.name).read_text())
        except ValueError:
            return {"failure": {"config_path": label, "error": "no result (a rank died or timed out)"}}


def _folders(root: Path, given: list[str]) -> list[Path]:
    if given:
        return [Path(g).resolve() for g in given]
    return sorted(p.parent for p in root.glob("*/*/config.json"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="*")
    ap.add_argument("--root", default="tests/data/vllm-0.33/published")
    ap.add_argument("--setting", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    ap.add_argument("--resave", nargs=2, metavar=("SRC", "OUT"))
    ns = ap.parse_args(argv)
    if ns.resave:
        resave(Path(ns.resave[0]), Path(ns.resave[1]))
        return 0
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    ref._hide_unloadable_torchvision()
    import torch
    import transformers
    import vllm

    torch.set_num_threads(1)  # no op runs on real tensors; one thread keeps the forks clean
    ref._h200_backends()  # the platform answers, set once and inherited by every child
    root = Path(ns.root).resolve()
    for setting in ns.setting:
        tp, kv = SETTINGS[setting]
        out_path = root / f"plans-{setting}.json"
        previous = json.loads(out_path.read_text()) if out_path.is_file() else {"cases": {}, "failures": {}}
        cases, failures = previous["cases"], previous["failures"]
        for folder in _folders(root, ns.folders):
            key = str(folder.relative_to(root))
            ref.BACKEND_REQUESTS.clear()
            result = _fork_one(folder, key + "/config.json", tp, kv)
            cases.pop(key, None)
            failures.pop(key, None)
            if "case" in result:
                cases[key] = result["case"]
                print(f"{setting} {key}: planned, {result['case']['num_groups']} groups", file=sys.stderr)
            else:
                failures[key] = result["failure"]
                print(f"{setting} {key}: FAILED {result['failure']['error'][:300]}", file=sys.stderr)
        out = {
            "vllm_version": vllm.__version__,
            "runtime": {
                "torch": torch.__version__,
                "transformers": transformers.__version__,
                "torchvision": os.environ["KVVIZ_REF_TORCHVISION"],
            },
            "target_device": "NVIDIA H200 (SM90): attention backends as CudaPlatform picks them there "
            "(scripts/vllm_reference_plans.py _h200_backends)",
            "budgets": ref.BUDGETS,
            "budgets_are": "KV-cache memory available on EACH GPU (rank)",
            "max_model_len": "min(32768, the model's derived maximum)",
            "max_num_batched_tokens": ref.MNBT,
            "tensor_parallel_size": tp,
            "kv_cache_dtype": kv,
            "how": "scripts/vllm_reference_published.py: vllm_reference_plans.plan_one in forked children, one per "
            "rank in one gloo group (fresh ones per config and setting)",
            "cases": dict(sorted(cases.items())),
            "failures": dict(sorted(failures.items())),
        }
        out_path.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
