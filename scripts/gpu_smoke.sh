#!/usr/bin/env bash
# The GPU smoke check, on a machine with an NVIDIA (CUDA) or AMD (HIP) GPU, in under 3 minutes on
# a built tree: the device query (rw devices), every parameterized tensor test on the GPU (their
# */CUDA or */HIP instances: tests/tensor/on_device.h adds the GPU where it opens), and add / sum /
# matmul of 4096x4096 float32 on the GPU against the CPU device and a host memcpy (bench_devices).
#
# usage: scripts/gpu_smoke.sh [CUDA|HIP]        BUILD=DIR picks the build (./build by default;
#        scripts/build.sh makes it). Exit status 0 when the GPU opened and every test passed.
set -uo pipefail
cd "$(dirname "$0")/.."
device=${1:-CUDA}
build=${BUILD:-build}
if [ ! -x "$build/bin/rw" ]; then
  echo "gpu_smoke: no build in $build (run scripts/build.sh, or set BUILD)" >&2
  exit 2
fi

echo "== device query"
"$build/bin/rw" devices
if ! "$build/bin/rw" devices | grep -Eq "^$device +.*(sm_|gfx)"; then
  echo "gpu_smoke: $device is not available here (the reason is above)" >&2
  exit 1
fi

echo "== the tensor tests on $device (each test program at once, 150 s at most)"
failed=0
logs=$(mktemp -d)
for t in "$build"/bin/test_*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  (timeout 150 "$t" --gtest_filter="*/$device" --gtest_brief=1 > "$logs/$name.log" 2>&1
   echo $? > "$logs/$name.rc") &
done
wait
for rc in "$logs"/*.rc; do
  name=$(basename "$rc" .rc)
  if [ "$(cat "$rc")" = 0 ]; then
    echo "$name: $(grep -Eo '[0-9]+ tests? from [0-9]+ test suites? ran' "$logs/$name.log" | tail -1)"
  else
    echo "$name: FAILED (exit $(cat "$rc"))"
    grep -E "Failure|FAILED|rror" "$logs/$name.log" | head -20
    failed=1
  fi
done
rm -rf "$logs"

echo "== add / sum / matmul 4096x4096 float32: $device against CPU"
BENCH_N=${BENCH_N:-4096} "$build/bin/bench_devices" \
  --benchmark_filter="Baseline|/CPU|/$device" || failed=1
exit $failed
