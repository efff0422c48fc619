// Arg is one NaN-boxed word: these check each kind's value round trip, where inline ints end and
// heap ints begin, and that no double can be mistaken for another kind.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

#include "ir/arg.h"

using namespace tinyrw;

TEST(Arg, IsOneWord) { EXPECT_EQ(sizeof(Arg), 8u); }

TEST(Arg, IntsRoundTripAcrossTheInlineBoundary) {
  const i128 edge = (i128{1} << 47);
  for (i128 v : {i128{0}, i128{1}, i128{-1}, edge - 1, -edge, edge, -edge - 1,
                 i128{std::numeric_limits<int64_t>::max()},
                 i128{std::numeric_limits<int64_t>::min()}, i128{1} << 100, -(i128{1} << 100)}) {
    const Arg a = Arg::integer(v);
    EXPECT_EQ(a.kind(), Arg::Kind::Int) << to_string(v);
    EXPECT_EQ(a.as_int(), v) << to_string(v);
    EXPECT_EQ(a, Arg::integer(v)) << to_string(v);  // equal whether inline or on the heap
    EXPECT_EQ(a.hash(), Arg::integer(v).hash()) << to_string(v);
    EXPECT_NE(a, Arg::integer(v + 1)) << to_string(v);
    EXPECT_EQ(a.repr(), to_string(v));
  }
}

TEST(Arg, FloatsKeepTheirBitsAndNanIsOne) {
  for (double v :
       {0.0, -0.0, 1.5, -3.25, 1e300, -1e-300, std::numeric_limits<double>::infinity(),
        -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::denorm_min()}) {
    const Arg a = Arg::real(v);
    EXPECT_TRUE(a.is_float());
    EXPECT_EQ(std::bit_cast<uint64_t>(a.as_float()), std::bit_cast<uint64_t>(v));
  }
  EXPECT_NE(Arg::real(0.0), Arg::real(-0.0));  // bit patterns, as hash-consing needs
  // Negative nans with payloads share their bits' top with the other kinds' tags: each folds to
  // the one quiet nan and stays a float.
  for (uint64_t bits : {0xFFF9000000000001ULL, 0xFFFA000000000000ULL, 0xFFFC000000000000ULL,
                        0xFFFFFFFFFFFFFFFFULL, 0x7FF0000000000001ULL}) {
    const Arg a = Arg::real(std::bit_cast<double>(bits));
    EXPECT_TRUE(a.is_float());
    EXPECT_EQ(a.kind(), Arg::Kind::Float);
    EXPECT_TRUE(std::isnan(a.as_float()));
    EXPECT_EQ(a, Arg::real(std::numeric_limits<double>::quiet_NaN()));
    EXPECT_EQ(a.repr(), "nan");
  }
}

TEST(Arg, EveryKindKeepsItsValue) {
  EXPECT_TRUE(Arg().is_none());
  EXPECT_EQ(Arg().repr(), "None");
  EXPECT_EQ(Arg::boolean(true).as_bool(), true);
  EXPECT_EQ(Arg::boolean(false).as_int(), 0);
  EXPECT_NE(Arg::boolean(true), Arg::integer(1));  // different kinds
  EXPECT_EQ(Arg::op(Op::Where).as_op(), Op::Where);
  EXPECT_EQ(Arg::dtype(dtypes::float32.vec(4)).as_dtype(), dtypes::float32.vec(4));
  EXPECT_TRUE(Arg::invalid().is_invalid());
  EXPECT_NE(Arg::invalid(), Arg());
  EXPECT_EQ(Arg::string("abc").as_string(), "abc");
  const Arg t = Arg::tuple({Arg::integer(1), Arg::string("x"), Arg::real(2.5)});
  EXPECT_EQ(t.repr(), "(1, 'x', 2.5)");
  EXPECT_EQ(t, Arg::tuple({Arg::integer(1), Arg::string("x"), Arg::real(2.5)}));
  const Arg r = Arg::record("P", {{"slot", Arg::integer(3)}});
  EXPECT_EQ(r.field("slot").as_int(), 3);
  EXPECT_THROW(Arg::string("abc").as_int(), std::logic_error);
  EXPECT_THROW(Arg::integer(1).as_dtype(), std::logic_error);
}

TEST(Arg, CopiesShareAndReleaseTheHeapBlock) {
  Arg a = Arg::tuple({Arg::integer(i128{1} << 90)});
  {
    const Arg b = a;  // NOLINT: the copy is the point
    Arg c = std::move(a);
    EXPECT_TRUE(a.is_none());  // a moved-from Arg is None
    EXPECT_EQ(b, c);
    a = c;
  }
  EXPECT_EQ(a.items()[0].as_int(), i128{1} << 90);
  const Arg& same = a;
  a = same;  // self-assignment keeps the value and its reference
  EXPECT_EQ(a.items()[0].as_int(), i128{1} << 90);
  a = Arg::real(1.0);  // drops the last reference (ASan's leak check sees a leak otherwise)
  EXPECT_EQ(a.as_float(), 1.0);
}
