#!/bin/bash
# Twenty-eighth session, call 10 (2-GPU kind): the device tests that open
# engines, on the final code, and two processes started together: which
# GPU each takes, main (a4a943c) against new. Carry [".device", ".exp"].
nvidia-smi --query-gpu=name --format=csv,noheader
AMTOOL_PROPTEST_CASES=8 timeout 150 bash .device/run-tests.sh > $OUT/tests.log 2>&1; tail -1 $OUT/tests.log
grep -E "^test result|FAILED|panicked" $OUT/tests.log | sort | uniq -c | head -20
cp .device/bin/amtool .exp/amtool.new
M=testdata/kaldi/final.mdl; F=ark:testdata/kaldi/acc/feats_cmvn_deltas.ark; A="ark:gunzip -c testdata/kaldi/acc/ali.ark.gz|"
for b in main new; do for r in 1 2 3; do
  ./.exp/amtool.$b acc-stats --use-gpu=yes $M $F "$A" /tmp/p1.acc 2>/tmp/p1.log & ./.exp/amtool.$b acc-stats --use-gpu=yes $M $F "$A" /tmp/p2.acc 2>/tmp/p2.log; wait
  echo "$b pair $r: $(grep -ho 'active GPU is \[[0-9]\]' /tmp/p1.log /tmp/p2.log | tr '\n' ' ') $(grep -hc 'in use by' /tmp/p1.log /tmp/p2.log | tr '\n' ' ')" | tee -a $OUT/res.txt
done; done
grep -h "in use by\|active GPU" /tmp/p1.log /tmp/p2.log | tee -a $OUT/res.txt
