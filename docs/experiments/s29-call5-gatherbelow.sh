#!/bin/bash
# Twenty-ninth session, call 5 (2-GPU kind): the ramp's small batches
# gathered the way one GPU's are (exp/gatherbelow, X_GATHERBELOW=n: a
# batch of fewer than n frames is copied into its lent memory by the whole
# gathering pool at once, a part a task, and sent whole), so that every
# thread works on the first batches and a batch is in place ~0.05 ms after
# its hold instead of 0.4-0.6 ms (a 2 MB piece a thread). 70000: the 16k,
# 32k and 65k batches; 140000: the 131k one too. Stage .exp/amtool.gb.
cd .exp
nvidia-smi --query-gpu=name --format=csv,noheader | head -2
run() { local name=$1 g=$2; shift 2
  timeout 60 env "$@" ./amtool.gb bench --engine cuda --gpus $g --case acc_stats_ark --reps 7 2>/dev/null |
  python3 -c "import json,sys; j=json.loads(sys.stdin.read()); print('$name g$g', '%.2f'%(j['seconds']*1e3), '%.2f'%(j['kernel_seconds']*1e3), j['avg_like_per_frame'])" | tee -a $OUT/res.txt; }
for r in 1 2 3; do
  run M 2; run G70 2 X_GATHERBELOW=70000; run G140 2 X_GATHERBELOW=140000
  run M 1
done
timeout 60 env AMTOOL_BATCH_TRACE=2 ./amtool.gb bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/lightM.txt >/dev/null
timeout 60 env AMTOOL_BATCH_TRACE=2 X_GATHERBELOW=70000 ./amtool.gb bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/lightG70.txt >/dev/null
timeout 60 env AMTOOL_BATCH_TRACE=2 X_GATHERBELOW=140000 ./amtool.gb bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/lightG140.txt >/dev/null
