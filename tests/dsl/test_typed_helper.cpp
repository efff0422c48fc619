// Helpers registered from typed C++ functions (dsl/typed_helper.h): arity and parameter and result
// types come from the signature, arguments are unboxed by type, an empty UOp result is none, and a
// function taking RewriteContext& sees the running pass's context.
#include <gtest/gtest.h>

#include "dsl/typed_helper.h"

using namespace tinyrw;
using namespace tinyrw::rw;

namespace {

UOp scaled(const UOp& x, i128 k) { return k == 0 ? UOp() : x * UOp::cint(static_cast<int64_t>(k)); }
std::vector<Value> twice(const std::vector<Value>& items) {
  std::vector<Value> out = items;
  out.insert(out.end(), items.begin(), items.end());
  return out;
}
i128 from_context(RewriteContext& ctx, bool flag) { return flag ? ctx.as<i128>() : -1; }

Value run(const Helper& h, std::vector<Value> args, RewriteContext* ctx = nullptr) {
  RewriteContext none;
  return h.fn(ctx ? *ctx : none, args);
}

}  // namespace

TEST(TypedHelper, SignatureGivesArityAndTypes) {
  const Helper h = typed_helper("scaled", &scaled);
  EXPECT_EQ(h.name, "scaled");
  EXPECT_EQ(h.min_args, 2);
  EXPECT_EQ(h.max_args, 2);
  EXPECT_EQ(h.result, Type::UOp);
  EXPECT_EQ(h.params, (std::vector<Type>{Type::UOp, Type::Int}));

  const Helper t = typed_helper("twice", &twice);
  EXPECT_EQ(t.result, Type::Tuple);
  EXPECT_EQ(t.params, (std::vector<Type>{Type::Tuple}));
  // the context parameter is not an argument
  const Helper c = typed_helper("from_context", &from_context);
  EXPECT_EQ(c.max_args, 1);
  EXPECT_EQ(c.params, (std::vector<Type>{Type::Bool}));
  EXPECT_EQ(c.result, Type::Int);
  // a Value result says less than the helper gives: the registration names it
  EXPECT_EQ(typed_helper(
                "any", +[](const Value& v) { return v; }, Type::Tuple)
                .result,
            Type::Tuple);
}

TEST(TypedHelper, ArgumentsAndResultsConvert) {
  const UOp x = UOp::variable("x", 0, 9);
  const Helper h = typed_helper("scaled", &scaled);
  const Value r = run(h, {Value::uop(x), Value::integer(3)});
  ASSERT_TRUE(r.is_uop());
  EXPECT_EQ(r.as_uop(), x * UOp::cint(3));
  EXPECT_TRUE(run(h, {Value::uop(x), Value::integer(0)}).is_none());        // an empty UOp is none
  EXPECT_THROW(run(h, {Value::integer(1), Value::integer(3)}), EvalError);  // not a UOp

  const Value t = run(typed_helper("twice", &twice), {Value::tuple({Value::integer(7)})});
  ASSERT_EQ(t.items().size(), 2u);
  EXPECT_EQ(t.items()[1].as_int(), 7);

  i128 seven = 7;
  RewriteContext ctx{.user = &seven};
  const Helper c = typed_helper("from_context", &from_context);
  EXPECT_EQ(run(c, {Value::boolean(true)}, &ctx).as_int(), 7);
  EXPECT_EQ(run(c, {Value::boolean(false)}, &ctx).as_int(), -1);
}
