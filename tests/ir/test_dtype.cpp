#include <gtest/gtest.h>

#include <cmath>

#include "ir/arg.h"
#include "ir/dtype.h"

using namespace tinyrw;

TEST(DType, ScalarsAreInternedAndNamed) {
  EXPECT_EQ(DType::scalar(ScalarKind::Float32), dtypes::float32);
  EXPECT_EQ(*DType::from_name("float"), dtypes::float32);
  EXPECT_EQ(*DType::from_name("int64"), dtypes::int64);
  EXPECT_FALSE(DType::from_name("float128").has_value());
  EXPECT_EQ(dtypes::float32.repr(), "dtypes.float");
  EXPECT_EQ(dtypes::int8.repr(), "dtypes.char");
  EXPECT_EQ(dtypes::int32.vec(4).repr(), "dtypes.int.vec(4)");
  EXPECT_EQ(dtypes::float16.ptr(AddrSpace::Local, 256).repr(),
            "dtypes.half.ptr(256, AddrSpace.LOCAL)");
}

TEST(DType, VectorsAndPointers) {
  const DType v = dtypes::float32.vec(4);
  EXPECT_EQ(v, dtypes::float32.vec(4));
  EXPECT_EQ(v.count(), 4);
  EXPECT_EQ(v.scalar_type(), dtypes::float32);
  EXPECT_EQ(v.itemsize(), 16);
  EXPECT_EQ(dtypes::float32.vec(1), dtypes::float32);
  const DType p = v.ptr(AddrSpace::Global, 8);
  EXPECT_TRUE(p.is_ptr());
  EXPECT_EQ(p.base(), v);
  EXPECT_EQ(p.ptr_size(), 8);
  EXPECT_THROW(p.ptr(), std::invalid_argument);
  EXPECT_THROW(v.vec(2), std::invalid_argument);
}

TEST(DType, ExactBounds) {
  EXPECT_EQ(dtypes::int8.int_min(), -128);
  EXPECT_EQ(dtypes::int8.int_max(), 127);
  EXPECT_EQ(dtypes::uint8.int_max(), 255);
  EXPECT_EQ(dtypes::int64.int_min(), -(static_cast<i128>(1) << 63));
  EXPECT_EQ(dtypes::uint64.int_max(), (static_cast<i128>(1) << 64) - 1);
  EXPECT_EQ(dtypes::bool_.int_max(), 1);
  EXPECT_TRUE(is_infinite(dtypes::index.int_max()));
  EXPECT_TRUE(std::isinf(dtypes::float32.float_max()));
}

TEST(DType, PromotionLattice) {
  EXPECT_EQ(least_upper_dtype(dtypes::int8, dtypes::uint8), dtypes::int16);
  EXPECT_EQ(least_upper_dtype(dtypes::bool_, dtypes::bool_), dtypes::bool_);  // not index
  EXPECT_EQ(least_upper_dtype(dtypes::bool_, dtypes::int8), dtypes::int8);
  EXPECT_EQ(least_upper_dtype(dtypes::int32, dtypes::uint32), dtypes::int64);
  EXPECT_EQ(least_upper_dtype(dtypes::float16, dtypes::bfloat16), dtypes::float32);
  EXPECT_EQ(least_upper_dtype(dtypes::int64, dtypes::uint64), dtypes::uint64);
  EXPECT_EQ(least_upper_dtype(dtypes::int64, dtypes::float16), dtypes::float16);
  EXPECT_EQ(least_upper_dtype(dtypes::bool_, dtypes::index), dtypes::index);
  EXPECT_EQ(least_upper_dtype(dtypes::index, dtypes::int8), dtypes::int8);
  EXPECT_EQ(least_upper_dtype(dtypes::bool_, dtypes::float32), dtypes::float32);
  EXPECT_EQ(least_upper_float(dtypes::int32), dtypes::float32);
  EXPECT_EQ(sum_acc_dtype(dtypes::uint8), dtypes::uint32);
  EXPECT_EQ(sum_acc_dtype(dtypes::int8), dtypes::int32);
  EXPECT_EQ(sum_acc_dtype(dtypes::int64), dtypes::int64);
  EXPECT_EQ(sum_acc_dtype(dtypes::float16), dtypes::float32);
  EXPECT_THROW(least_upper_dtype(dtypes::void_, dtypes::int32), std::invalid_argument);
}

TEST(DType, SafeCasts) {
  EXPECT_TRUE(can_safe_cast(dtypes::bool_, dtypes::int8));
  EXPECT_TRUE(can_safe_cast(dtypes::uint16, dtypes::int32));
  EXPECT_TRUE(can_safe_cast(dtypes::int32, dtypes::float64));
  EXPECT_FALSE(can_safe_cast(dtypes::int32, dtypes::float32));
  EXPECT_FALSE(can_safe_cast(dtypes::int64, dtypes::int32));
  EXPECT_FALSE(can_safe_cast(dtypes::int8, dtypes::uint64));
}

TEST(DType, IntegerWrapAround) {
  EXPECT_EQ(truncate_int(dtypes::int8, 200), -56);
  EXPECT_EQ(truncate_int(dtypes::uint8, -1), 255);
  EXPECT_EQ(truncate_int(dtypes::int32, static_cast<i128>(1) << 31), -(static_cast<i128>(1) << 31));
  EXPECT_EQ(truncate_int(dtypes::uint64, -1), (static_cast<i128>(1) << 64) - 1);
  EXPECT_EQ(truncate_int(dtypes::bool_, 7), 1);
  EXPECT_EQ(truncate_int(dtypes::index, static_cast<i128>(1) << 80), static_cast<i128>(1) << 80);
}

TEST(DType, FloatRounding) {
  EXPECT_EQ(truncate_float(dtypes::float16, 65519.0), 65504.0);
  EXPECT_TRUE(std::isinf(truncate_float(dtypes::float16, 65520.0)));
  EXPECT_EQ(truncate_float(dtypes::float16, 1.0 / 3.0), 0.333251953125);
  EXPECT_EQ(truncate_float(dtypes::float16, 5.960464477539063e-08),
            5.960464477539063e-08);  // smallest subnormal
  EXPECT_EQ(truncate_float(dtypes::bfloat16, 3.14159), 3.140625);
  EXPECT_TRUE(std::isinf(truncate_float(dtypes::bfloat16, 3.4e38)));
  EXPECT_TRUE(std::isnan(truncate_float(dtypes::float16, NAN)));
  EXPECT_TRUE(std::isinf(truncate_float(dtypes::float32, 1e39)));
  EXPECT_TRUE(std::signbit(truncate_float(dtypes::float16, -0.0)));
  // every half value round-trips exactly
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = half_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_half(f), h) << "half bits " << h;
  }
}

TEST(Arg, KindsEqualityAndRepr) {
  EXPECT_EQ(Arg::integer(3), Arg::integer(3));
  EXPECT_NE(Arg::integer(3), Arg::real(3.0));
  EXPECT_NE(Arg::real(0.0), Arg::real(-0.0));
  EXPECT_EQ(Arg::real(NAN), Arg::real(-NAN));
  EXPECT_EQ(Arg::real(NAN).hash(), Arg::real(std::nan("1")).hash());
  EXPECT_EQ(Arg::real(INFINITY).repr(), "inf");
  EXPECT_EQ(Arg::real(-0.0).repr(), "-0.0");
  EXPECT_EQ(Arg::real(1.5).repr(), "1.5");
  EXPECT_EQ(Arg::real(2.0).repr(), "2.0");
  EXPECT_EQ(Arg::boolean(true).repr(), "True");
  EXPECT_EQ(Arg::string("a'b").repr(), "'a\\'b'");
  EXPECT_EQ(Arg::tuple({Arg::integer(1)}).repr(), "(1,)");
  EXPECT_EQ(Arg::tuple({Arg::integer(1), Arg::string("x")}).repr(), "(1, 'x')");
  EXPECT_EQ(Arg::dtype(dtypes::int32).repr(), "dtypes.int");
  EXPECT_EQ(Arg::op(Op::Add).repr(), "Ops.ADD");
  EXPECT_EQ(Arg::invalid().repr(), "Invalid");
  const i128 big = static_cast<i128>(1) << 100;
  EXPECT_EQ(Arg::integer(big).as_int(), big);
  EXPECT_EQ(Arg::integer(big), Arg::integer(big));
  EXPECT_NE(Arg::integer(big), Arg::integer(big + 1));
}

TEST(Arg, RecordsAndErrors) {
  const Arg p = Arg::record("ParamArg", {{"slot", Arg::integer(0)},
                                         {"dtype", Arg::dtype(dtypes::float32)},
                                         {"device", Arg::string("CPU")}});
  EXPECT_EQ(p.field("slot").as_int(), 0);
  EXPECT_EQ(p.field("dtype").as_dtype(), dtypes::float32);
  EXPECT_EQ(p.repr(), "ParamArg(slot=0, dtype=dtypes.float, device='CPU')");
  EXPECT_EQ(p, Arg::record("ParamArg", {{"slot", Arg::integer(0)},
                                        {"dtype", Arg::dtype(dtypes::float32)},
                                        {"device", Arg::string("CPU")}}));
  EXPECT_THROW(p.field("size"), std::logic_error);
  EXPECT_THROW(Arg::integer(1).as_string(), std::logic_error);
  // copies share and release the heap payload
  Arg copy = p;
  copy = Arg::integer(5);
  EXPECT_EQ(p.field("device").as_string(), "CPU");
}
