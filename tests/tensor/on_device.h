// A test fixture parameterized by device name: each test runs on that device, or is skipped
// with the reason when the device is not available here.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "tensor/tensor.h"

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
