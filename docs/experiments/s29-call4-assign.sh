#!/bin/bash
# Twenty-ninth session, call 4 (2-GPU kind): the devices of the ramp's
# batches (exp/assign, X_ASSIGN; the statistics' bits do not depend on
# it). Main's choice (the device given the fewest frames) gives device 0
# the 16k and 65k batches and device 1 the 32k and 131k ones, and device 0
# then waits ~1 ms for its first full batch. B: device 0 16k and 131k,
# device 1 32k and 65k. C: device 0 16k, 65k and 131k, device 1 32k, then
# the first full batch. Stage .exp/amtool.assign.
cd .exp
nvidia-smi --query-gpu=name --format=csv,noheader | head -2
run() { local name=$1 g=$2; shift 2
  timeout 60 env "$@" ./amtool.assign bench --engine cuda --gpus $g --case acc_stats_ark --reps 7 2>/dev/null |
  python3 -c "import json,sys; j=json.loads(sys.stdin.read()); print('$name g$g', '%.2f'%(j['seconds']*1e3), '%.2f'%(j['kernel_seconds']*1e3), j['avg_like_per_frame'])" | tee -a $OUT/res.txt; }
for r in 1 2 3; do
  run M 2; run B 2 X_ASSIGN=0,1,1,0; run C 2 X_ASSIGN=0,1,0,0
  run M 1
done
timeout 60 env AMTOOL_BATCH_TRACE=2 ./amtool.assign bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/lightM.txt >/dev/null
timeout 60 env AMTOOL_BATCH_TRACE=2 X_ASSIGN=0,1,1,0 ./amtool.assign bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/lightB.txt >/dev/null
timeout 60 env AMTOOL_BATCH_TRACE=2 X_ASSIGN=0,1,0,0 ./amtool.assign bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/lightC.txt >/dev/null
