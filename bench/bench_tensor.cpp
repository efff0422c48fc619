// Tensor programs on the CPU device (LLVM JIT): elementwise add over 16M floats against memcpy
// bandwidth measured in the same run, and a 512x512 float32 matmul in GFLOPS. Kernels are
// compiled on the first iteration and cached afterwards.
#include <benchmark/benchmark.h>

#include <cstring>

#include "tensor/tensor.h"

using namespace tinyrw;

namespace {

constexpr int64_t kN = 16 * 1024 * 1024;

void BM_Baseline_Memcpy(benchmark::State& state) {
  std::vector<float> a(kN, 1.0f), b(kN);
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), kN * sizeof(float));
    benchmark::DoNotOptimize(b.data());
  }
  // bytes moved: read + write
  state.SetBytesProcessed(state.iterations() * kN * static_cast<int64_t>(sizeof(float)) * 2);
}
BENCHMARK(BM_Baseline_Memcpy)->Unit(benchmark::kMillisecond)->Iterations(10);

void BM_ElementwiseAdd16M(benchmark::State& state) {
  set_default_device("CPU");
  const Tensor a = Tensor::full({kN}, 1.0).contiguous(), b = Tensor::full({kN}, 2.0).contiguous();
  Tensor ra = a, rb = b;
  ra.realize();
  rb.realize();
  for (auto _ : state) {
    Tensor c = ra + rb;
    c.realize();
    benchmark::DoNotOptimize(c.uop());
  }
  // bytes moved: two reads and one write
  state.SetBytesProcessed(state.iterations() * kN * static_cast<int64_t>(sizeof(float)) * 3);
}
BENCHMARK(BM_ElementwiseAdd16M)->Unit(benchmark::kMillisecond)->Iterations(10);

void BM_Matmul512(benchmark::State& state) {
  set_default_device("CPU");
  Tensor a = Tensor::full({512, 512}, 0.5).contiguous(),
         b = Tensor::full({512, 512}, 0.25).contiguous();
  a.realize();
  b.realize();
  for (auto _ : state) {
    Tensor c = a.matmul(b);
    c.realize();
    benchmark::DoNotOptimize(c.uop());
  }
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * 512 * 512 * 512 * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Matmul512)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace

BENCHMARK_MAIN();
