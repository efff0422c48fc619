// Support for the C++ that rwc generates: fast node accessors, the base class of compiled rule
// sets (statistics, error locations) and the registry that finds them by name.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dsl/ruleset.h"
#include "ir/uop_node.h"

namespace tinyrw::rw::gen {

inline Op op(const UOp& u) { return UOpAccess::node(u)->op(); }
inline uint32_t nsrc(const UOp& u) { return UOpAccess::node(u)->nsrc(); }
inline const UOp& src(const UOp& u, size_t i) { return UOpAccess::node(u)->srcs()[i]; }
inline const Arg& arg(const UOp& u) { return UOpAccess::node(u)->arg; }
inline DType dtype(const UOp& u) { return UOpAccess::node(u)->dtype(); }

bool arg_equals(const Arg& actual, const Arg& literal);  // numbers compare by value
template <class F>
bool all_src(const UOp& u, F&& f) {
  for (uint32_t i = 0; i < nsrc(u); ++i)
    if (!f(src(u, i))) return false;
  return true;
}
bool all_sources_same(const UOp& u);
// The registered helper of a declared name; throws when it is missing or does not match the
// declaration the rules were compiled against (arity, parameter and result types). Generated
// code calls it once per helper and keeps the reference.
const Helper& helper(std::string_view name, std::span<const Type> params, Type result);

// The base of every generated rule set. Generated code implements `dispatch`, which returns the
// position (in the root op's rule order) of the rule that fired.
class CompiledMatcher : public RuleSetMatcher {
 public:
  CompiledMatcher(std::string name, std::span<const RuleInfo> rules);
  std::optional<Value> apply(const UOp& node, RewriteContext& ctx, const RuleInfo** fired,
                             const UOp* gradient = nullptr) const final;
  std::string_view name() const override { return name_; }
  std::span<const RuleInfo> rules() const { return rules_; }

 protected:
  virtual std::optional<Value> dispatch(const UOp& n, RewriteContext& ctx, const UOp* g,
                                        int& rule) const = 0;
  // Rule-table indices tried for a root op, in order (for statistics).
  virtual std::span<const int> order(Op op) const = 0;

 private:
  std::string name_;
  std::span<const RuleInfo> rules_;
};

using MatcherFactory = std::function<std::unique_ptr<CompiledMatcher>()>;
// Called by generated code at static initialization.
void register_compiled(const std::string& name, const std::string& file, MatcherFactory make);
// The registered instance, for the typed accessors rwc emits (`rules::rangeify()`); throws when the
// set is not registered yet (an accessor called during another file's static initialization).
const RuleSetMatcher& registered(std::string_view name);

}  // namespace tinyrw::rw::gen

namespace tinyrw::rw {
// The compiled rule set of that name (one instance per process), or null.
const RuleSetMatcher* compiled_rules(std::string_view name);
std::vector<std::string> compiled_rule_set_names();
}  // namespace tinyrw::rw
