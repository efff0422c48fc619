// Bad input at the Tensor API raises a TensorError where the user made it, never a crash, a hang
// or a silent wrong value (issue 22): sizes beyond kMaxTensorBytes, values a dtype cannot hold,
// ill-typed ALU nodes, null pointers, repeated axes, reductions without identity, writes into
// expanded views; and graphs of 100k ops build, differentiate and drop without deep recursion.
#include <gtest/gtest.h>

#include <array>
#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "dsl/verify.h"
#include "on_device.h"
#include "tensor/function.h"
#include "tensor/tensor.h"
#include "tests/expect_error.h"

using namespace tinyrw;

namespace {

class Limits : public OnDevice {};

// Runs f, which must raise a TensorError whose message contains `part`.
using D = std::vector<double>;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

}  // namespace

// ---- sizes

TEST(Limits, ShapesBeyondTheSizeLimitAreRefused) {
  const int64_t big = int64_t{1} << 62;
  // 2^62 float32 elements are 2^64 bytes: refused where built (used to crash at realize)
  expect_error<TensorError>(
      [&] { Tensor::ones({big}); },
      "full: shape (4611686018427387904,) has 4611686018427387904 elements of "
      "dtypes.float (18446744073709551616 bytes), more than the tensor size limit of "
      "9223372036854775807 bytes");
  // 2^80 elements: the count used to wrap to 0
  expect_error<TensorError>(
      [&] {
        Tensor::ones({int64_t{1} << 40, int64_t{1} << 40});
      },
      "1208925819614629174706176 elements");
  expect_error<TensorError>(
      [&] {
        Tensor::zeros({big, big, big});
      },
      "more than the tensor size limit");
  expect_error<TensorError>([&] { Tensor::empty({big}); }, "empty: shape");
  expect_error<TensorError>([&] { Tensor::rand({big}); }, "rand: shape");
  expect_error<TensorError>([&] { Tensor::eye(int64_t{1} << 32); }, "eye: shape");
  expect_error<TensorError>([&] { Tensor::linspace(0, 1, big); }, "linspace: shape");
  expect_error<TensorError>([&] { Tensor::ones({1}).expand({big}); },
                            "more than the tensor size limit");
  // a bool is one byte: 2^62 of them fit, 2^63 do not
  const Tensor wide = Tensor::ones({1}, dtypes::bool_).expand({big});
  EXPECT_EQ(wide.numel(), big);
  expect_error<TensorError>([&] { Tensor::cat({wide, wide}); }, "cat: a size of");
  expect_error<TensorError>([&] { wide.reshape({big, 1}).expand({big, 2}); }, "tensor size limit");
  // the element count is exact: a product that wraps to the right count is no match
  expect_error<TensorError>([&] { Tensor::zeros({4}).reshape({big + 1, 4}); }, "cannot reshape");
  expect_error<TensorError>([&] { Tensor::zeros({1}).expand({-5}); }, "cannot expand");
  // pad amounts are added in a wider type (INT64_MAX used to give shape (1,))
  expect_error<TensorError>(
      [&] {
        Tensor::zeros({2}).pad({{INT64_MAX, 0}});
      },
      "pad: a size of 2 + ");
  expect_error<TensorError>(
      [&] {
        Tensor::zeros({2}).pad({{1, INT64_MAX}});
      },
      "pad: a size of 3 + ");
  // matmul's broadcast product is a shape too
  const Tensor tall = Tensor::ones({int64_t{1} << 31, 1}),
               flat = Tensor::ones({1, int64_t{1} << 31});
  expect_error<TensorError>([&] { tall.matmul(flat); }, "tensor size limit");
}

TEST(Limits, AHostAllocationFailureIsATensorError) {
  // ASan's operator new reports a request past its 2^40-byte maximum and aborts instead of
  // throwing bad_alloc (allocator_may_return_null does not change that for a throwing new)
  if (kAddressSanitizer) GTEST_SKIP() << "AddressSanitizer aborts on an oversized allocation";
  // 2^52 bytes (4 PiB) is within the size limit but beyond any host's address space
  expect_error<TensorError>([] { Tensor::empty({int64_t{1} << 50}); }, "cannot allocate a buffer");
}

TEST(Limits, HugeSliceStepsDoNotOverflow) {
  Tensor t = Tensor::arange(10);
  EXPECT_EQ(t.slice({{0, 10, INT64_MAX}}).data<int32_t>(), (std::vector<int32_t>{0}));
  EXPECT_EQ(t.slice({{2, 10, INT64_MAX - 1}}).data<int32_t>(), (std::vector<int32_t>{2}));
  EXPECT_EQ(t.slice({{9, -11, INT64_MIN}}).data<int32_t>(), (std::vector<int32_t>{9}));
  EXPECT_EQ(t.slice({{1, 10, 4}}).data<int32_t>(), (std::vector<int32_t>{1, 5, 9}));
}

// ---- values that do not fit their dtype

TEST(Limits, FillValuesMustFitTheDtype) {
  expect_error<TensorError>([] { Tensor::full({2}, 1e300, dtypes::int32); },
                            "full: the value 1e+300 does not fit dtypes.int");
  expect_error<TensorError>([] { Tensor::full({2}, 128, dtypes::int8); },
                            "does not fit dtypes.char");
  expect_error<TensorError>([] { Tensor::full({2}, -1, dtypes::uint32); },
                            "does not fit dtypes.uint");
  expect_error<TensorError>([] { Tensor::full({2}, NAN, dtypes::int64); },
                            "does not fit dtypes.long");
  expect_error<TensorError>([] { Tensor::full({2}, 1e300, dtypes::float32); },
                            "full: the value 1e+300 overflows dtypes.float");
  expect_error<TensorError>([] { Tensor::full({2}, 70000, dtypes::float16); },
                            "overflows dtypes.half");
  // in range, infinities for floats, fractions truncated for ints, anything for bool
  EXPECT_EQ(Tensor::full({2}, 127.9, dtypes::int8).data<int32_t>(),
            (std::vector<int32_t>{127, 127}));
  EXPECT_EQ(Tensor::full({1}, INFINITY).to_doubles(), (D{INFINITY}));
  EXPECT_EQ(Tensor::full({1}, 1e300, dtypes::float64).to_doubles(), (D{1e300}));
  EXPECT_EQ(Tensor::full({1}, 7, dtypes::bool_).data<uint8_t>(), (std::vector<uint8_t>{1}));
  // an operand next to a float tensor is float arithmetic, not a fill value: it may round to inf
  EXPECT_EQ((Tensor::ones({1}) * 1e300).to_doubles(), (D{INFINITY}));
  expect_error<TensorError>(
      [] {
        Tensor::from_vector(std::vector<int64_t>{1, 300}, {2}, dtypes::int8);
      },
      "from_vector (element 1): the value 300 does not fit dtypes.char");
}

// A whole-number operand next to an integer tensor keeps the tensor's dtype: it must fit it, and
// it is that dtype's constant exactly. It used to be made in float32 and cast: 300 next to int8
// wrapped (1 + 300 gave 45) and 16777217 next to int64 rounded to 16777216.
TEST_P(Limits, ScalarOperandsOfIntegerTensorsAreExact) {
  expect_error<TensorError>([] { Tensor::ones({1}, dtypes::int8) + 300.0; },
                            "a scalar operand: the value 300.0 does not fit dtypes.char");
  expect_error<TensorError>([] { Tensor::ones({1}, dtypes::uint8) * -1.0; },
                            "does not fit dtypes.uchar");
  EXPECT_EQ((Tensor::zeros({1}, dtypes::int64) + 16777217.0).data<int64_t>(),
            (std::vector<int64_t>{16777217}));
  EXPECT_EQ((Tensor::zeros({1}, dtypes::int64) + 9007199254740992.0).data<int64_t>(),
            (std::vector<int64_t>{9007199254740992}));
  EXPECT_EQ((Tensor::ones({1}, dtypes::int8) + 126.0).to_doubles(), (D{127}));
  // negation and subtraction of unsigned tensors still wrap, as unsigned arithmetic does
  const Tensor u = Tensor::from_vector(std::vector<int32_t>{0, 1, 200}, {3}, dtypes::uint8);
  EXPECT_EQ((-u).to_doubles(), (D{0, 255, 56}));
  EXPECT_EQ((u - Tensor::full({3}, 2, dtypes::uint8)).to_doubles(), (D{254, 255, 198}));
  EXPECT_EQ((-Tensor::from_vector(std::vector<int32_t>{INT32_MIN + 1, 3}, {2}, dtypes::int32))
                .to_doubles(),
            (D{INT32_MAX, -3}));
  // a fraction or an infinity makes the result float, as before
  EXPECT_EQ((Tensor::ones({1}, dtypes::int32) + 0.5).to_doubles(), (D{1.5}));
  EXPECT_EQ((Tensor::ones({1}, dtypes::int32) + INFINITY).to_doubles(), (D{INFINITY}));
  EXPECT_TRUE((Tensor::ones({1}, dtypes::int32) + INFINITY).dtype().is_float());
}

TEST(Limits, ArangeNearTheDtypeLimitsRaisesInsteadOfWrapping) {
  expect_error<TensorError>([] { Tensor::arange(INT32_MAX - 1, int64_t{INT32_MAX} + 2); },
                            "the value 2147483648 does not fit dtypes.int");
  expect_error<TensorError>([] { Tensor::arange(0, 200, 1, dtypes::int8); },
                            "does not fit dtypes.char");
  expect_error<TensorError>([] { Tensor::arange(INT64_MIN, INT64_MAX, 1, dtypes::int64); },
                            "18446744073709551615 elements exceed the tensor size limit");
  EXPECT_EQ(Tensor::arange(INT64_MAX - 2, INT64_MAX, 1, dtypes::int64).data<int64_t>(),
            (std::vector<int64_t>{INT64_MAX - 2, INT64_MAX - 1}));
  EXPECT_EQ(Tensor::arange(INT64_MIN + 1, INT64_MIN, -1, dtypes::int64).data<int64_t>(),
            (std::vector<int64_t>{INT64_MIN + 1}));
  EXPECT_EQ(Tensor::arange(INT64_MAX, INT64_MIN, INT64_MIN, dtypes::int64).data<int64_t>(),
            (std::vector<int64_t>{INT64_MAX, -1}));
}

// ---- every element type from_vector takes (a missing instantiation fails only at link time)

TEST_P(Limits, FromVectorTakesEveryElementType) {
  EXPECT_EQ(Tensor::from_vector(std::vector<int8_t>{-128, 127}, {2}, dtypes::int8).to_doubles(),
            (D{-128, 127}));
  EXPECT_EQ(Tensor::from_vector(std::vector<int16_t>{-3, 30000}, {2}, dtypes::int16).to_doubles(),
            (D{-3, 30000}));
  EXPECT_EQ(Tensor::from_vector(std::vector<int32_t>{-5, 6}, {2}, dtypes::int32).to_doubles(),
            (D{-5, 6}));
  EXPECT_EQ(Tensor::from_vector(std::vector<int64_t>{-7, 8}, {2}, dtypes::int64).to_doubles(),
            (D{-7, 8}));
  EXPECT_EQ(Tensor::from_vector(std::vector<uint8_t>{0, 255}, {2}, dtypes::uint8).to_doubles(),
            (D{0, 255}));
  EXPECT_EQ(Tensor::from_vector(std::vector<uint16_t>{1, 65535}, {2}, dtypes::uint16).to_doubles(),
            (D{1, 65535}));
  EXPECT_EQ(
      Tensor::from_vector(std::vector<uint32_t>{2, 4000000000u}, {2}, dtypes::uint32).to_doubles(),
      (D{2, 4000000000.0}));
  EXPECT_EQ(Tensor::from_vector(std::vector<uint64_t>{3, uint64_t{1} << 40}, {2}, dtypes::uint64)
                .to_doubles(),
            (D{3, 1099511627776.0}));
  EXPECT_EQ(Tensor::from_vector(std::vector<bool>{true, false}, {2}, dtypes::bool_).to_doubles(),
            (D{1, 0}));
  EXPECT_EQ(Tensor::from_vector(std::vector<float>{0.5f}, {1}, dtypes::float32).to_doubles(),
            (D{0.5}));
  EXPECT_EQ(Tensor::from_vector(std::vector<double>{0.25}, {1}, dtypes::float64).to_doubles(),
            (D{0.25}));
  // and into a dtype other than their own
  EXPECT_EQ(Tensor::from_vector(std::vector<int8_t>{-2, 3}, {2}, dtypes::float32).to_doubles(),
            (D{-2, 3}));
}

// data<T> is instantiated for every element type, and an element T cannot hold is an error
TEST_P(Limits, DataReadsEveryElementTypeAndRefusesWhatItCannotHold) {
  Tensor small = Tensor::from_vector(std::vector<int32_t>{-3, 100}, {2}, dtypes::int32);
  EXPECT_EQ(small.data<int8_t>(), (std::vector<int8_t>{-3, 100}));
  EXPECT_EQ(small.data<int16_t>(), (std::vector<int16_t>{-3, 100}));
  EXPECT_EQ(small.data<int64_t>(), (std::vector<int64_t>{-3, 100}));
  Tensor positive = Tensor::from_vector(std::vector<int32_t>{0, 1}, {2}, dtypes::int32);
  EXPECT_EQ(positive.data<uint16_t>(), (std::vector<uint16_t>{0, 1}));
  EXPECT_EQ(positive.data<uint32_t>(), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(positive.data<uint64_t>(), (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(positive.data<bool>(), (std::vector<bool>{false, true}));
  expect_error<TensorError>([&] { small.data<uint8_t>(); },
                            "data (element 0): the value -3 does not fit");
  Tensor big = Tensor::from_vector(std::vector<int32_t>{300}, {1}, dtypes::int32);
  expect_error<TensorError>([&] { big.data<int8_t>(); },
                            "data (element 0): the value 300 does not fit");
  Tensor inf = Tensor::from_vector(std::vector<float>{1.5f, INFINITY}, {2}, dtypes::float32);
  expect_error<TensorError>([&] { inf.data<int32_t>(); }, "data (element 1)");
  Tensor huge = Tensor::from_vector(std::vector<double>{1e30}, {1}, dtypes::float64);
  expect_error<TensorError>([&] { huge.data<int64_t>(); }, "data (element 0)");
}

TEST(Limits, RealizeAllRefusesANullPointer) {
  Tensor a = Tensor::ones({2}) + 1.0;
  expect_error<TensorError>(
      [&] {
        Tensor::realize_all({&a, nullptr});
      },
      "realize_all: tensor 1 is a null pointer");
}

// ---- dtypes checked when the node is built

TEST(Limits, IllTypedAluNodesAreRefusedWhenBuilt) {
  const Tensor f = Tensor::ones({2}), i = Tensor::ones({2}, dtypes::int32),
               b = Tensor::ones({2}, dtypes::bool_);
  // used to fail later (an LLVM IR parse error on CPU, a silent result on INTERP)
  expect_error<TensorError>(
      [&] {
        Tensor::alu(Op::Add, {f, i});
      },
      "Add of (dtypes.float, dtypes.int): sources have different dtypes");
  expect_error<TensorError>([&] { Tensor::alu(Op::Where, {f, f, f}); }, "needs a bool condition");
  expect_error<TensorError>([&] { Tensor::alu(Op::Where, {b, f, i}); }, "different dtypes");
  expect_error<TensorError>([&] { Tensor::alu(Op::And, {f, f}); }, "needs integer or bool sources");
  expect_error<TensorError>([&] { Tensor::alu(Op::Sqrt, {i}); }, "needs a float source");
  expect_error<TensorError>([&] { Tensor::alu(Op::FloorDiv, {f, f}); }, "needs integer sources");
  expect_error<TensorError>(
      [&] {
        Tensor::alu(Op::CmpLt, {f, i});
      },
      "compares sources of different dtypes");
  expect_error<TensorError>([&] { Tensor::alu(Op::Reshape, {f}); }, "is not an ALU op");
  EXPECT_EQ(Tensor::alu(Op::CmpLt, {f, f}).dtype(), dtypes::bool_);
  EXPECT_EQ(Tensor::alu(Op::Where, {b, i, i}).dtype(), dtypes::int32);
  EXPECT_EQ(Tensor::alu(Op::Shl, {i, i}).dtype(), dtypes::int32);
  // the UOp builders too (the rewrite rules build through them)
  EXPECT_THROW(UOp::cfloat(1.0).alu(Op::Add, {UOp::cint(1, dtypes::int32)}), GraphError);
  EXPECT_THROW(UOp::cfloat(1.0).where(UOp::cfloat(1.0), UOp::cfloat(2.0)), GraphError);
  // and graphs made with the unchecked UOp::make, when they become tensors
  const UOp raw = UOp::make(Op::Add, dtypes::float32, {f.uop(), i.uop()});
  expect_error<TensorError>(
      [&] {
        Tensor::from_uop(raw, {f, i});
      },
      "from_uop: Add of (dtypes.float, dtypes.int): sources have different dtypes");
  const UOp lie = UOp::make(Op::CmpLt, dtypes::float32, {f.uop(), f.uop()});
  expect_error<TensorError>([&] { Tensor::from_uop(lie, {f}); },
                            "from_uop: CmpLt of these sources gives dtypes.bool, not dtypes.float");
}

// The builders accept exactly what spec_alu in rules/spec.rw accepts (the rules are stated there;
// the builders check the same, so neither may drift).
TEST(Limits, AluBuildersAgreeWithTheSpecVerifier) {
  const DType kinds[] = {dtypes::bool_,        dtypes::int8,         dtypes::int32,
                         dtypes::uint64,       dtypes::index,        dtypes::float16,
                         dtypes::float32,      dtypes::float64,      dtypes::float32.vec(4),
                         dtypes::bool_.vec(4), dtypes::int32.vec(4), dtypes::bool_.vec(2)};
  int accepted = 0, refused = 0;  // both kinds of answer must occur: neither side may be trivial
  for (int o = 0; o < kNumOps; ++o) {
    const Op op = static_cast<Op>(o);
    if (!op_info(op).is_alu()) continue;
    const int arity = op_info(op).min_src;
    for (DType a : kinds)
      for (DType b : kinds) {
        std::vector<UOp> src;  // opaque values: the first source of dtype a, the others of b
        for (int k = 0; k < arity; ++k)
          src.push_back(UOp::make(Op::Load, k == 0 ? a : b, {UOp::cint(k)}));
        bool built = true;
        DType out;
        try {
          out = alu_result_dtype(op, src);
        } catch (const GraphError&) {
          built = false;
        }
        const DType claim = built ? out : (groups::comparison().contains(op) ? dtypes::bool_ : a);
        bool verified = true;
        try {
          verify(UOp::make(op, claim, src), "spec_alu_only");
        } catch (const SpecError&) {
          verified = false;
        }
        EXPECT_EQ(built, verified) << op_name(op) << " " << a.repr() << " " << b.repr();
        ++(built ? accepted : refused);
      }
  }
  EXPECT_GT(accepted, 300);
  EXPECT_GT(refused, 300);
}

// ---- pointers, axes, reductions

TEST(Limits, NullPointersAreRefused) {
  Tensor w = Tensor::ones({2});
  const Tensor loss = (w * 2.0).sum();
  expect_error<TensorError>(
      [&] {
        loss.backward({&w, nullptr});
      },
      "backward: parameter 1 is a null pointer");
  EXPECT_EQ(w.grad(), nullptr);  // nothing accumulated before the refusal
  expect_error<TensorError>(
      [&] {
        trace_function({.name = "f"}, -1, {&w, nullptr}, {nullptr, nullptr},
                       [&] { return std::vector<Tensor>{w}; });
      },
      "function f: argument 1 is a null pointer");
  // empty UOp handles are null pointers too
  expect_error<TensorError>([] { Tensor::from_uop(UOp()); }, "from_uop: the UOp given is empty");
  expect_error<TensorError>([] { Tensor::over_storages(UOp(), {}); }, "the UOp given is empty");
  expect_error<TensorError>(
      [&] { custom_kernel({w}, [](const std::vector<UOp>&) { return UOp(); }); },
      "custom kernel kernel returned an empty UOp");
  expect_error<TensorError>([] { kernel_index(UOp(), {UOp::cint(0)}); },
                            "kernel_index: the parameter is");
  expect_error<TensorError>([] { kernel_store(UOp(), UOp::cint(0)); },
                            "kernel_store: the target or the value");
}

TEST(Limits, RepeatedAxesAreRefused) {
  const Tensor t = Tensor::ones({2, 3});
  expect_error<TensorError>([&] { t.flip({0, 0}); }, "flip: axis 0 appears more than once");
  expect_error<TensorError>([&] { t.flip({1, -1}); }, "flip: axis -1 appears more than once");
  expect_error<TensorError>([&] { t.sum({0, -2}); }, "sum: axis -2 appears more than once");
  expect_error<TensorError>([&] { t.max({1, 1}); }, "max: axis 1 appears more than once");
  expect_error<TensorError>([&] { t.permute({0, 0}); }, "permute repeats an axis");
}

// Over no elements a reduction is its identity, as tinygrad's: max the dtype's lowest value,
// min its highest; argmax has no index to give and refuses.
TEST_P(Limits, ReductionsOverEmptyAxesGiveTheIdentity) {
  const Tensor e = Tensor::ones({0}), e2 = Tensor::ones({0, 3});
  EXPECT_EQ(e.max().to_doubles(), (std::vector<double>{-INFINITY}));
  EXPECT_EQ(e2.min({0}).to_doubles(), (std::vector<double>{INFINITY, INFINITY, INFINITY}));
  EXPECT_EQ(Tensor::ones({0}, dtypes::uint8).min().to_doubles(), (std::vector<double>{255}));
  EXPECT_EQ(Tensor::ones({2, 0}, dtypes::int32).max({1}).to_doubles(),
            (std::vector<double>{-2147483648.0, -2147483648.0}));
  expect_error<TensorError>([&] { e.argmax(0); },
                            "argmax over axis 0 of size 0 (shape (0,)): there is no index");
  // an axis longer than int32 indices reach is refused by argmax itself (the tensor stays lazy)
  const Tensor huge = Tensor::full({2, int64_t{1} << 31}, 1.0);
  expect_error<TensorError>(
      [&] { huge.argmax(1); },
      "argmax over axis 1 of size 2147483648: its indices do not fit the int32 result");
  EXPECT_EQ(huge.argmax(0).shape(), (Dims{int64_t{1} << 31}));
  // over a non-empty axis, empty tensors are fine
  EXPECT_EQ(e.sum().to_doubles(), (D{0}));
  EXPECT_EQ(e.prod().to_doubles(), (D{1}));
  EXPECT_EQ(e2.max({1}).numel(), 0);
}

// min is max of an order-reversed copy: -x reversed no order for unsigned ints (0 stays 0) and
// wrapped INT_MIN, so min of uint8 {0, 5} was 5 and min of int32 {INT32_MIN, 0} was 0
TEST_P(Limits, MinIsExactForEveryIntegerDtype) {
  auto ints = [](std::vector<int64_t> v, DType d) {
    const int64_t n = static_cast<int64_t>(v.size());
    return Tensor::from_vector(v, {n}, d);
  };
  EXPECT_EQ(ints({3, 0, 5}, dtypes::uint8).min().to_doubles(), (D{0}));
  EXPECT_EQ(ints({255, 7}, dtypes::uint8).min().to_doubles(), (D{7}));
  EXPECT_EQ(ints({INT32_MIN, 0, INT32_MAX}, dtypes::int32).min().to_doubles(), (D{INT32_MIN}));
  EXPECT_EQ(ints({INT64_MIN, 4}, dtypes::int64).min().data<int64_t>(),
            (std::vector<int64_t>{INT64_MIN}));
  EXPECT_EQ(ints({-128, 127}, dtypes::int8).min().to_doubles(), (D{-128}));
  EXPECT_EQ(Tensor::from_vector(std::vector<uint64_t>{UINT64_MAX, 9}, {2}, dtypes::uint64)
                .min()
                .data<uint64_t>(),
            (std::vector<uint64_t>{9}));
  const Tensor m = ints({4, 0, 9, 2, 65535, 1}, dtypes::uint16).reshape({2, 3});
  EXPECT_EQ(m.min({1}).to_doubles(), (D{0, 1}));
  EXPECT_EQ(m.min({0}, true).shape(), (Dims{1, 3}));
  EXPECT_EQ(m.min({0}, true).to_doubles(), (D{2, 0, 1}));
  // floats and bools as before
  EXPECT_EQ(Tensor::from_vector({2.5f, -1.5f}, {2}).min().to_doubles(), (D{-1.5}));
  EXPECT_EQ(
      Tensor::from_vector(std::vector<bool>{true, false}, {2}, dtypes::bool_).min().to_doubles(),
      (D{0}));
}

// A mean over no elements is NaN (0/0), as in torch, numpy and tinygrad; it used to be 0. A
// variance over no more elements than its correction divides by zero too; it used to divide by 1.
TEST_P(Limits, MeanAndVarOverNothingAreNaN) {
  auto all_nan = [](std::vector<double> v) {
    for (double x : v)
      if (!std::isnan(x)) return false;
    return !v.empty();
  };
  EXPECT_TRUE(all_nan(Tensor::ones({0}).mean().to_doubles()));
  EXPECT_TRUE(all_nan(Tensor::ones({2, 0}).mean({1}).to_doubles()));
  EXPECT_EQ(Tensor::ones({2, 0}).mean({0}).numel(), 0);
  EXPECT_TRUE(all_nan(Tensor::ones({1}).var().to_doubles()));
  EXPECT_TRUE(all_nan(Tensor::ones({3, 1}).var({1}).to_doubles()));
  // the count is the reduced axes' product, also when the output is empty
  EXPECT_EQ(Tensor::arange(0, 6, 1, dtypes::float32).reshape({2, 3}).mean({1}).to_doubles(),
            (D{1, 4}));
  EXPECT_EQ(Tensor::from_vector({1.0f, 3.0f}, {2}).var().to_doubles(), (D{2}));
  EXPECT_EQ(Tensor::from_vector({1.0f, 3.0f}, {2}).var({}, false, 0).to_doubles(), (D{1}));
}

TEST(Limits, HandBuiltGraphsAreCheckedWhenWrapped) {
  const Tensor a = Tensor::ones({4}).contiguous();
  const UOp bad = UOp::make(Op::Reshape, dtypes::float32, {a.uop(), shape_to_uop({SInt(3)})});
  expect_error<TensorError>([&] { Tensor::from_uop(bad, {a}); }, "bad reshape");
}

// ---- graph size: linear to build and differentiate, no recursion to drop

TEST(Limits, ReusedTensorsKeepOneCopyOfTheirBuffers) {
  const Tensor x = Tensor::from_vector(std::vector<float>{1, 2}, {2});
  Tensor y = x;
  for (int i = 0; i < 24; ++i) y = y * x + y;  // the buffer list used to double at every step
  EXPECT_EQ(y.storages().size(), 1u);
}

// A graph over many buffers lists each once, in order of first use, and its list of merges is
// dropped without recursion.
TEST(Limits, ManyBuffersAreListedOnceEach) {
  std::vector<Tensor> ws;
  Tensor acc = Tensor::zeros({2});
  for (int i = 0; i < 100000; ++i) {
    ws.push_back(Tensor::from_vector(std::vector<float>{static_cast<float>(i), 1}, {2}));
    acc = acc + ws.back();
    if (i % 3 == 0) acc = acc * ws[static_cast<size_t>(i / 2)];  // an earlier buffer again
  }
  ASSERT_EQ(acc.storages().size(), 100000u);
  for (size_t i = 0; i < ws.size(); i += 9999) EXPECT_EQ(acc.storages()[i], ws[i].storages()[0]);
  ws.clear();
  acc = Tensor::zeros({1});  // the 100k-deep list of merges goes here
  EXPECT_TRUE(acc.storages().empty());
}

// Listing a growing graph at every step (a loop calling storages() or gradient()) keeps one list
// per live tensor: each listed step used to keep its own copy of the list under the later ones,
// n^2/2 buffer references for a chain of n.
TEST(Limits, ListingAGrowingGraphAtEveryStepKeepsOneList) {
  const Tensor first = Tensor::from_vector(std::vector<float>{1, 2}, {2});
  Tensor acc = first;
  for (int i = 0; i < 200; ++i) {
    acc = acc + Tensor::from_vector(std::vector<float>{static_cast<float>(i), 1}, {2});
    ASSERT_EQ(acc.storages().size(), static_cast<size_t>(i + 2));
  }
  // held by `first`, by acc's list, and by nothing else
  EXPECT_LE(first.storages()[0].use_count(), 3);
  EXPECT_EQ(acc.storages()[0], first.storages()[0]);
}

TEST_P(Limits, ASumOverManyBuffersReadsEachOne) {
  Tensor acc = Tensor::zeros({2});
  double want = 0;
  for (int i = 0; i < 300; ++i) {
    acc = acc + Tensor::from_vector(std::vector<float>{static_cast<float>(i), 1}, {2});
    want += i;
  }
  EXPECT_EQ(acc.to_doubles(), (D{want, 300}));
}

// A 100k-op chain and its gradient build, realize (cut into kernels of at most kMaxFusedDepth
// ops) and drop without recursion, with the values of the same chain run on the host.
TEST(Limits, AHundredThousandOpChainBuildsDifferentiatesAndDrops) {
  const int n = 100000;
  const float scale = 1.0001f;
  const Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  // the host's run: y = (y + x)^T, y = y * scale, alternately; the gradient of sum(y) by reverse
  // accumulation through the same steps
  std::array<float, 4> y_host{1, 2, 3, 4}, g_y{1, 1, 1, 1}, g_x{0, 0, 0, 0};
  const std::array<float, 4> x_host = y_host;
  auto transposed = [](const std::array<float, 4>& m) {
    return std::array<float, 4>{m[0], m[2], m[1], m[3]};
  };
  for (int i = 0; i < n; ++i) {
    if (i % 2) {
      for (float& e : y_host) e *= scale;
    } else {
      for (size_t k = 0; k < 4; ++k) y_host[k] += x_host[k];
      y_host = transposed(y_host);
    }
  }
  for (int i = n - 1; i >= 0; --i) {
    if (i % 2) {
      for (float& e : g_y) e *= scale;
    } else {
      g_y = transposed(g_y);
      for (size_t k = 0; k < 4; ++k) g_x[k] += g_y[k];
    }
  }
  {
    Tensor y = x;
    for (int i = 0; i < n; ++i) y = i % 2 ? y * static_cast<double>(scale) : (y + x).transpose();
    EXPECT_EQ(y.shape(), (Dims{2, 2}));
    const std::vector<Tensor> g = y.sum().gradient({x});
    ASSERT_EQ(g.size(), 1u);
    EXPECT_EQ(g[0].shape(), (Dims{2, 2}));
    const std::vector<float> got = y.data<float>(), got_g = Tensor(g[0]).data<float>();
    for (size_t k = 0; k < 4; ++k) {
      EXPECT_NEAR(got[k], y_host[k], 1e-3 * std::abs(y_host[k])) << k;
      EXPECT_NEAR(got_g[k], g_x[k], 1e-3 * std::abs(g_x[k])) << k;
    }
  }  // the chain and its gradient graph are released here without recursion
  EXPECT_EQ(x.shape(), (Dims{2, 2}));
}

INSTANTIATE_TEST_SUITE_P(Devices, Limits, ::testing::ValuesIn(test_devices()), device_test_name);
