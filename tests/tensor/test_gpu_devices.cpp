// The CUDA and HIP devices (runtime/gpu_runtime.h) on a machine without such a GPU, as every
// developer machine and CI is: their names, the reason each cannot open (the driver library's
// dlopen error, or the driver's own error once every entry point resolved), and that reason
// raised wherever a tensor is placed on one. On a GPU the parameterized suites run there
// (tests/tensor/on_device.h: test_devices) and scripts/gpu_smoke.sh measures it.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "runtime/device.h"
#include "runtime/gpu_runtime.h"
#include "tensor/tensor.h"
#include "tests/expect_error.h"

using namespace tinyrw;

namespace {

TEST(GpuDevices, NamesAreCanonical) {
  EXPECT_EQ(canonical_device("cuda"), "CUDA");
  EXPECT_EQ(canonical_device("CUDA:0"), "CUDA");
  EXPECT_EQ(canonical_device("hip:1"), "HIP:1");
  EXPECT_TRUE(is_gpu_device("CUDA:1"));
  EXPECT_TRUE(is_gpu_device("HIP"));
  EXPECT_FALSE(is_gpu_device("CPU:1"));
  EXPECT_FALSE(is_gpu_device("INTERP"));
}

class UnavailableGpu : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (device_available(GetParam()))
      GTEST_SKIP() << GetParam() << " opens here (" << gpu_runtime(GetParam()).describe()
                   << "): the suites run on it instead";
    reason_ = gpu_unavailable(GetParam()).value_or("");
  }
  void TearDown() override { set_default_device(""); }
  std::string reason_;
};

TEST_P(UnavailableGpu, SaysWhy) {
  const std::string& base = GetParam();
  ASSERT_FALSE(reason_.empty());
  // (the Devices/* suites leave the device out here: this is where its reason is printed)
  std::printf("%s is not available here, its Devices/* tests are left out: %s\n", base.c_str(),
              reason_.c_str());
  EXPECT_EQ(reason_.rfind(base + ":", 0), 0u) << reason_;
  // a library that loads but lacks an entry point is not the vendor's runtime
  EXPECT_EQ(reason_.find(" has no "), std::string::npos) << reason_;
  // the second device is no more available than the first
  EXPECT_FALSE(device_available(base + ":1"));
  EXPECT_TRUE(gpu_unavailable(base + ":1").has_value());
}

TEST_P(UnavailableGpu, ATensorPlacedOnItRaisesTheReason) {
  const std::string& base = GetParam();
  set_default_device(base);
  expect_error<TensorError>([] { Tensor::from_vector(std::vector<float>{1, 2, 3}, {3}); }, reason_);
  set_default_device("INTERP");
  Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3});
  expect_error<TensorError>([&] { x.to(base).realize(); }, reason_);
  // nothing was lost: the tensor it was copied from still reads
  EXPECT_EQ(x.data<float>(), (std::vector<float>{1, 2, 3}));
}

INSTANTIATE_TEST_SUITE_P(Gpus, UnavailableGpu, ::testing::Values("CUDA", "HIP"));

// With CUDA_DRIVER_LIBRARY naming the CUDA toolkit's stub libcuda (CTest's gpu_driver_stub entry):
// every entry point resolves, and cuInit reports the stub, so the reason is the driver's own.
TEST(GpuDevices, TheCudaStubResolvesEveryEntryPoint) {
  const char* stub = std::getenv("CUDA_DRIVER_LIBRARY");
  if (!stub) GTEST_SKIP() << "CUDA_DRIVER_LIBRARY is not set (CTest's gpu_driver_stub sets it)";
  const std::string reason = gpu_unavailable("CUDA").value_or("");
  EXPECT_NE(reason.find("CUDA: cuInit: CUDA_ERROR_STUB_LIBRARY"), std::string::npos) << reason;
}

// Debian's libamdhip64 (scripts/setup.sh installs it) loads on any machine; without an AMD GPU
// its hipInit fails, after every entry point resolved.
TEST(GpuDevices, TheHipRuntimeResolvesEveryEntryPoint) {
  if (device_available("HIP")) GTEST_SKIP() << "a HIP device opens here";
  const std::string reason = gpu_unavailable("HIP").value_or("");
  if (reason.find("cannot load the runtime library") != std::string::npos) GTEST_SKIP() << reason;
  EXPECT_NE(reason.find("HIP: hip"), std::string::npos) << reason;
}

}  // namespace

namespace {

// Host memory standing in for a GPU's: it allocates and copies (counting the copies) and loads
// no kernels. With it the two copies of a GPU buffer (runtime/gpu_runtime.h) are checked here.
class HostMemoryGpu final : public GpuRuntime {
 public:
  std::string arch() const override { return "sm_75"; }
  std::string describe() const override { return "host memory standing in for a GPU"; }
  uint64_t allocate(size_t bytes) override {
    return reinterpret_cast<uint64_t>(new uint8_t[bytes]);
  }
  void release(uint64_t address) noexcept override { delete[] reinterpret_cast<uint8_t*>(address); }
  void copy_in(uint64_t to, const void* from, size_t bytes) override {
    ++copies_in;
    std::memcpy(reinterpret_cast<void*>(to), from, bytes);
  }
  void copy_out(void* to, uint64_t from, size_t bytes) override {
    ++copies_out;
    std::memcpy(to, reinterpret_cast<const void*>(from), bytes);
  }
  std::shared_ptr<GpuKernel> load(const std::string& image, const std::string& name) override {
    throw TensorError("HostMemoryGpu: loads no kernels (" + name + ")");
  }
  void synchronize() override {}
  int copies_in = 0, copies_out = 0;

 protected:
  std::unique_ptr<EventPair> start_events() override {
    throw std::logic_error("HostMemoryGpu: times nothing");
  }
  void launch_kernel(const GpuKernel&, const std::array<unsigned, 3>&,
                     const std::array<unsigned, 3>&, void**) override {
    throw std::logic_error("HostMemoryGpu: launches nothing");
  }
};

constexpr const char* kStandIn = "CUDA:7";

class TwoCopies : public ::testing::Test {
 protected:
  void SetUp() override {
    static HostMemoryGpu* installed = [] {
      auto rt = std::make_unique<HostMemoryGpu>();
      HostMemoryGpu* p = rt.get();
      install_gpu_runtime(kStandIn, std::move(rt));
      return p;
    }();
    gpu_ = installed;
    set_default_device("INTERP:3");  // host data is made on a host device
    start_ = *gpu_;
  }
  void TearDown() override { set_default_device(""); }
  static Tensor on_host(int n, float scale) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = scale * static_cast<float>(i);
    return Tensor::from_vector(v, {n});
  }
  static std::vector<float> expected(int n, float scale) { return on_host(n, scale).data<float>(); }
  int copies_in() const { return gpu_->copies_in - start_.copies_in; }
  int copies_out() const { return gpu_->copies_out - start_.copies_out; }
  HostMemoryGpu* gpu_ = nullptr;
  HostMemoryGpu start_;
};

TEST_F(TwoCopies, ATransferCopiesInOnceAndAReadCopiesOutOnce) {
  Tensor y = on_host(1000, 1.5f).to(kStandIn);
  y.realize();
  EXPECT_EQ(copies_in(), 1);  // straight from the host tensor into device memory
  EXPECT_EQ(copies_out(), 0);
  EXPECT_EQ(y.data<float>(), expected(1000, 1.5f));
  EXPECT_EQ(copies_out(), 1);
  EXPECT_EQ(y.data<float>(), expected(1000, 1.5f));
  EXPECT_EQ(copies_out(), 1);  // the host copy is current now
}

TEST_F(TwoCopies, BackToAHostDeviceCopiesOutOnce) {
  Tensor y = on_host(500, -2.0f).to(kStandIn);
  y.realize();
  Tensor back = y.to("INTERP");
  back.realize();
  EXPECT_EQ(copies_out(), 1);  // straight from device memory into the host buffer
  EXPECT_EQ(back.data<float>(), expected(500, -2.0f));
  EXPECT_EQ(copies_out(), 1);
}

// Freed device memory is reused, but never while a buffer still holds it.
TEST_F(TwoCopies, BuffersOfOneSizeNeverShareDeviceMemory) {
  std::vector<Tensor> kept;
  for (int k = 0; k < 4; ++k) {
    Tensor t = on_host(256, static_cast<float>(k + 1)).to(kStandIn);
    t.realize();
    kept.push_back(t);
  }
  {
    Tensor dropped = on_host(256, 100.0f).to(kStandIn);
    dropped.realize();
  }
  Tensor reuses = on_host(256, 7.0f).to(kStandIn);
  reuses.realize();
  for (int k = 0; k < 4; ++k)
    EXPECT_EQ(kept[static_cast<size_t>(k)].to("INTERP").data<float>(),
              expected(256, static_cast<float>(k + 1)));
  EXPECT_EQ(reuses.data<float>(), expected(256, 7.0f));
}

// A kernel on the device is lowered for CUDA and compiled to PTX; the runtime's refusal to load
// it reaches the caller, and the tensors it read are intact.
TEST_F(TwoCopies, AKernelTheDeviceRefusesRaisesItsError) {
  Tensor y = on_host(64, 1.0f).to(kStandIn);
  y.realize();
  expect_error<TensorError>([&] { (y * 2 + 1).realize(); }, "HostMemoryGpu: loads no kernels");
  EXPECT_EQ(y.data<float>(), expected(64, 1.0f));
}

}  // namespace
