#!/bin/bash
# Process start-up on a host of several GPUs: main (devices probed one after another) against new (at once).
nvidia-smi --query-gpu=name --format=csv,noheader
M=testdata/kaldi/final.mdl; F=ark:testdata/kaldi/acc/feats_cmvn_deltas.ark; A="ark:gunzip -c testdata/kaldi/acc/ali.ark.gz|"
one() { local bin=$1; shift
  local t0=$(date +%s.%N)
  AMTOOL_TIMELINE=1 ./.exp/amtool.$bin acc-stats "$@" $M $F "$A" /tmp/o.$bin.acc 2>/tmp/err.$bin
  local t1=$(date +%s.%N)
  echo "$bin $* wall $(awk "BEGIN{printf \"%.3f\", $t1-$t0}") $(grep -o 'timeline:.*' /tmp/err.$bin)" | tee -a $OUT/res.txt
}
for b in main new; do one $b --use-gpu=yes >/dev/null; done
for r in 1 2 3 4 5; do
  for b in main new; do one $b --use-gpu=yes; one $b --use-gpu=yes --gpus=2; done
done
grep -h "LOG (amtool)" /tmp/err.new | head -12 | tee -a $OUT/res.txt
cmp /tmp/o.main.acc /tmp/o.new.acc && echo "same accs" | tee -a $OUT/res.txt
for b in main new; do
  ./.exp/amtool.$b bench --engine cpu --case startup --reps 5 --jobs 2 2>/dev/null | sed "s/^/$b /" | tee -a $OUT/res.txt
done
