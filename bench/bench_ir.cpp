// bench_ir: throughput and memory of the IR core.
//
//   UOp creation (fresh nodes and hash-cons hits), release, toposort, graph_rewrite (no match /
//   every CONST rebuilt) on 1M-node graphs, heap bytes per UOp, and BM_Baseline_* programs that
//   do the same amount of plain C++ work (malloc, new'ed vector nodes, pointer DFS, hash set).
//
// Every benchmark runs a fixed, small number of iterations so the whole binary stays well under a
// minute on two cores. Graph teardown is kept out of the timed region unless it is the subject.
//
//   ./build/bin/bench_ir                      all of them
//   ./build/bin/bench_ir --benchmark_filter=Rewrite

#include <malloc.h>

#include <chrono>
#include <cstdlib>
#include <vector>

#include <benchmark/benchmark.h>

#include "ir/graph.h"
#include "ir/rewrite.h"
#include "ir/uop.h"

using namespace tinyrw;

namespace {

constexpr int64_t kNodes = 1'000'000;  // graph size of the 1M-node benchmarks
constexpr int kWidth = 1000;           // DAG: kWidth x kLayers lattice
constexpr int kLayers = 1000;

size_t live_nodes() { return uop_table_stats().live_nodes; }

// Bytes in use on the malloc heap (glibc: in-use arena bytes + mmap'd chunks) plus the live
// nodes' cells in UOp's node arena (its own mmap), less the hash-consing table's slot memory
// (counted on its own: a table keeps its size when a graph is dropped, up to 16 MB, so its growth
// over one graph is not what that graph's nodes cost; BM_UOpMemory_Binary adds its slots per node).
int64_t heap_bytes() {
  const struct mallinfo2 mi = mallinfo2();
  const UOpTableStats t = uop_table_stats();
  return static_cast<int64_t>(mi.uordblks + mi.hblkhd + t.node_bytes - t.table_bytes -
                              t.table_retained_bytes);
}

UOp var_x() { return UOp::variable("x", 0, 100); }

// One untimed run before the timed ones, in the creation benchmarks and their baselines alike: the
// figures are for memory the process has touched before (the node arena's pages, malloc's), as in
// a compiler that builds and drops graphs pass after pass. Cold, the first graph also waits for
// the kernel to zero fresh pages: three cold iterations of BM_UOpCreate_Fresh ran at half the
// warm rate.
template <class F>
void warm_up(F&& build_and_drop) {
  build_and_drop();
}

// x + c0 + c1 + ... : `steps` ADDs and `steps` CONSTs, all fresh (2*steps nodes). The CONSTs are
// even (stride 2) from `first` so that k -> k+1 always makes a new node.
UOp build_chain(int64_t steps, int64_t first = 0) {
  UOp x = var_x();
  for (int64_t i = 0; i < steps; ++i) x = x + UOp::cint(first + 2 * i);
  return x;
}

// A lattice: layer 0 holds kWidth even CONSTs, node i of layer l is
// prev[i] + prev[(i+1) % kWidth]; a SINK over the last layer. kWidth*kLayers + 1 nodes, every
// node has two users, depth kLayers.
UOp build_dag(int width = kWidth, int layers = kLayers, int64_t first = 0) {
  std::vector<UOp> prev(width), cur(width);
  for (int i = 0; i < width; ++i) prev[i] = UOp::cint(first + 2 * i);
  for (int l = 1; l < layers; ++l) {
    for (int i = 0; i < width; ++i) cur[i] = prev[i] + prev[(i + 1) % width];
    prev.swap(cur);
  }
  return UOp::sink(prev);
}

// ---- UOp creation -------------------------------------------------------------------------------

// Fresh nodes: every iteration builds a 1M-node chain from nothing (the previous one is dropped
// outside the timed region).
void BM_UOpCreate_Fresh(benchmark::State& state) {
  const int64_t steps = state.range(0) / 2;
  warm_up([&] { build_chain(steps); });
  int64_t created = 0;
  for (auto _ : state) {
    const size_t before = live_nodes();
    UOp g = build_chain(steps);
    created += static_cast<int64_t>(live_nodes() - before);
    benchmark::DoNotOptimize(g);
    state.PauseTiming();
    g = UOp();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(created);
  state.counters["nodes"] = static_cast<double>(created) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_UOpCreate_Fresh)->Arg(kNodes)->Iterations(3)->Unit(benchmark::kMillisecond);

// Hash-cons hits: the chain is alive, rebuilding it finds every node in the table.
void BM_UOpCreate_HashConsHit(benchmark::State& state) {
  const int64_t steps = state.range(0) / 2;
  const UOp keep = build_chain(steps);
  const size_t live = live_nodes();
  for (auto _ : state) {
    UOp g = build_chain(steps);
    if (!(g == keep)) state.SkipWithError("rebuilt chain is a different node");
    benchmark::DoNotOptimize(g);
  }
  if (live_nodes() != live) state.SkipWithError("hash-cons hits created nodes");
  state.SetItemsProcessed(state.iterations() * 2 * steps);
}
BENCHMARK(BM_UOpCreate_HashConsHit)->Arg(kNodes)->Iterations(3)->Unit(benchmark::kMillisecond);

// x = x + x: every node differs only in its source, so its hash is a function of the source's
// hash alone. Run at two sizes: the rate should not depend on the size.
void BM_UOpCreate_SelfAddChain(benchmark::State& state) {
  const int64_t n = state.range(0);
  for (auto _ : state) {
    UOp x = var_x();
    for (int64_t i = 0; i < n; ++i) x = x + x;
    benchmark::DoNotOptimize(x);
    state.PauseTiming();
    x = UOp();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_UOpCreate_SelfAddChain)
    ->Arg(kNodes / 4)
    ->Arg(kNodes)
    ->Iterations(2)
    ->Unit(benchmark::kMillisecond);

// Dropping the last reference to a 1M-node chain (worklist release + table erase/shrink).
void BM_UOpRelease_Chain(benchmark::State& state) {
  const int64_t steps = state.range(0) / 2;
  for (auto _ : state) {
    state.PauseTiming();
    UOp g = build_chain(steps);
    state.ResumeTiming();
    g = UOp();
    benchmark::DoNotOptimize(g);
  }
  state.SetItemsProcessed(state.iterations() * 2 * steps);
}
BENCHMARK(BM_UOpRelease_Chain)->Arg(kNodes)->Iterations(3)->Unit(benchmark::kMillisecond);

// ---- toposort -----------------------------------------------------------------------------------

void toposort_bench(benchmark::State& state, const UOp& root) {
  size_t n = 0;
  for (auto _ : state) {
    std::vector<UOp> order = toposort(root);
    n = order.size();
    benchmark::DoNotOptimize(order.data());
    state.PauseTiming();
    order = {};
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
  state.counters["nodes"] = static_cast<double>(n);
}

void BM_Toposort_Chain(benchmark::State& state) {
  const UOp g = build_chain(kNodes / 2);
  toposort_bench(state, g);
}
BENCHMARK(BM_Toposort_Chain)->Iterations(5)->Unit(benchmark::kMillisecond);

void BM_Toposort_DAG(benchmark::State& state) {
  const UOp g = build_dag();
  toposort_bench(state, g);
}
BENCHMARK(BM_Toposort_DAG)->Iterations(5)->Unit(benchmark::kMillisecond);

// ---- graph_rewrite ------------------------------------------------------------------------------

// Times one graph_rewrite per iteration by hand (the result is dropped outside the timed region)
// and reports s_per_pass and nodes_per_s next to Google Benchmark's own figures.
void rewrite_bench(benchmark::State& state, const UOp& root, const Matcher& m,
                   const RewriteOptions& opts, bool expect_change) {
  const int64_t nodes = static_cast<int64_t>(toposort(root).size());
  double seconds = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    UOp r = graph_rewrite(root, &m, opts);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if ((r == root) == expect_change) state.SkipWithError("unexpected rewrite result");
    benchmark::DoNotOptimize(r);
    state.PauseTiming();
    r = UOp();
    state.ResumeTiming();
  }
  const double iters = static_cast<double>(state.iterations());
  state.SetItemsProcessed(state.iterations() * nodes);
  state.counters["nodes"] = static_cast<double>(nodes);
  state.counters["s_per_pass"] = seconds / iters;
  state.counters["nodes_per_s"] = static_cast<double>(nodes) * iters / seconds;
}

RewriteOptions walk_opts() {
  RewriteOptions o;
  o.walk = true;
  return o;
}

// (a) a rule tried on every node that never matches: the cost of the traversal itself.
const LambdaMatcher& never_matcher() {
  static const LambdaMatcher m = [] {
    LambdaMatcher lm("never");
    lm.add({}, [](RewriteContext&, const UOp&) { return UOp(); });
    return lm;
  }();
  return m;
}

// (b) CONST k -> CONST k+1: every CONST changes, so every node above it is rebuilt. Walk mode,
// since the fixed point of k -> k+1 does not exist.
const LambdaMatcher& bump_matcher() {
  static const LambdaMatcher m = [] {
    LambdaMatcher lm("bump");
    lm.add({Op::Const}, [](RewriteContext&, const UOp& x) {
      return x.arg().is_int() ? x.const_like(x.arg().as_int() + 1) : UOp();
    });
    return lm;
  }();
  return m;
}

void BM_Rewrite_NoMatch_Chain(benchmark::State& state) {
  const UOp g = build_chain(kNodes / 2);
  rewrite_bench(state, g, never_matcher(), {}, false);
}
BENCHMARK(BM_Rewrite_NoMatch_Chain)->Iterations(3)->Unit(benchmark::kMillisecond);

void BM_Rewrite_NoMatch_DAG(benchmark::State& state) {
  const UOp g = build_dag();
  rewrite_bench(state, g, never_matcher(), {}, false);
}
BENCHMARK(BM_Rewrite_NoMatch_DAG)->Iterations(3)->Unit(benchmark::kMillisecond);

void BM_Rewrite_NoMatchWalk_Chain(benchmark::State& state) {
  const UOp g = build_chain(kNodes / 2);
  rewrite_bench(state, g, never_matcher(), walk_opts(), false);
}
BENCHMARK(BM_Rewrite_NoMatchWalk_Chain)->Iterations(3)->Unit(benchmark::kMillisecond);

void BM_Rewrite_ConstBump_Chain(benchmark::State& state) {
  const UOp g = build_chain(kNodes / 2);
  rewrite_bench(state, g, bump_matcher(), walk_opts(), true);
}
BENCHMARK(BM_Rewrite_ConstBump_Chain)->Iterations(3)->Unit(benchmark::kMillisecond);

void BM_Rewrite_ConstBump_DAG(benchmark::State& state) {
  const UOp g = build_dag();
  rewrite_bench(state, g, bump_matcher(), walk_opts(), true);
}
BENCHMARK(BM_Rewrite_ConstBump_DAG)->Iterations(3)->Unit(benchmark::kMillisecond);

// ---- memory -------------------------------------------------------------------------------------

// 1M binary nodes (x = x + x), memory per node: the heap's growth (node cell + malloc overhead)
// plus the table's slots per live node while the graph lives.
void BM_UOpMemory_Binary(benchmark::State& state) {
  const int64_t n = state.range(0);
  double per_node = 0, after_drop = 0;
  size_t live_before = 0, live_after = 0;
  for (auto _ : state) {
    UOp x = var_x();
    live_before = live_nodes();
    const int64_t h0 = heap_bytes();
    for (int64_t i = 0; i < n; ++i) x = x + x;
    const int64_t h1 = heap_bytes();
    const UOpTableStats t = uop_table_stats();
    const size_t made = live_nodes() - live_before;
    per_node = static_cast<double>(h1 - h0) / static_cast<double>(made) +
               static_cast<double>(t.table_bytes) / static_cast<double>(t.live_nodes);
    x = var_x();  // drop the graph, keep the leaf
    live_after = live_nodes();
    after_drop = static_cast<double>(heap_bytes() - h0);
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["bytes_per_uop"] = per_node;
  state.counters["node_struct_bytes"] = static_cast<double>(uop_node_bytes(2));
  state.counters["live_before"] = static_cast<double>(live_before);
  state.counters["live_after_drop"] = static_cast<double>(live_after);
  state.counters["heap_after_drop"] = after_drop;  // bytes still held once the graph is gone
  state.counters["table_retained_after_drop"] =
      static_cast<double>(uop_table_stats().table_retained_bytes);
  state.counters["table_after_drop"] = static_cast<double>(uop_table_stats().table_bytes);
}
BENCHMARK(BM_UOpMemory_Binary)->Arg(kNodes)->Iterations(1)->Unit(benchmark::kMillisecond);

// ---- baselines ----------------------------------------------------------------------------------

// The same number of malloc'd blocks of a UOp node's size, two pointers each, then freed.
struct RawNode {
  RawNode* src[2];
};

void BM_Baseline_Malloc(benchmark::State& state) {
  const int64_t n = state.range(0);
  const size_t bytes = uop_node_bytes(2);
  std::vector<RawNode*> nodes;
  nodes.reserve(static_cast<size_t>(n));
  warm_up([&] {
    for (int64_t i = 0; i < n; ++i) nodes.push_back(static_cast<RawNode*>(std::malloc(bytes)));
    for (RawNode* p : nodes) std::free(p);
    nodes.clear();
  });
  double per_node = 0;
  for (auto _ : state) {
    const int64_t h0 = heap_bytes();
    RawNode* prev = nullptr;
    for (int64_t i = 0; i < n; ++i) {
      auto* p = static_cast<RawNode*>(std::malloc(bytes));
      p->src[0] = prev;
      p->src[1] = prev;
      nodes.push_back(p);
      prev = p;
    }
    per_node = static_cast<double>(heap_bytes() - h0) / static_cast<double>(n);
    benchmark::DoNotOptimize(nodes.data());
    state.PauseTiming();
    for (RawNode* p : nodes) std::free(p);
    nodes.clear();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["bytes_per_node"] = per_node;
}
BENCHMARK(BM_Baseline_Malloc)->Arg(kNodes)->Iterations(3)->Unit(benchmark::kMillisecond);

// new'ed nodes that hold their two sources in a std::vector (two allocations per node).
struct VecNode {
  std::vector<VecNode*> src;
  bool visited = false;
};

void BM_Baseline_VectorNodes(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<VecNode*> nodes;
  nodes.reserve(static_cast<size_t>(n));
  warm_up([&] {
    for (int64_t i = 0; i < n; ++i) nodes.push_back(new VecNode{{nullptr, nullptr}});
    for (VecNode* p : nodes) delete p;
    nodes.clear();
  });
  double per_node = 0;
  for (auto _ : state) {
    const int64_t h0 = heap_bytes();
    VecNode* prev = nullptr;
    for (int64_t i = 0; i < n; ++i) {
      auto* p = new VecNode{{prev, prev}};
      nodes.push_back(p);
      prev = p;
    }
    per_node = static_cast<double>(heap_bytes() - h0) / static_cast<double>(n);
    benchmark::DoNotOptimize(nodes.data());
    state.PauseTiming();
    for (VecNode* p : nodes) delete p;
    nodes.clear();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["bytes_per_node"] = per_node;
}
BENCHMARK(BM_Baseline_VectorNodes)->Arg(kNodes)->Iterations(3)->Unit(benchmark::kMillisecond);

// Iterative post-order DFS over the same lattice as BM_Toposort_DAG, in VecNodes with a visited
// flag: what toposort would cost without refcounts and a hash set.
void BM_Baseline_PointerDFS_DAG(benchmark::State& state) {
  std::vector<VecNode*> all;
  std::vector<VecNode*> prev(kWidth), cur(kWidth);
  for (auto& p : prev) all.push_back(p = new VecNode{});
  for (int l = 1; l < kLayers; ++l) {
    for (int i = 0; i < kWidth; ++i)
      all.push_back(cur[i] = new VecNode{{prev[i], prev[(i + 1) % kWidth]}});
    prev.swap(cur);
  }
  auto* root = new VecNode{prev};
  all.push_back(root);
  size_t n = 0;
  for (auto _ : state) {
    state.PauseTiming();
    for (VecNode* p : all) p->visited = false;
    state.ResumeTiming();
    std::vector<VecNode*> out;
    std::vector<std::pair<VecNode*, size_t>> stack{{root, 0}};
    root->visited = true;
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (next < node->src.size()) {
        VecNode* c = node->src[next++];
        if (!c->visited) {
          c->visited = true;
          stack.emplace_back(c, 0);
        }
        continue;
      }
      out.push_back(node);
      stack.pop_back();
    }
    n = out.size();
    benchmark::DoNotOptimize(out.data());
  }
  for (VecNode* p : all) delete p;
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
  state.counters["nodes"] = static_cast<double>(n);
}
BENCHMARK(BM_Baseline_PointerDFS_DAG)->Iterations(5)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
