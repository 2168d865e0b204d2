#!/usr/bin/env bash
# One check for a lent GPU machine (fresh, nothing installed), well under 5 minutes:
#   1. a .venv that sees a CUDA torch (the system's, when it has one; else pip install -e .)
#   2. kvviz verify on CUDA: DeepSeek-V4-Pro x {flashmla, flashinfer} x indexer {fp8, mxfp4},
#      a few thousand blocks each (clean: no corruption, decode errors within the bounds)
#   3. the three hazards on CUDA (shared-block, zeroer, misread): the damage must show
#   4. the CUDA cases of tests/test_pool.py and tests/test_verify.py (if pytest is importable)
#   5. benchmarks/bench_pool.py --device cuda
# Prints a summary; exits non-zero when any step fails. Results (JSON, logs) go to $OUT
# (default /tmp/gpu_check). For a dry run elsewhere: GPU_CHECK_DEVICE=cpu GPU_CHECK_BLOCKS=64.
set -u -o pipefail
cd "$(dirname "$0")/.."

DEVICE="${GPU_CHECK_DEVICE:-cuda}"
BLOCKS="${GPU_CHECK_BLOCKS:-3000}"
HAZARD_BLOCKS="${GPU_CHECK_HAZARD_BLOCKS:-64}"
BENCH_GIB="${GPU_CHECK_BENCH_GIB:-4}"
RESULTS="${OUT:-/tmp/gpu_check}"
mkdir -p "$RESULTS"
START=$(date +%s)
SUMMARY=()
FAILED=0

log() { echo "[gpu_check +$(( $(date +%s) - START ))s] $*"; }
record() {  # record NAME STATUS DETAIL
  SUMMARY+=("$(printf '%-34s %-4s %s' "$1" "$2" "$3")")
  [ "$2" = "ok" ] || FAILED=1
}

# ---- 1. environment ---------------------------------------------------------------------------
# usable PY: imports torch and kvviz, and sees CUDA when the check runs on CUDA.
usable() {
  command -v "$1" >/dev/null 2>&1 &&
    "$1" -c "import torch, kvviz.verify; assert '$DEVICE' == 'cpu' or torch.cuda.is_available()" >/dev/null 2>&1
}
if [ "$DEVICE" != cpu ] && ! { [ -e /dev/nvidia0 ] || nvidia-smi -L >/dev/null 2>&1; }; then
  echo "gpu_check: no NVIDIA GPU on this machine (use GPU_CHECK_DEVICE=cpu for a dry run)"; exit 1
fi
PY=.venv/bin/python
if ! usable "$PY"; then
  VENV=.venv
  [ -e .venv ] && VENV=.venv-cuda  # never touch an existing .venv (it may be someone's CPU venv)
  if [ -x "$VENV/bin/python" ] && usable "$VENV/bin/python"; then
    PY=$VENV/bin/python
  elif python3 -c 'import torch; assert torch.cuda.is_available()' >/dev/null 2>&1; then
    log "system python3 has a CUDA torch: $VENV with --system-site-packages, kvviz without deps"
    PY=$VENV/bin/python
    if ! python3 -m venv --system-site-packages "$VENV"; then
      log "python3 -m venv failed (no ensurepip?): using the system python3 with PYTHONPATH=$PWD"
      PY=python3
      export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
    elif ! $PY -m pip install -q --no-deps --no-build-isolation -e . ; then
      log "pip could not install kvviz (offline?): putting the repository on the venv's path instead"
      site=$($PY -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
      echo "$PWD" > "$site/kvviz-src.pth"
    fi
    for mod in numpy pandas matplotlib; do
      $PY -c "import $mod" >/dev/null 2>&1 || $PY -m pip install -q "$mod" \
        || log "warning: $mod is missing and could not be installed"
    done
  else
    log "no CUDA torch system-wide: python3 -m venv $VENV && pip install -e ."
    PY=$VENV/bin/python
    python3 -m venv "$VENV" && $PY -m pip install -q -e . || { echo "gpu_check: could not build $VENV"; exit 1; }
  fi
fi
if ! usable "$PY"; then echo "gpu_check: $PY cannot import torch + kvviz (or sees no CUDA for --device $DEVICE)"; exit 1; fi
log "python: $PY"
$PY - <<EOF | tee "$RESULTS/env.txt"
import torch, kvviz.pool as p
d = p.resolve_device("$DEVICE")
print("torch", torch.__version__, "cuda", torch.version.cuda, "device", d,
      torch.cuda.get_device_name(d) if d.type == "cuda" else "cpu", "free", p.free_bytes(d))
EOF
if [ $? -eq 0 ]; then record "environment ($DEVICE)" ok "$(tail -1 "$RESULTS/env.txt")"
else record "environment ($DEVICE)" FAIL "no $DEVICE device"; fi

# kvviz verify ... --json > file; check exit status and the JSON's verdict.
verify_step() {  # verify_step NAME TIMEOUT ARGS...
  local name=$1 limit=$2; shift 2
  local out="$RESULTS/$name.json" t0=$(date +%s)
  timeout "$limit" $PY -m kvviz verify --model deepseek-v4-pro --device "$DEVICE" --json "$@" \
      >"$out" 2>"$RESULTS/$name.err"
  local rc=$? dt=$(( $(date +%s) - t0 ))
  local detail
  detail=$($PY - "$out" <<'EOF' 2>/dev/null
import json, sys
d = json.load(open(sys.argv[1]))
h = d["hazard"]
fmt = ", ".join(f"{f['format']} err/bound {f['max_error_over_bound'] if isinstance(f['max_error_over_bound'], str) else round(f['max_error_over_bound'], 3)}" for f in d["formats"])
extra = f"{len(d['corrupted'])} victims" if h and h["name"] != "misread" else (
    f"{h['misread']['rows_wrong']}/{h['misread']['rows']} rows misread" if h else f"{len(d['corrupted'])} corrupted; {fmt}")
print(f"{d['num_blocks']} blocks on {d['device']}, {d['bytes_written']:,} B, {extra}")
EOF
)
  if [ $rc -eq 0 ]; then record "$name" ok "${dt}s: $detail"
  else record "$name" FAIL "rc=$rc ${dt}s: $(tail -c 300 "$RESULTS/$name.err" | tr '\n' ' ') $detail"; fi
  log "$name: rc=$rc (${dt}s)"
}

# ---- 2. clean runs ----------------------------------------------------------------------------
for backend in flashmla flashinfer; do
  for indexer in fp8 mxfp4; do
    verify_step "verify-$backend-$indexer" 120 --backend "$backend" --indexer "$indexer" --blocks "$BLOCKS"
  done
done

# ---- 3. hazards -------------------------------------------------------------------------------
for hazard in shared-block zeroer misread; do
  verify_step "hazard-$hazard" 60 --hazard "$hazard" --blocks "$HAZARD_BLOCKS"
done

# ---- 4. the tests' CUDA cases -----------------------------------------------------------------
if $PY -c 'import pytest, hypothesis' >/dev/null 2>&1; then
  t0=$(date +%s)
  timeout 120 $PY -m pytest -q -p no:cacheprovider tests/test_pool.py tests/test_verify.py -k cuda \
    >"$RESULTS/pytest.txt" 2>&1
  rc=$?
  record "pytest (cuda cases)" "$([ $rc -eq 0 ] && echo ok || echo FAIL)" \
    "$(( $(date +%s) - t0 ))s: $(tail -1 "$RESULTS/pytest.txt")"
else
  record "pytest (cuda cases)" ok "skipped: pytest/hypothesis not importable"
fi

# ---- 5. benchmark -----------------------------------------------------------------------------
t0=$(date +%s)
timeout 120 $PY benchmarks/bench_pool.py --device "$DEVICE" --gib "$BENCH_GIB" --verify-blocks "$BLOCKS" \
  >"$RESULTS/bench_pool.txt" 2>&1
rc=$?
cat "$RESULTS/bench_pool.txt"
record "bench_pool ($DEVICE, $BENCH_GIB GiB)" "$([ $rc -eq 0 ] && echo ok || echo FAIL)" \
  "$(( $(date +%s) - t0 ))s: $(grep -m1 '^ratio' "$RESULTS/bench_pool.txt")"

# ---- summary ----------------------------------------------------------------------------------
echo
echo "gpu_check summary ($(( $(date +%s) - START ))s, results in $RESULTS):"
printf '  %s\n' "${SUMMARY[@]}" | tee "$RESULTS/summary.txt"
if [ $FAILED -ne 0 ]; then echo "gpu_check: FAILED"; exit 1; fi
echo "gpu_check: all ok"
