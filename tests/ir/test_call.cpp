// Access analysis of kernel CALLs (ir/call.h): reads and writes from LOAD/STORE operands, nested
// calls through their arguments, COPY, PROGRAMs with recorded ins/outs, opaque bodies refused;
// the cases of tinygrad's test_call_access.py (seed 003). Also PARAM binding and inlining.
#include <gtest/gtest.h>

#include "ir/call.h"

using namespace tinyrw;

namespace {

UOp param(size_t slot) {
  return param_like(UOp::make(Op::Reshape, dtypes::float32,
                              {UOp::make(Op::Buffer, dtypes::float32, {},
                                         Arg::record("ParamArg", {{"slot", Arg::integer(0)},
                                                                  {"size", Arg::integer(1)},
                                                                  {"device", Arg::string("CPU")}})),
                               shape_to_uop({1})}),
                    slot);
}
UOp scalar_param(size_t slot) {
  return UOp::make(Op::Param, dtypes::float32, {shape_to_uop({})},
                   Arg::record("ParamArg", {{"slot", Arg::integer(static_cast<i128>(slot))}}));
}
UOp sink(std::vector<UOp> effects) { return UOp::sink(effects); }
UOp store(const UOp& dst, const UOp& v) { return UOp::make(Op::Store, dtypes::void_, {dst, v}); }
UOp call(const UOp& body, std::vector<UOp> args) {
  args.insert(args.begin(), body);
  return UOp::make(Op::Call, dtypes::void_, args, CallInfo{.name = "k", .kernel = true}.to_arg());
}
using Slots = std::vector<size_t>;

void expect_access(const UOp& c, Slots reads, Slots writes) {
  const CallAccess a = call_access(c);
  EXPECT_EQ(a.reads, reads);
  EXPECT_EQ(a.writes, writes);
}
void expect_error(const UOp& c, const std::string& what) {
  try {
    call_access(c);
    ADD_FAILURE() << "no error, expected '" << what << "'";
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(CallAccess, ReadsWritesAndUnusedArguments) {
  const UOp out = param(0), x = param(1), unused = param(2);
  expect_access(call(sink({store(out, x + x.const_like(1.0))}), {out, x, unused}), {1}, {0});
}

TEST(CallAccess, ReadModifyWriteIsInBoth) {
  const UOp out = param(0), x = param(1);
  expect_access(call(sink({store(out, out + x)}), {out, x}), {0, 1}, {0});
  // through INDEX: C[i] = C[i] + x reads C
  const UOp ci = UOp::make(Op::Index, dtypes::float32, {out, UOp::cint(0)});
  expect_access(call(sink({store(ci, ci + x)}), {out, x}), {0, 1}, {0});
  // a store alone does not read its destination
  expect_access(call(sink({store(ci, x)}), {out, x}), {1}, {0});
}

TEST(CallAccess, NoEffects) {
  const UOp x = param(0);
  expect_access(call(sink({x}), {x}), {}, {});
}

TEST(CallAccess, ProgramFromASink) {
  const UOp out = param(0), x = param(1);
  const UOp body = sink({store(out, UOp::make(Op::Load, dtypes::float32, {x}))});
  const UOp program =
      UOp::make(Op::Program, dtypes::void_, {body}, program_info_from_sink(body, 2));
  expect_access(call(program, {out, x}), {1}, {0});
}

TEST(CallAccess, NestedCallsMapThroughTheirArguments) {
  const UOp a = param(0), b = param(1), c = param(2);
  const UOp inner = call(sink({store(a, b + b.const_like(1.0))}), {b, a});
  const UOp body = UOp::make(Op::Linear, dtypes::void_, {inner});
  expect_access(call(body, {a, b, c}), {0}, {1});
}

TEST(CallAccess, CopyWritesArgumentZero) {
  const UOp out = param(0), x = param(1);
  expect_access(call(UOp::make(Op::Copy, dtypes::float32, {x}, Arg::string("CPU")), {out, x}), {1},
                {0});
}

TEST(CallAccess, OpaqueBodiesAreRefused) {
  const UOp x = param(0);
  expect_error(call(UOp::make(Op::Program, dtypes::void_, {sink({x})}), {x}),
               "cannot compute accesses");
  const UOp custom = UOp::make(Op::Custom, dtypes::void_, {x}, Arg::string("opaque()"));
  expect_error(call(sink({custom}), {x}), "cannot compute accesses");
}

TEST(CallAccess, BadSlotsAreRefused) {
  const UOp x = param(0);
  for (int slot : {-1, 2}) {
    const Arg info = Arg::record(
        "ProgramInfo", {{"ins", Arg::tuple({Arg::integer(slot)})}, {"outs", Arg::tuple({})}});
    const UOp p = UOp::make(Op::Program, dtypes::void_, {sink({x})}, info);
    expect_error(call(p, {x, x}), "invalid CALL access slot");
  }
}

TEST(CallAccess, WritableAliasOfCompiledCodeIsRefused) {
  const UOp a = param(0), b = param(1);
  const UOp body = sink({store(a, UOp::make(Op::Load, dtypes::float32, {b}))});
  const UOp program =
      UOp::make(Op::Program, dtypes::void_, {body}, program_info_from_sink(body, 2));
  expect_error(call(program, {a, a}), "aliased opaque");
  expect_access(call(program, {a, b}), {1}, {0});
}

TEST(CallBinding, ParamsBoundWithoutEnteringNestedBodies) {
  const UOp p0 = scalar_param(0), p1 = scalar_param(1);
  // the inner body uses its own PARAM 0; only the inner call's argument is rebound
  const UOp inner = UOp::make(Op::Call, dtypes::void_, {sink({p0 * p0}), p0});
  const UOp body = sink({p0 + p1, inner});
  const UOp x = UOp::cfloat(2.0), y = UOp::cfloat(3.0);
  const std::vector<UOp> args{x, y};
  const UOp bound = bind_params(body, args);
  EXPECT_EQ(bound.src(0), x + y);
  EXPECT_EQ(bound.src(1).src(0), inner.src(0));  // untouched body
  EXPECT_EQ(bound.src(1).src(1), x);             // rebound argument
}

TEST(CallBinding, ReturnedOutputHasTheBodysShapeAndInlines) {
  const UOp p0 = scalar_param(0);
  const UOp c = UOp::make(Op::Call, dtypes::void_, {sink({p0 * p0}), UOp::cfloat(3.0)},
                          CallInfo{.name = "sq"}.to_arg());
  const UOp r = UOp::make(Op::Returned, dtypes::float32, {c}, Arg::integer(0));
  EXPECT_EQ(r.shape(), (Shape{}));
  EXPECT_EQ(inline_output(c, 0), UOp::cfloat(3.0) * UOp::cfloat(3.0));
  EXPECT_EQ(CallInfo::of(c).name, "sq");
  EXPECT_THROW(UOp::make(Op::Returned, dtypes::float32, {c}, Arg::integer(1)).shape(), GraphError);
}

void expect_bind_error(const UOp& body, const std::vector<UOp>& args, const std::string& what) {
  try {
    bind_params(body, args);
    ADD_FAILURE() << "no error, expected '" << what << "'";
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(CallBinding, ArgumentsMustMatchTheirParameters) {
  const UOp p0 = param(0);  // float32 of shape (1,)
  expect_bind_error(p0 * p0, {UOp::cint(1, dtypes::int32)}, "CALL argument 0 is dtypes.int");
  const UOp two = UOp::make(
      Op::Reshape, dtypes::float32,
      {UOp::make(Op::Buffer, dtypes::float32, {},
                 Arg::record("ParamArg", {{"slot", Arg::integer(9)}, {"size", Arg::integer(2)}})),
       shape_to_uop({2})});
  const UOp scalar = scalar_param(0);
  expect_bind_error(scalar * scalar, {two}, "shape mismatch: expected scalar");
}
