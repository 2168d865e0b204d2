#!/usr/bin/env bash
# The GPU check of kvviz, for a GPU workstation as it is (no network, nothing installed):
#   1. CPU/CUDA byte parity of every kvviz.quant codec (python -m kvviz.tools.quant_parity, 65,536 rows
#      per codec; with pytest importable, also tests/test_parity.py -m cuda)
#   2. clean `kvviz verify` on CUDA: deepseek-v4-pro x {flashmla, flashinfer} x indexer {fp8, mxfp4}
#   3. the three hazards on CUDA (shared-block, zeroer, misread): the JSON must show the damage
#   4. the other CUDA-marked pytest tests (pytest -m cuda; SKIP when pytest is not importable)
#   5. the whole-pool run: verify --budget-gib 26.09 (the published FlashMLA budget) on CUDA
# Each step is timed; a summary table (step, status, seconds, detail) is printed at the end
# whatever happens, and the exit status is non-zero when any step FAILs. Meant to take under
# 4 minutes on one H200 (each step has its own time limit; the summary says when the total is over).
#
#   scripts/gpu_check.sh                 # on the GPU machine
#   scripts/gpu_check.sh --dry-run-cpu   # anywhere: every step on --device cpu with tiny sizes
#                                        # (also GPU_CHECK_DRY_RUN=1); CUDA-only parts report SKIP
#
# Interpreter: the `python3` on PATH when it imports torch (with CUDA, unless a dry run) and
# numpy, used as it is with this checkout on PYTHONPATH; else .venv/bin/python if it has them;
# else the script stops with one line. GPU_CHECK_PYTHON=/path/to/python picks one explicitly.
# Nothing is installed and the network is never used. Logs and JSON go to $GPU_CHECK_OUT, else
# $OUT, else /tmp/gpu_check.
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO" || { echo "gpu_check: cannot cd to $REPO"; exit 2; }

DRY="${GPU_CHECK_DRY_RUN:-0}"
for arg in "$@"; do
  case "$arg" in
    --dry-run-cpu) DRY=1 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "gpu_check: unknown argument $arg (use --dry-run-cpu)"; exit 2 ;;
  esac
done
if [ "$DRY" = 1 ]; then
  DEVICE=cpu; PARITY_ROWS=1024; BLOCKS=8; HAZARD_BLOCKS=8; POOL_GIB=0.01
else
  DEVICE=cuda; PARITY_ROWS=65536; BLOCKS=64; HAZARD_BLOCKS=64; POOL_GIB=26.09
fi
RESULTS="${GPU_CHECK_OUT:-${OUT:-/tmp/gpu_check}}"
mkdir -p "$RESULTS" || { echo "gpu_check: cannot create $RESULTS"; exit 2; }
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
export PIP_NO_INDEX=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONDONTWRITEBYTECODE=1

START=$(date +%s)
ROWS=()
FAILED=0
SUMMARY_DONE=0

record() {  # record STEP STATUS SECONDS DETAIL
  ROWS+=("$1"$'\t'"$2"$'\t'"$3"$'\t'"$4")
  [ "$2" = FAIL ] && FAILED=1
  printf '[gpu_check +%ss] %-26s %-4s %5ss  %s\n' "$(( $(date +%s) - START ))" "$1" "$2" "$3" "$4"
}

summary() {
  [ "$SUMMARY_DONE" = 1 ] && return
  SUMMARY_DONE=1
  {
    echo
    echo "gpu_check summary ($([ "$DRY" = 1 ] && echo "dry run on cpu" || echo "$DEVICE"), $(( $(date +%s) - START )) s, logs in $RESULTS):"
    printf '  %-26s %-6s %8s  %s\n' STEP STATUS SECONDS DETAIL
    local row step status secs detail
    for row in "${ROWS[@]+"${ROWS[@]}"}"; do
      IFS=$'\t' read -r step status secs detail <<<"$row"
      printf '  %-26s %-6s %8s  %s\n' "$step" "$status" "$secs" "$detail"
    done
    local total=$(( $(date +%s) - START ))
    [ "$DRY" != 1 ] && [ "$total" -gt 240 ] && echo "gpu_check: note: took ${total} s, over the 4-minute goal"
    if [ "$FAILED" != 0 ]; then echo "gpu_check: FAILED"; else echo "gpu_check: all steps passed (or skipped)"; fi
  } | tee "$RESULTS/summary.txt"
}
trap 'rc=$?; summary; [ "$FAILED" != 0 ] && [ "$rc" = 0 ] && rc=1; exit $rc' EXIT
trap 'record interrupted FAIL 0 "signal received"; exit 130' INT TERM

TIMEOUT=()
command -v timeout >/dev/null 2>&1 && TIMEOUT=(timeout --kill-after=10)
logname() { printf '%s' "$1" | tr -c 'A-Za-z0-9._-' '_'; }  # a step's name as a file name
run_timed() {  # run_timed LIMIT STEP CMD... -> stdout in $RESULTS/<step>.out, stderr in .err; sets RC, SECS
  local limit=$1 name; name=$(logname "$2"); shift 2
  local t0; t0=$(date +%s.%N)
  if [ ${#TIMEOUT[@]} -gt 0 ]; then "${TIMEOUT[@]}" "$limit" "$@" >"$RESULTS/$name.out" 2>"$RESULTS/$name.err"
  else "$@" >"$RESULTS/$name.out" 2>"$RESULTS/$name.err"; fi
  RC=$?
  SECS=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  [ "$RC" = 124 ] || [ "$RC" = 137 ] && echo "timed out after ${limit}s" >>"$RESULTS/$name.err"
}
err_tail() { tail -c "${2:-200}" "$RESULTS/$(logname "$1").err" 2>/dev/null | tr '\n\t' '  '; }

# ---- 0. interpreter -----------------------------------------------------------------------------
# usable PY: imports torch and numpy and, unless a dry run, sees a CUDA device.
usable() {
  [ -n "$1" ] && command -v "$1" >/dev/null 2>&1 &&
    "$1" -c "import sys, torch, numpy; sys.exit(0 if '$DEVICE' == 'cpu' or torch.cuda.is_available() else 3)" \
      >/dev/null 2>&1
}
PY=""
for cand in "${GPU_CHECK_PYTHON:-}" python3 "$REPO/.venv/bin/python"; do
  if usable "$cand"; then PY=$(command -v "$cand"); break; fi
done
if [ -z "$PY" ]; then
  ROWS=(); SUMMARY_DONE=1
  echo "gpu_check: no usable python: neither \`python3\` on PATH nor .venv/bin/python imports torch$([ "$DEVICE" = cuda ] && echo " with CUDA") and numpy (set GPU_CHECK_PYTHON)"
  exit 2
fi
t0=$(date +%s)
ENV_LINE=$("$PY" - "$DEVICE" "$REPO" <<'EOF' 2>"$RESULTS/environment.err"
import importlib.util, os, sys
import torch
import kvviz
device, repo = sys.argv[1], sys.argv[2]
where = os.path.dirname(os.path.dirname(os.path.abspath(kvviz.__file__)))
if os.path.realpath(where) != os.path.realpath(repo):
    sys.exit(f"kvviz is imported from {where}, not from this checkout {repo}")
dev = (f"CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}" if device == "cuda"
       else "cpu (dry run)")
def importable(m):
    try:
        return importlib.util.find_spec(m) is not None
    except (ImportError, ValueError):
        return False
missing = [m for m in ("pandas", "matplotlib", "pytest", "hypothesis", "tqdm", "transformers", "ipywidgets")
           if not importable(m)]
venv = " (virtual environment)" if sys.prefix != sys.base_prefix else ""
print(f"python {sys.executable}{venv} {sys.version.split()[0]}, torch {torch.__version__}, {dev}; "
      f"kvviz from {where}; not importable: {', '.join(missing) or 'none'}")
EOF
)
rc=$?
if [ $rc -ne 0 ]; then
  record environment FAIL $(( $(date +%s) - t0 )) "$PY: $(err_tail environment 240)"
  exit 1
fi
echo "gpu_check: $ENV_LINE"
echo "$ENV_LINE" >"$RESULTS/environment.txt"
record environment PASS $(( $(date +%s) - t0 )) "$ENV_LINE"
HAVE_PYTEST=0
"$PY" -c 'import pytest' >/dev/null 2>&1 && HAVE_PYTEST=1

# judge KIND FILE RC [EXPECTED_HAZARD] -> prints "PASS|FAIL<TAB>detail" from a verify/parity JSON
judge() {
  "$PY" - "$@" <<'EOF'
import json, sys
kind, path, rc = sys.argv[1], sys.argv[2], int(sys.argv[3])
want = sys.argv[4] if len(sys.argv) > 4 else None
def out(ok, detail):
    print(("PASS" if ok else "FAIL") + "\t" + detail)
    sys.exit(0)
try:
    d = json.load(open(path))
except Exception as e:  # no JSON: the command failed before printing it
    out(False, f"rc={rc}, no JSON ({type(e).__name__})")
if kind == "parity":
    cases = d.get("cases", [])
    bad = [c["case"] for c in cases if not c.get("equal")]
    total = sum(c.get("bytes_compared", 0) for c in cases)
    out(rc == 0 and d.get("equal") is True and cases and not bad,
        f"{len(cases)} cases x {d.get('rows', 0):,} rows, {total:,} B compared"
        + (f"; DIFFER: {', '.join(bad)}" if bad else ": same bytes on cpu and " + str(d.get("device"))))
if "pools" in d:  # separate pools: one report per pool, each must hold; judged as one
    pools = d["pools"]
    if kind == "clean":
        ok = rc == 0 and d.get("ok") is True and all(p.get("clean") is True for p in pools)
        fmts = sorted({f["format"] for p in pools for f in p.get("formats", [])})
        out(ok, f"rc={rc}, {len(pools)} pools, " + ", ".join(f"{p.get('num_blocks', 0):,} blocks" for p in pools)
            + f" on {pools[0].get('device')}, clean={all(p.get('clean') for p in pools)}; {', '.join(fmts)}")
    d = pools[0]
blocks = f"{d.get('num_blocks', 0):,} blocks on {d.get('device')}"
if kind == "clean":
    fmts = ", ".join(f"{f['format']} err/bound {f['max_error_over_bound']:.3g}" if isinstance(f.get('max_error_over_bound'), (int, float))
                     else f"{f['format']} err/bound {f.get('max_error_over_bound')}" for f in d.get("formats", []))
    ok = rc == 0 and d.get("clean") is True and d.get("within_bounds", True) is True and d.get("ok", True) is True
    extra = ""
    if "gb_written" in d:
        extra = f", {d['gb_written']:.2f} GB written" + (f" at {d['gb_per_s']:.1f} GB/s" if "gb_per_s" in d else "")
    elif d.get("seconds"):
        extra = f", {d.get('bytes_written', 0) / 1e9:.2f} GB written in {d['seconds']:.1f} s"
    out(ok, f"rc={rc}, {blocks}, clean={d.get('clean')}{extra}; {fmts}")
# hazard: the run must act the hazard out and its damage must show in the JSON
h = d.get("hazard") or {}
if h.get("name") != want:
    out(False, f"rc={rc}, JSON names hazard {h.get('name')!r}, wanted {want!r}")
victims = d.get("corrupted") or []
if want == "misread":
    m = h.get("misread") or {}
    shown = bool(m.get("rows_wrong")) and not victims
    out(shown and rc in (0, 1), f"rc={rc}, {blocks}: {m.get('rows_wrong')}/{m.get('rows')} rows of {m.get('layer')} "
        f"misread, memory intact={not victims}")
layers = sorted({v.get("layer") for v in victims})
out(bool(victims) and rc in (0, 1), f"rc={rc}, {blocks}: detected, {len(victims)} corrupted pages in "
    f"{len(layers)} layers" if victims else f"rc={rc}, {blocks}: NOT detected (no corrupted pages)")
EOF
}

verify_step() {  # verify_step STEP KIND LIMIT [HAZARD] -- VERIFY_ARGS...  (VERIFY_MODEL: the preset, default deepseek-v4-pro)
  local step=$1 kind=$2 limit=$3 hz=""; shift 3
  if [ "$1" != -- ]; then hz=$1; shift; fi
  shift
  run_timed "$limit" "$step" "$PY" -m kvviz verify --model "${VERIFY_MODEL:-deepseek-v4-pro}" --device "$DEVICE" --json "$@"
  local verdict status detail
  local log; log="$RESULTS/$(logname "$step")"
  verdict=$(judge "$kind" "$log.out" "$RC" $hz 2>>"$log.err")
  status=${verdict%%$'\t'*}; detail=${verdict#*$'\t'}
  if [ "$status" != PASS ] && [ "$status" != FAIL ]; then status=FAIL; detail="rc=$RC, cannot judge the output"; fi
  [ "$status" = FAIL ] && detail="$detail; stderr: $(err_tail "$step" 160)"
  record "$step" "$status" "$SECS" "$detail"
}

# pytest_files FILE... -> the files whose top-level imports all resolve here (hypothesis may be absent)
collectable() {
  "$PY" - "$@" <<'EOF'
import ast, importlib.util, sys
def importable(m):
    try:
        return importlib.util.find_spec(m) is not None
    except (ImportError, ValueError):
        return False
for path in sys.argv[1:]:
    mods = set()
    for node in ast.parse(open(path).read()).body:
        if isinstance(node, ast.Import):
            mods.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            mods.add(node.module.split(".")[0])
    missing = sorted(m for m in mods if m != "__future__" and not importable(m))
    print(("ok " if not missing else "no ") + path + ("" if not missing else " (needs " + ", ".join(missing) + ")"))
EOF
}

pytest_step() {  # pytest_step STEP LIMIT FILE...
  local step=$1 limit=$2; shift 2
  if [ "$HAVE_PYTEST" != 1 ]; then record "$step" SKIP 0 "pytest is not importable by $PY"; return; fi
  local files=() left=() line
  while IFS= read -r line; do
    case "$line" in ok\ *) files+=("${line#ok }") ;; no\ *) left+=("${line#no tests/}") ;; esac
  done < <(collectable "$@")
  local note=""
  [ ${#left[@]} -gt 0 ] && note="; not collected: ${left[*]}"
  if [ ${#files[@]} -eq 0 ]; then record "$step" SKIP 0 "nothing collectable$note"; return; fi
  run_timed "$limit" "$step" "$PY" -m pytest -q -m cuda -p no:cacheprovider -o addopts="" "${files[@]}"
  local log; log="$RESULTS/$(logname "$step")"
  local last; last=$(grep -E "passed|failed|skipped|deselected|error|no tests ran" "$log.out" | tail -1)
  local status=FAIL
  if [ "$RC" = 0 ] || [ "$RC" = 5 ]; then
    status=PASS
    echo "$last" | grep -q " passed" || status=SKIP  # nothing ran (no CUDA: every case skips)
  fi
  record "$step" "$status" "$SECS" "rc=$RC: ${last:-$(tail -1 "$log.out")}$note"
}

# ---- 1. parity ----------------------------------------------------------------------------------
run_timed 150 "parity (quant_parity)" "$PY" -m kvviz.tools.quant_parity --device "$DEVICE" --rows "$PARITY_ROWS" --json
log="$RESULTS/$(logname "parity (quant_parity)")"
verdict=$(judge parity "$log.out" "$RC" 2>>"$log.err")
status=${verdict%%$'\t'*}; detail=${verdict#*$'\t'}
[ "$status" = PASS ] || { status=FAIL; detail="$detail; stderr: $(err_tail "parity (quant_parity)")"; }
record "parity (quant_parity)" "$status" "$SECS" "$detail"
pytest_step "parity (pytest -m cuda)" 150 tests/test_parity.py

# ---- 2. clean runs ------------------------------------------------------------------------------
for backend in flashmla flashinfer; do
  for indexer in mxfp4 fp8; do
    verify_step "verify $backend/$indexer" clean 90 -- --backend "$backend" --indexer "$indexer" --blocks "$BLOCKS"
  done
done

# ---- 2b. one model of every cache kind, and every planner -------------------------------------
# Presets other than DeepSeek V4 are read through transformers' config classes: without
# transformers on this python they are skipped, each saying so.
if "$PY" -c "import transformers" 2>/dev/null; then
  for kind_model in "full+sliding gpt-oss-120b" "chunked llama-4-scout" "kv-sharing gemma-3n-e4b" "mla deepseek-v3" \
                    "mamba1 jamba-v0.1" "mamba2 nemotron-nano-9b-v2" "short-conv lfm2-1.2b" "gdn qwen3-next-80b-a3b" \
                    "kda kimi-linear"; do
    kind=${kind_model%% *}; model=${kind_model#* }
    if ! "$PY" -c "import sys; from kvviz.families import preset_names; sys.exit('$model' not in preset_names())" 2>/dev/null; then
      record "verify $kind ($model)" SKIP 0 "no preset $model"
      continue
    fi
    VERIFY_MODEL=$model verify_step "verify $kind ($model)" clean 90 -- --blocks "$BLOCKS"
  done
  for planner in packed separate; do
    VERIFY_MODEL=qwen3-next-80b-a3b verify_step "verify planner $planner" clean 90 -- --planner "$planner" --blocks "$BLOCKS"
  done
else
  record "verify every kind" SKIP 0 "transformers is not importable by $PY (the non-DeepSeek presets are read through it)"
fi

# ---- 3. hazards ---------------------------------------------------------------------------------
for hazard in shared-block zeroer misread; do
  verify_step "hazard $hazard" hazard 90 "$hazard" -- --backend flashmla --indexer mxfp4 --hazard "$hazard" \
    --blocks "$HAZARD_BLOCKS"
done

# ---- 4. the other CUDA-marked tests -------------------------------------------------------------
others=()
for f in tests/test_*.py; do
  [ "$f" = tests/test_parity.py ] && continue
  grep -qE 'cuda\.is_available|"cuda"|mark\.cuda' "$f" && others+=("$f")
done
pytest_step "pytest -m cuda" 180 "${others[@]}"

# ---- 5. the whole pool --------------------------------------------------------------------------
verify_step "whole pool ${POOL_GIB} GiB" clean 200 -- --backend flashmla --indexer mxfp4 --budget-gib "$POOL_GIB"

exit 0
