#!/usr/bin/env bash
# spec/tinyspec.tex typesets cleanly: pdflatex (Debian's texlive-latex-base, which
# scripts/setup.sh installs) builds it without an error, a missing character (a plain `>` under
# the OT1 encoding prints as an inverted question mark) or a line that runs into the margin.
set -u
doc=$1
if ! command -v pdflatex > /dev/null 2>&1; then
  echo "skipped: pdflatex is not installed (Debian texlive-latex-base; scripts/setup.sh installs it)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
for pass in 1 2; do  # longtable settles its column widths on the second pass
  if ! pdflatex -interaction=nonstopmode -halt-on-error "$doc" > pass$pass.out 2>&1; then
    grep -A3 '^!' tinyspec.log || tail -20 pass$pass.out
    echo "pdflatex failed on $doc"
    exit 1
  fi
done
fail=0
if grep -q 'Missing character' tinyspec.log; then
  grep 'Missing character' tinyspec.log | sort | uniq -c
  fail=1
fi
# an overfull line by more than a few points runs visibly into the margin
if grep -E 'Overfull \\hbox \(([0-9]{2,}|[4-9])\.[0-9]+pt too wide' tinyspec.log; then fail=1; fi
if grep -E 'LaTeX Warning: (Reference|Citation|There were undefined)' tinyspec.log; then fail=1; fi
[ -s tinyspec.pdf ] || { echo "no PDF written"; fail=1; }
[ $fail -eq 0 ] && echo "spec PDF: $(wc -c < tinyspec.pdf) bytes, $(grep -o 'Output written on .*(\([0-9]*\) pages' tinyspec.log | grep -o '[0-9]* pages')"
exit $fail
