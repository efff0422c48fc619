// Exactness of the ranges the symbolic rules fold by (issue 22): a bound that saturates points
// outward only, so no comparison of two unbounded sides proves anything.
#include <gtest/gtest.h>

#include "ir/render.h"
#include "ir/uop.h"
#include "symbolic/simplify.h"
#include "tests/symbolic/eval.h"

using namespace tinyrw;

namespace {

const i128 kM = (static_cast<i128>(1) << 63) - 1;

TEST(ExactBounds, SaturatedProductsProveNoComparison) {
  const UOp x = UOp::variable("x", static_cast<i128>(1) << 62, kM);
  const UOp cube = x * x * x;               // beyond 128 bits
  EXPECT_FALSE(cube.vmin().is_infinite());  // a true lower bound, not "infinity"
  EXPECT_TRUE(cube.vmax().is_infinite());
  const UOp other = cube + 1;
  for (const UOp& cmp : {cube.ne(other), cube.lt(other), other.lt(cube), cube.eq(other)}) {
    EXPECT_EQ(cmp.vmin(), Num::of(0)) << cmp.repr();
    EXPECT_EQ(cmp.vmax(), Num::of(1)) << cmp.repr();
  }
  const UOp neg = UOp::variable("y", -kM, -(static_cast<i128>(1) << 62));
  const UOp ncube = neg * neg * neg;
  EXPECT_TRUE(ncube.vmin().is_infinite());
  EXPECT_FALSE(ncube.vmax().is_infinite());
  EXPECT_EQ(ncube.ne(ncube - 1).vmax(), Num::of(1));
}

TEST(ExactBounds, CastOfAWiderRangeWraps) {
  const UOp x = UOp::variable("x", -5, static_cast<i128>(1) << 40);
  const UOp c = x.cast(dtypes::int32);  // values beyond int32 wrap
  EXPECT_EQ(c.vmin(), Num::of(dtypes::int32.int_min()));
  EXPECT_EQ(c.vmax(), Num::of(dtypes::int32.int_max()));
  const UOp small = UOp::variable("s", -5, 9).cast(dtypes::int32);
  EXPECT_EQ(small.vmin(), Num::of(-5));
  EXPECT_EQ(small.vmax(), Num::of(9));
}

// A tensor int ALU node whose exact range leaves its dtype's wraps (tinyspec): its bounds are the
// dtype's, and it and every node computed from it may have wrapped. Index math never wraps.
TEST(ExactBounds, TensorIntArithmeticBeyondItsDtypeMayWrap) {
  const UOp x = UOp::variable("x", 2, 255).cast(dtypes::uint8);
  const UOp y = UOp::variable("y", 2, 255).cast(dtypes::uint8);
  const UOp p = x * y;  // exactly [4, 65025]
  EXPECT_EQ(p.vmin(), Num::of(0));
  EXPECT_EQ(p.vmax(), Num::of(255));
  EXPECT_TRUE(p.may_wrap());
  EXPECT_TRUE(p.floormod(y).may_wrap());
  EXPECT_TRUE(p.lt(x.const_like(static_cast<i128>(4))).may_wrap());
  EXPECT_FALSE(x.may_wrap());
  const UOp s = x.floordiv(y);  // within [0, 127]: no wrap
  EXPECT_FALSE(s.may_wrap());
  EXPECT_EQ(s.vmax(), Num::of(127));
  const UOp i = UOp::variable("i", 2, 255) * UOp::variable("j", 2, 255);
  EXPECT_EQ(i.vmax(), Num::of(65025));
  EXPECT_FALSE(i.may_wrap());
}

// The division, modulo and less-than rules of rules/symbolic.rw fold a tensor int expression only
// when it does not wrap: the same expression over a range whose products leave int32 stays (a
// fold would be wrong for the wrapped values). Both executors, side by side.
TEST(ExactBounds, DivmodAndLtRulesFoldOnlyWhatDoesNotWrap) {
  const Simplifier s(Simplifier::Mode::Differential);
  const UOp z = UOp::variable("z", 0, 3, dtypes::int32);
  const UOp y = UOp::variable("y", 1, 5, dtypes::int32);
  for (const bool wide : {false, true}) {
    const UOp x = UOp::variable("x", 0, wide ? (static_cast<i128>(1) << 30) : 1000, dtypes::int32);
    const std::vector<std::pair<UOp, std::string>> cases = {
        {(x * 4 + z).floordiv(8), "(x//2)"},                  // gcd_with_remainder
        {(x * 4 + z).floormod(8), "(x%2*4+z)"},               // gcd_with_remainder
        {(x * 4 + z).lt(8), "(x<2)"},                         // lt_folding
        {(x * 5 + z).floormod(4), "((x+z)%4)"},               // fold_quotient_remainder
        {(x * y * 4 + z * 2).floordiv(y * 2), "(x*2+z//y)"},  // divide_by_gcd, factor_remainder
        {(x * 6 + z).floormod(4), "((x*2+z)%4)"},             // fold_quotient_remainder
    };
    for (const auto& [e, folded] : cases) {
      const std::string out = render(s.simplify(e));
      if (wide) {
        EXPECT_TRUE(e.may_wrap()) << render(e);
        EXPECT_NE(out, folded) << render(e);
      } else {
        EXPECT_EQ(out, folded) << render(e);
      }
    }
  }
}

// The digit tests' variables and operators: x in [-200, 1000] (negative values too), y in [0, 10].
UOp digit_x() { return UOp::variable("x", -200, 1000); }
UOp digit_y() { return UOp::variable("y", 0, 10); }
UOp mod(const UOp& a, int64_t c) { return a.floormod(UOp::cint(c)); }
UOp div(const UOp& a, int64_t c) { return a.floordiv(UOp::cint(c)); }

// Each case simplifies to its render, the compiled and the interpreted rules agreeing, and keeps
// its value at every point of the variables' box: x in steps of x_step, y at 0, 5 and 10.
void expect_folds(const std::vector<std::pair<UOp, std::string>>& cases, int x_step) {
  const Simplifier s(Simplifier::Mode::Differential);
  for (const auto& [e, folded] : cases) {
    const UOp out = s.simplify(e);
    EXPECT_EQ(render(out), folded) << render(e);
    for (i128 xv = -200; xv <= 1000; xv += x_step)
      for (i128 yv = 0; yv <= 10; yv += 5)
        EXPECT_EQ(test::py_eval(out, {{"x", xv}, {"y", yv}}),
                  test::py_eval(e, {{"x", xv}, {"y", yv}}))
            << render(e) << " -> " << render(out) << " at x=" << static_cast<int64_t>(xv);
  }
}

// x%c + c*((x//c)%m) == x%(c*m) under floor semantics: digits taken apart and put back together
// fold, scaled or not, anywhere in a sum (tinygrad's renders, from its simplify() on 2026-12-04,
// in the comments). Values are checked at every point, negative x included.
TEST(DigitRecombination, FoldsAsTinygradWhereTheProductFits) {
  const UOp x = digit_x(), y = digit_y();
  expect_folds(
      {
          {mod(div(x, 4), 3) * 4 + mod(x, 4), "(x%12)"},                            // (x%12)
          {mod(x, 4) + mod(div(x, 4), 3) * 4 + y, "(x%12+y)"},                      // (y+x%12)
          {mod(div(x, 4), 3) * 8 + mod(x, 4) * 2, "(x%12*2)"},                      // (x%12*2)
          {mod(x, 4) + mod(div(x, 4), 3) * 4 + mod(div(x, 12), 5) * 12, "(x%60)"},  // (x%60)
          {y * 3 + mod(div(x, 4), 3) * -8 + y + mod(x, 4) * -2, "(x%12*-2+y*4)"},   // (y*4+x%12*-2)
      },
      7);
  const Simplifier s(Simplifier::Mode::Differential);
  // not a pair: another divisor, another numerator, a scale that is not k*c
  for (const UOp& e : {mod(div(x, 4), 3) * 4 + mod(x, 5), mod(div(x, 4), 3) * 4 + mod(y, 4),
                       mod(div(x, 4), 3) * 3 + mod(x, 4)})
    EXPECT_EQ(render(s.simplify(e)).find("%12"), std::string::npos) << render(e);
  // int32: c*m = 2**32 does not fit, so the pair stays (w < 0 keeps (w//c)%m from folding alone)
  const UOp w = UOp::variable("w", -(1 << 30), 1 << 30, dtypes::int32);
  const UOp big = UOp::cint(65536, dtypes::int32);
  const UOp halves = w.floordiv(big).floormod(big) * big + w.floormod(big);
  EXPECT_NE(render(s.simplify(halves)).find("65536"), std::string::npos);
}

// tinygrad's fold_add_divmod_recombine: the quotient partner of k*(b%c) may carry b//c merged
// into a larger division (also one taken in two steps, the first folded: x*7//6//7 is x//6),
// shifted by a constant, or taken of b modulo a multiple of c. Also the folds that bring such terms
// together: (x%(c*n))//c == (x//c)%n, like terms apart in a sum, nested wheres with a common
// branch.
TEST(DigitRecombination, QuotientsCongruentToTheBase) {
  const UOp x = digit_x(), y = digit_y();
  expect_folds(
      {
          {div(mod(x, 12), 4), "(x//4%3)"},
          {div(mod(x, 8), 4) * 4 + mod(x, 4), "(x%8)"},
          {div(mod(x, 30), 6) * 6 + mod(x, 6), "(x%30)"},
          {mod(div(div(x, 2), 7), 7) * 7 + mod(div(x, 2), 7), "(x//2%49)"},
          {mod(div(x, 4) + 1, 4) * 4 + mod(x, 4), "((x+4)%16)"},
          {mod(div(x, 4) + 1, 4) * 12 + mod(x, 4) * 3 + y, "((x+4)%16*3+y)"},
          {div(x, 6) * 7 + mod(div(x * 7, 6), 7), "(x*7//6)"},
          {div(div(y, 6) + x, 4) * 6 + mod(div(x * 6 + y, 4), 6), "((x*6+y)//4)"},
          {x * 2 + y + x, "(x*3+y)"},
          {x * 2 + y * 3 + x * -2, "(y*3)"},
          {x.lt(5).where(y, y.lt(3).where(y, x)), "(y if (x<5)|(y<3) else x)"},
          // a pair apart across a sum nested in the sum (an index c*256 + y*32 + (x*2 + kx)
          // whose loops merged): the nested sum is one term of the chain
          {mod(x, 8) * 32 + y * 16 + (y * y + y) + div(x, 8) * 256, "(y*y+y*17+x*32)"},
          {(mod(x, 8) * 32 + y) + ((y * y + y) + div(x, 8) * 256), "(y*y+y*2+x*32)"},
      },
      3);
  const Simplifier s(Simplifier::Mode::Differential);
  // not a pair: the quotient of another number, or a modulus the divisor does not divide
  for (const UOp& e : {mod(div(x, 4) + 1, 4) * 4 + mod(y, 4), div(mod(x, 30), 4) * 4 + mod(x, 4),
                       mod(div(div(x, 3), 7), 7) * 7 + mod(div(x, 2), 7)}) {
    const std::string out = render(s.simplify(e));
    EXPECT_EQ(out.find("%16"), std::string::npos) << render(e) << " -> " << out;
    EXPECT_EQ(out.find("%30)"), std::string::npos) << render(e) << " -> " << out;
    EXPECT_EQ(out.find("%49"), std::string::npos) << render(e) << " -> " << out;
  }
}

// The digits of x under a divisor c that is a variable (c in [1, 9], or in [-9, -1]: the
// folds hold for either sign under floor semantics), a quotient congruent to its partner's base,
// x - x%c, and two sides compared through their simplified difference. Values are checked at
// every point, negative x included.
TEST(DigitRecombination, OverAVariableDivisorAndThroughADifference) {
  const Simplifier s(Simplifier::Mode::Differential);
  const UOp x = digit_x(), y = digit_y(), a = UOp::variable("a", 0, 100);
  for (const bool negative : {false, true}) {
    const UOp c = negative ? UOp::variable("c", -9, -1) : UOp::variable("c", 1, 9);
    const std::vector<std::pair<UOp, std::string>> cases = {
        {x.floordiv(c).floormod(UOp::cint(3)) * c + x.floormod(c), "(x%(c*3))"},
        {x.floordiv(c) * c + x.floormod(c) + y, "(x+y)"},
        {x.floormod(c).floordiv(c), "0"},
        {x.floormod(c * 3).floormod(c), "(x%c)"},
        {x.floormod(c * 3).floordiv(c), "(x//c%3)"},
        {div(x * 8, 7) * 7 + mod(x, 7) + y, "(x*8+y)"},
        {x - mod(x, 6), "(x//6*6)"},
        {(x + y + 3).maximum(x), "(x+y+3)"},
        {mod(a, 6).lt(a + y + 3), "True"},
    };
    for (const auto& [e, folded] : cases) {
      const UOp out = s.simplify(e);
      EXPECT_EQ(render(out), folded) << render(e) << (negative ? " (c < 0)" : "");
      for (i128 xv = -200; xv <= 1000; xv += 13)
        for (i128 cv = 1; cv <= 9; cv += 4)
          for (i128 yv = 0; yv <= 10; yv += 5) {
            const std::map<std::string, i128> env = {
                {"x", xv}, {"y", yv}, {"a", (xv + 200) % 101}, {"c", negative ? -cv : cv}};
            EXPECT_EQ(test::py_eval(out, env), test::py_eval(e, env))
                << render(e) << " -> " << render(out) << " at x=" << static_cast<int64_t>(xv);
          }
    }
  }
  // a modulo by a positive divisor is below it, and no larger than a non-negative dividend
  const UOp c = UOp::variable("c", 1, 9);
  EXPECT_EQ(render(s.simplify(x.floormod(c).lt(c))), "True");
  EXPECT_EQ(render(s.simplify(UOp::cint(1).floormod(c).floordiv(UOp::cint(4)))), "0");
  // an unsigned difference has no sign: max and < of unsigned sides stay unless bounds decide
  const UOp u = UOp::variable("u", 0, 100, dtypes::uint32);
  const UOp v = u.floordiv(UOp::cint(8, dtypes::uint32));
  const UOp w = (u + UOp::cint(8, dtypes::uint32)).floordiv(UOp::cint(9, dtypes::uint32));
  EXPECT_NE(render(s.simplify(w.maximum(v))), render(w));
  EXPECT_NE(render(s.simplify(v.lt(u.floormod(UOp::cint(5, dtypes::uint32))))), "False");
}

// max, <, // and % decided by bounds of x - y over both sides' terms: like terms cancel, a
// subtracted division or modulo of a dividend >= 0 is at most the dividend (a modulo also its
// divisor less one), and a max or where side is taken by its operands. Results checked on a grid.
// Each expression simplifies to its text and keeps its value on a grid of a, b, c, d and x.
void expect_simplified_on_grid(const Simplifier& s,
                               const std::vector<std::pair<UOp, std::string>>& cases) {
  for (const auto& [e, folded] : cases) {
    const UOp out = s.simplify(e);
    EXPECT_EQ(render(out), folded) << render(e);
    for (i128 av = 0; av <= 100; av += 3)
      for (i128 bv = 0; bv <= 50; bv += 7)
        for (i128 cv = 1; cv <= 9; ++cv)
          for (i128 dv = 0; dv <= 20; dv += 4) {
            const std::map<std::string, i128> env = {
                {"a", av}, {"b", bv}, {"c", cv}, {"d", dv}, {"x", (av % 21) - 10}};
            EXPECT_EQ(test::py_eval(out, env), test::py_eval(e, env))
                << render(e) << " -> " << render(out);
          }
  }
}

TEST(Bounds, ComparisonsThroughTheTermsOfBothSides) {
  const Simplifier s(Simplifier::Mode::Differential);
  const UOp a = UOp::variable("a", 0, 100), b = UOp::variable("b", 0, 50);
  const UOp c = UOp::variable("c", 1, 9), d = UOp::variable("d", 0, 20);
  const UOp x = UOp::variable("x", -10, 10);
  const std::vector<std::pair<UOp, std::string>> cases = {
      {(a + b + c * 2).maximum(a + b + c), "(a+b+c*2)"},
      {(a * 3 + b).maximum(a + b), "(a*3+b)"},
      {div(d, 5).maximum(d), "d"},
      {b.floordiv(c).maximum(b), "b"},
      {mod(div(a, 6), 2).maximum(a), "a"},
      {a.maximum(d).maximum(mod(a, 6)), "max(a, d)"},
      {(a * 2 + c * 2).maximum(UOp::cint(15).floormod(c)), "(a*2+c*2)"},
      {(a + c).lt(UOp::cint(8).floormod(c)), "False"},
      {(div(a, 2) + div(b, 4) + c).lt(a + b + 14), "True"},
      {(div(a, 4) + b).lt(mod(div(b, 8), 2)), "False"},
      {d.lt(a).where(b, UOp::cint(20)).lt(b + 21), "True"},
      // where(y < x, x, y) is max(x, y)
      {c.lt(a).where(a, c), "max(a, c)"},
      {UOp::cint(0).lt(b).where(b, UOp::cint(0)), "b"},
      // 0 <= x < y: x // y is 0, x % y is x (m*(v//m) <= v bounds a subtracted quotient)
      {div(c, 4).floordiv(c), "0"},
      {div(d.floormod(c), 4).floordiv(c), "0"},
      {div(c, 6).floormod(c), "(c//6)"},
      // not decided: each needs a bound the terms do not give, or is false somewhere
      {(a + b + d).maximum(div(a, 8) + c), "max(a+b+d, a//8+c)"},
      {(a + d + 36).maximum(a.maximum(b)), "max(a+d+36, max(a, b))"},
      {div(x, 5).maximum(x), "max(x//5, x)"},
      {div(d, 4).floordiv(c), "(d//4//c)"},
      {c.lt(a).where(a, b), "(a if c<a else b)"},
      {(x + 3).lt(mod(x + 10, 4)), "(x+3<(x+2)%4)"},
  };
  expect_simplified_on_grid(s, cases);
}

// (s//d)%m sees s modulo d*m: positive coefficients and constants of at least d*m are reduced
// (tinygrad splits the division first: (a*7+b)//2 is a*3+(a+b)//2). Floor semantics make it hold
// for negative terms too (x); a coefficient below d*m or a negative one stays.
TEST(Bounds, AQuotientModuloSeesTheSumModuloDTimesM) {
  const Simplifier s(Simplifier::Mode::Differential);
  const UOp a = UOp::variable("a", 0, 100), b = UOp::variable("b", 0, 50);
  const UOp c = UOp::variable("c", 1, 9), x = UOp::variable("x", -10, 10);
  const std::vector<std::pair<UOp, std::string>> cases = {
      {mod(div(a * 7 + b, 2), 3), "((a+b)//2%3)"},
      {mod(div(a * 13 + b, 4), 3), "((a+b)//4%3)"},
      {mod(div(a * 7 + b + c, 2), 3), "((a+b+c)//2%3)"},
      {mod(div(x * 7 + b, 2), 3), "((b+x)//2%3)"},
      {mod(div(a * 12 + b * 5, 2), 3), "(b*5//2%3)"},
      // stays: coefficients below d*m, or negative
      {mod(div(a * 5 + b, 2), 3), "((a*5+b)//2%3)"},
      {mod(div(a * -7 + b, 2), 3), "((a*-7+b)//2%3)"},
  };
  expect_simplified_on_grid(s, cases);
}

}  // namespace
