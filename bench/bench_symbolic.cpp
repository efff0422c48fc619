// rw simplify's engine on 10,000 generated index expressions: parse + simplify + render per
// expression, with the compiled rules and with the interpreter; parse + render alone is the
// baseline measured in the same run.
#include <benchmark/benchmark.h>

#include <random>

#include "ir/render.h"
#include "symbolic/pyexpr.h"
#include "symbolic/simplify.h"

using namespace tinyrw;

namespace {

std::vector<std::string> expressions() {
  std::mt19937 rng(7);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  const char* vars[] = {"a", "b", "c", "d"};
  std::function<std::string(int)> expr = [&](int depth) -> std::string {
    if (depth <= 0 || pick(6) == 0) return pick(3) ? vars[pick(4)] : std::to_string(pick(13) - 4);
    const std::string x = expr(depth - 1), y = expr(depth - 1), k = std::to_string(pick(7) + 1);
    switch (pick(9)) {
      case 0:
        return "(" + x + "+" + y + ")";
      case 1:
        return "(" + x + "-" + y + ")";
      case 2:
        return "(" + x + "*" + k + ")";
      case 3:
        return "(" + x + "//" + k + ")";
      case 4:
        return "(" + x + "%" + k + ")";
      case 5:
        return "max(" + x + ", " + y + ")";
      case 6:
        return "(" + x + "//" + k + "*" + k + "+" + x + "%" + k + ")";
      case 7:
        return "(" + x + " if " + x + "<" + y + " else " + y + ")";
      default:
        return "((" + x + "*" + k + "+" + std::to_string(pick(5)) + ")//" + k + ")";
    }
  };
  std::vector<std::string> out;
  for (int i = 0; i < 10000; ++i) out.push_back(expr(4));
  return out;
}

const std::vector<std::string>& corpus() {
  static const std::vector<std::string> c = expressions();
  return c;
}
const PyVars& vars() {
  static const PyVars v = {{"a", UOp::variable("a", 0, 31)},
                           {"b", UOp::variable("b", -8, 8)},
                           {"c", UOp::variable("c", 1, 16)},
                           {"d", UOp::variable("d", 0, 3)}};
  return v;
}

void run(benchmark::State& state, const Simplifier* s) {
  size_t chars = 0;
  for (auto _ : state) {
    for (const std::string& e : corpus()) {
      PyParseError err;
      auto u = parse_python_expr(e, vars(), err);
      const std::string out = render(s ? s->simplify(*u) : *u);
      chars += out.size();
    }
  }
  benchmark::DoNotOptimize(chars);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(corpus().size()));
  // seconds per expression (the inverse of the expression rate)
  state.counters["s_per_expr"] = benchmark::Counter(
      static_cast<double>(corpus().size()),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_Baseline_ParseRender(benchmark::State& state) { run(state, nullptr); }
void BM_SimplifyCompiled(benchmark::State& state) {
  static const Simplifier s(false);
  run(state, &s);
}
void BM_SimplifyInterpreted(benchmark::State& state) {
  static const Simplifier s(true);
  run(state, &s);
}
BENCHMARK(BM_Baseline_ParseRender)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_SimplifyCompiled)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_SimplifyInterpreted)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace

BENCHMARK_MAIN();
