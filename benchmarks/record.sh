export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 CUPY_CACHE_DIR=/tmp/cc
python3 -m softmax_lab info > $OUT/info.txt 2>&1
timeout 150 python3 -m softmax_lab bench --output $OUT/bench.json > $OUT/bench.log 2>&1; echo bench rc=$?
timeout 260 python3 -m softmax_lab sweep --output $OUT/sweep.json > $OUT/sweep.log 2>&1; echo sweep rc=$?
python3 -m softmax_lab plot $OUT/bench.json $OUT/sweep.json --output-dir $OUT/plots > $OUT/plot.log 2>&1; echo plot rc=$?
grep -v "^\s*$" $OUT/bench.log | tr '\r' '\n' | grep -v "candidate/s\|s/candidate" | tail -20
tr '\r' '\n' < $OUT/sweep.log | grep -v "candidate/s\|s/candidate" | tail -110 | cut -c1-110
