// Exactness of the ranges the symbolic rules fold by (issue 22): a bound that saturates points
// outward only, so no comparison of two unbounded sides proves anything.
#include <gtest/gtest.h>

#include "ir/uop.h"

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

}  // namespace
