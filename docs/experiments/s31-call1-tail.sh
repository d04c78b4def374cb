#!/bin/bash
# Thirty-first session, call 1 (2-GPU kind): branch exp/tail (exp/pool's
# switches merged): the last batches' floor (X_TAILDIV=8: 32k frames
# instead of 65k), alone and with exp/pool's start (V); light traces of
# main and of X_TAILDIV=8 for the batches' kernel times by size.
nvidia-smi --query-gpu=name --format=csv,noheader | head -2
nproc
B=.exp/amtool
V="X_POOL=1 X_NOSTREAM=1 X_PINFORMS=1"
run() { local g=$1; shift
  timeout 60 env "$@" $B bench --engine cuda --gpus $g --case acc_stats_ark --reps 7 2>/dev/null |
  python3 -c "import json,sys; j=json.loads(sys.stdin.read()); print('g$g', '$*', '%.2f'%(j['seconds']*1e3), '%.2f'%(j['kernel_seconds']*1e3), '%.2f'%(j.get('gpu_idle_seconds',0)*1e3), j['avg_like_per_frame'])" | tee -a $OUT/res.txt; }
for r in 1 2 3; do
  run 2 X=0; run 2 X_TAILDIV=8; run 2 X_TAILDIV=8 $V; run 2 X_TAILDIV=16
  run 1 X=0; run 1 X_TAILDIV=8; run 1 X_TAILDIV=8 $V
done
timeout 60 env AMTOOL_BATCH_TRACE=2 $B bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/light2.txt >/dev/null
timeout 60 env AMTOOL_BATCH_TRACE=2 $B bench --engine cuda --gpus 1 --case acc_stats_ark --reps 7 2>$OUT/light1.txt >/dev/null
timeout 60 env AMTOOL_BATCH_TRACE=2 X_TAILDIV=8 $B bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/light2t8.txt >/dev/null
ls -la $OUT
