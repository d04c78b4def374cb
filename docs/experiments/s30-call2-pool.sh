#!/bin/bash
# Thirtieth session, call 2 (2-GPU kind), branch exp/pool: X_POOL=1 (each
# device's default memory pool keeps what is freed: the job's device
# buffers come back without new mappings) and X_NOSTREAM=1 (no streaming
# buffers made at a job's start when batches come uploaded), 2 and 1 GPUs,
# interleaved, then light traces of the variant.
nvidia-smi --query-gpu=name --format=csv,noheader | head -2
B=.exp/amtool
run() { local g=$1; shift
  timeout 60 env "$@" $B bench --engine cuda --gpus $g --case acc_stats_ark --reps 7 2>/dev/null |
  python3 -c "import json,sys; j=json.loads(sys.stdin.read()); print('g$g', '$*', '%.2f'%(j['seconds']*1e3), '%.2f'%(j['kernel_seconds']*1e3), j['avg_like_per_frame'])" | tee -a $OUT/res.txt; }
for r in 1 2 3; do
  run 2 X=0; run 2 X_POOL=1; run 2 X_NOSTREAM=1; run 2 X_POOL=1 X_NOSTREAM=1
  run 1 X=0; run 1 X_POOL=1 X_NOSTREAM=1
done
timeout 60 env X_POOL=1 X_NOSTREAM=1 AMTOOL_BATCH_TRACE=2 $B bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/light2v.txt >/dev/null
timeout 60 env X_POOL=1 X_NOSTREAM=1 AMTOOL_BATCH_TRACE=2 $B bench --engine cuda --gpus 1 --case acc_stats_ark --reps 7 2>$OUT/light1v.txt >/dev/null
timeout 60 env AMTOOL_BATCH_TRACE=2 $B bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/light2.txt >/dev/null
