#!/bin/bash
# Twenty-eighth session, call 2 (2-GPU kind): exp/lender's X_ASYNCPREP=1
# (the devices made ready on their threads while the host copies, batch
# memory lent without them), with X_HELDF=2|3, against main. Stage
# .exp/amtool.main and .exp/amtool.lend; carry [".exp"].
cd .exp
run() { local name=$1 bin=$2 g=$3; shift 3
  timeout 60 env "$@" ./amtool.$bin bench --engine cuda --gpus $g --case acc_stats_ark --reps 7 2>/dev/null |
  python3 -c "import json,sys; j=json.loads(sys.stdin.read()); print('$name g$g', '%.2f'%(j['seconds']*1e3), '%.2f'%(j['kernel_seconds']*1e3), j['avg_like_per_frame'])" | tee -a $OUT/res.txt; }
for r in 1 2 3 4; do
  run M main 2; run L0 lend 2; run A lend 2 X_ASYNCPREP=1; run AH2 lend 2 X_ASYNCPREP=1 X_HELDF=2; run AH3 lend 2 X_ASYNCPREP=1 X_HELDF=3
  [ $r -le 2 ] && { run M main 1; run L0 lend 1; }
done
timeout 60 env AMTOOL_BATCH_TRACE=2 X_ASYNCPREP=1 X_HELDF=2 ./amtool.lend bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/lightAH2.txt >/dev/null
timeout 60 env AMTOOL_BATCH_TRACE=2 X_ASYNCPREP=1 ./amtool.lend bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/lightA.txt >/dev/null
timeout 60 env AMTOOL_BATCH_TRACE=1 X_ASYNCPREP=1 X_HELDF=2 ./amtool.lend bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/fullAH2.txt >/dev/null
