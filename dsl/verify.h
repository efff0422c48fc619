// Running the verifier rule sets of rules/spec.rw over a graph (SPEC=1 does it after every
// pipeline stage).
#pragma once

#include <stdexcept>
#include <string_view>

#include "dsl/ruleset.h"
#include "ir/uop.h"

namespace tinyrw {

class SpecError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Every node under root must be accepted by a rule of `verifier_set` (a compiled verifier):
// raises SpecError naming the node (op, dtype, sources, arg), the rule set and the reason.
// enter_calls=false: the bodies of CALLs are not part of the graph (verify them on their own).
// Callers pass the rule set's typed accessor (`rules::spec_kernel()`); the overload by name is
// for tools and tests.
void verify(const UOp& root, const rw::RuleSetMatcher& verifier, bool enter_calls = true);
void verify(const UOp& root, std::string_view verifier_set, bool enter_calls = true);
// A tensor graph with `tensor_set`, and the bodies of its CALLs as what they are: a function's
// body (a tensor graph over PARAMs) with `tensor_set`, a kernel's with `kernel_body_set`.
void verify_with_calls(const UOp& root, const rw::RuleSetMatcher& tensor_set,
                       const rw::RuleSetMatcher& kernel_body_set);
// $SPEC >= 1.
bool spec_enabled();

}  // namespace tinyrw
