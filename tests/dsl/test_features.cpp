// Every .rw language feature, in both executors: the rwc-generated matcher compiled into this
// binary (tests/dsl/features.rw) and the interpreter running the same file.
#include <gtest/gtest.h>

#include <array>
#include <fstream>
#include <set>

#include "dsl/compiled.h"
#include "dsl/interp.h"
#include "ir/rewrite.h"
#include "rules_gen/features.h"

using namespace tinyrw;
using namespace tinyrw::rw;

namespace {

std::shared_ptr<const ResolvedProgram> features() {
  static std::shared_ptr<const ResolvedProgram> prog = [] {
    Diagnostics d;
    auto p = load_rules(TINYRW_TEST_DIR "/dsl/features.rw", d);
    if (!p) ADD_FAILURE() << d.render();
    return std::shared_ptr<const ResolvedProgram>(std::move(p));
  }();
  return prog;
}

// The two executors of one rule set.
struct Both {
  const RuleSetMatcher* compiled;
  std::unique_ptr<InterpretedMatcher> interpreted;
  // One application of the set's rules to u by each executor: they must agree; the compiled
  // result is returned.
  std::optional<Value> check(const UOp& u) const {
    RewriteContext ctx;
    std::optional<Value> c = compiled->apply(u, ctx, nullptr);
    std::optional<Value> i = interpreted->apply(u, ctx, nullptr);
    EXPECT_EQ(c.has_value(), i.has_value());
    if (c && i) EXPECT_TRUE(*c == *i) << c->repr() << " vs " << i->repr();
    return c;
  }
};
Both both(const std::string& set) {
  const ResolvedSet* s = features()->find(set);
  EXPECT_NE(s, nullptr) << set;
  const RuleSetMatcher* c = compiled_rules(set);
  EXPECT_NE(c, nullptr) << set;
  return {c, std::make_unique<InterpretedMatcher>(features(), *s)};
}

// Rewrites `in` with each executor (graph_rewrite, post-order to a fixed point) and checks both
// give `want`.
void expect_rewrite(const std::string& set, const UOp& in, const UOp& want) {
  Both b = both(set);
  ASSERT_TRUE(b.compiled && b.interpreted);
  const UOp c = graph_rewrite(in, b.compiled);
  const UOp i = graph_rewrite(in, b.interpreted.get());
  EXPECT_TRUE(c == want) << set << " compiled: " << c.repr(4) << "\nwant: " << want.repr(4);
  EXPECT_TRUE(i == want) << set << " interpreted: " << i.repr(4) << "\nwant: " << want.repr(4);
}

UOp var(const char* n, DType d = dtypes::index, i128 lo = 0, i128 hi = 10) {
  return UOp::variable(n, lo, hi, d);
}
UOp c(i128 v, DType d = dtypes::index) { return UOp::cint(v, d); }

}  // namespace

TEST(RwFeatures, CommutativeSourcesTryBothOrders) {
  const UOp x = var("x");
  expect_rewrite("t_commutative", x + 0, x);
  expect_rewrite("t_commutative", c(0) + x, x);
  expect_rewrite("t_commutative", x + 1, x + 1);
}

TEST(RwFeatures, RepeatedNameMeansSameNode) {
  const UOp x = var("x"), y = var("y");
  expect_rewrite("t_repeated_name", x + x, x * 2);
  expect_rewrite("t_repeated_name", x + y, x + y);
}

TEST(RwFeatures, RepeatedSources) {
  const UOp x = var("x");
  const UOp consts = UOp::sink(std::vector<UOp>{c(1), c(2)});
  expect_rewrite("t_repeated_source", consts, UOp::sink(std::vector<UOp>{}));
  const UOp mixed = UOp::sink(std::vector<UOp>{c(1), x});
  expect_rewrite("t_repeated_source", mixed, mixed);
  const UOp same = UOp::make(Op::Stack, dtypes::index, {x, x, x});
  expect_rewrite("t_repeated_source", same, x);
  const UOp differ = UOp::make(Op::Stack, dtypes::index, {x, c(1)});
  expect_rewrite("t_repeated_source", differ, differ);
}

TEST(RwFeatures, VariadicTail) {
  const UOp x = var("x");
  expect_rewrite("t_variadic", UOp::sink(std::vector<UOp>{c(3), x, x}), c(3));
  expect_rewrite("t_variadic", UOp::sink(std::vector<UOp>{c(3)}), c(3));
  const UOp no = UOp::sink(std::vector<UOp>{x, c(3)});
  expect_rewrite("t_variadic", no, no);
}

TEST(RwFeatures, DtypeGroups) {
  auto neg = [](const UOp& u) { return UOp::make(Op::Neg, u.dtype(), {u}); };
  const UOp f = var("f", dtypes::float32), u = var("u", dtypes::uint8), i = var("i", dtypes::int32),
            k = var("k", dtypes::int64);
  expect_rewrite("t_dtypes", neg(f), f);
  expect_rewrite("t_dtypes", neg(u), c(7, dtypes::uint8));
  expect_rewrite("t_dtypes", neg(i), c(32, dtypes::int32));  // exact dtype before its group
  expect_rewrite("t_dtypes", neg(k), c(1, dtypes::int64));
  const UOp b = var("b", dtypes::bool_, 0, 1);
  expect_rewrite("t_dtypes", neg(b), neg(b));  // bool is not in the int group
}

TEST(RwFeatures, ArgMatching) {
  expect_rewrite("t_args", c(5), c(6));
  expect_rewrite("t_args", c(4), c(4));
  const UOp r = UOp::range(c(8), 3);
  expect_rewrite("t_args", r, c(3));
  expect_rewrite("t_args", UOp::range(c(8), 0), UOp::range(c(8), 0));
  // a RANGE's arg ends in its axis type's name: (3, 'REDUCE') and (3, 'UNROLL') differ
  expect_rewrite("t_args", UOp::range(c(8), 3, AxisType::Reduce),
                 UOp::range(c(8), 3, AxisType::Reduce));
  expect_rewrite("t_axis_type", UOp::range(c(8), 3, AxisType::Reduce), c(103));
  expect_rewrite("t_axis_type", UOp::range(c(8), 3, AxisType::Unroll),
                 UOp::range(c(8), 3, AxisType::Unroll));
  expect_rewrite("t_axis_type", r, r);
  const UOp red = UOp::make(Op::Reduce, dtypes::float32, {var("v", dtypes::float32)},
                            Arg::tuple({Arg::op(Op::Max), Arg::integer(1)}));
  expect_rewrite("t_args", red, c(99, dtypes::int32));
  const UOp add = red.with_arg(Arg::tuple({Arg::op(Op::Add), Arg::integer(1)}));
  expect_rewrite("t_args", add, add);
}

TEST(RwFeatures, Alternatives) {
  const UOp x = var("x");
  expect_rewrite("t_alternatives", x + 0, x);
  expect_rewrite("t_alternatives", c(0) + x, x);
  expect_rewrite("t_alternatives", x * 1, x);
  expect_rewrite("t_alternatives", c(1) * x, c(1) * x);  // Mul(x, 1) is not commutative here
}

TEST(RwFeatures, OptionalWrapper) {
  const UOp x = var("x", dtypes::int32);
  expect_rewrite("t_optional", x + UOp::cint(1, dtypes::int32), x);
  const UOp cast = x.cast(dtypes::int64);
  expect_rewrite("t_optional", cast + UOp::cint(1, dtypes::int64), x);
  const UOp other = var("o", dtypes::int64);
  expect_rewrite("t_optional", other + UOp::cint(1, dtypes::int64),
                 other + UOp::cint(1, dtypes::int64));
}

TEST(RwFeatures, Guards) {
  const UOp a = UOp::variable("a", 5, 9), b = UOp::variable("b", 0, 5);
  expect_rewrite("t_guards", a.maximum(b), a);
  expect_rewrite("t_guards", b.maximum(a), b.maximum(a));
}

TEST(RwFeatures, LetBindings) {
  const UOp x = UOp::variable("x", 0, 6), y = UOp::variable("y", 0, 20);
  expect_rewrite("t_let", x.floormod(8), x);
  expect_rewrite("t_let", y.floormod(8), y.floormod(8));
}

TEST(RwFeatures, ForLoops) {
  const UOp x = var("x");
  expect_rewrite("t_for", (x + 2) + 3, x + (c(2) + c(3)));
  expect_rewrite("t_for", (x * 2) * 3, x * (c(2) * c(3)));
  const UOp mixed = (x + 2) * 3;
  expect_rewrite("t_for", mixed, mixed);
}

TEST(RwFeatures, IncludesCompositionAndUse) {
  const UOp x = var("x", dtypes::int32);
  expect_rewrite("t_include", x << UOp::cint(0, dtypes::int32), x);
  expect_rewrite("t_include", x >> UOp::cint(0, dtypes::int32), x);
  const UOp a = UOp::variable("a", 5, 9), b = UOp::variable("b", 0, 5);
  expect_rewrite("t_compose", a.maximum(b) + 0, a);
  expect_rewrite("t_use", (a + 0) * 1, a);
}

TEST(RwFeatures, Helpers) {
  const UOp x = var("x", dtypes::int32);
  expect_rewrite("t_helper", x * UOp::cint(8, dtypes::int32), x << UOp::cint(3, dtypes::int32));
  expect_rewrite("t_helper", x * UOp::cint(6, dtypes::int32), x * UOp::cint(6, dtypes::int32));
}

// rules/prelude.rw declares exactly the C++ helpers this library registers, with their arity and
// result type (loading it checks each declaration against its registration): no drift.
TEST(RwFeatures, PreludeDeclaresEveryRegisteredHelper) {
  Diagnostics d;
  auto prelude = load_rules(TINYRW_SOURCE_DIR "/rules/prelude.rw", d);
  ASSERT_TRUE(prelude) << d.render();
  EXPECT_EQ(d.render(), "");
  std::set<std::string> declared, registered;
  for (const auto& [name, decl] : prelude->helpers) {
    declared.insert(name);
    const Helper* h = find_helper(name);
    ASSERT_TRUE(h) << "declared in rules/prelude.rw but not registered: " << name;
    EXPECT_EQ(helper_mismatch(decl, *h), std::nullopt) << name;
  }
  for (const Helper* h : all_helpers()) registered.insert(h->name);
  EXPECT_EQ(declared, registered) << "every HelperRegistrar needs its `extern fn` line";
  EXPECT_GE(declared.size(), 10u);  // not vacuous (the count falls as helpers move into .rw)
}

// The prelude is where a helper is documented: each `extern fn` line follows a comment saying what
// the helper gives (not the header of its group, which names the registering file).
TEST(RwFeatures, PreludeDocumentsEveryHelper) {
  std::ifstream in(TINYRW_SOURCE_DIR "/rules/prelude.rw");
  ASSERT_TRUE(in);
  std::string line, previous;
  int documented = 0;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.starts_with("extern fn ")) {
      const bool doc = previous.starts_with("# ") && !previous.starts_with("# rules/") &&
                       !previous.starts_with("# tensor/");
      EXPECT_TRUE(doc) << "rules/prelude.rw:" << n << ": no comment says what it gives: " << line;
      documented += doc;
    }
    previous = line;
  }
  EXPECT_GE(documented, 10);
}

// A helper declared but not linked: the checker accepts the call (rwc never links helpers); the
// interpreter reports it when the rule runs, compiled code when it looks the helper up.
TEST(RwFeatures, DeclaredHelperMissingOrMismatchedAtRunTime) {
  Diagnostics d;
  auto prog = load_rules_text(
      "missing.rw",
      "extern fn not_linked(x: uop) -> uop\nruleset r {\n  Add(x, 0) => not_linked(x)\n}\n", d);
  ASSERT_TRUE(prog) << d.render();
  std::shared_ptr<const ResolvedProgram> shared(std::move(prog));
  InterpretedMatcher m(shared, *shared->find("r"));
  const UOp x = var("x");
  try {
    graph_rewrite(x + 0, &m);
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("helper 'not_linked' is declared but no C++ helper of "
                                         "that name is registered"),
              std::string::npos)
        << e.what();
  }
  // generated code checks the registration against the declaration it was compiled with
  const std::array<Type, 2> ints{Type::Int, Type::Int}, int_uop{Type::Int, Type::UOp};
  const std::array<Type, 1> one_int{Type::Int}, one_uop{Type::UOp};
  EXPECT_EQ(gen::helper("gcd", ints, Type::Int).name, "gcd");
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message([&] { gen::helper("gcd", one_int, Type::Int); }),
            "helper 'gcd' is declared with 1 argument(s) -> int, but the C++ helper registered "
            "under that name takes 2 to 2 -> int");
  EXPECT_EQ(message([&] { gen::helper("gcd", ints, Type::UOp); }),
            "helper 'gcd' is declared with 2 argument(s) -> UOp, but the C++ helper registered "
            "under that name takes 2 to 2 -> int");
  EXPECT_EQ(message([&] { gen::helper("gcd", int_uop, Type::Int); }),
            "helper 'gcd' does not match the C++ helper registered under that name: argument 2 is "
            "declared UOp, registered int");
  EXPECT_EQ(message([&] { gen::helper("not_linked", one_uop, Type::UOp); }),
            "helper 'not_linked' used by compiled rules is not registered");
}

// rwc's typed accessors return the registered instance (a misspelt name would not compile).
TEST(RwFeatures, TypedAccessorsAreTheRegisteredRuleSets) {
  EXPECT_EQ(&rules::t_helper(), compiled_rules("t_helper"));
  EXPECT_EQ(rules::t_verify().name(), "t_verify");
  EXPECT_EQ(&rules::t_include(), compiled_rules("t_include"));
}

TEST(RwFeatures, VerifierRules) {
  Both b = both("t_verify");
  const UOp x = var("x", dtypes::int32);
  auto check = [&](const UOp& u) { return b.check(u); };
  EXPECT_TRUE(check(c(1))->status_ok());
  EXPECT_TRUE(check(x + x)->status_ok());
  EXPECT_FALSE(check(UOp::make(Op::Add, dtypes::int32, {x, var("y", dtypes::int64)}))->status_ok());
  auto bad = check(UOp::make(Op::Where, dtypes::int32, {x, x, x}));
  ASSERT_TRUE(bad.has_value());
  EXPECT_FALSE(bad->status_ok());
  EXPECT_EQ(bad->as_string(), "where cond must be bool");
  EXPECT_FALSE(check(x.cast(dtypes::float32)).has_value());  // no rule: not verified here
}

// require(cond, "why") fails the verifier with "why" where cond is false, in clause order: a
// failed require is the rule's result (later rules are not tried).
TEST(RwFeatures, RequireInVerifiers) {
  Both b = both("t_require");
  auto check = [&](const UOp& u) { return b.check(u); };
  const UOp x = var("x", dtypes::int32), p = var("p", dtypes::bool_);
  EXPECT_TRUE(check(x + x)->status_ok());
  auto mixed = check(UOp::make(Op::Add, dtypes::int32, {x, var("y", dtypes::int64)}));
  ASSERT_TRUE(mixed);
  EXPECT_FALSE(mixed->status_ok());
  EXPECT_EQ(mixed->as_string(), "operand dtypes differ");
  auto boolean = check(UOp::make(Op::Add, dtypes::bool_, {p, p}));
  ASSERT_TRUE(boolean);
  EXPECT_EQ(boolean->as_string(), "no bool addition");
  EXPECT_FALSE(check(UOp::make(Op::Where, dtypes::int32, {p, x, x})).has_value());  // guard
  // a reason with placeholders shows the values of lets (and captures) bound before it
  EXPECT_TRUE(check(x.maximum(x))->status_ok());
  auto max = check(UOp::make(Op::Max, dtypes::int32, {x, var("y", dtypes::int64)}));
  ASSERT_TRUE(max);
  EXPECT_EQ(max->as_string(), "max of " + dtypes::int32.repr() + " and " + dtypes::int64.repr());
}

// require(cond, "why") in a rewrite or gradient rule stops the rewrite with the error "why",
// reported with the rule's location and name, in both executors; a guard before it still moves on.
TEST(RwFeatures, RequireInRewritesRaises) {
  const UOp small = UOp::variable("s", 0, 9), big = UOp::variable("b", 0, 500),
            neg = UOp::variable("n", -5, 9);
  expect_rewrite("t_require_rewrite", small + 0, small);
  expect_rewrite("t_require_rewrite", neg + 0, neg * 2);  // the guard fails first: next rule
  Both r = both("t_require_rewrite"), gr = both("t_require_grad");
  RewriteContext ctx;
  const UOp x = var("x", dtypes::int32), y = var("y", dtypes::int64), g = var("g", dtypes::int32);
  for (const RuleSetMatcher* m :
       {r.compiled, static_cast<const RuleSetMatcher*>(r.interpreted.get())}) {
    try {
      m->apply(big + 0, ctx, nullptr);
      ADD_FAILURE() << "no error";
    } catch (const RwError& e) {
      EXPECT_NE(
          std::string(e.what()).find("features.rw:95: error in rule t_require_rewrite.guarded: "
                                     "operand too large (at most 500, {limit} 99)"),
          std::string::npos)
          << e.what();
    }
  }
  for (const RuleSetMatcher* m :
       {gr.compiled, static_cast<const RuleSetMatcher*>(gr.interpreted.get())}) {
    EXPECT_EQ(m->apply(x * x, ctx, nullptr, &g)->items().size(), 2u);
    try {
      m->apply(UOp::make(Op::Mul, dtypes::int32, {x, y}), ctx, nullptr, &g);
      ADD_FAILURE() << "no error";
    } catch (const RwError& e) {
      EXPECT_NE(std::string(e.what()).find(
                    "error in rule t_require_grad.must_match: operand dtypes differ"),
                std::string::npos)
          << e.what();
    }
  }
}

// Rules written over several lines mean what they say on one line.
TEST(RwFeatures, MultiLineRules) {
  const UOp x = var("x"), a = UOp::variable("a", 5, 9), bb = UOp::variable("b", 0, 5);
  expect_rewrite("t_multiline", x + 0, x);
  expect_rewrite("t_multiline", x * 1, x);
  expect_rewrite("t_multiline", a.maximum(bb), a);
  const ResolvedSet* s = features()->find("t_multiline");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->rules.back().rule_index, 2);  // three rules, not two with a call `x(Mul|And)`
  // statistics and VIZ show the rule on one line
  EXPECT_EQ(s->rules.back().info.source, "Max(x, y) if x.vmin >= y.vmax let z = x => z");
}

// `name: pattern => result` names a rule `<set>.<name>` in both executors (a `for` rule adds its
// binding); unnamed rules keep `<set>#<position>`.
TEST(RwFeatures, NamedRules) {
  Both b = both("t_named");
  RewriteContext ctx;
  const UOp x = var("x");
  auto fired_name = [&](const UOp& u) {
    std::string names[2];
    const RuleSetMatcher* ms[2] = {b.compiled, b.interpreted.get()};
    for (int i = 0; i < 2; ++i) {
      const RuleInfo* fired = nullptr;
      EXPECT_TRUE(ms[i]->apply(u, ctx, &fired).has_value());
      if (fired) names[i] = fired->name;
    }
    EXPECT_EQ(names[0], names[1]);
    return names[0];
  };
  EXPECT_EQ(fired_name(x + 0), "t_named.add_zero");
  EXPECT_EQ(fired_name(x * 1), "t_named#1");
  EXPECT_EQ(fired_name(x.maximum(x)), "t_named.max_same");
  const UOp y = var("y", dtypes::int32);
  EXPECT_EQ(fired_name(UOp::make(Op::Or, dtypes::int32, {y, UOp::cint(0, dtypes::int32)})),
            "t_named.op_zero[op=Or]");
  const ResolvedSet* s = features()->find("t_named");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->rules[0].info.source, "Add[x, 0]                      => x");
}

TEST(RwFeatures, GradientRules) {
  Both b = both("t_grad");
  RewriteContext ctx;
  const UOp x = var("x", dtypes::float32), y = var("y", dtypes::float32),
            g = var("g", dtypes::float32);
  for (const RuleSetMatcher* m : {static_cast<const RuleSetMatcher*>(b.compiled),
                                  static_cast<const RuleSetMatcher*>(b.interpreted.get())}) {
    std::optional<Value> add = m->apply(x + y, ctx, nullptr, &g);
    ASSERT_TRUE(add.has_value());
    EXPECT_TRUE(add->items()[0].as_uop() == g && add->items()[1].as_uop() == g);
    std::optional<Value> mul = m->apply(x * y, ctx, nullptr, &g);
    ASSERT_TRUE(mul.has_value());
    EXPECT_TRUE(mul->items()[0].as_uop() == y * g);
    EXPECT_TRUE(mul->items()[1].as_uop() == x * g);
  }
}

TEST(RwFeatures, MatchesReportTheirRuleLocation) {
  Both b = both("t_guards");
  RewriteContext ctx;
  const UOp a = UOp::variable("a", 5, 9), bb = UOp::variable("b", 0, 5);
  for (const RuleSetMatcher* m : {static_cast<const RuleSetMatcher*>(b.compiled),
                                  static_cast<const RuleSetMatcher*>(b.interpreted.get())}) {
    const RuleInfo* fired = nullptr;
    ASSERT_TRUE(m->apply(a.maximum(bb), ctx, &fired).has_value());
    ASSERT_NE(fired, nullptr);
    EXPECT_NE(fired->file.find("features.rw"), std::string::npos);
    EXPECT_EQ(fired->line, 45);  // tests/dsl/features.rw
    EXPECT_NE(fired->source.find("x.vmin >= y.vmax"), std::string::npos);
  }
}
