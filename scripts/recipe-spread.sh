#!/usr/bin/env bash
# How far amtool's shims move a Kaldi recipe, set beside how far Kaldi moves itself.
#
# usage: scripts/recipe-spread.sh WORKDIR [CORETYPE]
#   WORKDIR   a folder ../shared/tools/kaldi-recipe.sh has run in (its exp/mono_*,
#             exp/tri1_*, exp/ali_kaldi, data/, shims/ and Kaldi bundle are used)
#   CORETYPE  the OpenBLAS kernel set Kaldi's second run takes (default Sandybridge:
#             the AVX kernels of CPUs without AVX2; the bundle's OpenBLAS picks its
#             kernels by CPU at run time, so Kaldi's floats differ between machines)
#
# It runs, pure Kaldi and with the shims first on PATH, what a recipe runs after
# train_deltas.sh: steps/train_lda_mllt.sh (tri2), steps/train_sat.sh (tri3) and
# steps/align_fmllr.sh, each from pure Kaldi's alignments of the stage before. Then it
# runs every training stage (mono, tri1, tri2, tri3) once more with pure Kaldi under
# OPENBLAS_CORETYPE=CORETYPE, from the same inputs, and prints per stage the worst
# relative difference of avg like per frame over the iterations: Kaldi against
# amtool, and Kaldi against Kaldi on other BLAS kernels. It also counts the frames
# whose align_fmllr.sh alignment differs.
set -u
W=$(cd "$1" && pwd); CT=${2:-Sandybridge}; cd "$W"
K=$W/kaldi-f4007661
[ -d "$K" ] && [ -d shims ] || { echo "$0: $W is not a kaldi-recipe.sh work folder" >&2; exit 2; }
export LD_LIBRARY_PATH=$K/lib LC_ALL=C PATH=$K/bin:$W/utils:$PATH
run() {  # run NAME VARIANT CMD... : exp/NAME_VARIANT, log NAME.VARIANT.log
  local n=$1 v=$2; shift 2
  rm -rf exp/${n}_$v
  ( case $v in amtool) export PATH=$W/shims:$PATH ;; blas) export OPENBLAS_CORETYPE=$CT ;; esac
    "$@" exp/${n}_$v > $n.$v.log 2>&1 ) || echo "$n $v: failed (see $W/$n.$v.log)"
}
align() {  # align MODEL_DIR OUT_DIR : pure Kaldi's alignments
  [ -d exp/$2 ] || steps/align_si.sh --nj 2 --cmd utils/run.pl data/all data/lang exp/$1 exp/$2 > $2.log 2>&1
}
align tri1_kaldi ali1_kaldi
for v in kaldi amtool blas; do
  run tri2 $v steps/train_lda_mllt.sh --cmd utils/run.pl 300 1000 data/all data/lang exp/ali1_kaldi
done
align tri2_kaldi ali2_kaldi
for v in kaldi amtool blas; do
  run tri3 $v steps/train_sat.sh --cmd utils/run.pl 300 1000 data/all data/lang exp/ali2_kaldi
done
for v in kaldi amtool; do
  run alifm $v steps/align_fmllr.sh --nj 2 --cmd utils/run.pl data/all data/lang exp/tri3_kaldi
done
run mono blas steps/train_mono.sh --nj 2 --cmd utils/run.pl --totgauss 300 data/all data/lang
run tri1 blas steps/train_deltas.sh --cmd utils/run.pl 300 1000 data/all data/lang exp/ali_kaldi
python3 - "$CT" <<'PY'
import re, subprocess, sys
def last(p):
    try:
        m = re.findall(r'avg like per frame = ([-0-9.e]+)', open(p).read())
        return float(m[-1]) if m else None
    except FileNotFoundError:
        return None
def spread(n, a, b):
    w, k = 0.0, 0
    for i in range(100):
        x, y = last(f'exp/{n}_{a}/log/update.{i}.log'), last(f'exp/{n}_{b}/log/update.{i}.log')
        if x is not None and y is not None:
            k, w = k + 1, max(w, abs(x - y) / abs(x))
    return f'{w:.2g} ({k} iterations)'
print(f'worst relative difference of avg like per frame, from the same inputs:')
print(f'{"stage":6} {"Kaldi vs amtool":>22} {"Kaldi vs Kaldi (" + sys.argv[1] + ")":>34}')
for n in ('mono', 'tri1', 'tri2', 'tri3'):
    print(f'{n:6} {spread(n, "kaldi", "amtool"):>22} {spread(n, "kaldi", "blas"):>34}')
def ali(v, j):
    out = subprocess.run(['copy-int-vector', f'ark:gunzip -c exp/alifm_{v}/ali.{j}.gz|', 'ark,t:-'],
                         capture_output=True, text=True).stdout
    return {l.split()[0]: l.split()[1:] for l in out.splitlines() if l.strip()}
n = d = 0
for j in (1, 2):
    a, b = ali('kaldi', j), ali('amtool', j)
    for u in a:
        x, y = a[u], b.get(u, [])
        n += len(x)
        d += sum(p != q for p, q in zip(x, y)) + abs(len(x) - len(y))
print(f'align_fmllr.sh: {d} of {n} frames aligned differently (Kaldi vs amtool)')
PY
