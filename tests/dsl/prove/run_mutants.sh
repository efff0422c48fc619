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
# bad input: exit 2 with the reason
"$rwc" prove "$dir/missing.rw" >/dev/null 2>&1; [ $? -eq 2 ] || { echo "FAIL: a missing file"; failed=1; }
out=$("$rwc" prove "$dir/mutants.rw" --set nope 2>&1)
[ $? -eq 2 ] && grep -q "has no rule set 'nope'" <<<"$out" || { echo "FAIL: an unknown set: $out"; failed=1; }
# --json: the row of a refuted rule, and the totals
json=$("$rwc" prove "$dir/mutants.rw" --set m02 --json 2>/dev/null)
if command -v python3 >/dev/null; then
  python3 -c 'import json, sys
j = json.loads(sys.argv[1])
assert j["rules"][0]["status"] == "refuted" and "counterexample" in j["rules"][0], j
assert j["totals"]["refuted"] == 1 and j["totals"]["rules"] == 1, j' "$json" ||
    { echo "FAIL: --json"; failed=1; }
fi
[ $failed -eq 0 ] && echo "all mutants refuted"
exit $failed
