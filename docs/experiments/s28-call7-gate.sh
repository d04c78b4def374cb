#!/bin/bash
# Twenty-eighth session, call 7 (2-GPU kind): the pieces' copies held while
# the FP16 forms are made (X_GATE=1), with the head start (X_ASYNCPREP=1
# X_HELDF=3), with and without growing batches (X_NORAMP=1), against main.
cd .exp
nvidia-smi --query-gpu=name --format=csv,noheader | head -2
run() { local name=$1 bin=$2 g=$3; shift 3
  timeout 60 env "$@" ./amtool.$bin bench --engine cuda --gpus $g --case acc_stats_ark --reps 7 2>/dev/null |
  python3 -c "import json,sys; j=json.loads(sys.stdin.read()); print('$name g$g', '%.2f'%(j['seconds']*1e3), '%.2f'%(j['kernel_seconds']*1e3), j['avg_like_per_frame'])" | tee -a $OUT/res.txt; }
for r in 1 2 3; do
  run M main 2; run AG lend 2 X_ASYNCPREP=1 X_HELDF=3 X_GATE=1; run ANG lend 2 X_ASYNCPREP=1 X_HELDF=3 X_NORAMP=1 X_GATE=1; run G lend 2 X_GATE=1
  run M main 1
done
timeout 60 env AMTOOL_BATCH_TRACE=2 X_ASYNCPREP=1 X_HELDF=3 X_GATE=1 ./amtool.lend bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/lightAG.txt >/dev/null
timeout 60 env AMTOOL_BATCH_TRACE=2 X_ASYNCPREP=1 X_HELDF=3 X_NORAMP=1 X_GATE=1 ./amtool.lend bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/lightANG.txt >/dev/null
