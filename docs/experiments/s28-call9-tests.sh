#!/bin/bash
# Twenty-eighth session, call 9 (2-GPU kind): the device tests that open
# engines quickly (the selection's final code), and process start-up main
# against new. Carry [".device", ".exp"]; .device's INDEX pruned to amtool-*,
# cli_*, cuda_lent, cuda_multi, htk_herest.
nvidia-smi --query-gpu=name --format=csv,noheader
AMTOOL_PROPTEST_CASES=8 timeout 200 bash .device/run-tests.sh > $OUT/tests.log 2>&1; tail -1 $OUT/tests.log
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
for r in 1 2 3 4 5; do for b in main new; do one $b --use-gpu=yes; done; done
cmp /tmp/o.main.acc /tmp/o.new.acc && echo "same accs" | tee -a $OUT/res.txt
# Two processes at once: each on its own GPU.
./.exp/amtool.new acc-stats --use-gpu=yes $M $F "$A" /tmp/p1.acc 2>/tmp/p1.log & ./.exp/amtool.new acc-stats --use-gpu=yes $M $F "$A" /tmp/p2.acc 2>/tmp/p2.log; wait
grep -h "active GPU\|in use by" /tmp/p1.log /tmp/p2.log | tee -a $OUT/res.txt
