#!/usr/bin/env bash
# Each wrong rule of mutants.rw must be refuted by `rwc prove`: exit 1 and a "rule refuted" error at
# the mutant's line.
set -uo pipefail
rwc=$1
dir=$(dirname "$0")
sets=$(grep -o '^ruleset m[0-9]*' "$dir/mutants.rw" | awk '{print $2}')
[ "$(echo "$sets" | wc -w)" -ge 20 ] || { echo "FAIL: fewer than 20 mutants"; exit 1; }
failed=0
for s in $sets; do
  out=$("$rwc" prove "$dir/mutants.rw" --set "$s" 2>&1)
  rc=$?
  if [ $rc -ne 1 ] || ! grep -q "mutants.rw:[0-9]*:[0-9]*: error: rule refuted: " <<<"$out"; then
    echo "FAIL: mutant $s was not refuted (exit $rc):"
    echo "$out"
    failed=1
  else
    echo "ok: $s: $(grep -m1 -o 'rule refuted: .*' <<<"$out" | cut -c1-160)"
  fi
done
exit $failed
