// Custom kernels: UOp kernels run as one unit of the schedule, ordered by the accesses their
// LOAD/STORE operands show; gradients through their outputs, with and without a gradient
// function; inside function(). The cases of tinygrad's test_custom_kernel.py and the CALL cases of
// test_gradient.py (seed 003) and test_function.py (seed 002). Both devices.
#include <gtest/gtest.h>

#include <random>

#include "ir/call.h"
#include "ir/graph.h"
#include "on_device.h"
#include "tensor/function.h"
#include "tensor/tensor.h"
#include "tests/expect_error.h"

using namespace tinyrw;

namespace {

class CustomKernel : public OnDevice {};

using D = std::vector<double>;
using Params = std::vector<UOp>;

Tensor vec(std::vector<float> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Tensor::from_vector(v, {n}).realize();
}
UOp at(const UOp& p, int64_t i) { return kernel_index(p, {UOp::cint(i)}); }

// out[0] = x[0] + 1
UOp add_one(const Params& p) {
  return kernel_sink({kernel_store(at(p[0], 0), at(p[1], 0) + p[1].const_like(1.0))}, "add_one");
}
// c[i] = a[i] * k for every i
std::function<UOp(const Params&)> scale(double k) {
  return [k](const Params& p) {
    const UOp i = UOp::range(UOp::cint(p[1].shape()[0].value()), 0);
    const UOp a = kernel_index(p[1], {i});
    return kernel_sink(
        {kernel_end(kernel_store(kernel_index(p[0], {i}), a * a.const_like(k)), {i})}, "scale");
  };
}

}  // namespace

TEST_P(CustomKernel, LoopOverRanges) {
  const Tensor a = vec({1, 2, 3, 4});
  Tensor c = custom_kernel({Tensor::empty({4}), a}, scale(2))[0];
  EXPECT_EQ(c.to_doubles(), (D{2, 4, 6, 8}));
  EXPECT_EQ(last_kernel_count(), 1);
}

// A body called again over arguments of the same sizes reuses its compiled program (it was
// compiled at every call, 30 ms for a 512x512 matmul); other sizes compile their own.
TEST_P(CustomKernel, LaterCallsReuseTheCompiledBody) {
  const auto body = scale(7.25);  // a constant no other test's kernel has
  Tensor c = custom_kernel({Tensor::empty({5}), vec({1, 2, 3, 4, 5})}, body)[0];
  EXPECT_EQ(c.to_doubles(), (D{7.25, 14.5, 21.75, 29, 36.25}));
  EXPECT_EQ(last_compile_count(), 1);
  c = custom_kernel({Tensor::empty({5}), vec({2, 0, -4, 8, 1})}, body)[0];
  EXPECT_EQ(c.to_doubles(), (D{14.5, 0, -29, 58, 7.25}));
  EXPECT_EQ(last_compile_count(), 0);
  c = custom_kernel({Tensor::empty({3}), vec({4, 2, 1})}, body)[0];
  EXPECT_EQ(c.to_doubles(), (D{29, 14.5, 7.25}));
  EXPECT_EQ(last_compile_count(), 1);
  // one storage as both arguments: scaled in place, whatever the cache holds
  Tensor a = vec({1, 2, 3, 4, 5});
  a = custom_kernel({a, a}, body)[0];
  EXPECT_EQ(a.to_doubles(), (D{7.25, 14.5, 21.75, 29, 36.25}));
}

TEST_P(CustomKernel, ComputedLoopBound) {
  auto kernel = [](const Params& p) {
    const UOp i = UOp::range(UOp::cint(1) + UOp::cint(3), 0);  // a bound the loop computes
    return kernel_sink({kernel_end(
        kernel_store(kernel_index(p[0], {i}), kernel_index(p[1], {i}) * p[1].const_like(3.0)),
        {i})});
  };
  EXPECT_EQ(custom_kernel({Tensor::empty({4}), vec({1, 2, 3, 4})}, kernel)[0].to_doubles(),
            (D{3, 6, 9, 12}));
}

TEST_P(CustomKernel, TwoDimensionalIndexing) {
  const Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}).realize();
  auto transpose = [](const Params& p) {
    const UOp i = UOp::range(UOp::cint(2), 0), j = UOp::range(UOp::cint(3), 1);
    return kernel_sink(
        {kernel_end(kernel_store(kernel_index(p[0], {j, i}), kernel_index(p[1], {i, j})), {i, j})});
  };
  EXPECT_EQ(custom_kernel({Tensor::empty({3, 2}), a}, transpose)[0].to_doubles(),
            (D{1, 4, 2, 5, 3, 6}));
}

TEST_P(CustomKernel, ReadOnlyArgumentsAfterTheKernel) {
  for (bool chained : {false, true})
    for (bool corealize : {false, true}) {
      SCOPED_TRACE(testing::Message() << "chained " << chained << " corealize " << corealize);
      Tensor x = vec({2});
      std::vector<Tensor> r1 = custom_kernel({Tensor::empty({1}), x}, add_one);
      Tensor a = r1[0], x1 = r1[1];
      std::vector<Tensor> r2 = custom_kernel({Tensor::empty({1}), chained ? x1 : x}, add_one);
      Tensor b = r2[0], x2 = r2[1];
      if (corealize) {
        Tensor y = x1 + b;
        Tensor::realize_all({&y, &x2});
        EXPECT_EQ(y.to_doubles(), (D{5}));
      } else {
        EXPECT_EQ((x1 + x2).to_doubles(), (D{4}));
      }
      EXPECT_EQ(a.to_doubles(), (D{3}));
      EXPECT_EQ(b.to_doubles(), (D{3}));
      EXPECT_EQ(x.to_doubles(), (D{2}));
    }
}

TEST_P(CustomKernel, AliasedArgumentsOfDifferentSizes) {
  const Tensor x = vec({1, 2, 3, 4});
  auto kernel = [](const Params& p) {
    const UOp i = UOp::range(UOp::cint(4), 0);
    return kernel_sink(
        {kernel_end(kernel_store(kernel_index(p[0], {i}), kernel_index(p[1], {i}) + at(p[2], 0)),
                    {i})},
        "aliased_sizes");
  };
  Tensor out = custom_kernel({Tensor::empty({4}), x, x.shrink({{0, 1}})}, kernel)[0];
  EXPECT_EQ(out.to_doubles(), (D{2, 3, 4, 5}));
}

// contract: C13
TEST_P(CustomKernel, UnindexedAccessIsOrderedBeforeALaterAssign) {
  auto kernel = [](const Params& p) {
    return kernel_sink({kernel_store(p[0], p[1] + p[1].const_like(1.0))}, "unindexed");
  };
  Tensor x = vec({2});
  Tensor y = custom_kernel({Tensor::empty({1}), x}, kernel)[0];
  x.assign(x * 2.0f);
  Tensor::realize_all({&x, &y});
  EXPECT_EQ(x.to_doubles(), (D{4}));
  EXPECT_EQ(y.to_doubles(), (D{3}));
}

// contract: C13
TEST_P(CustomKernel, ReadOnlyOutputDoesNotHideALaterWrite) {
  Tensor x = vec({2});
  Tensor before = custom_kernel({Tensor::empty({1}), x}, add_one)[1];
  x.assign(x * 2.0f);
  Tensor sum = before + x;
  expect_error([&] { sum.realize(); }, "cycle");
}

TEST_P(CustomKernel, InPlaceKernelRunsOnce) {
  auto dbl = [](const Params& p) {
    return kernel_sink({kernel_store(at(p[0], 0), at(p[0], 0) * p[0].const_like(2.0))}, "double");
  };
  Tensor x = vec({2});
  Tensor y = custom_kernel({x}, dbl)[0];
  Tensor same = y;  // the lazy output, CALL and all
  EXPECT_EQ(y.to_doubles(), (D{4}));
  EXPECT_EQ(same.to_doubles(), (D{4}));  // its CALL has run: not run again
  EXPECT_EQ(last_kernel_count(), 0);
  EXPECT_EQ(custom_kernel({y}, dbl)[0].to_doubles(), (D{8}));
}

TEST_P(CustomKernel, EmptyKernel) {
  Tensor a = custom_kernel({vec({1})}, [](const Params&) { return kernel_sink({}); })[0];
  EXPECT_EQ(a.to_doubles(), (D{1}));
}

// An effect beyond the tuple size limit (which order_effects walks) is refused by name, on the
// kernel's SINK of several effects and in a loop's body alike.
TEST_P(CustomKernel, EffectsBeyondTheTupleSizeLimitAreRefusedByName) {
  for (bool two_effects : {true, false}) {
    Tensor out = vec({0, 0, 0, 0});
    const Tensor in = vec({1, 2, 3, 4});
    Tensor k = custom_kernel({out, in}, [&](const Params& p) {
      const UOp r = UOp::range(UOp::cint(4), 0);
      const UOp x = kernel_index(p[1], {r});
      UOp v = x;  // 80,000 nodes that fold to nothing smaller
      for (int i = 0; i < 40000; ++i) v = v.alu(Op::Add, {x}).alu(Op::Max, {x});
      const UOp big = kernel_end(kernel_store(kernel_index(p[0], {r}), v), {r});
      if (!two_effects) return kernel_sink({big}, "big");
      const UOp r2 = UOp::range(UOp::cint(4), 1);
      return kernel_sink(
          {big, kernel_end(kernel_store(kernel_index(p[0], {r2}), kernel_index(p[1], {r2})), {r2})},
          "big");
    })[0];
    expect_error([&] { k.realize(); }, two_effects ? "an effect of more than 65536 nodes"
                                                   : "a loop body of more than 65536 nodes");
  }
}

TEST_P(CustomKernel, BadKernelsAreRefused) {
  expect_error([] { custom_kernel({vec({1})}, [](const Params& p) { return p[0]; }); },
               "must return a SINK");
  const Tensor x = vec({1, 2});
  Tensor bare = custom_kernel({Tensor::empty({2}), x}, [](const Params& p) {
    return kernel_sink({kernel_store(at(p[0], 0), p[1])});
  })[0];
  expect_error([&] { bare.realize(); }, "used without an index");
  Tensor lazy_target = custom_kernel({x * 2.0f, x}, add_one)[0];
  expect_error([&] { lazy_target.realize(); }, "not a realized buffer");
}

// contract: C13
TEST_P(CustomKernel, OpaqueKernelIsRefusedBeforeAnythingRuns) {
  Tensor x = vec({2});
  Tensor y = custom_kernel({x}, [](const Params& p) {
    return UOp::make(Op::Program, dtypes::void_, {UOp::sink(p)});  // no recorded accesses
  })[0];
  const UOp before = y.uop();
  for (int attempt = 0; attempt < 2; ++attempt) {
    expect_error([&] { y.realize(); }, "cannot compute accesses");
    EXPECT_EQ(y.uop(), before);  // unchanged: a retry fails the same way
  }
  EXPECT_EQ(x.to_doubles(), (D{2}));
}

TEST_P(CustomKernel, ProgramWithRecordedAccessesRuns) {
  const Tensor x = vec({5});
  Tensor y = custom_kernel({Tensor::empty({1}), x}, [](const Params& p) {
    const UOp body = kernel_sink({kernel_store(at(p[0], 0), at(p[1], 0) * p[1].const_like(2.0))});
    return UOp::make(Op::Program, dtypes::void_, {body}, program_info_from_sink(body, 2));
  })[0];
  EXPECT_EQ(y.to_doubles(), (D{10}));
}

TEST_P(CustomKernel, InPlaceOutputCreatedInsideAFunctionIsAnImplicitInput) {
  auto inplace_add = [](const Params& p) {
    const UOp i = UOp::range(UOp::cint(4), 0);
    const UOp c = kernel_index(p[0], {i});
    return kernel_sink({kernel_end(kernel_store(c, c + kernel_index(p[1], {i})), {i})});
  };
  auto f = function(
      [&](Tensor a) {
        return custom_kernel({Tensor::empty({4}), a}, inplace_add)[0];
      },
      {.name = "f", .precompile = true, .allow_implicit = false});
  expect_error([&] { f(vec({1, 2, 3, 4})); }, "function f has 1 implicit buffer(s)");
}

TEST_P(CustomKernel, AccessOutsideAParameterIsRefused) {
  auto shifted = [](const Params& p) {
    const UOp i = UOp::range(UOp::cint(4), 0);
    return kernel_sink({kernel_end(
        kernel_store(kernel_index(p[0], {i + UOp::cint(1)}), kernel_index(p[1], {i})), {i})});
  };
  Tensor out = custom_kernel({Tensor::empty({4}), vec({1, 2, 3, 4})}, shifted)[0];
  expect_error([&] { out.realize(); }, "PARAM 0 is accessed at indices 1..4, outside its 4");
  // refused before anything in the same schedule runs
  Tensor a = vec({1});
  const UOp buffer = a.uop();  // read below as it stands (a copy of `a` would see the assignment)
  const std::vector<std::shared_ptr<Storage>> storages = a.storages();
  a.assign(a * 10.0f);
  expect_error([&] { Tensor::realize_all({&a, &out}); }, "outside its 4 elements");
  EXPECT_EQ(Tensor::over_storages(buffer, storages).to_doubles(), (D{1}));  // it did not run
  EXPECT_EQ(a.to_doubles(), (D{10}));
}

TEST_P(CustomKernel, LaterEffectsSeeEarlierStores) {
  auto kernel = [](const Params& p) {
    const UOp x0 = at(p[0], 0), y0 = at(p[1], 0);
    return kernel_sink({kernel_store(y0, x0),                  // y = x (old x)
                        kernel_store(x0, x0.const_like(5.0)),  // x = 5
                        kernel_store(at(p[2], 0), x0 + y0)});  // z = 5 + old x
  };
  std::vector<Tensor> r = custom_kernel({vec({2}), Tensor::empty({1}), Tensor::empty({1})}, kernel);
  EXPECT_EQ(r[2].to_doubles(), (D{7}));
  EXPECT_EQ(r[1].to_doubles(), (D{2}));
  EXPECT_EQ(r[0].to_doubles(), (D{5}));
}

TEST_P(CustomKernel, IntegerAndHalfBuffers) {
  const Tensor n = Tensor::from_vector(std::vector<int32_t>{3, -4}, {2}, dtypes::int32).realize();
  auto negate_into_half = [](const Params& p) {
    const UOp i = UOp::range(UOp::cint(2), 0);
    return kernel_sink({kernel_end(
        kernel_store(kernel_index(p[0], {i}), (-kernel_index(p[1], {i})).cast(dtypes::float16)),
        {i})});
  };
  Tensor h = custom_kernel({Tensor::empty({2}, dtypes::float16), n}, negate_into_half)[0];
  EXPECT_EQ(h.to_doubles(), (D{-3, 4}));
}

// A fresh empty() that the kernel only writes is the body's own scratch, not an implicit input
// (tinygrad's invalids() output of a precompiled function)
TEST_P(CustomKernel, WriteOnlyScratchInsideAFunctionIsNotAnInput) {
  auto f = function(
      [](Tensor a) {
        return custom_kernel({Tensor::empty(a.shape()), a}, scale(2))[0];
      },
      {.name = "f", .precompile = true, .allow_implicit = false});
  Tensor out = f(vec({1, 2, 3, 4}));
  UOp call;
  for (const UOp& u : toposort(out.uop(), nullptr, false))
    if (u.op() == Op::Call && !CallInfo::of(u).kernel) call = u;
  ASSERT_TRUE(call);
  EXPECT_EQ(call.nsrc(), 2u);  // the body and `a`
  EXPECT_EQ(out.to_doubles(), (D{2, 4, 6, 8}));
  // a realized buffer written by the kernel is state, so it is an input
  Tensor state = vec({0, 0, 0, 0});
  auto g = function(
      [&](Tensor a) {
        return custom_kernel({state, a}, scale(2))[0];
      },
      {.name = "g", .allow_implicit = false});
  expect_error([&] { g(vec({1, 2, 3, 4})); }, "function g has 1 implicit buffer(s)");
}

// ---- gradients

TEST_P(CustomKernel, InPlaceGradient) {
  auto dbl = [](const Params& p) {
    return kernel_sink({kernel_store(at(p[0], 0), at(p[0], 0) * p[0].const_like(2.0))});
  };
  auto grad = [](const std::vector<std::optional<Tensor>>& g, const std::vector<Tensor>&) {
    return std::vector<std::optional<Tensor>>{*g[0] * 2.0};
  };
  Tensor x = vec({2});
  Tensor y = custom_kernel({x}, dbl, grad)[0];
  EXPECT_EQ(y.sum().gradient({x})[0].to_doubles(), (D{2}));
  EXPECT_EQ(y.to_doubles(), (D{4}));
}

TEST_P(CustomKernel, UnchangedOutputGradient) {
  auto noop = [](const Params& p) { return kernel_sink({kernel_store(at(p[0], 0), at(p[0], 0))}); };
  auto grad = [](const std::vector<std::optional<Tensor>>& g, const std::vector<Tensor>&) {
    return std::vector<std::optional<Tensor>>{g[0]};
  };
  const Tensor x = vec({2});
  EXPECT_EQ(custom_kernel({x}, noop, grad)[0].sum().gradient({x})[0].to_doubles(), (D{1}));
}

// contract: C14
TEST_P(CustomKernel, ReadOnlyOutputPassesItsGradientThrough) {
  const Tensor x = vec({2});
  auto kernel = [](const Params& p) {
    return kernel_sink({kernel_store(p[0], p[1] * p[1].const_like(3.0))});
  };
  CallGradFn grad = [](const std::vector<std::optional<Tensor>>& g, const std::vector<Tensor>&) {
    return std::vector<std::optional<Tensor>>{std::nullopt,
                                              g[0] ? std::optional(*g[0] * 3.0) : std::nullopt};
  };
  for (const CallGradFn& fn : {CallGradFn(), grad}) {
    Tensor unchanged = custom_kernel({Tensor::empty({1}), x}, kernel, fn)[1];
    EXPECT_EQ(unchanged.sum().gradient({x})[0].to_doubles(), (D{1}));
  }
}

TEST_P(CustomKernel, GradientThroughTheWrittenOutput) {
  const Tensor a = vec({1, 2, 3, 4});
  auto grad = [](const std::vector<std::optional<Tensor>>& g, const std::vector<Tensor>&) {
    return std::vector<std::optional<Tensor>>{std::nullopt, *g[0] * 2.0};
  };
  Tensor c = custom_kernel({Tensor::empty({4}), a}, scale(2), grad)[0];
  EXPECT_EQ((c * c).sum().gradient({a})[0].to_doubles(), (D{8, 16, 24, 32}));
  Tensor no_grad_fn = custom_kernel({Tensor::empty({4}), a}, scale(2), nullptr, "scale")[0];
  expect_error([&] { no_grad_fn.sum().gradient({a}); },
               "custom kernel 'scale' has no gradient function");
}

TEST_P(CustomKernel, UnrelatedCallAddsNoGradientPath) {
  const Tensor x = vec({2}), v = vec({3}), dst = Tensor::empty({1});
  auto kernel = [](const Params& p) {
    return kernel_sink({kernel_store(p[0], p[1] * p[1].const_like(3.0))});
  };
  auto grad = [](const std::vector<std::optional<Tensor>>& g, const std::vector<Tensor>&) {
    return std::vector<std::optional<Tensor>>{std::nullopt, *g[0] * 3.0};
  };
  const UOp call = custom_kernel({dst, v}, kernel, grad)[0].uop().src(1);
  const Tensor y = Tensor::from_uop(UOp::make(Op::After, x.dtype(), {x.uop(), call}), {x, v, dst});
  const std::vector<Tensor> g = y.sum().gradient({x, v});
  EXPECT_EQ(Tensor(g[0]).to_doubles(), (D{1}));
  EXPECT_EQ(Tensor(g[1]).to_doubles(), (D{0}));
}

// A kernel CALL built by hand (numbered 0) gets an effect number from from_uop, as custom_kernel
// gives its own: it runs once, and later realizes see its result without running it again.
TEST_P(CustomKernel, HandBuiltCallRunsOnce) {
  const Tensor x = vec({2});
  auto kernel = [](const Params& p) {
    return kernel_sink({kernel_store(p[0], p[0] * p[0].const_like(2.0))});
  };
  const UOp body = kernel({param_like(x.uop(), 0)});
  const UOp call = UOp::make(Op::Call, dtypes::void_, {body, x.uop()},
                             CallInfo{.name = "double", .kernel = true}.to_arg());
  Tensor y = Tensor::from_uop(UOp::make(Op::After, x.dtype(), {x.uop(), call}), {x});
  EXPECT_NE(CallInfo::of(y.uop().src(1)).id, 0);
  EXPECT_EQ(y.to_doubles(), (D{4}));
  Tensor z = y * 1.0f;
  EXPECT_EQ(z.to_doubles(), (D{4}));
  EXPECT_EQ(last_kernel_count(), 1);  // only the multiply: the CALL ran before
}

// contract: C15
TEST_P(CustomKernel, DuplicateCallOutputIsAmbiguous) {
  const Tensor x = vec({2});
  auto kernel = [](const Params& p) {
    return kernel_sink({kernel_store(p[0], p[1] * p[1].const_like(2.0))});
  };
  auto grad = [](const std::vector<std::optional<Tensor>>& g, const std::vector<Tensor>&) {
    return std::vector<std::optional<Tensor>>{g[0], g[0]};
  };
  const Tensor y = custom_kernel({x, x}, kernel, grad)[0];
  expect_error([&] { y.sum().gradient({x}); }, "ambiguous CALL output gradient");
}

// rules/gradient.rw's AFTER rule refuses a kernel CALL that writes another view of the buffer the
// AFTER returns (its output's gradient would not be the buffer's), and two CALLs writing it.
TEST_P(CustomKernel, GradientThroughAnAliasedOrDoubledCallWriteIsRefused) {
  const Tensor x = vec({2, 3}), v = vec({5});
  auto kernel = [](const Params& p) {
    return kernel_sink({kernel_store(at(p[0], 0), at(p[1], 0) * p[1].const_like(2.0))});
  };
  auto grad = [](const std::vector<std::optional<Tensor>>& g, const std::vector<Tensor>&) {
    return std::vector<std::optional<Tensor>>{std::nullopt, *g[0] * 2.0};
  };
  const UOp part = custom_kernel({x.shrink({{0, 1}}), v}, kernel, grad, "half")[0].uop().src(1);
  const Tensor y = Tensor::from_uop(UOp::make(Op::After, x.dtype(), {x.uop(), part}), {x, v});
  expect_error(
      [&] { y.sum().gradient({x}); },
      "gradient through an aliased write: CALL 'half' argument 0 views the AFTER's buffer");
  const UOp w1 = custom_kernel({x, v}, kernel, grad)[0].uop().src(1),
            w2 = custom_kernel({x, v * 3.0}, kernel, grad)[0].uop().src(1);
  const Tensor z = Tensor::from_uop(UOp::make(Op::After, x.dtype(), {x.uop(), w1, w2}), {x, v});
  expect_error([&] { z.sum().gradient({v}); },
               "ambiguous CALL output gradient: several kernel CALLs write the buffer");
  const Tensor twice = custom_kernel({x, x}, kernel, grad, "twice")[0];
  expect_error([&] { twice.sum().gradient({x}); },
               "ambiguous CALL output gradient: CALL 'twice' gets its output 0 twice as arguments");
}

// contract: C15
TEST_P(CustomKernel, GradientAfterUnrelatedStores) {
  const Tensor x = vec({2}), v = vec({3}), dst = Tensor::empty({1});
  Tensor y = Tensor::from_uop(
      UOp::make(Op::After, x.dtype(),
                {x.uop(), UOp::make(Op::Store, dtypes::void_, {dst.uop(), v.uop()})}),
      {x, v, dst});
  std::vector<Tensor> g = y.sum().gradient({x, v});
  EXPECT_EQ(g[0].to_doubles(), (D{1}));
  EXPECT_EQ(g[1].to_doubles(), (D{0}));
  EXPECT_EQ(y.to_doubles(), (D{2}));
  // two stores elsewhere: still the identity
  const Tensor a = Tensor::empty({1}), b = Tensor::empty({1});
  const Tensor z = Tensor::from_uop(
      UOp::make(Op::After, x.dtype(),
                {x.uop(), UOp::make(Op::Store, dtypes::void_, {a.uop(), (x * 3.0f).uop()}),
                 UOp::make(Op::Store, dtypes::void_, {b.uop(), (x * 4.0f).uop()})}),
      {x, a, b});
  EXPECT_EQ(z.sum().gradient({x})[0].to_doubles(), (D{1}));
}

// contract: C15
TEST_P(CustomKernel, GradientThroughAnAliasedStoreViewIsRefused) {
  const Tensor x = vec({2, 3});
  const UOp part = x.shrink({{0, 1}}).uop();
  const Tensor y = Tensor::from_uop(
      UOp::make(Op::After, x.dtype(),
                {x.uop(), UOp::make(Op::Store, dtypes::void_, {part, part.const_like(4.0)})}),
      {x});
  expect_error([&] { y.sum().gradient({x}); }, "aliased write");
}

// C = A @ B as a custom kernel (an accumulation loop over k storing into C), with a gradient
// function that is itself made of custom kernels (tinygrad's custom_gemm with its backward)
namespace {
UOp gemm_kernel(const Params& p) {  // p: C (M, N), A (M, K), B (K, N)
  const int64_t m = p[1].shape()[0].value(), kk = p[1].shape()[1].value(),
                n = p[2].shape()[1].value();
  const UOp i = UOp::range(UOp::cint(m), 0), j = UOp::range(UOp::cint(n), 1),
            k = UOp::range(UOp::cint(kk), 2);
  const UOp c = kernel_index(p[0], {i, j});
  const UOp init = kernel_store(c, c.const_like(0.0));
  const UOp acc =
      kernel_end(kernel_store(c, c + kernel_index(p[1], {i, k}) * kernel_index(p[2], {k, j})), {k});
  return kernel_sink({kernel_end(UOp::make(Op::Group, dtypes::void_, {init, acc}), {i, j})},
                     "gemm");
}
Tensor custom_matmul(const Tensor& a, const Tensor& b, bool with_grad);
CallGradFn gemm_grad() {
  return [](const std::vector<std::optional<Tensor>>& g, const std::vector<Tensor>& args) {
    // dA = dC @ B^T, dB = A^T @ dC, each a custom GEMM again
    const Tensor& dc = *g[0];
    return std::vector<std::optional<Tensor>>{
        std::nullopt, custom_matmul(dc, args[2].transpose().contiguous(), false),
        custom_matmul(args[1].transpose().contiguous(), dc, false)};
  };
}
Tensor custom_matmul(const Tensor& a, const Tensor& b, bool with_grad) {
  const Tensor c = Tensor::empty({a.shape()[0], b.shape()[1]});
  return custom_kernel({c, a, b}, gemm_kernel, with_grad ? gemm_grad() : nullptr, "gemm")[0];
}
}  // namespace

TEST_P(CustomKernel, GemmWithACustomBackward) {
  Tensor a = Tensor::randn({4, 8}, 1).realize(), b = Tensor::randn({8, 3}, 2).realize();
  Tensor c = custom_matmul(a, b, true);
  const std::vector<Tensor> g = (c * c).sum().gradient({a, b});
  const std::vector<Tensor> want = (a.matmul(b) * a.matmul(b)).sum().gradient({a, b});
  const std::vector<double> got_c = c.to_doubles(), want_c = a.matmul(b).to_doubles();
  for (size_t i = 0; i < want_c.size(); ++i) EXPECT_NEAR(got_c[i], want_c[i], 1e-4);
  for (size_t t = 0; t < 2; ++t) {
    const std::vector<double> got = Tensor(g[t]).to_doubles(), ref = Tensor(want[t]).to_doubles();
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(got[i], ref[i], 1e-3) << t << " " << i;
  }
}

// ---- inside function()

// contract: C12
TEST_P(CustomKernel, InsidePrecompiledFunctionWithGradient) {
  auto grad = [](const std::vector<std::optional<Tensor>>& g, const std::vector<Tensor>&) {
    return std::vector<std::optional<Tensor>>{std::nullopt, *g[0] * 2.0};
  };
  auto f = function(
      [&](Tensor a) {
        return custom_kernel({Tensor::empty(a.shape()), a}, scale(2), grad)[0];
      },
      {.precompile = true, .precompile_backward = true});
  Tensor a = vec({1, 2, 3, 4});
  Tensor c = f(a);
  c.sum().backward({&a});  // before c is realized (that replaces its graph by its buffer)
  EXPECT_EQ(a.grad()->to_doubles(), (D{2, 2, 2, 2}));
  c.realize();
  EXPECT_EQ(last_kernel_count(), 1);  // the kernel alone: no copy around it
  EXPECT_EQ(c.to_doubles(), (D{2, 4, 6, 8}));
}

TEST_P(CustomKernel, InsideFunctionWithTwoOutputs) {
  auto kernel = [](const Params& p) {
    const UOp i = UOp::range(UOp::cint(4), 0);
    const UOp a = kernel_index(p[2], {i});
    return kernel_sink(
        {kernel_end(UOp::make(Op::Group, dtypes::void_,
                              {kernel_store(kernel_index(p[0], {i}), a * a.const_like(2.0)),
                               kernel_store(kernel_index(p[1], {i}), a * a.const_like(3.0))}),
                    {i})});
  };
  auto grad = [](const std::vector<std::optional<Tensor>>& g, const std::vector<Tensor>&) {
    return std::vector<std::optional<Tensor>>{std::nullopt, std::nullopt, *g[0] + *g[1]};
  };
  auto f = function(
      [&](Tensor a) {
        std::vector<Tensor> r =
            custom_kernel({Tensor::empty({4}), Tensor::empty({4}), a}, kernel, grad);
        return std::pair{r[0], r[1]};
      },
      {.precompile = true, .precompile_backward = true});
  Tensor a = vec({1, 2, 3, 4});
  auto [c, d] = f(a);
  (c.sum() + d.sum()).backward({&a});
  EXPECT_EQ(a.grad()->to_doubles(), (D{2, 2, 2, 2}));
  EXPECT_EQ(c.to_doubles(), (D{2, 4, 6, 8}));
  EXPECT_EQ(d.to_doubles(), (D{3, 6, 9, 12}));
}

TEST_P(CustomKernel, WriteOnlyPersistentOutputInsideFunction) {
  Tensor state = vec({100, 200, 300, 400});
  auto f = function(
      [&](Tensor a) {
        return custom_kernel({state, a}, scale(2))[0];
      },
      {.precompile = true});
  Tensor out = f(vec({1, 2, 3, 4}));
  EXPECT_EQ(out.to_doubles(), (D{2, 4, 6, 8}));  // state after the kernel
  // `state` itself still stands for the contents before the kernel, which are gone: refused
  // rather than read as the kernel left them
  expect_error([&] { state.to_doubles(); }, "already run and overwritten");
}

TEST_P(CustomKernel, PrecompiledFunctionWithFurtherCompute) {
  auto f = function(
      [](Tensor a) {
        return custom_kernel({Tensor::empty(a.shape()), a}, scale(2))[0] + 1.0f;
      },
      {.precompile = true});
  Tensor out = f(vec({1, 2, 3, 4}));
  out.realize();
  EXPECT_EQ(last_kernel_count(), 2);
  EXPECT_EQ(out.to_doubles(), (D{3, 5, 7, 9}));
}

INSTANTIATE_TEST_SUITE_P(Devices, CustomKernel, ::testing::ValuesIn(test_devices()),
                         device_test_name);

// Random custom kernels (loops, loads, ALU ops over several dtypes, stores that later effects
// read back) run on INTERP, the reference, and compiled by LLVM on CPU: the results agree.
TEST(CustomKernelDevices, RandomKernelsAgreeOnInterpAndCpu) {
  if (!device_available("CPU")) GTEST_SKIP() << "device CPU is not available here";
  int compared = 0;
  for (uint32_t seed = 0; seed < 40; ++seed) {
    std::mt19937 rng(seed);
    auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
    const DType dt = std::vector<DType>{dtypes::float32, dtypes::int32, dtypes::float16,
                                        dtypes::int8}[static_cast<size_t>(pick(4))];
    const int64_t n = 1 + pick(7);
    // a value over loads of the inputs at the loop index (or a fixed element)
    auto kernel = [&, seed](const Params& p) {
      std::mt19937 r(seed * 7919u + 1);
      auto choose = [&](int k) { return std::uniform_int_distribution<int>(0, k - 1)(r); };
      const UOp i = UOp::range(UOp::cint(n), 0);
      std::function<UOp(int)> expr = [&](int depth) -> UOp {
        if (depth == 0 || choose(3) == 0) {
          const UOp& src = p[static_cast<size_t>(1 + choose(2))];
          return kernel_index(src, {choose(4) == 0 ? UOp::cint(choose(static_cast<int>(n))) : i});
        }
        const UOp a = expr(depth - 1), b = expr(depth - 1);
        switch (choose(4)) {
          case 0:
            return a + b;
          case 1:
            return a * b;
          case 2:
            return a.maximum(b);
          default:
            return a - b;
        }
      };
      const UOp out_i = kernel_index(p[0], {i});
      const UOp first = kernel_end(kernel_store(out_i, expr(3)), {i});
      // a second pass reading what the first stored
      const UOp j = UOp::range(UOp::cint(n), 1);
      const UOp out_j = kernel_index(p[0], {j});
      const UOp second = kernel_end(kernel_store(out_j, out_j + kernel_index(p[1], {j})), {j});
      return kernel_sink({first, second});
    };
    std::vector<double> results[2];
    for (int d = 0; d < 2; ++d) {
      set_default_device(d == 0 ? "INTERP" : "CPU");
      std::mt19937 data(seed);
      std::vector<float> va, vb;
      for (int64_t k = 0; k < n; ++k) {
        va.push_back(static_cast<float>(std::uniform_int_distribution<int>(-4, 4)(data)));
        vb.push_back(static_cast<float>(std::uniform_int_distribution<int>(-4, 4)(data)));
      }
      const Tensor a = Tensor::from_vector(va, {n}).cast(dt).realize();
      const Tensor b = Tensor::from_vector(vb, {n}).cast(dt).realize();
      Tensor out = custom_kernel({Tensor::empty({n}, dt), a, b}, kernel)[0];
      results[d] = out.to_doubles();
    }
    set_default_device("");
    ASSERT_EQ(results[0].size(), results[1].size());
    for (size_t k = 0; k < results[0].size(); ++k) {
      EXPECT_EQ(results[0][k], results[1][k]) << "seed " << seed << " dtype " << dt.repr();
      ++compared;
    }
  }
  EXPECT_GT(compared, 100);
}

// An argument that is an assignment chain over a permuted view is read through a copy of the
// chain's value (the kernel addresses its arguments as buffers); written, it is refused.
TEST_P(CustomKernel, AssignedPermutedViewAsArgument) {
  Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}).realize();
  Tensor xt = x.permute({1, 0});
  xt.assign(xt + 1.0f);
  auto twice = [](const Params& p) {
    const UOp i = UOp::range(UOp::cint(3), 0), j = UOp::range(UOp::cint(2), 1);
    const UOp v = kernel_index(p[1], {i, j});
    return kernel_sink(
        {kernel_end(kernel_store(kernel_index(p[0], {i, j}), v * v.const_like(2.0)), {i, j})});
  };
  Tensor written = custom_kernel({xt, Tensor::zeros({3, 2})}, twice)[0];
  expect_error([&] { written.realize(); }, "not a realized buffer");
  Tensor y = custom_kernel({Tensor::empty({3, 2}), xt}, twice)[0];
  EXPECT_EQ(y.to_doubles(), (D{4, 10, 6, 12, 8, 14}));
  EXPECT_EQ(xt.to_doubles(), (D{2, 5, 3, 6, 4, 7}));
}
