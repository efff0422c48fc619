// Tensor programs on the CPU device (LLVM JIT): elementwise add over 16M floats against memcpy
// bandwidth measured in the same run, a 512x512 float32 matmul in GFLOPS (as a Tensor program and
// as a kernel AST) and a 1024x1024 one, an MLP training step against its forward pass, and an
// MNIST-sized MLP's forward pass, warm and on its first run (bench/side_by_side.py compares the
// matmuls and this MLP with tinygrad and OpenBLAS). Kernels are
// compiled on the first iteration and cached afterwards. Building and differentiating 10k- and
// 100k-op chains shows that graph construction is linear; scheduling a 20-layer MLP and a
// transformer block (nothing run) times the scheduler alone.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "codegen/opt.h"
#include "tensor/function.h"
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
  (ra + rb).realize();  // compiles the kernel: the loop measures running it
  for (auto _ : state) {
    Tensor c = ra + rb;
    c.realize();
    benchmark::DoNotOptimize(c.uop());
  }
  // bytes moved: two reads and one write
  state.SetBytesProcessed(state.iterations() * kN * static_cast<int64_t>(sizeof(float)) * 3);
}
BENCHMARK(BM_ElementwiseAdd16M)->Unit(benchmark::kMillisecond)->Iterations(10);

// a.sum() over 16M elements: one reduction kernel, one REDUCE loop over the whole buffer
void BM_Sum16M(benchmark::State& state) {
  set_default_device("CPU");
  Tensor a = Tensor::full({kN}, 1.0).contiguous();
  a.realize();
  a.sum().realize();  // compiles the kernel: the loop measures running it
  for (auto _ : state) {
    Tensor s = a.sum();
    s.realize();
    benchmark::DoNotOptimize(s.uop());
  }
  state.SetBytesProcessed(state.iterations() * kN * static_cast<int64_t>(sizeof(float)));
}
BENCHMARK(BM_Sum16M)->Unit(benchmark::kMillisecond)->Iterations(10);

// c[i] = a[i] + b[i] written as a custom kernel (compiled by LLVM like the built-in kernel above,
// which is the baseline): the cost of a kernel CALL over a fused elementwise kernel.
void BM_CustomKernelAdd16M(benchmark::State& state) {
  set_default_device("CPU");
  Tensor a = Tensor::full({kN}, 1.0).contiguous(), b = Tensor::full({kN}, 2.0).contiguous();
  a.realize();
  b.realize();
  auto add = [](const std::vector<UOp>& p) {
    const UOp i = UOp::range(UOp::cint(kN), 0);
    return kernel_sink({kernel_end(
        kernel_store(kernel_index(p[0], {i}), kernel_index(p[1], {i}) + kernel_index(p[2], {i})),
        {i})});
  };
  custom_kernel({Tensor::empty({kN}), a, b}, add)[0].realize();  // compiles it
  for (auto _ : state) {
    Tensor c = custom_kernel({Tensor::empty({kN}), a, b}, add)[0];
    c.realize();
    benchmark::DoNotOptimize(c.uop());
  }
  state.SetBytesProcessed(state.iterations() * kN * static_cast<int64_t>(sizeof(float)) * 3);
}
BENCHMARK(BM_CustomKernelAdd16M)->Unit(benchmark::kMillisecond)->Iterations(10);

// A float32 matmul of two n x n inputs (2n^3 flops a run), compiled before timing; 512 and 1024
// are bench/side_by_side.py's comparison with tinygrad and OpenBLAS.
template <int64_t kN>
void BM_MatmulOf(benchmark::State& state) {
  set_default_device("CPU");
  Tensor a = Tensor::full({kN, kN}, 0.5).contiguous(),
         b = Tensor::full({kN, kN}, 0.25).contiguous();
  a.realize();
  b.realize();
  a.matmul(b).realize();  // compiles the kernel: the loop measures running it
  for (auto _ : state) {
    Tensor c = a.matmul(b);
    c.realize();
    benchmark::DoNotOptimize(c.uop());
  }
  state.counters["GFLOPS"] =
      benchmark::Counter(2.0 * kN * kN * kN * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
void BM_Matmul512(benchmark::State& state) { BM_MatmulOf<512>(state); }
void BM_Matmul1024(benchmark::State& state) { BM_MatmulOf<1024>(state); }
// Real time: the GFLOPS counter (a rate) is otherwise over the main thread's CPU time, which
// misses the work of a kernel launched over several threads (CPU_THREADS).
BENCHMARK(BM_Matmul512)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();
BENCHMARK(BM_Matmul1024)->Unit(benchmark::kMillisecond)->Iterations(5)->UseRealTime();

// The same matmul given as a kernel AST, SINK(END(STORE(INDEX(P0, i*512+j),
// REDUCE(INDEX(P1, i*512+k) * INDEX(P2, k*512+j), k)), i, j)), run through custom_kernel: the
// same LINEAR program as BM_Matmul512's; it should match it.
// With opts by hand (codegen/opt.h) when state.range(0) is 1: UPCAST(1, 4), UPCAST(0, 4),
// UNROLL(0, 4), tinygrad's upcasts of a CPU matmul: 16 accumulators, vector loads of B's rows.
void BM_Matmul512KernelAst(benchmark::State& state) {
  set_default_device("CPU");
  Tensor a = Tensor::full({512, 512}, 0.5).contiguous(),
         b = Tensor::full({512, 512}, 0.25).contiguous();
  a.realize();
  b.realize();
  const std::vector<Opt> opts =
      state.range(0)
          ? std::vector<Opt>{{OptOp::Upcast, 1, 4}, {OptOp::Upcast, 0, 4}, {OptOp::Unroll, 0, 4}}
          : std::vector<Opt>{};
  auto kernel = [&](const std::vector<UOp>& p) {
    const UOp n = UOp::cint(512), i = UOp::range(n, 0), j = UOp::range(n, 1),
              k = UOp::range(n, 2, AxisType::Reduce);
    const UOp prod = kernel_index(p[1], {i * n + k}) * kernel_index(p[2], {k * n + j});
    const UOp sum = UOp::make(Op::Reduce, prod.dtype(), {prod, k},
                              Arg::tuple({Arg::op(Op::Add), Arg::integer(0)}));
    return with_opts(
        kernel_sink({kernel_end(kernel_store(kernel_index(p[0], {i * n + j}), sum), {i, j})},
                    "r_512_512_512"),
        opts);
  };
  auto call = [&] { return custom_kernel({Tensor::empty({512, 512}), a, b}, kernel)[0].realize(); };
  call();  // compiled before timing (later calls of the same body reuse it)
  for (auto _ : state) benchmark::DoNotOptimize(call().uop());
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * 512 * 512 * 512 * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Matmul512KernelAst)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(3);

// One training step of a 64 -> 128 -> 10 MLP on a batch of 256 (forward, gradient() from
// rules/gradient.rw, four assign() updates in one schedule) against the forward pass alone.
struct Mlp {
  Tensor x = Tensor::full({256, 64}, 0.1).contiguous().realize();
  Tensor w1 = Tensor::rand({64, 128}, 1).realize(), b1 = Tensor::rand({1, 128}, 2).realize();
  Tensor w2 = Tensor::rand({128, 10}, 3).realize(), b2 = Tensor::rand({1, 10}, 4).realize();
  Tensor loss() const {
    const Tensor out = (x.matmul(w1) + b1).relu().matmul(w2) + b2;
    return (out * out).mean();
  }
};

void BM_MlpForward(benchmark::State& state) {
  set_default_device("CPU");
  Mlp m;
  m.loss().realize();  // kernels compiled before timing
  for (auto _ : state) {
    Tensor l = m.loss();
    benchmark::DoNotOptimize(l.realize().uop());
  }
}
BENCHMARK(BM_MlpForward)->Unit(benchmark::kMillisecond)->Iterations(20);

// An MNIST-sized MLP forward pass, 784 -> 256 -> 10 on a batch of 64 (the logits, no loss), for
// bench/side_by_side.py's comparison with tinygrad and OpenBLAS: 26 MFLOP a run.
struct Mlp784 {
  Tensor x = Tensor::rand({64, 784}, 1).realize();
  Tensor w1 = Tensor::rand({784, 256}, 2).realize(), b1 = Tensor::rand({1, 256}, 3).realize();
  Tensor w2 = Tensor::rand({256, 10}, 4).realize(), b2 = Tensor::rand({1, 10}, 5).realize();
  Tensor forward() const { return (x.matmul(w1) + b1).relu().matmul(w2) + b2; }
};
constexpr double kMlp784Flop = 2.0 * 64 * (784 * 256 + 256 * 10);

// The forward pass, warm (kernels compiled before timing), or its first run: graph build,
// schedule, optimize, compile (LLVM) and run. There is no API that clears the compiled-kernel
// cache (tensor/realize.cpp's Realizer::g_compiled), so only the first run in the process is cold:
// one iteration, registered before the warm one (which compiles the same kernels).
// --benchmark_repetitions above 1 or random interleaving make the later runs warm ones.
template <bool kFirstRun>
void BM_MlpForward784Runs(benchmark::State& state) {
  set_default_device("CPU");
  Mlp784 m;  // parameters realized before timing
  if (!kFirstRun) m.forward().realize();
  for (auto _ : state) {
    Tensor out = m.forward();
    benchmark::DoNotOptimize(out.realize().uop());
  }
  state.counters["GFLOPS"] =
      benchmark::Counter(kMlp784Flop * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
void BM_MlpForward784FirstRun(benchmark::State& state) { BM_MlpForward784Runs<true>(state); }
void BM_MlpForward784(benchmark::State& state) { BM_MlpForward784Runs<false>(state); }
BENCHMARK(BM_MlpForward784FirstRun)->Unit(benchmark::kMillisecond)->Iterations(1)->UseRealTime();
BENCHMARK(BM_MlpForward784)->Unit(benchmark::kMillisecond)->Iterations(20)->UseRealTime();

void BM_MlpTrainStep(benchmark::State& state) {
  set_default_device("CPU");
  Mlp m;
  for (auto _ : state) {
    std::vector<Tensor> g = m.loss().gradient({m.w1, m.b1, m.w2, m.b2});
    m.w1.assign(m.w1 - g[0] * 0.01);
    m.b1.assign(m.b1 - g[1] * 0.01);
    m.w2.assign(m.w2 - g[2] * 0.01);
    m.b2.assign(m.b2 - g[3] * 0.01);
    Tensor::realize_all({&m.w1, &m.b1, &m.w2, &m.b2});
  }
}
BENCHMARK(BM_MlpTrainStep)->Unit(benchmark::kMillisecond)->Iterations(20);

// A data-parallel training step of a 784-256-10 MLP (a batch of 256, a squared-output loss, SGD):
// the batch split over N CPU devices (CPU:1..CPU:N), the weights whole on each (rules/multi.rw),
// their gradients summed across devices. N=1, the same step on one device, is the baseline of the
// same run. The devices' launches run at once (runtime/device_queues.h), sharing the cores.
void BM_DataParallelMlpStep(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<std::string> devs;
  for (int64_t i = 1; i <= n; ++i) devs.push_back(fmt::format("CPU:{}", i));
  auto place = [&](const Tensor& t, std::optional<int> axis) {
    return (n == 1 ? t.to(devs[0]) : t.shard(devs, axis)).realize();
  };
  Tensor x = place(Tensor::rand({256, 784}, 1).realize(), 0);
  Tensor w1 = place((Tensor::rand({784, 256}, 2) * 0.01).realize(), std::nullopt);
  Tensor w2 = place((Tensor::rand({256, 10}, 3) * 0.01).realize(), std::nullopt);
  auto step = [&] {
    Tensor out = x.matmul(w1).relu().matmul(w2);
    std::vector<Tensor> g = (out * out).mean().gradient({w1, w2});
    w1.assign(w1 - g[0] * 0.01);
    w2.assign(w2 - g[1] * 0.01);
    Tensor::realize_all({&w1, &w2});
  };
  step();  // kernels compiled before timing
  for (auto _ : state) step();
}
BENCHMARK(BM_DataParallelMlpStep)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(10)
    ->UseRealTime();

// The same forward pass through function(): traced once per call into a CALL, then inlined
// (fusing as before) or precompiled (its own kernels). Compare with BM_MlpForward.
template <bool Precompile>
void BM_MlpForwardFunction(benchmark::State& state) {
  set_default_device("CPU");
  Mlp m;
  auto forward = function(
      [](Tensor x, Tensor w1, Tensor b1, Tensor w2, Tensor b2) {
        const Tensor out = (x.matmul(w1) + b1).relu().matmul(w2) + b2;
        return (out * out).mean();
      },
      {.name = "mlp", .precompile = Precompile});
  forward(m.x, m.w1, m.b1, m.w2, m.b2).realize();  // kernels compiled before timing
  for (auto _ : state) {
    Tensor l = forward(m.x, m.w1, m.b1, m.w2, m.b2);
    benchmark::DoNotOptimize(l.realize().uop());
  }
}
BENCHMARK(BM_MlpForwardFunction<false>)->Unit(benchmark::kMillisecond)->Iterations(20);
BENCHMARK(BM_MlpForwardFunction<true>)->Unit(benchmark::kMillisecond)->Iterations(20);

// Building a 200-op elementwise graph, plainly and traced into a function CALL: the cost of
// tracing (parameter substitution, implicit-input scan) over graph construction.
void BM_Build200Ops(benchmark::State& state) {
  const Tensor a = Tensor::rand({16}, 1).realize();
  for (auto _ : state) {
    Tensor t = a;
    for (int i = 0; i < 200; ++i) t = t * 1.0001 + 0.5;
    benchmark::DoNotOptimize(t.uop());
  }
}
BENCHMARK(BM_Build200Ops)->Unit(benchmark::kMicrosecond);

void BM_Trace200OpsIntoFunction(benchmark::State& state) {
  const Tensor a = Tensor::rand({16}, 1).realize();
  auto f = function([](Tensor t) {
    for (int i = 0; i < 200; ++i) t = t * 1.0001 + 0.5;
    return t;
  });
  for (auto _ : state) benchmark::DoNotOptimize(f(a).uop());
}
BENCHMARK(BM_Trace200OpsIntoFunction)->Unit(benchmark::kMicrosecond);

// Graph building and differentiation are linear in the number of ops: an elementwise chain of
// 10k and of 100k ops (reading one buffer throughout, as a long expression does), built, then
// differentiated. Linear means the 100k runs take about 10x the 10k ones.
Tensor elementwise_chain(const Tensor& x, int64_t n) {
  Tensor y = x;
  for (int64_t i = 0; i < n; ++i) {
    switch (i % 4) {
      case 0:
        y = y + x;
        break;
      case 1:
        y = y * 1.0001;
        break;
      case 2:
        y = y.sin();
        break;
      default:
        y = y.maximum(x);
        break;
    }
  }
  return y;
}

void BM_BuildChain(benchmark::State& state) {
  const Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {4});
  for (auto _ : state) {
    const Tensor y = elementwise_chain(x, state.range(0));
    benchmark::DoNotOptimize(y.uop());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_BuildChain)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

// The same with a fresh buffer read by every op (a sum over many tensors): the list of buffers a
// graph reads is merged in O(1) per op, so this is linear too.
void BM_BuildChainOverDistinctBuffers(benchmark::State& state) {
  std::vector<Tensor> ws;
  for (int64_t i = 0; i < state.range(0); ++i)
    ws.push_back(Tensor::from_vector(std::vector<float>{static_cast<float>(i), 1}, {2}));
  for (auto _ : state) {
    Tensor acc = ws[0];
    for (const Tensor& w : ws) acc = acc + w;
    benchmark::DoNotOptimize(acc.storages().size());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_BuildChainOverDistinctBuffers)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

void BM_GradientOfChain(benchmark::State& state) {
  const Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {4});
  const Tensor loss = elementwise_chain(x, state.range(0)).sum();
  for (auto _ : state) {
    const std::vector<Tensor> g = loss.gradient({x});
    benchmark::DoNotOptimize(g[0].uop());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_GradientOfChain)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

// Scheduling alone (Tensor::schedule: the rangeify pipeline to the kernel graph and the order of
// its kernels, nothing run): the graph is built and scheduled every iteration, the parameters
// realized once before. An MLP of 20 Linear+relu layers (64 x 256 activations) ...
void BM_Schedule_Mlp20(benchmark::State& state) {
  set_default_device("CPU");
  const Tensor x = Tensor::rand({64, 256}, 1).realize();
  std::vector<Tensor> w, b;
  for (int i = 0; i < 20; ++i) {
    w.push_back(Tensor::rand({256, 256}, 10 + i).realize());
    b.push_back(Tensor::rand({1, 256}, 40 + i).realize());
  }
  for (auto _ : state) {
    Tensor h = x;
    for (int i = 0; i < 20; ++i) h = (h.matmul(w[i]) + b[i]).relu();
    benchmark::DoNotOptimize(Tensor::schedule({&h}).size());
  }
}
BENCHMARK(BM_Schedule_Mlp20)->Unit(benchmark::kMillisecond);

// ... and one transformer block (sequence 64, width 128, 4 heads): attention with a softmax, an MLP
// and two layernorms, written as tinygrad composes them (batched matmuls as broadcast, multiply
// and sum; layernorm as x - mean, times the rsqrt of the mean square plus eps).
Tensor layernorm(const Tensor& x, const Tensor& g, const Tensor& b) {
  const Tensor y = x - x.mean({-1}, true);
  return y * ((y * y).mean({-1}, true) + 1e-5).rsqrt() * g + b;
}
// (h, t, d) @ (h, d, s) -> (h, t, s)
Tensor bmm(const Tensor& a, const Tensor& b) {
  const Dims sa = a.shape(), sb = b.shape();
  return (a.reshape({sa[0], sa[1], sa[2], 1}) * b.reshape({sb[0], 1, sb[1], sb[2]})).sum({2});
}
void BM_Schedule_TransformerBlock(benchmark::State& state) {
  set_default_device("CPU");
  constexpr int64_t T = 64, D = 128, H = 4, Dh = D / H;
  const Tensor x = Tensor::rand({T, D}, 1).realize();
  const Tensor wq = Tensor::rand({D, D}, 2).realize(), wk = Tensor::rand({D, D}, 3).realize();
  const Tensor wv = Tensor::rand({D, D}, 4).realize(), wo = Tensor::rand({D, D}, 5).realize();
  const Tensor w1 = Tensor::rand({D, 4 * D}, 6).realize(),
               w2 = Tensor::rand({4 * D, D}, 7).realize();
  const Tensor g1 = Tensor::rand({1, D}, 8).realize(), b1 = Tensor::rand({1, D}, 9).realize();
  const Tensor g2 = Tensor::rand({1, D}, 10).realize(), b2 = Tensor::rand({1, D}, 11).realize();
  auto heads = [&](const Tensor& t) { return t.reshape({T, H, Dh}).permute({1, 0, 2}); };
  for (auto _ : state) {
    const Tensor q = heads(x.matmul(wq)), k = heads(x.matmul(wk)), v = heads(x.matmul(wv));
    const Tensor att = (bmm(q, k.permute({0, 2, 1})) * (1.0 / std::sqrt(double(Dh)))).softmax(-1);
    const Tensor o = bmm(att, v).permute({1, 0, 2}).reshape({T, D}).matmul(wo);
    const Tensor h = layernorm(x + o, g1, b1);
    Tensor out = layernorm(h + h.matmul(w1).relu().matmul(w2), g2, b2);
    benchmark::DoNotOptimize(Tensor::schedule({&out}).size());
  }
}
BENCHMARK(BM_Schedule_TransformerBlock)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
