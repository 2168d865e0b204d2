"""A compact extract of vLLM 0.33's own plans across its registry, for per-architecture tests.

Reads ../shared/data/vllm-0.33/registry/registry.json (vLLM's real model construction and planner
run on transformers' default config of each text-generation architecture; see its README) and
writes tests/data/vllm-0.33/registry/: `plans.json` with, per `planned` architecture, the config
it read, the planner settings, each KV cache group's spec summary (kind, block_size,
page_size_bytes, num_kv_heads, head_size, sliding_window, dtype, layer names) and num_blocks plus
the capacity line at each budget; `status.json` with every other architecture's status and error;
and `configs/<architecture>/config.json` for the planned ones.

usage: python scripts/vllm_registry_extract.py [SRC_DIR] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT.parent / "shared" / "data" / "vllm-0.33" / "registry"
OUT = ROOT / "tests" / "data" / "vllm-0.33" / "registry"
SPEC_FIELDS = (
    "block_size",
    "page_size_bytes",
    "real_page_size_bytes",
    "page_size_padded",
    "num_kv_heads",
    "head_size",
    "sliding_window",
    "attention_chunk_size",
    "dtype",
    "shapes",
    "dtypes",
    "state_bytes",
    "mamba_type",
    "mamba_cache_mode",
    "num_prefill_checkpoint_blocks",
    "unpadded_page_size_bytes",
    "max_memory_usage_bytes_per_layer",
)


def _spec_of(case: dict) -> dict[str, dict]:
    """layer name -> its spec summary (from distinct_specs)."""
    out = {}
    for spec in case["distinct_specs"]:
        summary = {"class": spec["class"], **{k: spec[k] for k in SPEC_FIELDS if k in spec}}
        for layer in spec["layers"]:
            out[layer] = summary
    return out


def extract_case(case: dict) -> dict:
    specs = _spec_of(case)
    plan = case["plan"]
    groups = []
    for g in plan["groups"]:
        layer_specs = [specs[name] for name in g["layer_names"]]
        distinct = [json.loads(s) for s in dict.fromkeys(json.dumps(x, sort_keys=True) for x in layer_specs)]
        groups.append(
            {
                "kind": g["kind"],
                "spec_type": g["spec_type"],
                "block_size": g["block_size"],
                "page_size_bytes": g["page_size_bytes"],
                "specs": distinct,
                "layer_names": g["layer_names"],
                "kv_shared_by": g.get("kv_shared_by", {}),
            }
        )
    budgets = {}
    for label, b in plan["budgets"].items():
        entry = {"available_bytes_per_gpu": b["available_bytes_per_gpu"]}
        if "error" in b:
            entry["error"] = b["error"].split(":")[0]
            entry["error_text"] = b["error"]
        else:
            entry["num_blocks"] = b["num_blocks"]
            entry["capacity"] = b["capacity"]
        budgets[label] = entry
    cfg = case["config"]
    return {
        "architecture": case["architecture"],
        "model_type": case.get("model_type"),
        "model_class": case.get("model_class"),
        "config_path": f"configs/{case['architecture']}/config.json",
        "is_hybrid": case.get("is_hybrid(model_config)"),
        "use_mla": case.get("use_mla(model_config)"),
        "settings": {
            k: cfg[k]
            for k in (
                "dtype",
                "cache_dtype",
                "max_model_len",
                "derived_max_model_len",
                "block_size",
                "mamba_block_size",
                "mamba_page_size_padded",
                "max_num_batched_tokens",
                "max_num_seqs",
                "tp_world_size",
                "enable_prefix_caching",
                "mamba_ssm_cache_dtype",
                "cache_config.sliding_window",
                "attention_backends",
            )
            if k in cfg
        },
        "registered_layers": len(case["registered_layers"]),
        "num_cache_layers": case.get("num_cache_layers"),
        "kv_sharing": case.get("kv_sharing", {}),
        "num_groups": plan["num_groups"],
        "bytes_per_block": plan["bytes_per_block"],
        "groups": groups,
        "budgets": budgets,
        "digest": case.get("digest"),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", nargs="?", type=Path, default=SRC)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    data = json.loads((args.src / "registry.json").read_text())
    head = {
        k: data[k]
        for k in (
            "vllm_version",
            "target_device",
            "mode",
            "budgets",
            "budgets_are",
            "max_model_len",
            "max_num_batched_tokens",
            "summary",
        )
        if k in data
    }
    head["source"] = "../shared/data/vllm-0.33/registry/registry.json (scripts/vllm_registry_extract.py)"
    planned, others = {}, {}
    if args.out.exists():
        shutil.rmtree(args.out)
    (args.out / "configs").mkdir(parents=True)
    for case in data["cases"]:
        arch = case["architecture"]
        if case["status"] == "planned":
            planned[arch] = extract_case(case)
            dest = args.out / "configs" / arch
            dest.mkdir()
            shutil.copyfile(args.src / case["config_path"], dest / "config.json")
        else:
            others[arch] = {
                "status": case["status"],
                "model_type_requested": case.get("model_type_requested"),
                "error": case.get("error"),
                "failure": case.get("failure"),
            }
    (args.out / "plans.json").write_text(json.dumps({**head, "cases": planned}, indent=1) + "\n")
    (args.out / "status.json").write_text(json.dumps({**head, "cases": others}, indent=1) + "\n")
    print(f"{args.out}: {len(planned)} planned, {len(others)} not")
    return 0


if __name__ == "__main__":
    sys.exit(main())
