// The interface of a rule set that both executors implement: generated (rwc) and interpreted.
#pragma once

#include <optional>

#include "dsl/value.h"
#include "ir/rewrite.h"

namespace tinyrw::rw {

class RuleSetMatcher : public Matcher {
 public:
  // The first matching rule's result: a UOp (rewrite rules), a status (verifiers) or a tuple of
  // gradients (gradient rules; `gradient` binds `g`). nullopt when no rule fires.
  virtual std::optional<Value> apply(const UOp& node, RewriteContext& ctx, const RuleInfo** fired,
                                     const UOp* gradient = nullptr) const = 0;
  // Matcher: rewrite rules as used by graph_rewrite.
  UOp rewrite(const UOp& node, RewriteContext& ctx, const RuleInfo** fired) const final;
};

// Runs two executors of the same rule set side by side and raises RwError at the first node
// where their results differ (the differential mode).
class DifferentialMatcher : public RuleSetMatcher {
 public:
  DifferentialMatcher(const RuleSetMatcher& a, const RuleSetMatcher& b) : a_(a), b_(b) {}
  std::optional<Value> apply(const UOp& node, RewriteContext& ctx, const RuleInfo** fired,
                             const UOp* gradient = nullptr) const override;
  std::string_view name() const override { return a_.name(); }
  uint64_t compared() const { return compared_; }

 private:
  const RuleSetMatcher& a_;
  const RuleSetMatcher& b_;
  mutable uint64_t compared_ = 0;
};

}  // namespace tinyrw::rw
