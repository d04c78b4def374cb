#!/bin/bash
# Twenty-ninth session, call 1 (2-GPU kind): what taking the maxima costs
# the copying threads' fill. exp/nomax's X_NOMAX=8 skips the gatherers'
# maxima (8.0 in their place: the bench's N(0,1) features fit FP16 the
# same way), against main. Stage .exp/amtool.main, .exp/amtool.nomax.
cd .exp
nvidia-smi --query-gpu=name --format=csv,noheader | head -2
run() { local name=$1 bin=$2 g=$3; shift 3
  timeout 60 env "$@" ./amtool.$bin bench --engine cuda --gpus $g --case acc_stats_ark --reps 7 2>/dev/null |
  python3 -c "import json,sys; j=json.loads(sys.stdin.read()); print('$name g$g', '%.2f'%(j['seconds']*1e3), '%.2f'%(j['kernel_seconds']*1e3), j['avg_like_per_frame'])" | tee -a $OUT/res.txt; }
for r in 1 2 3; do
  run M main 2; run X nomax 2 X_NOMAX=8
  run M main 1; run X nomax 1 X_NOMAX=8
done
timeout 60 env AMTOOL_BATCH_TRACE=1 ./amtool.main bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/fullM.txt >/dev/null
timeout 60 env AMTOOL_BATCH_TRACE=1 X_NOMAX=8 ./amtool.nomax bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/fullX.txt >/dev/null
timeout 60 env AMTOOL_BATCH_TRACE=2 ./amtool.main bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/lightM.txt >/dev/null
timeout 60 env AMTOOL_BATCH_TRACE=2 X_NOMAX=8 ./amtool.nomax bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/lightX.txt >/dev/null
gzip -f $OUT/full*.txt
