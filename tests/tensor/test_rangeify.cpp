// Scheduling without running: Tensor::schedule's kernels.
#include <gtest/gtest.h>

#include "ir/graph.h"
#include "ir/ops.h"
#include "tensor/tensor.h"

namespace tinyrw {
namespace {

// Today's boundary rules realize every REDUCE: `a - a.sum(1)` is a reduce kernel, then the
// subtraction reading its buffer. Nothing runs, so the realize counters stay as they were.
TEST(Schedule, OneEntryPerKernelNothingRun) {
  const Tensor a = Tensor::ones({4, 4}).contiguous().realize();
  const Tensor out = a - a.sum({1}, true);
  const int before = last_kernel_count();
  const std::vector<ScheduleItem> s = Tensor::schedule({&out});
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].node.op(), Op::Reduce);
  EXPECT_EQ(s[1].node, out.uop());
  // each entry lowered: index math over buffers, no movement op left; the subtraction reads two
  // buffers (a, and the reduce kernel's output)
  for (const ScheduleItem& it : s)
    for (const UOp& u : toposort(it.ast)) EXPECT_FALSE(groups::movement().contains(u.op()));
  int buffers = 0;
  for (const UOp& u : toposort(s[1].ast)) buffers += u.op() == Op::Buffer;
  EXPECT_EQ(buffers, 2);
  EXPECT_EQ(last_kernel_count(), before);
}

// An assignment is one kernel whose entry is its STORE; a realized buffer is no kernel at all.
TEST(Schedule, AssignmentAndBuffer) {
  Tensor x = Tensor::ones({4}).contiguous().realize();
  EXPECT_TRUE(Tensor::schedule({&x}).empty());
  x.assign(x * 2);
  const std::vector<ScheduleItem> s = Tensor::schedule({&x});
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].node.op(), Op::Store);
  EXPECT_EQ(x.data<float>(), std::vector<float>(4, 2.0f));  // scheduling ran nothing
}

}  // namespace
}  // namespace tinyrw
