#!/usr/bin/env bash
# Configures (once) and builds tinyrw into ./build with Ninja (ccache is used when present).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo}
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE"
fi
cmake --build build -j "$(nproc)"
