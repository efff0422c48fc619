// A test fixture parameterized by device name: each test runs on that device, or is skipped
// with the reason when the device is not available here.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "codegen/target.h"
#include "tensor/tensor.h"

// With INTERP_TARGET=CUDA or HIP, INTERP runs that GPU target's kernels (codegen/target.h): a test
// about the CPU's kernel shapes on `device` (their names, CPU-only opts, float results equal to
// the CPU's bit for bit) is skipped there, with the reason.
#define SKIP_WHERE_INTERP_RUNS_GPU_KERNELS(device)                           \
  if (std::string(device) == "INTERP" && !::tinyrw::interp_target().empty()) \
  GTEST_SKIP() << "INTERP runs " << ::tinyrw::interp_target()                \
               << "'s kernels (INTERP_TARGET): this test is about the CPU's kernel shapes"

namespace tinyrw {

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
