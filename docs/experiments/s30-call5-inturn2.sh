#!/bin/bash
# Thirtieth session, call 5 (2-GPU kind), branch exp/pool: call 4 again on
# another host, five rounds: main's path, V = X_POOL=1 X_NOSTREAM=1
# X_PINFORMS=1, and V with the oldest batch's pieces first (X_INTURN=1);
# one GPU with main's path and V.
nvidia-smi --query-gpu=name --format=csv,noheader | head -2
B=.exp/amtool
run() { local g=$1; shift
  timeout 60 env "$@" $B bench --engine cuda --gpus $g --case acc_stats_ark --reps 7 2>/dev/null |
  python3 -c "import json,sys; j=json.loads(sys.stdin.read()); print('g$g', '$*', '%.2f'%(j['seconds']*1e3), '%.2f'%(j['kernel_seconds']*1e3), j['avg_like_per_frame'])" | tee -a $OUT/res.txt; }
V="X_POOL=1 X_NOSTREAM=1 X_PINFORMS=1"
for r in 1 2 3 4 5; do
  run 2 X=0; run 2 $V; run 2 $V X_INTURN=1
  run 1 X=0; run 1 $V
done
timeout 60 env $V X_INTURN=1 AMTOOL_BATCH_TRACE=2 $B bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/light2c.txt >/dev/null
