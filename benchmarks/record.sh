#!/usr/bin/env bash
# Records results/ on the device (run from the repo root, $OUT set by the device tool):
# the headline bench, the sweep, their plots, the notebooks run as scripts on the GPU,
# and the GPU test suite.  At most 8 files come back from $OUT.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 CUPY_CACHE_DIR=/tmp/cc
python3 -m softmax_lab info 2>&1 | head -8
timeout 170 python3 -m softmax_lab bench --output $OUT/bench.json > $OUT/bench.log 2>&1; echo bench rc=$?
timeout 280 python3 -m softmax_lab sweep --output $OUT/sweep.json > $OUT/sweep.log 2>&1; echo sweep rc=$?
python3 -m softmax_lab plot $OUT/bench.json $OUT/sweep.json --output-dir $OUT/plots; echo plot rc=$?
tr '\r' '\n' < $OUT/bench.log | grep -v "candidate/s\|s/candidate\|^\s*$" | tail -16
tr '\r' '\n' < $OUT/sweep.log | grep -v "candidate/s\|s/candidate" | tail -18 | cut -c1-120
# The notebooks' code cells, top to bottom, on this GPU (the device has no Jupyter);
# 03 draws from the results just recorded.
for nb in notebooks/*.ipynb; do
  SOFTMAX_LAB_RESULTS=$OUT timeout 120 python3 -c "
import json, sys
cells = [''.join(c['source']) for c in json.load(open(sys.argv[1]))['cells'] if c['cell_type'] == 'code']
if '03_' in sys.argv[1]:
    import os; os.environ['SOFTMAX_LAB_RECORDED'] = '1'
    try:
        import IPython
    except ImportError:
        print('IPython missing here; skipped'); sys.exit(0)
g = {}
for c in cells: exec(compile(c, sys.argv[1], 'exec'), g)
print('ran', len(cells), 'cells of', sys.argv[1])
" $nb >> $OUT/notebooks.log 2>&1; echo "$nb rc=$?"
done
timeout 200 python3 -m pytest -q -rs -m gpu tests -p no:cacheprovider 2>&1 | tail -4
