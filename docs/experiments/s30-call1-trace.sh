#!/bin/bash
# Thirtieth session, call 1 (2-GPU kind): main's acc_stats_ark, untraced,
# then with the full trace (AMTOOL_BATCH_TRACE=1) and the light one (=2),
# on 2 and 1 GPUs; the raw traces kept for reading here.
nvidia-smi --query-gpu=name --format=csv,noheader | head -2
nproc
B=.exp/amtool
run() { local g=$1; shift
  timeout 60 env "$@" $B bench --engine cuda --gpus $g --case acc_stats_ark --reps 7 2>/dev/null |
  python3 -c "import json,sys; j=json.loads(sys.stdin.read()); print('g$g', '$*', '%.2f'%(j['seconds']*1e3), '%.2f'%(j['kernel_seconds']*1e3), j['avg_like_per_frame'])" | tee -a $OUT/res.txt; }
for r in 1 2; do run 2 X=0; run 1 X=0; done
for g in 2 1; do
  timeout 60 env AMTOOL_BATCH_TRACE=1 $B bench --engine cuda --gpus $g --case acc_stats_ark --reps 7 2>$OUT/full$g.txt >/dev/null
  timeout 60 env AMTOOL_BATCH_TRACE=2 $B bench --engine cuda --gpus $g --case acc_stats_ark --reps 7 2>$OUT/light$g.txt >/dev/null
done
ls -la $OUT
