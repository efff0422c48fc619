// Spec tests: spec/tinyspec.tex's tables held against the implementation, mechanically.
//   (a) the ops of the document are exactly the op table, with the same arity and category;
//   (c) derived ranges computed by the core lie within the document's range rules, and shapes and
//       devices follow its shape table and device rule (valid and invalid cases both);
//   (d) every elementwise op's documented formula agrees with the INTERP device on random and edge
//       inputs of every dtype, and the CPU device agrees with INTERP.
// The document's path can be overridden (TINYSPEC_PATH) so a mutated copy can be checked: see
// tests/spec/mutation_test.sh.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <numeric>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include "codegen/linearize.h"
#include "codegen/opt.h"
#include "dsl/compiled.h"
#include "dsl/interp.h"
#include "dsl/verify.h"
#include "ir/alu.h"
#include "ir/call.h"
#include "ir/graph.h"
#include "ir/kernel_info.h"
#include "ir/ops.h"
#include "ir/viz.h"
#include "rules_gen/spec.h"
#include "tensor/function.h"
#include "tensor/tensor.h"
#include "tests/scoped_env.h"
#include "tests/spec/threefry_reference.h"
#include "tests/tensor/on_device.h"

using namespace tinyrw;

namespace {

std::string spec_path() {
  const char* p = std::getenv("TINYSPEC_PATH");
  return p ? p : TINYRW_SOURCE_DIR "/spec/tinyspec.tex";
}

std::string clean(std::string c) {
  auto unwrap = [&](const std::string& macro) {
    for (size_t p = c.find(macro + "{"); p != std::string::npos; p = c.find(macro + "{")) {
      size_t depth = 0, q = p + macro.size();
      for (; q < c.size(); ++q) {
        if (c[q] == '{') ++depth;
        if (c[q] == '}' && --depth == 0) break;
      }
      c = c.substr(0, p) + c.substr(p + macro.size() + 1, q - p - macro.size() - 1) +
          c.substr(q + 1);
    }
  };
  unwrap("\\op");
  unwrap("\\sem");
  for (auto [from, to] :
       {std::pair<std::string, std::string>{"\\&", "&"}, {"\\^{}", "^"}, {"--", "-"}}) {
    for (size_t p = c.find(from); p != std::string::npos; p = c.find(from, p + to.size()))
      c.replace(p, from.size(), to);
  }
  const size_t b = c.find_first_not_of(" \t"), e = c.find_last_not_of(" \t");
  return b == std::string::npos ? "" : c.substr(b, e - b + 1);
}

// The rows of one table (the header row excluded), each split into cleaned cells.
std::vector<std::vector<std::string>> table(const std::string& name) {
  std::ifstream in(spec_path());
  EXPECT_TRUE(in.good()) << "cannot read " << spec_path();
  std::vector<std::vector<std::string>> rows;
  std::string line;
  bool inside = false, header = true;
  while (std::getline(in, line)) {
    if (line.rfind("% BEGIN TABLE " + name, 0) == 0)
      inside = true;
    else if (line.rfind("% END TABLE " + name, 0) == 0)
      inside = false;
    if (!inside || line.find("\\\\") == std::string::npos) continue;
    line = line.substr(0, line.rfind("\\\\"));
    std::vector<std::string> cells;
    std::string cur;
    for (size_t i = 0; i < line.size(); ++i) {
      if (line[i] == '&' && (i == 0 || line[i - 1] != '\\')) {
        cells.push_back(clean(cur));
        cur.clear();
      } else {
        cur += line[i];
      }
    }
    cells.push_back(clean(cur));
    if (header) {
      header = false;
      continue;
    }
    rows.push_back(cells);
  }
  return rows;
}

// ---- a small evaluator for the document's formulas
// ------------------------------------------------

struct V {
  bool fl = false;
  i128 i = 0;
  double f = 0;
  double d() const { return fl ? f : static_cast<double>(i); }
};

// Integer arithmetic of the formulas modulo 2^128: a uint64 product does not fit 128 signed bits,
// and the low bits, all a dtype keeps, are the same (signed overflow would be undefined).
i128 wrapping_add(i128 a, i128 b) {
  return static_cast<i128>(static_cast<unsigned __int128>(a) + static_cast<unsigned __int128>(b));
}
i128 wrapping_mul(i128 a, i128 b) {
  return static_cast<i128>(static_cast<unsigned __int128>(a) * static_cast<unsigned __int128>(b));
}

class Formula {
 public:
  explicit Formula(std::string s) : s_(std::move(s)) {}
  V eval(const std::map<char, V>& env) {
    env_ = &env;
    pos_ = 0;
    V v = cond();
    skip();
    if (pos_ != s_.size()) throw std::runtime_error("formula: trailing text in " + s_);
    return v;
  }

 private:
  void skip() {
    while (pos_ < s_.size() && s_[pos_] == ' ') ++pos_;
  }
  bool eat(const std::string& t) {
    skip();
    if (s_.compare(pos_, t.size(), t) != 0) return false;
    pos_ += t.size();
    return true;
  }
  static V I(i128 x) { return V{false, x, 0}; }
  static V F(double x) { return V{true, 0, x}; }
  V cond() {  // x if c else y
    V x = cmp();
    if (!eat(" if") && !eat("if ")) return x;
    V c = cmp();
    if (!eat("else")) throw std::runtime_error("formula: if without else");
    V y = cond();
    return (c.fl ? c.f != 0 : c.i != 0) ? x : y;
  }
  V cmp() {
    V x = bits();
    for (const std::string op : {"<=", ">=", "<", "!=", "==", ">"}) {
      if (eat(op)) {
        V y = bits();
        if (x.fl || y.fl) {
          const double a = x.d(), b = y.d();
          return I(op == "<="   ? a <= b
                   : op == ">=" ? a >= b
                   : op == "<"  ? a < b
                   : op == ">"  ? a > b
                   : op == "!=" ? a != b
                                : a == b);
        }
        return I(op == "<="   ? x.i <= y.i
                 : op == ">=" ? x.i >= y.i
                 : op == "<"  ? x.i < y.i
                 : op == ">"  ? x.i > y.i
                 : op == "!=" ? x.i != y.i
                              : x.i == y.i);
      }
    }
    return x;
  }
  V bits() {
    V x = sum();
    while (true) {
      if (eat("&"))
        x = I(x.i & sum().i);
      else if (eat("|"))
        x = I(x.i | sum().i);
      else if (eat("^"))
        x = I(x.i ^ sum().i);
      else if (eat("<<"))  // a * 2**b (the dtype wraps it)
        x = I(wrapping_mul(x.i, i128{1} << static_cast<int>(sum().i)));
      else if (eat(">>"))  // floor(a / 2**b)
        x = I(floor_div(x.i, i128{1} << static_cast<int>(sum().i)));
      else
        return x;
    }
  }
  V sum() {
    V x = prod();
    while (true) {
      if (eat("+")) {
        const bool fused = product_.valid;  // a * b + c: the exact value, rounded once
        const double p0 = product_.a, p1 = product_.b;
        V y = prod();
        if (fused && (x.fl || y.fl)) {
          x = F(std::fma(p0, p1, y.d()));
        } else {
          x = x.fl || y.fl ? F(x.d() + y.d()) : I(wrapping_add(x.i, y.i));
        }
      } else if (eat("- ")) {
        V y = prod();
        x = x.fl || y.fl ? F(x.d() - y.d()) : I(wrapping_add(x.i, -y.i));
      } else {
        return x;
      }
    }
  }
  V prod() {
    product_.valid = false;
    V x = unary();
    while (true) {
      if (eat("*")) {
        V y = unary();
        product_ = {x.fl || y.fl, x.d(), y.d()};
        x = x.fl || y.fl ? F(x.d() * y.d()) : I(wrapping_mul(x.i, y.i));
      } else if (eat("/")) {
        V y = unary();
        product_.valid = false;
        if (!x.fl && !y.fl) {  // exact: kept as a float only when it divides; floor/trunc use it
          last_num_ = x.i;
          last_den_ = y.i;
          x = F(static_cast<double>(x.i) / static_cast<double>(y.i));
          exact_div_ = true;
        } else {
          x = F(x.d() / y.d());
        }
      } else {
        return x;
      }
    }
  }
  V unary() {
    if (eat("-")) {
      V x = unary();
      return x.fl ? F(-x.f) : I(-x.i);
    }
    return power();
  }
  V power() {  // x**y, integers only
    V x = atom();
    if (!eat("**")) return x;
    V y = unary();
    i128 r = 1;
    for (i128 k = 0; k < y.i; ++k) r *= x.i;
    return I(r);
  }
  V call(const std::string& fn) {
    exact_div_ = false;
    std::vector<V> args{cond()};
    while (eat(",")) args.push_back(cond());
    eat(")");
    if (fn == "max" || fn == "min") {  // a if a > b else b, nan stays nan; min likewise
      V best = args[0];
      for (size_t k = 1; k < args.size(); ++k) {
        const V& y = args[k];
        if (best.fl || y.fl) {
          if (std::isnan(best.d()) || std::isnan(y.d())) return F(NAN);
          const bool take = fn == "max" ? !(best.d() > y.d()) : !(best.d() < y.d());
          best = take ? F(y.d()) : F(best.d());
        } else {
          best = I(fn == "max" ? std::max(best.i, y.i) : std::min(best.i, y.i));
        }
      }
      return best;
    }
    const V x = args[0];
    if (fn == "floor" || fn == "trunc") {
      if (exact_div_) {
        exact_div_ = false;
        return I(fn == "floor" ? floor_div(last_num_, last_den_) : trunc_div(last_num_, last_den_));
      }
      return x.fl ? F(fn == "floor" ? std::floor(x.f) : std::trunc(x.f)) : x;
    }
    const double v = x.d();
    if (fn == "abs") return x.fl ? F(std::fabs(x.f)) : I(x.i < 0 ? -x.i : x.i);
    if (fn == "sqrt") return F(std::sqrt(v));
    if (fn == "exp2") return F(std::exp2(v));
    if (fn == "log2") return F(v == 0 ? -INFINITY : std::log2(v));
    if (fn == "sin") return F(std::sin(v));
    if (fn == "pow" && args.size() == 2) return F(std::pow(v, args[1].d()));
    if (fn == "threefry2x32" && args.size() == 2)
      return I(static_cast<i128>(tinyrw::testing::threefry2x32_reference(
          static_cast<uint64_t>(x.i), static_cast<uint64_t>(args[1].i))));
    throw std::runtime_error("formula: unknown function " + fn);
  }
  V atom() {
    skip();
    if (eat("(")) {
      V v = cond();
      eat(")");
      return v;
    }
    if (std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      i128 v = 0;
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_])))
        v = v * 10 + (s_[pos_++] - '0');
      return I(v);
    }
    size_t e = pos_;
    while (e < s_.size() && std::isalnum(static_cast<unsigned char>(s_[e]))) ++e;
    const std::string word = s_.substr(pos_, e - pos_);
    pos_ = e;
    if (word.size() == 1 && env_->count(word[0])) return env_->at(word[0]);
    if (eat("(")) return call(word);
    throw std::runtime_error("formula: unknown name '" + word + "' in " + s_);
  }
  std::string s_;
  size_t pos_ = 0;
  const std::map<char, V>* env_ = nullptr;
  bool exact_div_ = false;
  struct {
    bool valid = false;
    double a = 0, b = 0;
  } product_;  // the factors when the last term parsed was a float product
  i128 last_num_ = 0, last_den_ = 1;
};

// ---- test inputs
// ----------------------------------------------------------------------------------

std::vector<V> inputs(DType d, std::mt19937& rng) {
  std::vector<V> out;
  if (d.is_float()) {
    for (double x : std::initializer_list<double>{0.0, -0.0, 1.0, -1.5, 0.5, 3.25, INFINITY,
                                                  -INFINITY, NAN, 1e30, -7.0, 2.0})
      out.push_back(V{true, 0, x});
    std::uniform_real_distribution<double> u(-100, 100);
    for (int k = 0; k < 12; ++k) out.push_back(V{true, 0, u(rng)});
    for (V& v : out) v.f = truncate_float(d, v.f);
  } else if (d.is_bool()) {
    for (int k = 0; k < 8; ++k) out.push_back(V{false, k % 2, 0});
  } else {
    for (i128 x :
         {d.int_min(), d.int_max(), i128{0}, i128{1}, i128{-1}, i128{7}, i128{-7}, i128{3}})
      out.push_back(V{false, truncate_int(d, x), 0});
    std::uniform_int_distribution<int64_t> u(-1000, 1000);
    for (int k = 0; k < 16; ++k) out.push_back(V{false, truncate_int(d, u(rng)), 0});
  }
  return out;
}

Tensor tensor_of(const std::vector<V>& vals, DType d) {
  if (d.is_float()) {
    std::vector<double> v;
    for (const V& x : vals) v.push_back(x.f);
    return Tensor::from_vector(v, {static_cast<int64_t>(v.size())}, d);
  }
  if (d == dtypes::uint64) {  // (above int64's range)
    std::vector<uint64_t> v;
    for (const V& x : vals) v.push_back(static_cast<uint64_t>(x.i));
    return Tensor::from_vector(v, {static_cast<int64_t>(v.size())}, d);
  }
  std::vector<int64_t> v;
  for (const V& x : vals) v.push_back(static_cast<int64_t>(x.i));
  return Tensor::from_vector(v, {static_cast<int64_t>(v.size())}, d);
}

bool same_float(double a, double b) {
  if (std::isnan(a) && std::isnan(b)) return true;
  return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b) ||
         (a == 0 && b == 0 && std::signbit(a) == std::signbit(b));
}

// A kinds cell: words `int`, `float`, `bool` (each dtype of that kind the tests try) or a dtype's
// own name (`uint64`, `float32`).
std::vector<DType> dtypes_of_kind(const std::string& kinds) {
  std::vector<DType> out;
  std::istringstream words(kinds);
  for (std::string w; words >> w;) {
    if (w == "int") {
      for (DType d : {dtypes::int8, dtypes::int16, dtypes::int32, dtypes::int64, dtypes::uint8,
                      dtypes::uint32, dtypes::uint64})
        out.push_back(d);
    } else if (w == "float") {
      for (DType d : {dtypes::float16, dtypes::bfloat16, dtypes::float32, dtypes::float64})
        out.push_back(d);
    } else if (w == "bool") {
      out.push_back(dtypes::bool_);
    } else {
      const std::optional<DType> d = DType::from_name(w);
      if (!d) throw std::runtime_error("kinds: unknown kind or dtype '" + w + "'");
      out.push_back(*d);
    }
  }
  return out;
}

}  // namespace

TEST(Spec, OpsTableEqualsTheOpTable) {
  const auto rows = table("ops");
  ASSERT_FALSE(rows.empty()) << "no ops table in " << spec_path();
  std::map<std::string, std::vector<std::string>> doc;
  for (const auto& r : rows) {
    ASSERT_GE(r.size(), 4u) << r[0];
    EXPECT_TRUE(doc.emplace(r[0], r).second) << "op listed twice: " << r[0];
  }
  for (int i = 0; i < kNumOps; ++i) {
    const OpInfo& info = op_info(static_cast<Op>(i));
    auto it = doc.find(std::string(info.name));
    if (it == doc.end()) {
      ADD_FAILURE() << "op " << info.name << " is implemented but not documented";
      continue;
    }
    const std::string src = info.min_src == info.max_src ? std::to_string(info.min_src)
                            : info.max_src < 0
                                ? std::to_string(info.min_src) + "+"
                                : std::to_string(info.min_src) + "-" + std::to_string(info.max_src);
    EXPECT_EQ(it->second[2], src) << info.name << ": documented sources differ from the op table";
    EXPECT_EQ(it->second[1], category_name(info.category))
        << info.name << ": documented category differs";
    doc.erase(it);
  }
  for (const auto& [name, row] : doc)
    ADD_FAILURE() << "op " << name << " is documented but not implemented";
}

// The axis types of the document are exactly ir/axis.h's, with the same letters and positions.
TEST(Spec, AxisTypesTableEqualsTheAxisTypes) {
  const auto rows = table("axis_types");
  ASSERT_FALSE(rows.empty()) << "no axis_types table in " << spec_path();
  std::map<std::string, std::vector<std::string>> doc;
  for (auto r : rows) {
    ASSERT_GE(r.size(), 4u) << r[0];
    for (size_t p = r[0].find("\\_"); p != std::string::npos; p = r[0].find("\\_"))
      r[0].erase(p, 1);  // GROUP\_REDUCE
    EXPECT_TRUE(doc.emplace(r[0], r).second) << "axis type listed twice: " << r[0];
  }
  for (const AxisTypeInfo& info : axis_types()) {
    const std::string name(info.name);
    auto it = doc.find(name);
    if (it == doc.end()) {
      ADD_FAILURE() << "axis type " << name << " is implemented but not documented";
      continue;
    }
    EXPECT_EQ(it->second[1], info.letter ? std::string(1, info.letter) : "-")
        << name << ": documented letter differs";
    EXPECT_EQ(it->second[2], info.position ? std::to_string(*info.position) : "-")
        << name << ": documented position differs";
    doc.erase(it);
  }
  for (const auto& [name, row] : doc)
    ADD_FAILURE() << "axis type " << name << " is documented but not implemented";
}

// A RANGE's arg is its ids then a known axis type name; the kernel verifiers refuse others.
TEST(Spec, RangeArgsNameAKnownAxisType) {
  const UOp n = UOp::cint(4);
  auto range_with = [&](Arg a) { return UOp::make(Op::Range, dtypes::index, {n}, std::move(a)); };
  for (const char* v : {"spec_kernel", "spec_kernel_body"}) {
    for (int t = 0; t < kNumAxisTypes; ++t)
      EXPECT_NO_THROW(verify(UOp::range(n, 2, static_cast<AxisType>(t)), v)) << v << " " << t;
    EXPECT_NO_THROW(verify(
        range_with(Arg::tuple({Arg::integer(1), Arg::integer(-2), Arg::string("UPCAST")})), v));
    const Arg bad[] = {
        Arg::tuple({Arg::integer(0)}),                           // the old (axis,) form
        Arg::tuple({Arg::integer(0), Arg::string("SIDEWAYS")}),  // an unknown type
        Arg::tuple({Arg::string("WEAK")}),                       // no id
        Arg::tuple({Arg::string("0"), Arg::string("WEAK")}),     // an id that is no int
        Arg::tuple({Arg::boolean(true), Arg::string("WEAK")}),   // nor a bool
        Arg::tuple({Arg::integer(0), Arg::string("WEAK"), Arg::integer(1)}),  // type not last
        Arg::integer(0),
        Arg(),
    };
    for (const Arg& a : bad) {
      try {
        verify(range_with(a), v);
        ADD_FAILURE() << v << " accepts a RANGE with arg " << a.repr();
      } catch (const SpecError& e) {
        EXPECT_NE(std::string(e.what()).find("a RANGE's arg is (ids..., axis type name)"),
                  std::string::npos)
            << e.what();
      }
    }
  }
}

// Every row of the ranges table read both ways: the implementation's vmin/vmax equal the row's
// range wherever its condition holds, and every value the op computes from values within its
// sources' ranges lies within it.
// A node of op over sources with the ranges [a, A], [b, B], [c, C] (a constant where b == B), at
// the index dtype (or bool), as the ranges test builds them; a Cast casts to int8.
UOp range_node(Op op, i128 a, i128 A, i128 b, i128 B, i128 c, i128 C, bool boolean) {
  const DType d = boolean ? dtypes::bool_ : dtypes::index;
  const UOp x = UOp::variable("x", a, A, d),
            y = b == B && !boolean ? UOp::cint(b) : UOp::variable("y", b, B, d),
            z = UOp::variable("z", c, C);
  switch (op) {
    case Op::Range:
      return UOp::range(UOp::variable("n", a, A), 0);
    case Op::Special:  // a GPU thread index below its source
      return UOp::make(Op::Special, dtypes::index, {UOp::variable("n", a, A)},
                       Arg::string("gidx0"));
    case Op::Neg:
      return UOp::make(Op::Neg, dtypes::index, {x});
    case Op::Cast:
      return x.cast(dtypes::int8);
    case Op::Where:
      return UOp::variable("cnd", 0, 1, dtypes::bool_).where(y, z);
    default:
      return x.alu(op, {y});
  }
}

TEST(Spec, RangesEqualTheDocumentedRulesAndHoldEveryValue) {
  const auto rows = table("ranges");
  std::mt19937 rng(11);
  auto pick = [&](i128 lo, i128 hi) {
    return static_cast<i128>(std::uniform_int_distribution<int64_t>(static_cast<int64_t>(lo),
                                                                    static_cast<int64_t>(hi))(rng));
  };
  auto value = [](const Arg& v) { return v.is_bool() ? i128{v.as_bool()} : v.as_int(); };
  const DType cast_to = dtypes::int8;
  int checked = 0, values = 0;
  for (const auto& r : rows) {
    const std::optional<Op> op = op_from_name(r[0]);
    ASSERT_TRUE(op.has_value()) << r[0];
    // "[lo, hi]": split at the top-level comma
    std::string f = r[2].substr(1, r[2].size() - 2);
    int depth = 0;
    size_t comma = 0;
    for (size_t i = 0; i < f.size(); ++i) {
      if (f[i] == '(') ++depth;
      if (f[i] == ')') --depth;
      if (f[i] == ',' && depth == 0) comma = i;
    }
    Formula lo(f.substr(0, comma)), hi(f.substr(comma + 1));
    const bool boolean = r[1] == "bool";
    Formula cond(r[1] == "always" || boolean ? "1" : r[1]);
    int held = 0;
    for (int t = 0; t < 400; ++t) {
      // ranges of sources 0-2, a constant divisor or shift amount (b == B) half the time, bools
      // where the row says so; a cast's source sometimes beyond its dtype
      const i128 span = *op == Op::Cast && t % 2 ? 300 : 20;
      i128 a = pick(-span, span), A = a + pick(0, 10), b = pick(-20, 20), B = b + pick(0, 10),
           c = pick(-20, 20), C = c + pick(0, 10);
      if (t % 2) B = b;
      if (*op == Op::Cast && t < 8) {  // the condition's edges: at and just past the dtype's
        const i128 m = cast_to.int_min(), M = cast_to.int_max();
        const i128 edges[8][2] = {{m - 1, m + 3}, {m, m + 3}, {M - 3, M}, {M - 3, M + 1},
                                  {m, M},         {m - 1, M}, {m, M + 1}, {M, M}};
        a = edges[t][0];
        A = edges[t][1];
      }
      if ((*op == Op::Shl || *op == Op::Shr) && t % 2) b = B = pick(0, 6);
      if (*op == Op::Xor && t % 4 == 1) b = B = -1;
      if (boolean) {
        a = pick(0, 1), A = std::max(a, pick(0, 1)), b = pick(0, 1), B = std::max(b, pick(0, 1));
      }
      std::map<char, V> env = {{'a', V{false, a, 0}},
                               {'A', V{false, A, 0}},
                               {'b', V{false, b, 0}},
                               {'B', V{false, B, 0}},
                               {'c', V{false, c, 0}},
                               {'C', V{false, C, 0}},
                               {'m', V{false, cast_to.int_min(), 0}},
                               {'M', V{false, cast_to.int_max(), 0}}};
      if (cond.eval(env).i == 0) continue;
      if ((*op == Op::Range || *op == Op::Special) && A < 1) continue;
      const UOp node = range_node(*op, a, A, b, B, c, C, boolean);
      const i128 dlo = lo.eval(env).i, dhi = hi.eval(env).i;
      const std::string at = fmt::format("{} at a={}, A={}, b={}, B={}, c={}, C={}", r[0],
                                         static_cast<long long>(a), static_cast<long long>(A),
                                         static_cast<long long>(b), static_cast<long long>(B),
                                         static_cast<long long>(c), static_cast<long long>(C));
      ASSERT_EQ(static_cast<long long>(node.vmin().i), static_cast<long long>(dlo))
          << at << ": vmin differs from the document";
      ASSERT_EQ(static_cast<long long>(node.vmax().i), static_cast<long long>(dhi))
          << at << ": vmax differs from the document";
      // values drawn within the sources' ranges land within the range
      for (int k = 0; k < 8; ++k) {
        const i128 xv = pick(a, A), yv = pick(b, B), zv = pick(c, C);
        std::optional<Arg> out;
        if (*op == Op::Range || *op == Op::Special) {
          if (xv < 1) continue;  // no index below a size of 0
          out = Arg::integer(pick(0, xv - 1));
        } else if (*op == Op::Cast) {
          out = cast_value(cast_to, Arg::integer(xv));
        } else if (*op == Op::Where) {
          const Arg args[] = {Arg::boolean(pick(0, 1) == 1), Arg::integer(yv), Arg::integer(zv)};
          out = exec_alu(*op, node.dtype(), args);
        } else if (*op == Op::Neg) {
          const Arg args[] = {Arg::integer(xv)};
          out = exec_alu(*op, node.dtype(), args);
        } else {
          const Arg args[] = {boolean ? Arg::boolean(xv != 0) : Arg::integer(xv),
                              boolean ? Arg::boolean(yv != 0) : Arg::integer(yv)};
          out = exec_alu(*op, node.dtype(), args);
        }
        if (!out) continue;  // undefined there (a zero divisor)
        const i128 v = value(*out);
        EXPECT_TRUE(v >= dlo && v <= dhi)
            << at << ": the value " << static_cast<long long>(v) << " lies outside ["
            << static_cast<long long>(dlo) << ", " << static_cast<long long>(dhi) << "]";
        ++values;
      }
      ++held;
    }
    EXPECT_GT(held, 20) << r[0] << ": its condition held too rarely to check the row";
    checked += held;
  }
  EXPECT_GT(checked, 1000);
  EXPECT_GT(values, 5000);
  // outside the conditions of every row of its op, a node has the range of its dtype
  std::map<Op, std::vector<std::string>> conditions;
  for (const auto& r : rows) conditions[*op_from_name(r[0])].push_back(r[1]);
  int outside = 0;
  for (const auto& [op, conds] : conditions) {
    if (std::ranges::find(conds, "always") != conds.end()) continue;
    for (int t = 0; t < 400; ++t) {
      const bool boolean = t % 4 == 3;
      i128 a = pick(-30, 30), A = a + pick(0, 10), b = pick(-20, 20), B = b + pick(0, 10);
      if (t % 2) B = b;
      if ((op == Op::Shl || op == Op::Shr) && t % 2) b = B = pick(-2, 130);
      if (op == Op::Cast) A = a + pick(0, 300);
      if (boolean) {
        if (op == Op::Cast) continue;
        a = pick(0, 1), A = std::max(a, pick(0, 1)), b = pick(0, 1), B = std::max(b, pick(0, 1));
      }
      const std::map<char, V> env = {{'a', V{false, a, 0}},
                                     {'A', V{false, A, 0}},
                                     {'b', V{false, b, 0}},
                                     {'B', V{false, B, 0}},
                                     {'c', V{false, 0, 0}},
                                     {'C', V{false, 0, 0}},
                                     {'m', V{false, cast_to.int_min(), 0}},
                                     {'M', V{false, cast_to.int_max(), 0}}};
      if (std::ranges::any_of(conds, [&](const std::string& c) {
            return c == "bool" ? boolean : !boolean && Formula(c).eval(env).i != 0;
          }))
        continue;
      UOp node;
      try {
        node = range_node(op, a, A, b, B, 0, 0, boolean);
      } catch (const GraphError&) {
        continue;  // no such node (a shift of bools)
      }
      const DType nd = node.dtype();
      const i128 lo = nd.is_bool() ? 0 : nd.is_index() ? -kInfinity : nd.int_min();
      const i128 hi = nd.is_bool() ? 1 : nd.is_index() ? kInfinity : nd.int_max();
      const auto bound = [](i128 v) {
        return is_infinite(v) ? (v < 0 ? -kInfinity : kInfinity) : v;
      };
      EXPECT_TRUE(bound(node.vmin().i) == lo && bound(node.vmax().i) == hi)
          << op_name(op) << " at a=" << static_cast<long long>(a)
          << ", A=" << static_cast<long long>(A) << ", b=" << static_cast<long long>(b)
          << ", B=" << static_cast<long long>(B) << (boolean ? " (bool)" : "")
          << ": outside every row's condition, but its range is ["
          << static_cast<long long>(node.vmin().i) << ", " << static_cast<long long>(node.vmax().i)
          << "], not its dtype's";
      ++outside;
    }
  }
  EXPECT_GT(outside, 200);
}

// Every op the implementation derives a range for has a row, and no row names another op. An op
// has a rule where some node of it gets a range narrower than its dtype's (index: unbounded; bool:
// [0, 1]), tried on small ranges, constants and bools.
TEST(Spec, EveryOpWithARangeRuleHasARangeRow) {
  OpSet documented;
  for (const auto& r : table("ranges")) documented = documented | OpSet{*op_from_name(r[0])};
  const std::vector<UOp> ints{UOp::variable("x", 2, 5), UOp::cint(3), UOp::variable("y", 1, 4),
                              UOp::cint(-1)};
  const std::vector<UOp> bools{UOp::variable("p", 1, 1, dtypes::bool_),
                               UOp::variable("q", 0, 0, dtypes::bool_)};
  auto narrowed = [](const UOp& u) {
    const DType d = u.dtype();
    const i128 lo = d.is_index() ? -kInfinity : d.int_min(),
               hi = d.is_index() ? kInfinity : d.int_max();
    return !u.vmin().is_infinite() && !u.vmax().is_infinite() &&
           (u.vmin().i > lo || u.vmax().i < hi);
  };
  for (int o = 0; o < kNumOps; ++o) {
    const Op op = static_cast<Op>(o);
    std::vector<UOp> nodes;
    auto attempt = [&](const std::function<UOp()>& make) {
      try {
        nodes.push_back(make());
      } catch (const std::exception&) {  // not an op of these dtypes
      }
    };
    if (op == Op::Range) attempt([&] { return UOp::range(ints[0], 0); });
    if (op == Op::Special)
      attempt([&] { return UOp::make(op, dtypes::index, {ints[0]}, Arg::string("gidx0")); });
    if (op == Op::Cast) attempt([&] { return ints[0].cast(dtypes::int8); });
    if (groups::alu().contains(op)) {
      const int n = op_info(op).min_src;
      for (const std::vector<UOp>* pool : {&ints, &bools})
        for (const UOp& p : *pool)
          for (const UOp& q : *pool) {
            std::vector<UOp> src{p, q, q};
            if (op == Op::Where) src = {bools[0], p, q};
            src.resize(static_cast<size_t>(n));
            attempt([&] { return UOp::make(op, alu_result_dtype(op, src), src); });
          }
    }
    const bool has_rule = std::any_of(nodes.begin(), nodes.end(), narrowed);
    EXPECT_EQ(documented.contains(op), has_rule)
        << op_name(op)
        << (has_rule ? " has a range rule but no row" : " has a row but no range rule");
  }
}

// A device's result, element by element, as the formula evaluator's values (a uint64 above
// int64's range as itself).
std::vector<V> values_of(Tensor& out) {
  const DType d = out.dtype();
  std::vector<V> v;
  if (d.is_float()) {
    for (double x : out.to_doubles()) v.push_back(V{true, 0, x});
    return v;
  }
  if (d == dtypes::uint64) {  // above int64's range
    for (uint64_t x : out.data<uint64_t>()) v.push_back(V{false, static_cast<i128>(x), 0});
    return v;
  }
  for (int64_t x : out.data<int64_t>()) v.push_back(V{false, x, 0});
  return v;
}

// The document's value represented in dtype d: a float rounded to its precision, a bool 1 where
// not 0, an int wrapped to its width (a float value truncated first).
V represented(DType d, const V& want) {
  if (d.is_float()) return V{true, 0, truncate_float(d, want.d())};
  if (d.is_bool()) return V{false, want.fl ? want.f != 0 : want.i != 0, 0};
  return V{false, truncate_int(d, want.fl ? static_cast<i128>(want.f) : want.i), 0};
}

// A device's value against the document's, both in dtype d: floats bit for bit (any NaN matches,
// a zero's sign counts), others exactly.
void expect_same_value(DType d, const V& got, const V& want, const std::string& at) {
  if (d.is_float())
    EXPECT_TRUE(same_float(got.f, want.f))
        << at << ": got " << got.f << ", the document says " << want.f;
  else
    EXPECT_EQ(static_cast<long long>(got.i), static_cast<long long>(want.i)) << at;
}

class SpecSemantics : public ::testing::TestWithParam<std::string> {};

TEST_P(SpecSemantics, ElementwiseFormulasAgreeWithTheDevice) {
  const std::string device = GetParam();
  if (!device_available(device)) GTEST_SKIP() << device << " is not available";
  const auto rows = table("elementwise");
  ASSERT_GE(rows.size(), 20u);
  std::mt19937 rng(5);
  int checked = 0;
  for (const auto& r : rows) {
    const std::optional<Op> op = op_from_name(r[0]);
    ASSERT_TRUE(op.has_value()) << r[0];
    Formula f(r[2]);
    const int arity = op_info(*op).min_src;
    for (DType d : dtypes_of_kind(r[1])) {
      // sources: Where's condition is bool, the others of dtype d
      std::vector<std::vector<V>> in;
      std::vector<DType> src_d;
      for (int k = 0; k < arity; ++k) {
        const DType sd = (*op == Op::Where && k == 0) ? dtypes::bool_ : d;
        auto vals = inputs(sd, rng);
        std::shuffle(vals.begin(), vals.end(), rng);
        in.push_back(vals);
        src_d.push_back(sd);
      }
      size_t n = in[0].size();
      for (const auto& v : in) n = std::min(n, v.size());
      std::vector<Tensor> srcs;
      for (int k = 0; k < arity; ++k) {
        in[static_cast<size_t>(k)].resize(n);
        srcs.push_back(tensor_of(in[static_cast<size_t>(k)], src_d[static_cast<size_t>(k)]));
      }
      const bool int_div =
          *op == Op::FloorDiv || *op == Op::FloorMod || *op == Op::CDiv || *op == Op::CMod;
      if (int_div) {  // no division by zero (undefined)
        for (V& v : in[1])
          if (v.i == 0) v.i = 3;
        srcs[1] = tensor_of(in[1], d);
      }
      if (*op == Op::Shl || *op == Op::Shr) {  // amounts within the width (others undefined)
        const i128 w = 8 * static_cast<i128>(d.itemsize());
        for (V& v : in[1]) v.i = (v.i % w + w) % w;
        srcs[1] = tensor_of(in[1], d);
      }
      set_default_device(device);
      for (Tensor& s : srcs) s = s.to(device);  // (made on the default device before)
      Tensor out = Tensor::alu(*op, srcs);
      const DType od = out.dtype();
      ASSERT_EQ(r.size(), 4u) << r[0];
      ASSERT_TRUE(r[3] == "bool" || r[3] == "a" || (r[3] == "b" && arity > 1))
          << r[0] << ": " << r[3];
      EXPECT_EQ(od, r[3] == "bool" ? dtypes::bool_ : src_d[r[3] == "a" ? 0 : 1])
          << r[0] << " at " << d.repr() << ": the document says the result is " << r[3];
      const std::vector<V> got = values_of(out);
      set_default_device("");
      for (size_t e = 0; e < n; ++e) {
        std::map<char, V> env;
        for (int k = 0; k < arity; ++k) env['a' + k] = in[static_cast<size_t>(k)][e];
        const V w = represented(od, f.eval(env));
        if (*op != Op::ThreeFry) {  // the IR's constant folding (INTERP's ALU) agrees too
          std::vector<Arg> args;
          for (int k = 0; k < arity; ++k) {
            const V& v = in[static_cast<size_t>(k)][e];
            const DType sd = src_d[static_cast<size_t>(k)];
            args.push_back(sd.is_float()  ? Arg::real(v.f)
                           : sd.is_bool() ? Arg::boolean(v.i != 0)
                                          : Arg::integer(v.i));
          }
          const std::optional<Arg> folded = exec_alu(*op, od, args);
          // (a 64-bit product past 128 bits is left unfolded, by design)
          const bool wide =
              od.is_int() && od.itemsize() == 8 && (*op == Op::Mul || *op == Op::MulAcc);
          if (!folded.has_value()) {
            if (!wide)
              ADD_FAILURE() << r[0] << " " << od.repr() << " at " << e
                            << ": exec_alu folds nothing";
          } else if (!od.is_float() || !(*op == Op::Sin || *op == Op::Exp2 || *op == Op::Log2) ||
                     !std::isfinite(w.f)) {
            const V value = od.is_float()       ? V{true, 0, folded->as_float()}
                            : folded->is_bool() ? V{false, folded->as_bool(), 0}
                                                : V{false, folded->as_int(), 0};
            expect_same_value(od, value, w, fmt::format("{} {} folded at {}", r[0], od.repr(), e));
          }
        }
        // (the CPU computes these, and pow through them, as polynomials)
        const bool polynomial =
            od.is_float() && device == "CPU" && std::isfinite(w.f) &&
            (*op == Op::Sin || *op == Op::Exp2 || *op == Op::Log2 || *op == Op::Pow);
        if (polynomial)
          EXPECT_NEAR(got[e].f, w.f,
                      1e-6 * std::max(1.0, std::fabs(w.f)) +
                          (od == dtypes::float32 ? 0 : 1e-2 * std::fabs(w.f)))
              << r[0] << " " << od.repr() << " at " << e;
        else
          expect_same_value(od, got[e], w,
                            fmt::format("{} {} on {} at {}", r[0], od.repr(), device, e));
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 1000);
}

// The integer ops a backend rewrites when the second source is a constant (division and modulo by
// constants as multiplies and shifts, shifts and powers of two): the formulas hold for constant
// operands too, on the device.
TEST_P(SpecSemantics, ConstantOperandsAgreeWithTheFormulas) {
  const std::string device = GetParam();
  if (!device_available(device)) GTEST_SKIP() << device << " is not available";
  const OpSet rewritten{Op::Mul, Op::CDiv, Op::CMod, Op::FloorDiv, Op::FloorMod, Op::Shl, Op::Shr};
  std::mt19937 rng(13);
  int checked = 0;
  for (const auto& r : table("elementwise")) {
    const std::optional<Op> op = op_from_name(r[0]);
    ASSERT_TRUE(op.has_value()) << r[0];
    if (!rewritten.contains(*op)) continue;
    Formula f(r[2]);
    for (DType d : dtypes_of_kind(r[1])) {
      if (!d.is_int()) continue;
      const std::vector<V> in = inputs(d, rng);
      for (const int64_t c : {1, 2, 3, 4, 7, 8, 16, 1000, -1, -2, -4, -7, -8}) {
        const bool shift = *op == Op::Shl || *op == Op::Shr;
        if ((c < 0 && d.is_unsigned()) || (shift && (c < 0 || c >= 8 * d.itemsize()))) continue;
        if (truncate_int(d, c) != c) continue;  // not a value of d
        set_default_device(device);
        Tensor out = Tensor::alu(
            *op, {tensor_of(in, d), Tensor::full({static_cast<int64_t>(in.size())}, c, d)});
        const std::vector<V> got = values_of(out);
        set_default_device("");
        for (size_t e = 0; e < in.size(); ++e) {
          const V w = represented(out.dtype(), f.eval({{'a', in[e]}, {'b', V{false, c, 0}}}));
          expect_same_value(out.dtype(), got[e], w,
                            fmt::format("{} {} by the constant {} on {} at {}", r[0], d.repr(), c,
                                        device, static_cast<long long>(in[e].i)));
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 2000);
}

// A value's bytes (little-endian, of dtype from) read as dtype to, of the same size.
V reinterpret(const V& v, DType from, DType to) {
  uint64_t bits = 0;
  if (from == dtypes::float32)
    bits = std::bit_cast<uint32_t>(static_cast<float>(v.f));
  else if (from == dtypes::float64)
    bits = std::bit_cast<uint64_t>(v.f);
  else
    bits = static_cast<uint64_t>(v.i);  // two's complement, the low bytes kept below
  const int width = 8 * to.itemsize();
  if (width < 64) bits &= (uint64_t{1} << width) - 1;
  if (to == dtypes::float32) return V{true, 0, std::bit_cast<float>(static_cast<uint32_t>(bits))};
  if (to == dtypes::float64) return V{true, 0, std::bit_cast<double>(bits)};
  return V{false, truncate_int(to, static_cast<i128>(bits)), 0};
}

// The conversions table: each Cast and Bitcast row at every pair of its kinds' dtypes (a bitcast's
// of the same size), with the edge values of inputs(), on the device.
TEST_P(SpecSemantics, ConversionsAgreeWithTheDevice) {
  const std::string device = GetParam();
  if (!device_available(device)) GTEST_SKIP() << device << " is not available";
  const auto rows = table("conversions");
  ASSERT_GE(rows.size(), 5u);
  std::mt19937 rng(7);
  int checked = 0;
  for (const auto& r : rows) {
    ASSERT_EQ(r.size(), 4u) << r[0];
    const std::optional<Op> op = op_from_name(r[0]);
    ASSERT_TRUE(op == Op::Cast || op == Op::Bitcast) << r[0];
    Formula f(r[3]);
    for (DType from : dtypes_of_kind(r[1]))
      for (DType to : dtypes_of_kind(r[2])) {
        if (from == to) continue;
        if (*op == Op::Bitcast && from.itemsize() != to.itemsize()) {
          // the document's bitcast keeps the size: other sizes are refused, by the Tensor API
          // and by the verifier
          EXPECT_THROW(tensor_of(inputs(from, rng), from).bitcast(to), TensorError)
              << from.repr() << " -> " << to.repr();
          EXPECT_THROW(
              verify(UOp::make(Op::Bitcast, to, {UOp::make(Op::Load, from, {UOp::cint(0)})}),
                     "spec_alu_only"),
              SpecError)
              << from.repr() << " -> " << to.repr();
          continue;
        }
        const std::vector<V> in = inputs(from, rng);
        set_default_device(device);
        Tensor t = tensor_of(in, from);
        Tensor out = *op == Op::Cast ? t.cast(to) : t.bitcast(to);
        const std::vector<V> got = values_of(out);
        set_default_device("");
        for (size_t e = 0; e < in.size(); ++e) {
          const std::string at =
              fmt::format("{} {} -> {} on {} at {}", r[0], from.repr(), to.repr(), device, e);
          const V w = represented(
              to, r[3] == "bits(a)" ? reinterpret(in[e], from, to) : f.eval({{'a', in[e]}}));
          expect_same_value(to, got[e], w, at);
          ++checked;
        }
      }
  }
  EXPECT_GT(checked, 1000);
}

// A value cell of the conventions table, of dtype d: True/False, nan, inf, -inf, or a number.
V convention_value(const std::string& cell, DType d) {
  if (cell == "True" || cell == "False") return V{false, cell == "True", 0};
  if (d.is_float()) {
    const double x = cell == "nan"    ? NAN
                     : cell == "inf"  ? INFINITY
                     : cell == "-inf" ? -INFINITY
                                      : std::stod(cell);
    return V{true, 0, x};
  }
  if (cell.find_first_of(".e") != std::string::npos)
    throw std::runtime_error("conventions: '" + cell + "' is no value of " + d.repr());
  return V{false, static_cast<i128>(std::stoll(cell)), 0};
}

// The conventions table: each example run on the device gives the documented result, or the
// documented error naming the op.
TEST_P(SpecSemantics, ConventionsHoldOnTheDevice) {
  const std::string device = GetParam();
  if (!device_available(device)) GTEST_SKIP() << device << " is not available";
  const auto rows = table("conventions");
  ASSERT_GE(rows.size(), 1u);
  for (const auto& r : rows) {
    ASSERT_EQ(r.size(), 6u) << r[0];
    const std::optional<Op> op = op_from_name(r[1]);
    ASSERT_TRUE(op.has_value()) << r[0] << ": no op " << r[1];
    const std::vector<DType> ds = dtypes_of_kind(r[2]);
    const bool cast = *op == Op::Cast;
    ASSERT_EQ(ds.size(), cast ? 2u : 1u) << r[0] << ": dtypes " << r[2];
    const DType src = ds[0];
    const std::string at = fmt::format("'{}' ({} {}) on {}", r[0], r[1], r[2], device);
    std::vector<Tensor> srcs{tensor_of({convention_value(r[3], src)}, src)};
    if (r[4] != "-") srcs.push_back(tensor_of({convention_value(r[4], src)}, src));
    ASSERT_EQ(static_cast<int>(srcs.size()), cast ? 1 : op_info(*op).min_src) << at;
    for (Tensor& s : srcs) s = s.to(device);
    set_default_device(device);
    try {
      Tensor out = cast ? srcs[0].cast(ds[1]) : Tensor::alu(*op, srcs);
      const std::vector<V> got = values_of(out);
      set_default_device("");
      ASSERT_NE(r[5], "error") << at << ": gave " << static_cast<double>(got[0].d())
                               << ", the document says it raises an error";
      const V want = convention_value(r[5], out.dtype());
      expect_same_value(out.dtype(), got[0], want, at + ": the document says " + r[5]);
    } catch (const std::exception& e) {
      set_default_device("");
      EXPECT_EQ(r[5], "error") << at << ": raised " << e.what();
      EXPECT_NE(std::string(e.what()).find(op_name(*op)), std::string::npos)
          << at << ": the error does not name the op: " << e.what();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, SpecSemantics, ::testing::ValuesIn(test_devices()),
                         device_test_name);

// Every elementwise op of ir/ops.def has a row of the elementwise or conversions table, and each
// row names an elementwise op.
TEST(Spec, EveryElementwiseOpHasAFormulaRow) {
  OpSet documented;
  for (const char* name : {"elementwise", "conversions"})
    for (const auto& r : table(name)) {
      const std::optional<Op> op = op_from_name(r[0]);
      ASSERT_TRUE(op.has_value()) << r[0];
      EXPECT_TRUE(groups::elementwise().contains(*op)) << r[0] << " is not an elementwise op";
      documented = documented | OpSet{*op};
    }
  for (int o = 0; o < kNumOps; ++o) {
    const Op op = static_cast<Op>(o);
    if (groups::elementwise().contains(op))
      EXPECT_TRUE(documented.contains(op)) << op_name(op) << " has no formula row";
  }
}

// (b) the documented forms are accepted by the verifiers, wrong dtypes and arities rejected
TEST(Spec, VerifiersAcceptDocumentedFormsAndRejectOthers) {
  const auto rows = table("elementwise");
  int accepted = 0, rejected = 0;
  for (const auto& r : rows) {
    const Op op = *op_from_name(r[0]);
    const int arity = op_info(op).min_src;
    for (DType d : dtypes_of_kind(r[1])) {
      std::vector<UOp> src;
      for (int k = 0; k < arity; ++k) {
        const DType sd = (op == Op::Where && k == 0) ? dtypes::bool_ : d;
        src.push_back(UOp::make(Op::Load, sd, {UOp::cint(k)}));  // an opaque value of dtype sd
      }
      const DType out = groups::comparison().contains(op) ? dtypes::bool_ : d;
      const UOp good = UOp::make(op, out, src);
      EXPECT_NO_THROW(verify(good, "spec_alu_only")) << r[0] << " " << d.repr();
      ++accepted;
      // a source of another dtype (of each kind), at each position, is rejected
      for (size_t k = 0; k < src.size(); ++k)
        for (DType other : {dtypes::int32, dtypes::float32, dtypes::bool_}) {
          if (other == src[k].dtype()) continue;
          std::vector<UOp> bad_src = src;
          bad_src[k] = UOp::make(Op::Load, other, {UOp::cint(9)});
          EXPECT_THROW(verify(UOp::make(op, out, bad_src), "spec_alu_only"), SpecError)
              << r[0] << " " << d.repr() << ": source " << k << " of " << other.repr();
          ++rejected;
        }
      // and so is a result of another dtype (a comparison's that is not bool)
      const DType wrong_out = out == dtypes::float32 ? dtypes::int32 : dtypes::float32;
      EXPECT_THROW(verify(UOp::make(op, wrong_out, src), "spec_alu_only"), SpecError)
          << r[0] << " " << d.repr() << ": a result of " << wrong_out.repr();
      ++rejected;
      // a wrong arity cannot even be built: the op table rejects it
      std::vector<UOp> more = src;
      more.push_back(src[0]);
      EXPECT_THROW(UOp::make(op, out, more), GraphError) << r[0];
    }
  }
  EXPECT_GT(accepted, 80);
  EXPECT_GT(rejected, 80);
  // the kinds read the other way: at a dtype of no listed kind (all sources and the result of it,
  // a Where's condition bool) the op is refused, by the verifier or by the IR
  int unlisted = 0;
  for (const auto& r : rows) {
    const Op op = *op_from_name(r[0]);
    const int arity = op_info(op).min_src;
    const std::vector<DType> listed = dtypes_of_kind(r[1]);
    std::istringstream kinds(r[1]);
    const bool ints =
        std::find(std::istream_iterator<std::string>(kinds), std::istream_iterator<std::string>(),
                  "int") != std::istream_iterator<std::string>();
    for (DType d : dtypes_of_kind("int float bool uint64")) {
      // (a listed dtype, or an int dtype the tests do not try where the row lists int)
      if (std::find(listed.begin(), listed.end(), d) != listed.end() || (ints && d.is_int()))
        continue;
      std::vector<UOp> src;
      for (int k = 0; k < arity; ++k)
        src.push_back(
            UOp::make(Op::Load, (op == Op::Where && k == 0) ? dtypes::bool_ : d, {UOp::cint(k)}));
      const DType out = groups::comparison().contains(op) ? dtypes::bool_ : d;
      bool refused = false;
      try {
        verify(UOp::make(op, out, src), "spec_alu_only");
      } catch (const SpecError&) {
        refused = true;
      } catch (const GraphError&) {
        refused = true;
      }
      EXPECT_TRUE(refused) << r[0] << " at " << d.repr()
                           << " is accepted, but the document does not list its kind";
      ++unlisted;
    }
  }
  EXPECT_GT(unlisted, 30);
  try {
    verify(UOp::make(Op::Add, dtypes::int32, {UOp::cint(1, dtypes::int32), UOp::cfloat(1.0)}),
           "spec_alu_only");
    FAIL();
  } catch (const SpecError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("spec_alu_only rejects ADD dtypes.int with sources (CONST dtypes.int, CONST "
                     "dtypes.float)"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("source dtypes differ from the result"), std::string::npos) << m;
  }
}

// Tensor programs pass the tensor and kernel verifiers (the suite also runs with SPEC=1).
TEST(Spec, PipelineGraphsPassTheVerifiers) {
  Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor t = (a.transpose().pad({{1, 0}, {0, 1}}) * 2.0).sum({1}).softmax();
  EXPECT_NO_THROW(verify(t.uop(), "spec_tensor"));
  // a Reshape whose dtype differs from its source's is rejected
  const UOp bad = UOp::make(Op::Reshape, dtypes::int32, {a.uop(), a.uop().src(1)});
  EXPECT_THROW(verify(bad, "spec_tensor"), SpecError);
  // a kernel may not index a tensor (only buffers)
  const UOp idx = UOp::make(Op::Index, dtypes::float32, {a.uop(), UOp::cint(0)});
  EXPECT_THROW(verify(idx, "spec_kernel"), SpecError);
}

// CALL bodies are verified as what they are: a function's as a tensor graph, a kernel's with
// spec_kernel_body; kernel-body ops outside a kernel body are rejected.
TEST(Spec, CallBodiesAreVerifiedByKind) {
  const Tensor a = Tensor::from_vector(std::vector<float>{1, 2}, {2});
  auto f = function([](Tensor x) { return x * 2.0f; });
  EXPECT_NO_THROW(verify_with_calls(f(a).uop(), rules::spec_tensor(), rules::spec_kernel_body()));
  auto twice = [](const std::vector<UOp>& p) {
    const UOp i = UOp::range(UOp::cint(2), 0);
    return kernel_sink({kernel_end(
        kernel_store(kernel_index(p[0], {i}), kernel_index(p[1], {i}) * p[1].const_like(2.0)),
        {i})});
  };
  const Tensor k = custom_kernel({Tensor::empty({2}), a}, twice)[0];
  EXPECT_NO_THROW(verify_with_calls(k.uop(), rules::spec_tensor(), rules::spec_kernel_body()));
  EXPECT_THROW(verify(k.uop().src(1).src(0), "spec_tensor"), SpecError);  // a loop is no tensor op
  // a reduction is no kernel-body op
  const UOp reduce = UOp::make(Op::Reduce, dtypes::float32, {a.uop()},
                               Arg::tuple({Arg::op(Op::Add), Arg::integer(1)}));
  const UOp body = UOp::sink(std::vector<UOp>{reduce});
  EXPECT_THROW(verify(body, "spec_kernel_body"), SpecError);
}

// A fuzzer of ill-formed graphs: random ops over sources of random dtypes; the verifiers accept or
// reject each with a message, and never crash.
TEST(Spec, RandomIllFormedGraphsAreRejectedWithAMessage) {
  std::mt19937 rng(17);
  const DType ds[] = {dtypes::bool_,   dtypes::int8,    dtypes::int32, dtypes::uint32,
                      dtypes::float16, dtypes::float32, dtypes::index};
  std::vector<Op> alu;
  groups::alu().for_each([&](Op o) { alu.push_back(o); });
  alu.push_back(Op::Cast);
  alu.push_back(Op::Bitcast);
  int rejected = 0;
  for (int t = 0; t < 3000; ++t) {
    const Op op = alu[rng() % alu.size()];
    const int n = op_info(op).min_src;
    std::vector<UOp> src;
    for (int k = 0; k < n; ++k) src.push_back(UOp::make(Op::Load, ds[rng() % 7], {UOp::cint(k)}));
    const UOp u = UOp::make(op, ds[rng() % 7], src);
    for (const char* set : {"spec_tensor", "spec_kernel"}) {
      try {
        verify(u, set);
      } catch (const SpecError& e) {
        EXPECT_NE(std::string(e.what()).find("rejects"), std::string::npos);
        ++rejected;
      }
    }
  }
  EXPECT_GT(rejected, 1000);
}

// ---- (c) shapes: the document's shape table, read rule by rule --------------------------------
namespace {

using Dims3 = std::vector<std::vector<int64_t>>;  // the source shapes s0, s1, s2

std::optional<std::vector<int64_t>> broadcast(const Dims3& s) {
  size_t rank = 0;
  for (const auto& d : s) rank = std::max(rank, d.size());
  std::vector<int64_t> out(rank, 1);
  for (const auto& d : s)
    for (size_t k = 0; k < d.size(); ++k) {
      int64_t& o = out[rank - d.size() + k];
      if (d[k] == 1) continue;
      if (o != 1 && o != d[k]) return std::nullopt;
      o = d[k];
    }
  return out;
}
int64_t prod(const std::vector<int64_t>& d) {
  int64_t p = 1;
  for (int64_t x : d) p *= x;
  return p;
}

// One generated case: an op, its source shapes and its arg (the permutation, flips or reduce n).
struct ShapeCase {
  Op op;
  Dims3 s;
  std::vector<int64_t> arg;
  bool arg_is_bools = true;
};

// The document's rules, by their text: an unknown rule is a test failure, not a skip.
std::optional<std::vector<int64_t>> documented_shape(const std::string& rule, const ShapeCase& c) {
  if (rule == "s0" || rule == "s1" || rule == "s2") return c.s[static_cast<size_t>(rule[1] - '0')];
  if (rule == "permute(s0, arg)") {
    std::vector<int64_t> out;
    for (int64_t k : c.arg) out.push_back(c.s[0][static_cast<size_t>(k)]);
    return out;
  }
  if (rule == "s0[n:]") return std::vector<int64_t>(c.s[0].begin() + c.arg[0], c.s[0].end());
  if (rule == "broadcast(s0, s1)" || rule == "broadcast(s0, s1, s2)") return broadcast(c.s);
  ADD_FAILURE() << "the shape rule '" << rule << "' is not understood";
  return std::nullopt;
}

bool documented_valid(const std::string& rule, const ShapeCase& c) {
  const auto& s = c.s;
  const size_t r0 = s[0].size();
  auto each = [&](auto&& pred) {
    for (size_t k = 0; k < r0; ++k)
      if (!pred(k)) return false;
    return true;
  };
  if (rule == "always") return true;
  if (rule == "prod(s0) == prod(s1)") return prod(s[0]) == prod(s[1]);
  if (rule == "rank(s0) == rank(s1) and each s0[k] in (1, s1[k])")
    return r0 == s[1].size() && each([&](size_t k) { return s[0][k] == 1 || s[0][k] == s[1][k]; });
  if (rule == "arg is a permutation of range(rank(s0))") {
    std::vector<int64_t> sorted = c.arg, want(r0);
    std::sort(sorted.begin(), sorted.end());
    std::iota(want.begin(), want.end(), 0);
    return sorted == want;
  }
  const bool ranks = s.size() == 3 && s[1].size() == r0 && s[2].size() == r0;
  if (rule == "equal ranks and each 0 <= s1[k] and s1[k] + s0[k] <= s2[k]")
    return ranks && each([&](size_t k) { return s[1][k] >= 0 && s[1][k] + s[0][k] <= s[2][k]; });
  if (rule == "equal ranks and each 0 <= s1[k] and s1[k] + s2[k] <= s0[k]")
    return ranks && each([&](size_t k) {
             return s[1][k] >= 0 && s[2][k] >= 0 && s[1][k] + s[2][k] <= s[0][k];
           });
  if (rule == "arg is rank(s0) booleans") return c.arg_is_bools && c.arg.size() == r0;
  if (rule == "arg is (op, n) with 0 <= n <= rank(s0)")
    return c.arg[0] >= 0 && c.arg[0] <= static_cast<int64_t>(r0);
  if (rule == "broadcastable(s0, s1)" || rule == "broadcastable(s0, s1, s2)")
    return broadcast(s).has_value();
  ADD_FAILURE() << "the condition '" << rule << "' is not understood";
  return false;
}

// Random cases for one op, about half of them invalid.
ShapeCase random_case(Op op, std::mt19937& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto dims = [&](size_t rank, int lo, int hi) {
    std::vector<int64_t> d(rank);
    for (int64_t& x : d) x = pick(lo, hi);
    return d;
  };
  ShapeCase c{op, {dims(static_cast<size_t>(pick(0, 3)), 1, 4)}, {}};
  const size_t r = c.s[0].size();
  switch (op) {
    case Op::Reshape: {
      std::vector<int64_t> t = c.s[0];
      std::shuffle(t.begin(), t.end(), rng);
      if (pick(0, 1)) t.insert(t.begin() + pick(0, static_cast<int>(t.size())), 1);
      if (pick(0, 2) == 0) t = dims(static_cast<size_t>(pick(0, 3)), 1, 4);
      c.s.push_back(t);
      break;
    }
    case Op::Expand: {
      std::vector<int64_t> t = c.s[0];
      for (int64_t& x : t) x = pick(0, 1) ? x : pick(1, 4);
      if (pick(0, 4) == 0) t.push_back(2);
      c.s.push_back(t);
      break;
    }
    case Op::Permute:
      c.arg.resize(r);
      std::iota(c.arg.begin(), c.arg.end(), 0);
      std::shuffle(c.arg.begin(), c.arg.end(), rng);
      if (r > 0 && pick(0, 2) == 0) c.arg[0] = pick(0, static_cast<int>(r));
      break;
    case Op::Pad:
    case Op::Shrink: {
      const std::vector<int64_t> off = dims(r + (pick(0, 6) == 0), -1, 2);
      std::vector<int64_t> size = dims(r, 0, 7);
      c.s.push_back(off);
      c.s.push_back(size);
      break;
    }
    case Op::Flip:
      c.arg = dims(r + (pick(0, 4) == 0 ? 1 : 0), 0, 1);
      c.arg_is_bools = c.arg.empty() || pick(0, 5) != 0;
      break;
    case Op::Reduce:
      c.arg = {pick(-1, static_cast<int>(r) + 1)};
      break;
    case Op::Cast:
      break;
    default:  // elementwise: shapes of 1s, 2s and 3s broadcast about half the time
      c.s = {dims(static_cast<size_t>(pick(0, 3)), 1, 3),
             dims(static_cast<size_t>(pick(0, 3)), 1, 3)};
      if (groups::ternary().contains(op))
        c.s.push_back(dims(static_cast<size_t>(pick(0, 2)), 1, 3));
      break;
  }
  return c;
}

// The core's answer: the node's shape, or nullopt when building or shaping it is an error.
std::optional<std::vector<int64_t>> core_shape(const ShapeCase& c) {
  auto shaped = [](const std::vector<int64_t>& d, DType dt) {
    Shape s;
    for (int64_t x : d) s.emplace_back(x);
    return UOp::make(Op::Buffer, dt, {shape_to_uop(s)});
  };
  try {
    std::vector<UOp> src;
    UOp node;
    std::vector<Arg> items;
    for (int64_t a : c.arg)
      items.push_back(c.arg_is_bools ? Arg::boolean(a != 0) : Arg::integer(a));
    switch (c.op) {
      case Op::Cast:
        node = UOp::make(Op::Cast, dtypes::float32, {shaped(c.s[0], dtypes::int32)});
        break;
      case Op::Reshape:
      case Op::Expand:
      case Op::Pad:
      case Op::Shrink: {
        src.push_back(shaped(c.s[0], dtypes::float32));
        for (size_t i = 1; i < c.s.size(); ++i) {
          Shape s;
          for (int64_t x : c.s[i]) s.emplace_back(x);
          src.push_back(shape_to_uop(s));
        }
        node = UOp::make(c.op, dtypes::float32, src);
        break;
      }
      case Op::Permute:
        items.clear();
        for (int64_t a : c.arg) items.push_back(Arg::integer(a));
        node =
            UOp::make(c.op, dtypes::float32, {shaped(c.s[0], dtypes::float32)}, Arg::tuple(items));
        break;
      case Op::Flip:
        node =
            UOp::make(c.op, dtypes::float32, {shaped(c.s[0], dtypes::float32)}, Arg::tuple(items));
        break;
      case Op::Reduce:
        node = UOp::make(c.op, dtypes::float32, {shaped(c.s[0], dtypes::float32)},
                         Arg::tuple({Arg::op(Op::Add), Arg::integer(c.arg[0])}));
        break;
      default:
        for (size_t i = 0; i < c.s.size(); ++i)
          src.push_back(
              shaped(c.s[i], i == 0 && c.op == Op::Where ? dtypes::bool_ : dtypes::float32));
        node = UOp::make(c.op, dtypes::float32, src);
        break;
    }
    std::vector<int64_t> out;
    for (const SInt& d : node.shape()) out.push_back(d.value());
    return out;
  } catch (const GraphError&) {
    return std::nullopt;
  }
}

}  // namespace

TEST(Spec, ShapesFollowTheDocumentedRules) {
  const auto rows = table("shapes");
  // the document must give a rule for every op a Tensor graph shapes in its own way
  std::set<std::string> required = {"Cast",   "Reshape", "Expand", "Permute", "Pad",
                                    "Shrink", "Flip",    "Reduce", "Add",     "Where"};
  for (const auto& r : rows) required.erase(r.empty() ? "" : r[0]);
  EXPECT_TRUE(required.empty()) << "no shape rule for " << *required.begin();
  std::mt19937 rng(17);
  for (const auto& r : rows) {
    ASSERT_EQ(r.size(), 3u);
    const std::optional<Op> op = op_from_name(r[0]);
    ASSERT_TRUE(op.has_value()) << r[0];
    int valid = 0, invalid = 0;
    for (int t = 0; t < 300; ++t) {
      const ShapeCase c = random_case(*op, rng);
      const bool doc_valid = documented_valid(r[2], c);
      const std::optional<std::vector<int64_t>> got = core_shape(c);
      ASSERT_EQ(got.has_value(), doc_valid)
          << r[0] << " case " << t << ": the document says " << (doc_valid ? "valid" : "invalid");
      if (!doc_valid) {
        ++invalid;
        continue;
      }
      ++valid;
      ASSERT_EQ(*got, documented_shape(r[1], c)) << r[0] << " case " << t;
    }
    EXPECT_GT(valid, 20) << r[0];  // both sides of every rule are exercised
    if (r[2] != "always") EXPECT_GT(invalid, 20) << r[0];
  }
}

// The devices table, each row's rule checked on a node whose sources and arg make every rule of
// the table give a different device: source 0 has none, source 1 is on B, the arg names A.
TEST(Spec, DevicesFollowTheDocumentedTable) {
  const auto rows = table("devices");
  const Arg A = Arg::string("A"), B = Arg::string("B");
  auto record = [](const Arg& device) {
    return Arg::record("ParamArg",
                       {{"slot", Arg::integer(0)}, {"size", Arg::integer(4)}, {"device", device}});
  };
  const UOp none_src = UOp::cfloat(1.0);  // no device
  const UOp on_b = UOp::make(Op::Buffer, dtypes::float32, {}, record(B));
  const UOp on_a = UOp::make(Op::Buffer, dtypes::float32, {}, record(A));
  // what a cell says the node's device is
  auto expected = [&](const std::string& rule, const UOp& node) -> Arg {
    if (rule == "arg.device") {
      const Arg* d = node.arg().is_record() ? node.arg().find_field("device") : nullptr;
      return d ? *d : Arg();
    }
    if (rule == "arg.device else src[0]") {
      const Arg* d = node.arg().is_record() ? node.arg().find_field("device") : nullptr;
      return d ? *d : node.src(0).device();
    }
    if (rule == "arg") return node.arg();
    if (rule == "arg[1]") return node.arg().items()[1];
    if (rule == "src[0]") return node.src(0).device();
    if (rule == "tuple(src)") {
      std::vector<Arg> d;
      for (const UOp& x : node.src()) d.push_back(x.device());
      return Arg::tuple(std::move(d));
    }
    if (rule == "src[0][arg]")
      return node.src(0).device().items()[static_cast<size_t>(node.arg().as_int())];
    if (rule == "first(src)") {
      for (const UOp& x : node.src())
        if (!x.device().is_none()) return x.device();
      return Arg();
    }
    ADD_FAILURE() << "unknown device rule '" << rule << "'";
    return Arg();
  };
  // a node of each op the table may name, built so that the rules differ
  std::map<std::string, UOp> nodes{
      {"Buffer", UOp::make(Op::Buffer, dtypes::float32, {}, record(A))},
      {"Param", UOp::make(Op::Param, dtypes::float32, {}, record(A))},
      {"Stage", UOp::make(Op::Stage, dtypes::float32, {none_src, on_b}, record(A))},
      {"Copy", UOp::make(Op::Copy, dtypes::float32, {none_src, on_b}, A)},
      {"AllReduce",
       UOp::make(Op::AllReduce, dtypes::float32, {on_b}, Arg::tuple({Arg::op(Op::Add), A}))},
      {"After", UOp::make(Op::After, dtypes::float32, {none_src, on_b})},
      {"MStack", UOp::make(Op::MStack, dtypes::float32, {on_a, on_b})},
      {"MSelect",
       UOp::make(Op::MSelect, dtypes::float32,
                 {UOp::make(Op::MStack, dtypes::float32, {on_a, on_b})}, Arg::integer(1))},
  };
  std::set<std::string> seen;
  for (const auto& r : rows) {
    ASSERT_EQ(r.size(), 2u) << r[0];
    seen.insert(r[0]);
    if (r[0] == "other") {  // ops not listed: an elementwise op, a view, one with no device
      const UOp add = UOp::make(Op::Add, dtypes::float32, {none_src, on_b});
      EXPECT_EQ(add.device(), expected(r[1], add)) << "ADD";
      const UOp cst = UOp::make(Op::Contiguous, dtypes::float32, {on_a});
      EXPECT_EQ(cst.device(), expected(r[1], cst)) << "CONTIGUOUS";
      EXPECT_TRUE(none_src.device().is_none());
      EXPECT_EQ(expected(r[1], none_src), Arg());
      continue;
    }
    if (r[0] == "Stage") {  // rangeify's STAGE, whose arg is (removable, tag): its source's device
      const UOp staged = UOp::make(Op::Stage, dtypes::float32, {on_b},
                                   Arg::tuple({Arg::boolean(true), Arg::integer(0)}));
      EXPECT_EQ(staged.device(), expected(r[1], staged)) << "STAGE without a device field";
    }
    auto it = nodes.find(r[0]);
    ASSERT_NE(it, nodes.end()) << r[0] << ": the test builds no node of this op";
    EXPECT_EQ(it->second.device(), expected(r[1], it->second))
        << r[0] << ": the device is " << it->second.device().repr() << ", the table says " << r[1]
        << " (" << expected(r[1], it->second).repr() << ")";
  }
  // every op with a rule of its own has its row (the test builds exactly those)
  for (const auto& [name, node] : nodes) EXPECT_TRUE(seen.count(name)) << name << " has no row";
  EXPECT_TRUE(seen.count("other"));
}

// The pipeline table against a VIZ trace of a realize (a matmul, a padded view, a reduction, on the
// CPU): the stages appear in the table's order (each by the first call named for it), every stage
// of the table appears, every call of the trace's outer level is a stage of the table or a
// substitution, each stage's rules come from the row's files, and its rule sets and verifiers
// exist.
TEST(Spec, PipelineTableIsTheOrderOfTheStages) {
  const auto rows = table("pipeline");
  ASSERT_GT(rows.size(), 20u);
  auto words = [](const std::string& cell) {
    std::vector<std::string> w;
    std::istringstream in(cell);
    for (std::string x; in >> x;) {
      std::erase(x, '\\');  // spec\_tensor
      if (x != "-") w.push_back(x);
    }
    return w;
  };
  std::map<std::string, size_t> position;
  for (size_t k = 0; k < rows.size(); ++k) {
    ASSERT_EQ(rows[k].size(), 4u) << rows[k][0];
    position[rows[k][0]] = k;
    for (const std::string& set : words(rows[k][1]))
      EXPECT_NE(rw::compiled_rules(set), nullptr) << rows[k][0] << ": no rule set " << set;
    for (const std::string& v : words(rows[k][3]))
      EXPECT_NE(rw::compiled_rules(v), nullptr) << rows[k][0] << ": no verifier " << v;
  }
  set_default_device("CPU");
  // a realized input: an arange alone would fold into index math and read no memory
  const Tensor a = Tensor::arange(64).reshape({8, 8}).cast(dtypes::float32).realize();
  Tensor b = (a.matmul(a) + a.pad({{1, 1}, {0, 0}}).shrink({{1, 9}, {0, 8}})).sum({1});
  viz::clear();
  viz::enable();
  const std::vector<double> got = b.to_doubles();
  viz::disable();
  set_default_device("");
  const auto doc = nlohmann::json::parse(viz::to_json());
  viz::clear();
  ASSERT_EQ(got.size(), 8u);
  std::vector<size_t> first_seen;  // table positions, in the order the trace first calls them
  std::set<size_t> seen;
  for (const auto& call : doc["calls"]) {
    if (call["depth"] != 0) continue;
    const std::string name = call["name"];
    const auto it = position.find(name);
    if (it == position.end()) {
      // substitutions and the C++ passes of tensor/realize.cpp (schedule, linearize) are not
      // rule-set stages
      EXPECT_TRUE(name == "substitute" || name == "schedule" || name == "linearize")
          << "the trace calls a stage the table lacks: " << name;
      continue;
    }
    if (seen.insert(it->second).second) first_seen.push_back(it->second);
    const std::vector<std::string> files = words(rows[it->second][2]);
    for (const auto& m : call["matches"]) {
      const std::string file = m["rule"]["file"];
      EXPECT_NE(std::find(files.begin(), files.end(), file), files.end())
          << name << ": rule " << m["rule"]["name"] << " is from " << file
          << ", not a file of the row";
    }
  }
  EXPECT_TRUE(std::is_sorted(first_seen.begin(), first_seen.end()))
      << "the stages run in another order than the table's";
  for (size_t k = 0; k < rows.size(); ++k)
    EXPECT_TRUE(seen.count(k)) << rows[k][0] << " does not run";
}

// Every float elementwise op of the document is differentiable: rules/gradient.rw has a rule for
// it that returns one gradient (or none) per source.
TEST(Spec, EveryFloatElementwiseOpHasAGradientRule) {
  const rw::RuleSetMatcher* grad = rw::compiled_rules("grad");
  ASSERT_NE(grad, nullptr);
  Shape s{SInt(3)};
  auto buffer = [&](DType d) { return UOp::make(Op::Buffer, d, {shape_to_uop(s)}); };
  const UOp g = buffer(dtypes::float32);
  int checked = 0;
  for (const auto& r : table("elementwise")) {
    if (r[1].find("float") == std::string::npos) continue;
    const std::optional<Op> op = op_from_name(r[0]);
    ASSERT_TRUE(op.has_value()) << r[0];
    std::vector<UOp> src;
    for (int i = 0; i < op_info(*op).min_src; ++i)
      src.push_back(buffer(i == 0 && *op == Op::Where ? dtypes::bool_ : dtypes::float32));
    const bool compare = *op == Op::CmpLt || *op == Op::CmpNe || *op == Op::CmpEq;
    const UOp node = UOp::make(*op, compare ? dtypes::bool_ : dtypes::float32, src);
    RewriteContext ctx;
    const std::optional<rw::Value> out = grad->apply(node, ctx, nullptr, &g);
    ASSERT_TRUE(out.has_value()) << "no gradient rule for " << r[0];
    ASSERT_EQ(out->kind(), rw::Value::Kind::Tuple) << r[0];
    EXPECT_EQ(out->items().size(), src.size()) << r[0] << ": one gradient per source";
    ++checked;
  }
  EXPECT_GE(checked, 15);
}

// (e) every rule of the scheduling contract names at least one test, and each named test exists.
// Each contract row (ids C1, C2, ... with no gap) names tests that exist, and the tie is read both
// ways: the line before each named test's declaration is a tag `// contract: C3 ...` holding the
// row's id, and every tag in the tensor tests names rows that list the test it precedes.
// What a test asserts: its body, with the bodies of the helper functions of its file that it calls
// (one level), as lines.
struct TestSource {
  std::vector<std::string> lines;
};

// Whether a test asserts an observable of the contract table: `values`, `node`, `gradient`,
// `kernels`, `raises`, or ``text'' (an error message containing the text).
bool asserts(const TestSource& t, const std::string& observable) {
  auto any_line = [&](const std::function<bool(const std::string&)>& pred) {
    return std::any_of(t.lines.begin(), t.lines.end(), pred);
  };
  auto has = [](const std::string& l, const char* s) { return l.find(s) != std::string::npos; };
  auto assertion = [&](const std::string& l) {
    return has(l, "EXPECT_") || has(l, "ASSERT_") || has(l, "ADD_FAILURE");
  };
  if (observable.rfind("``", 0) == 0 && observable.size() > 4 &&
      observable.substr(observable.size() - 2) == "''") {
    const std::string text = observable.substr(2, observable.size() - 4);
    return any_line([&](const std::string& l) {
      return has(l, text.c_str()) && has(l, "\"");  // in a string literal of the line
    });
  }
  // values and gradients: the test reads them and asserts an equality (often of a variable read
  // on an earlier line)
  const bool compares = any_line([&](const std::string& l) {
    return has(l, "EXPECT_EQ") || has(l, "ASSERT_EQ") || has(l, "EXPECT_NEAR");
  });
  if (observable == "values")
    return compares && any_line([&](const std::string& l) {
             return has(l, "to_doubles()") || has(l, "data<");
           });
  if (observable == "node")
    return any_line([&](const std::string& l) {
      return (has(l, "EXPECT_EQ") || has(l, "EXPECT_NE") || has(l, "ASSERT_EQ")) && has(l, "uop()");
    });
  if (observable == "gradient")
    return compares && any_line([&](const std::string& l) {
             return has(l, "gradient(") || has(l, "backward(") || has(l, "grad()");
           });
  if (observable == "kernels")
    return any_line([&](const std::string& l) { return assertion(l) && has(l, "kernel_count"); });
  if (observable == "raises")
    return any_line([&](const std::string& l) {
      return has(l, "_THROW(") || has(l, "expect_error(") || has(l, "ADD_FAILURE");
    });
  ADD_FAILURE() << "unknown observable '" << observable << "'";
  return false;
}

TEST(Spec, EveryContractRuleIsTiedToATest) {
  // test name (Suite.Name) -> the ids its tag gives, from every tagged declaration
  std::map<std::string, std::set<std::string>> tagged;
  std::map<std::string, TestSource> sources;  // every declared test's source
  const std::regex decl(R"(^TEST(_P|_F)?\((\w+), (\w+)\))");
  const std::regex helper(R"(^[\w:<>*&, ]+ (\w+)\(.*\{$)");
  for (const auto& f : std::filesystem::directory_iterator(TINYRW_SOURCE_DIR "/tests/tensor")) {
    std::ifstream in(f.path());
    std::map<std::string, std::vector<std::string>> helpers;  // the file's functions, by name
    std::vector<std::string>* body = nullptr;                 // the function or test being read
    std::vector<std::string> tests_here;
    std::string prev, line;
    for (; std::getline(in, line); prev = line) {
      if (body) {
        body->push_back(line);
        if (line == "}") body = nullptr;
        continue;
      }
      std::smatch m;
      if (std::regex_search(line, m, decl)) {
        const std::string name = m[2].str() + "." + m[3].str();
        tests_here.push_back(name);
        body = &sources[name].lines;
        if (prev.rfind("// contract:", 0) != 0) continue;
        std::istringstream ids(prev.substr(12));
        for (std::string id; ids >> id;) tagged[name].insert(id);
        continue;
      }
      EXPECT_FALSE(line.find("// contract:") != std::string::npos &&
                   line.rfind("// contract:", 0) != 0)
          << f.path() << ": a contract tag must be a line of its own: " << line;
      if (std::regex_search(line, m, helper)) body = &helpers[m[1].str()];
    }
    for (const std::string& name : tests_here) {  // add the helpers each test calls
      std::vector<std::string>& lines = sources[name].lines;
      const std::vector<std::string> own = lines;
      for (const auto& [fn, fn_body] : helpers)
        if (std::any_of(own.begin(), own.end(), [&](const std::string& l) {
              return l.find(fn + "(") != std::string::npos;
            }))
          lines.insert(lines.end(), fn_body.begin(), fn_body.end());
    }
  }
  const auto rows = table("contract");
  ASSERT_GE(rows.size(), 6u);
  std::map<std::string, std::set<std::string>> listed;  // test -> the rows that list it
  for (size_t k = 0; k < rows.size(); ++k) {
    const auto& r = rows[k];
    ASSERT_EQ(r.size(), 4u);
    EXPECT_EQ(r[0], fmt::format("C{}", k + 1)) << "contract ids run C1, C2, ... with no gap";
    std::vector<std::string> observables;
    std::stringstream items(r[3]);
    for (std::string item; std::getline(items, item, ';');) observables.push_back(clean(item));
    EXPECT_FALSE(observables.empty()) << r[0] << " names no observable";
    std::set<std::string> asserted;
    std::stringstream names(r[2]);
    std::string name;
    int tied = 0;
    while (std::getline(names, name, ',')) {
      name = clean(name);
      ASSERT_NE(name.find('.'), std::string::npos)
          << r[0] << ": '" << name << "' is not Suite.Test";
      EXPECT_TRUE(sources.count(name)) << r[0] << ": no test " << name;
      EXPECT_TRUE(tagged[name].count(r[0]))
          << r[0] << " names " << name << ", whose declaration is not tagged // contract: " << r[0];
      listed[name].insert(r[0]);
      ++tied;
      int any = 0;
      for (const std::string& o : observables)
        if (sources.count(name) && asserts(sources[name], o)) {
          asserted.insert(o);
          ++any;
        }
      EXPECT_GE(any, 1) << r[0] << ": " << name << " asserts none of its observables (" << r[3]
                        << ")";
    }
    EXPECT_GE(tied, 1) << r[0] << " is tied to no test";
    for (const std::string& o : observables)
      EXPECT_TRUE(asserted.count(o)) << r[0] << ": no test of the row asserts " << o;
  }
  for (const auto& [name, ids] : tagged)
    for (const std::string& id : ids)
      EXPECT_TRUE(listed[name].count(id))
          << name << " is tagged " << id << ", but that row does not list it";
}

// ---- the kernel AST verifier (spec_kernel_ast) and its table
// -------------------------------------------------------------

namespace {

UOp kparam(size_t slot, int64_t n, DType d = dtypes::float32) {
  return UOp::make(Op::Param, d, {shape_to_uop({n})},
                   Arg::record("ParamArg", {{"slot", Arg::integer(static_cast<i128>(slot))},
                                            {"device", Arg::string("CPU")}}));
}
UOp krange(int64_t n, int id, AxisType t = AxisType::Weak) {
  return UOp::range(UOp::cint(n), id, t);
}
UOp kidx(const UOp& p, const UOp& i) { return UOp::make(Op::Index, p.dtype(), {p, i}); }
UOp kreduce(const UOp& v, std::vector<UOp> rs, Op op = Op::Add) {
  rs.insert(rs.begin(), v);
  return UOp::make(Op::Reduce, v.dtype(), rs, Arg::tuple({Arg::op(op), Arg::integer(0)}));
}
UOp kstore(const UOp& d, const UOp& v) { return UOp::make(Op::Store, dtypes::void_, {d, v}); }
UOp kend(const UOp& e, std::vector<UOp> rs) {
  rs.insert(rs.begin(), e);
  return UOp::make(Op::End, dtypes::void_, rs);
}
UOp ksink(std::vector<UOp> effects) {
  return UOp::make(Op::Sink, dtypes::void_, effects, KernelInfo{.name = "test"}.to_arg());
}
UOp ci(i128 v) { return UOp::cint(v); }

// The kernels tinygrad makes for four programs (NOOPT, /work/notes/issue13-plan.md section 0),
// rebuilt node for node.
std::vector<std::pair<std::string, UOp>> tinygrad_kernels() {
  std::vector<std::pair<std::string, UOp>> out;
  {  // a.sum(1, keepdim=True) + b, (4,4) + (4,1)
    const UOp r1 = krange(4, 1), r0 = krange(4, 0, AxisType::Reduce);
    const UOp sum = kreduce(kidx(kparam(1, 16), r1 * ci(4) + r0), {r0});
    out.emplace_back(
        "sum_plus",
        ksink({kend(kstore(kidx(kparam(0, 4), r1), sum + kidx(kparam(2, 4), r1)), {r1})}));
  }
  {  // a - a.sum(1), (4,4): the sum, then the difference
    const UOp r1 = krange(4, 1), r0 = krange(4, 0, AxisType::Reduce);
    const UOp sum = kreduce(kidx(kparam(1, 16), r1 * ci(4) + r0), {r0});
    out.emplace_back("x_minus_sum 0", ksink({kend(kstore(kidx(kparam(0, 4), r1), sum), {r1})}));
    const UOp o0 = krange(4, 0), o1 = krange(4, 1), i = o0 * ci(4) + o1;
    const UOp diff = kidx(kparam(1, 16), i) + kidx(kparam(2, 4), o1) * UOp::cfloat(-1.0);
    out.emplace_back("x_minus_sum 1",
                     ksink({kend(kstore(kidx(kparam(0, 16), i), diff), {o0, o1})}));
  }
  {  // y.sum(-1) + x.sum(-1), (4,32): two REDUCE ranges in one kernel
    const UOp r2 = krange(4, 2), r0 = krange(32, 0, AxisType::Reduce),
              r1 = krange(32, 1, AxisType::Reduce), row = r2 * ci(32);
    const UOp v = kreduce(kidx(kparam(1, 128), row + r0), {r0}) +
                  kreduce(kidx(kparam(2, 128), row + r1), {r1});
    out.emplace_back("two_sums", ksink({kend(kstore(kidx(kparam(0, 4), r2), v), {r2})}));
  }
  {  // xs = X[2:4]; xs.assign(xs + 1): the store reads and writes the same INDEX
    const UOp r0 = krange(2, 0), at = kidx(kparam(0, 4, dtypes::int32), r0 + ci(2));
    out.emplace_back("slice_assign",
                     ksink({kend(kstore(at, at + UOp::cint(1, dtypes::int32)), {r0})}));
  }
  return out;
}

// The messages of a verifier rule: the reasons of its require(..., "why") and fail("why").
std::set<std::string> rule_messages(const std::string& source) {
  std::set<std::string> out;
  for (const std::string& open : {std::string(", \""), std::string("fail(\"")}) {
    for (size_t p = source.find(open); p != std::string::npos; p = source.find(open, p + 1)) {
      const size_t b = p + open.size(), e = source.find('"', b);
      if (e != std::string::npos && e + 1 < source.size() && source[e + 1] == ')')
        out.insert(source.substr(b, e - b));
    }
  }
  return out;
}

std::string unescape(std::string s) {
  for (size_t p = s.find("\\_"); p != std::string::npos; p = s.find("\\_")) s.erase(p, 1);
  return s;
}

// The rows of a verifier's table (kernel_ast, kernel_graph): rule name -> the messages it
// documents.
std::map<std::string, std::set<std::string>> verifier_rows(const std::string& name) {
  std::map<std::string, std::set<std::string>> rows;
  for (const auto& r : table(name)) {
    EXPECT_GE(r.size(), 3u) << r[0];
    if (r.size() < 3) continue;
    std::set<std::string> msgs;
    std::stringstream ss(r[2]);
    for (std::string m; std::getline(ss, m, ';');) {
      m = clean(m);
      if (!m.empty() && m != "-") msgs.insert(unescape(m));
    }
    EXPECT_TRUE(rows.emplace(unescape(r[0]), msgs).second) << "rule listed twice: " << r[0];
  }
  return rows;
}

// A verifier of rules/spec.rw compiled by rwc and run by the interpreter: both must agree.
std::vector<const rw::RuleSetMatcher*> both_verifiers(const std::string& set) {
  static std::map<std::string, std::unique_ptr<rw::InterpretedMatcher>> interpreted;
  auto& m = interpreted[set];
  if (!m) {
    rw::Diagnostics diags;
    m = rw::interpret(TINYRW_SOURCE_DIR "/rules/spec.rw", set, diags);
    EXPECT_NE(m, nullptr) << "rules/spec.rw does not load";
  }
  std::vector<const rw::RuleSetMatcher*> out{rw::compiled_rules(set)};
  EXPECT_NE(out[0], nullptr) << set;
  if (m) out.push_back(m.get());
  return out;
}
std::vector<const rw::RuleSetMatcher*> kernel_ast_verifiers() {
  return both_verifiers("spec_kernel_ast");
}

// Every named rule of a verifier (and of the sets it uses, but spec_alu) is a row of its table,
// every row a rule, and a row lists exactly the rule's messages.
void expect_table_equals_verifier(const std::string& set, const std::string& table_name) {
  auto rows = verifier_rows(table_name);
  ASSERT_FALSE(rows.empty()) << "no " << table_name << " table in " << spec_path();
  const auto* m = dynamic_cast<const rw::gen::CompiledMatcher*>(rw::compiled_rules(set));
  ASSERT_NE(m, nullptr) << set;
  std::set<std::string> seen;
  for (const RuleInfo& r : m->rules()) {
    if (r.name.rfind("spec_alu#", 0) == 0 || !seen.insert(r.name).second) continue;
    EXPECT_EQ(r.name.find('#'), std::string::npos) << "rule " << r.name << " has no name";
    auto it = rows.find(r.name);
    if (it == rows.end()) {
      ADD_FAILURE() << "rule " << r.name << " is not in the " << table_name << " table";
      continue;
    }
    EXPECT_EQ(it->second, rule_messages(r.source)) << r.name << ": documented messages differ";
    rows.erase(it);
  }
  for (const auto& [name, msgs] : rows) ADD_FAILURE() << "row " << name << " is no rule of " << set;
}

// Each kernel is refused by every executor of the verifier with its message; every message of
// the table has a kernel.
void expect_refused(const std::string& set, const std::string& table_name,
                    const std::vector<std::pair<std::string, UOp>>& cases, bool enter_calls) {
  std::set<std::string> covered;
  for (const rw::RuleSetMatcher* v : both_verifiers(set)) {
    for (const auto& [why, k] : cases) {
      try {
        verify(k, *v, enter_calls);
        ADD_FAILURE() << set << " accepted, expected \"" << why << "\":\n" << k.repr(3);
      } catch (const SpecError& e) {
        EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
        covered.insert(why);
      }
    }
  }
  for (const auto& [rule, msgs] : verifier_rows(table_name))
    for (const std::string& m : msgs)
      EXPECT_TRUE(covered.contains(m)) << rule << ": no malformed graph for \"" << m << "\"";
}

}  // namespace

TEST(Spec, TinygradKernelAstsPassTheKernelAstVerifier) {
  ASSERT_EQ(kernel_ast_verifiers().size(), 2u);
  for (const rw::RuleSetMatcher* v : kernel_ast_verifiers())
    for (const auto& [name, k] : tinygrad_kernels())
      EXPECT_NO_THROW(verify(k, *v)) << name << "\n" << k.repr(3);
  // custom kernels built with the kernel helpers are kernel ASTs too
  const UOp i = krange(2, 0), p0 = kparam(0, 2), p1 = kparam(1, 2);
  EXPECT_NO_THROW(
      verify(kernel_sink({kernel_end(kernel_store(kernel_index(p0, {i}),
                                                  kernel_index(p1, {i}) * p1.const_like(2.0)),
                                     {i})},
                         "double"),
             rules::spec_kernel_ast()));
  // device k's block of a whole value: its offset bound to the device's number (rules/multi.rw)
  const UOp device_num = UOp::make(
      Op::Bind, dtypes::index,
      {UOp::make(Op::DefineVar, dtypes::index, {},
                 Arg::tuple({Arg::string("_device_num"), Arg::integer(0), Arg::integer(1)})),
       UOp::cint(1, dtypes::index)});
  const UOp whole = kparam(1, 4);
  EXPECT_NO_THROW(verify(
      kernel_sink(
          {kernel_end(
              kernel_store(kernel_index(p0, {i}),
                           kernel_index(whole, {i + device_num * UOp::cint(2, dtypes::index)})),
              {i})},
          "block"),
      rules::spec_kernel_ast()));
}

// The kernel_ast and kernel_graph tables list the rules of their verifiers, and their messages.
TEST(Spec, KernelAstTableEqualsTheVerifier) {
  expect_table_equals_verifier("spec_kernel_ast", "kernel_ast");
  expect_table_equals_verifier("spec_kernel_graph", "kernel_graph");
}

// One malformed variant per message of the table: each is refused with that message.
TEST(Spec, MalformedKernelAstsAreRefusedWithTheirMessage) {
  const UOp r0 = krange(4, 0), r1 = krange(4, 1), red0 = krange(4, 0, AxisType::Reduce);
  const UOp p0 = kparam(0, 4), p1 = kparam(1, 16);
  auto ok_effect = [&](const UOp& v) { return kend(kstore(kidx(p0, r0), v), {r0}); };
  const UOp sideways = UOp::make(Op::Range, dtypes::index, {ci(4)},
                                 Arg::tuple({Arg::integer(1), Arg::string("SIDEWAYS")}));
  const UOp buffer = UOp::make(Op::Buffer, dtypes::float32, {},
                               Arg::record("ParamArg", {{"slot", Arg::integer(0)},
                                                        {"size", Arg::integer(4)},
                                                        {"device", Arg::string("CPU")}}));
  const UOp device_num =
      UOp::make(Op::DefineVar, dtypes::index, {},
                Arg::tuple({Arg::string("_device_num"), Arg::integer(0), Arg::integer(3)}));
  const std::vector<std::pair<std::string, UOp>> cases = {
      // SINK
      {"a range is used outside its loop (no END or REDUCE closes it)",  // no END
       ksink({kstore(kidx(p0, r0), kidx(p1, r0))})},
      {"a range is used outside its loop (no END or REDUCE closes it)",  // a reduce range escapes
       ksink({ok_effect(kreduce(kidx(p1, r0 * ci(4) + red0), {red0}) + kidx(p1, red0))})},
      {"the PARAMs of a kernel are slots 0..n-1, each once",  // two slots 0
       ksink({ok_effect(kidx(kparam(0, 16), r0))})},
      {"the PARAMs of a kernel are slots 0..n-1, each once",  // slot 2 without slot 1
       ksink({ok_effect(kidx(kparam(2, 16), r0))})},
      {"two RANGEs of a kernel share an id",  // loops of sizes 4 and 8, both numbered 0
       ksink({kend(kstore(kidx(p0, r0), kidx(p1, r0 + krange(8, 0))), {r0, krange(8, 0)})})},
      {"a kernel's SINK arg is none or a KernelInfo",
       UOp::make(Op::Sink, dtypes::void_, {ok_effect(kidx(p1, r0))}, Arg::string("kernel"))},
      {"a kernel's SINK holds END, STORE or GROUP effects", ksink({kidx(p1, ci(0))})},
      // END, GROUP
      {"END closes a STORE, END or GROUP", ksink({kend(kidx(p0, r0), {r0})})},
      {"END closes RANGEs", ksink({kend(kstore(kidx(p0, ci(0)), kidx(p1, ci(0))), {ci(1)})})},
      {"GROUP bundles effects",
       ksink({UOp::make(Op::Group, dtypes::void_, {ok_effect(kidx(p1, r0)), kidx(p1, ci(0))})})},
      // STORE, INDEX, PARAM
      {"a kernel stores into an INDEX of a PARAM", ksink({kstore(p0, kidx(p1, ci(0)))})},
      {"a store writes a value of its PARAM's dtype",  // a PARAM dtype mismatch
       ksink({kend(kstore(kidx(p0, r0), kidx(kparam(1, 16, dtypes::int32), r0)), {r0})})},
      {"a kernel indexes PARAMs only", ksink({ok_effect(kidx(UOp::cfloat(1.0), r0))})},
      {"an element of a PARAM has its dtype",
       ksink(
           {ok_effect(UOp::make(Op::Index, dtypes::float32, {kparam(1, 16, dtypes::int32), r0}))})},
      {"an INDEX counts in the index dtype",
       ksink({ok_effect(kidx(p1, UOp::cint(1, dtypes::int32)))})},
      {"a PARAM's arg is a ParamArg with a slot >= 0",
       ksink({ok_effect(kidx(p1.with_arg(Arg()), r0))})},
      {"a PARAM's source is its shape, a STACK of CONSTs",
       ksink({ok_effect(kidx(p1.with_src({ci(16)}), r0))})},
      // REDUCE
      {"a kernel REDUCE's arg is (Add|Mul|Max, 0)",  // tensor level's (op, axes)
       ksink({ok_effect(kreduce(kidx(p1, r0 * ci(4) + red0), {red0})
                            .with_arg(Arg::tuple({Arg::op(Op::Add), Arg::integer(1)})))})},
      {"a kernel REDUCE's arg is (Add|Mul|Max, 0)",
       ksink({ok_effect(kreduce(kidx(p1, r0 * ci(4) + red0), {red0}, Op::Sub))})},
      {"reduce changes the dtype", ksink({ok_effect(kreduce(kidx(p1, r0 * ci(4) + red0), {red0})
                                                        .with_dtype(dtypes::float16)
                                                        .cast(dtypes::float32))})},
      {"a REDUCE runs over REDUCE ranges",  // an output range reduced
       ksink({ok_effect(kreduce(kidx(p1, r0 * ci(4) + r1), {r1}))})},
      {"a REDUCE runs over REDUCE ranges", ksink({ok_effect(kreduce(kidx(p1, r0), {}))})},
      // RANGE
      {"a RANGE's arg is (ids..., axis type name)",  // a bad axis type
       ksink({kend(kstore(kidx(p0, r0), kidx(p1, r0 * ci(4) + sideways)), {r0, sideways})})},
      {"ranges count in the index dtype",
       ksink({kend(kstore(kidx(p0, ci(0)), kidx(p1, ci(0))),
                   {UOp::range(UOp::cint(4, dtypes::int32), 0)})})},
      // tensor ops
      // a variable: rules/multi.rw's _device_num, bound to the device's number
      {"a BIND gives a DEFINE_VAR a CONST of its dtype",  // an int32 value
       ksink({ok_effect(kidx(p1, r0 + UOp::make(Op::Bind, dtypes::index,
                                                {device_num, UOp::cint(1, dtypes::int32)})))})},
      {"a BIND gives a DEFINE_VAR a CONST of its dtype",  // bound to a range
       ksink({ok_effect(kidx(p1, r0 + UOp::make(Op::Bind, dtypes::index, {device_num, r1})))})},
      {"a DEFINE_VAR's arg is (name, min, max), an integer",
       ksink({ok_effect(kidx(p1, r0 + device_num.with_arg(Arg::string("_device_num"))))})},
      {"a kernel holds no tensor op (movement, BUFFER, STAGE, AFTER, CONTIGUOUS, COPY)",
       ksink({ok_effect(kidx(p1, r0) + buffer)})},
      {"a kernel holds no tensor op (movement, BUFFER, STAGE, AFTER, CONTIGUOUS, COPY)",
       ksink({ok_effect(kidx(p1, r0) + UOp::make(Op::Reshape, dtypes::float32,
                                                 {kidx(p1, ci(0)), shape_to_uop({})}))})},
  };
  expect_refused("spec_kernel_ast", "kernel_ast", cases, true);
}

namespace {
UOp kbuffer(int64_t slot, int64_t size, DType d = dtypes::float32) {
  return UOp::make(Op::Buffer, d, {},
                   Arg::record("ParamArg", {{"slot", Arg::integer(slot)},
                                            {"size", Arg::integer(size)},
                                            {"device", Arg::string("CPU")}}));
}
UOp kcall(const UOp& kernel, std::vector<UOp> args) {
  args.insert(args.begin(), kernel);
  return UOp::make(Op::Call, dtypes::void_, args, CallInfo{.kernel = true}.to_arg());
}
UOp kafter(const UOp& b, const UOp& call) { return UOp::make(Op::After, b.dtype(), {b, call}); }
}  // namespace

// ---- the LINEAR program verifier (spec_program) and its table

// Every kernel the linearizer makes passes spec_program (a row sum, a padded read, a custom
// kernel's ordered effects); each malformed instruction is refused with its message.
TEST(Spec, ProgramsPassTheProgramVerifierAndItsTableEqualsIt) {
  expect_table_equals_verifier("spec_program", "program");
  const UOp b0 = kbuffer(0, 4), b1 = kbuffer(1, 16);
  auto lower = [&](const UOp& sink) {
    return linearize_kernel(bind_kernel(sink, {b0, b1}), Target::of("INTERP"));
  };
  const UOp p0 = kparam(0, 4), p1 = kparam(1, 16), r0 = krange(4, 0),
            red = krange(4, 1, AxisType::Reduce);
  const UOp gated = UOp::constant(dtypes::index, Arg::invalid());
  const std::vector<UOp> programs = {
      lower(ksink({kend(kstore(kidx(p0, r0), kreduce(kidx(p1, r0 * ci(4) + red), {red})), {r0})})),
      lower(ksink({kend(kstore(kidx(p0, r0), kidx(p1, r0.lt(ci(2)).where(r0, gated))), {r0})})),
      lower(ksink({kstore(kidx(p0, ci(0)), kidx(p1, ci(0))),
                   kstore(kidx(p1, ci(0)), kidx(p0, ci(0)) + kidx(p0, ci(0)))})),
      // a gated store: IF, STORE, ENDIF
      lower(ksink({kend(kstore(kidx(p0, r0.lt(ci(2)).where(r0, gated)), kidx(p1, r0)), {r0})}))};
  EXPECT_EQ(
      std::ranges::count_if(programs.back().src(), [](const UOp& u) { return u.op() == Op::If; }),
      1);
  for (const rw::RuleSetMatcher* v : both_verifiers("spec_program"))
    for (const UOp& prog : programs) EXPECT_NO_THROW(verify(prog, *v)) << render_program(prog);
  // a program's index math is int32 (rules/decompositions.rw lower_index_dtype)
  auto c32 = [](int64_t v) { return UOp::cint(v, dtypes::int32); };
  const UOp l0 = UOp::range(c32(4), 0);
  const UOp idx = UOp::make(Op::Index, dtypes::float32, {b1, c32(0)});
  const UOp ld = UOp::make(Op::Load, dtypes::float32, {idx});
  auto make = [](Op op, DType d, std::vector<UOp> src, Arg arg = {}) {
    return UOp::make(op, d, src, std::move(arg));
  };
  const std::vector<std::pair<std::string, UOp>> cases = {
      {"a program ends with its SINK", make(Op::Linear, dtypes::void_, {ld})},
      {"a buffer's arg is a ParamArg", b1.with_arg(Arg::integer(1))},
      {"a program's ranges count in int32 or int64, as their bound",
       UOp::range(UOp::cint(4, dtypes::int16), 0)},
      {"a RANGE's arg is (ids..., axis type name)", l0.with_arg(Arg())},
      {"a RANGE opens after at most one RANGE or END",
       make(Op::Range, dtypes::int32, {c32(4), c32(1)}, l0.arg())},
      {"an END closes one RANGE",
       make(Op::End, dtypes::void_, {make(Op::Store, dtypes::void_, {idx, ld}), ci(0)})},
      {"a SPECIAL is the launch's core_id, or a workgroup's gidx0..2 or a thread's lidx0..2",
       make(Op::Special, dtypes::int32, {c32(2)}, Arg::string("gidx3"))},
      {"a launch dimension's size is a constant of its dtype, int32 or int64",
       make(Op::Special, dtypes::int32, {UOp::cint(2, dtypes::int64)}, Arg::string("core_id"))},
      {"a program indexes buffers", make(Op::Index, dtypes::float32, {UOp::cfloat(1.0), c32(0)})},
      {"an element of a buffer has its dtype", make(Op::Index, dtypes::int32, {b1, c32(0)})},
      {"an INDEX is one position, an int32 or int64",
       make(Op::Index, dtypes::float32, {b1, ci(0)})},
      {"a LOAD reads an INDEX", make(Op::Load, dtypes::float32, {b1})},
      {"a load keeps its element's dtype", make(Op::Load, dtypes::int32, {idx})},
      {"a gated LOAD has an alternative of its dtype and a bool gate",
       make(Op::Load, dtypes::float32, {idx, UOp::cfloat(0.0), ci(1)})},
      {"a STORE writes an INDEX", make(Op::Store, dtypes::void_, {b1, ld})},
      {"a STORE has no gate", make(Op::Store, dtypes::void_, {idx, ld, UOp::cbool(true)})},
      {"a store writes a value of its element's dtype",
       make(Op::Store, dtypes::void_, {idx, UOp::cint(1, dtypes::int32)})},
      {"AFTER orders a buffer", make(Op::After, dtypes::float32, {ld, ld})},
      {"an IF gates a store's INDEX on a bool", make(Op::If, dtypes::void_, {ci(1), idx})},
      {"an ENDIF closes an IF", make(Op::EndIf, dtypes::void_, {idx})},
      {"a lane of a vector is a constant position of its dtype",
       make(Op::Index, dtypes::float32, {make(Op::Stack, dtypes::float32, {ld, ld}), l0})},
      {"a vector access is a SHRINK of a buffer at one position",  // of a value
       make(Op::Load, dtypes::float32,
            {make(Op::Shrink, dtypes::float32, {ld, shape_to_uop({0}), shape_to_uop({1})})})},
      {"a program's variable is an int32 or int64 DEFINE_VAR, arg (name, min, max)",  // index
       make(Op::DefineVar, dtypes::index, {},
            Arg::tuple({Arg::string("_device_num"), Arg::integer(0), Arg::integer(1)}))},
      {"a program's variable is an int32 or int64 DEFINE_VAR, arg (name, min, max)",
       make(Op::DefineVar, dtypes::int32, {}, Arg::string("_device_num"))},
  };
  expect_refused("spec_program", "program", cases, true);
}

// `a - a.sum(1)` split into its two kernels: the sum written to a new buffer, the difference
// reading it after the first CALL ran. The graph passes spec_kernel_graph (its CALL bodies
// spec_kernel_ast); malformed graphs are refused with their message.
TEST(Spec, KernelGraphsPassTheKernelGraphVerifier) {
  const auto k = tinygrad_kernels();
  const UOp sum_k = k[1].second, diff_k = k[2].second;
  const UOp a = kbuffer(10, 16), s = kbuffer(11, 4), out = kbuffer(12, 16);
  const UOp s_done = kafter(s, kcall(sum_k, {s, a}));
  const UOp graph = UOp::sink(std::vector<UOp>{kafter(out, kcall(diff_k, {out, a, s_done}))});
  for (const rw::RuleSetMatcher* v : both_verifiers("spec_kernel_graph"))
    EXPECT_NO_THROW(verify(graph, *v, false)) << graph.repr(3);
  // a view of a buffer as a CALL argument
  const UOp view = UOp::make(Op::Reshape, dtypes::float32, {a, shape_to_uop({4, 4})});
  const UOp viewed = UOp::sink(std::vector<UOp>{kafter(out, kcall(diff_k, {out, view, s_done}))});
  for (const rw::RuleSetMatcher* v : both_verifiers("spec_kernel_graph"))
    EXPECT_NO_THROW(verify(viewed, *v, false));

  const UOp add = kidx(kparam(0, 4), ci(0)) + UOp::cfloat(1.0);
  const std::vector<std::pair<std::string, UOp>> cases = {
      {"a buffer's arg is a ParamArg", UOp::sink(std::vector<UOp>{s.with_arg(Arg())})},
      {"a view keeps its source's dtype",
       UOp::sink(
           std::vector<UOp>{UOp::make(Op::Reshape, dtypes::int32, {a, shape_to_uop({4, 4})})})},
      {"a CALL runs a kernel SINK, LINEAR, PROGRAM, COPY or custom function",
       UOp::sink(std::vector<UOp>{kafter(s, kcall(add, {s, a}))})},
      {"AFTER keeps the dtype of the buffer it orders",
       UOp::sink(std::vector<UOp>{kafter(s, kcall(sum_k, {s, a})).with_dtype(dtypes::int32)})},
      {"AFTER orders a buffer, a view of one or an AFTER",
       UOp::sink(std::vector<UOp>{kafter(UOp::cfloat(1.0), kcall(sum_k, {s, a}))})},
  };
  expect_refused("spec_kernel_graph", "kernel_graph", cases, false);
}

// ---- memory, reductions and opts
// ----------------------------------------------------------------

// The address spaces table lists each space of the implementation once; a program's buffers live
// in the spaces the table allows its device: PARAM buffers GLOBAL (no field), the buffers a
// program defines REG.
TEST(Spec, AddressSpacesTableEqualsTheSpacesAndProgramsUseThem) {
  std::map<std::string, std::set<std::string>> devices;  // space -> devices whose programs use it
  for (const auto& r : table("address_spaces")) {
    ASSERT_EQ(r.size(), 3u) << r[0];
    std::istringstream words(r[2]);
    for (std::string w; words >> w;)
      if (w != "-") devices[r[0]].insert(w);
    devices[r[0]];  // listed
  }
  std::set<std::string> names;
  for (int k = 0; k < kNumAddrSpaces; ++k) names.insert(std::string(addrspace_name(AddrSpace(k))));
  std::set<std::string> rows;
  for (const auto& [n, _] : devices) rows.insert(n);
  EXPECT_EQ(rows, names) << "the table's rows are not the address spaces of ir/dtype.h";
  for (const std::string device : {"INTERP", "CPU"}) {
    const UOp b0 = kbuffer(0, 4), b1 = kbuffer(1, 16);
    const UOp r0 = krange(4, 0), red = krange(4, 1, AxisType::Reduce);
    const UOp program = linearize_kernel(
        bind_kernel(ksink({kend(kstore(kidx(kparam(0, 4), r0),
                                       kreduce(kidx(kparam(1, 16), r0 * ci(4) + red), {red})),
                                {r0})}),
                    {b0, b1}),
        Target::of(device));
    std::set<std::string> used;
    for (const UOp& u : program.src()) {
      if (u.op() != Op::Buffer) continue;
      const Arg* f = u.arg().find_field("addrspace");
      const std::string space = f ? f->as_string() : "GLOBAL";
      used.insert(space);
      const bool param = u.arg().field("slot").as_int() >= 0;
      EXPECT_EQ(space == "GLOBAL", param) << device << ": " << u.repr();
    }
    for (const auto& [space, devs] : devices)
      EXPECT_EQ(used.count(space) > 0, devs.count(device) > 0)
          << device << "'s program of a row sum " << (used.count(space) ? "uses" : "does not use")
          << " " << space;
  }
}

// The reduce ops table is the set of ops the verifiers accept in a kernel REDUCE, each the Tensor
// method that reduces with it, whose reduction over no elements is the documented identity.
TEST(Spec, ReduceOpsTableEqualsTheReduceOps) {
  const auto rows = table("reduce_ops");
  OpSet documented;
  for (const auto& r : rows) {
    ASSERT_EQ(r.size(), 3u) << r[0];
    const std::optional<Op> op = op_from_name(r[0]);
    ASSERT_TRUE(op.has_value()) << r[0];
    documented = documented | OpSet{*op};
    for (DType d : {dtypes::float32, dtypes::int32, dtypes::bool_}) {
      for (const std::string device : {"INTERP", "CPU"}) {
        set_default_device(device);
        Tensor empty = Tensor::from_vector(std::vector<int64_t>{}, {0, 3}, d);
        ASSERT_TRUE(r[2] == "sum" || r[2] == "prod" || r[2] == "max")
            << r[0] << ": no Tensor method " << r[2];
        Tensor out = r[2] == "sum"    ? empty.sum({0})
                     : r[2] == "prod" ? empty.prod({0})
                                      : empty.max({0});
        const std::vector<V> got = values_of(out);
        set_default_device("");
        const DType od = out.dtype();
        V want;
        if (r[1] == "-inf")
          want =
              od.is_float() ? V{true, 0, -INFINITY} : V{false, od.is_bool() ? 0 : od.int_min(), 0};
        else
          want = represented(od, V{false, std::stoll(r[1]), 0});
        ASSERT_EQ(got.size(), 3u);
        for (const V& g : got)
          expect_same_value(od, g, want, r[0] + " " + od.repr() + " on " + device);
      }
    }
  }
  // the verifiers accept exactly these as a kernel REDUCE's op
  const UOp p0 = kparam(0, 1), p1 = kparam(1, 4);
  for (int o = 0; o < kNumOps; ++o) {
    const Op op = static_cast<Op>(o);
    if (!groups::binary().contains(op) || op == Op::ThreeFry) continue;
    const UOp red = krange(4, 0, AxisType::Reduce);
    const UOp k = ksink({kstore(kidx(p0, ci(0)), kreduce(kidx(p1, red), {red}, op))});
    bool accepted = true;
    for (const rw::RuleSetMatcher* v : kernel_ast_verifiers()) {
      try {
        verify(k, *v);
      } catch (const std::exception&) {
        accepted = false;
      }
    }
    EXPECT_EQ(accepted, documented.contains(op))
        << op_name(op)
        << (accepted ? " is accepted as a reduce op but has no row"
                     : " has a row but the verifier refuses it as a reduce op");
  }
}

// The memory_shapes table: Index, Stack, Store and After built over sources of several shapes
// give the documented shape and dtype where the row's condition holds, and a shape error naming
// the op where it does not.
namespace {
using Dims64 = std::vector<int64_t>;

// A shape cell: terms joined by " + ": (n,), sK, sK[EXPR:] (EXPR a formula of n), or
// "s1 + ... + s(n-1)" (every index source's shape in order).
Dims64 documented_memory_shape(std::string cell, const std::vector<Dims64>& s) {
  const int64_t n = static_cast<int64_t>(s.size());
  Dims64 out;
  const std::string all_indices = "s1 + ... + s(n-1)";
  if (cell.rfind(all_indices, 0) == 0) {
    for (size_t k = 1; k < s.size(); ++k) out.insert(out.end(), s[k].begin(), s[k].end());
    cell = cell.substr(all_indices.size());
    if (cell.rfind(" + ", 0) == 0) cell = cell.substr(3);
  }
  std::stringstream terms(std::regex_replace(cell, std::regex(" \\+ "), "|"));
  for (std::string t; std::getline(terms, t, '|');) {
    std::smatch m;
    if (t == "(n,)") {
      out.push_back(n);
    } else if (std::regex_match(t, m, std::regex(R"(s(\d+))"))) {
      const Dims64& d = s.at(std::stoul(m[1].str()));
      out.insert(out.end(), d.begin(), d.end());
    } else if (std::regex_match(t, m, std::regex(R"(s(\d+)\[(.+):\])"))) {
      const Dims64& d = s.at(std::stoul(m[1].str()));
      const auto from = static_cast<size_t>(Formula(m[2].str()).eval({{'n', V{false, n, 0}}}).i);
      if (from <= d.size()) out.insert(out.end(), d.begin() + static_cast<long>(from), d.end());
    } else {
      throw std::runtime_error("memory_shapes: cannot read the term '" + t + "'");
    }
  }
  return out;
}

// A condition cell: always, each sk == s0, or a formula of n and rank(sK).
bool documented_memory_valid(std::string cell, const std::vector<Dims64>& s) {
  if (cell == "always") return true;
  if (cell == "each sk == s0")
    return std::all_of(s.begin(), s.end(), [&](const Dims64& d) { return d == s[0]; });
  std::smatch m;
  while (std::regex_search(cell, m, std::regex(R"(rank\(s(\d+)\))")))
    cell =
        m.prefix().str() + std::to_string(s.at(std::stoul(m[1].str())).size()) + m.suffix().str();
  return Formula(cell).eval({{'n', V{false, static_cast<i128>(s.size()), 0}}}).i != 0;
}
}  // namespace

TEST(Spec, MemoryOpsFollowTheDocumentedShapesAndDtypes) {
  auto buffer = [](const Dims64& d, DType dt) {
    Shape sh;
    for (int64_t x : d) sh.emplace_back(x);
    return UOp::make(Op::Buffer, dt, {shape_to_uop(sh)});
  };
  const auto rows = table("memory_shapes");
  std::set<Op> documented;
  int checked = 0, invalid = 0;
  for (const auto& r : rows) {
    ASSERT_EQ(r.size(), 4u) << r[0];
    const std::optional<Op> op = op_from_name(r[0]);
    ASSERT_TRUE(op.has_value()) << r[0];
    documented.insert(*op);
    // source shapes to try: source 0 then the others
    std::vector<std::vector<Dims64>> cases;
    if (*op == Op::Index) {
      for (size_t k = 0; k <= 3; ++k) {
        std::vector<Dims64> c{{3, 4}};
        for (size_t i = 0; i < k; ++i) c.push_back(i == 1 ? Dims64{5} : Dims64{});
        cases.push_back(c);
      }
      cases.push_back({{3, 4}, {5}});  // an index of shape (5) in place of the first axis
      cases.push_back({{3, 4}, {2, 5}});
    } else if (*op == Op::Stack) {
      cases = {{{2, 3}}, {{2, 3}, {2, 3}, {2, 3}}, {{2, 3}, {3, 2}}, {{}, {}}};
    } else {
      cases = {{{2, 3}, {2, 3}}, {{2, 3}, {}}, {{4}, {2, 2}}};
    }
    for (const auto& c : cases) {
      std::vector<UOp> src;
      for (size_t k = 0; k < c.size(); ++k)
        src.push_back(buffer(c[k], k == 0             ? dtypes::float32
                                   : *op == Op::Index ? dtypes::index
                                                      : dtypes::int32));
      if (*op == Op::After) src[1] = UOp::make(Op::Store, dtypes::void_, {src[1], src[1]});
      const DType want_dtype = r[2] == "void" ? dtypes::void_
                               : r[2] == "d0" ? src[0].dtype()
                                              : DType();
      ASSERT_TRUE(r[2] == "void" || r[2] == "d0") << r[0] << ": cannot read the dtype " << r[2];
      const UOp node = UOp::make(*op, want_dtype, src);
      // the dtype the implementation's builders give such a node
      const std::vector<UOp> rest(src.begin() + 1, src.end());
      if (*op == Op::Index && c.size() == 2 && c[1].empty())
        EXPECT_EQ(src[0].index(rest).dtype(), want_dtype) << r[0] << ": the builder's dtype";
      if (*op == Op::After)
        EXPECT_EQ(src[0].after(rest).dtype(), want_dtype) << r[0] << ": the builder's dtype";
      const bool valid = documented_memory_valid(r[3], c);
      std::string at = r[0] + " of";
      for (const Dims64& d : c) at += " " + fmt::format("({})", fmt::join(d, ","));
      try {
        Dims64 got;
        for (const SInt& d : node.shape()) got.push_back(d.value());
        EXPECT_TRUE(valid) << at << ": has shape, but the document says it is invalid";
        if (valid) EXPECT_EQ(got, documented_memory_shape(r[1], c)) << at;
        ++checked;
      } catch (const GraphError& e) {
        EXPECT_FALSE(valid) << at << ": " << e.what();
        EXPECT_NE(std::string(e.what()).find(op_info(*op).py_name), std::string::npos) << e.what();
        ++invalid;
      }
    }
  }
  EXPECT_EQ(documented, (std::set<Op>{Op::Index, Op::Stack, Op::Store, Op::After}));
  // the dtypes of the Store and Stack nodes an assignment and a shape argument are built with
  Tensor t = Tensor::from_vector(std::vector<float>{1, 2}, {2});
  t.assign(t * 2.0);
  for (const UOp& u : toposort(t.uop()))
    for (const auto& r : rows)
      if ((u.op() == Op::Store || u.op() == Op::Stack) && op_from_name(r[0]) == u.op()) {
        const DType want = r[2] == "void" ? dtypes::void_ : u.src(0).dtype();
        EXPECT_EQ(u.dtype(), want) << r[0] << " as " << u.repr() << " is built";
      }
  EXPECT_GT(checked, 8);
  EXPECT_GT(invalid, 1);
}

// After neither declares a write nor takes a snapshot: After(b, Store(d, v)) reads b's contents
// when d is another buffer, and what the store left when d is b.
TEST(Spec, AfterReadsItsBufferAsTheStoresLeaveIt) {
  for (const std::string device : {"INTERP", "CPU"}) {
    set_default_device(device);
    Tensor b = Tensor::from_vector(std::vector<float>{1, 2}, {2});
    Tensor d = Tensor::empty({2});
    Tensor v = Tensor::from_vector(std::vector<float>{7, 8}, {2});
    Tensor other = Tensor::from_uop(
        UOp::make(Op::After, b.dtype(),
                  {b.uop(), UOp::make(Op::Store, dtypes::void_, {d.uop(), v.uop()})}),
        {b, d, v});
    EXPECT_EQ(other.to_doubles(), (std::vector<double>{1, 2})) << device;
    Tensor b2 = Tensor::from_vector(std::vector<float>{1, 2}, {2});
    Tensor same = Tensor::from_uop(
        UOp::make(Op::After, b2.dtype(),
                  {b2.uop(), UOp::make(Op::Store, dtypes::void_, {b2.uop(), v.uop()})}),
        {b2, v});
    EXPECT_EQ(same.to_doubles(), (std::vector<double>{7, 8})) << device;
    set_default_device("");
  }
}

// The optops table: its opts are OptOp's, in order; each applies to an axis of the documented
// types on the documented targets, splitting off a range of the documented type, up to the
// documented lanes, and is refused with an error naming it elsewhere.
TEST(Spec, OptOpsFollowTheDocumentedTable) {
  const auto rows = table("optops");
  ASSERT_EQ(rows.size(), 9u) << "one row per OptOp";
  // a kernel with two output ranges and a reduce range: out[i, j] = sum_k in[(i*4 + j)*1056 + k]
  // (the output ranges WEAK as rangeify makes them, or GLOBAL and LOOP)
  auto make_kernel = [](AxisType t0, AxisType t1) {
    const UOp r0 = krange(272, 0, t0), r1 = krange(4, 1, t1),
              red = krange(1056, 2, AxisType::Reduce);
    return simplify_ranges(ksink({kend(
        kstore(kidx(kparam(0, 272 * 4), r0 * ci(4) + r1),
               kreduce(kidx(kparam(1, 272 * 4 * 1056), (r0 * ci(4) + r1) * ci(1056) + red), {red})),
        {r0, r1})}));
  };
  const std::vector<UOp> kernels{make_kernel(AxisType::Weak, AxisType::Weak),
                                 make_kernel(AxisType::Global, AxisType::Loop)};
  auto types_of = [](std::string cell) {
    std::set<AxisType> out;
    std::erase(cell, '\\');  // GROUP\_REDUCE
    std::istringstream words(cell);
    for (std::string w; words >> w;)
      if (w != "-") {
        const std::optional<AxisType> t = axis_type_from_name(w);
        if (!t) throw std::runtime_error("optops: no axis type " + w);
        out.insert(*t);
      }
    return out;
  };
  int applied = 0, refused = 0;
  for (size_t k = 0; k < rows.size(); ++k) {
    const auto& r = rows[k];
    ASSERT_EQ(r.size(), 6u) << r[0];
    const OptOp op = static_cast<OptOp>(k);
    const std::string repr = opt_repr(Opt{op, 0, 2});  // "UPCAST(0, 2)"
    EXPECT_EQ(repr.substr(0, repr.find('(')), r[0]) << "row " << k;
    const std::set<AxisType> applies = types_of(r[2]);
    const std::set<AxisType> split_types = types_of(r[3]);
    ASSERT_LE(split_types.size(), 1u) << r[0];
    const std::optional<AxisType> splits =
        split_types.empty() ? std::nullopt : std::optional(*split_types.begin());
    const std::vector<std::string> targets =
        r[5] == "all"      ? std::vector<std::string>{"INTERP", "CPU", "CUDA", "HIP"}
        : r[5] == "locals" ? std::vector<std::string>{"CUDA", "HIP"}
                           : std::vector<std::string>{"INTERP", "CPU"};
    ASSERT_TRUE(r[5] == "all" || r[5] == "locals" || r[5] == "threads") << r[5];
    auto refuses = [&](const UOp& sink, const Opt& o, const Target& t, const std::string& why) {
      try {
        apply_opt(sink, o, t);
        ADD_FAILURE() << opt_repr(o) << " on " << t.device << " applied: " << why;
      } catch (const KernelOptError& e) {
        EXPECT_NE(std::string(e.what()).find(r[0]), std::string::npos) << e.what();
        ++refused;
      }
    };
    // (on GPU targets the output loops become GLOBAL first, as when they are lowered; once
    // also not, so that each opt meets a WEAK range on every target)
    struct Case {
      std::string device;
      UOp kernel;
      bool to_global;
    };
    for (const auto& [device, kernel, to_global] : std::vector<Case>{{"INTERP", kernels[0], true},
                                                                     {"CPU", kernels[0], true},
                                                                     {"CPU", kernels[1], true},
                                                                     {"CUDA", kernels[0], true},
                                                                     {"CUDA", kernels[0], false},
                                                                     {"HIP", kernels[1], true}}) {
      const Target& t = Target::of(device);
      const UOp sink = to_global ? convert_loop_to_global(kernel, t) : kernel;
      const bool listed = std::ranges::find(targets, device) != targets.end();
      if (op == OptOp::Nolocals) {
        if (listed) {
          const UOp after = apply_opt(sink, Opt{op, -1, 0}, t);
          ++applied;
          if (t.has_local) refuses(after, Opt{OptOp::Local, 0, 2}, t, "LOCAL after NOLOCALS");
        }
        continue;
      }
      const std::vector<UOp> rngs = opt_ranges(sink);
      std::vector<UOp> axes;  // what the opt's axis numbers
      for (const UOp& rg : rngs)
        if (r[1] == "all" || applies.contains(axis_type_of(rg))) axes.push_back(rg);
      ASSERT_TRUE(r[1] == "all" || r[1] == "these") << r[1];
      for (size_t a = 0; a <= axes.size(); ++a) {
        const int axis = static_cast<int>(a);
        int64_t arg = 2;
        if (op == OptOp::Padto) arg = 8;
        if (op == OptOp::Swap) {  // the other GLOBAL range
          arg = -1;
          for (size_t b = 0; b < rngs.size(); ++b)
            if (rngs[b] != (a < axes.size() ? axes[a] : UOp()) &&
                axis_type_of(rngs[b]) == AxisType::Global)
              arg = static_cast<int64_t>(b);
          if (arg < 0) arg = 0;
        }
        const Opt o{op, axis, arg};
        if (a == axes.size()) {
          refuses(sink, o, t, "an axis past the ranges it numbers");
          continue;
        }
        const bool ok = listed && applies.contains(axis_type_of(axes[a]));
        if (!ok) {
          refuses(sink, o, t, "outside its row");
          continue;
        }
        const UOp out = apply_opt(sink, o, t);
        ++applied;
        if (splits) {
          const std::vector<UOp> after = opt_ranges(out);
          EXPECT_TRUE(
              std::ranges::any_of(after, [&](const UOp& x) { return axis_type_of(x) == *splits; }))
              << opt_repr(o) << " on " << device << " splits off no " << r[3] << " range";
        }
        if (r[4] != "-") {  // the most lanes: every amount up to it that divides the range
          const int64_t most = std::stoll(r[4]);  // applies, every larger one is refused
          const int64_t size = axes[a].src(0).arg().as_int();
          for (int64_t n = 2; n <= 4 * most && n < size; ++n) {
            if (size % n != 0) continue;
            if (n <= most) {
              EXPECT_NO_THROW(apply_opt(sink, Opt{op, axis, n}, t)) << r[0] << " " << n;
              ++applied;
            } else {
              refuses(sink, Opt{op, axis, n}, t, "over the most lanes");
            }
          }
        }
      }
    }
  }
  EXPECT_GT(applied, 10);
  EXPECT_GT(refused, 20);
}

// A compiled kernel's ProgramInfo: ins and outs ascending, a slot it reads and writes in both.
TEST(Spec, ProgramInfoCountsAReadModifyWriteInBoth) {
  const UOp r0 = krange(4, 0);
  const UOp p0 = kparam(0, 4), p1 = kparam(1, 4), p2 = kparam(2, 4);
  auto slots = [](const Arg& info, const char* field) {
    std::vector<int64_t> out;
    for (const Arg& a : info.field(field).items()) out.push_back(static_cast<int64_t>(a.as_int()));
    return out;
  };
  // out[i] += a[i]: slot 0 is read and written
  const Arg rmw = program_info_from_sink(
      ksink({kend(kstore(kidx(p0, r0), kidx(p0, r0) + kidx(p1, r0)), {r0})}), 2);
  EXPECT_EQ(slots(rmw, "ins"), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(slots(rmw, "outs"), (std::vector<int64_t>{0}));
  // out[i] = a[i] * b[i]: slot 0 only written
  const Arg plain = program_info_from_sink(
      ksink({kend(kstore(kidx(p0, r0), kidx(p2, r0) * kidx(p1, r0)), {r0})}), 3);
  EXPECT_EQ(slots(plain, "ins"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(slots(plain, "outs"), (std::vector<int64_t>{0}));
}

// The movement_examples table: each example, run through the op's Tensor method on the device,
// gives the documented result (values and shape).
namespace {
// A nested list "[[1, 2], [3, 4]]" (or a nested tuple of ints): its numbers in order and its
// shape by nesting.
struct Nested {
  std::vector<double> values;
  std::vector<int64_t> shape;
  std::vector<std::vector<int64_t>> rows;  // for an argument: its items, each a tuple or a number
};
Nested parse_nested(const std::string& text) {
  Nested out;
  size_t pos = 0;
  std::function<std::vector<int64_t>(int)> parse = [&](int depth) -> std::vector<int64_t> {
    while (pos < text.size() && text[pos] == ' ') ++pos;
    if (text[pos] == '[' || text[pos] == '(') {
      ++pos;
      int64_t n = 0;
      std::vector<int64_t> inner, flat;
      while (true) {
        while (pos < text.size() && (text[pos] == ' ' || text[pos] == ',')) ++pos;
        if (text[pos] == ']' || text[pos] == ')') break;
        inner = parse(depth + 1);
        if (depth == 0) out.rows.push_back(inner);
        flat.insert(flat.end(), inner.begin(), inner.end());
        ++n;
      }
      ++pos;
      if (static_cast<size_t>(depth) >= out.shape.size()) out.shape.resize(depth + 1);
      out.shape[static_cast<size_t>(depth)] = n;
      return flat;
    }
    size_t end = pos;
    while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) ||
                                 text[end] == '-' || text[end] == '.'))
      ++end;
    const double v = std::stod(text.substr(pos, end - pos));
    pos = end;
    out.values.push_back(v);
    return {static_cast<int64_t>(v)};
  };
  parse(0);
  return out;
}
}  // namespace

TEST(Spec, MovementOpsMeanTheirExamples) {
  const auto rows = table("movement_examples");
  std::set<Op> documented;
  for (const auto& r : rows) {
    ASSERT_EQ(r.size(), 4u) << r[0];
    const std::optional<Op> op = op_from_name(r[0]);
    ASSERT_TRUE(op.has_value()) << r[0];
    documented.insert(*op);
    const Nested src = parse_nested(r[1]), arg = parse_nested(r[2]), want = parse_nested(r[3]);
    std::vector<int64_t> flat_arg;
    std::vector<std::pair<int64_t, int64_t>> pairs;
    for (const auto& item : arg.rows) {
      if (item.size() == 1) flat_arg.push_back(item[0]);
      if (item.size() == 2) pairs.emplace_back(item[0], item[1]);
    }
    // with the opts (small kernels get every axis upcast, and their gates fold) and without
    // (NOOPT=1: loops, and a padded read is a gated load)
    for (const auto& [device, noopt] : std::vector<std::pair<std::string, const char*>>{
             {"INTERP", "0"}, {"CPU", "0"}, {"INTERP", "1"}, {"CPU", "1"}}) {
      const ScopedEnv opts("NOOPT", noopt);
      set_default_device(device);
      const Tensor t = Tensor::from_vector(src.values, Dims(src.shape.begin(), src.shape.end()),
                                           dtypes::float32);
      std::vector<int> axes(flat_arg.begin(), flat_arg.end());
      ASSERT_TRUE(*op == Op::Reshape || *op == Op::Permute || *op == Op::Expand || *op == Op::Pad ||
                  *op == Op::Shrink || *op == Op::Flip)
          << r[0] << " is not a movement op with a Tensor method";
      Tensor out = *op == Op::Reshape   ? t.reshape(Dims(flat_arg.begin(), flat_arg.end()))
                   : *op == Op::Permute ? t.permute(axes)
                   : *op == Op::Expand  ? t.expand(Dims(flat_arg.begin(), flat_arg.end()))
                   : *op == Op::Pad     ? t.pad(pairs)
                   : *op == Op::Shrink  ? t.shrink(pairs)
                                        : t.flip(axes);
      EXPECT_EQ(out.to_doubles(), want.values) << r[0] << " on " << device << " NOOPT=" << noopt;
      EXPECT_EQ(out.shape(), Dims(want.shape.begin(), want.shape.end()))
          << r[0] << " on " << device;
      set_default_device("");
    }
  }
  EXPECT_EQ(documented,
            (std::set<Op>{Op::Reshape, Op::Permute, Op::Expand, Op::Pad, Op::Shrink, Op::Flip}))
      << "one example per movement op";
}
