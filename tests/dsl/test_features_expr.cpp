// The expression features of the .rw language (comprehensions, tuple builtins, slices, tuple
// operators, comparison operators on UOps, `def` functions) in both executors: the rwc-generated
// matchers of tests/dsl/features_expr.rw compiled into this binary, and the interpreter on the
// same file. Run-time errors come from the one value library both executors call.
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "dsl/compiled.h"
#include "dsl/interp.h"
#include "ir/axis.h"
#include "ir/builders.h"
#include "ir/call.h"
#include "ir/graph.h"
#include "ir/kernel_info.h"
#include "ir/rewrite.h"
#include "rules/helpers/kernel.h"
#include "rules/helpers/rangeify.h"

using namespace tinyrw;
using namespace tinyrw::rw;

namespace {

std::shared_ptr<const ResolvedProgram> program() {
  static std::shared_ptr<const ResolvedProgram> prog = [] {
    Diagnostics d;
    auto p = load_rules(TINYRW_TEST_DIR "/dsl/features_expr.rw", d);
    if (!p) ADD_FAILURE() << d.render();
    return std::shared_ptr<const ResolvedProgram>(std::move(p));
  }();
  return prog;
}

// Rewrites `in` with the compiled and the interpreted matcher of `set`; both must give `want`.
void expect_rewrite(const std::string& set, const UOp& in, const UOp& want) {
  const ResolvedSet* s = program()->find(set);
  ASSERT_NE(s, nullptr) << set;
  const RuleSetMatcher* compiled = compiled_rules(set);
  ASSERT_NE(compiled, nullptr) << set;
  InterpretedMatcher interpreted(program(), *s);
  const UOp c = graph_rewrite(in, compiled);
  const UOp i = graph_rewrite(in, &interpreted);
  EXPECT_TRUE(c == want) << set << " compiled: " << c.repr(4) << "\nwant: " << want.repr(4);
  EXPECT_TRUE(i == want) << set << " interpreted: " << i.repr(4) << "\nwant: " << want.repr(4);
}

// The interpreter and the compiled matcher of one shipped rule set.
struct Shipped {
  std::shared_ptr<const ResolvedProgram> program;
  std::unique_ptr<InterpretedMatcher> interpreted;
  const RuleSetMatcher* compiled = nullptr;
  std::vector<const RuleSetMatcher*> both() const { return {compiled, interpreted.get()}; }
};
Shipped shipped(const char* file, const char* set) {
  Diagnostics d;
  Shipped out;
  out.program = load_rules(std::string(TINYRW_SOURCE_DIR "/rules/") + file, d);
  EXPECT_NE(out.program, nullptr) << d.render();
  if (!out.program) return out;
  out.interpreted = std::make_unique<InterpretedMatcher>(out.program, *out.program->find(set));
  out.compiled = compiled_rules(set);
  EXPECT_NE(out.compiled, nullptr);
  return out;
}
UOp var(const char* n, i128 lo = 0, i128 hi = 10) { return UOp::variable(n, lo, hi); }
UOp c(i128 v) { return UOp::cint(v, dtypes::index); }
UOp sink(std::vector<UOp> src) { return UOp::sink(src); }

// The error an interpreted rule raises on `in` (empty when it raises none).
std::string eval_error(const std::string& rules, const UOp& in) {
  Diagnostics d;
  std::shared_ptr<const ResolvedProgram> p = load_rules_text("run.rw", rules, d);
  if (!p) return "does not check: " + d.render();
  InterpretedMatcher m(p, *p->find("r"));
  RewriteContext ctx;
  try {
    m.apply(in, ctx, nullptr);
  } catch (const RwError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(RwExprFeatures, FilteredComprehension) {
  const UOp x = var("x"), y = var("y");
  expect_rewrite("e_filter", sink({c(1), x, c(2), y}), sink({x, y}));
  expect_rewrite("e_filter", sink({x, y}), sink({x, y}));
  expect_rewrite("e_filter", sink({c(1)}), sink({}));
}

TEST(RwExprFeatures, ZipDestructuringAndDefs) {
  const UOp x = var("x");
  const UOp stack = UOp::make(Op::Stack, dtypes::index, {x, x, x});
  expect_rewrite("e_zip", stack, UOp::make(Op::Stack, dtypes::index, {x + 0, x + 1, x + 2}));
  const UOp added = UOp::make(Op::Stack, dtypes::index, {x + 1, x + 1});
  expect_rewrite("e_zip", added, added);
}

TEST(RwExprFeatures, ArgsortAndSlices) {
  const UOp a = var("a", 0, 9), b = var("b", 0, 5), d = var("d", 0, 2);
  expect_rewrite("e_sort", sink({a, b, d}), sink({d, b, a}));
  expect_rewrite("e_sort", sink({b, a, d}), sink({b, a, d}));  // not descending: no rewrite
}

TEST(RwExprFeatures, TupleBuiltinsAndOperators) {
  // t = (3, 4, 6); each value below is one expression of e_values, in order (the last a zip of
  // three tuples of unequal lengths, which compiled code walks side by side)
  const std::vector<i128> want = {13, 72, 6, 3, 23, 6,  6,  0, 0,  4,  6, 6,  6, 7,
                                  0,  1,  0, 1, 1,  29, 18, 2, 61, 36, 3, -2, 46};
  std::vector<UOp> out;
  for (i128 v : want) out.push_back(c(v));
  expect_rewrite("e_values", sink({c(3), c(4), c(6)}), sink(out));
  // argsort is stable and negative numbers sort first; min and max of a tuple
  const UOp r = graph_rewrite(sink({c(5), c(-1), c(5)}), compiled_rules("e_values"));
  ASSERT_EQ(r.nsrc(), want.size());
  EXPECT_EQ(r.src(2).arg().as_int(), 5);   // max
  EXPECT_EQ(r.src(3).arg().as_int(), -1);  // min
  EXPECT_EQ(r.src(8).arg().as_int(), 1);   // argsort(t)[0]
}

TEST(RwExprFeatures, ComparisonOperatorsBuildCmpLt) {
  const UOp a = var("a"), b = var("b");
  // x < y is CmpLt(x, y); x >= y is !(x < y), built as .ge builds it
  expect_rewrite("e_compare", a.lt(b).where(a, b), a.ge(b).where(b, a));
  EXPECT_TRUE(a.ge(b) == a.lt(b).logical_not());
  // x <= y is !(y < x), as .le
  expect_rewrite("e_compare", a.maximum(b), a.le(b).where(b, a));
  // x > y is CmpLt(y, x); a number becomes a constant of the UOp's dtype
  expect_rewrite("e_compare_gt", a.lt(b).where(a, b), a.gt(c(2)).where(b, a));
}

TEST(RwExprFeatures, MembershipInRangeThroughADef) {
  const UOp x = var("x", 0, 5), y = var("y", 0, 9);
  expect_rewrite("e_range", x.floormod(c(6)), x);
  expect_rewrite("e_range", y.floormod(c(6)), y.floormod(c(6)));
}

TEST(RwExprFeatures, RunTimeErrorsAreLocated) {
  const UOp x = var("x");
  auto rule = [](const std::string& result) {
    return "ruleset r {\n  s:Sink(...) => " + result + "\n}\n";
  };
  EXPECT_EQ(eval_error(rule("s.replace(src: [x for x, y in s.src])"), sink({x})),
            "run.rw:2: error in rule r#0: cannot unpack " + x.repr(1) + " into 2 names");
  EXPECT_EQ(eval_error(rule("s.replace(src: [s for _ in range(100000)])"), sink({x})),
            "run.rw:2: error in rule r#0: range of 100000 items (more than 65536: the tuple size "
            "limit)");
  EXPECT_EQ(
      eval_error(rule("s.replace(src: [s for a in range(300) for b in range(300)])"), sink({x})),
      "run.rw:2: error in rule r#0: a comprehension runs its loop more than 65536 times "
      "(the tuple size limit)");
  EXPECT_EQ(eval_error(rule("s.replace(src: s.src * 100000)"), sink({x})),
            "run.rw:2: error in rule r#0: a tuple of 100000 items (more than 65536: the tuple "
            "size limit)");
  EXPECT_EQ(eval_error(rule("s.replace(src: [a for a in s.arg])"), sink({x})),
            "run.rw:2: error in rule r#0: cannot iterate over none");
  EXPECT_EQ(eval_error(rule("s.replace(src: s.src[::0])"), sink({x})),
            "run.rw:2: error in rule r#0: slice step cannot be zero");
  EXPECT_EQ(eval_error(rule("s.replace(src: (max(()),))"), sink({x})),
            "run.rw:2: error in rule r#0: max() of an empty tuple");
}

TEST(RwExprFeatures, SlicesFollowPython) {
  auto t = [](std::initializer_list<int> v) {
    std::vector<Value> items;
    for (int i : v) items.push_back(Value::integer(i));
    return Value::tuple(std::move(items));
  };
  const Value n;  // none: the default bound
  auto i = [](int v) { return Value::integer(v); };
  const Value abc = t({0, 1, 2, 3, 4});
  EXPECT_TRUE(slice(abc, i(1), n, n) == t({1, 2, 3, 4}));
  EXPECT_TRUE(slice(abc, n, i(-2), n) == t({0, 1, 2}));
  EXPECT_TRUE(slice(abc, n, n, i(-1)) == t({4, 3, 2, 1, 0}));
  EXPECT_TRUE(slice(abc, i(-2), i(0), i(-1)) == t({3, 2, 1}));
  EXPECT_TRUE(slice(abc, i(-100), i(100), i(2)) == t({0, 2, 4}));
  EXPECT_TRUE(slice(abc, i(3), i(1), n) == t({}));
  EXPECT_TRUE(slice(abc, i(100), n, i(-2)) == t({4, 2, 0}));
  const Value huge =
      Value::integer(static_cast<i128>(1) << 100);  // steps past the ends: no overflow
  EXPECT_TRUE(slice(abc, n, n, huge) == t({0}));
  EXPECT_TRUE(slice(abc, n, n, negate(huge)) == t({4}));
  EXPECT_TRUE(slice(abc, negate(huge), huge, n) == abc);
  // repetition: () * 2^100 is (), a non-empty tuple that long is past the tuple size limit
  EXPECT_TRUE(binary(BinOp::Mul, t({}), huge) == t({}));
  EXPECT_TRUE(binary(BinOp::Mul, i(-3), abc) == t({}));
  EXPECT_THROW(binary(BinOp::Mul, abc, huge), EvalError);
  EXPECT_TRUE(binary(BinOp::Add, abc, t({5})) == t({0, 1, 2, 3, 4, 5}));
  EXPECT_TRUE(binary(BinOp::In, i(3), abc).as_bool());
  EXPECT_FALSE(binary(BinOp::In, i(7), abc).as_bool());
}

// The acceptance test of the design: tinygrad's one-line shrink gradient is one line here, over
// tuples of ints (the shape) and of UOps.
TEST(RwExprFeatures, ShrinkGradientInOneLine) {
  const ResolvedSet* s = program()->find("e_grad");
  ASSERT_NE(s, nullptr);
  const RuleSetMatcher* compiled = compiled_rules("e_grad");
  ASSERT_NE(compiled, nullptr);
  InterpretedMatcher interpreted(program(), *s);
  const UOp x = buffer_view(buffer_uop(dtypes::float32, 0, 24, "CPU"), {4, 6});
  const UOp shrink =
      UOp::make(Op::Shrink, dtypes::float32, {x, shape_to_uop({1, 2}), shape_to_uop({2, 3})});
  const UOp g = UOp::variable("g", 0, 1, dtypes::float32);
  auto pair = [](Value a, Value b) { return Value::tuple({std::move(a), std::move(b)}); };
  RewriteContext ctx;
  // begin/end (1, 3) and (2, 5) of shape (4, 6): pad (1, 1) and (2, 1)
  const Value want = Value::tuple({Value::tuple(
      {pair(Value::integer(1), Value::integer(1)), pair(Value::integer(2), Value::integer(1))})});
  const UOp off = UOp::make(Op::Stack, dtypes::index, {c(1), var("v", 0, 3)});
  const UOp sz = shape_to_uop({5, 7});
  const UOp pad = UOp::make(Op::Pad, dtypes::float32, {x, off, sz});
  const Value want_pad =
      Value::tuple({Value::tuple({pair(Value::uop(c(1)), Value::uop(c(5) - c(1))),
                                  pair(Value::uop(off.src(1)), Value::uop(c(7) - off.src(1)))})});
  for (const RuleSetMatcher* m : {static_cast<const RuleSetMatcher*>(compiled),
                                  static_cast<const RuleSetMatcher*>(&interpreted)}) {
    std::optional<Value> got = m->apply(shrink, ctx, nullptr, &g);
    ASSERT_TRUE(got.has_value());
    EXPECT_TRUE(*got == want) << got->repr();
    got = m->apply(pad, ctx, nullptr, &g);
    ASSERT_TRUE(got.has_value());
    EXPECT_TRUE(*got == want_pad) << got->repr();
  }
}

// The deepest program the limits allow evaluates without exhausting the stack: a chain of defs
// each as deep as the tree depth limit lets its body be (the call at the bottom), up to the def
// depth limit, called from a rule at the bottom of its own deepest expression.
TEST(RwExprFeatures, DeepestDefChainEvaluates) {
  const int terms = kMaxTreeDepth - 8;  // f(i-1)(n) + 1 + 1 ...: the call sits `terms` levels down
  std::string deep;
  for (int i = 0; i < terms; ++i) deep += " + 1";
  std::string text = "def f0(n) = n\n";
  int defs = 1, depth = 1;
  for (; depth + terms + 1 <= kMaxDefDepth; ++defs, depth += terms + 1)
    text += fmt::format("def f{}(n) = f{}(n){}\n", defs, defs - 1, deep);
  text += fmt::format("ruleset r {{\n  Add(x, 0) => const_like(x, f{}(1){})\n}}\n", defs - 1, deep);
  Diagnostics d;
  std::shared_ptr<const ResolvedProgram> p = load_rules_text("deep.rw", text, d);
  ASSERT_NE(p, nullptr) << d.render().substr(0, 1000);
  InterpretedMatcher m(p, *p->find("r"));
  const i128 want = 1 + static_cast<i128>(defs) * terms;
  EXPECT_TRUE(graph_rewrite(var("x") + 0, &m) == c(want));
  // one def more is past the limit
  text = fmt::format("def f{}(n) = f{}(n){}\n", defs, defs - 1, deep) + text;
  EXPECT_EQ(load_rules_text("deep.rw", text, d), nullptr);
  EXPECT_NE(d.render().find("the def depth limit"), std::string::npos);
}

// The graph builders as UOp methods: each rule's result is the C++ builder's node, in both
// executors; a builder's shape error is an error in the rule, at its location.
TEST(RwExprFeatures, GraphBuildersAsMethods) {
  const UOp x = buffer_view(buffer_uop(dtypes::float32, 0, 24, "CPU"), {4, 6});
  const UOp v = UOp::variable("v", 1, 8), i = var("i");
  auto unary = [&](Op op) { return UOp::make(op, dtypes::float32, {x}); };
  auto binary = [&](Op op, const UOp& y) { return UOp::make(op, dtypes::float32, {x, y}); };
  expect_rewrite("e_build", unary(Op::Exp2), x.reshape({6, 4}));
  expect_rewrite("e_build", unary(Op::Log2), x.permute({1, 0}));
  expect_rewrite("e_build", unary(Op::Sin), x.reshape({4, 1, 6}).expand({4, 3, 6}));
  expect_rewrite("e_build", unary(Op::Sqrt), x.pad({1, 2}, {5, 9}).shrink({0, 1}, {4, 6}));
  expect_rewrite("e_build", unary(Op::Reciprocal),
                 x.flip({false, true}).r(Op::Add, {1}).reduce(Op::Max, {0, 1}));
  expect_rewrite("e_build", binary(Op::Add, v), x.reshape({1, 24}).expand({SInt(v), 24}));
  const std::vector<UOp> idx{i, i + c(1)};
  expect_rewrite("e_build", binary(Op::Mul, i), x.index(idx).after(std::vector<UOp>{i}));
  expect_rewrite("e_build", binary(Op::Max, i), x.index(idx));

  const UOp bad = binary(Op::FDiv, x);
  const ResolvedSet* s = program()->find("e_build");
  ASSERT_NE(s, nullptr);
  InterpretedMatcher interpreted(program(), *s);
  RewriteContext ctx;
  for (const RuleSetMatcher* m :
       {compiled_rules("e_build"), static_cast<const RuleSetMatcher*>(&interpreted)}) {
    ASSERT_NE(m, nullptr);
    try {
      m->apply(bad, ctx, nullptr);
      ADD_FAILURE() << "a reshape of 24 elements to (5, 5) raised no error";
    } catch (const RwError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("features_expr.rw:"), std::string::npos) << msg;
      EXPECT_NE(msg.find("error in rule e_build"), std::string::npos) << msg;
      EXPECT_NE(msg.find("RESHAPE"), std::string::npos) << msg;
    }
  }
}

// Builder misuse: a wrong argument count or kind names the builder's signature.
TEST(RwExprFeatures, GraphBuilderArgumentErrors) {
  const UOp x = UOp::make(Op::Exp2, dtypes::float32,
                          {buffer_view(buffer_uop(dtypes::float32, 0, 6, "CPU"), {2, 3})});
  EXPECT_NE(eval_error("ruleset r {\n  Exp2(x) => x.pad((0, 0))\n}\n", x)
                .find("x.pad(offsets, shape): 1 argument(s) given, expects 2"),
            std::string::npos);
  EXPECT_NE(eval_error("ruleset r {\n  Exp2(x) => x.permute(1)\n}\n", x)
                .find("permute: argument 1 must be a tuple of ints"),
            std::string::npos);
  EXPECT_NE(eval_error("ruleset r {\n  Exp2(x) => x.flip((1, 0))\n}\n", x)
                .find("flip: argument 1 must be a tuple of bools"),
            std::string::npos);
  EXPECT_NE(eval_error("ruleset r {\n  Exp2(x) => x.r(Add, (2,))\n}\n", x)
                .find("REDUCE: axis 2 is out of range for shape"),
            std::string::npos);
  EXPECT_NE(eval_error("ruleset r {\n  Exp2(x) => x.frob(1)\n}\n", x).find("has no method 'frob'"),
            std::string::npos);
}

// rules/gradient.rw's movement and reduction gradients, written with the builder methods: both
// executors give the same gradients, the adjoint movement for each op.
TEST(RwExprFeatures, ShippedMovementGradientsAgree) {
  const Shipped grad_set = shipped("gradient.rw", "grad");
  ASSERT_TRUE(grad_set.compiled && grad_set.interpreted);
  const UOp x = buffer_view(buffer_uop(dtypes::float32, 0, 24, "CPU"), {2, 3, 4});
  const UOp x1 = x.reshape({2, 1, 12});
  struct Case {
    UOp node, want;  // want: the first source's gradient of g (in the node's shape)
  };
  auto g_of = [](const UOp& n) {
    int64_t size = 1;
    for (const SInt& k : n.shape()) size *= k.value();
    return buffer_view(buffer_uop(dtypes::float32, 1, size, "CPU"), n.shape());
  };
  std::vector<UOp> nodes = {
      x.reshape({6, 4}),           x.permute({1, 2, 0}),           x1.expand({2, 5, 12}),
      x.pad({1, 0, 2}, {3, 3, 7}), x.shrink({1, 0, 2}, {1, 2, 2}), x.flip({true, false, true}),
      x.reduce(Op::Add, {1}),      x.reduce(Op::Max, {0, 2}),      x.reduce(Op::Mul, {2})};
  RewriteContext ctx;
  for (const UOp& n : nodes) {
    const UOp g = g_of(n);
    std::optional<Value> a = grad_set.compiled->apply(n, ctx, nullptr, &g);
    std::optional<Value> b = grad_set.interpreted->apply(n, ctx, nullptr, &g);
    ASSERT_TRUE(a.has_value() && b.has_value()) << n.repr(2);
    EXPECT_TRUE(*a == *b) << n.repr(2) << "\n" << a->repr() << "\n" << b->repr();
    EXPECT_EQ(a->items().size(), n.nsrc()) << n.repr(2);
    EXPECT_TRUE(a->items()[0].as_uop().shape_is(n.src(0).shape())) << n.repr(2);
  }
  // the adjoints, exactly
  auto grad = [&](const UOp& n) {
    const UOp g = g_of(n);
    return grad_set.interpreted->apply(n, ctx, nullptr, &g)->items()[0].as_uop();
  };
  const UOp p120 = x.permute({1, 2, 0});
  EXPECT_TRUE(grad(p120) == g_of(p120).permute({2, 0, 1}));
  const UOp e = x1.expand({2, 5, 12});
  EXPECT_TRUE(grad(e) == g_of(e).r(Op::Add, {1}).reshape({2, 1, 12}));
  const UOp pad = x.pad({1, 0, 2}, {3, 3, 7});
  EXPECT_TRUE(grad(pad) == g_of(pad).shrink({1, 0, 2}, {2, 3, 4}));
  const UOp sum = x.reduce(Op::Add, {1});  // PERMUTE then REDUCE over the first axis
  ASSERT_EQ(sum.op(), Op::Reduce);
  EXPECT_TRUE(grad(sum) == g_of(sum).reshape({1, 2, 4}).expand({3, 2, 4}));
}

std::string rule_error(const RuleSetMatcher* m, const UOp& u, const UOp* g = nullptr) {
  RewriteContext ctx;
  try {
    m->apply(u, ctx, nullptr, g);
  } catch (const RwError& e) {
    return e.what();
  }
  return "no error";
}

// rules/gradient.rw's AFTER and RETURNED rules in both executors: the last STORE overwriting the
// buffer gets the gradient (then its value), a store elsewhere leaves it to the buffer, a store
// to part of it is refused; output i of a CALL gives the call a bundle with g at i; a kernel CALL
// without a gradient function is refused.
TEST(RwExprFeatures, ShippedAfterAndReturnedGradients) {
  const Shipped grad = shipped("gradient.rw", "grad");
  ASSERT_TRUE(grad.compiled && grad.interpreted);
  const UOp t = buffer_view(buffer_uop(dtypes::float32, 0, 4, "CPU"), {4}),
            o = buffer_view(buffer_uop(dtypes::float32, 1, 4, "CPU"), {4}),
            v = buffer_view(buffer_uop(dtypes::float32, 2, 4, "CPU"), {4}),
            g = buffer_view(buffer_uop(dtypes::float32, 3, 4, "CPU"), {4});
  auto store = [](const UOp& to, const UOp& x) {
    return UOp::make(Op::Store, dtypes::void_, {to, x});
  };
  const UOp own = store(t, v), other = store(o, v);
  const UOp body =
      UOp::sink(std::vector<UOp>{param_like(t, 0) * param_like(t, 0), param_like(t, 0)});
  const UOp call = UOp::make(Op::Call, dtypes::void_, {body, t}, CallInfo{.name = "f"}.to_arg());
  const Value none;
  struct Case {
    UOp node;
    std::vector<Value> want;
  };
  const std::vector<Case> cases = {
      {t.after(std::vector<UOp>{other}), {Value::uop(g), none}},
      {t.after(std::vector<UOp>{own, other}), {none, Value::uop(g), none}},
      {t.after(std::vector<UOp>{other, own, store(t, v + v)}), {none, none, none, Value::uop(g)}},
      {UOp::make(Op::Returned, dtypes::float32, {call}, Arg::integer(1)),
       {Value::uop(call_grad_bundle(2, 1, g))}},
  };
  RewriteContext ctx;
  for (const RuleSetMatcher* m : grad.both()) {
    for (const Case& k : cases) {
      std::optional<Value> got = m->apply(k.node, ctx, nullptr, &g);
      ASSERT_TRUE(got.has_value()) << k.node.repr(2);
      EXPECT_TRUE(*got == Value::tuple(k.want)) << got->repr();
    }
    // a kernel CALL without a gradient function has nothing to differentiate
    const UOp kernel = UOp::make(Op::Call, dtypes::void_, {body, t},
                                 CallInfo{.name = "k", .kernel = true}.to_arg());
    EXPECT_NE(rule_error(m, kernel, &g)
                  .find("error in rule grad.call: custom kernel 'k' has no "
                        "gradient function"),
              std::string::npos)
        << rule_error(m, kernel, &g);
    const UOp part = t.shrink({1}, {2});
    EXPECT_NE(rule_error(m, t.after(std::vector<UOp>{store(part, part)}), &g)
                  .find("error in rule grad.after: gradient through an aliased write: a STORE "
                        "writes part of the buffer an AFTER returns"),
              std::string::npos);
  }
}

// rules/call.rw in both executors: a function CALL's output is its body over the arguments; a
// precompiled one reads its arguments from buffers and gives its output in one (Contiguous where
// a value is not in a buffer yet); a kernel CALL is left alone.
TEST(RwExprFeatures, ShippedCallInlining) {
  const Shipped calls = shipped("call.rw", "calls");
  ASSERT_TRUE(calls.compiled && calls.interpreted);
  const UOp a = buffer_view(buffer_uop(dtypes::float32, 0, 4, "CPU"), {4}), b = a * a;
  const UOp body = UOp::sink(std::vector<UOp>{param_like(a, 0) + param_like(a, 1)});
  auto returned = [&](const CallInfo& info) {
    const UOp call = UOp::make(Op::Call, dtypes::void_, {body, a, b}, info.to_arg());
    return UOp::make(Op::Returned, dtypes::float32, {call}, Arg::integer(0));
  };
  auto contiguous = [](const UOp& u) { return UOp::make(Op::Contiguous, u.dtype(), {u}); };
  RewriteContext ctx;
  for (const RuleSetMatcher* m : calls.both()) {
    std::optional<Value> inl = m->apply(returned({.name = "f"}), ctx, nullptr);
    ASSERT_TRUE(inl.has_value());
    EXPECT_TRUE(inl->as_uop() == a + b) << inl->repr();
    std::optional<Value> pre = m->apply(returned({.name = "f", .precompile = true}), ctx, nullptr);
    ASSERT_TRUE(pre.has_value());
    EXPECT_TRUE(pre->as_uop() == contiguous(a + contiguous(b))) << pre->repr();
    EXPECT_FALSE(m->apply(returned({.name = "k", .kernel = true}), ctx, nullptr).has_value());
  }
}

// rules/rangeify.rw's index math through movement ops, written with the builder methods: each
// executor maps an index into a view to the index into its source, as written out here.
TEST(RwExprFeatures, ShippedRangeifyIndexMath) {
  const Shipped rangeify = shipped("rangeify.rw", "rangeify");
  ASSERT_TRUE(rangeify.compiled && rangeify.interpreted);
  const UOp x = buffer_view(buffer_uop(dtypes::float32, 0, 24, "CPU"), {2, 3, 4});
  const UOp r0 = UOp::range(c(6), 0), r1 = UOp::range(c(4), 1), r2 = UOp::range(c(5), 2);
  const UOp two = UOp::cfloat(2.0);
  auto idx = [](std::vector<UOp> v) { return v; };
  struct Case {
    UOp in, want;
  };
  // (6, 4) -> (2, 3, 4): flat = 0 + r1 * 1 + r0 * 4, then // 12, // 4 % 3, % 4
  const UOp flat = c(0) + r1 * c(1) + r0 * c(4);
  const UOp x13 = x.reshape({2, 1, 12});
  const std::vector<Case> cases = {
      {x.reshape({6, 4}).index(idx({r0, r1})),
       x.index(
           idx({flat.floordiv(c(12)), flat.floordiv(c(4)).floormod(c(3)), flat.floormod(c(4))}))},
      {x.permute({1, 2, 0}).index(idx({r0, r1, r2})), x.index(idx({r2, r0, r1}))},
      {x13.expand({2, 5, 12}).index(idx({r0, r2, r1})), x13.index(idx({r0, c(0), r1}))},
      {x.shrink({1, 0, 2}, {1, 2, 2}).index(idx({r0, r1, r2})),
       x.index(idx({r0 + c(1), r1, r2 + c(2)}))},
      {x.flip({true, false, true}).index(idx({r0, r1, r2})),
       x.index(idx({c(1) - r0, r1, c(3) - r2}))},
      {UOp::make(Op::Reshape, dtypes::float32, {two, shape_to_uop({2, 2})}).index(idx({r0, r1})),
       two},
  };
  RewriteContext ctx;
  for (const Case& k : cases) {
    for (const RuleSetMatcher* m : rangeify.both()) {
      std::optional<Value> got = m->apply(k.in, ctx, nullptr);
      ASSERT_TRUE(got.has_value()) << k.in.repr(2);
      EXPECT_TRUE(got->as_uop() == k.want) << got->repr() << "\nwant: " << k.want.repr(3);
    }
  }
}

// rules/reduce.rw's reduce_to_acc, in both executors: a REDUCE becomes a one-element
// register buffer (a new slot each) set to the op's identity, updated by a store inside the
// REDUCE's loops (an AFTER of the set and the loops' ranges), and read (a LOAD) after them (an
// AFTER of the loop's END, tagged mergeable).
TEST(RwExprFeatures, ShippedReduceToAccumulator) {
  const Shipped acc = shipped("reduce.rw", "reduce_to_acc");
  ASSERT_TRUE(acc.compiled && acc.interpreted);
  const UOp buf = buffer_uop(dtypes::float32, 0, 12, "CPU");
  const UOp r = UOp::range(c(4), 1, AxisType::Reduce);
  const UOp x = UOp::make(Op::Index, dtypes::float32, {buf, r});
  for (const auto& [op, identity] :
       {std::pair{Op::Add, UOp::cfloat(0.0)}, std::pair{Op::Max, UOp::cfloat(-INFINITY)},
        std::pair{Op::Mul, UOp::cfloat(1.0)}}) {
    const UOp red =
        UOp::make(Op::Reduce, dtypes::float32, {x, r}, Arg::tuple({Arg::op(op), Arg::integer(0)}));
    for (const RuleSetMatcher* m : acc.both()) {
      KernelContext kc{.accumulators = 2};
      RewriteContext ctx{.user = &kc};
      const std::optional<Value> got = m->apply(red, ctx, nullptr);
      ASSERT_TRUE(got.has_value());
      EXPECT_EQ(kc.accumulators, 3);
      const UOp reg = UOp::make(Op::Buffer, dtypes::float32, {},
                                Arg::record("ParamArg", {{"slot", Arg::integer(-3)},
                                                         {"size", Arg::integer(1)},
                                                         {"addrspace", Arg::string("REG")}}));
      auto element = [](const UOp& b) { return UOp::make(Op::Index, b.dtype(), {b, c(0)}); };
      const UOp set = UOp::make(Op::Store, dtypes::void_, {element(reg), identity});
      const UOp inside = reg.after({set, r});
      auto held = [&](const UOp& b) { return UOp::make(Op::Load, b.dtype(), {element(b)}); };
      const UOp update =
          UOp::make(Op::Store, dtypes::void_, {element(inside), held(inside).alu(op, {x})});
      const UOp end =
          UOp::make(Op::End, dtypes::void_, {update, r}).with_tag(Arg::string("mergeable"));
      const UOp want = held(reg.after({end}));
      EXPECT_TRUE(got->as_uop() == want) << got->repr() << "\nwant: " << want.repr(4);
    }
  }
  // a nested REDUCE: each gets its own register, the inner one's inside the outer's update; no
  // REDUCE is left (graph_rewrite, as the linearizer runs it)
  const UOp r2 = UOp::range(c(3), 2, AxisType::Reduce);
  const UOp inner = UOp::make(Op::Reduce, dtypes::float32, {x + r2.cast(dtypes::float32), r2},
                              Arg::tuple({Arg::op(Op::Add), Arg::integer(0)}));
  const UOp outer = UOp::make(Op::Reduce, dtypes::float32, {inner * inner, r},
                              Arg::tuple({Arg::op(Op::Max), Arg::integer(0)}));
  for (const RuleSetMatcher* m : acc.both()) {
    KernelContext kc;
    const UOp out = graph_rewrite(outer, m, {.ctx = &kc, .name = "reduce to accumulators"});
    std::set<i128> regs;
    for (const UOp& u : toposort(out)) {
      EXPECT_NE(u.op(), Op::Reduce);
      if (u.op() == Op::Buffer && u.arg().find_field("addrspace"))
        regs.insert(u.arg().field("slot").as_int());
    }
    EXPECT_EQ(regs, (std::set<i128>{-1, -2}));
    EXPECT_EQ(kc.accumulators, 2);
    // without the kernel's context there is no register numbering: an error, not a guess
    RewriteContext none;
    try {
      m->apply(outer, none, nullptr);
      ADD_FAILURE() << "an accumulator without a KernelContext";
    } catch (const RwError& e) {
      EXPECT_NE(std::string(e.what()).find("accumulator needs a KernelContext"), std::string::npos)
          << e.what();
    }
  }
}

// rules/rangeify.rw's and rules/indexing.rw's checks, in both executors: an INDEX whose count
// differs from the view's rank is refused (the zips of the index math would drop indices).
TEST(RwExprFeatures, ShippedRangeifyChecks) {
  const Shipped rangeify = shipped("rangeify.rw", "rangeify");
  const Shipped pads = shipped("indexing.rw", "pad_ranges");
  ASSERT_TRUE(rangeify.compiled && rangeify.interpreted && pads.compiled && pads.interpreted);
  const UOp x = buffer_view(buffer_uop(dtypes::float32, 0, 24, "CPU"), {2, 3, 4});
  const UOp r0 = UOp::range(c(6), 0), r1 = UOp::range(c(4), 1);
  auto error_of = [](const RuleSetMatcher* m, const UOp& u) {
    RewriteContext ctx;
    try {
      m->apply(u, ctx, nullptr);
    } catch (const RwError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::vector<UOp> two_idx{r0, r1};  // three axes, two indices
  for (const RuleSetMatcher* m : rangeify.both()) {
    EXPECT_NE(
        error_of(
            m, UOp::make(Op::Expand, dtypes::float32, {x, shape_to_uop({2, 3, 4})}).index(two_idx))
            .find("INDEX of an EXPAND: the index count differs from the rank"),
        std::string::npos);
    EXPECT_NE(error_of(m, x.shrink({1, 0, 0}, {1, 3, 4}).index(two_idx))
                  .find("INDEX of a SHRINK: the index count differs from the rank"),
              std::string::npos);
    EXPECT_NE(error_of(m, x.flip({true, false, false}).index(two_idx))
                  .find("INDEX of a FLIP: the index count differs from the rank"),
              std::string::npos);
  }
  for (const RuleSetMatcher* m : pads.both())
    EXPECT_NE(error_of(m, x.pad({1, 0, 2}, {4, 3, 8}).index(two_idx))
                  .find("error in rule pad_ranges.pad: INDEX of a PAD: the index count differs"),
              std::string::npos)
        << error_of(m, x.pad({1, 0, 2}, {4, 3, 8}).index(two_idx));
}

// fold(Op, t) builds the op from the left, as an op constructor would; an empty tuple has no value.
TEST(RwExprFeatures, FoldBuildsFromTheLeft) {
  const UOp a = UOp::variable("a", 0, 9), b = UOp::variable("b", 0, 9),
            n = UOp::variable("n", 0, 9);
  const UOp p = a.lt(n), q = b.lt(n), r = a.lt(b);
  const Value items = Value::tuple({Value::uop(p), Value::uop(q), Value::uop(r)});
  const std::vector<Value> args{Value::op(Op::And), items};
  EXPECT_TRUE(call_builtin("fold", args, {}).as_uop() == ((p & q) & r));
  const std::vector<Value> sums{Value::op(Op::Add),
                                Value::tuple({Value::uop(a), Value::integer(2)})};
  EXPECT_TRUE(call_builtin("fold", sums, {}).as_uop() == a + UOp::cint(2));
  const std::vector<Value> empty{Value::op(Op::And), Value::tuple({})};
  EXPECT_THROW(call_builtin("fold", empty, {}), EvalError);
}

// uop(Const, dtype, arg: v) holds v in its dtype's kind, the node const_like builds: a float
// constant made from the int 0 is the float 0.0.
TEST(RwExprFeatures, UopConstIsTheConstantOfItsDtype) {
  const std::vector<std::string> names{"", "", "arg"};
  const std::vector<Value> args{Value::op(Op::Const), Value::dtype(dtypes::float32),
                                Value::integer(0)};
  const UOp got = call_builtin("uop", args, names).as_uop();
  EXPECT_TRUE(got == UOp::constant(dtypes::float32, Arg::real(0.0))) << got.repr();
}

// The analyses of ir/terms.cpp as UOp methods, in both executors.
TEST(RwExprFeatures, TermAnalyses) {
  const UOp a = var("a"), b = var("b");
  expect_rewrite("e_terms", sink({c(0), a + b * 3 + 5}), sink({a, b * 3, c(5)}));
  expect_rewrite("e_terms", sink({c(1), a * b * 4}), sink({a, b, c(4)}));
  expect_rewrite("e_terms", sink({c(2), a * 6 + b * 4}), sink({c(2)}));
  expect_rewrite("e_terms", sink({c(2), a + b * 4}), sink({c(1)}));
  expect_rewrite("e_terms", sink({c(3), a * 6 + 4, c(2)}), sink({a * 3 + 2}));
  expect_rewrite("e_terms", sink({c(3), a * 6 + 3, c(2)}), sink({c(3), a * 6 + 3, c(2)}));
  expect_rewrite("e_terms", sink({c(4), a * b * 6, b * 2}), sink({a * 3}));
  expect_rewrite("e_terms", sink({c(4), a * 3, b}), sink({c(4), a * 3, b}));
  expect_rewrite("e_terms", sink({c(5), a + 7}), sink({a, c(7)}));
  expect_rewrite("e_terms", sink({c(5), a * 2}), sink({a * 2, c(0)}));
  expect_rewrite("e_terms", sink({c(6), a}), sink({a}));
  expect_rewrite("e_terms", sink({c(6), a.floormod(c(4))}), sink({c(6), a.floormod(c(4))}));
  expect_rewrite("e_terms", sink({c(8), a + 3 + b}), sink({a, b}));
  // terms() of a sum past the tuple size limit is none; one at the limit is not
  UOp at_limit = a;
  for (size_t k = 1; k < kMaxTupleSize; ++k) at_limit = at_limit + b;
  expect_rewrite("e_terms", sink({c(7), at_limit}), sink({c(7), at_limit}));
  const UOp past = at_limit + b;
  expect_rewrite("e_terms", sink({c(7), past}), sink({past}));
}

// precedes(y), spine(op) and the properties may_wrap and may_raise, in both executors.
TEST(RwExprFeatures, OrderSpineAndRangeProperties) {
  const UOp a = var("a"), b = var("b"), d = var("d");
  // an ALU op sorts before a variable, a variable before a constant; a node is not before itself
  expect_rewrite("e_order", sink({c(0), a, a * b}), sink({a * b, a}));
  expect_rewrite("e_order", sink({c(0), a * b, a}), sink({c(0), a * b, a}));
  expect_rewrite("e_order", sink({c(0), c(3), a}), sink({a, c(3)}));
  expect_rewrite("e_order", sink({c(0), a, a}), sink({c(0), a, a}));
  // the spine: the one ADD source each step (src[0] when neither or both are), to the bottom
  const UOp s = (a * 2 + b) + 3;
  expect_rewrite("e_order", sink({c(1), s}), sink({s, a * 2 + b, a * 2}));
  const UOp both = (a + b) + (b + d);
  expect_rewrite("e_order", sink({c(1), both}), sink({both, a + b, a}));
  expect_rewrite("e_order", sink({c(2), s}), sink({a * 2}));
  // at most kMaxSpineNodes nodes
  UOp l = a;
  for (int k = 0; k < 10; ++k) l = l + b;
  expect_rewrite("e_order", sink({c(3), l}), sink({c(11)}));
  for (size_t k = 10; k < kMaxSpineNodes + 100; ++k) l = l + b;
  expect_rewrite("e_order", sink({c(3), l}), sink({c(static_cast<i128>(kMaxSpineNodes))}));
  // may_wrap: a tensor int whose exact range leaves its dtype's (never an index)
  const UOp w = UOp::variable("w", 0, 1 << 30, dtypes::int32);
  expect_rewrite("e_order", sink({c(4), w * UOp::cint(4, dtypes::int32)}),
                 sink({w * UOp::cint(4, dtypes::int32)}));
  expect_rewrite("e_order", sink({c(4), w + UOp::cint(4, dtypes::int32)}),
                 sink({c(4), w + UOp::cint(4, dtypes::int32)}));
  expect_rewrite("e_order", sink({c(4), a * (1 << 30) * 8}), sink({c(4), a * (1 << 30) * 8}));
  // may_raise: a division by a range holding 0, anywhere below
  expect_rewrite("e_order", sink({c(5), a.floordiv(b) + 1}), sink({a.floordiv(b) + 1}));
  expect_rewrite("e_order", sink({c(5), a.floordiv(b + 1)}), sink({c(5), a.floordiv(b + 1)}));
  // a wrong argument is the rule's run-time error
  EXPECT_NE(eval_error("ruleset r {\n  Sink(x) if x.precedes(3) => x\n}\n", sink({a}))
                .find("expected a UOp, got 3"),
            std::string::npos);
  EXPECT_NE(eval_error("ruleset r {\n  Sink(x) => uop(Sink, void, src: x.spine())\n}\n", sink({a}))
                .find("spine takes 1 argument, got 0"),
            std::string::npos);
}

// Comprehensions over range() and enumerate() count without building their tuples, in both
// executors, with the builtins' results and errors; x.chain_terms(op) and tuple.index(v).
TEST(RwExprFeatures, RangeEnumerateChainTermsAndIndex) {
  const UOp a = var("a"), b = var("b"), d = var("d");
  auto consts = [](std::vector<i128> vs) {
    std::vector<UOp> out;
    for (i128 v : vs) out.push_back(c(v));
    return sink(out);
  };
  expect_rewrite("e_loops", sink({c(100), c(2), c(9), c(3)}), consts({2, 5, 8}));
  expect_rewrite("e_loops", sink({c(100), c(9), c(2), c(-3)}), consts({9, 6, 3}));
  expect_rewrite("e_loops", sink({c(100), c(9), c(2), c(3)}), sink({}));
  expect_rewrite("e_loops", sink({c(101), c(5), c(7)}), consts({55, 67}));  // starts at 5
  expect_rewrite("e_loops", sink({c(104), c(5), c(7)}), consts({5, 17}));
  expect_rewrite("e_loops", sink({c(105), c(4)}), consts({10, 20, 21, 30, 31, 32}));
  // the terms of the chain of ADDs, top down; the last node is a term itself
  const UOp s = (a * 2 + b) + 3;
  expect_rewrite("e_loops", sink({c(102), s}), sink({c(3), b, a * 2}));
  const UOp both = (a + b) + (b + d);  // both sources ADDs: source 1 is a term
  expect_rewrite("e_loops", sink({c(102), both}), sink({b + d, b, a}));
  expect_rewrite("e_loops", sink({c(103), s, b}), sink({c(1)}));
  expect_rewrite("e_loops", sink({c(103), s, a * 2}), sink({c(2)}));
  expect_rewrite("e_loops", sink({c(103), s, d}), sink({c(103), s, d}));  // not a term: no match
  // open ranges, the nodes sources first, the names of value types
  const UOp r0 = UOp::range(c(4), 0), r1 = UOp::range(c(8), 1);
  expect_rewrite("e_loops", sink({c(106), r0 * 8 + r1}), sink({r0, r1}));
  const UOp closed = UOp::make(Op::End, dtypes::void_, {r0 * 8 + r1, r1});
  expect_rewrite("e_loops", sink({c(106), closed}), sink({r0}));
  expect_rewrite("e_loops", sink({c(107), a * b + a}), sink({a, b}));
  expect_rewrite("e_loops", sink({c(108), c(5)}), sink({c(5)}));
  expect_rewrite("e_loops", sink({c(108), a}), sink({c(108), a}));  // a variable's arg: no int
  // the base under views and DETACH; the node under a chain of RESHAPEs
  const UOp buf = buffer_uop(dtypes::float32, 0, 24, "CPU");
  const UOp view = buffer_view(buf, {4, 6});
  const UOp detach = UOp::make(Op::Detach, dtypes::float32, {view.permute({1, 0})});
  expect_rewrite("e_loops", sink({c(109), detach.reshape({24}).reshape({2, 12})}),
                 sink({buf, detach}));
  expect_rewrite("e_loops", sink({c(109), a}), sink({a, a}));  // neither: itself
  // a gated toposort: under a MUL or a MAX nothing is visited (the root itself is entered)
  expect_rewrite("e_loops", sink({c(110), a * b + d}), sink({a * b, d}));
  expect_rewrite("e_loops", sink({c(110), (a * b).maximum(d) + b}), sink({(a * b).maximum(d), b}));
  expect_rewrite("e_loops", sink({c(110), a * b}), sink({a, b, a * b}));
  expect_rewrite("e_loops", sink({c(111), (a * b) + (d + a)}), sink({d, a}));
  // a and b swapped once (not swapped back), but not under the MUL
  expect_rewrite("e_loops", sink({c(112), (a * b) + (d + a), a, b}), sink({(a * b) + (d + b)}));
  expect_rewrite("e_loops", sink({c(112), a + b, a, b}), sink({b + a}));
  // errors: the builtins' own, the same in both executors
  const ResolvedSet* set = program()->find("e_loop_errors");
  ASSERT_NE(set, nullptr);
  InterpretedMatcher interpreted(program(), *set);
  const UOp f = UOp::variable("f", 1, 1, dtypes::float32);
  const std::vector<std::pair<Op, std::string>> errors = {
      {Op::Exp2, "range() step cannot be zero"},
      {Op::Log2, "range of 100000 items (more than 65536: the tuple size limit)"},
      {Op::Sin, "cannot iterate over 1"},
      {Op::Sqrt, "tuple.index(x): 3 is not in the tuple"}};
  for (const auto& [op, want] : errors) {
    for (const RuleSetMatcher* m :
         {compiled_rules("e_loop_errors"), static_cast<const RuleSetMatcher*>(&interpreted)}) {
      try {
        graph_rewrite(UOp::make(op, dtypes::float32, {f}), m);
        ADD_FAILURE() << "no error: " << want;
      } catch (const RwError& e) {
        EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
      }
    }
  }
}

// split(op) flattens a tree of op nodes; substitute(pairs) replaces nodes (ir/rewrite.h), in both
// executors.
TEST(RwExprFeatures, SplitAndSubstitute) {
  const UOp a = var("a"), b = var("b");
  const UOp p = a.lt(c(3)), q = b.lt(c(4)), r = a.lt(b);
  expect_rewrite("e_terms", sink({c(9), (p & q) & (r & UOp::cbool(true))}), sink({p, q, r}));
  expect_rewrite("e_terms", sink({c(9), p}), sink({p}));
  expect_rewrite("e_terms", sink({c(10), a * 2 + b, a, b}), sink({b * 2 + b}));
  expect_rewrite("e_terms", sink({c(11), a + b}), sink({a + b}));
  // an item that is no (from, to) pair is the rule's run-time error, in both executors
  const ResolvedSet* s = program()->find("e_substitute_error");
  ASSERT_NE(s, nullptr);
  InterpretedMatcher interpreted(program(), *s);
  const UOp f = UOp::make(Op::Exp2, dtypes::float32, {UOp::variable("f", 0, 1, dtypes::float32)});
  for (const RuleSetMatcher* m :
       {compiled_rules("e_substitute_error"), static_cast<const RuleSetMatcher*>(&interpreted)}) {
    try {
      graph_rewrite(f, m);
      ADD_FAILURE() << "no error";
    } catch (const RwError& e) {
      EXPECT_NE(std::string(e.what()).find("error in rule e_substitute_error#0: substitute takes "
                                           "pairs (from, to), got "),
                std::string::npos)
          << e.what();
    }
  }
}

// `a if c else b` runs only the chosen branch, in both executors: the untaken branches here would
// raise (an index past a one-source Sink, log2_int(0)), and no error comes.
TEST(RwExprFeatures, ConditionalEvaluatesOnlyTheChosenBranch) {
  const UOp x = var("x"), y = var("y");
  expect_rewrite("e_cond", sink({x}), sink({x}));
  expect_rewrite("e_cond", sink({x, y}), y);
  expect_rewrite("e_cond", x * c(8), x << c(3));
  expect_rewrite("e_cond", x * c(0), x * c(0));  // log2_int(0) would raise
  expect_rewrite("e_cond", x * c(-1), x * c(-1));
  // a chain: x if x >= y else (y if y >= x else none)
  const UOp lo = var("lo", 0, 5), hi = var("hi", 5, 10);
  expect_rewrite("e_cond", hi.maximum(lo), hi);
  expect_rewrite("e_cond", lo.maximum(hi), hi);
  expect_rewrite("e_cond", x.maximum(y), x.maximum(y));
}

// any/all over a generator stop where the answer is known, in both executors (an index past a
// variable's sources would raise after it); a list comprehension's argument is built whole. sum
// over a generator gives sum()'s value.
TEST(RwExprFeatures, BuiltinsTakeAGeneratorsItemsAsTheyCome) {
  const UOp x = var("x");
  expect_rewrite("e_generator", sink({c(13), x}), x + c(2));
  expect_rewrite("e_generator", sink({c(14), x}), x + c(3));
  expect_rewrite("e_generator", sink({c(15), x}), x + c(4));
  expect_rewrite("e_generator", sink({c(16), x}), sink({c(16), x}));  // no item decides
  expect_rewrite("e_generator", sink({c(18), x}), x + x * c(2));
  expect_rewrite("e_generator", sink({c(19), x}), c(0));
  const ResolvedSet* s = program()->find("e_generator");
  ASSERT_NE(s, nullptr);
  InterpretedMatcher interpreted(program(), *s);
  for (const RuleSetMatcher* m :
       {compiled_rules("e_generator"), static_cast<const RuleSetMatcher*>(&interpreted)}) {
    try {
      graph_rewrite(sink({c(17), x}), m);
      ADD_FAILURE() << "no error";
    } catch (const RwError& e) {
      EXPECT_NE(std::string(e.what()).find("error in rule e_generator#4: index 0 out of range"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(RwExprFeatures, NotIn) {
  const UOp x = var("x");
  expect_rewrite("e_not_in", sink({x}), sink({x, c(0)}));
  expect_rewrite("e_not_in", sink({c(0), x}), sink({c(0), x}));
  EXPECT_TRUE(binary(BinOp::NotIn, Value::integer(7), Value::tuple({Value::integer(1)})).as_bool());
  EXPECT_FALSE(
      binary(BinOp::NotIn, Value::integer(1), Value::tuple({Value::integer(1)})).as_bool());
}

// A long tuple is searched through a hashed index (Value::find): `in` and tuple.index give what a
// scan with == gives for every probe — numbers equal across kinds (1, 1.0, True; 0, -0.0), UOps
// by identity, tuples item by item, NaN nowhere, a repeated item's first place — and a tuple
// made after another is freed is never answered from the other's index.
TEST(RwExprFeatures, LongTuplesFindWhatAScanFinds) {
  const UOp x = var("x"), y = var("y");
  auto make = [&](int shift) {
    std::vector<Value> items;
    for (int i = 0; i < 40; ++i) items.push_back(Value::integer(i + shift));
    for (int i = 0; i < 10; ++i) items.push_back(Value::real(0.5 + i));
    items.push_back(Value::uop(x));
    items.push_back(Value::tuple({Value::uop(y), Value::integer(3)}));
    items.push_back(Value::integer(7));  // a repeat: index() gives the first
    items.push_back(Value::string("s"));
    return Value::tuple(std::move(items));
  };
  const std::vector<Value> probes = {Value::integer(1),
                                     Value::real(1.0),
                                     Value::boolean(true),
                                     Value::real(-0.0),
                                     Value::integer(7),
                                     Value::real(3.5),
                                     Value::uop(x),
                                     Value::uop(y),
                                     Value::real(NAN),
                                     Value::integer(1000),
                                     Value::string("s"),
                                     Value::string("t"),
                                     Value::tuple({Value::uop(y), Value::real(3.0)}),
                                     Value::tuple({Value::uop(x), Value::integer(3)})};
  auto scan = [](const Value& t, const Value& p) -> std::optional<size_t> {
    for (size_t i = 0; i < t.items().size(); ++i)
      if (t.items()[i] == p) return i;
    return std::nullopt;
  };
  for (int shift : {0, 5, 0}) {  // a new tuple each round, the first one freed before the third
    const Value t = make(shift);
    for (const Value& p : probes) {
      const std::optional<size_t> want = scan(t, p);
      EXPECT_EQ(t.find(p), want) << p.repr() << " shift " << shift;
      EXPECT_EQ(binary(BinOp::In, p, t).as_bool(), want.has_value()) << p.repr();
      if (want) {
        const Value args[] = {p};
        EXPECT_EQ(method(t, "index", args, {}).as_int(), static_cast<i128>(*want)) << p.repr();
      }
    }
  }
}

// Typed def parameters: an argument the checker cannot type is checked when the def runs, with
// the same error in both executors.
TEST(RwExprFeatures, TypedDefParameters) {
  const UOp x = var("x");
  expect_rewrite("e_typed", x * c(8), x << c(3));
  expect_rewrite("e_typed", x + c(0), x);
  const ResolvedSet* s = program()->find("e_typed_error");
  ASSERT_NE(s, nullptr);
  InterpretedMatcher interpreted(program(), *s);
  const UOp f = UOp::make(Op::Exp2, dtypes::float32, {UOp::variable("f", 0, 1, dtypes::float32)});
  for (const RuleSetMatcher* m :
       {compiled_rules("e_typed_error"), static_cast<const RuleSetMatcher*>(&interpreted)}) {
    try {
      graph_rewrite(f, m);
      ADD_FAILURE() << "no error";
    } catch (const RwError& e) {
      EXPECT_NE(std::string(e.what()).find("error in rule e_typed_error#0: argument 1 ('x') of "
                                           "def 'as_uop' must be UOp, got 1"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(eval_error("def f(n: int) = n\nruleset r {\n  s:Sink(...) => s if f((s, 1.5)[1]) "
                       "else none\n}\n",
                       sink({x})),
            "run.rw:3: error in rule r#0: argument 1 ('n') of def 'f' must be int, got 1.5");
}

namespace {
// The error `set` raises on `in` in both executors (the same text); empty when it raises none.
std::vector<std::string> errors_in_both(const std::string& set, const UOp& in) {
  const ResolvedSet* s = program()->find(set);
  InterpretedMatcher interpreted(program(), *s);
  std::vector<std::string> out;
  for (const RuleSetMatcher* m :
       {compiled_rules(set), static_cast<const RuleSetMatcher*>(&interpreted)}) {
    try {
      graph_rewrite(in, m);
      out.emplace_back();
    } catch (const RwError& e) {
      out.emplace_back(e.what());
    }
  }
  return out;
}
UOp call_of(const CallInfo& info, const UOp& body) {
  return UOp::make(Op::Call, dtypes::void_, {body}, info.to_arg());
}
}  // namespace

// `c.arg.field`: a CALL's CallInfo read field by field in both executors; a let keeps the record
// type, and a def or a PARAM's ParamArg reads fields by name at run time.
TEST(RwExprFeatures, RecordFields) {
  const UOp body = sink({c(1)});
  const UOp k = call_of({.name = "k", .kernel = true, .id = 7}, body);
  expect_rewrite("e_record", UOp::make(Op::Returned, dtypes::int32, {k}, Arg::integer(2)),
                 UOp::cint(9, dtypes::int32));
  // another name, or not a kernel: the first rule does not fire
  const UOp other = call_of({.name = "other", .kernel = true, .id = 7}, body);
  expect_rewrite("e_record", UOp::make(Op::Returned, dtypes::int32, {other}, Arg::integer(2)),
                 UOp::make(Op::Returned, dtypes::int32, {other}, Arg::integer(2)));
  expect_rewrite("e_record", call_of({.name = "f", .precompile = true, .id = 3}, body),
                 UOp::cint(3, dtypes::int32));
  expect_rewrite("e_record", call_of({.name = "f", .precompile = true, .grad_fn = 0}, body),
                 call_of({.name = "f", .precompile = true, .grad_fn = 0}, body));
  const UOp p =
      UOp::make(Op::Param, dtypes::int32, {},
                Arg::record("ParamArg", {{"slot", Arg::integer(4)}, {"size", Arg::integer(16)}}));
  expect_rewrite("e_record", sink({p, c(1)}), UOp::cint(4, dtypes::int32));
  expect_rewrite("e_record", UOp::make(Op::Detach, dtypes::int32, {p}),
                 UOp::cint(16, dtypes::int32));
}

// A record field that is missing, of another type than declared, or read from what is no record
// is a run-time error naming the record type and its fields, the same in both executors.
TEST(RwExprFeatures, RecordFieldErrors) {
  const UOp no_size =
      UOp::make(Op::Param, dtypes::int32, {}, Arg::record("ParamArg", {{"slot", Arg::integer(0)}}));
  for (const std::string& e :
       errors_in_both("e_record", UOp::make(Op::Detach, dtypes::int32, {no_size})))
    EXPECT_NE(e.find("error in rule e_record#3: ParamArg has no field 'size' (its fields: slot)"),
              std::string::npos)
        << e;
  // a CALL whose arg is no CallInfo (a bare CALL, or a record of another type)
  const UOp bare = UOp::make(Op::Call, dtypes::void_, {sink({c(1)})});
  for (const std::string& e : errors_in_both("e_record", bare))
    EXPECT_NE(e.find("error in rule e_record#1: expected a CallInfo record, got none (reading "
                     "field 'precompile')"),
              std::string::npos)
        << e;
  const UOp param_arg = UOp::make(Op::Call, dtypes::void_, {sink({c(1)})},
                                  Arg::record("ParamArg", {{"slot", Arg::integer(0)}}));
  for (const std::string& e : errors_in_both("e_record", param_arg))
    EXPECT_NE(e.find("expected a CallInfo record, got ParamArg(slot=0)"), std::string::npos) << e;
  // a CallInfo whose field is not of its declared type, or lacks it
  const UOp wrong = UOp::make(
      Op::Call, dtypes::void_, {sink({c(1)})},
      Arg::record("CallInfo", {{"name", Arg::string("f")}, {"precompile", Arg::string("yes")}}));
  for (const std::string& e : errors_in_both("e_record", wrong))
    EXPECT_NE(e.find("field 'precompile' of CallInfo is 'yes', not bool"), std::string::npos) << e;
  const UOp partial = UOp::make(Op::Call, dtypes::void_, {sink({c(1)})},
                                Arg::record("CallInfo", {{"name", Arg::string("f")}}));
  for (const std::string& e : errors_in_both("e_record", partial))
    EXPECT_NE(e.find("CallInfo has no field 'precompile' (its fields: name)"), std::string::npos)
        << e;
}

// The record types the checker knows match what the IR builds: CallInfo::to_arg writes every
// field of the schema, each of its declared type.
TEST(RwExprFeatures, CallInfoSchemaMatchesTheIR) {
  const RecordSchema* s = record_schema_of(Op::Call);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->name, "CallInfo");
  const Arg a = CallInfo{.name = "f"}.to_arg();
  ASSERT_EQ(a.fields().size(), s->fields.size());
  for (const auto& [name, t] : s->fields) {
    const Arg* f = a.find_field(name);
    ASSERT_NE(f, nullptr) << name;
    EXPECT_TRUE(value_has_type(Value::from_arg(*f), t)) << name;
  }
  // a record arg is a value of its own: compared, and kept whole by replace(arg: ...)
  EXPECT_TRUE(Value::from_arg(a) == Value::from_arg(CallInfo{.name = "f"}.to_arg()));
  EXPECT_FALSE(Value::from_arg(a) == Value::from_arg(CallInfo{.name = "g"}.to_arg()));
  EXPECT_EQ(Value::from_arg(a).to_arg(), a);
}

// KernelInfo::to_arg (a kernel SINK's arg) writes every field of the KernelInfo schema, each of
// its declared type, with and without the optional fields.
TEST(RwExprFeatures, KernelInfoSchemaMatchesTheIR) {
  const RecordSchema* s = record_schema("KernelInfo");
  ASSERT_NE(s, nullptr);
  const KernelInfo full{.name = "r_4_32",
                        .axis_types = {AxisType::Weak, AxisType::Reduce},
                        .applied_opts = {Arg::string("opt")},
                        .opts_to_apply = std::vector<Arg>{},
                        .estimates = Estimates{.ops = 1, .lds = 2, .mem = 3},
                        .beam = 4};
  for (const KernelInfo& k : {KernelInfo{}, full}) {
    const Arg a = k.to_arg();
    ASSERT_EQ(a.fields().size(), s->fields.size());
    for (const auto& [name, t] : s->fields) {
      const Arg* f = a.find_field(name);
      ASSERT_NE(f, nullptr) << name;
      EXPECT_TRUE(value_has_type(Value::from_arg(*f), t)) << name;
    }
    EXPECT_EQ(Value::from_arg(a).to_arg(), a);
  }
  // rules read the fields in both executors; a SINK whose arg is none is left alone
  expect_rewrite("e_kernel_info", UOp::make(Op::Sink, dtypes::void_, {c(1)}, full.to_arg()),
                 UOp::cint(6, dtypes::int32));
  expect_rewrite("e_kernel_info", sink({c(1)}), sink({c(1)}));
  KernelInfo named = full;
  named.name = "E_4";
  const UOp other = UOp::make(Op::Sink, dtypes::void_, {c(1)}, named.to_arg());
  expect_rewrite("e_kernel_info", other, other);
  const RecordSchema* e = record_schema("Estimates");
  ASSERT_NE(e, nullptr);
  const Arg est = full.to_arg().field("estimates");
  ASSERT_EQ(est.fields().size(), e->fields.size());
  for (const auto& [name, t] : e->fields)
    EXPECT_TRUE(value_has_type(Value::from_arg(est.field(name)), t)) << name;
}

// rewritten(u) applies the running rule set once to a node the rule builds, rewritten_fully(u)
// to a fixed point; both executors agree, and outside a running rewrite each is an error.
TEST(RwExprFeatures, RewrittenByTheRunningRuleSet) {
  const UOp x = var("x");
  // (x * -1) * 1 rewritten once is x * -1 (Mul(x, 1) => x fires once)
  expect_rewrite("e_rewritten", UOp::make(Op::Neg, dtypes::index, {x}), x * c(-1));
  // ((x * 1 + 0) * 4) to a fixed point is x * 4
  expect_rewrite("e_rewritten", x << c(2), x * c(4));
  expect_rewrite("e_rewritten", x << c(0), x);
  // x * 2: no rule fires, so rewritten gives none and the rule does not match
  expect_rewrite("e_rewritten", x.floormod(c(5)), x.floormod(c(5)));
  const ResolvedSet* s = program()->find("e_rewritten");
  InterpretedMatcher interpreted(program(), *s);
  RewriteContext alone;  // no graph_rewrite runs: no rule set to rewrite with
  for (const RuleSetMatcher* m :
       {compiled_rules("e_rewritten"), static_cast<const RuleSetMatcher*>(&interpreted)}) {
    try {
      m->apply(UOp::make(Op::Neg, dtypes::index, {x}), alone, nullptr);
      ADD_FAILURE() << "no error";
    } catch (const RwError& e) {
      EXPECT_NE(std::string(e.what()).find("error in rule e_rewritten#2: rewritten() needs a "
                                           "running rule set (a graph_rewrite); this rule was "
                                           "applied on its own"),
                std::string::npos)
          << e.what();
    }
  }
  // a runaway nesting stops at the limit with the innermost rule's error, in both executors
  const UOp f = UOp::make(Op::Exp2, dtypes::float32, {UOp::variable("f", 0, 1, dtypes::float32)});
  for (const std::string& e : errors_in_both("e_rewritten_runaway", f))
    EXPECT_NE(e.find("error in rule e_rewritten_runaway#0: rewritten() nested more than 256 deep "
                     "(the rewritten depth limit)"),
              std::string::npos)
        << e;
}

// rewritten_fully(u, "set") rewrites with the named set (not the running one) in both executors:
// -(x * 1 + 0) is x * -1 by e_rewritten_helper's rules; the running set has neither rule, and the
// rule keeps the result only where the helper set removed the Add.
TEST(RwExprFeatures, RewrittenFullyByANamedRuleSet) {
  const UOp x = var("x");
  expect_rewrite("e_rewritten_named", UOp::make(Op::Neg, dtypes::index, {x}), x * c(-1));
  // x * 1 + 0 is not Neg: no rule of the running set fires on it, and the result keeps it
  expect_rewrite("e_rewritten_named", x * c(1) + c(0), x * c(1) + c(0));
  // a set the running program does not hold is refused at run time too (a compiled rule asked
  // for a name no linked file defines)
  RewriteContext ctx;
  const Value args[] = {Value::uop(x), Value::string("no_such_set")};
  try {
    call_context_builtin(ctx, "rewritten_fully", args);
    ADD_FAILURE() << "no error";
  } catch (const EvalError& e) {
    EXPECT_EQ(std::string(e.what()),
              "'rewritten_fully': no rule set named 'no_such_set' is loaded");
  }
}

// The typed forms generated code calls (and the interpreter, for x.src[i]) give the values and the
// errors of the generic operations they stand for.
TEST(RwExprFeatures, FastPathsAgreeWithTheGenericOperations) {
  auto error = [](const auto& f) -> std::string {
    try {
      f();
    } catch (const EvalError& e) {
      return e.what();
    }
    return "no error";
  };
  const UOp x = var("x", 0, 9), y = var("y", -4, 4);
  const UOp s = sink({x, y});
  const Value src = uop_member(s, UOpProp::Src);
  for (int i : {0, 1, -1, -2}) {
    EXPECT_TRUE(Value::uop(src_item(s, i)) == index(src, Value::integer(i))) << i;
    EXPECT_TRUE(Value::uop(src_item(Value::uop(s), Value::integer(i))) ==
                index(src, Value::integer(i)));
  }
  EXPECT_EQ(error([&] { src_item(s, 2); }), error([&] { index(src, Value::integer(2)); }));
  EXPECT_EQ(error([&] { src_item(s, -3); }), error([&] { index(src, Value::integer(-3)); }));
  EXPECT_EQ(error([&] { src_item(s, Value::string("a")); }),
            error([&] { index(src, Value::string("a")); }));
  EXPECT_EQ(error([&] { src_item(Value::integer(3), 0); }),
            error([&] { member(Value::integer(3), "src"); }));
  EXPECT_NE(error([&] { src_item(Value(), Value::integer(0)); }), "no error");
  // properties of a value that may be a UOp
  EXPECT_EQ(op_of(Value::uop(x)), Op::DefineVar);
  EXPECT_EQ(error([&] { op_of(Value()); }), error([&] { member(Value(), "op"); }));
  EXPECT_TRUE(num_member(Value::uop(y), UOpProp::VMin) == y.vmin());
  EXPECT_TRUE(member(Value::uop(x), UOpProp::Arg) == member(Value::uop(x), "arg"));
  EXPECT_EQ(error([&] { num_member(Value::integer(1), UOpProp::VMax); }),
            error([&] { member(Value::integer(1), "vmax"); }));
  // builtins by number are the builtins by name
  for (std::string_view name :
       {"const_like", "max",  "min", "abs",     "len",       "int",   "float",
        "select",     "fail", "uop", "zip",     "enumerate", "range", "sum",
        "prod",       "all",  "any", "argsort", "tuple",     "fold",  "type_of"}) {
    ASSERT_TRUE(builtin_from_name(name)) << name;
    EXPECT_EQ(builtin_name(*builtin_from_name(name)), name);
  }
  EXPECT_FALSE(builtin_from_name("nope"));
  EXPECT_EQ(error([&] { call_builtin("nope", {}, {}); }), "unknown function 'nope'");
  const Value t = Value::tuple({Value::integer(4), Value::integer(-2)});
  EXPECT_TRUE(call_builtin(Builtin::Sum, std::array{t}, {}) ==
              call_builtin("sum", std::array{t}, {}));
  // select without the dispatch
  for (const Value& cond : {Value::boolean(true), Value::integer(0)}) {
    const std::array<Value, 3> args{cond, Value::integer(1), Value::integer(2)};
    EXPECT_TRUE(select_of(args) == call_builtin("select", args, {}));
  }
  const std::array<Value, 3> gate{Value::uop(x.lt(y)), Value::uop(x), Value::integer(0)};
  EXPECT_TRUE(select_of(gate) == call_builtin("select", gate, {}));
  EXPECT_EQ(error([&] {
              select_of({Value(), Value(), Value()});
            }),
            error([&] { call_builtin("select", std::array<Value, 3>{}, {}); }));
  // two ints inline: the general operation's results, saturation and errors included
  const i128 big = kInfinity;  // the saturated bound
  for (i128 a : {i128{7}, i128{-7}, i128{0}, big, -big}) {
    for (i128 b : {i128{2}, i128{-2}, i128{0}, big}) {
      for (BinOp op : {BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::FloorDiv, BinOp::Mod, BinOp::Eq,
                       BinOp::Ne, BinOp::Lt, BinOp::Le, BinOp::Gt, BinOp::Ge, BinOp::And}) {
        const Value va = Value::integer(a), vb = Value::integer(b);
        const std::string e = error([&] { binary_general(op, va, vb); });
        EXPECT_EQ(error([&] { binary(op, va, vb); }), e);
        if (e == "no error") {
          EXPECT_TRUE(binary(op, va, vb) == binary_general(op, va, vb));
          EXPECT_EQ(binary(op, va, vb).kind(), binary_general(op, va, vb).kind());
        }
      }
    }
  }
}
