// Symbolic simplification with the rules of rules/symbolic.rw, compiled or interpreted.
#pragma once

#include <memory>
#include <string>

#include "dsl/ruleset.h"
#include "ir/uop.h"

namespace tinyrw {

namespace rw {
class InterpretedMatcher;
}

// The directory of the .rw rule files the interpreter loads: $TINYRW_RULES_DIR if set, else the
// installed share/tinyrw/rules, else the source tree this library was built from.
std::string rules_dir();

class Simplifier {
 public:
  enum class Mode { Compiled, Interpreted, Differential };
  // set: symbolic_simple, symbolic, symbolic_flat or sym (the strongest, the default).
  // Differential runs both executors side by side and raises at the first difference.
  explicit Simplifier(Mode mode = Mode::Compiled, const std::string& set = "sym");
  explicit Simplifier(bool interpreted, const std::string& set = "sym")
      : Simplifier(interpreted ? Mode::Interpreted : Mode::Compiled, set) {}
  ~Simplifier();
  UOp simplify(const UOp& expr) const;
  const rw::RuleSetMatcher& matcher() const { return *matcher_; }

 private:
  std::unique_ptr<rw::InterpretedMatcher> interpreted_;
  std::unique_ptr<rw::DifferentialMatcher> differential_;
  const rw::RuleSetMatcher* matcher_ = nullptr;
};

}  // namespace tinyrw
