// The analyses of sums and products on UOp (ir/terms.cpp): split, const_factor, divides,
// divide_exact, pop_const, spine, with their exactness and depth limits; and the canonical order
// (ir/order.cpp).
#include <gtest/gtest.h>

#include "ir/uop.h"

using namespace tinyrw;

namespace {
UOp var(const char* n) { return UOp::variable(n, 0, 10); }
UOp c(i128 v) { return UOp::cint(v); }
}  // namespace

TEST(Terms, SplitFlattensNestedChainsLeftToRight) {
  const UOp a = var("a"), b = var("b"), d = var("d");
  EXPECT_EQ(((a + b) + (d + 3)).split(Op::Add), (std::vector<UOp>{a, b, d, c(3)}));
  EXPECT_EQ((a * b * 2).split(Op::Mul), (std::vector<UOp>{a, b, c(2)}));
  EXPECT_EQ((a * b).split(Op::Add), (std::vector<UOp>{a * b}));  // another op: one operand
  // iterative: a sum a million terms long
  UOp s = a;
  for (int k = 0; k < 1000000; ++k) s = s + b;
  EXPECT_EQ(s.split(Op::Add).size(), 1000001u);
}

TEST(Terms, ConstFactor) {
  const UOp a = var("a"), b = var("b");
  EXPECT_EQ(c(12).const_factor(), 12);
  EXPECT_EQ((a * 6).const_factor(), 6);
  EXPECT_EQ((c(-4) * a).const_factor(), -4);  // a constant on either side of a product
  EXPECT_EQ((a * 6 + b * 4 + 10).const_factor(), 2);
  EXPECT_EQ((a * 6 + b).const_factor(), 1);
  EXPECT_EQ(a.floordiv(c(4)).const_factor(), 1);
}

TEST(Terms, Divides) {
  const UOp a = var("a"), b = var("b");
  EXPECT_EQ((a * 6 + b * 4 + 2).divides(2), a * 3 + b * 2 + 1);
  EXPECT_EQ((a * 6).divides(1), a * 6);
  EXPECT_FALSE((a * 6 + b).divides(2));
  EXPECT_FALSE(c(7).divides(2));
  EXPECT_FALSE(a.divides(0));
  EXPECT_EQ(c(-6).divides(4 - 1), c(-2));
  // past kMaxDivideDepth nested ADDs the sum is left alone (no deep recursion)
  UOp deep = a * 2;
  for (int k = 0; k <= kMaxDivideDepth + 1; ++k) deep = b * 2 + deep;
  EXPECT_FALSE(deep.divides(2));
  UOp shallow = a * 2;
  for (int k = 0; k < kMaxDivideDepth - 1; ++k) shallow = b * 2 + shallow;
  EXPECT_TRUE(shallow.divides(2));
}

TEST(Terms, DivideExact) {
  const UOp a = var("a"), b = var("b");
  EXPECT_EQ((a * b * 6).divide_exact(b * 2), a * 3);
  EXPECT_EQ((a * b).divide_exact(a * b), c(1));
  EXPECT_EQ((b * 6).divide_exact(b * 6), c(1));
  EXPECT_EQ((b * 6).divide_exact(c(3)), b * 2);
  EXPECT_FALSE((a * 3).divide_exact(b));
  EXPECT_FALSE((a * 3).divide_exact(a * 2));
  EXPECT_FALSE((a * 3).divide_exact(c(0)));
  // a coefficient whose product leaves the exact 128-bit range: unknown, so no division
  const i128 big = static_cast<i128>(1) << 100;
  EXPECT_FALSE((a * big * big).divide_exact(a));
}

TEST(Terms, PopConst) {
  const UOp a = var("a");
  EXPECT_EQ((a + 5).pop_const(Op::Add), std::make_pair(a, Arg::integer(5)));
  EXPECT_EQ(a.pop_const(Op::Add), std::make_pair(a, Arg::integer(0)));
  EXPECT_EQ((a * 3).pop_const(Op::Mul), std::make_pair(a, Arg::integer(3)));
  EXPECT_EQ((a + 5).pop_const(Op::Mul), std::make_pair(a + 5, Arg::integer(1)));
  EXPECT_EQ(a.floormod(c(4)).pop_const(Op::FloorMod), std::make_pair(a, Arg::integer(4)));
  EXPECT_TRUE(a.pop_const(Op::FloorMod).second.is_none());
}

// spine(sep, limit): the walk down a chain of sep nodes, the one source that is sep each step
// (src(0) when neither is), ending at a node that is not sep or whose sources both are.
TEST(Terms, Spine) {
  const UOp a = var("a"), b = var("b"), d = var("d");
  const UOp s = (a * 2 + b) + 3;  // the ADD (a*2 + b) has no ADD source: the walk takes src(0)
  EXPECT_EQ(s.spine(Op::Add, 100), (std::vector<UOp>{s, a * 2 + b, a * 2}));
  const UOp r = c(3) + (b + (a + d));  // the ADD source on the right
  EXPECT_EQ(r.spine(Op::Add, 100), (std::vector<UOp>{r, b + (a + d), a + d, a}));
  // both sources ADDs: the walk goes down source 0, source 1 a term (a sum nested in a sum, as
  // index math builds c*256 + (y*2 + ky)*16 + (x*2 + kx))
  const UOp both = (a + b) + (b + d);
  EXPECT_EQ(both.spine(Op::Add, 100), (std::vector<UOp>{both, a + b, a}));
  EXPECT_EQ(a.spine(Op::Add, 100), (std::vector<UOp>{a}));  // another op: itself
  EXPECT_EQ((a * b * d).spine(Op::Mul, 100), (std::vector<UOp>{a * b * d, a * b, a}));
  // at most `limit` nodes, iteratively: a sum a million terms long
  UOp l = a;
  for (int k = 0; k < 1000000; ++k) l = l + b;
  EXPECT_EQ(l.spine(Op::Add, 1024).size(), 1024u);
  EXPECT_EQ(l.spine(Op::Add, 2000000).size(), 1000001u);
  EXPECT_EQ(l.spine(Op::Add, 0).size(), 0u);
}

// chain_terms(sep, limit): term k of the chain is the source of spine node k that is not node k+1;
// the last node is a term itself.
TEST(Terms, ChainTerms) {
  const UOp a = var("a"), b = var("b"), d = var("d");
  EXPECT_EQ(((a * 2 + b) + 3).chain_terms(Op::Add, 100), (std::vector<UOp>{c(3), b, a * 2}));
  EXPECT_EQ((c(3) + (b + (a + d))).chain_terms(Op::Add, 100), (std::vector<UOp>{c(3), b, d, a}));
  const UOp both = (a + b) + (b + d);
  EXPECT_EQ(both.chain_terms(Op::Add, 100), (std::vector<UOp>{b + d, b, a}));
  EXPECT_EQ((a + a).chain_terms(Op::Add, 100), (std::vector<UOp>{a, a}));  // equal sources
  UOp l = a;
  for (int k = 0; k < 2000; ++k) l = l + b;
  const std::vector<UOp> cut = l.chain_terms(Op::Add, 1024);
  ASSERT_EQ(cut.size(), 1024u);
  EXPECT_EQ(cut[0], b);
  EXPECT_EQ(cut.back(), l.spine(Op::Add, 1024).back());  // the rest of the sum as one term
}

// order: ALU ops by op, then the irreducible ops, constants last; then arg, dtype, sources.
TEST(Order, TotalStructuralOrder) {
  const UOp a = var("a"), b = var("b");
  EXPECT_TRUE((a + b).precedes(a));         // an ALU op before a variable
  EXPECT_TRUE(a.precedes(c(3)));            // a variable before a constant
  EXPECT_TRUE((a + b).precedes(a * b));     // ALU ops by op: ADD before MUL
  EXPECT_TRUE(a.precedes(b));               // variables by arg (the name first)
  EXPECT_TRUE(c(2).precedes(c(3)));         // constants by value
  EXPECT_TRUE((a + b).precedes(a + c(1)));  // then the sources, left to right
  EXPECT_FALSE(a.precedes(a));
  EXPECT_EQ(a.order(a), 0);
  // antisymmetric on distinct nodes
  const std::vector<UOp> us = {a, b, c(1), c(-1), a + b, b + a, a * b, a.floordiv(c(2)), a + c(1)};
  for (const UOp& x : us)
    for (const UOp& y : us)
      if (x != y) EXPECT_NE(x.precedes(y), y.precedes(x)) << x.repr() << " " << y.repr();
  // iterative: two sums 100,000 terms long that differ at the bottom
  UOp p = a, q = b;
  for (int k = 0; k < 100000; ++k) p = p + c(1), q = q + c(1);
  EXPECT_TRUE(p.precedes(q));
  EXPECT_GT(q.order(p), 0);
}

// Python's floor division and modulo, near the ends of the 128-bit range too (the modulo from the
// remainder: the quotient times the divisor may not fit there).
TEST(Int128, FloorDivisionAndModuloFollowPython) {
  for (i128 a : {i128{7}, i128{-7}, i128{6}, i128{-6}, i128{0}})
    for (i128 b : {i128{2}, i128{-2}, i128{3}, i128{-3}}) {
      EXPECT_EQ(floor_div(a, b) * b + floor_mod(a, b), a);
      EXPECT_TRUE(floor_mod(a, b) == 0 || (floor_mod(a, b) < 0) == (b < 0));
    }
  EXPECT_EQ(floor_mod(i128{-7}, i128{3}), 2);
  EXPECT_EQ(floor_mod(i128{7}, i128{-3}), -2);
  const i128 big = static_cast<i128>(~static_cast<unsigned __int128>(0) >> 1);  // 2^127 - 1
  EXPECT_EQ(floor_mod(big, i128{-2}), -1);  // floor_div(big, -2) * -2 does not fit
  EXPECT_EQ(floor_mod(-big, i128{2}), 1);
  EXPECT_EQ(floor_mod(big, i128{2}), 1);
}
