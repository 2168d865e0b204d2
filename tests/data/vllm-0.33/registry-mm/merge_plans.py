import json
import sys

out = {"cases": {}, "failures": {}}
meta = None
for f in sys.argv[2:]:
    try:
        d = json.load(open(f))
    except FileNotFoundError:
        continue
    meta = meta or {k: v for k, v in d.items() if k not in ("cases", "failures")}
    for k, v in d["cases"].items():
        out["cases"][k] = v
        out["failures"].pop(k, None)
    for k, v in d["failures"].items():
        if k not in out["cases"]:
            out["failures"][k] = v
out = {**meta, **out}
json.dump(out, open(sys.argv[1], "w"), indent=1, sort_keys=True)
print(sorted(out["cases"]), sorted(out["failures"]))
# the GDN wrappers: the reference platform is not CUDA, so qwen_gdn_linear_attn.py _resolve_gdn_prefill_backend
# picks triton (no FlashInfer checkpoint alignment): not the H200 plan kvviz models; kept apart, not as cases
off = {}
for k in list(out["cases"]):
    if any("GDN_ATTN" in b for b in out["cases"][k]["settings"]["attention_backends"]):
        off[k] = out["cases"].pop(k)
out["off_target"] = {
    "why": "the reference platform is not CUDA (current_platform.is_cuda() is False), so qwen_gdn_linear_attn.py "
    "_resolve_gdn_prefill_backend picks 'triton', whose GDN layers declare no prefill checkpoint alignment; on an "
    "H200 it picks 'flashinfer' (FLASHINFER_GDN_CHECKPOINT_ALIGNMENT), which _align_hybrid_block_size lcm's into "
    "the attention block: these plans are not the H200's and are not compared",
    "cases": off,
}
json.dump(out, open(sys.argv[1], "w"), indent=1, sort_keys=True)
print("off target:", sorted(off))
