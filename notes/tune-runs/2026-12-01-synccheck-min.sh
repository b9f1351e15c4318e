# Each minimal kernel plain, then under compute-sanitizer tools; one line per run.
run() { # kernel cluster tool
  o=$(timeout 120 compute-sanitizer --tool $3 --error-exitcode 3 python3 notes/tune-runs/2026-12-01-synccheck-min.py $1 $2 2>&1); rc=$?
  echo "$1 C=$2 $3 rc=$rc :: $(echo "$o" | grep -E '^ok |SUMMARY|rror' | head -3 | tr '\n' ' ' | cut -c1-400)"
}
for k in published local_mbar bulk_local pushed pushed_exit_barrier remote_arrive; do
  echo "$k C=2 plain: $(python3 notes/tune-runs/2026-12-01-synccheck-min.py $k 2 2>&1 | tail -1)"
  run $k 2 synccheck
done
run pushed 4 synccheck
run pushed 2 memcheck
run pushed 2 racecheck
