// The differential mode: for every rule set compiled into this process (the shipped rules and
// the feature rules), the generated matcher and the interpreter run side by side on thousands of
// random graphs and must agree at every node.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "codegen/target.h"
#include "dsl/compiled.h"
#include "dsl/interp.h"
#include "ir/rewrite.h"
#include "rules/helpers/kernel.h"

using namespace tinyrw;
using namespace tinyrw::rw;

namespace {

// Every .rw program the compiled sets come from, loaded for the interpreter.
std::vector<std::shared_ptr<const ResolvedProgram>> programs() {
  std::vector<std::string> files = {TINYRW_TEST_DIR "/dsl/features.rw",
                                    TINYRW_TEST_DIR "/fixtures/examples.rw",
                                    TINYRW_TEST_DIR "/dsl/features_expr.rw"};
  for (const auto& e : std::filesystem::directory_iterator(TINYRW_SOURCE_DIR "/rules"))
    if (e.path().extension() == ".rw") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  std::vector<std::shared_ptr<const ResolvedProgram>> out;
  for (const std::string& f : files) {
    Diagnostics d;
    auto p = load_rules(f, d);
    EXPECT_NE(p, nullptr) << d.render();
    if (p) out.emplace_back(std::move(p));
  }
  return out;
}

// Random graphs over the ops the rules look at: integer index math, comparisons, where, casts,
// sinks and stacks, with constants that trigger identities (0, 1, powers of two).
class GraphGen {
 public:
  explicit GraphGen(uint32_t seed) : rng_(seed) {}
  UOp graph() {
    std::vector<UOp> roots;
    const int n = pick(3) + 1;
    for (int i = 0; i < n; ++i)
      roots.push_back(expr(pick(5) + 1, pick(4) == 0 ? dtypes::int32 : dtypes::index));
    if (pick(3) == 0) return UOp::make(Op::Stack, roots[0].dtype(), std::vector<UOp>(n, roots[0]));
    return UOp::sink(roots);
  }

 private:
  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint32_t>(n)); }
  UOp leaf(DType d) {
    static const int kConsts[] = {0, 1, 2, 3, 4, 5, 8, -1, 16};
    switch (pick(4)) {
      case 0:
        return UOp::variable("a", -4, 12, d);
      case 1:
        return UOp::variable("b", 0, 7, d);
      case 2:
        return UOp::range(UOp::cint(8, d), pick(3), pick(2) ? AxisType::Weak : AxisType::Reduce);
      default:
        return UOp::cint(kConsts[pick(9)], d);
    }
  }
  UOp expr(int depth, DType d) {
    if (depth == 0 || pick(5) == 0) return leaf(d);
    const UOp a = expr(depth - 1, d), b = expr(depth - 1, d);
    switch (pick(13)) {
      case 0:
        return a + b;
      case 1:
        return a * b;
      case 2:
        return a.maximum(b);
      case 3:
        return a.floordiv(UOp::cint(pick(4) + 1, d));
      case 4:
        return a.floormod(UOp::cint(pick(6) + 1, d));
      case 5:
        return a.lt(b).where(a, b);
      case 6:
        return UOp::make(Op::Neg, d, {a});
      case 7:
        return a.cast(dtypes::int64).cast(d);
      case 8:
        return a << UOp::cint(pick(3), d);
      case 9:
        return a + a;
      case 10:
        return (a + UOp::cint(pick(3), d)) + UOp::cint(pick(3), d);
      case 11:
        return a.ne(b).where(b, a);
      default:
        return a * UOp::cint(1 << pick(4), d);
    }
  }
  std::mt19937 rng_;
};

}  // namespace

TEST(RwDifferential, CompiledAndInterpretedAgreeOnRandomGraphs) {
  const auto progs = programs();
  int sets_checked = 0;
  uint64_t nodes_compared = 0;
  for (const std::string& name : compiled_rule_set_names()) {
    const RuleSetMatcher* compiled = compiled_rules(name);
    const ResolvedSet* set = nullptr;
    std::shared_ptr<const ResolvedProgram> owner;
    for (const auto& p : progs) {
      if (const ResolvedSet* s = p->find(name)) {
        set = s;
        owner = p;
      }
    }
    ASSERT_NE(set, nullptr) << "compiled rule set '" << name << "' has no .rw source";
    if (set->kind != SetKind::Rules) continue;
    InterpretedMatcher interpreted(owner, *set);
    DifferentialMatcher diff(*compiled, interpreted);
    // the late kernel rule sets read a KernelContext (rules/helpers/kernel.h): CPU's target,
    // whose decompositions rewrite the most
    rw::KernelContext kernel_ctx{.target = &tinyrw::Target::of("CPU")};
    const bool kernel_set =
        name == "late_decompositions" || name == "transcendental" || name == "reduce_to_acc";
    GraphGen gen(1234);
    for (int i = 0; i < 1500; ++i) {
      const UOp g = gen.graph();
      try {
        graph_rewrite(g, &diff, {.ctx = kernel_set ? &kernel_ctx : nullptr});
      } catch (const RwError& e) {
        // the same error from both executors (a failed require) is agreement
        if (std::string(e.what()).find("differential mismatch") != std::string::npos)
          FAIL() << e.what();
      } catch (const RewriteError&) {
        // a rule set that loops on some input loops in both executors (compared node by node)
      }
    }
    nodes_compared += diff.compared();
    ++sets_checked;
  }
  EXPECT_GE(sets_checked, 10);
  EXPECT_GT(nodes_compared, 10000u);
  std::printf("differential: %d rule sets, %llu node comparisons\n", sets_checked,
              static_cast<unsigned long long>(nodes_compared));
}

TEST(RwDifferential, ReportsTheFirstDifference) {
  Diagnostics d;
  std::shared_ptr<const ResolvedProgram> a =
      load_rules_text("a.rw", "ruleset r {\n  Add(x, 0) => x\n}\n", d);
  std::shared_ptr<const ResolvedProgram> b =
      load_rules_text("b.rw", "ruleset r {\n  Add(x, 0) => x * 1\n}\n", d);
  ASSERT_TRUE(a && b) << d.render();
  InterpretedMatcher ma(a, *a->find("r")), mb(b, *b->find("r"));
  DifferentialMatcher diff(ma, mb);
  const UOp x = UOp::variable("x", 0, 4);
  EXPECT_TRUE(graph_rewrite(x * 3, &diff) == x * 3);  // nothing matches: agreement
  try {
    graph_rewrite((x + 0) * 3, &diff);
    FAIL() << "expected a mismatch";
  } catch (const RwError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("differential mismatch in rule set 'r'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("a.rw:2"), std::string::npos) << msg;
    EXPECT_NE(msg.find("b.rw:2"), std::string::npos) << msg;
  }
}
