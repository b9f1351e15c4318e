#!/usr/bin/env bash
# Runs checking stages on a GPU machine, each with a time limit, logs under $OUT.
# The GPU suite takes three device calls, in this order (the first carrying .whl-tests,
# laid out here by benchmarks/peer_wheels.sh: the test extra's wheels, installed where
# the device lacks them into a virtual environment over its own packages, which later
# calls on the same machine keep using):
#   OUT=$OUT bash benchmarks/on_device.sh tests-par
#   OUT=$OUT bash benchmarks/on_device.sh tests-huge
#   OUT=$OUT bash benchmarks/on_device.sh tests-sanitizer
# and a fourth for the tests that need no GPU, run where one is (torch on CUDA, a driver,
# the device's NVRTC and no network: what CI on a CPU machine does not see):
#   OUT=$OUT bash benchmarks/on_device.sh tests-cpu
# Several stages in one call run in turn:  bash benchmarks/on_device.sh "stress memcheck-stress"
#
# tests-par: the suite but for the above-2^31-element and compute-sanitizer tests, in
#   WORKERS pytest-xdist workers (default 12) on the one GPU, within PAR_LIMIT seconds
#   (default 560): the suite is bound by its float64 references on the CPU.
# tests-huge: the above-2^31-element tests, one at a time: one holds up to 64 GB, and
#   three at once ran out of the H200's 140 GB (2026-12-01); 14 of them need the
#   H200's 139 GB and skip on an 80 GB H100.
# tests-sanitizer: the compute-sanitizer tests in SANITIZER_WORKERS workers (default 8);
#   with 200 s they were cut at 22 of 25 on an H100 (2026-12-06), hence a call of their own.
# tests-cpu: the tests not marked gpu, in WORKERS workers (148 s at 16 on an H100, 2026-12-07).
# Neither of the last two beside tests-par: on an 80 GB H100 the suite's workers and the
# sanitizers' processes then ran out of memory (2026-12-06).
# stress: benchmarks/stress.py (threads x streams x random shapes, layouts and variants)
#   for $STRESS_SECONDS (default 150);
# memcheck-stress: a sample of those cases under compute-sanitizer memcheck.
# tune: benchmarks/tune.py's search, results under $OUT.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 CUPY_CACHE_DIR=${CUPY_CACHE_DIR:-/tmp/cupy-cache}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
# The test extra, where a call carried .whl-tests: a virtual environment that sees the device's own
# packages (its python3 is itself a virtual environment, whose packages a .pth file adds)
# and installs only what they lack.
TESTS_ENV=/tmp/softmax-lab-tests
site_of() { "$1" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"; }
if [ -d .whl-tests ] && [ ! -x "$TESTS_ENV/bin/python3" ]; then
  python3 -m venv --without-pip --system-site-packages "$TESTS_ENV" \
    && site_of python3 > "$(site_of "$TESTS_ENV/bin/python3")/device.pth" \
    && "$TESTS_ENV/bin/python3" -m pip install -q --no-index --find-links .whl-tests -r .whl-tests/requirements.txt \
    || { echo "on_device.sh: the test extra did not install from .whl-tests; the tests that need it skip"; rm -rf "$TESTS_ENV"; }
fi
[ -x "$TESTS_ENV/bin/python3" ] && export PATH=$TESTS_ENV/bin:$PATH
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$OUT/gpu.txt"

# suite NAME SECONDS MARKS PYTEST-ARGS...: the tests of those marks chosen by the arguments, log in $OUT/NAME.log.
suite() {
  local name=$1 seconds=$2 marks=$3; shift 3
  timeout "$seconds" python3 -m pytest -q -rs --durations=10 -m "$marks" -p no:cacheprovider "$@" 2>&1 \
    | tee "$OUT/$name.log" | tail -30
}

for stage in $1; do
  echo "=== $stage $(date -u +%FT%TZ)"
  case $stage in
    tests-par) suite tests-par "${PAR_LIMIT:-560}" gpu -n "${WORKERS:-12}" tests -k "not above_2_to and not sanitizer" ;;
    tests-huge) suite tests-huge 560 gpu tests -k "above_2_to" ;;
    tests-sanitizer) suite tests-sanitizer 560 gpu -n "${SANITIZER_WORKERS:-8}" tests -k "sanitizer" ;;
    tests-cpu) suite tests-cpu 560 "not gpu" -n "${WORKERS:-12}" tests ;;
    stress) timeout $(( ${STRESS_SECONDS:-150} + 60 )) python3 benchmarks/stress.py --seconds "${STRESS_SECONDS:-150}" --threads 8 --json "$OUT/stress.json" 2>&1 | tail -8 ;;
    memcheck-stress) timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 python3 benchmarks/stress.py --cases 15 --threads 2 --seed 20261130 --max-elements 2000000 --json "$OUT/stress-memcheck.json" > "$OUT/stress-memcheck.log" 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|cases" "$OUT/stress-memcheck.log" | tail -3 ;;
    tune) timeout 300 python3 benchmarks/tune.py --out "$OUT" 2>&1 | tee "$OUT/tune.log" | grep -v "^$" ;;
    *) echo "unknown stage $stage (tests-par tests-huge tests-sanitizer tests-cpu stress memcheck-stress tune)"; exit 2 ;;
  esac
done
