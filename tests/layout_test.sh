#!/usr/bin/env bash
# Layering checks: the devices (runtime/) never include the Tensor front end (tensor/).
set -euo pipefail
src=$1
if grep -n '#include "tensor/' "$src"/runtime/*.h "$src"/runtime/*.cpp; then
  echo "runtime/ includes the front end (tensor/)" >&2
  exit 1
fi
echo "layout ok"
