#!/bin/sh
# Regenerates the Kaldi outputs in this folder with the real Kaldi binaries
# (commit f4007661: PATH=$HOME/kaldi-f4007661/bin, LD_LIBRARY_PATH=$HOME/kaldi-f4007661/lib).
# Run from this folder. Inputs: mat.txt, v.txt, single.txt (hand-written),
# a.sph, b.sph (Sphinx files, see README.md), ../feats/post.first3.ark, ../feats/feats.first3.ark.
set -e
copy-matrix --scale=0.5 ark,t:mat.txt ark:mat_scale.ark
copy-matrix --apply-log ark,t:mat.txt ark:mat_log.ark
copy-matrix --apply-exp ark,t:mat.txt ark:mat_exp.ark
copy-matrix --apply-softmax-per-row ark,t:mat.txt ark:mat_softmax.ark
copy-matrix --apply-power=0.5 ark,t:mat.txt ark:mat_pow0.5.ark
copy-matrix --apply-power=-1.5 ark,t:mat.txt ark:mat_pow-1.5.ark
copy-matrix --scale=3 --apply-log --apply-power=0.7 ark,t:mat.txt ark:mat_scale_log_pow.ark
copy-matrix --apply-softmax-per-row --scale=-0.3 --apply-power=2 ark,t:mat.txt ark:mat_scale_softmax_pow.ark
copy-vector --scale=-1 --change_dim=5 ark,t:v.txt ark,t:v_scale_dim.txt
copy-vector --change-dim=2 ark,t:v.txt ark,t:v_dim.txt
copy-vector --binary=false --scale=3 --change_dim=5 single.txt single_scale_dim.txt
copy-post --scale=0.5 ark:../feats/post.first3.ark ark:- | gzip -9n > post_scale.ark.gz
copy-feats --write-num-frames=ark,t:num_frames.txt ark:../feats/feats.first3.ark ark:/dev/null
copy-feats --write-num-frames=ark:num_frames.ark ark:../feats/feats.first3.ark ark:/dev/null
printf 'a testdata/kaldi/copy_opts/a.sph\nb testdata/kaldi/copy_opts/b.sph\n' > sphinx.scp
(cd ../../.. && copy-feats --sphinx-in scp:testdata/kaldi/copy_opts/sphinx.scp ark:testdata/kaldi/copy_opts/sphinx.ark)
