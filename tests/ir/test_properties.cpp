#include <gtest/gtest.h>

#include <map>
#include <random>

#include "ir/graph.h"
#include "ir/uop.h"
#include "tests/symbolic/eval.h"

using namespace tinyrw;

namespace {
i128 lo(const UOp& u) { return u.vmin().i; }
i128 hi(const UOp& u) { return u.vmax().i; }
const i128 kI64Min = -(static_cast<i128>(1) << 63);
const i128 kI64Max = (static_cast<i128>(1) << 63) - 1;
}  // namespace

TEST(VMinVMax, Arithmetic) {
  const UOp x = UOp::variable("x", -3, 5);
  const UOp y = UOp::variable("y", 2, 4);
  EXPECT_EQ(lo(x + y), -1);
  EXPECT_EQ(hi(x + y), 9);
  EXPECT_EQ(lo(x * y), -12);
  EXPECT_EQ(hi(x * y), 20);
  EXPECT_EQ(lo(x * -2), -10);
  EXPECT_EQ(hi(x * -2), 6);
  EXPECT_EQ(lo(x - y), -7);
  EXPECT_EQ(hi(x - y), 3);
  EXPECT_EQ(lo(x.maximum(y)), 2);
  EXPECT_EQ(hi(x.maximum(y)), 5);
  EXPECT_EQ(lo(x.floordiv(y)), -2);  // -3 // 2
  EXPECT_EQ(hi(x.floordiv(y)), 2);
  EXPECT_EQ(lo(x.cdiv(y)), -1);  // trunc(-3 / 2)
  EXPECT_EQ(lo(x.floormod(UOp::cint(4))), 0);
  EXPECT_EQ(hi(x.floormod(UOp::cint(4))), 3);
  EXPECT_EQ(lo(x.cmod(UOp::cint(4))), -3);
  EXPECT_EQ(hi(x.cmod(UOp::cint(4))), 3);
  EXPECT_EQ(lo((x + 3).floormod(UOp::cint(16))), 0);  // one quotient: exact range
  EXPECT_EQ(hi((x + 3).floormod(UOp::cint(16))), 8);
  EXPECT_EQ(lo(x.floormod(y)), 0);
  EXPECT_EQ(hi(x.floormod(y)), 3);
}

TEST(VMinVMax, ComparisonsAndWhere) {
  const UOp x = UOp::variable("x", 0, 5);
  const UOp y = UOp::variable("y", 10, 20);
  EXPECT_EQ(lo(x.lt(y)), 1);  // always true
  EXPECT_EQ(hi(y.lt(x)), 0);  // always false
  EXPECT_EQ(lo(x.ne(y)), 1);
  EXPECT_EQ(hi(x.lt(UOp::cint(3))), 1);
  EXPECT_EQ(lo(x.lt(UOp::cint(3))), 0);
  const UOp w = x.lt(UOp::cint(3)).where(x, y);
  EXPECT_EQ(lo(w), 0);
  EXPECT_EQ(hi(w), 20);
  EXPECT_EQ(hi(x.lt(y).where(x, y)), 5);  // a constant condition selects one side
}

TEST(VMinVMax, BitwiseAndCasts) {
  const UOp x = UOp::variable("x", 0, 100, dtypes::int32);
  EXPECT_EQ(hi(x & UOp::cint(7, dtypes::int32)), 7);
  EXPECT_EQ(lo(x << UOp::cint(2, dtypes::int32)), 0);
  EXPECT_EQ(hi(x << UOp::cint(2, dtypes::int32)), 400);
  EXPECT_EQ(hi(x >> UOp::cint(3, dtypes::int32)), 12);
  EXPECT_EQ(lo(x ^ UOp::cint(-1, dtypes::int32)), -101);
  EXPECT_EQ(hi(x.cast(dtypes::int8)), 100);
  EXPECT_EQ(hi((x * 10).cast(dtypes::int8)), 127);    // clamped to the target
  EXPECT_EQ(hi((x - 200).cast(dtypes::uint8)), 255);  // may wrap: full range
  EXPECT_TRUE(x.cast(dtypes::float32).vmax().is_float);
  EXPECT_TRUE(std::isinf(UOp::make(Op::Sin, dtypes::float32, {x.cast(dtypes::float32)}).vmax().f));
}

// may_raise (ir/graph.h): a division, modulo or shift anywhere under the node whose divisor may be
// 0 or whose count may be negative.
TEST(MayRaise, DivisorOrShiftCountRanges) {
  const UOp x = UOp::variable("x", 0, 10), y = UOp::variable("y", 0, 3);
  const UOp pos = UOp::variable("p", 1, 3), neg = UOp::variable("n", -3, -1);
  EXPECT_FALSE(may_raise(x + y * 2));
  EXPECT_TRUE(may_raise(x.floordiv(y)));
  EXPECT_TRUE(may_raise(x.floormod(y) + 1));  // below the root
  EXPECT_TRUE(may_raise(x.cdiv(y - 1)));
  EXPECT_FALSE(may_raise(x.floordiv(pos)));
  EXPECT_FALSE(may_raise(x.floormod(neg)));
  EXPECT_TRUE(may_raise(x.floordiv(neg + 2)));  // [-1, 1] holds 0
  EXPECT_FALSE(may_raise(x << y));
  EXPECT_TRUE(may_raise(x << (y - 1)));
  EXPECT_TRUE(may_raise(x >> neg));
  EXPECT_TRUE(may_raise(x.lt(x.floordiv(y))));  // inside a condition
}

TEST(VMinVMax, DtypeLimitsNeverOverflow) {
  const UOp a = UOp::variable("a", kI64Min, kI64Max, dtypes::int64);
  EXPECT_EQ(lo(a), kI64Min);
  // computed exactly in 128 bits; beyond int64 the value wraps (tinyspec): the full range
  EXPECT_EQ(lo(a + a), kI64Min);
  EXPECT_EQ(hi(a * a), kI64Max);
  EXPECT_TRUE((a * a).may_wrap());
  const UOp u = UOp::variable("u", 0, dtypes::uint64.int_max(), dtypes::uint64);
  EXPECT_EQ(hi(u + u), dtypes::uint64.int_max());
  EXPECT_TRUE((u + u).may_wrap());
  // index math never wraps: exact beyond int64
  const UOp ai = UOp::variable("ai", kI64Min, kI64Max);
  EXPECT_EQ(lo(ai + ai), 2 * kI64Min);
  EXPECT_EQ(hi(ai * ai), kI64Min * kI64Min);
  EXPECT_FALSE((ai * ai).may_wrap());
  const UOp idx = UOp::make(Op::Load, dtypes::index, {UOp::cint(0)});  // unknown index value
  EXPECT_TRUE(idx.vmax().is_infinite());
  EXPECT_TRUE((idx * idx * idx * idx).vmax().is_infinite());  // saturates, never wraps
  EXPECT_TRUE((idx * 0).vmax() == Num::of(0));
  EXPECT_EQ(UOp::cint(5, dtypes::int8).vmin(), Num::of(5));
  const UOp f = UOp::make(Op::Load, dtypes::float32, {UOp::cint(0)});
  EXPECT_TRUE(f.vmin().is_float && std::isinf(f.vmin().f));
}

TEST(VMinVMax, RangesAndDeepGraphs) {
  const UOp r = UOp::range(UOp::cint(16), 0);
  EXPECT_EQ(lo(r), 0);
  EXPECT_EQ(hi(r), 15);
  UOp x = UOp::variable("x", 0, 1);
  for (int i = 0; i < 1000000; ++i) x = x + UOp::cint(1);
  EXPECT_EQ(hi(x), 1000001);  // computed without recursion
}

// Every value an expression takes over its variables' box lies within [vmin, vmax].
TEST(VMinVMax, SoundOnRandomExpressions) {
  std::mt19937 rng(1234);
  const UOp a = UOp::variable("a", -4, 6), b = UOp::variable("b", -3, 3),
            c = UOp::variable("c", 1, 5);
  const UOp vars[] = {a, b, c};
  std::function<UOp(int)> gen = [&](int depth) -> UOp {
    if (depth == 0 || rng() % 4 == 0) {
      if (rng() % 2) return vars[rng() % 3];
      return UOp::cint(static_cast<int>(rng() % 13) - 6);
    }
    const UOp l = gen(depth - 1), r = gen(depth - 1);
    switch (rng() % 8) {
      case 0:
        return l + r;
      case 1:
        return l * r;
      case 2:
        return l.maximum(r);
      case 3:
        return l - r;
      case 4:
        return l.floordiv(c);
      case 5:
        return l.floormod(c + static_cast<int>(rng() % 3));
      case 6:
        return l.lt(r).where(l, r);
      default:
        return l.floordiv(UOp::cint(static_cast<int>(rng() % 5) + 1));
    }
  };
  for (int t = 0; t < 300; ++t) {
    const UOp e = gen(4);
    const i128 mn = e.vmin().i, mx = e.vmax().i;
    for (i128 va = -4; va <= 6; ++va)
      for (i128 vb = -3; vb <= 3; ++vb)
        for (i128 vc = 1; vc <= 5; ++vc) {
          const i128 val = *test::py_eval(e, {{"a", va}, {"b", vb}, {"c", vc}});
          ASSERT_LE(mn, val) << e.repr(10);
          ASSERT_GE(mx, val) << e.repr(10);
        }
  }
}

namespace {
UOp buffer(Shape s, const char* device = "CPU") {
  int64_t n = 1;
  for (const SInt& d : s) n *= d.value();
  const UOp flat = UOp::make(Op::Buffer, dtypes::float32, {},
                             Arg::record("ParamArg", {{"slot", Arg::integer(0)},
                                                      {"size", Arg::integer(n)},
                                                      {"device", Arg::string(device)}}));
  return UOp::make(Op::Reshape, dtypes::float32, {flat, shape_to_uop(s)});
}
UOp mv(Op op, const UOp& x, std::initializer_list<UOp> extra, Arg arg = {}) {
  std::vector<UOp> src{x};
  src.insert(src.end(), extra);
  return UOp::make(op, x.dtype(), src, std::move(arg));
}
}  // namespace

TEST(Shape, MovementOps) {
  const UOp t = buffer({2, 3, 4});
  EXPECT_EQ(t.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(mv(Op::Reshape, t, {shape_to_uop({6, 4})}).shape(), (Shape{6, 4}));
  EXPECT_THROW(mv(Op::Reshape, t, {shape_to_uop({5, 4})}).shape(), GraphError);
  EXPECT_EQ(mv(Op::Permute, t, {}, Arg::tuple({Arg::integer(2), Arg::integer(0), Arg::integer(1)}))
                .shape(),
            (Shape{4, 2, 3}));
  EXPECT_THROW(
      mv(Op::Permute, t, {}, Arg::tuple({Arg::integer(0), Arg::integer(0), Arg::integer(1)}))
          .shape(),
      GraphError);
  const UOp one = mv(Op::Reshape, t, {shape_to_uop({2, 1, 12})});
  EXPECT_EQ(mv(Op::Expand, one, {shape_to_uop({2, 5, 12})}).shape(), (Shape{2, 5, 12}));
  EXPECT_THROW(mv(Op::Expand, t, {shape_to_uop({2, 5, 4})}).shape(), GraphError);
  EXPECT_EQ(mv(Op::Pad, t, {shape_to_uop({1, 0, 0}), shape_to_uop({4, 3, 4})}).shape(),
            (Shape{4, 3, 4}));
  EXPECT_THROW(mv(Op::Pad, t, {shape_to_uop({3, 0, 0}), shape_to_uop({4, 3, 4})}).shape(),
               GraphError);
  EXPECT_EQ(mv(Op::Shrink, t, {shape_to_uop({1, 0, 1}), shape_to_uop({1, 3, 2})}).shape(),
            (Shape{1, 3, 2}));
  EXPECT_THROW(mv(Op::Shrink, t, {shape_to_uop({1, 0, 3}), shape_to_uop({1, 3, 2})}).shape(),
               GraphError);
  EXPECT_EQ(mv(Op::Flip, t, {},
               Arg::tuple({Arg::boolean(true), Arg::boolean(false), Arg::boolean(false)}))
                .shape(),
            (Shape{2, 3, 4}));
  EXPECT_EQ(mv(Op::Reduce, t, {}, Arg::tuple({Arg::op(Op::Add), Arg::integer(1)})).shape(),
            (Shape{3, 4}));
  EXPECT_THROW(mv(Op::Reduce, t, {}, Arg::tuple({Arg::op(Op::Add), Arg::integer(4)})).shape(),
               GraphError);
}

// Sizes are compared exactly: a count that wraps int64 to the right number, or an offset that
// wraps past the end, is an error, not a match.
TEST(Shape, SizeArithmeticDoesNotWrap) {
  const UOp t = buffer({4});
  const int64_t big = (int64_t{1} << 62) + 1;  // big * 4 wraps to 4 in int64
  try {
    mv(Op::Reshape, t, {shape_to_uop({big, 4})}).shape();
    ADD_FAILURE() << "a reshape whose element count overflows was accepted";
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("overflows int64"), std::string::npos) << e.what();
  }
  EXPECT_THROW(mv(Op::Pad, t, {shape_to_uop({INT64_MAX}), shape_to_uop({5})}).shape(), GraphError);
  EXPECT_THROW(mv(Op::Shrink, t, {shape_to_uop({INT64_MAX}), shape_to_uop({2})}).shape(),
               GraphError);
  // 2^62 float32 elements are 2^64 bytes: as int8 that count wrapped to 0
  const UOp wide =
      mv(Op::Expand, mv(Op::Reshape, t, {shape_to_uop({4, 1})}), {shape_to_uop({4, big - 1})});
  EXPECT_THROW(UOp::make(Op::Bitcast, dtypes::int8, {wide}).shape(), GraphError);
  EXPECT_EQ(UOp::make(Op::Bitcast, dtypes::int8, {t}).shape(), (Shape{16}));
}

TEST(Shape, BroadcastAndNoShape) {
  const UOp a = buffer({3, 1}), b = buffer({4});
  EXPECT_EQ((a + b).shape(), (Shape{3, 4}));
  EXPECT_THROW((buffer({3}) + buffer({4})).shape(), GraphError);
  try {
    (buffer({3}) + buffer({4})).shape();
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot be broadcast"), std::string::npos);
  }
  EXPECT_EQ(UOp::cint(1).shape(), Shape{});
  const UOp s = UOp::sink(std::vector<UOp>{a});
  EXPECT_FALSE(s.shape_opt().has_value());
  EXPECT_THROW(s.shape(), GraphError);
  EXPECT_EQ(UOp::make(Op::Stack, dtypes::index, {UOp::cint(1), UOp::cint(2)}).shape(), (Shape{2}));
}

TEST(Shape, SymbolicSizes) {
  const UOp n = UOp::variable("n", 1, 10);
  const UOp flat = UOp::make(Op::Buffer, dtypes::float32, {},
                             Arg::record("ParamArg", {{"size", Arg::integer(40)}}));
  const UOp view = UOp::make(Op::Shrink, dtypes::float32,
                             {flat, shape_to_uop({0}), shape_to_uop({SInt(n * 4)})});
  const Shape s = view.shape();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_FALSE(s[0].is_int());
  EXPECT_TRUE(s[0].uop() == n * 4);
  EXPECT_THROW(s[0].value(), GraphError);
}

TEST(Device, DerivedFromBuffers) {
  const UOp a = buffer({4}, "CPU");
  EXPECT_EQ((a + a).device(), Arg::string("CPU"));
  EXPECT_TRUE(UOp::cint(1).device().is_none());
  const UOp c = UOp::make(Op::Copy, dtypes::float32, {a}, Arg::string("CUDA"));
  EXPECT_EQ(c.device(), Arg::string("CUDA"));
  const UOp ms = UOp::make(Op::MStack, dtypes::float32, {a, buffer({4}, "CUDA")});
  EXPECT_EQ(ms.device(), Arg::tuple({Arg::string("CPU"), Arg::string("CUDA")}));
  EXPECT_EQ(UOp::make(Op::MSelect, dtypes::float32, {ms}, Arg::integer(1)).device(),
            Arg::string("CUDA"));
}
