#!/bin/bash
# Twenty-eighth session, call 8 (2-GPU kind): a device starts a batch's
# chunks as their pieces land (branch exp/chunkstart, X_CHUNKSTART=1),
# against main. Stage .exp/amtool.main and .exp/amtool.chunk.
cd .exp
nvidia-smi --query-gpu=name --format=csv,noheader | head -2
run() { local name=$1 bin=$2 g=$3; shift 3
  timeout 60 env "$@" ./amtool.$bin bench --engine cuda --gpus $g --case acc_stats_ark --reps 7 2>$OUT/err.$name.$g |
  python3 -c "import json,sys; j=json.loads(sys.stdin.read()); print('$name g$g', '%.2f'%(j['seconds']*1e3), '%.2f'%(j['kernel_seconds']*1e3), j['avg_like_per_frame'])" | tee -a $OUT/res.txt; }
for r in 1 2 3; do
  run M main 2; run C chunk 2 X_CHUNKSTART=1; run C0 chunk 2; run M main 1
done
timeout 60 env AMTOOL_BATCH_TRACE=2 X_CHUNKSTART=1 ./amtool.chunk bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/lightC.txt >/dev/null
tail -3 $OUT/err.C.2
