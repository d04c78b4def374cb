#!/bin/bash
# Thirty-first session, call 2 (2-GPU kind): branch exp/tail. X_WHOLE=1:
# a statistics call of at most 2^18 frames is one chunk (not two halves),
# the streaming halves taken in turn across calls; X_UPLOAD1=1: one device
# fed piece by piece by the gatherers as two are.
nvidia-smi --query-gpu=name --format=csv,noheader | head -2
B=.exp/amtool
run() { local g=$1; shift
  timeout 60 env "$@" $B bench --engine cuda --gpus $g --case acc_stats_ark --reps 7 2>/dev/null |
  python3 -c "import json,sys; j=json.loads(sys.stdin.read()); print('g$g', '$*', '%.2f'%(j['seconds']*1e3), '%.2f'%(j['kernel_seconds']*1e3), '%.2f'%(j.get('gpu_kernels_seconds',0)*1e3), '%.2f'%(j.get('gpu_idle_seconds',0)*1e3), j['avg_like_per_frame'])" | tee -a $OUT/res.txt; }
for r in 1 2 3; do
  run 1 X=0; run 1 X_WHOLE=1; run 1 X_UPLOAD1=1; run 1 X_UPLOAD1=1 X_WHOLE=1
  run 2 X=0; run 2 X_WHOLE=1
done
timeout 60 env AMTOOL_BATCH_TRACE=2 X_WHOLE=1 $B bench --engine cuda --gpus 1 --case acc_stats_ark --reps 7 2>$OUT/light1w.txt >/dev/null
timeout 60 env AMTOOL_BATCH_TRACE=2 X_WHOLE=1 X_UPLOAD1=1 $B bench --engine cuda --gpus 1 --case acc_stats_ark --reps 7 2>$OUT/light1wu.txt >/dev/null
timeout 60 env AMTOOL_BATCH_TRACE=2 X_WHOLE=1 $B bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/light2w.txt >/dev/null
