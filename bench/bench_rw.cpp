// Compiled (rwc) versus interpreted rule sets on the same rules and the same graphs.
// The ratio of interest: BM_Rewrite<Interpreted> time / BM_Rewrite<Compiled> time (target >= 5x).
#include <benchmark/benchmark.h>

#include <random>

#include "dsl/compiled.h"
#include "dsl/interp.h"
#include "ir/graph.h"
#include "ir/rewrite.h"

using namespace tinyrw;
using namespace tinyrw::rw;

namespace {

// A wide forest of index expressions full of identities, like-term pairs and constant chains.
UOp build_graph(int roots, uint32_t seed) {
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  const UOp vars[] = {UOp::variable("a", 0, 100), UOp::variable("b", -5, 5),
                      UOp::variable("c", 1, 9)};
  std::vector<UOp> out;
  for (int r = 0; r < roots; ++r) {
    UOp e = vars[pick(3)];
    for (int d = 0; d < 12; ++d) {
      const UOp v = vars[pick(3)];
      switch (pick(8)) {
        case 0:
          e = e + 0;
          break;
        case 1:
          e = e * 1;
          break;
        case 2:
          e = (e + pick(5)) + pick(7);
          break;
        case 3:
          e = e * 3 + e * 5;
          break;
        case 4:
          e = e.maximum(v);
          break;
        case 5:
          e = (e * 2) * 4;
          break;
        case 6:
          e = e + v * pick(4);
          break;
        default:
          e = e.floordiv(UOp::cint(1)) + v.lt(UOp::cint(50)).where(e, v);
          break;
      }
    }
    out.push_back(e);
  }
  return UOp::sink(out);
}

struct Fixture {
  std::shared_ptr<const ResolvedProgram> program;
  std::unique_ptr<InterpretedMatcher> interpreted;
  const RuleSetMatcher* compiled;
  UOp graph;
  size_t nodes;
  Fixture() {
    Diagnostics d;
    program = load_rules(TINYRW_SOURCE_DIR "/tests/fixtures/examples.rw", d);
    if (!program) throw std::runtime_error(d.render());
    interpreted = std::make_unique<InterpretedMatcher>(program, *program->find("examples"));
    compiled = compiled_rules("examples");
    graph = build_graph(2000, 7);
    nodes = toposort(graph).size();
  }
};
Fixture& fixture() {
  static Fixture f;
  return f;
}

void BM_RewriteCompiled(benchmark::State& state) {
  Fixture& f = fixture();
  for (auto _ : state) benchmark::DoNotOptimize(graph_rewrite(f.graph, f.compiled));
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(f.nodes));
  state.counters["nodes"] = static_cast<double>(f.nodes);
}
BENCHMARK(BM_RewriteCompiled)->Unit(benchmark::kMillisecond)->MinTime(1.0);

void BM_RewriteInterpreted(benchmark::State& state) {
  Fixture& f = fixture();
  for (auto _ : state) benchmark::DoNotOptimize(graph_rewrite(f.graph, f.interpreted.get()));
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(f.nodes));
  state.counters["nodes"] = static_cast<double>(f.nodes);
}
BENCHMARK(BM_RewriteInterpreted)->Unit(benchmark::kMillisecond)->MinTime(1.0);

// Matching alone: apply() on every node of the graph (most attempts fail, as in real passes).
// The context names the matcher as the running rewrite, as graph_rewrite does: a rule that
// recurses (rewritten_fully in symbolic.rw's simplify_given_valid) needs one.
void match_all(benchmark::State& state, const RuleSetMatcher& m) {
  Fixture& f = fixture();
  const std::vector<UOp> nodes = toposort(f.graph);
  RewriteContext ctx;
  ctx.pm = &m;
  for (auto _ : state) {
    size_t hits = 0;
    for (const UOp& n : nodes) hits += m.apply(n, ctx, nullptr).has_value();
    benchmark::DoNotOptimize(hits);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(nodes.size()));
}
void BM_MatchCompiled(benchmark::State& state) { match_all(state, *fixture().compiled); }
void BM_MatchInterpreted(benchmark::State& state) { match_all(state, *fixture().interpreted); }
BENCHMARK(BM_MatchCompiled)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_MatchInterpreted)->Unit(benchmark::kMillisecond)->MinTime(1.0);

// The product rules: rules/symbolic.rw's strongest set on the same graph.
struct SymbolicFixture {
  std::shared_ptr<const ResolvedProgram> program;
  std::unique_ptr<InterpretedMatcher> interpreted;
  SymbolicFixture() {
    Diagnostics d;
    program = load_rules(TINYRW_SOURCE_DIR "/rules/symbolic.rw", d);
    if (!program) throw std::runtime_error(d.render());
    interpreted = std::make_unique<InterpretedMatcher>(program, *program->find("sym"));
  }
};
SymbolicFixture& symbolic() {
  static SymbolicFixture f;
  return f;
}
void BM_MatchSymbolicCompiled(benchmark::State& state) { match_all(state, *compiled_rules("sym")); }
void BM_MatchSymbolicInterpreted(benchmark::State& state) {
  match_all(state, *symbolic().interpreted);
}
BENCHMARK(BM_MatchSymbolicCompiled)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_MatchSymbolicInterpreted)->Unit(benchmark::kMillisecond)->MinTime(1.0);

}  // namespace

BENCHMARK_MAIN();
