// Where devices could disagree or crash: integer division at the dtype limits and by zero (the
// spec: integers wrap, division by zero is an error that names the op), and graphs deep enough
// that a recursive walk would overflow the stack. Every device gives the same values or the same
// error.
#include <gtest/gtest.h>

#include <random>

#include "on_device.h"
#include "runtime/kernel_error.h"
#include "tensor/function.h"
#include "tensor/storage.h"
#include "tensor/tensor.h"

using namespace tinyrw;

namespace {

class DeviceEdges : public OnDevice {};

const Op kDivOps[] = {Op::CDiv, Op::CMod, Op::FloorDiv, Op::FloorMod};
const DType kIntDtypes[] = {dtypes::int8,  dtypes::int16,  dtypes::int32,  dtypes::int64,
                            dtypes::uint8, dtypes::uint16, dtypes::uint32, dtypes::uint64};

// The elements of v wrapped to d, as d holds them (-1 is an unsigned type's maximum).
Tensor ints(const std::vector<i128>& v, DType d) {
  const int64_t n = static_cast<int64_t>(v.size());
  if (d.is_unsigned()) {
    std::vector<uint64_t> w;
    for (i128 x : v) w.push_back(static_cast<uint64_t>(truncate_int(d, x)));
    return Tensor::from_vector(w, {n}, d).realize();
  }
  std::vector<int64_t> w;
  for (i128 x : v) w.push_back(static_cast<int64_t>(truncate_int(d, x)));
  return Tensor::from_vector(w, {n}, d).realize();
}

// The elements of t, exactly, whatever its integer dtype.
std::vector<i128> values(Tensor t) {
  std::vector<i128> out;
  if (t.dtype().is_unsigned()) {
    for (uint64_t x : t.data<uint64_t>()) out.push_back(x);
  } else {
    for (int64_t x : t.data<int64_t>()) out.push_back(x);
  }
  return out;
}

// The spec's formula for op on exact integers, then wrapped to d.
i128 spec_value(Op op, DType d, i128 a, i128 b) {
  i128 q = a / b;  // truncates
  if ((op == Op::FloorDiv || op == Op::FloorMod) && (a % b != 0) && ((a < 0) != (b < 0))) --q;
  const i128 r = op == Op::CDiv || op == Op::FloorDiv ? q : a - b * q;
  return truncate_int(d, r);
}

}  // namespace

// INT_MIN / -1 wraps (the quotient 2^(n-1) is INT_MIN again, the remainder 0): no SIGFPE on CPU,
// and the same values as INTERP and the spec for every int dtype.
TEST_P(DeviceEdges, DivisionAtTheDtypeLimitsWraps) {
  for (DType d : kIntDtypes) {
    const i128 lo = d.int_min(), hi = d.int_max();
    const std::vector<i128> a{lo, lo, lo, hi, hi, lo + 1, 7, -7, 7, -7};
    const i128 big = lo == 0 ? hi : lo;  // the largest divisor (an unsigned type's min is 0)
    const std::vector<i128> b{-1, 1, big, -1, big, -1, -2, 2, 2, -2};
    const Tensor ta = ints(a, d), tb = ints(b, d);
    for (Op op : kDivOps) {
      const std::vector<i128> got = values(Tensor::alu(op, {ta, tb}));
      for (size_t i = 0; i < a.size(); ++i) {
        const i128 x = truncate_int(d, a[i]), y = truncate_int(d, b[i]);
        EXPECT_TRUE(got[i] == spec_value(op, d, x, y))
            << "got " << to_string(got[i]) << " want " << to_string(spec_value(op, d, x, y)) << ": "
            << op_name(op) << " " << d.repr() << " " << to_string(x) << ", " << to_string(y);
      }
    }
  }
}

// Division or modulo by zero is an error naming the op, on every device and dtype, also when
// only one element divides by zero and when the result is reduced.
TEST_P(DeviceEdges, DivisionByZeroIsAnErrorNamingTheOp) {
  for (DType d : kIntDtypes) {
    const Tensor a = ints({5, 6, 7, 8}, d), b = ints({1, 2, 0, 4}, d);
    for (Op op : kDivOps) {
      for (bool reduce : {false, true}) {
        Tensor q = Tensor::alu(op, {a, b});
        if (reduce) q = q.sum();
        try {
          q.realize();
          ADD_FAILURE() << op_name(op) << " " << d.repr() << ": no error";
        } catch (const KernelError& e) {
          EXPECT_NE(std::string(e.what()).find("division by zero in " + std::string(op_name(op))),
                    std::string::npos)
              << e.what();
        }
      }
    }
  }
}

// An assignment whose value divides by zero raises and leaves the target as it was: no
// element is half written (INTERP stops at the element, CPU runs to the end), through a whole
// buffer, a view of it, and a custom kernel alike.
TEST_P(DeviceEdges, FailedAssignmentLeavesTheTargetAsItWas) {
  const Tensor a = ints({1, 2, 3, 4}, dtypes::int32), b = ints({1, 1, 1, 0}, dtypes::int32);
  auto contents = [](const std::shared_ptr<Storage>& s) {
    std::vector<int64_t> out;
    for (int64_t i = 0; i < s->size; ++i)
      out.push_back(static_cast<int64_t>(load_element(*s, i).as_int()));
    return out;
  };
  const std::vector<int64_t> before{10, 20, 30, 40};
  Tensor t = ints({10, 20, 30, 40}, dtypes::int32);
  const std::shared_ptr<Storage> ts = t.storages().at(0);
  EXPECT_THROW(t.assign(Tensor::alu(Op::CDiv, {a, b})).realize(), KernelError);
  EXPECT_EQ(contents(ts), before);
  EXPECT_TRUE(ts->executed_assignments.empty());

  Tensor u = ints({10, 20, 30, 40}, dtypes::int32);
  const std::shared_ptr<Storage> us = u.storages().at(0);
  EXPECT_THROW(u.setitem({{1, 4, 1}}, Tensor::alu(Op::FloorMod, {a, b}).shrink({{1, 4}})).realize(),
               KernelError);
  EXPECT_EQ(contents(us), before);

  // a custom kernel writing its first argument in place: out[i] = a[i] / b[i]
  Tensor out = ints({10, 20, 30, 40}, dtypes::int32);
  const std::shared_ptr<Storage> os = out.storages().at(0);
  auto divide = [](const std::vector<UOp>& p) {
    const UOp i = UOp::range(UOp::cint(4), 0);
    const UOp q = kernel_index(p[1], {i}).alu(Op::CDiv, {kernel_index(p[2], {i})});
    return kernel_sink({kernel_end(kernel_store(kernel_index(p[0], {i}), q), {i})}, "divide");
  };
  try {
    custom_kernel({out, a, b}, divide)[0].realize();
    ADD_FAILURE() << "no error";
  } catch (const KernelError& e) {
    EXPECT_NE(std::string(e.what()).find("division by zero in CDiv"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(contents(os), before);
}

INSTANTIATE_TEST_SUITE_P(Devices, DeviceEdges, ::testing::ValuesIn(test_devices()),
                         device_test_name);

namespace {

// x, then `n` elementwise ops cycling through add, mul, sub, max, neg, where (values stay small;
// y is used once per op, the graph is a chain)
Tensor mixed_chain(const Tensor& x, int n) {
  Tensor y = x;
  for (int i = 0; i < n; ++i) {
    switch (i % 6) {
      case 0:
        y = y + 1.0;
        break;
      case 1:
        y = y * 0.5;
        break;
      case 2:
        y = y - 0.25;
        break;
      case 3:
        y = y.maximum(x);
        break;
      case 4:
        y = -y;
        break;
      default:
        y = x.lt(x * 0.5).where(y, x);
        break;
    }
  }
  return y;
}

}  // namespace

// A kernel of 20,000 fused elementwise ops: every walk over it (lowering, linearizing, the LLVM
// emitter) is iterative, so it realizes on every device with the values INTERP gives.
TEST_P(DeviceEdges, DeepElementwiseChain) {
  const Tensor x = Tensor::from_vector(std::vector<float>{1, -2, 3, -4}, {4}).realize();
  std::vector<float> want = x.clone().data<float>();
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    for (size_t k = 0; k < want.size(); ++k) {
      const float xv = std::vector<float>{1, -2, 3, -4}[k];
      float& y = want[k];
      switch (i % 6) {
        case 0:
          y = y + 1.0f;
          break;
        case 1:
          y = y * 0.5f;
          break;
        case 2:
          y = y - 0.25f;
          break;
        case 3:
          y = std::max(y, xv);
          break;
        case 4:
          y = -y;
          break;
        default:
          y = xv < xv * 0.5f ? y : xv;
          break;
      }
    }
  }
  EXPECT_EQ(mixed_chain(x, n).data<float>(), want);
}

// 10,000 alternating reshapes and transposes of one buffer (5,000 each): the index math of each
// level is built and simplified without recursion, and the chain is cut every kMaxFusedDepth ops
// (LLVM's time on one kernel holding it all was 220 s on CPU; the cut kernels take about a second).
TEST_P(DeviceEdges, DeepMovementChain) {
  const int pairs = 5000;
  std::vector<float> v(12);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  const Tensor x = Tensor::from_vector(v, {3, 4}).realize();
  Tensor y = x;
  for (int i = 0; i < pairs; ++i) y = y.transpose().reshape({3, 4});
  // transpose of a 3x4 read row-major as 3x4: a permutation of 12 elements, applied `pairs` times
  std::vector<size_t> perm(12);  // y.flat[k] = prev.flat[perm[k]]
  for (size_t k = 0; k < 12; ++k) {
    const size_t r = k / 3, c = k % 3;  // element (r, c) of the 4x3 transpose
    perm[k] = c * 4 + r;
  }
  std::vector<float> want = v;
  for (int i = 0; i < pairs; ++i) {
    std::vector<float> next(12);
    for (size_t k = 0; k < 12; ++k) next[k] = want[perm[k]];
    want = next;
  }
  EXPECT_EQ((y + 0.0).data<float>(), want);
}

// The chain of elementwise ops fused into one kernel is at most kMaxFusedDepth long: a longer one
// is realized in pieces (here 3 cuts and the root), with the values of the fused chain.
TEST_P(DeviceEdges, LongChainsAreCutAtTheFusedDepthLimit) {
  const Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3}).realize();
  for (const int n : {kMaxFusedDepth - 1, 3 * kMaxFusedDepth + 10}) {
    Tensor y = x;
    std::vector<float> want{1, 2, 3};
    for (int i = 0; i < n; ++i) {
      y = i % 2 ? y * 0.5 : y + x;
      for (size_t k = 0; k < want.size(); ++k)
        want[k] = i % 2 ? want[k] * 0.5f : want[k] + static_cast<float>(k + 1);
    }
    y.realize();
    EXPECT_EQ(last_kernel_count(), n / kMaxFusedDepth + 1) << n << " ops";
    EXPECT_EQ(y.data<float>(), want) << n << " ops";
  }
}

// A chain that reaches the fused depth limit at a broadcast, or at a view of one, is cut at the
// broadcast's source (rules/rangeify.rw's realize map, depth_limit_broadcast): the cut stores the 3
// elements of the source, never the 3000 of the broadcast. The lengths tried put each op near the
// end of the chain at the limit once (the EXPAND, then the transpose of it, where the cut stored
// 3000).
TEST_P(DeviceEdges, TheDepthLimitCutsABroadcastAtItsSource) {
  const Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3}).realize();
  for (int n = kMaxFusedDepth - 8; n <= kMaxFusedDepth + 2; ++n) {
    Tensor y = x;
    for (int i = 0; i < n; ++i) y = y + 1.0;
    const Tensor wide = y.reshape({1, 3}).expand({1000, 3});
    const float k = static_cast<float>(n);
    const std::vector<float> want{1000 * (1 + k), 1000 * (2 + k), 1000 * (3 + k)};
    for (Tensor s : {wide.sum({0}), wide.transpose().sum({1})}) {
      s.realize();
      const std::vector<int64_t>& outputs = last_kernel_outputs();
      EXPECT_LE(outputs.size(), 2u) << n << " ops";  // at most one cut, and the sum
      for (const int64_t size : outputs) EXPECT_LE(size, 3) << n << " ops";
      EXPECT_EQ(s.data<float>(), want) << n << " ops";
    }
  }
}

// A view that an assignment writes through is never cut into a copy, however deep: the values
// land in the target buffer where the view's index map puts them. (The buffer is read back
// through the same chain continued until its permutation is the identity.)
TEST_P(DeviceEdges, AssignmentThroughADeepViewChainWritesTheBuffer) {
  const Tensor t = Tensor::from_vector(std::vector<float>(12, 0.0f), {3, 4}).realize();
  auto level = [](const Tensor& u) { return u.transpose().reshape({3, 4}); };
  auto q = [](size_t k) { return (k % 3) * 4 + k / 3; };  // level(u).flat[k] = u.flat[q(k)]
  const int pairs = kMaxFusedDepth;                       // 2 * kMaxFusedDepth movement ops
  std::vector<size_t> p(12), id(12);                      // view.flat[k] = t.flat[p[k]]
  for (size_t k = 0; k < 12; ++k) p[k] = id[k] = k;
  int order = 0;  // the levels after which the chain is the identity again
  for (std::vector<size_t> r = id; order == 0 || r != id;) {
    for (size_t& e : r) e = q(e);
    ++order;
  }
  Tensor view = t;
  for (int i = 0; i < pairs; ++i) {
    view = level(view);
    for (size_t& e : p) e = q(e);
  }
  std::vector<float> v(12);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  view.assign(Tensor::from_vector(v, {3, 4})).realize();
  std::vector<float> want(12);
  for (size_t k = 0; k < 12; ++k) want[p[k]] = v[k];
  Tensor back = view;
  for (int i = pairs % order; i % order != 0; ++i) back = level(back);
  EXPECT_EQ(back.data<float>(), want);
}

// Products of 64-bit elements wrap (their exact value may not fit in 128 bits), and bool with
// bool stays bool: the sweep's first findings.
TEST_P(DeviceEdges, WideProductsWrapAndBoolsStayBool) {
  const Tensor a = ints({-1, -2, static_cast<i128>(1) << 63}, dtypes::uint64);
  EXPECT_TRUE(values(a * a) == (std::vector<i128>{1, 4, 0}));
  const Tensor p = ints({1, 0, 1}, dtypes::bool_), q = ints({1, 1, 0}, dtypes::bool_);
  EXPECT_EQ(p.bitwise_or(q).dtype(), dtypes::bool_);
  EXPECT_EQ(p.bitwise_and(q).data<int64_t>(), (std::vector<int64_t>{1, 0, 0}));
}

// A view (pad, flip, expand, reshape) of a value the rules fold into a constant realizes (it
// crashed in the rangeify helpers). (x%x folds to 0; (x*y)%y, used here before, no longer folds
// for a uint8 x*y that may wrap.)
TEST_P(DeviceEdges, ViewsOfAFoldedValue) {
  const Tensor x = ints({1, 2, 3, 4}, dtypes::uint8);
  const Tensor m = Tensor::alu(Op::FloorMod, {x, x});
  EXPECT_EQ(values(m), (std::vector<i128>{0, 0, 0, 0}));
  EXPECT_EQ(m.pad({{1, 2}}).shrink({{1, 5}}).data<int64_t>().size(), 4u);
  EXPECT_EQ(m.flip({0}).data<int64_t>().size(), 4u);
  EXPECT_EQ(m.reshape({2, 2}).data<int64_t>().size(), 4u);
}

// Tensor ints wrap (tinyspec), so identities of exact integers must not fold an expression whose
// value may have wrapped (issue 22; found by the device sweep). Each case's exact-integer fold
// gives a different value from the wrapped arithmetic the devices do.
TEST_P(DeviceEdges, ModOfAWrappedProductIsNotFoldedToZero) {
  // uint8 252*255 wraps to 4, and 4 % 255 is 4 (the fold (x*y)%y -> 0 said 0)
  const Tensor x = ints({252, 3, 16}, dtypes::uint8), y = ints({255, 5, 16}, dtypes::uint8);
  EXPECT_EQ(values(Tensor::alu(Op::FloorMod, {x * y, y})), (std::vector<i128>{4, 0, 0}));
  // int64: -5*MAX wraps to MIN+5, whose floor-mod by MAX is 4; MAX*MAX wraps to 1 (not 0)
  const i128 mn = INT64_MIN, mx = INT64_MAX;
  const std::vector<i128> a = {mn, -5, -4, mn, -5, mx}, b = {-1, 5, 1, -1, mx, mx};
  std::vector<i128> want;
  for (size_t i = 0; i < a.size(); ++i)
    want.push_back(
        spec_value(Op::FloorMod, dtypes::int64, truncate_int(dtypes::int64, a[i] * b[i]), b[i]));
  EXPECT_EQ(want[4], 4);
  EXPECT_EQ(want[5], 1);
  EXPECT_EQ(values(Tensor::alu(Op::FloorMod, {ints(a, dtypes::int64) * ints(b, dtypes::int64),
                                              ints(b, dtypes::int64)})),
            want);
}

TEST_P(DeviceEdges, DivisionOfAWrappedProductIsNotFolded) {
  // (x*y)//y is not x, and (x*4)//2 is not x*2, once the product wraps
  const Tensor x = ints({252, 100, 7}, dtypes::uint8), y = ints({255, 3, 2}, dtypes::uint8);
  EXPECT_EQ(values(Tensor::alu(Op::FloorDiv, {x * y, y})),
            (std::vector<i128>{0, 300 % 256 / 3, 7}));
  EXPECT_EQ(values(Tensor::alu(Op::FloorDiv, {x * 4, Tensor::full({3}, 2, dtypes::uint8)})),
            (std::vector<i128>{(252 * 4 % 256) / 2, (400 % 256) / 2, 14}));
}

TEST_P(DeviceEdges, ComparisonOfAWrappedValueIsNotFoldedByRange) {
  // x, y in [2, 255]: the exact x*y is at least 4, but 16*16 wraps to 0 and 255*255 to 1
  const Tensor two = ints({2, 2, 2}, dtypes::uint8);
  const Tensor x = ints({16, 2, 255}, dtypes::uint8).maximum(two);
  const Tensor y = ints({16, 3, 255}, dtypes::uint8).maximum(two);
  EXPECT_EQ(values((x * y).lt(Tensor::full({3}, 4, dtypes::uint8)).cast(dtypes::uint8)),
            (std::vector<i128>{1, 0, 1}));
  // x*4 < 8 is not x < 2 when x*4 wraps (64*4 is 0)
  EXPECT_EQ(values((x * 4).lt(Tensor::full({3}, 8, dtypes::uint8)).cast(dtypes::uint8)),
            (std::vector<i128>{0, 0, 0}));
  const Tensor z = ints({64, 1, 65}, dtypes::uint8);
  EXPECT_EQ(values((z * 4).lt(Tensor::full({3}, 8, dtypes::uint8)).cast(dtypes::uint8)),
            (std::vector<i128>{1, 1, 1}));
  // max(x, x+1) is not x+1 when x+1 wraps
  EXPECT_EQ(values(z.maximum(z + 191)), (std::vector<i128>{255, 192, 65}));
}

// A fold's new constant must fit the dtype: int8 (x//16)//16 is not x//256 (256 is 0 in int8).
TEST_P(DeviceEdges, FoldedConstantsFitTheDtype) {
  const Tensor x = ints({-128, -17, -1, 0, 15, 127}, dtypes::int8);
  const Tensor c = Tensor::full({6}, 16, dtypes::int8);
  EXPECT_EQ(values(Tensor::alu(Op::FloorDiv, {Tensor::alu(Op::FloorDiv, {x, c}), c})),
            (std::vector<i128>{-1, -1, -1, 0, 0, 0}));
}

// A float cast to an int truncates toward zero and wraps like integer arithmetic; NaN, infinities
// and magnitudes of 2^119 or more give 0 (spec/tinyspec.tex). CPU gave LLVM's poison before
// (uint64 max through float32 back to uint64 was all ones on CPU, 0 on INTERP).
TEST_P(DeviceEdges, FloatToIntCastsOutOfRangeAreDefined) {
  const std::vector<double> f{1e10, -3e9, 2.5e19, 1e30, 1e36, -1.5, NAN, INFINITY, 300.75, -0.5};
  const Tensor x = Tensor::from_vector(f, {static_cast<int64_t>(f.size())}, dtypes::float64);
  for (DType d : kIntDtypes) {
    for (DType via : {dtypes::float64, dtypes::float32}) {
      const std::vector<i128> got = values(x.cast(via).cast(d));
      for (size_t i = 0; i < f.size(); ++i) {
        const double v =
            via == dtypes::float32 ? static_cast<double>(static_cast<float>(f[i])) : f[i];
        const i128 want = std::isfinite(v) && std::fabs(v) < 0x1p119
                              ? truncate_int(d, static_cast<i128>(std::trunc(v)))
                              : 0;
        EXPECT_TRUE(got[i] == want) << d.repr() << " via " << via.repr() << " of " << f[i]
                                    << ": got " << to_string(got[i]) << " want " << to_string(want);
      }
    }
  }
}

namespace {
// A pad of a shrink of a pad whose inner gate never holds where the outer one does: the inner read
// folds to an Invalid index, which poisons the index math around it and reads 0 (it failed the
// kernel's bounds proof with "a constant Invalid"). And a buffer view read at such an index by one
// consumer and in order by another: the dead read is 0 and leaves no loop of its own behind (it
// failed with "a RANGE without its END").
TEST_P(DeviceEdges, ReadsThatAPadsGatesNeverReachAreZero) {
  std::vector<float> v(24);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i + 1);
  Tensor a = Tensor::from_vector(v, {4, 6}).realize();
  auto half = [](const Tensor& t) { return t.shrink({{0, 4}, {0, 3}}).pad({{0, 0}, {3, 0}}); };
  EXPECT_EQ(half(half(a + a)).to_doubles(), std::vector<double>(24, 0.0));
  Tensor x = Tensor::from_vector(std::vector<float>(v.begin(), v.begin() + 12), {4, 3}).realize();
  const std::vector<double> got =
      (x.pad({{0, 0}, {3, 0}}).shrink({{0, 4}, {0, 3}}) + x.flip({1})).to_doubles();
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 3; ++c)
      EXPECT_EQ(got[static_cast<size_t>(r * 3 + c)], v[static_cast<size_t>(r * 3 + (2 - c))]);
}
}  // namespace
