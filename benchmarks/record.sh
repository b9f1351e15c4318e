#!/usr/bin/env bash
# Records results/ on a GPU machine, stage by stage; each stage fits one 10-minute
# device call, and no stage leaves more than 4 files (each well under 16 MiB) in
# $OUT, so two stages per call stay within 8:
#
#   bash benchmarks/record.sh info bench         # bench.json bench.log bench_time.png   (~2 min)
#   bash benchmarks/record.sh sweep              # sweep.json sweep.log sweep.png grid.png (~5 min)
#   bash benchmarks/record.sh profile            # profile.json profile.log traffic.png   (~3 min)
#   bash benchmarks/record.sh profile-bf16       # profile_bf16.json .log: the same in bf16 (~2 min)
#   bash benchmarks/record.sh profile-rows       # profile_rows.json ... traffic_rows.png  (~6 min)
#   bash benchmarks/record.sh bench-bf16         # bench_bf16.json .log bench_time_bf16.png: bf16 softmax, log_softmax
#   bash benchmarks/record.sh bench-backward     # bench_backward.json .log bench_time_backward.png: both backward
#                                                #   ops in bf16 and fp32, against the two-read, one-write floor
#   bash benchmarks/record.sh sweep-bf16         # sweep_bf16.json .log sweep_bf16.png grid_bf16.png (the grid, bf16)
#   bash benchmarks/record.sh table              # dtype_op.json .log .txt bench_time_dtype_op.png: every dtype and
#                                                #   op at 4096 x 393216, auto and the peers / the floor, one run
#                                                #   (12 runs: 40 s on the H200 without quack, 2026-11-30)
#   bash benchmarks/record.sh table-vocab        # dtype_op_151936.json .log .txt: the same at 4096 x 151936
#   bash benchmarks/record.sh context            # context.json .log context.png: a bf16 softmax after the GEMM
#                                                #   of its logits (an LM head), interleaved rounds, clocks and power
#   bash benchmarks/record.sh liger loss         # loss.json .log .txt: cross_entropy and cross_entropy_grad, bf16
#                                                #   and fp32, the issue's vocabularies, against their floors and peers
#   bash benchmarks/record.sh loss-decode        # loss_decode.json .log .txt: the loss ops at 8-64 rows per call in
#                                                #   loops of 300 (--loop), host included, beside torch, quack, Liger
#   bash benchmarks/record.sh profile-loss       # loss_profile.json .log: ncu's passes of cross_entropy_grad, bf16
#   bash benchmarks/record.sh backward-halves    # backward_halves.json .log .txt: both backward ops in bf16 and fp16
#                                                #   at issue 49's shapes and others not tuned on, auto beside
#                                                #   cluster_row, single_read and quack, ÷ the floor (~2 min)
#   bash benchmarks/record.sh decode             # decode.json .log .txt host.json: 1-64 rows of a vocabulary, softmax
#                                                #   and its backward, per call in loops of 300 calls (--loop), with the
#                                                #   peers; then host time per call on 8 x 1024 beside torch.softmax's
#   bash benchmarks/record.sh notebooks          # runs each notebook's cells (the GPU suite: benchmarks/on_device.sh)
#
# quack (optional peer; the device has no network): its wheels travel in two
# halves, .whl-quack/a and .whl-quack/b (< 64 MiB each; `bash benchmarks/peer_wheels.sh`
# downloads and lays them out here, with Liger-Kernel's in .whl), in two calls:
#   call 1, carrying .whl-quack/a:  bash benchmarks/record.sh quack-a
#   call 2, carrying .whl-quack/b:  bash benchmarks/record.sh quack-b sweep
# quack-b joins the split wheel, checks its sha256 and installs every wheel with
# pip --no-deps --no-index --target /tmp/softmax-lab-quack/site (and, from
# b/ifmissing, cuda-bindings, protobuf or cuda-pathfinder where the machine
# lacks them); later stages (and later calls on the same machine) put that
# folder and its nvidia_cutlass_dsl/dsl_packages on PYTHONPATH.
#
# Then, here: copy the JSON and PNG files into results/ (results/README.md says
# what each is) and commit them.  Every stage ends with a short table.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
QUACK=/tmp/softmax-lab-quack
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg CUPY_CACHE_DIR=${CUPY_CACHE_DIR:-/tmp/softmax-lab-cupy-cache}
quack_path() {
  export PYTHONPATH=$PWD
  if [ -d "$QUACK/site" ]; then
    export PYTHONPATH=$PWD:$QUACK/site:$QUACK/site/nvidia_cutlass_dsl/dsl_packages
  fi
}
quack_path
lab() { python3 -m softmax_lab "$@"; }
peers="three_pass,two_pass,multi_block,single_read,copy.float4,torch.softmax,torch.compile"
all_peers="torch.softmax,torch.log_softmax,torch.compile,quack.softmax,torch.softmax_backward"
all_peers="$all_peers,torch.log_softmax_backward,quack.softmax_backward"

for stage in "$@"; do
  echo "=== $stage $(date -u +%FT%TZ)"
  case $stage in
    info)
      nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
      lab info | head -6 ;;
    quack-a)
      mkdir -p "$QUACK/wheels" && cp .whl-quack/a/* "$QUACK/wheels/" && ls "$QUACK/wheels" ;;
    quack-b)
      cp -r .whl-quack/b/* "$QUACK/wheels/" || exit 1
      (cd "$QUACK/wheels" && cat cu13.whl.part-aa cu13.whl.part-ab > "$(awk '{print $2}' cu13.sha256)" \
        && sha256sum -c cu13.sha256) || exit 1
      python3 -m pip install -q --no-deps --no-index --target "$QUACK/site" "$QUACK"/wheels/*.whl || exit 1
      # The CUTLASS DSL's own dependencies, only where the machine lacks them
      for dep in cuda.bindings:cuda_bindings google.protobuf:protobuf cuda.pathfinder:cuda_pathfinder; do
        python3 -c "import ${dep%%:*}" 2>/dev/null \
          || python3 -m pip install -q --no-deps --no-index --target "$QUACK/site" "$QUACK"/wheels/ifmissing/"${dep##*:}"-*.whl
      done
      quack_path
      python3 -c "from importlib.metadata import version; from quack.softmax import softmax_fwd; print('quack-kernels', version('quack-kernels'), 'imports')" ;;
    liger)  # Liger-Kernel, the loss ops' optional peer: its wheel travels in .whl (carry it)
      python3 -m pip install -q --no-deps --no-index --target "$QUACK/site" .whl/liger_kernel-*.whl || exit 1
      quack_path
      python3 -c "from liger_kernel.ops.cross_entropy import cross_entropy_forward; print('liger-kernel imports')" ;;
    loss)
      timeout 560 python3 -m softmax_lab sweep --op loss --dtype bfloat16,float32 --no-progress \
        --shape 16384x32000 --shape 8192x50257 --shape 4096x128256 --shape 4096x151936 --shape 4096x393216 \
        --shape 32x128256 --shape 1000x100003 -o "$OUT/loss.json" > "$OUT/loss.log" 2>&1
      echo "loss rc=$?"
      lab report --table "$OUT/loss.json" | tee "$OUT/loss.txt" ;;
    loss-decode)  # few-row losses per call in loops of 300, host included: what a training loop pays for a call
      timeout 400 python3 -m softmax_lab sweep --op loss --loop 300 --repeats 20 --clocks --dtype bfloat16,float32 \
        --no-progress --variants auto,torch.cross_entropy,quack.cross_entropy,liger.cross_entropy \
        --shape 32x128256 --shape 8x50257 --shape 16x32000 --shape 64x151936 \
        -o "$OUT/loss_decode.json" > "$OUT/loss_decode.log" 2>&1
      echo "loss-decode rc=$?"
      lab report --table "$OUT/loss_decode.json" | tee "$OUT/loss_decode.txt" ;;
    decode)  # issue 49's decode-sized calls: per call in loops of 300, host included, beside torch and quack
      timeout 440 python3 -m softmax_lab sweep --loop 300 --repeats 20 --clocks --dtype bfloat16,float32 \
        --op softmax,softmax_backward --no-progress \
        --variants auto,torch.softmax,quack.softmax,torch.softmax_backward,quack.softmax_backward \
        --shape 1x32000 --shape 1x128256 --shape 8x151936 --shape 16x50257 --shape 64x128256 --shape 64x393216 \
        -o "$OUT/decode.json" > "$OUT/decode.log" 2>&1
      echo "decode rc=$?"
      lab report --table "$OUT/decode.json" | tee "$OUT/decode.txt"
      # host time alone on a tiny input, softmax-lab's calls beside torch.softmax's own
      timeout 120 python3 -m softmax_lab bench --rows 8 --cols 1024 --no-progress \
        --variants host.auto,host.copy,host.torch.softmax,host.torch.softmax_lab -o "$OUT/host.json" \
        | tail -n 10 ;;
    backward-halves)  # issue 49 part 2: the halves' backward, auto's pick beside the variants it chooses between
      timeout 400 python3 -m softmax_lab sweep --op backward --dtype bfloat16,float16 --repeats 20 --no-progress \
        --variants auto,cluster_row,single_read,quack.softmax_backward \
        --shape 4000x96000 --shape 16384x32000 --shape 100x524288 --shape 8192x50257 --shape 4096x151936 \
        --shape 2048x200003 --shape 1000x65537 --shape 264x300000 --shape 64x128256 --shape 528x262144 \
        -o "$OUT/backward_halves.json" > "$OUT/backward_halves.log" 2>&1
      echo "backward-halves rc=$?"
      lab report --table "$OUT/backward_halves.json" | tee "$OUT/backward_halves.txt" ;;
    profile-loss)
      timeout 560 python3 -m softmax_lab profile --op cross_entropy_grad --dtype bfloat16 --shape 4096x128256 \
        -o "$OUT/loss_profile.json" > "$OUT/loss_profile.log" 2>&1
      echo "profile-loss rc=$?"
      python3 -c "import sys; from softmax_lab.lab import profile; print(profile.format_passes(profile.load(sys.argv[1])))" \
        "$OUT/loss_profile.json" ;;
    bench)
      timeout 480 python3 -m softmax_lab bench --no-progress -o "$OUT/bench.json" > "$OUT/bench.log" 2>&1
      echo "bench rc=$?"
      lab plot "$OUT/bench.json" -o "$OUT"
      tail -n 24 "$OUT/bench.log" ;;
    sweep)
      timeout 560 python3 -m softmax_lab sweep --no-progress -o "$OUT/sweep.json" > "$OUT/sweep.log" 2>&1
      echo "sweep rc=$?"
      lab plot "$OUT/sweep.json" -o "$OUT"
      sed -n '/^ *shape |/,/^$/p' "$OUT/sweep.log" ;;
    profile)
      timeout 560 python3 -m softmax_lab profile -o "$OUT/profile.json" > "$OUT/profile.log" 2>&1
      echo "profile rc=$?"
      lab plot "$OUT/profile.json" -o "$OUT"
      tail -n 16 "$OUT/profile.log" | cut -c1-110 ;;
    profile-bf16)
      timeout 300 python3 -m softmax_lab profile --dtype bfloat16 -o "$OUT/profile_bf16.json" > "$OUT/profile_bf16.log" 2>&1
      echo "profile-bf16 rc=$?"
      tail -n 16 "$OUT/profile_bf16.log" | cut -c1-110 ;;
    profile-rows)
      timeout 560 python3 -m softmax_lab profile --sweep --calls 1 --variants "$peers" -o "$OUT/profile_rows.json" \
        > "$OUT/profile_rows.log" 2>&1
      echo "profile-rows rc=$?"
      lab plot "$OUT/profile_rows.json" -o "$OUT"
      python3 -c "import sys; from softmax_lab.lab import profile; print(profile.format_passes(profile.load(sys.argv[1])))" \
        "$OUT/profile_rows.json" ;;
    bench-bf16)
      timeout 540 python3 -m softmax_lab bench --dtype bfloat16 --op forward --no-progress -o "$OUT/bench_bf16.json" \
        > "$OUT/bench_bf16.log" 2>&1
      echo "bench-bf16 rc=$?"
      lab plot "$OUT/bench_bf16.json" -o "$OUT"
      sed -n '/^by dtype and op:/,$p' "$OUT/bench_bf16.log" | head -n 8 ;;
    bench-backward)
      timeout 540 python3 -m softmax_lab bench --dtype bfloat16,float32 --op backward --no-progress \
        -o "$OUT/bench_backward.json" > "$OUT/bench_backward.log" 2>&1
      echo "bench-backward rc=$?"
      lab plot "$OUT/bench_backward.json" -o "$OUT"
      sed -n '/^by dtype and op:/,$p' "$OUT/bench_backward.log" | head -n 8 ;;
    sweep-bf16)
      timeout 560 python3 -m softmax_lab sweep --dtype bfloat16 --no-progress -o "$OUT/sweep_bf16.json" \
        > "$OUT/sweep_bf16.log" 2>&1
      echo "sweep-bf16 rc=$?"
      lab plot "$OUT/sweep_bf16.json" -o "$OUT"
      sed -n '/^ *shape |/,/^$/p' "$OUT/sweep_bf16.log" ;;
    table)
      # bf16 first: a run cut short by the limit keeps what was measured (saved after each dtype and op)
      timeout 560 python3 -m softmax_lab bench --dtype bfloat16,float32,float16 --op all --repeats 20 --no-progress \
        -o "$OUT/dtype_op.json" --variants "auto,$all_peers" > "$OUT/dtype_op.log" 2>&1
      echo "table rc=$?"
      lab report --table "$OUT/dtype_op.json" > "$OUT/dtype_op.txt"
      lab plot "$OUT/dtype_op.json" -o "$OUT"
      cat "$OUT/dtype_op.txt" ;;
    table-vocab)
      timeout 300 python3 -m softmax_lab bench --rows 4096 --cols 151936 --dtype bfloat16,float32,float16 --op all \
        --repeats 20 --no-progress -o "$OUT/dtype_op_151936.json" --variants "auto,$all_peers" > "$OUT/dtype_op_151936.log" 2>&1
      echo "table-vocab rc=$?"
      lab report --table "$OUT/dtype_op_151936.json" > "$OUT/dtype_op_151936.txt"
      cat "$OUT/dtype_op_151936.txt" ;;
    context)
      timeout 300 python3 -m softmax_lab context -o "$OUT/context.json" > "$OUT/context.log" 2>&1
      echo "context rc=$?"
      lab plot "$OUT/context.json" -o "$OUT"
      cat "$OUT/context.log" ;;
    notebooks)  # the code cells top to bottom from notebooks/, as Jupyter runs them (the device has no Jupyter)
      for nb in notebooks/*.ipynb; do
        (cd notebooks && timeout 300 python3 -c "
import json, sys
try:
    import IPython  # noqa: F401
except ImportError:
    if 'IPython' in open(sys.argv[1]).read():
        print(sys.argv[1], 'needs IPython, missing here: skipped', file=sys.stderr); sys.exit(0)
g = {}
for c in json.load(open(sys.argv[1]))['cells']:
    if c['cell_type'] == 'code':
        exec(compile(''.join(c['source']), sys.argv[1], 'exec'), g)
print('ran', sys.argv[1])
" "$(basename "$nb")" > /dev/null 2> "$OUT/notebook.err"; echo "$nb rc=$?"; tail -n 3 "$OUT/notebook.err")
      done
      rm -f "$OUT/notebook.err" ;;
    *)
      echo "unknown stage $stage (info quack-a quack-b liger loss backward-halves profile-loss bench sweep profile profile-bf16 profile-rows bench-bf16 bench-backward"\
           "sweep-bf16 table table-vocab context decode notebooks)"; exit 2 ;;
  esac
done
