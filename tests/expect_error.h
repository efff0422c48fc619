// expect_error(f, what): f throws an E whose message contains `what` (a test fails otherwise).
// Shared by the test files that check error messages.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <string>

namespace tinyrw {

template <class E = std::exception, class F>
void expect_error(F f, const std::string& what) {
  try {
    f();
    ADD_FAILURE() << "no error, expected one containing '" << what << "'";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

}  // namespace tinyrw
