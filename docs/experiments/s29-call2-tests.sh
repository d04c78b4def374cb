#!/bin/bash
# Twenty-ninth session, call 2 (2-GPU kind): the device tests on the code
# with CudaModel and MultiModel in named parts (pruned to the programs
# that open engines: amtool-*, cuda_*, cli_gpus, cli_train, cli_align,
# cli_score, htk_herest), then acc_stats_ark on 1 and 2 GPUs untraced and
# with the light trace (AMTOOL_BATCH_TRACE=2), 1 GPU's as well this time.
nvidia-smi --query-gpu=name --format=csv,noheader | head -2
AMTOOL_PROPTEST_CASES=8 timeout 460 bash .device/run-tests.sh > $OUT/tests.txt 2>&1
grep -E "^=== |test result|device test run|FAILED|panicked" $OUT/tests.txt | tail -40
run() { local g=$1
  timeout 60 .device/bin/amtool bench --engine cuda --gpus $g --case acc_stats_ark --reps 7 2>/dev/null |
  python3 -c "import json,sys; j=json.loads(sys.stdin.read()); print('g$g', '%.2f'%(j['seconds']*1e3), '%.2f'%(j['kernel_seconds']*1e3), j['avg_like_per_frame'])" | tee -a $OUT/res.txt; }
for r in 1 2; do run 2; run 1; done
timeout 60 env AMTOOL_BATCH_TRACE=2 .device/bin/amtool bench --engine cuda --gpus 2 --case acc_stats_ark --reps 7 2>$OUT/light2.txt >/dev/null
timeout 60 env AMTOOL_BATCH_TRACE=2 .device/bin/amtool bench --engine cuda --gpus 1 --case acc_stats_ark --reps 7 2>$OUT/light1.txt >/dev/null
