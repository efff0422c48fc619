// Running the verifier rule sets of rules/spec.rw over a graph (SPEC=1 does it after every
// pipeline stage).
#pragma once

#include <stdexcept>
#include <string_view>

#include "ir/uop.h"

namespace tinyrw {

class SpecError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Every node under root must be accepted by a rule of `verifier_set` (a compiled verifier):
// raises SpecError naming the node (op, dtype, sources, arg), the rule set and the reason.
void verify(const UOp& root, std::string_view verifier_set);
// $SPEC >= 1.
bool spec_enabled();

}  // namespace tinyrw
