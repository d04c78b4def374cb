#!/bin/bash
# Twenty-eighth session, call 4 (2-GPU kind): the device tests on the final
# code, process start-up main against new, and acc_stats_ark on 2 / 1 GPUs.
# Carry [".device", ".exp"] (.device from ../shared/scripts/device-pack.sh,
# its INDEX pruned to amtool-*, cuda_*, cli_gpus, cli_train, cli_align,
# cli_score, htk_herest; .exp/amtool.main: the earlier main, stripped).
nvidia-smi --query-gpu=name --format=csv,noheader
AMTOOL_PROPTEST_CASES=8 timeout 450 bash .device/run-tests.sh > $OUT/tests.log 2>&1; tail -1 $OUT/tests.log
grep -E "^test result|FAILED|panicked" $OUT/tests.log | sort | uniq -c | head -20
cp .device/bin/amtool .exp/amtool.new
M=testdata/kaldi/final.mdl; F=ark:testdata/kaldi/acc/feats_cmvn_deltas.ark; A="ark:gunzip -c testdata/kaldi/acc/ali.ark.gz|"
one() { local bin=$1; shift
  local t0=$(date +%s.%N)
  AMTOOL_TIMELINE=1 ./.exp/amtool.$bin acc-stats "$@" $M $F "$A" /tmp/o.$bin.acc 2>/tmp/err.$bin
  local t1=$(date +%s.%N)
  echo "$bin $* wall $(awk "BEGIN{printf \"%.3f\", $t1-$t0}") $(grep -o 'timeline:.*' /tmp/err.$bin)" >> $OUT/res.txt
}
for b in main new; do one $b --use-gpu=yes; done
for r in 1 2 3 4 5; do
  for b in main new; do one $b --use-gpu=yes; one $b --use-gpu=yes --gpus=2; done
done
cmp /tmp/o.main.acc /tmp/o.new.acc && echo "same accs" | tee -a $OUT/res.txt
run() { local g=$1
  timeout 60 ./.exp/amtool.new bench --engine cuda --gpus $g --case acc_stats_ark --reps 7 2>/dev/null |
  python3 -c "import json,sys; j=json.loads(sys.stdin.read()); print('new g$g', '%.2f'%(j['seconds']*1e3), '%.2f'%(j['kernel_seconds']*1e3), j['avg_like_per_frame'], j['device'])" | tee -a $OUT/res.txt; }
for r in 1 2 3; do run 2; run 1; done
