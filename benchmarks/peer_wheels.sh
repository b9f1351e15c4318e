#!/usr/bin/env bash
# The optional peers' wheels for the device, which has no network, laid out as
# benchmarks/record.sh's quack-a, quack-b and liger stages take them (run here,
# from the repository's root; the three folders are git-ignored):
#
#   .whl-quack/a  one half of the CUTLASS DSL's CUDA 13 wheel (cu13.whl.part-aa)
#                 and the small wheels that quack needs
#   .whl-quack/b  the other half (cu13.whl.part-ab), the whole wheel's sha256
#                 (cu13.sha256), quack itself, and in ifmissing/ the DSL's own
#                 dependencies, which quack-b installs only where the device lacks them
#   .whl          Liger-Kernel (pure Python, on the device's torch and Triton)
#   .whl-tests    the wheels of pyproject.toml's test extra and their dependencies
#                 (DIR/tests where WHEELS=DIR has that folder, else downloaded),
#                 with requirements.txt naming the extra:
#                 benchmarks/on_device.sh installs what the device lacks, so that no GPU
#                 test skips for want of nbclient or jsonschema
#
# Each folder travels in one device call, whose carry and working tree together
# stay under 64 MiB: a and b are balanced and their sizes printed beside the tree's.
#
#   bash benchmarks/peer_wheels.sh                 # download with pip, then lay out
#   WHEELS=DIR bash benchmarks/peer_wheels.sh      # lay out the wheels already in DIR (and DIR/tests)
#
# PART_BYTES (default 46000000) is the size of the large wheel's first part.
set -euo pipefail
cd "$(dirname "$0")/.."
PART_BYTES=${PART_BYTES:-46000000}
DEST=${DEST:-$PWD}
# The device's Python and platform, and the versions results/ were recorded with
DEVICE_PLATFORM=(--only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64)
QUACK_WHEELS="quack-kernels==0.6.5 nvidia-cutlass-dsl==4.8.1 nvidia-cutlass-dsl-libs-base==4.8.1
  nvidia-cutlass-dsl-libs-core==4.8.1 nvidia-cutlass-dsl-libs-cu13==4.8.1 apache-tvm-ffi torch-c-dlpack-ext
  cuda-bindings protobuf cuda-pathfinder"
LIGER_WHEEL="liger-kernel==0.8.5"

if [ -z "${WHEELS:-}" ]; then
  WHEELS=$(mktemp -d)
  trap 'rm -rf "$WHEELS"' EXIT
  # shellcheck disable=SC2086
  python3 -m pip download -q --no-deps "${DEVICE_PLATFORM[@]}" -d "$WHEELS" $QUACK_WHEELS
  python3 -m pip download -q --no-deps -d "$WHEELS" "$LIGER_WHEEL"
fi

one() {  # the one wheel in $WHEELS whose name starts with $1
  local found=("$WHEELS"/"$1"-*.whl)
  [ -f "${found[0]}" ] && [ ${#found[@]} -eq 1 ] || { echo "peer_wheels.sh: no single $1 wheel in $WHEELS" >&2; exit 2; }
  echo "${found[0]}"
}

a=$DEST/.whl-quack/a b=$DEST/.whl-quack/b
rm -rf "$DEST/.whl-quack" "$DEST/.whl"
mkdir -p "$a" "$b/ifmissing" "$DEST/.whl"

large=$(one nvidia_cutlass_dsl_libs_cu13)
(cd "$(dirname "$large")" && sha256sum "$(basename "$large")") > "$b/cu13.sha256"
split -b "$PART_BYTES" -a 2 "$large" "$a/cu13.whl.part-"
[ -f "$a/cu13.whl.part-ab" ] && [ ! -f "$a/cu13.whl.part-ac" ] \
  || { echo "peer_wheels.sh: $(basename "$large") does not split in two parts of $PART_BYTES bytes" >&2; exit 2; }
mv "$a/cu13.whl.part-ab" "$b/"

for name in apache_tvm_ffi nvidia_cutlass_dsl nvidia_cutlass_dsl_libs_base nvidia_cutlass_dsl_libs_core \
            torch_c_dlpack_ext; do
  cp "$(one "$name")" "$a/"
done
cp "$(one quack_kernels)" "$b/"
for name in cuda_bindings protobuf cuda_pathfinder; do
  cp "$(one "$name")" "$b/ifmissing/"
done
cp "$(one liger_kernel)" "$DEST/.whl/"

# The test extra, after the peers' wheels have all been found
rm -rf "$DEST/.whl-tests"; mkdir -p "$DEST/.whl-tests"
python3 -c "import tomllib; print(*tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['test'], sep='\n')" \
  > "$DEST/.whl-tests/requirements.txt"
if [ -d "$WHEELS/tests" ]; then
  cp "$WHEELS"/tests/* "$DEST/.whl-tests/"
else
  python3 -m pip download -q "${DEVICE_PLATFORM[@]}" -d "$DEST/.whl-tests" -r "$DEST/.whl-tests/requirements.txt"
fi

tree=$(git ls-files -z 2>/dev/null | du -cb --files0-from=- 2>/dev/null | tail -n 1 | cut -f1 || echo 0)
for dir in "$a" "$b" "$DEST/.whl" "$DEST/.whl-tests"; do
  printf '%s: %s MiB\n' "${dir#"$DEST"/}" "$(( $(du -sb "$dir" | cut -f1) / 1048576 ))"
done
printf 'tracked tree: %s MiB (a call carries at most 64 MiB with it: a alone, then b with .whl; .whl-tests with tests-par)\n' $(( tree / 1048576 ))
