// UOp's graph builders (ir/builders.cpp): the node each builds, the shape it gives, the identity
// cases that build nothing, and the GraphError a bad argument raises where it is made.
#include <gtest/gtest.h>

#include <string>

#include "ir/builders.h"
#include "ir/uop.h"
#include "tests/expect_error.h"

using namespace tinyrw;

namespace {

UOp tensor(Shape s) {
  int64_t n = 1;
  for (const SInt& d : s) n *= d.value();
  return buffer_view(buffer_uop(dtypes::float32, 0, n, "CPU"), s);
}

// Runs f, which must raise a GraphError whose message contains `what`.
}  // namespace

TEST(Builders, Reshape) {
  const UOp t = tensor({2, 3, 4});
  const UOp r = t.reshape({6, 4});
  EXPECT_EQ(r.op(), Op::Reshape);
  EXPECT_EQ(r.src(0), t);
  EXPECT_EQ(r.shape(), (Shape{6, 4}));
  EXPECT_EQ(r.dtype(), dtypes::float32);
  EXPECT_EQ(t.reshape({2, 3, 4}), t);  // the same shape builds nothing
  expect_error<GraphError>([&] { t.reshape({5, 4}); }, "RESHAPE: bad reshape: (2, 3, 4) -> (5, 4)");
  expect_error<GraphError>([&] { t.reshape({-24}); }, "shape can't contain negative numbers");
  expect_error<GraphError>([] { UOp::make(Op::Sink).reshape({1}); }, "doesn't have a shape");
}

TEST(Builders, Permute) {
  const UOp t = tensor({2, 3, 4});
  const UOp p = t.permute({2, 0, 1});
  EXPECT_EQ(p.op(), Op::Permute);
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(t.permute({0, 1, 2}).op(), Op::Permute);  // built even when it is the identity
  expect_error<GraphError>([&] { t.permute({0, 0, 1}); }, "invalid permutation");
  expect_error<GraphError>([&] { t.permute({0, 1}); }, "invalid permutation");
  expect_error<GraphError>([&] { t.permute({0, 1, 3}); }, "invalid permutation");
}

TEST(Builders, Expand) {
  const UOp t = tensor({2, 1, 4});
  const UOp e = t.expand({2, 5, 4});
  EXPECT_EQ(e.op(), Op::Expand);
  EXPECT_EQ(e.shape(), (Shape{2, 5, 4}));
  EXPECT_EQ(t.expand({2, 1, 4}), t);
  expect_error<GraphError>([&] { t.expand({3, 5, 4}); }, "cannot expand (2, 1, 4) to (3, 5, 4)");
  expect_error<GraphError>([&] { t.expand({5, 4}); }, "ranks differ");
}

TEST(Builders, PadAndShrink) {
  const UOp t = tensor({2, 3});
  const UOp p = t.pad({1, 0}, {4, 5});
  EXPECT_EQ(p.op(), Op::Pad);
  EXPECT_EQ(p.shape(), (Shape{4, 5}));
  EXPECT_EQ(uop_to_shape(p.src(1)), (Shape{1, 0}));
  EXPECT_EQ(t.pad({0, 0}, {2, 3}), t);
  expect_error<GraphError>([&] { t.pad({3, 0}, {4, 3}); }, "invalid pad of (2, 3)");
  expect_error<GraphError>([&] { t.pad({0}, {2}); }, "invalid pad");

  const UOp s = t.shrink({1, 1}, {1, 2});
  EXPECT_EQ(s.op(), Op::Shrink);
  EXPECT_EQ(s.shape(), (Shape{1, 2}));
  EXPECT_EQ(t.shrink({0, 0}, {2, 3}), t);
  EXPECT_EQ(t.shrink({1, 0}, {1, 3}).op(), Op::Shrink);  // same rank, elements cut
  expect_error<GraphError>([&] { t.shrink({1, 2}, {1, 2}); }, "invalid shrink of (2, 3)");
  expect_error<GraphError>([&] { t.shrink({0, 0}, {2, 3, 1}); }, "invalid shrink");
  // a shrink undoes the pad it is the gradient of
  EXPECT_EQ(p.shrink({1, 0}, {2, 3}).shape(), t.shape());
}

TEST(Builders, Flip) {
  const UOp t = tensor({2, 3});
  const UOp f = t.flip({true, false});
  EXPECT_EQ(f.op(), Op::Flip);
  EXPECT_EQ(f.arg(), Arg::tuple({Arg::boolean(true), Arg::boolean(false)}));
  EXPECT_EQ(f.shape(), t.shape());
  expect_error<GraphError>([&] { t.flip({true}); }, "bad flip");
}

TEST(Builders, Reduce) {
  const UOp t = tensor({2, 3, 4});
  const UOp first = t.reduce_first(Op::Add, 2);
  EXPECT_EQ(first.op(), Op::Reduce);
  EXPECT_EQ(first.arg(), Arg::tuple({Arg::op(Op::Add), Arg::integer(2)}));
  EXPECT_EQ(first.shape(), (Shape{4}));
  expect_error<GraphError>([&] { t.reduce_first(Op::Add, 4); }, "invalid type for axis");
  expect_error<GraphError>([&] { t.reduce_first(Op::Sub, 1); }, "cannot reduce with SUB");

  // axes 0 and 2: permuted to the front, reduced, kept as size 1 with keepdim
  const UOp r = t.reduce(Op::Max, {2, 0});
  EXPECT_EQ(r.shape(), (Shape{3}));
  EXPECT_EQ(r.op(), Op::Reduce);
  EXPECT_EQ(r.src(0), t.permute({0, 2, 1}));
  const UOp k = t.r(Op::Max, {0, 2});
  EXPECT_EQ(k.shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(k, r.reshape({1, 3, 1}));
  EXPECT_EQ(t.reduce(Op::Add, {0, 1, 2}).shape(), Shape{});
  expect_error<GraphError>([&] { t.reduce(Op::Add, {3}); },
                           "axis 3 is out of range for shape (2, 3, 4)");
  expect_error<GraphError>([&] { t.reduce(Op::Add, {-1}); }, "axis -1 is out of range");
  expect_error<GraphError>([&] { t.r(Op::Add, {1, 1}); }, "axis 1 appears more than once");
  expect_error<GraphError>([&] { t.r(Op::Where, {1}); }, "cannot reduce with WHERE");
}

TEST(Builders, ReduceOverRanges) {
  const UOp i = UOp::range(UOp::cint(4), 0);
  const UOp x = UOp::variable("x", 0, 9, dtypes::int32);
  const UOp r = x.reduce_over(Op::Add, std::vector<UOp>{i});
  EXPECT_EQ(r.op(), Op::Reduce);
  EXPECT_EQ(r.arg(), Arg::tuple({Arg::op(Op::Add), Arg::integer(0)}));  // the kernel AST's (op, 0)
  EXPECT_EQ(r.nsrc(), 2u);
  EXPECT_EQ(r.src(1), i);
  expect_error<GraphError>([&] { x.reduce_over(Op::Add, std::vector<UOp>{UOp::cint(3)}); },
                           "reduces over RANGEs, got CONST");
  expect_error<GraphError>([&] { x.reduce_over(Op::CmpLt, std::vector<UOp>{i}); },
                           "cannot reduce with");
}

TEST(Builders, IndexAndAfter) {
  const UOp t = tensor({2, 3});
  const UOp i = UOp::range(UOp::cint(2), 0);
  const UOp idx = t.index({i});
  EXPECT_EQ(idx.op(), Op::Index);
  EXPECT_EQ(idx.dtype(), dtypes::float32);
  EXPECT_EQ(idx.shape(), (Shape{3}));
  expect_error<GraphError>([&] { t.index({UOp::cfloat(1)}); },
                           "INDEX: an index must be an integer");
  // the shape check runs when the shape is asked
  EXPECT_THROW(t.index({i, i, i}).shape(), GraphError);

  const UOp store = UOp::make(Op::Store, dtypes::void_, {t, t});
  const UOp a = t.after({store});
  EXPECT_EQ(a.op(), Op::After);
  EXPECT_EQ(a.shape(), t.shape());
  expect_error<GraphError>([&] { t.after(std::span<const UOp>{}); },
                           "AFTER: needs at least one dependency");
}

TEST(Builders, BufferViews) {
  const UOp buf = buffer_uop(dtypes::int32, 7, 6, "CPU");
  EXPECT_EQ(buf.arg().field("slot"), Arg::integer(7));
  EXPECT_EQ(buf.arg().field("size"), Arg::integer(6));
  EXPECT_EQ(buf.arg().field("device"), Arg::string("CPU"));
  const UOp v = buffer_view(buf, {2, 3});
  EXPECT_TRUE(is_buffer_view(v));
  // a view in the buffer's own shape is still built: a tensor never holds a bare BUFFER
  EXPECT_TRUE(is_buffer_view(buffer_view(buf, {6})));
  EXPECT_FALSE(is_buffer_view(buf));
  EXPECT_FALSE(is_buffer_view(v.reshape({3, 2})));
  EXPECT_FALSE(is_buffer_view(v.permute({1, 0})));
  expect_error<GraphError>([&] { buffer_view(v, {6}); },
                           "a buffer view needs a BUFFER, got RESHAPE");
}

TEST(Builders, Shapes) {
  EXPECT_EQ(to_shape({2, 3}), (Shape{2, 3}));
  EXPECT_EQ(to_dims(Shape{2, 3}), (Dims{2, 3}));
  EXPECT_EQ(to_dims(Shape{}), Dims{});
  const UOp n = UOp::variable("n", 1, 8);
  EXPECT_THROW(to_dims(Shape{SInt(n)}), GraphError);
  // shape() without the copy
  const UOp t = tensor({2, 3});
  EXPECT_TRUE(t.shape_is({2, 3}));
  EXPECT_FALSE(t.shape_is({3, 2}));
  EXPECT_NO_THROW(t.check_shape());
  const UOp bad = UOp::make(Op::Reshape, dtypes::float32, {t, shape_to_uop({5})});
  expect_error<GraphError>([&] { bad.check_shape(); }, "RESHAPE: bad reshape: (2, 3) -> (5,)");
  expect_error<GraphError>([&] { bad.shape_is({5}); }, "bad reshape");
  expect_error<GraphError>([] { UOp::make(Op::Sink).check_shape(); }, "SINK doesn't have a shape");
}

// The table reaches every builder by name with the same checks.
TEST(Builders, ByName) {
  const UOp t = tensor({2, 3});
  auto ints = [](std::initializer_list<int64_t> v) {
    std::vector<Arg> out;
    for (int64_t x : v) out.push_back(Arg::integer(x));
    return Arg::tuple(std::move(out));
  };
  auto call = [&](std::string_view name, std::vector<BuilderArg> args) {
    return call_uop_builder(name, t, args);
  };
  EXPECT_EQ(call("reshape", {ints({3, 2})}), t.reshape({3, 2}));
  EXPECT_EQ(call("reshape", {shape_to_uop({3, 2})}), t.reshape({3, 2}));
  EXPECT_EQ(call("permute", {ints({1, 0})}), t.permute({1, 0}));
  EXPECT_EQ(call("expand", {ints({2, 3})}), t);
  EXPECT_EQ(call("pad", {ints({1, 0}), ints({3, 3})}), t.pad({1, 0}, {3, 3}));
  EXPECT_EQ(call("shrink", {ints({0, 1}), ints({2, 2})}), t.shrink({0, 1}, {2, 2}));
  EXPECT_EQ(call("flip", {Arg::tuple({Arg::boolean(false), Arg::boolean(true)})}),
            t.flip({false, true}));
  EXPECT_EQ(call("reduce", {Arg::op(Op::Add), ints({1})}), t.reduce(Op::Add, {1}));
  EXPECT_EQ(call("r", {Arg::op(Op::Add), ints({1})}), t.r(Op::Add, {1}));
  const UOp i = UOp::range(UOp::cint(2), 0);
  EXPECT_EQ(call("index", {i}), t.index({i}));
  EXPECT_EQ(call("reduce_over", {Arg::op(Op::Max), i}),
            t.reduce_over(Op::Max, std::vector<UOp>{i}));
  EXPECT_EQ(call("cast", {Arg::dtype(dtypes::int32)}), t.cast(dtypes::int32));
  EXPECT_EQ(call("bitcast", {Arg::dtype(dtypes::int32)}), t.bitcast(dtypes::int32));
  const UOp store = UOp::make(Op::Store, dtypes::void_, {t, t});
  EXPECT_EQ(call("after", {store}), t.after({store}));
  const UOp c = UOp::cbool(true);
  EXPECT_EQ(call_uop_builder("where", c, std::vector<BuilderArg>{t, t}), c.where(t, t));

  expect_error<GraphError>([&] { call("reshape", {}); },
                           "x.reshape(shape): 0 argument(s) given, expects 1");
  expect_error<GraphError>([&] { call("reshape", {Arg::integer(3)}); },
                           "reshape: argument 1 must be a shape");
  expect_error<GraphError>([&] { call("permute", {ints({0, 0})}); }, "invalid permutation");
  expect_error<GraphError>(
      [&] {
        call("flip", {ints({0, 1})});
      },
      "flip: argument 1 must be a tuple of bools");
  expect_error<GraphError>(
      [&] {
        call("reduce", {ints({1}), ints({1})});
      },
      "reduce: argument 1 must be an op");
  expect_error<GraphError>([&] { call("cast", {t}); }, "cast: argument 1 must be a dtype");
  expect_error<GraphError>([&] { call("index", {Arg::integer(0)}); },
                           "index: argument 1 must be a UOp");
  expect_error<GraphError>([&] { call("transpose", {}); }, "no UOp builder named 'transpose'");
  for (const UOpBuilder& b : uop_builders()) EXPECT_EQ(find_uop_builder(b.name), &b);
}
