// A test fixture parameterized by device name: each test runs on that device, or is skipped
// with the reason when the device is not available here.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "codegen/target.h"
#include "runtime/gpu_runtime.h"
#include "tensor/tensor.h"

// With INTERP_TARGET=CUDA or HIP, INTERP runs that GPU target's kernels (codegen/target.h): a test
// about the CPU's kernel shapes on `device` (their names, CPU-only opts, float results equal to
// the CPU's bit for bit) is skipped there, with the reason.
// A GPU device's kernels are that target's too.
#define SKIP_WHERE_INTERP_RUNS_GPU_KERNELS(device)                                   \
  if (::tinyrw::is_gpu_device(device))                                               \
    GTEST_SKIP() << (device)                                                         \
                 << " runs GPU-shaped kernels: this test is about the CPU's kernel " \
                    "shapes";                                                        \
  if (std::string(device) == "INTERP" && !::tinyrw::interp_target().empty())         \
  GTEST_SKIP() << "INTERP runs " << ::tinyrw::interp_target()                        \
               << "'s kernels (INTERP_TARGET): this test is about the CPU's kernel shapes"

namespace tinyrw {

// The devices the parameterized suites run on: INTERP and CPU, and CUDA and HIP where such a GPU
// is here (scripts/gpu_smoke.sh runs the suites there).
inline std::vector<std::string> test_devices() {
  std::vector<std::string> devices{"INTERP", "CPU"};
  for (const char* gpu : {"CUDA", "HIP"})
    if (device_available(gpu)) devices.push_back(gpu);
  return devices;
}

// A parameterized test's name suffix: its device ("Devices/TensorOps.Add/CUDA"), so that a GPU
// machine can run one device's tests (--gtest_filter='*/CUDA').
inline std::string device_test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (char& c : name)
    if (c == ':') c = '_';
  return name;
}

class OnDevice : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!device_available(GetParam()))
      GTEST_SKIP() << "device " << GetParam() << " is not available here";
    set_default_device(GetParam());
  }
  void TearDown() override { set_default_device(""); }
};

}  // namespace tinyrw
