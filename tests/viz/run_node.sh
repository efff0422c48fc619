#!/bin/sh
# Runs a Node test script (tests/viz/*.mjs); exits 77, which CTest reports as skipped, when Node.js
# is not installed.
if ! command -v node >/dev/null 2>&1; then
  echo "skipped: node not installed (Debian package nodejs)"
  exit 77
fi
exec node "$@"
