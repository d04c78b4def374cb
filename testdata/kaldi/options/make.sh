#!/bin/sh
# Writes TOOL.txt for each Kaldi tool named on the command line: every option
# the tool registers (its own and Kaldi's standard ones), one a line, as its
# --help prints them: "--name TYPE DEFAULT" (a string default keeps its quotes,
# e.g. --write-num-frames string ""). Run from this folder with the Kaldi
# binaries (commit f4007661) on PATH, e.g.
#   PATH=$HOME/kaldi-f4007661/bin:$PATH LD_LIBRARY_PATH=$HOME/kaldi-f4007661/lib ./make.sh gmm-est
set -e
for tool in "$@"; do
  # An option's help may run on to the next line: join it first.
  "$tool" --help 2>&1 |
    awk '/^  --/ { if (o) print o; o = $0; next } o && /^ *[^ ]/ && !/:/ { o = o " " $0; next } { if (o) print o; o = "" } END { if (o) print o }' |
    sed -n 's/^  \(--[A-Za-z0-9_-]*\) .*(\([a-z]*\), default = \(.*\))$/\1 \2 \3/p' > "$tool.txt"
  test -s "$tool.txt"
done
