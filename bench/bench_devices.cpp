// Throughput of add, sum and matmul over N x N float32 (N = $BENCH_N, 4096 by default) on each
// device here: CPU, and CUDA and HIP where such a GPU opens (runtime/gpu_runtime.h); beside a
// host memcpy of the same bytes measured in the same run. scripts/gpu_smoke.sh reports these.
// Each iteration realizes one result from inputs already on the device, then waits for the
// device (a GPU's kernels run asynchronously); the first run, which compiles, is not timed.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "runtime/gpu_runtime.h"
#include "runtime/storage.h"
#include "tensor/tensor.h"

using namespace tinyrw;

namespace {

int64_t bench_n() {
  const char* n = std::getenv("BENCH_N");
  return n ? std::atoll(n) : 4096;
}

// Waits for the device's queued work.
void wait_for(const std::string& device) {
  if (is_gpu_device(device)) gpu_runtime(device).synchronize();
}

// An N x N input on `device`, realized there.
Tensor input(const std::string& device, uint64_t seed) {
  set_default_device("CPU");
  Tensor t = Tensor::rand({bench_n(), bench_n()}, seed).to(device);
  t.realize();
  wait_for(device);
  return t;
}

// `op` realized once untimed, then once per iteration.
void run(benchmark::State& state, const std::string& device, const std::function<Tensor()>& op) {
  op().realize();
  wait_for(device);
  for (auto _ : state) {
    Tensor r = op();
    r.realize();
    wait_for(device);
    benchmark::DoNotOptimize(r.uop());
  }
}

void BM_Baseline_Memcpy(benchmark::State& state) {
  const size_t n = static_cast<size_t>(bench_n() * bench_n()) * sizeof(float);
  BufferBytes from(n, 1), to(n, 0);
  for (auto _ : state) {
    std::memcpy(to.data(), from.data(), n);
    benchmark::DoNotOptimize(to.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(n) * 2);
}
BENCHMARK(BM_Baseline_Memcpy)->Unit(benchmark::kMillisecond)->Iterations(5);

void register_device(const std::string& device) {
  const int64_t n = bench_n();
  const int64_t bytes = n * n * static_cast<int64_t>(sizeof(float));
  benchmark::RegisterBenchmark(
      fmt::format("Add/{}", device).c_str(),
      [device, bytes](benchmark::State& state) {
        const Tensor a = input(device, 1), b = input(device, 2);
        run(state, device, [&] { return a + b; });
        state.SetBytesProcessed(state.iterations() * bytes * 3);  // two reads, one write
      })
      ->Unit(benchmark::kMillisecond)
      ->Iterations(5)
      ->UseRealTime();
  benchmark::RegisterBenchmark(fmt::format("Sum/{}", device).c_str(),
                               [device, bytes](benchmark::State& state) {
                                 const Tensor a = input(device, 1);
                                 run(state, device, [&] { return a.sum(); });
                                 state.SetBytesProcessed(state.iterations() * bytes);
                               })
      ->Unit(benchmark::kMillisecond)
      ->Iterations(5)
      ->UseRealTime();
  benchmark::RegisterBenchmark(fmt::format("Matmul/{}", device).c_str(),
                               [device, n](benchmark::State& state) {
                                 const Tensor a = input(device, 1), b = input(device, 2);
                                 run(state, device, [&] { return a.matmul(b); });
                                 state.counters["FLOPS"] =
                                     benchmark::Counter(static_cast<double>(2 * n * n * n) *
                                                            static_cast<double>(state.iterations()),
                                                        benchmark::Counter::kIsRate);
                               })
      ->Unit(benchmark::kMillisecond)
      ->Iterations(2)
      ->UseRealTime();
}

}  // namespace

int main(int argc, char** argv) {
  for (const char* device : {"CPU", "CUDA", "HIP"}) {
    if (device_available(device))
      register_device(device);
    else if (is_gpu_device(device))
      fmt::print(stderr, "{}: not measured: {}\n", device, gpu_unavailable(device).value_or(""));
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
