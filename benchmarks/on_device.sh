#!/usr/bin/env bash
# Runs checking stages on a GPU machine, each with a time limit, logs under $OUT.
#   bash benchmarks/on_device.sh tests-par        # then tests-huge, then tests-sanitizer: a call each
#   bash benchmarks/on_device.sh "stress memcheck-stress"   # several stages in one call, in turn
# tests-fast: the GPU suite but for the >2^31-element and compute-sanitizer tests
# (about 10 minutes since the halves and the backward: in two calls, tests-core
# then tests-ops, each within one device call);
# tests-par: the same, in parallel pytest-xdist workers (WORKERS, default 12) on
# the one GPU: the suite is bound by its float64 references on the CPU;
# tests-huge: the above-2^31-element tests, one at a time (three workers each
# holding tens of GB ran out of the H200's 140 GB, 2026-12-01; 14 of them need
# the H200's 139 GB and skip on an 80 GB H100);
# tests-sanitizer: the compute-sanitizer tests in SANITIZER_WORKERS (default 8)
# workers; with 200 s they were cut at 22 of 25 on an H100 (2026-12-06), so each
# of these two stages takes a call of its own.
# (Neither beside tests-par: one above-2^31 test holds 64 GB, and on an 80 GB H100 the
# suite's workers and the sanitizers' processes then ran out of memory, 2026-12-06.)
# stress: benchmarks/stress.py (threads x streams x random
# shapes, layouts and variants) for $STRESS_SECONDS (default 150);
# memcheck-stress: a sample of those cases under compute-sanitizer memcheck.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 CUPY_CACHE_DIR=${CUPY_CACHE_DIR:-/tmp/cupy-cache}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
for stage in $1; do
  echo "=== $stage $(date -u +%FT%TZ)"
  case $stage in
    tests-fast) timeout 560 python3 -m pytest -q -rs -m gpu tests -k "not above_2_to and not sanitizer" -p no:cacheprovider 2>&1 | tee "$OUT/tests-fast.log" | tail -30 ;;
    tests-core) timeout 560 python3 -m pytest -q -rs -m gpu tests -k "not above_2_to and not sanitizer" -p no:cacheprovider \
                  --ignore tests/test_single_read_dtypes_gpu.py --ignore tests/test_backward_gpu.py --ignore tests/test_torch_autograd_gpu.py \
                  2>&1 | tee "$OUT/tests-core.log" | tail -30 ;;
    tests-ops) timeout 560 python3 -m pytest -q -rs -m gpu tests/test_single_read_dtypes_gpu.py tests/test_backward_gpu.py tests/test_torch_autograd_gpu.py \
                 -k "not above_2_to and not sanitizer" -p no:cacheprovider 2>&1 | tee "$OUT/tests-ops.log" | tail -30 ;;
    tests-par) timeout ${PAR_LIMIT:-560} python3 -m pytest -q -rs -n ${WORKERS:-12} -m gpu tests -k "not above_2_to and not sanitizer" -p no:cacheprovider \
                 2>&1 | tee "$OUT/tests-par.log" | tail -30 ;;
    tests-huge) timeout 560 python3 -m pytest -q -rs --durations=10 -m gpu tests -k "above_2_to" -p no:cacheprovider \
                 2>&1 | tee "$OUT/tests-huge.log" | tail -30 ;;
    tests-sanitizer) timeout 560 python3 -m pytest -q -rs --durations=10 -n ${SANITIZER_WORKERS:-8} -m gpu tests -k "sanitizer" \
                 -p no:cacheprovider 2>&1 | tee "$OUT/tests-sanitizer.log" | tail -30 ;;
    tests-all) timeout 560 python3 -m pytest -q -rs -m gpu tests -p no:cacheprovider 2>&1 | tee "$OUT/tests-all.log" | tail -40 ;;
    stress) timeout $(( ${STRESS_SECONDS:-150} + 60 )) python3 benchmarks/stress.py --seconds "${STRESS_SECONDS:-150}" --threads 8 --json "$OUT/stress.json" 2>&1 | tail -8 ;;
    memcheck-stress) timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 python3 benchmarks/stress.py --cases 15 --threads 2 --seed 20261130 --max-elements 2000000 --json "$OUT/stress-memcheck.json" > "$OUT/stress-memcheck.log" 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|cases" "$OUT/stress-memcheck.log" | tail -3 ;;
    tune) timeout 300 python3 benchmarks/tune.py --out "$OUT" 2>&1 | tee "$OUT/tune.log" | grep -v "^$" ;;
    *) echo "unknown stage $stage" ;;
  esac
done
