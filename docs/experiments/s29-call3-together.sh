#!/bin/bash
# Twenty-ninth session, call 3 (2-GPU kind): jobs started together on the
# final selection code (devices probed at once, claims counted before the
# context). Each job reads its archive through a pipe that waits 1.5 s
# first, so it outlasts the other jobs' choices, as a recipe's jobs on
# real archives do. 2 at once, three times; 4 at once, twice. The GPU
# lines of each log, and the outputs compared.
A=.device/bin/amtool
M=testdata/kaldi/ubm.0.dubm
F="ark:sleep 1.5; cat testdata/kaldi/feats/feats_cmvn_deltas.first3.ark |"
nvidia-smi --query-gpu=index,name,memory.used --format=csv,noheader
for n in 2 2 2 4 4; do
  echo "== $n at once"
  for i in $(seq 1 $n); do $A acc-stats --use-gpu=yes $M "$F" $OUT/j$i.acc 2> $OUT/j$i.log & done; wait
  for i in $(seq 1 $n); do echo "-- job $i"; grep -E "Selecting|cudaSetDevice|in use by|active GPU" $OUT/j$i.log; done
  for i in $(seq 2 $n); do cmp $OUT/j1.acc $OUT/j$i.acc && echo "job $i: same bytes as job 1"; done
done
