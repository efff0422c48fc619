#include <gtest/gtest.h>

#include <unordered_map>

#include "ir/graph.h"
#include "ir/rewrite.h"

using namespace tinyrw;

namespace {

using Subst = std::unordered_map<UOp, UOp>;

// tinygrad's _substitute: a matcher that replaces nodes found in the context map.
LambdaMatcher substitute_matcher() {
  LambdaMatcher m("substitute");
  m.add({}, [](RewriteContext& ctx, const UOp& x) {
    const Subst& map = ctx.as<const Subst>();
    auto it = map.find(x);
    return it == map.end() ? UOp() : it->second;
  });
  return m;
}

UOp var(const char* name, DType d = dtypes::index) { return UOp::variable(name, 0, 10, d); }
UOp sin(const UOp& x) { return UOp::make(Op::Sin, x.dtype(), {x}); }
UOp sqrt(const UOp& x) { return UOp::make(Op::Sqrt, x.dtype(), {x}); }

// Records what a matcher saw: a CONST's value or the op name, with a phase label.
struct Visit {
  std::vector<std::string> seen;
};
std::string label(const UOp& x) {
  return x.op() == Op::Const ? x.arg().repr() : std::string(op_name(x.op()));
}
LambdaMatcher tracker(const std::string& phase) {
  LambdaMatcher m(phase);
  m.add({}, [phase](RewriteContext& ctx, const UOp& x) {
    ctx.as<Visit>().seen.push_back(label(x) + (phase.empty() ? "" : ":" + phase));
    return UOp();
  });
  return m;
}

// (`fired`, when given, counts its rewrites)
LambdaMatcher ping_pong(int* fired = nullptr) {
  LambdaMatcher m("ping_pong");
  m.add({Op::Const}, [fired](RewriteContext&, const UOp& x) {
    if (fired) ++*fired;
    if (x.arg() == Arg::integer(3)) return x.with_arg(Arg::integer(4));
    if (x.arg() == Arg::integer(4)) return x.with_arg(Arg::integer(3));
    return UOp();
  });
  return m;
}

}  // namespace

// ---- greedy (fixed point) rewrites
// ----------------------------------------------------------------

TEST(GraphRewrite, PostOrderRewritesChildrenFirstAndResultsAgain) {
  // x+0 -> x, and CONST folding of Add: results are rewritten again until nothing matches.
  LambdaMatcher m("fold");
  m.add({Op::Add}, [](RewriteContext&, const UOp& x) {
    if (x.src(1).is_const() && x.src(1).arg() == Arg::integer(0)) return x.src(0);
    if (x.src(0).is_const() && x.src(1).is_const())
      return x.const_like(x.src(0).arg().as_int() + x.src(1).arg().as_int());
    return UOp();
  });
  const UOp v = var("v");
  const UOp e = (UOp::cint(1) + UOp::cint(2)) +
                (v + UOp::cint(0)) * (UOp::cint(3) + UOp::cint(-3) + UOp::cint(0));
  const UOp out = graph_rewrite(e, &m);
  EXPECT_TRUE(out == UOp::cint(3) + v * UOp::cint(0));
}

TEST(GraphRewrite, FirstRuleWinsAndSameNodeIsNoMatch) {
  LambdaMatcher m("order");
  int second_called = 0;
  m.add({Op::Const}, [](RewriteContext&, const UOp& x) { return x; });  // same node: no match
  m.add({Op::Const}, [](RewriteContext&, const UOp& x) {
    return x.arg() == Arg::integer(1) ? x.const_like(static_cast<i128>(2)) : UOp();
  });
  m.add({Op::Const}, [&](RewriteContext&, const UOp& x) {
    ++second_called;
    return x.arg() == Arg::integer(1) ? x.const_like(static_cast<i128>(100)) : UOp();
  });
  EXPECT_TRUE(graph_rewrite(UOp::cint(1), &m) == UOp::cint(2));
  EXPECT_EQ(second_called, 1);  // tried on const 2 (after the rewrite), never won on const 1
}

TEST(GraphRewrite, BottomUpRunsBeforeDescending) {
  Visit v;
  LambdaMatcher pm = tracker("");
  graph_rewrite(UOp::cint(1) + UOp::cint(2), &pm, {.ctx = &v, .bottom_up = true});
  EXPECT_EQ(v.seen, (std::vector<std::string>{"Add", "1", "2"}));
  v.seen.clear();
  graph_rewrite(UOp::cint(1) + UOp::cint(2), &pm, {.ctx = &v});
  EXPECT_EQ(v.seen, (std::vector<std::string>{"1", "2", "Add"}));
}

TEST(GraphRewrite, BidirectionalVisitOrder) {
  Visit v;
  LambdaMatcher pm = tracker("pm"), bpm = tracker("bpm");
  graph_rewrite(UOp::cint(1) + UOp::cint(2), &pm, {.ctx = &v, .bpm = &bpm});
  EXPECT_EQ(v.seen,
            (std::vector<std::string>{"Add:bpm", "1:bpm", "1:pm", "2:bpm", "2:pm", "Add:pm"}));
}

TEST(GraphRewrite, GreedySubstituteEntersReplacements) {
  const UOp a = var("a"), b = var("b"), c = var("c"), d = var("d");
  Subst map{{a, b + c}, {b, d}};
  LambdaMatcher m = substitute_matcher();
  EXPECT_TRUE(graph_rewrite(a + 4, &m, {.ctx = &map, .bottom_up = true}) == (d + c) + 4);
  EXPECT_TRUE(substitute(a + 4, map) == (d + c) + 4);
  EXPECT_TRUE(substitute(a + 4, map, /*walk=*/true) == (b + c) + 4);
}

TEST(GraphRewrite, ContextReachesRules) {
  struct Counter {
    int n = 0;
  } counter;
  LambdaMatcher m("count");
  m.add({Op::Const}, [](RewriteContext& ctx, const UOp&) {
    ++ctx.as<Counter>().n;
    return UOp();
  });
  graph_rewrite((UOp::cint(1) + UOp::cint(2)) * UOp::cint(1), &m, {.ctx = &counter});
  EXPECT_EQ(counter.n, 2);  // each distinct node is visited once
}

// ---- infinite loops
// --------------------------------------------------------------------------------

// Promptly: within a bounded number of rewrites (counted, not timed: a loaded machine must not
// fail it)
TEST(GraphRewrite, PingPongIsAnInfiniteLoopPromptly) {
  for (bool bottom_up : {false, true}) {
    int fired = 0;
    LambdaMatcher pm = ping_pong(&fired);
    try {
      graph_rewrite(UOp::cint(3, dtypes::int32), &pm, {.bottom_up = bottom_up});
      FAIL() << "expected an infinite loop error";
    } catch (const RewriteError& e) {
      EXPECT_NE(std::string(e.what()).find("infinite loop"), std::string::npos) << e.what();
    }
    EXPECT_LT(fired, 100000);
  }
}

TEST(GraphRewrite, RunawayGrowthIsAnInfiniteLoop) {
  LambdaMatcher grow("grow");  // every const k becomes k+1: never a fixed point, never a cycle
  int fired = 0;
  grow.add({Op::Const}, [&fired](RewriteContext&, const UOp& x) {
    ++fired;
    return x.const_like(x.arg().as_int() + 1);
  });
  EXPECT_THROW(graph_rewrite(UOp::cint(0), &grow), RewriteError);
  EXPECT_LT(fired, 1000000);  // stopped after a bounded number of rewrites
}

TEST(GraphRewrite, ReplacementContainingItselfIsAnInfiniteLoop) {
  const UOp a = var("a", dtypes::float32);
  Subst map{{sin(a), sqrt(sin(a))}};
  LambdaMatcher m = substitute_matcher();
  EXPECT_THROW(graph_rewrite(sin(a) + 4, &m, {.ctx = &map}), RewriteError);
}

// ---- walk mode (seed 004's TestWalkRewrite)
// --------------------------------------------------------

TEST(WalkRewrite, TopDownSimpleSubstitute) {
  const UOp a = var("a"), b = var("b");
  Subst map{{a, b}};
  LambdaMatcher m = substitute_matcher();
  EXPECT_TRUE(graph_rewrite(a + 4, &m, {.ctx = &map, .walk = true}) == b + 4);
}

TEST(WalkRewrite, TopDownDoesNotTraverseIntoReplacement) {
  const UOp a = var("a"), b = var("b"), c = var("c"), d = var("d");
  Subst map{{a, b + c}, {b, d}};
  LambdaMatcher m = substitute_matcher();
  EXPECT_TRUE(graph_rewrite(a + 4, &m, {.ctx = &map, .walk = true}) == (b + c) + 4);
  EXPECT_TRUE(graph_rewrite(a + 4, &m, {.ctx = &map, .bottom_up = true}) == (d + c) + 4);
}

TEST(WalkRewrite, TopDownNoFixedPoint) {
  LambdaMatcher pm = ping_pong();
  const UOp three = UOp::cint(3, dtypes::int32);
  EXPECT_THROW(graph_rewrite(three, &pm, {.bottom_up = true}), RewriteError);
  EXPECT_TRUE(graph_rewrite(three, &pm, {.walk = true}) == UOp::cint(4, dtypes::int32));
}

TEST(WalkRewrite, TopDownRewritesChildrenAndDiamonds) {
  const UOp a = var("a"), b = var("b"), c = var("c");
  LambdaMatcher m = substitute_matcher();
  Subst map{{a, c}, {b, c}};
  EXPECT_TRUE(graph_rewrite((a + 4) + (b + 5), &m, {.ctx = &map, .walk = true}) ==
              (c + 4) + (c + 5));
  Subst map2{{a, b}};
  EXPECT_TRUE(graph_rewrite((a + 4) + (a + 5), &m, {.ctx = &map2, .walk = true}) ==
              (b + 4) + (b + 5));
}

TEST(WalkRewrite, TopDownChildrenRewrittenBeforeParent) {
  const UOp a = var("a", dtypes::float32);
  const UOp n1 = sin(a);
  Subst map{{sin(a), sqrt(a)}, {sin(n1), sqrt(n1)}};
  LambdaMatcher m = substitute_matcher();
  EXPECT_TRUE(graph_rewrite(sin(n1), &m, {.ctx = &map, .walk = true}) == sin(sqrt(a)));
}

TEST(WalkRewrite, TopDownSelfReferentialReplacement) {
  const UOp a = var("a", dtypes::float32);
  Subst map{{sin(a), sqrt(sin(a))}};
  LambdaMatcher m = substitute_matcher();
  EXPECT_TRUE(graph_rewrite(sin(a) + 4, &m, {.ctx = &map, .walk = true}) == sqrt(sin(a)) + 4);
}

TEST(WalkRewrite, TopDownVisitOrder) {
  Visit v;
  LambdaMatcher pm = tracker("");
  graph_rewrite(UOp::cint(1, dtypes::int32) + UOp::cint(2, dtypes::int32), &pm,
                {.ctx = &v, .walk = true});
  EXPECT_EQ(v.seen, (std::vector<std::string>{"1", "2", "Add"}));
}

TEST(WalkRewrite, BottomUpSubstituteAndNoReentry) {
  const UOp a = var("a"), b = var("b"), c = var("c"), d = var("d");
  LambdaMatcher m = substitute_matcher();
  Subst map{{a, b}};
  EXPECT_TRUE(graph_rewrite(a + 4, &m, {.ctx = &map, .bottom_up = true, .walk = true}) == b + 4);
  Subst map2{{a, b + c}, {b, d}};
  EXPECT_TRUE(graph_rewrite(a + 4, &m, {.ctx = &map2, .bottom_up = true, .walk = true}) ==
              (b + c) + 4);
}

TEST(WalkRewrite, BottomUpParentMatchSkipsChildren) {
  const UOp a = var("a", dtypes::float32);
  const UOp n1 = sin(a);
  Subst map{{sin(a), sqrt(a)}, {sin(n1), sqrt(n1)}};
  LambdaMatcher m = substitute_matcher();
  EXPECT_TRUE(graph_rewrite(sin(n1), &m, {.ctx = &map, .bottom_up = true, .walk = true}) ==
              sqrt(sin(a)));
}

TEST(WalkRewrite, BottomUpNoFixedPointAndVisitOrder) {
  LambdaMatcher pm = ping_pong();
  EXPECT_TRUE(graph_rewrite(UOp::cint(3, dtypes::int32), &pm, {.bottom_up = true, .walk = true}) ==
              UOp::cint(4, dtypes::int32));
  Visit v;
  LambdaMatcher t = tracker("");
  graph_rewrite(UOp::cint(1, dtypes::int32) + UOp::cint(2, dtypes::int32), &t,
                {.ctx = &v, .bottom_up = true, .walk = true});
  EXPECT_EQ(v.seen, (std::vector<std::string>{"Add", "1", "2"}));
}

TEST(WalkRewrite, BottomUpUnmatchedFallsThroughToChildren) {
  const UOp a = var("a"), b = var("b"), c = var("c");
  Subst map{{a, c}, {b, c}};
  LambdaMatcher m = substitute_matcher();
  EXPECT_TRUE(graph_rewrite((a + 4) + (b + 5), &m,
                            {.ctx = &map, .bottom_up = true, .walk = true}) == (c + 4) + (c + 5));
}

TEST(WalkRewrite, BidirectionalVisitOrder) {
  Visit v;
  LambdaMatcher pm = tracker("pm"), bpm = tracker("bpm");
  graph_rewrite(UOp::cint(1, dtypes::int32) + UOp::cint(2, dtypes::int32), &pm,
                {.ctx = &v, .bpm = &bpm, .walk = true});
  EXPECT_EQ(v.seen,
            (std::vector<std::string>{"Add:bpm", "1:bpm", "1:pm", "2:bpm", "2:pm", "Add:pm"}));
}

TEST(WalkRewrite, BidirectionalBpmShortCircuits) {
  Visit v;
  LambdaMatcher pm = tracker("pm");
  LambdaMatcher bpm("bpm");
  bpm.add({}, [](RewriteContext& ctx, const UOp& x) {
    ctx.as<Visit>().seen.push_back(label(x) + ":bpm");
    if (x.op() == Op::Const && x.arg() == Arg::integer(1)) return x.with_arg(Arg::integer(10));
    return UOp();
  });
  const UOp one = UOp::cint(1, dtypes::int32), two = UOp::cint(2, dtypes::int32);
  const UOp out = graph_rewrite(one + two, &pm, {.ctx = &v, .bpm = &bpm, .walk = true});
  auto has = [&](const std::string& s) {
    return std::find(v.seen.begin(), v.seen.end(), s) != v.seen.end();
  };
  EXPECT_FALSE(has("1:pm"));
  EXPECT_TRUE(has("2:pm"));
  EXPECT_TRUE(out == UOp::cint(10, dtypes::int32) + two);
}

// ---- scale, re-entrancy, calls
// ----------------------------------------------------------------------

TEST(GraphRewrite, MillionNodeChainWithoutStackOverflow) {
  UOp x = var("chain");
  for (int i = 0; i < 1000000; ++i) x = x + UOp::cint(1);
  LambdaMatcher bump("bump");  // const 1 -> const 2 everywhere
  bump.add({Op::Const}, [](RewriteContext&, const UOp& c) {
    return c.arg() == Arg::integer(1) ? c.const_like(static_cast<i128>(2)) : UOp();
  });
  const UOp out = graph_rewrite(x, &bump);
  EXPECT_EQ(out.vmax().i, 10 + 2000000);
  LambdaMatcher none("none");
  none.add({}, [](RewriteContext&, const UOp&) { return UOp(); });
  EXPECT_TRUE(graph_rewrite(out, &none, {.walk = true}) == out);
  EXPECT_TRUE(graph_rewrite(out, &none, {.bottom_up = true}) == out);
}

TEST(GraphRewrite, RulesMayCallGraphRewrite) {
  // An outer rule rewrites each Mul by running an inner graph_rewrite on its first source.
  LambdaMatcher inner("inner");
  inner.add({Op::Const}, [](RewriteContext& ctx, const UOp& c) {
    EXPECT_EQ(ctx.depth, 1);
    return c.arg() == Arg::integer(1) ? c.const_like(static_cast<i128>(7)) : UOp();
  });
  LambdaMatcher outer("outer");
  outer.add({Op::Mul}, [&inner](RewriteContext& ctx, const UOp& m) {
    EXPECT_EQ(ctx.depth, 0);
    return graph_rewrite(m.src(0), &inner) + m.src(1);
  });
  const UOp v = var("v");
  EXPECT_TRUE(graph_rewrite((UOp::cint(1) + v) * v, &outer) == (UOp::cint(7) + v) + v);
}

TEST(GraphRewrite, EnterCallsSwitch) {
  const UOp a = var("a"), b = var("b");
  const UOp body = UOp::sink(std::vector<UOp>{a + 1});
  const UOp call = UOp::make(Op::Call, dtypes::void_, {body, a});
  Subst map{{a, b}};
  LambdaMatcher m = substitute_matcher();
  const UOp entered = graph_rewrite(call, &m, {.ctx = &map});
  EXPECT_TRUE(entered ==
              UOp::make(Op::Call, dtypes::void_, {UOp::sink(std::vector<UOp>{b + 1}), b}));
  const UOp kept = graph_rewrite(call, &m, {.ctx = &map, .enter_calls = false});
  EXPECT_TRUE(kept == UOp::make(Op::Call, dtypes::void_, {body, b}));
  EXPECT_EQ(toposort(call, nullptr, false).size(), 2u);  // a and the CALL
}

TEST(Toposort, SourcesBeforeUsersAndGate) {
  const UOp a = var("a"), b = var("b");
  const UOp e = (a + b) * (a + 1);
  const auto order = toposort(e);
  ASSERT_EQ(order.size(), 6u);
  EXPECT_TRUE(order.front() == a);
  EXPECT_TRUE(order.back() == e);
  for (size_t i = 0; i < order.size(); ++i)
    for (const UOp& s : order[i].src()) {
      auto pos = std::find(order.begin(), order.end(), s) - order.begin();
      EXPECT_LT(static_cast<size_t>(pos), i);
    }
  const auto gated = toposort(e, [](const UOp& u) { return u.op() != Op::Add; });
  EXPECT_EQ(gated.size(), 3u);  // e and its two Adds, not below them
}

// The outermost walk numbers nodes in the nodes themselves; walks nested in it (an `enter`
// callback, a rule) use their own map. Nested walks over the same nodes must not disturb the
// outer walk's numbering, nor the outer one theirs.
TEST(Toposort, NestedWalksOverTheSameNodesKeepTheirOwnMarks) {
  const UOp a = var("a"), b = var("b");
  const UOp e = ((a + b) * (a + 1) + (b * 2)) * (a + b);
  const std::vector<UOp> plain = toposort(e);
  size_t inner_walks = 0;
  const std::vector<UOp> nested = toposort(e, [&](const UOp& u) {
    // a full walk of the whole graph from inside the outer one, at every node
    EXPECT_EQ(toposort(e).size(), plain.size());
    ++inner_walks;
    return true;
  });
  EXPECT_EQ(inner_walks, plain.size());
  EXPECT_EQ(nested, plain);

  // A rule that walks the graph it is part of, during an outer graph_rewrite of that graph.
  LambdaMatcher count_then_bump("count_then_bump");
  size_t seen = 0;
  count_then_bump.add({Op::Const}, [&](RewriteContext&, const UOp& c) {
    seen = std::max(seen, toposort(e).size());
    return c.arg() == Arg::integer(1) ? c.const_like(static_cast<i128>(5)) : UOp();
  });
  const UOp out = graph_rewrite(e, &count_then_bump);
  EXPECT_EQ(seen, plain.size());
  EXPECT_TRUE(out == ((a + b) * (a + 5) + (b * 2)) * (a + b));
  // After the walks, a fresh outermost walk sees every node again.
  EXPECT_EQ(toposort(e), plain);
}
