// Assignment and the scheduling contract: STORE + AFTER, reads ordered against writes, cycles
// refused before anything runs. Both devices.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "on_device.h"
#include "tensor/tensor.h"

using namespace tinyrw;

namespace {

class Assign : public OnDevice {};

Tensor vec(std::vector<float> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Tensor::from_vector(v, {n}).realize();
}
using D = std::vector<double>;

void expect_cycle(const std::vector<Tensor*>& ts) {
  try {
    Tensor::realize_all(ts);
    ADD_FAILURE() << "no error for an unsatisfiable order";
  } catch (const TensorError& e) {
    EXPECT_NE(std::string(e.what()).find("cycle"), std::string::npos) << e.what();
  }
}

}  // namespace

// contract: C1 C2
TEST_P(Assign, WritesIntoTheSameBuffer) {
  Tensor a = vec({1, 2, 3});
  const UOp buffer = a.uop();
  a.assign(a * 2.0);
  ASSERT_EQ(a.uop().op(), Op::After);  // the buffer as the assignment left it
  EXPECT_EQ(a.uop().src(0), buffer);
  EXPECT_EQ(a.to_doubles(), (D{2, 4, 6}));
  a.assign(a + 1.0).assign(a * 10.0);  // assignments to one buffer apply in order
  EXPECT_EQ(a.to_doubles(), (D{30, 50, 70}));
}

// contract: C4
TEST_P(Assign, ValueReadingOtherElementsOfTheTarget) {
  Tensor a = vec({1, 2, 3, 4});
  a.assign(a.flip({0}) + a);
  EXPECT_EQ(a.to_doubles(), (D{5, 5, 5, 5}));
  Tensor b = vec({1, 2, 3});
  b.assign(b.reshape({1, 3}).expand({3, 3}).sum({1}));  // every element reads all of b
  EXPECT_EQ(b.to_doubles(), (D{6, 6, 6}));
}

// contract: C3
TEST_P(Assign, ReadsBeforeSeeOldContentsReadsAfterSeeNew) {
  Tensor x = vec({1});
  Tensor old_read = x + 1.0;  // made before the assignment
  x.assign(x * 10.0);
  Tensor new_read = x + 1.0;  // made after it
  Tensor::realize_all({&new_read, &x, &old_read});
  EXPECT_EQ(old_read.to_doubles(), (D{2}));
  EXPECT_EQ(new_read.to_doubles(), (D{11}));
  EXPECT_EQ(x.to_doubles(), (D{10}));
}

// contract: C6
TEST_P(Assign, AnExecutedAssignmentIsNotRunAgain) {
  Tensor a = vec({1});
  a.assign(a + 1.0);
  Tensor later = a * 1.0;  // holds the pending assignment
  a.realize();
  EXPECT_EQ(a.to_doubles(), (D{2}));
  EXPECT_EQ(later.to_doubles(), (D{2}));  // not 3
}

// contract: C5
TEST_P(Assign, ReaderThatAlreadyDependsOnTheWriteIsACycle) {
  Tensor x = vec({1}), y = vec({2});
  Tensor x_expr = x * 3.0;  // reads x before its assignment
  x.assign(x * 2.0);
  y.assign(y + x);
  Tensor z = y + x_expr;
  Tensor x_buffer = x_expr / 3.0;  // another reader of the old contents, left lazy
  expect_cycle({&x, &y, &z});
  expect_cycle({&x, &y, &z});  // nothing ran: a retry raises again
  EXPECT_EQ(x_buffer.to_doubles(), (D{1}));
}

// contract: C5
TEST_P(Assign, ReadBetweenTwoAssignmentsIsACycle) {
  Tensor b = vec({10});
  Tensor a = vec({0});
  a.assign(b + 1.0);
  Tensor v1 = a * 3.0;  // needs a == 11
  a.assign(b + 100.0);
  Tensor out = a + v1;  // needs a == 110 at the same time
  expect_cycle({&out});
}

// contract: C3
TEST_P(Assign, ReadOfContentsAlreadyOverwrittenIsRefused) {
  Tensor b = vec({10});
  Tensor a = vec({0});
  a.assign(b + 1.0);
  Tensor v1 = a * 3.0;  // needs a == 11
  a.realize();
  a.assign(b + 100.0).realize();  // a == 110 now: what v1 needs is gone
  try {
    v1.realize();
    ADD_FAILURE() << "read overwritten contents: " << v1.to_doubles()[0];
  } catch (const TensorError& e) {
    EXPECT_NE(std::string(e.what()).find("already run"), std::string::npos) << e.what();
  }
  EXPECT_EQ(a.to_doubles(), (D{110}));
  // the same for a lazy read of the plain buffer made before; a copy of the tensor is another
  // tensor over the buffer (in tinygrad, the same object), so it reads what the buffer holds
  Tensor copy = a;
  Tensor lazy = a * 1.0;
  a.assign(a + 1.0).realize();
  EXPECT_THROW(lazy.realize(), TensorError);
  EXPECT_EQ(a.to_doubles(), (D{111}));
  EXPECT_EQ(copy.to_doubles(), (D{111}));
}

// contract: C2
TEST_P(Assign, TrainingLoopUpdatesInPlace) {
  Tensor w = vec({1, 2});
  for (int step = 0; step < 3; ++step) {
    w.assign(w - w * 0.5).realize();
  }
  EXPECT_EQ(w.to_doubles(), (D{0.125, 0.25}));
}

// contract: C7
TEST_P(Assign, GradientFlowsThroughAFullOverwriteToTheStoredValue) {
  Tensor w = vec({1, 2});
  Tensor x = vec({3, 4});
  w.assign(x * x);
  auto g = (w * 2.0).sum().gradient({x, w});
  EXPECT_EQ(g[0].to_doubles(), (D{12, 16}));  // through the store: d(2 x^2)/dx
}

// ---- writes into part of a buffer: setitem, and assign() on a view

// contract: C16
TEST_P(Assign, SetitemWritesASliceOfTheBuffer) {
  Tensor a = vec({1, 2, 3, 4});
  a.setitem({{1, 3, 1}}, vec({10, 20}));
  EXPECT_EQ(a.to_doubles(), (D{1, 10, 20, 4}));
  a.setitem({{0, 4, 2}}, Tensor::full({1}, 0));  // every other element, broadcast
  EXPECT_EQ(a.to_doubles(), (D{0, 10, 0, 4}));
  a.setitem({{3, -5, -1}}, vec({5, 6, 7, 8}));  // reversed
  EXPECT_EQ(a.to_doubles(), (D{8, 7, 6, 5}));
  Tensor m = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}).realize();
  m.setitem({{0, 2, 1}, {1, 2, 1}}, Tensor::from_vector(std::vector<float>{7, 8}, {2, 1}));
  EXPECT_EQ(m.to_doubles(), (D{1, 7, 3, 4, 8, 6}));
}

// contract: C16
TEST_P(Assign, SetitemValueReadingTheTargetIsComputedFirst) {
  Tensor a = vec({1, 2, 3, 4});
  a.setitem({{1, 4, 1}}, a.shrink({{0, 3}}));  // shift right by one
  EXPECT_EQ(a.to_doubles(), (D{1, 1, 2, 3}));
}

// contract: C16
TEST_P(Assign, SetitemIsOrderedLikeAnAssignment) {
  Tensor a = vec({1, 2, 3, 4});
  Tensor before = a * 1.0f;
  a.setitem({{0, 1, 1}}, vec({9}));
  Tensor after = a * 1.0f;
  Tensor::realize_all({&after, &before});
  EXPECT_EQ(before.to_doubles(), (D{1, 2, 3, 4}));
  EXPECT_EQ(after.to_doubles(), (D{9, 2, 3, 4}));
  EXPECT_EQ(a.to_doubles(), (D{9, 2, 3, 4}));
}

// An assignment through a view is seen by every live tensor over the buffer: the buffer's own,
// copies, and other views of it made before (tinygrad replaces their graphs); a computed read made
// before reads the old contents.
// contract: C16
TEST_P(Assign, AssignThroughAViewWritesTheBuffer) {
  Tensor a = vec({1, 2, 3, 4});
  Tensor part = a.shrink({{1, 3}});
  Tensor square = a.reshape({2, 2}), tail = a.shrink({{2, 4}}), copy = a;
  Tensor computed = a * 1.0;
  part.assign(vec({7, 8}));
  EXPECT_EQ(part.to_doubles(), (D{7, 8}));
  EXPECT_EQ(a.to_doubles(), (D{1, 7, 8, 4}));
  EXPECT_EQ(square.to_doubles(), (D{1, 7, 8, 4}));
  EXPECT_EQ(tail.to_doubles(), (D{8, 4}));
  EXPECT_EQ(copy.to_doubles(), (D{1, 7, 8, 4}));
  try {  // it ran before the write could be ordered after it: refused, never the new values
    const D got = computed.to_doubles();
    ADD_FAILURE() << "a computed read made before the write gave " << got[1];
  } catch (const TensorError& e) {
    EXPECT_NE(std::string(e.what()).find("already run and overwritten"), std::string::npos);
  }
  Tensor t = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}).realize();
  Tensor col = t.permute({1, 0});  // a transposed view: element (i, j) is t[j][i]
  col.assign(Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {3, 2}));
  EXPECT_EQ(col.to_doubles(), (D{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(t.to_doubles(), (D{1, 3, 5, 2, 4, 6}));
}

// tinygrad's values for assignments through views (issue 13; tinygrad's test_assign.py).
// contract: C16
TEST_P(Assign, AssignmentsThroughViewsAsTinygrad) {
  Tensor x = vec({1, 2, 3, 4});
  Tensor xs = x.shrink({{2, 4}});
  xs.assign(xs + 1.0);
  EXPECT_EQ(x.to_doubles(), (D{1, 2, 4, 5}));
  EXPECT_EQ(last_kernel_count(), 1);  // in place: each element read, then written
  EXPECT_EQ(xs.to_doubles(), (D{4, 5}));
  Tensor y = vec({1, 2, 3, 4});
  y.shrink({{1, 3}}).assign(y.shrink({{2, 4}}) + 1.0);  // reads what it overwrites
  EXPECT_EQ(y.to_doubles(), (D{1, 4, 5, 4}));
  EXPECT_EQ(last_kernel_count(), 2);  // the value first, into a buffer of its own
  Tensor r = vec({1, 2, 3, 4});
  Tensor tail = r.shrink({{1, 4}});
  tail.assign(tail.flip({0}) + tail);  // through its own view, but other elements
  EXPECT_EQ(r.to_doubles(), (D{1, 6, 6, 6}));
  EXPECT_EQ(last_kernel_count(), 2);
  Tensor z = vec({1, 2, 3, 4});
  Tensor v = z.reshape({2, 2});
  z.shrink({{0, 2}}).assign(vec({7, 8}));
  EXPECT_EQ(v.to_doubles(), (D{7, 8, 3, 4}));
  Tensor m = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2}).realize();
  m.permute({1, 0}).shrink({{0, 1}, {0, 2}}).assign(Tensor::full({1, 2}, 9));  // X.T[0]
  EXPECT_EQ(m.to_doubles(), (D{9, 2, 9, 4}));
  // later writes through other views reach every tensor over the buffer, and so does setitem
  Tensor w = vec({0, 0, 0, 0});
  Tensor lo = w.shrink({{0, 2}}), hi = w.shrink({{2, 4}});
  lo.assign(vec({1, 2}));
  hi.assign(vec({3, 4}));
  w.setitem({{1, 3, 1}}, vec({8, 9}));
  EXPECT_EQ(lo.to_doubles(), (D{1, 8}));
  EXPECT_EQ(hi.to_doubles(), (D{9, 4}));
  EXPECT_EQ(w.to_doubles(), (D{1, 8, 9, 4}));
  hi.assign(hi * 10.0);  // after a realize too
  EXPECT_EQ(lo.to_doubles(), (D{1, 8}));
  EXPECT_EQ(w.to_doubles(), (D{1, 8, 90, 40}));
}

// A computed read made before an assignment through a view reads the old contents when it is
// ordered before the write (tinygrad rewrites it to read the new ones; its own tests call reads
// made before that see new bytes wrong, see docs/tinygrad-differences.md).
// contract: C16
TEST_P(Assign, ComputedReadBeforeAViewAssignmentReadsTheOldContents) {
  Tensor x = vec({1, 2, 3, 4});
  Tensor y = x + 0.0;
  x.shrink({{2, 4}}).assign(x.shrink({{2, 4}}) * 10.0);
  Tensor::realize_all({&x, &y});
  EXPECT_EQ(y.to_doubles(), (D{1, 2, 3, 4}));
  EXPECT_EQ(x.to_doubles(), (D{1, 2, 30, 40}));
}

// An expanded or padded view of a buffer is no assignment target: its elements are not distinct
// buffer elements. It raises (as tinygrad refuses it) instead of writing a copy, and leaves both
// tensors as they were; a computed tensor is still realized into a buffer of its own first.
TEST_P(Assign, ExpandedOrPaddedViewIsRefused) {
  Tensor a = vec({1});
  Tensor wide = a.expand({3});
  const UOp before = wide.uop();
  try {
    wide.assign(vec({1, 2, 3}));
    ADD_FAILURE() << "assigned into an expanded view";
  } catch (const TensorError& e) {
    EXPECT_NE(std::string(e.what()).find("assign: the target is a view of a buffer through Expand"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(wide.uop() == before);
  EXPECT_EQ(a.to_doubles(), (D{1}));
  Tensor padded = vec({1, 2}).pad({{1, 1}});
  EXPECT_THROW(padded.assign(vec({5, 6, 7, 8})), TensorError);
  Tensor through = vec({1, 2}).reshape({2, 1}).expand({2, 2}).transpose();
  EXPECT_THROW(through.setitem({{0, 1, 1}}, vec({9, 9})), TensorError);
  // a computed tensor (no buffer underneath) is still an assignment target
  Tensor computed = Tensor::full({1}, 2.0).expand({3});
  computed.assign(vec({1, 2, 3}));
  EXPECT_EQ(computed.to_doubles(), (D{1, 2, 3}));
}

// Slices of one buffer, each assigned from itself, realized together: all reads, then all writes
// (tinygrad's TestPartialAssignToSharedBuffer).
TEST_P(Assign, SlicesOfOneBufferAssignedTogether) {
  Tensor big = Tensor::zeros({100}).contiguous().realize();
  const std::vector<Dims> shapes{{3, 4}, {4, 6}, {6, 4}, {2, 5}, {4, 3}};
  std::vector<Tensor> views;
  int64_t pos = 0;
  for (const Dims& s : shapes) {
    views.push_back(big.shrink({{pos, pos + s[0] * s[1]}}).reshape(s));
    pos += s[0] * s[1];
  }
  for (Tensor& v : views) v.assign(v + 1.0f);
  std::vector<Tensor*> ptrs;
  for (Tensor& v : views) ptrs.push_back(&v);
  Tensor::realize_all(ptrs);
  for (Tensor& v : views) EXPECT_EQ(v.to_doubles(), D(static_cast<size_t>(v.numel()), 1.0));
}

// Assignments to tensors that are not buffers yet: they get a buffer of their own first
// (tinygrad's TestAssignToUnrealizedView, where several of these are still broken).
TEST_P(Assign, AssignIntoUnrealizedTensors) {
  const Tensor t = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2}).realize();
  const Tensor one = Tensor::ones({2, 1}).contiguous().realize();
  Tensor c = t.permute({1, 0}).contiguous();
  c.setitem({{0, 2, 1}, {1, 2, 1}}, one);
  EXPECT_EQ(c.to_doubles(), (D{1, 1, 2, 1}));
  Tensor sum = vec({1, 2, 3, 4}) + vec({5, 6, 7, 8});
  sum.setitem({{0, 2, 1}}, vec({99, 99}));
  EXPECT_EQ(sum.to_doubles(), (D{99, 99, 10, 12}));
  Tensor r = t.sum({0});
  r.setitem({{0, 1, 1}}, vec({99}));
  EXPECT_EQ(r.to_doubles(), (D{99, 6}));
  Tensor k = Tensor::full({2, 2}, 5);
  k.setitem({{0, 2, 1}, {1, 2, 1}}, one);
  EXPECT_EQ(k.to_doubles(), (D{5, 1, 5, 1}));
  EXPECT_EQ(Tensor(t).to_doubles(), (D{1, 2, 3, 4}));  // the source is untouched
}

// ---- tinygrad's TestAssignOrdering, with the values it calls correct

TEST_P(Assign, SliceReadThenFullWrite) {
  Tensor buf = vec({1, 2, 3, 4});
  Tensor partial = buf.shrink({{0, 2}}).sum();
  buf.assign(Tensor::full({4}, 10));
  Tensor full = buf.sum();
  EXPECT_EQ(partial.to_doubles(), (D{3}));
  EXPECT_EQ(full.to_doubles(), (D{40}));
}

TEST_P(Assign, SliceAssignsThenReads) {
  Tensor buf = Tensor::zeros({4}).contiguous().realize();
  buf.setitem({{0, 1, 1}}, Tensor::full({1}, 1));
  buf.setitem({{1, 2, 1}}, Tensor::full({1}, 2));
  buf.setitem({{2, 3, 1}}, Tensor::full({1}, 3));
  EXPECT_EQ(buf.sum().to_doubles(), (D{6}));
  Tensor grid = Tensor::zeros({4, 4}).contiguous().realize();
  grid.setitem({{0, 2, 1}}, Tensor::ones({2, 4}));
  EXPECT_EQ(grid.sum().to_doubles(), (D{8}));
  EXPECT_EQ(grid.sum({1}).to_doubles(), (D{4, 4, 0, 0}));
  EXPECT_EQ(grid.sum({0}).to_doubles(), (D{2, 2, 2, 2}));
}

TEST_P(Assign, CopyAndSwapSlicesOfOneBuffer) {
  Tensor buf = vec({1, 2, 3, 4, 5, 6, 7, 8});
  buf.setitem({{4, 8, 1}}, buf.shrink({{0, 4}}).contiguous());
  EXPECT_EQ(buf.to_doubles(), (D{1, 2, 3, 4, 1, 2, 3, 4}));
  // a swap through realized copies
  Tensor b = vec({1, 2, 3, 4, 5, 6, 7, 8});
  Tensor left = b.shrink({{0, 4}}).clone().realize(), right = b.shrink({{4, 8}}).clone().realize();
  b.setitem({{0, 4, 1}}, right).realize();
  b.setitem({{4, 8, 1}}, left).realize();
  EXPECT_EQ(b.to_doubles(), (D{5, 6, 7, 8, 1, 2, 3, 4}));
  // through lazy copies the second read needs contents the first write has overwritten:
  // refused, where tinygrad reads the overwritten values
  Tensor c = vec({1, 2, 3, 4, 5, 6, 7, 8});
  Tensor lazy_left = c.shrink({{0, 4}}).clone(), lazy_right = c.shrink({{4, 8}}).clone();
  c.setitem({{0, 4, 1}}, lazy_right).realize();
  c.setitem({{4, 8, 1}}, lazy_left);
  try {
    c.realize();
    ADD_FAILURE() << "read of overwritten contents";
  } catch (const TensorError& e) {
    EXPECT_NE(std::string(e.what()).find("overwritten"), std::string::npos) << e.what();
  }
}

TEST_P(Assign, BuffersAssignedFromEachOther) {
  Tensor a = vec({1, 2, 3, 4}), b = vec({10, 20, 30, 40});
  const Tensor a_new = (a + b).contiguous(), b_new = (a * b).contiguous();
  a.assign(a_new);
  b.assign(b_new);
  Tensor::realize_all({&a, &b});
  EXPECT_EQ(a.to_doubles(), (D{11, 22, 33, 44}));
  EXPECT_EQ(b.to_doubles(), (D{10, 40, 90, 160}));
  // a chain: b from c, then a from the new b
  Tensor x = Tensor::zeros({4}).contiguous().realize(), y = vec({1, 2, 3, 4}),
         z = Tensor::full({4}, 10).contiguous().realize();
  y.assign((y + z).contiguous());
  x.assign((x + y).contiguous());
  Tensor::realize_all({&x, &y});
  EXPECT_EQ(y.to_doubles(), (D{11, 12, 13, 14}));
  EXPECT_EQ(x.to_doubles(), (D{11, 12, 13, 14}));
}

TEST_P(Assign, InterleavedAssignmentsAndReads) {
  Tensor a = Tensor::zeros({4}).contiguous().realize(),
         b = Tensor::zeros({4}).contiguous().realize();
  a.assign(vec({1, 2, 3, 4}));
  b.assign(a.contiguous());
  a.assign(vec({5, 6, 7, 8}));
  EXPECT_EQ(b.sum().to_doubles(), (D{10}));
  EXPECT_EQ(a.to_doubles(), (D{5, 6, 7, 8}));
  EXPECT_EQ(b.to_doubles(), (D{1, 2, 3, 4}));
}

// the optimizer bias-correction pattern: m accumulates, the parameter reads m and b, b is then
// scaled in place, ten steps, each realized together
TEST_P(Assign, OptimizerStepsReadingAndWritingTheSameBuffers) {
  Tensor b = vec({0.5}), m = vec({0}), param = vec({1});
  double b_ref = 0.5, m_ref = 0, p_ref = 1;
  for (int step = 0; step < 10; ++step) {
    m.assign(m * 0.9f + 0.1f);
    param.assign(param - m / (Tensor::full({1}, 1) - b));
    b.assign(b * 0.9f);
    Tensor::realize_all({&param, &m, &b});
    m_ref = 0.9 * m_ref + 0.1;
    p_ref = p_ref - m_ref / (1 - b_ref);
    b_ref *= 0.9;
  }
  EXPECT_NEAR(param.to_doubles()[0], p_ref, 1e-5);
}

// The same value assigned twice in a row: both assignments run, each in the buffer's log, so a
// read made after them and the buffer itself stay readable once they ran.
TEST_P(Assign, TheSameValueAssignedTwiceRunsBoth) {
  Tensor b = vec({1, 2}), c = vec({5, 6});
  b.assign(c);
  b.assign(c);
  Tensor read = b * 1.0f;
  b.realize();
  EXPECT_EQ(read.to_doubles(), (D{5, 6}));
  EXPECT_EQ(b.to_doubles(), (D{5, 6}));
  b.assign(b + 1.0f).realize();
  EXPECT_EQ(b.to_doubles(), (D{6, 7}));
}

// A detached read of a buffer realized together with a later assignment to it: the read is a copy
// made before the assignment runs (a gradient marker is no view, so the assignment does not
// rebase it).
TEST_P(Assign, DetachedReadRealizedWithALaterAssignment) {
  Tensor a = vec({1, 2});
  a.assign(a * 3.0f);
  Tensor d = a.detach();
  a.assign(a * 10.0f);
  Tensor::realize_all({&d, &a});
  EXPECT_EQ(d.to_doubles(), (D{3, 6}));
  EXPECT_EQ(a.to_doubles(), (D{30, 60}));
  // the same for a tensor over the earlier state itself, built by hand
  Tensor b = vec({1, 2});
  b.assign(b * 3.0f);
  const UOp earlier = b.uop();
  b.assign(b * 10.0f);
  Tensor t = Tensor::from_uop(earlier, {b});
  Tensor::realize_all({&t, &b});
  EXPECT_EQ(t.to_doubles(), (D{3, 6}));
  EXPECT_EQ(b.to_doubles(), (D{30, 60}));
  // a detached tensor alone is the buffer's view (no copy), and shares later assignments
  Tensor p = vec({1, 2}).realize();
  Tensor q = p.detach();
  q.realize();
  EXPECT_EQ(last_kernel_count(), 0);
  q.assign(vec({7, 8})).realize();
  EXPECT_EQ(p.to_doubles(), (D{7, 8}));
}

// tinygrad's test_detach_assignment_preserves_earlier_update
TEST_P(Assign, AssignmentsThroughDetachKeepTheirOrder) {
  Tensor x = vec({1, 2}).detach(), state = vec({0, 0}).detach();
  state.assign(state + x * 2.0f);
  Tensor result = state + 1.0f;
  x.assign(x + 1.0f);
  Tensor::realize_all({&x, &state, &result});
  EXPECT_EQ(x.to_doubles(), (D{2, 3}));
  EXPECT_EQ(state.to_doubles(), (D{2, 4}));
  EXPECT_EQ(result.to_doubles(), (D{3, 5}));
}

// AFTER(x, STORE(state, x * 3)): x, ordered after a write to another buffer
// (tinygrad's test_after_store_to_other_buffer)
TEST_P(Assign, AfterAStoreToAnotherBuffer) {
  const Tensor x = vec({2}), state = vec({0});
  const UOp store = UOp::make(Op::Store, dtypes::void_, {state.uop(), (x * 3.0f).uop()});
  const Tensor ordered =
      Tensor::from_uop(UOp::make(Op::After, x.dtype(), {x.uop(), store}), {x, state});
  // the state as that same store (numbered by from_uop) left it
  Tensor state_after = Tensor::from_uop(
      UOp::make(Op::After, state.dtype(), {state.uop(), ordered.uop().src(1)}), {state, x});
  Tensor sum = ordered + x;
  Tensor::realize_all({&sum, &state_after});
  EXPECT_EQ(sum.to_doubles(), (D{4}));
  EXPECT_EQ(state_after.to_doubles(), (D{6}));
  EXPECT_EQ(Tensor(x).to_doubles(), (D{2}));
}

// The assignment cases of tinygrad's test_gradient.py (seed 003).
TEST_P(Assign, GradientThroughOneAssignment) {
  const Tensor x = vec({2, 3});
  Tensor y = x.clone();
  y.assign(y.square());
  EXPECT_EQ(y.sum().gradient({x})[0].to_doubles(), (D{4, 6}));
}

// y = x^2, then y = y^2: the gradient reads the intermediate version of y. Its schedule runs the
// first assignment, reads it, and leaves the second pending, so nothing is read overwritten
// (tinygrad refuses this as a cycle too; here the order exists).
TEST_P(Assign, GradientThroughAnIntermediateVersion) {
  const Tensor x = vec({2, 3});
  Tensor y = x.clone();
  for (int i = 0; i < 2; ++i) y.assign(y.square());
  Tensor g = y.sum().gradient({x})[0];
  EXPECT_EQ(g.to_doubles(), (D{32, 108}));  // d/dx x^4
  EXPECT_EQ(y.to_doubles(), (D{16, 81}));
}

// Three squarings: the gradient reads two versions of y in one kernel, the first of which the
// second assignment overwrites. Refused as a cycle before anything runs, again on a retry, with
// every tensor left as it was.
TEST_P(Assign, GradientNeedingTwoVersionsOfABufferIsACycle) {
  const Tensor x = vec({2, 3});
  Tensor y = x.clone();
  for (int i = 0; i < 3; ++i) y.assign(y.square());
  Tensor g = y.sum().gradient({x})[0];
  const UOp before_x = x.uop(), before_y = y.uop(), before_g = g.uop();
  for (int attempt = 0; attempt < 2; ++attempt) {
    expect_cycle({&g});
    EXPECT_EQ(x.uop(), before_x);
    EXPECT_EQ(y.uop(), before_y);
    EXPECT_EQ(g.uop(), before_g);
  }
  EXPECT_EQ(y.to_doubles(), (D{256, 6561}));  // y itself still realizes
}

TEST_P(Assign, GradientThroughAssignmentsOfSnapshots) {
  const Tensor x = vec({2, 3});
  Tensor y = x.clone();
  for (int i = 0; i < 2; ++i) y.assign(y.clone().square());
  Tensor g = y.sum().gradient({x})[0];
  Tensor gg = g.sum().gradient({x})[0];
  Tensor::realize_all({&g, &gg});
  EXPECT_EQ(g.to_doubles(), (D{32, 108}));
  EXPECT_EQ(gg.to_doubles(), (D{48, 108}));
}

// contract: C9
TEST_P(Assign, AnExecutedCloneKeepsItsDataInFreshStorage) {
  Tensor a = vec({1, 2, 3});
  Tensor c = a.clone().realize();
  a.assign(a * 0.0).realize();
  EXPECT_EQ(c.to_doubles(), (D{1, 2, 3}));
  EXPECT_EQ(a.to_doubles(), (D{0, 0, 0}));
  EXPECT_NE(c.uop().src(0), a.uop().src(0).src(0));  // another buffer
}

// contract: C8
TEST_P(Assign, MismatchesAreErrors) {
  Tensor a = vec({1, 2, 3});
  EXPECT_THROW(a.assign(vec({1, 2})), TensorError);
  EXPECT_THROW(a.assign(Tensor::from_vector(std::vector<int32_t>{1, 2, 3}, {3}, dtypes::int32)),
               TensorError);
  EXPECT_EQ(a.to_doubles(), (D{1, 2, 3}));  // unchanged
}

// Random programs of reads, copies, assignments and partial realizes against a model with value
// semantics (a computed tensor means what its inputs held when it was made; a copy of a buffer's
// tensor is another tensor over the buffer, and sees its writes): every tensor either gives
// the model's value or is refused with an error. Never a wrong value.
// contract: C3
TEST_P(Assign, RandomProgramsNeverReadWrongContents) {
  struct Item {
    Tensor t;
    std::vector<double> want;
    int alias = -1;  // a copy of pool[alias], a buffer's tensor
  };
  int refused = 0, checked = 0;
  for (uint32_t seed = 0; seed < 25; ++seed) {
    std::mt19937 rng(seed);
    auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
    std::vector<Item> pool;
    std::vector<size_t> buffers;
    for (int b = 0; b < 3; ++b) {
      std::vector<float> v;
      for (int i = 0; i < 4; ++i) v.push_back(static_cast<float>(b * 4 + i));
      pool.push_back({vec(v), D(v.begin(), v.end())});
      buffers.push_back(pool.size() - 1);
    }
    auto flip = [](D v) { return D(v.rbegin(), v.rend()); };
    auto follow = [&](const Item& buffer) {  // the copies of a buffer's tensor see its writes
      for (Item& it : pool)
        if (it.alias >= 0 && &pool[static_cast<size_t>(it.alias)] == &buffer) it.want = buffer.want;
    };
    for (int step = 0; step < 30; ++step) {
      const int what = static_cast<int>(pick(11));
      if (what < 3) {  // a lazy read of two tensors
        const Item &a = pool[pick(pool.size())], &b = pool[pick(pool.size())];
        D w(4);
        const D fb = flip(b.want);
        for (size_t i = 0; i < 4; ++i) w[i] = a.want[i] * 0.5 + fb[i];
        pool.push_back({a.t * 0.5 + b.t.flip({0}), w});
      } else if (what < 4) {  // a copy of a buffer's tensor: sees every later write to it
        const size_t b = buffers[pick(buffers.size())];
        pool.push_back({pool[b].t, pool[b].want, static_cast<int>(b)});
      } else if (what < 7) {  // an assignment from any tensor, often reading the target too
        Item& target = pool[buffers[pick(buffers.size())]];
        const Item& v = pool[pick(pool.size())];
        D w = v.want;
        for (size_t i = 0; i < 4; ++i) w[i] += target.want[i];
        // sometimes through a kernel boundary of its own (a CONTIGUOUS under the store)
        target.t.assign(pick(2) ? (v.t + target.t).contiguous() : v.t + target.t);
        target.want = w;
        follow(target);
      } else if (what < 8) {  // a slice of a buffer assigned, reading the target too
        Item& target = pool[buffers[pick(buffers.size())]];
        const Item& v = pool[pick(pool.size())];
        const int64_t lo = static_cast<int64_t>(pick(3)),
                      hi = lo + 1 + static_cast<int64_t>(pick(3 - static_cast<size_t>(lo)));
        for (int64_t i = lo; i < hi; ++i)
          target.want[static_cast<size_t>(i)] += v.want[static_cast<size_t>(i)];
        target.t.setitem({{lo, hi, 1}}, v.t.shrink({{lo, hi}}) + target.t.shrink({{lo, hi}}));
        follow(target);
      } else {  // realize a few tensors together: all of them, or a refusal
        std::vector<Tensor*> ts;
        std::vector<size_t> idx;
        for (size_t n = 1 + pick(3); n > 0; --n) {
          idx.push_back(pick(pool.size()));
          ts.push_back(&pool[idx.back()].t);
        }
        try {
          Tensor::realize_all(ts);
        } catch (const TensorError& e) {
          ++refused;
          const std::string m = e.what();
          EXPECT_TRUE(m.find("cycle") != std::string::npos ||
                      m.find("overwritten") != std::string::npos)
              << m;
        }
      }
    }
    std::vector<Tensor*> all;  // everything in one schedule first, as a user would
    for (Item& it : pool) all.push_back(&it.t);
    try {
      Tensor::realize_all(all);
    } catch (const TensorError&) {
      ++refused;  // then each on its own below
    }
    for (Item& it : pool) {
      try {
        const D got = it.t.to_doubles();
        ASSERT_EQ(got.size(), it.want.size());
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_NEAR(got[i], it.want[i], 1e-4 * std::max(1.0, std::fabs(it.want[i])))
              << "seed " << seed;
        ++checked;
      } catch (const TensorError&) {
        ++refused;
      }
    }
  }
  EXPECT_GT(checked, 100);  // many tensors are readable, others were refused: none was wrong
  EXPECT_GT(refused, 10);
  std::printf("%d values checked, %d refusals\n", checked, refused);
  RecordProperty("refused", refused);
}

INSTANTIATE_TEST_SUITE_P(Devices, Assign, ::testing::ValuesIn(test_devices()), device_test_name);
