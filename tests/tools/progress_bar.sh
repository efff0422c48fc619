#!/usr/bin/env bash
# The main job's progress (examples/fashion_mnist.cpp): on a terminal (a pty made by util-linux's
# `script`) one bar redrawn in place with step, loss, images/s and ETA, filling as steps go; piped,
# plain lines and no carriage returns.
set -uo pipefail
bin=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

script -qec "$bin --steps 2 --bs 8 --out $dir/w.safetensors" /dev/null >"$dir/tty.txt" ||
  fail "the run on a terminal exited $?"
tty=$(tr -d '\n' <"$dir/tty.txt")
bars=$(grep -o $'\r\\[[= ]*\\] step [0-9]*/2  loss [0-9.]*  [0-9]* img/s  ETA [0-9]*:[0-9][0-9]' \
  <<<"$tty" | tr -d '\r')
echo "on a terminal:"; echo "$bars"
[ "$(wc -l <<<"$bars")" -eq 2 ] || fail "expected 2 bar updates, got: $(cat -A "$dir/tty.txt")"
first=$(head -1 <<<"$bars"); last=$(tail -1 <<<"$bars")
[[ $first == *"step 1/2"* && $last == *"step 2/2"* ]] || fail "steps out of order"
filled() { local b=${1%%]*}; b=${b//[^=]/}; echo ${#b}; }
[ "$(filled "$first")" -eq 15 ] && [ "$(filled "$last")" -eq 30 ] ||
  fail "the bar does not fill: $(filled "$first") then $(filled "$last") of 30"
grep -q "^step 1/2 loss" "$dir/tty.txt" && fail "plain lines on a terminal"

"$bin" --steps 2 --bs 8 --out "$dir/w.safetensors" >"$dir/pipe.txt" || fail "the piped run exited $?"
echo "piped:"; cat "$dir/pipe.txt"
grep -q $'\r' "$dir/pipe.txt" && fail "carriage returns when piped"
grep -Eq '^step 1/2 loss [0-9.]+ [0-9]+ img/s ETA [0-9]+ s$' "$dir/pipe.txt" &&
  grep -Eq '^step 2/2 loss [0-9.]+ [0-9]+ img/s ETA 0 s$' "$dir/pipe.txt" || fail "no plain progress lines"
echo "progress bar ok"
