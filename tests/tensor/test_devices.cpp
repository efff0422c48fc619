// Devices with indices (CPU:1, INTERP:2): canonical names, tensors placed on a device, Tensor::to
// and the transfers it schedules (tinygrad's COPY: one schedule item named "copy ..."), kernels
// over two devices' buffers refused, gradients through a copy. The kernel counts and names are
// tinygrad's for the same programs (its CPU device, DEBUG=2).
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "runtime/device.h"
#include "tensor/storage.h"
#include "tensor/tensor.h"
#include "tests/expect_error.h"

using namespace tinyrw;

namespace {

// Skips a test on a machine without the CPU device (every name here is a CPU or INTERP one).
#define REQUIRE_CPU() \
  if (!device_available("CPU")) GTEST_SKIP() << "the CPU device is not available here"

TEST(DeviceNames, AreCanonical) {
  EXPECT_EQ(canonical_device("CPU"), "CPU");
  EXPECT_EQ(canonical_device("cpu"), "CPU");
  EXPECT_EQ(canonical_device("CPU:0"), "CPU");
  EXPECT_EQ(canonical_device("cpu:1"), "CPU:1");
  EXPECT_EQ(canonical_device("Interp:12"), "INTERP:12");
  EXPECT_EQ(device_base("CPU:3"), "CPU");
  EXPECT_EQ(device_base("INTERP"), "INTERP");
}

TEST(DeviceNames, UnknownOnesAreRefused) {
  expect_error([] { canonical_device("GPU"); }, "unknown device 'GPU'");
  for (const char* bad : {"CPU:", "CPU:x", "CPU:-1", "CPU:1:2"})
    expect_error([&] { canonical_device(bad); }, "must be a non-negative number");
  EXPECT_FALSE(device_available("GPU"));
  EXPECT_FALSE(device_available("CPU:x"));
  EXPECT_TRUE(device_available("INTERP:3"));
  expect_error([] { set_default_device("TPU:1"); }, "unknown device 'TPU:1'");
  expect_error([] { Tensor::from_vector(std::vector<float>{1}, {1}).to("NPU"); },
               "unknown device 'NPU'");
}

TEST(Devices, DefaultDeviceMayHaveAnIndex) {
  REQUIRE_CPU();
  set_default_device("cpu:1");
  EXPECT_EQ(default_device(), "CPU:1");
  Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3});
  EXPECT_EQ(a.device(), "CPU:1");
  Tensor b = (a * 2).realize();
  EXPECT_EQ(b.device(), "CPU:1");
  EXPECT_EQ(b.data<float>(), (std::vector<float>{2, 4, 6}));
  set_default_device("");
  EXPECT_EQ(a.device(), "CPU:1");  // a tensor stays where it was made
}

TEST(Devices, ToCopiesOnceAndComputesThere) {
  REQUIRE_CPU();
  set_default_device("CPU");
  Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {4}).realize();
  Tensor b = a.to("CPU:1");
  EXPECT_EQ(b.device(), "CPU:1");
  Tensor c = (b + 1).realize();
  // tinygrad: copy 16 B, CPU:1 <- CPU, then E_4 on CPU:1
  EXPECT_EQ(last_kernel_count(), 2);
  ASSERT_EQ(last_kernel_names().size(), 2u);
  EXPECT_EQ(last_kernel_names()[0], "copy       16 B,   CPU:1 <- CPU    ");
  EXPECT_EQ(last_kernel_names()[1], "E_4");
  EXPECT_EQ(c.device(), "CPU:1");
  EXPECT_EQ(c.data<float>(), (std::vector<float>{2, 3, 4, 5}));
  EXPECT_EQ(a.to("cpu:0").uop(), a.uop());  // already there: itself
  set_default_device("");
}

TEST(Devices, ACopyOfAComputedOrMovedValueRealizesItFirst) {
  REQUIRE_CPU();
  set_default_device("CPU");
  // a permuted view: made contiguous on CPU, then copied (tinygrad: 2 items)
  Tensor m = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2}).realize();
  Tensor t = m.permute({1, 0}).to("CPU:1");
  EXPECT_EQ(t.shape(), (Dims{2, 2}));
  EXPECT_EQ(t.data<float>(), (std::vector<float>{1, 3, 2, 4}));
  Tensor u = (m * 3).to("CPU:1").realize();
  EXPECT_EQ(last_kernel_count(), 2);
  EXPECT_EQ(last_kernel_names().at(1), "copy       16 B,   CPU:1 <- CPU    ");
  EXPECT_EQ(u.data<float>(), (std::vector<float>{3, 6, 9, 12}));
  // a whole buffer seen in another shape is copied as it is: one item
  Tensor r = m.reshape({4}).to("CPU:1").realize();
  EXPECT_EQ(last_kernel_count(), 1);
  EXPECT_EQ(r.data<float>(), (std::vector<float>{1, 2, 3, 4}));
  set_default_device("");
}

TEST(Devices, ConstantsAreComputedOnTheDefaultDeviceThenCopied) {
  REQUIRE_CPU();
  set_default_device("CPU");
  Tensor o = Tensor::ones({4}).to("CPU:1").realize();
  // tinygrad: E_4 on CPU (its constants are made on the default device), then the copy
  EXPECT_EQ(last_kernel_count(), 2);
  EXPECT_EQ(last_kernel_names().at(0), "E_4");
  EXPECT_EQ(last_kernel_names().at(1), "copy       16 B,   CPU:1 <- CPU    ");
  EXPECT_EQ(o.device(), "CPU:1");
  EXPECT_EQ(o.data<float>(), (std::vector<float>{1, 1, 1, 1}));
  set_default_device("");
}

TEST(Devices, AKernelOverTwoDevicesIsRefused) {
  REQUIRE_CPU();
  Tensor a = Tensor::from_vector(std::vector<float>{1, 2}, {2}).to("CPU").realize();
  Tensor b = a.to("CPU:1").realize();
  expect_error([&] { (a + b).realize(); },
               "all buffers must be on the same device: ('CPU', 'CPU:1')");
  // ... and an assignment of another device's value
  expect_error([&] { a.assign(b); }, "assign device mismatch: a value on CPU:1 into CPU");
  EXPECT_EQ(a.data<float>(), (std::vector<float>{1, 2}));  // nothing written
}

TEST(Devices, CopiesBetweenInterpAndCpuKeepEveryDtype) {
  REQUIRE_CPU();
  Tensor i = Tensor::from_vector(std::vector<int64_t>{-5, 7, 1LL << 40}, {3}, dtypes::int64)
                 .to("INTERP:2");
  Tensor back = (i.to("CPU:1") * 2).to("INTERP");
  EXPECT_EQ(back.device(), "INTERP");
  EXPECT_EQ(back.data<int64_t>(), (std::vector<int64_t>{-10, 14, 1LL << 41}));
  Tensor flags = Tensor::from_vector(std::vector<bool>{true, false}, {2}, dtypes::bool_);
  EXPECT_EQ(flags.to("INTERP:1").data<bool>(), (std::vector<bool>{true, false}));
  Tensor h = Tensor::from_vector(std::vector<float>{0.5f, -2.f}, {2}, dtypes::float16);
  EXPECT_EQ(h.to("CPU:3").data<float>(), (std::vector<float>{0.5f, -2.f}));
  // a scalar and a tensor of no elements
  EXPECT_EQ(Tensor::from_vector(std::vector<float>{4}, {}).to("CPU:1").data<float>(),
            (std::vector<float>{4}));
  EXPECT_EQ(Tensor::from_vector(std::vector<float>{}, {0, 3}).to("CPU:1").data<float>().size(), 0u);
}

TEST(Devices, GradientsFlowBackThroughACopy) {
  REQUIRE_CPU();
  Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3}).to("CPU").realize();
  Tensor loss = (x.to("CPU:1") * x.to("CPU:1")).sum();
  std::vector<Tensor> g = loss.gradient({x});
  EXPECT_EQ(g[0].device(), "CPU");
  EXPECT_EQ(g[0].data<float>(), (std::vector<float>{2, 4, 6}));
}

// A copy is a read like any other (the scheduling contract): made before an assignment, it sees
// the old contents when realized with it or before it, and is refused once they are overwritten.
TEST(Devices, ACopyIsOrderedWithAssignments) {
  REQUIRE_CPU();
  Tensor a = Tensor::from_vector(std::vector<float>{1, 2}, {2}).to("CPU").realize();
  Tensor before = a.to("CPU:1");
  a.assign(a * 10);
  Tensor::realize_all({&before, &a});
  EXPECT_EQ(before.data<float>(), (std::vector<float>{1, 2}));
  EXPECT_EQ(a.to("CPU:1").data<float>(), (std::vector<float>{10, 20}));
  Tensor stale = a.to("CPU:1");
  a.assign(a + 1).realize();
  expect_error([&] { stale.realize(); }, "cannot schedule this read");
}

TEST(Devices, ToKeepsTheGradient) {
  REQUIRE_CPU();
  Tensor x = Tensor::from_vector(std::vector<float>{1, 2}, {2}).to("CPU").realize();
  (x * 3).sum().backward({&x});
  ASSERT_NE(x.grad(), nullptr);
  Tensor y = x.to("CPU:2");
  ASSERT_NE(y.grad(), nullptr);
  EXPECT_EQ(y.grad()->device(), "CPU:2");
  EXPECT_EQ(y.grad()->data<float>(), (std::vector<float>{3, 3}));
}

// Each device's launches run on its own queue, devices at once (runtime/device_queues.h): a copy
// still sees its source as the kernels before it left it, and an assignment on the source's
// device waits for the copies made before it, however the threads interleave.
TEST(Devices, DevicesRunAtOnceAndEveryReadSeesItsOrder) {
  REQUIRE_CPU();
  const int64_t n = 1 << 16;
  std::vector<float> start(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) start[static_cast<size_t>(i)] = static_cast<float>(i % 97);
  for (int round = 0; round < 10; ++round) {
    Tensor a = Tensor::from_vector(start, {n}).to("CPU:1").realize();
    Tensor b = Tensor::from_vector(start, {n}).to("CPU:2").realize();
    Tensor a_then = a.to("CPU:2") * 2;  // made before a's assignment: a as it is
    Tensor b_then = b.to("CPU:1") + 1;
    a.assign(a + 1000);
    b.assign(b * 3);
    Tensor mix = a_then + b;  // on CPU:2, after b's assignment
    Tensor::realize_all({&a_then, &b_then, &a, &b, &mix});
    const std::vector<float> at = a_then.data<float>(), bt = b_then.data<float>(),
                             av = a.data<float>(), m = mix.data<float>();
    for (int64_t i = 0; i < n; i += 251) {
      const float x = start[static_cast<size_t>(i)];
      ASSERT_EQ(at[static_cast<size_t>(i)], 2 * x) << i;
      ASSERT_EQ(bt[static_cast<size_t>(i)], x + 1) << i;
      ASSERT_EQ(av[static_cast<size_t>(i)], x + 1000) << i;
      ASSERT_EQ(m[static_cast<size_t>(i)], 2 * x + 3 * x) << i;
    }
  }
}

// A launch that fails on one device stops what has not started on the others; what did run is
// recorded, so realizing again runs every assignment exactly once, and the failed one's target
// is as it was.
TEST(Devices, AFailureOnOneDeviceKeepsTheOthersWorkDoneOnce) {
  REQUIRE_CPU();
  for (int round = 0; round < 10; ++round) {
    Tensor x = Tensor::from_vector(std::vector<int32_t>{1, 2, 3, 4}, {4}, dtypes::int32)
                   .to("CPU:2")
                   .realize();
    Tensor y = Tensor::from_vector(std::vector<int32_t>{10, 20, 30, 40}, {4}, dtypes::int32)
                   .to("CPU:1")
                   .realize();
    Tensor z =
        Tensor::from_vector(std::vector<int32_t>{1, 1, 0, 1}, {4}, dtypes::int32).to("CPU:1");
    const std::shared_ptr<Storage> ys = y.storages().at(0);
    x.assign(x + 1);
    y.assign(Tensor::alu(Op::CDiv, {y, z}));
    expect_error([&] { Tensor::realize_all({&x, &y}); }, "division by zero in CDiv");
    EXPECT_TRUE(ys->executed_assignments.empty());
    std::vector<int32_t> y_now(4);
    std::memcpy(y_now.data(), ys->bytes.data(), 16);
    EXPECT_EQ(y_now, (std::vector<int32_t>{10, 20, 30, 40}));
    EXPECT_EQ(x.data<int32_t>(), (std::vector<int32_t>{2, 3, 4, 5}));
  }
}

}  // namespace
