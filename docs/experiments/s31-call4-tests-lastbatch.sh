#!/bin/bash
# Thirty-first session, call 4 (2-GPU kind): the device tests on main with
# the last batch taking a small leftover along (0757b91), then
# acc_stats_ark with it (.device/bin/amtool) against the batches before it
# (.exp/amtool: exp/tail with no switch set), and a light trace of it.
nvidia-smi --query-gpu=name --format=csv,noheader | head -2
AMTOOL_PROPTEST_CASES=4 bash .device/run-tests.sh > $OUT/tests.txt 2>&1; echo "tests rc=$?"
grep -E "device test run|FAILED|panicked" $OUT/tests.txt | head -20
run() { local g=$1 b=$2
  timeout 60 $b bench --engine cuda --gpus $g --case acc_stats_ark --reps 7 2>/dev/null |
  python3 -c "import json,sys; j=json.loads(sys.stdin.read()); print('g$g', '$b', '%.2f'%(j['seconds']*1e3), '%.2f'%(j['kernel_seconds']*1e3), j['avg_like_per_frame'])" | tee -a $OUT/res.txt; }
for r in 1 2 3; do
  run 2 .exp/amtool; run 2 .device/bin/amtool; run 1 .exp/amtool; run 1 .device/bin/amtool
done
timeout 60 env AMTOOL_BATCH_TRACE=2 .device/bin/amtool bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/light2.txt >/dev/null
timeout 60 env AMTOOL_BATCH_TRACE=2 .device/bin/amtool bench --engine cuda --gpus 1 --case acc_stats_ark --reps 7 2>$OUT/light1.txt >/dev/null
