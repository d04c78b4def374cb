#!/bin/bash
# Thirtieth session, call 3 (2-GPU kind), branch exp/pool: A = X_POOL=1
# X_NOSTREAM=1 (call 2), B = A + X_PINFORMS=1 (the FP16 forms built in
# pooled page-locked memory: no page faults, an asynchronous upload),
# interleaved with main's path, then light traces of B and main.
nvidia-smi --query-gpu=name --format=csv,noheader | head -2
B=.exp/amtool
run() { local g=$1; shift
  timeout 60 env "$@" $B bench --engine cuda --gpus $g --case acc_stats_ark --reps 7 2>/dev/null |
  python3 -c "import json,sys; j=json.loads(sys.stdin.read()); print('g$g', '$*', '%.2f'%(j['seconds']*1e3), '%.2f'%(j['kernel_seconds']*1e3), j['avg_like_per_frame'])" | tee -a $OUT/res.txt; }
A="X_POOL=1 X_NOSTREAM=1"
for r in 1 2 3; do
  run 2 X=0; run 2 $A; run 2 $A X_PINFORMS=1
  run 1 X=0; run 1 $A X_PINFORMS=1
done
timeout 60 env $A X_PINFORMS=1 AMTOOL_BATCH_TRACE=2 $B bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/light2b.txt >/dev/null
timeout 60 env $A X_PINFORMS=1 AMTOOL_BATCH_TRACE=2 $B bench --engine cuda --gpus 1 --case acc_stats_ark --reps 7 2>$OUT/light1b.txt >/dev/null
timeout 60 env AMTOOL_BATCH_TRACE=2 $B bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/light2.txt >/dev/null
timeout 60 env AMTOOL_BATCH_TRACE=2 $B bench --engine cuda --gpus 1 --case acc_stats_ark --reps 7 2>$OUT/light1.txt >/dev/null
