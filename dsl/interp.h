// The rule interpreter: runs a resolved rule set directly, with no generated code. It gives the
// same results as the generated matcher of the same set (checked by the differential mode).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "dsl/resolve.h"
#include "dsl/ruleset.h"

namespace tinyrw::rw {

class InterpretedMatcher : public RuleSetMatcher {
 public:
  // `program` must outlive the matcher (shared ownership keeps it alive).
  InterpretedMatcher(std::shared_ptr<const ResolvedProgram> program, const ResolvedSet& set);
  std::string_view name() const override { return set_.name; }
  std::optional<Value> apply(const UOp& node, RewriteContext& ctx, const RuleInfo** fired,
                             const UOp* gradient = nullptr) const override;
  const ResolvedSet& set() const { return set_; }

 private:
  std::shared_ptr<const ResolvedProgram> program_;
  const ResolvedSet& set_;
  std::vector<std::vector<const ResolvedRule*>> by_op_;  // rules to try per root op, in order
  size_t max_slots_ = 0;  // of any rule: one frame per apply() serves every rule tried
  // The sets `rewritten_fully(u, "set")` names, interpreted from the same program, made on first
  // use.
  NamedRuleSets named_;
  mutable std::mutex named_mutex_;
  mutable std::map<std::string, std::unique_ptr<InterpretedMatcher>, std::less<>> named_sets_;
};

// Loads a .rw file and returns an interpreted matcher for one of its rule sets.
std::unique_ptr<InterpretedMatcher> interpret(const std::string& path, const std::string& set,
                                              Diagnostics& diags);

}  // namespace tinyrw::rw
