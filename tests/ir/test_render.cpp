#include <gtest/gtest.h>

#include "ir/render.h"
#include "ir/uop.h"

using namespace tinyrw;

TEST(Render, PythonSyntaxWithMinimalParentheses) {
  const UOp x = UOp::variable("x", 0, 10), a = UOp::variable("a", 0, 10),
            b = UOp::variable("b", 0, 10);
  const UOp c = UOp::variable("c", 0, 1, dtypes::bool_);
  EXPECT_EQ(render((x * 2 + 1).floormod(5)), "((x*2+1)%5)");
  EXPECT_EQ(render(a.maximum(b)), "max(a, b)");
  EXPECT_EQ(render(c.where(a, b)), "(a if c else b)");
  EXPECT_EQ(render(x), "x");
  EXPECT_EQ(render(UOp::cint(-3)), "-3");
  EXPECT_EQ(render(x + -1), "(x+-1)");
  EXPECT_EQ(render(a.floordiv(b * 2)), "(a//(b*2))");  // right operand of equal precedence
  EXPECT_EQ(render((a * b).floordiv(2)), "(a*b//2)");  // left-associative: no parentheses
  EXPECT_EQ(render(a - b), "(a+b*-1)");                // tinygrad's form of subtraction
  EXPECT_EQ(render(a.lt(b) & b.lt(x)), "((a<b)&(b<x))");
  EXPECT_EQ(render(a.lt(b).ne(b.lt(x))), "((a<b)!=(b<x))");   // comparisons never chain
  EXPECT_EQ(render(a.lt(b).ne(UOp::cbool(true))), "(a>=b)");  // not(a<b)
  EXPECT_EQ(render(a.ne(b).ne(UOp::cbool(true))), "(a==b)");  // not(a!=b)
  EXPECT_EQ(render(c.ne(UOp::cbool(true))), "(c!=True)");     // a plain bool stays explicit
  EXPECT_EQ(render(UOp::cbool(false)), "False");
  EXPECT_EQ(render((a + b) * (a + 1)), "((a+b)*(a+1))");
  EXPECT_EQ(render(UOp::range(UOp::cint(4), 2)), "L2");  // the axis letter (WEAK) and id
}

TEST(Render, UnrenderableOpsAreErrors) {
  const UOp buf = UOp::make(Op::Buffer, dtypes::float32, {}, Arg::record("ParamArg", {}));
  EXPECT_THROW(render(buf), GraphError);
}

TEST(Render, DeepExpressionsRenderIteratively) {
  UOp x = UOp::variable("x", 0, 1);
  for (int i = 0; i < 200000; ++i) x = x + UOp::cint(1);
  const std::string s = render(x);
  EXPECT_EQ(s.substr(0, 6), "(x+1+1");
  EXPECT_EQ(s.size(), 1 + 200000 * 2 + 2);
}
