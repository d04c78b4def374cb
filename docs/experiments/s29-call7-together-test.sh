#!/bin/bash
# Twenty-ninth session, call 7 (2-GPU kind): the new test
# cli_gpus::jobs_started_together_take_different_gpus on two GPUs (three
# times), on one visible GPU (it says it is skipped), and what its claims
# assertion guards: two jobs whose claims are in folders of their own do
# not see each other's ("in use by" absent). Stage .device/bin/amtool and
# .device/tests/cli_gpus (release builds).
export AMTOOL_REQUIRE_GPU=1
for i in 1 2 3; do .device/tests/cli_gpus jobs_started_together --nocapture 2>&1 | grep -E "^test |skipped|panicked|test result"; done
CUDA_VISIBLE_DEVICES=0 .device/tests/cli_gpus jobs_started_together --nocapture 2>&1 | grep -E "^test |skipped|panicked|test result"
.device/tests/cli_gpus 2>&1 | grep -E "test result|FAILED|panicked"
F="ark:sleep 1; cat testdata/kaldi/acc/feats_cmvn_deltas.ark |"
for i in 1 2; do mkdir -p /tmp/own$i; TMPDIR=/tmp/own$i .device/bin/amtool acc-stats --use-gpu=yes testdata/kaldi/ubm.0.dubm "$F" /tmp/own$i.acc 2> /tmp/own$i.log & done; wait
for i in 1 2; do echo "-- own claims folder $i"; grep -E "in use by|active GPU" /tmp/own$i.log; done
