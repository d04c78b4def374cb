#!/bin/bash
# Thirtieth session, call 6 (2-GPU kind): main (c483c21) with more copying
# threads (AMTOOL_GATHER_THREADS=28, 30; the default is 24 of 32 cores),
# four rounds, then the device tests on this code (pruned to the programs
# that open engines; AMTOOL_PROPTEST_CASES=4).
nvidia-smi --query-gpu=name --format=csv,noheader | head -2
B=.device/bin/amtool
run() { local g=$1; shift
  timeout 60 env "$@" $B bench --engine cuda --gpus $g --case acc_stats_ark --reps 7 2>/dev/null |
  python3 -c "import json,sys; j=json.loads(sys.stdin.read()); print('g$g', '$*', '%.2f'%(j['seconds']*1e3), '%.2f'%(j['kernel_seconds']*1e3), j['avg_like_per_frame'])" | tee -a $OUT/res.txt; }
for r in 1 2 3 4; do
  run 2 X=0; run 2 AMTOOL_GATHER_THREADS=28; run 2 AMTOOL_GATHER_THREADS=30
  run 1 X=0; run 1 AMTOOL_GATHER_THREADS=28
done
AMTOOL_PROPTEST_CASES=4 timeout 420 bash .device/run-tests.sh > $OUT/tests.txt 2>&1
grep -E "^=== |test result|device test run|FAILED|panicked" $OUT/tests.txt | tail -40
