#!/usr/bin/env bash
# Builds the fuzzer with clang (ASan + UBSan) in build-fuzz/ and runs it for $1 seconds
# (default 300) on the corpus; findings land in fuzz/findings/.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-300}
if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang-16 CXX=clang++-16 cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DTINYRW_FUZZ=ON -DTINYRW_BUILD_TESTS=OFF -DTINYRW_BUILD_BENCH=OFF \
    -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer"
fi
cmake --build build-fuzz --target fuzz_rw
mkdir -p fuzz/findings build-fuzz/corpus
cp -n fuzz/corpus/* build-fuzz/corpus/ 2>/dev/null || true
./build-fuzz/bin/fuzz_rw -max_total_time="$secs" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix=fuzz/findings/ build-fuzz/corpus
