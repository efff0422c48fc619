#!/usr/bin/env bash
# Builds a fuzzer with clang (ASan + UBSan) in build-fuzz/ and runs it for $1 seconds (default
# 300) on the seeds below; findings land in fuzz/findings/. $2 picks the target: rw (the .rw
# front end, the default) or safetensors (the safetensors reader).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-300}
target=${2:-rw}
if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang-16 CXX=clang++-16 cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DTINYRW_FUZZ=ON -DTINYRW_BUILD_TESTS=OFF -DTINYRW_BUILD_BENCH=OFF \
    -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer"
fi
cmake --build build-fuzz --target "fuzz_$target"
mkdir -p fuzz/findings
if [ "$target" = safetensors ]; then
  mkdir -p build-fuzz/corpus_safetensors
  exec ./build-fuzz/bin/fuzz_safetensors -max_total_time="$secs" -max_len=4096 -timeout=10 \
    -rss_limit_mb=2048 -artifact_prefix=fuzz/findings/ build-fuzz/corpus_safetensors \
    fuzz/corpus_safetensors
fi
# Seeds: the project's own .rw files, linked where they live (so they are never stale copies),
# and fuzz/corpus/, which keeps only inputs found nowhere else (crash regressions, tiny files).
# New inputs go to build-fuzz/corpus, the first directory.
mkdir -p fuzz/findings build-fuzz/corpus
rm -rf build-fuzz/seeds && mkdir -p build-fuzz/seeds
for f in rules/*.rw tests/dsl/*.rw tests/fixtures/*.rw fuzz/corpus/*; do
  ln -s "$PWD/$f" "build-fuzz/seeds/${f//\//_}"
done
./build-fuzz/bin/fuzz_rw -max_total_time="$secs" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix=fuzz/findings/ build-fuzz/corpus build-fuzz/seeds
