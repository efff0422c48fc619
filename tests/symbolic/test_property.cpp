// Property test of rw simplify's engine: thousands of random index expressions over bounded
// variables simplify to something that evaluates equal (Python semantics) at random points and at
// the bound corners, in both executors, and the two executors give identical output.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <random>

#include <unistd.h>

#include "ir/render.h"
#include "symbolic/pyexpr.h"
#include "symbolic/simplify.h"
#include "tests/symbolic/eval.h"

using namespace tinyrw;

namespace {

struct Var {
  std::string name;
  i128 lo, hi;
};

class ExprGen {
 public:
  ExprGen(uint32_t seed, const std::vector<Var>& vars) : rng_(seed), vars_(vars) {}
  std::string gen(int depth) { return expr(depth); }

 private:
  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint32_t>(n)); }
  std::string num() { return std::to_string(pick(13) - 4); }
  std::string pos() { return std::to_string(pick(7) + 1); }
  std::string leaf() {
    return pick(3) ? vars_[static_cast<size_t>(pick(static_cast<int>(vars_.size())))].name : num();
  }
  std::string cond(int depth) {
    static const char* kCmp[] = {"<", "<=", ">", ">=", "==", "!="};
    return expr(depth) + kCmp[pick(6)] + expr(depth);
  }
  std::string expr(int depth) {
    if (depth <= 0 || pick(6) == 0) return leaf();
    const std::string a = expr(depth - 1), b = expr(depth - 1);
    switch (pick(12)) {
      case 0:
        return "(" + a + "+" + b + ")";
      case 1:
        return "(" + a + "-" + b + ")";
      case 2:
        return "(" + a + "*" + (pick(2) ? num() : b) + ")";
      case 3:
        return "(" + a + "//" + pos() + ")";
      case 4:
        return "(" + a + "%" + pos() + ")";
      case 5:
        return "max(" + a + ", " + b + ")";
      case 6:
        return "min(" + a + ", " + b + ")";
      case 7:
        return "(" + a + " if " + cond(depth - 2) + " else " + b + ")";
      case 8: {  // division by a bounded variable (may be zero: such points are skipped)
        const Var& v = vars_[static_cast<size_t>(pick(static_cast<int>(vars_.size())))];
        return "(" + a + (pick(2) ? "//" : "%") + v.name + ")";
      }
      case 9:
        return "((" + a + ")*" + pos() + "+" + b + ")";
      case 10:
        return "(" + a + "//" + pos() + "*" + pos() + "+" + a + "%" + pos() + ")";
      default:
        return "(" + a + "+" + num() + ")";
    }
  }
  std::mt19937 rng_;
  const std::vector<Var>& vars_;
};

// Assignments to check: every corner of the box and random interior points.
std::vector<std::map<std::string, i128>> points(const std::vector<Var>& vars, std::mt19937& rng,
                                                int random_points) {
  std::vector<std::map<std::string, i128>> out;
  for (size_t mask = 0; mask < (1u << vars.size()); ++mask) {
    std::map<std::string, i128> p;
    for (size_t i = 0; i < vars.size(); ++i)
      p[vars[i].name] = (mask >> i) & 1 ? vars[i].hi : vars[i].lo;
    out.push_back(p);
  }
  for (int k = 0; k < random_points; ++k) {
    std::map<std::string, i128> p;
    for (const Var& v : vars) {
      const auto span = static_cast<uint64_t>(v.hi - v.lo + 1);
      p[v.name] = v.lo + static_cast<i128>(rng() % span);
    }
    out.push_back(p);
  }
  return out;
}

}  // namespace

TEST(SymbolicProperty, RandomExpressionsKeepTheirValueInBothExecutors) {
  const std::vector<Var> vars = {{"a", -5, 9}, {"b", 0, 12}, {"c", -3, 3}, {"d", 1, 7}};
  PyVars pv;
  for (const Var& v : vars) pv[v.name] = UOp::variable(v.name, v.lo, v.hi);
  const Simplifier compiled(false), interpreted(true);
  std::mt19937 rng(99);
  ExprGen gen(2024, vars);
  int checked = 0, smaller = 0;
  const std::string py_path =
      ::testing::TempDir() + "symbolic_property_" + std::to_string(::getpid()) + ".py";
  std::ofstream py(py_path);
  py << "import sys\nbad = 0\n";
  for (int t = 0; t < 3000; ++t) {
    const std::string text = gen.gen(4);
    PyParseError err;
    auto in = parse_python_expr(text, pv, err);
    ASSERT_TRUE(in.has_value()) << text << ": " << err.message;
    const UOp c = compiled.simplify(*in), i = interpreted.simplify(*in);
    const std::string rc = render(c), ri = render(i);
    ASSERT_EQ(rc, ri) << "executors differ on " << text;
    auto back = parse_python_expr(rc, pv, err);
    ASSERT_TRUE(back.has_value()) << "rendered output does not parse: " << rc << " (" << err.message
                                  << ")";
    smaller += rc.size() <= text.size();
    for (const auto& p : points(vars, rng, 8)) {
      const auto want = test::py_eval(*in, p);
      if (!want) continue;  // undefined input (division by zero): nothing to preserve
      const auto got = test::py_eval(*back, p);
      ASSERT_TRUE(got.has_value()) << text << " -> " << rc;
      ASSERT_EQ(static_cast<long long>(*want), static_cast<long long>(*got))
          << text << " -> " << rc << " at a=" << static_cast<long long>(p.at("a"))
          << " b=" << static_cast<long long>(p.at("b"))
          << " c=" << static_cast<long long>(p.at("c"))
          << " d=" << static_cast<long long>(p.at("d"));
      ++checked;
    }
    if (t < 400) {  // the same check by Python itself, on a sample
      py << "for a in range(-5,10):\n for b in (0,5,12):\n  for c in (-3,0,3):\n   for d in "
            "(1,4,7):\n";
      py << "    try: w = (" << text << ")\n    except ZeroDivisionError: continue\n";
      py << "    if w != (" << rc << "): print('MISMATCH', repr('" << text << "'), repr('" << rc
         << "'), a, b, c, d); bad += 1\n";
    }
  }
  py << "print('python checked, mismatches:', bad)\nsys.exit(1 if bad else 0)\n";
  py.close();
  EXPECT_GT(checked, 20000);
  EXPECT_GT(smaller, 2500);  // nearly every result is at most as long as its input
  if (std::system("command -v python3 > /dev/null 2>&1") == 0) {
    const int rc = std::system(("python3 " + py_path).c_str());
    EXPECT_EQ(rc, 0) << "Python evaluates some output differently (see MISMATCH lines above)";
  } else {
    std::printf("python3 not found: skipped the check by Python itself\n");
  }
}
