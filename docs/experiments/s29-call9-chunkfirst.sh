#!/bin/bash
# Twenty-ninth session, call 9 (2-GPU kind): a device starting a batch's
# chunks as their pieces land, for the job's first batches only
# (exp/chunkfirst: X_CHUNKSTART=1 X_CHUNKFIRST=n; the same bits). Fed
# chunk by chunk through the whole job (the twenty-eighth session's call
# 8) each device idled mid-job on late pieces; the first six batches are
# the ramp's four and each device's first full batch, which device 0 waits
# ~1 ms for. Stage .exp/amtool.cf (built on exp/chunkstart's base).
cd .exp
nvidia-smi --query-gpu=name --format=csv,noheader | head -2
run() { local name=$1 g=$2; shift 2
  timeout 60 env "$@" ./amtool.cf bench --engine cuda --gpus $g --case acc_stats_ark --reps 7 2>/dev/null |
  python3 -c "import json,sys; j=json.loads(sys.stdin.read()); print('$name g$g', '%.2f'%(j['seconds']*1e3), '%.2f'%(j['kernel_seconds']*1e3), j['avg_like_per_frame'])" | tee -a $OUT/res.txt; }
for r in 1 2 3; do
  run M 2; run F6 2 X_CHUNKSTART=1 X_CHUNKFIRST=6; run F8 2 X_CHUNKSTART=1 X_CHUNKFIRST=8
  run M 1
done
timeout 60 env AMTOOL_BATCH_TRACE=2 X_CHUNKSTART=1 X_CHUNKFIRST=6 ./amtool.cf bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/lightF6.txt >/dev/null
timeout 60 env AMTOOL_BATCH_TRACE=2 ./amtool.cf bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/lightM.txt >/dev/null
