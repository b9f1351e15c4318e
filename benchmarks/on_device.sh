#!/usr/bin/env bash
# Runs stages on the lent H200, each with a time limit, logs under $OUT.
#   bash benchmarks/on_device.sh "tests-fast tune tests-slow"
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 CUPY_CACHE_DIR=/tmp/cupy-cache
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
for stage in $1; do
  echo "=== $stage $(date -u +%FT%TZ)"
  case $stage in
    tests-fast) timeout 240 python3 -m pytest -q -m gpu tests -k "not above_2_to and not sanitizer" -p no:cacheprovider 2>&1 | tee "$OUT/tests-fast.log" | tail -30 ;;
    tests-slow) timeout 420 python3 -m pytest -q -m gpu tests -k "above_2_to or sanitizer" -p no:cacheprovider 2>&1 | tee "$OUT/tests-slow.log" | tail -30 ;;
    tests-all) timeout 560 python3 -m pytest -q -rs -m gpu tests -p no:cacheprovider 2>&1 | tee "$OUT/tests-all.log" | tail -40 ;;
    tune) timeout 300 python3 benchmarks/tune.py --out "$OUT/tune.json" 2>&1 | tee "$OUT/tune.log" | grep -v "^$" ;;
    *) echo "unknown stage $stage" ;;
  esac
done
