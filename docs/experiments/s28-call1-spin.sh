#!/bin/bash
# Twenty-eighth session, call 1 (2-GPU kind): the spin on a batch's download
# (branch exp/spin, X_SPINWAIT=µs) against main, and traces of main (light
# and full). Stage .exp/amtool.main and .exp/amtool.spin (stripped release
# binaries); carry [".exp"].
cd .exp
run() { local name=$1 bin=$2 g=$3; shift 3
  env "$@" ./amtool.$bin bench --engine cuda --gpus $g --case acc_stats_ark --reps 7 2>/dev/null |
  python3 -c "import json,sys; j=json.loads(sys.stdin.read()); print('$name g$g', '%.2f'%(j['seconds']*1e3), '%.2f'%(j['kernel_seconds']*1e3), j['avg_like_per_frame'])" | tee -a $OUT/res.txt; }
for r in 1 2; do
  run M main 2; run S300 spin 2 X_SPINWAIT=300; run S2000 spin 2 X_SPINWAIT=2000
  run M main 1; run S300 spin 1 X_SPINWAIT=300
done
AMTOOL_BATCH_TRACE=2 X_SPINWAIT=300 ./amtool.spin bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/lightS.txt >/dev/null
AMTOOL_BATCH_TRACE=2 ./amtool.main bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/lightM.txt >/dev/null
AMTOOL_BATCH_TRACE=1 ./amtool.main bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/fullM.txt >/dev/null
AMTOOL_BATCH_TRACE=2 ./amtool.main bench --engine cuda --gpus 1 --case acc_stats_ark --reps 7 2>$OUT/light1.txt >/dev/null
