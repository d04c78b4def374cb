#!/bin/bash
# Thirty-first session, call 3 (2-GPU kind): branch exp/tail. Full batches
# of 2^17 frames (X_BATCH=17), each one chunk (X_WHOLE=1): the same chunks'
# sizes as main's halves of 2^18, so one GPU's kernels and copies are
# alike, while two GPUs' first full batches need half the data; X_HELD=4
# holds as many frames a device as main's two.
nvidia-smi --query-gpu=name --format=csv,noheader | head -2
B=.exp/amtool
W="X_BATCH=17 X_WHOLE=1"
run() { local g=$1; shift
  timeout 60 env "$@" $B bench --engine cuda --gpus $g --case acc_stats_ark --reps 7 2>/dev/null |
  python3 -c "import json,sys; j=json.loads(sys.stdin.read()); print('g$g', '$*', '%.2f'%(j['seconds']*1e3), '%.2f'%(j['kernel_seconds']*1e3), '%.2f'%(j.get('gpu_kernels_seconds',0)*1e3), '%.2f'%(j.get('gpu_idle_seconds',0)*1e3), j['avg_like_per_frame'])" | tee -a $OUT/res.txt; }
for r in 1 2 3; do
  run 2 X=0; run 2 $W; run 2 $W X_HELD=4
  run 1 X=0; run 1 $W; run 1 $W X_HELD=4
done
timeout 60 env AMTOOL_BATCH_TRACE=2 $W $B bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/light2b.txt >/dev/null
timeout 60 env AMTOOL_BATCH_TRACE=2 $W $B bench --engine cuda --gpus 1 --case acc_stats_ark --reps 7 2>$OUT/light1b.txt >/dev/null
timeout 60 env AMTOOL_BATCH_TRACE=2 $B bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/light2.txt >/dev/null
