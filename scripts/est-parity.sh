#!/usr/bin/env bash
# Does amtool's gmm-est write Kaldi's bytes, iteration by iteration, given Kaldi's inputs?
#
# usage: scripts/est-parity.sh WORKDIR
#   WORKDIR   a folder ../shared/tools/kaldi-recipe.sh has run in (data/, shims/,
#             exp/ali_kaldi and the Kaldi bundle are used)
#
# It runs pure-Kaldi copies of steps/train_mono.sh and steps/train_deltas.sh that keep
# every model and accumulator, and after each of Kaldi's gmm-est calls runs the shim's
# gmm-est on the same model and accumulators with the same options, then compares the
# model and occs files byte for byte (cmp). Prints one line per stage: updates compared
# and updates that differ (each differing one is named).
set -u
W=$(cd "$1" && pwd); cd "$W"
K=$W/kaldi-f4007661
[ -d "$K" ] && [ -d shims ] || { echo "$0: $W is not a kaldi-recipe.sh work folder" >&2; exit 2; }
export LD_LIBRARY_PATH=$K/lib LC_ALL=C PATH=$K/bin:$W/utils:$PATH
mkdir -p parity
# patched_copy SCRIPT REMOVE_LINES EST_OPTS: a copy of steps/SCRIPT whose per-iteration clean-up
# is replaced by the comparison (EST_OPTS: the script's own gmm-est options).
patched_copy() {
  python3 - "$W" "$@" <<'PY'
import sys
w, script, remove, opts = sys.argv[1:5]
s = open(f'{w}/steps/{script}').read()
assert remove in s, f'{script}: clean-up line not found'
s = s.replace(remove, '    cmp_iter $x\n', 1)
fn = f'''
cmp_iter() {{
  local x=$1 n=$[$1+1]
  {w}/shims/gmm-est {opts} --write-occs=$dir/$n.occs.am $dir/$x.mdl "gmm-sum-accs - $dir/$x.*.acc |" $dir/$n.mdl.am 2>$dir/log/am.update.$x.log
  if cmp -s $dir/$n.mdl $dir/$n.mdl.am && cmp -s $dir/$n.occs $dir/$n.occs.am; then echo SAME $x; else echo DIFFER $x; fi
}}
'''
s = s.replace('. parse_options.sh || exit 1;\n', '. parse_options.sh || exit 1;\n' + fn, 1)
open(f'{w}/parity/{script}', 'w').write(s)
PY
}
patched_copy train_mono.sh $'    rm $dir/$x.mdl $dir/$x.*.acc $dir/$x.occs 2>/dev/null\n' '--mix-up=$numgauss --power=$power'
patched_copy train_deltas.sh $'    rm $dir/$x.mdl $dir/$x.*.acc\n    rm $dir/$x.occs\n' '--mix-up=$numgauss --power=$power'
report() {  # report NAME LOG
  echo "$1: $(grep -c '^SAME\|^DIFFER' "$2") updates compared, $(grep -c '^DIFFER' "$2") differ" \
       "$(grep '^DIFFER' "$2" | sed 's/DIFFER /iteration /' | tr '\n' ' ')"
}
rm -rf exp/mono_parity exp/tri1_parity
bash parity/train_mono.sh --nj 2 --cmd utils/run.pl --totgauss 300 data/all data/lang \
  exp/mono_parity > parity/mono.log 2>&1
report train_mono.sh parity/mono.log
bash parity/train_deltas.sh --cmd utils/run.pl 300 1000 data/all data/lang exp/ali_kaldi \
  exp/tri1_parity > parity/tri1.log 2>&1
report train_deltas.sh parity/tri1.log
