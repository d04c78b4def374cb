#!/bin/bash
# Twenty-ninth session, call 6 (2-GPU kind): the ramp's pieces filled by
# several copying threads (exp/splitfill, X_SPLITFILL=n floats: a batch of
# fewer floats is filled in its lent memory in tasks of X_SPLITSUB floats,
# 65536 by default, and each 2 MB piece is sent by the last of its tasks,
# so every thread works on the first batches and the copies are as many as
# before). 2M floats: the 16k and 32k batches; 6M: up to the 131k one;
# 11M: every batch. Stage .exp/amtool.sf.
cd .exp
nvidia-smi --query-gpu=name --format=csv,noheader | head -2
run() { local name=$1 g=$2; shift 2
  timeout 60 env "$@" ./amtool.sf bench --engine cuda --gpus $g --case acc_stats_ark --reps 7 2>/dev/null |
  python3 -c "import json,sys; j=json.loads(sys.stdin.read()); print('$name g$g', '%.2f'%(j['seconds']*1e3), '%.2f'%(j['kernel_seconds']*1e3), j['avg_like_per_frame'])" | tee -a $OUT/res.txt; }
for r in 1 2 3; do
  run M 2; run S2 2 X_SPLITFILL=2000000; run S6 2 X_SPLITFILL=6000000; run S11 2 X_SPLITFILL=11000000
  run M 1
done
timeout 60 env AMTOOL_BATCH_TRACE=2 ./amtool.sf bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/lightM.txt >/dev/null
timeout 60 env AMTOOL_BATCH_TRACE=2 X_SPLITFILL=6000000 ./amtool.sf bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/lightS6.txt >/dev/null
