#include "dsl/ruleset.h"

#include <fmt/format.h>

#include "dsl/diagnostics.h"

namespace tinyrw::rw {

UOp RuleSetMatcher::rewrite(const UOp& node, RewriteContext& ctx, const RuleInfo** fired) const {
  std::optional<Value> v = apply(node, ctx, fired);
  if (!v) return UOp();
  if (!v->is_uop()) {
    throw RwError(fmt::format("rule {} produced {}, not a UOp",
                              fired && *fired ? (*fired)->name : std::string("?"), v->repr()));
  }
  return v->as_uop();
}

std::optional<Value> DifferentialMatcher::apply(const UOp& node, RewriteContext& ctx,
                                                const RuleInfo** fired, const UOp* gradient) const {
  const RuleInfo* fa = nullptr;
  const RuleInfo* fb = nullptr;
  // An error in a rule must be the same error in both executors.
  std::string ea, eb;
  std::optional<Value> va, vb;
  try {
    va = a_.apply(node, ctx, &fa, gradient);
  } catch (const std::exception& e) {
    ea = e.what();
  }
  try {
    vb = b_.apply(node, ctx, &fb, gradient);
  } catch (const std::exception& e) {
    eb = e.what();
  }
  ++compared_;
  // Error texts start with the rule's location, whose path differs between executors.
  auto without_location = [](const std::string& e) {
    const size_t at = e.find("error in rule ");
    return at == std::string::npos ? e : e.substr(at);
  };
  if (without_location(ea) != without_location(eb)) {
    throw RwError(fmt::format(
        "differential mismatch in rule set '{}' at {}:\n  first: {}\n  second: {}", name(),
        node.repr(2), ea.empty() ? "no error" : ea, eb.empty() ? "no error" : eb));
  }
  if (!ea.empty()) throw RwError(ea);
  // Paths differ (the generator records the path it was given), so rules compare by name
  // (set#index) and line.
  auto same_rule = [](const RuleInfo* x, const RuleInfo* y) {
    return (x == nullptr) == (y == nullptr) && (!x || (x->name == y->name && x->line == y->line));
  };
  const bool same = va.has_value() == vb.has_value() && (!va || *va == *vb) && same_rule(fa, fb);
  if (!same) {
    auto describe = [](const std::optional<Value>& v, const RuleInfo* r) {
      return v ? fmt::format("{} (rule {} at {})", v->repr(), r ? r->name : "?",
                             r ? r->location() : "?")
               : std::string("no match");
    };
    throw RwError(fmt::format("differential mismatch in rule set '{}' at {}:\n  {}: {}\n  {}: {}",
                              name(), node.repr(2), "first", describe(va, fa), "second",
                              describe(vb, fb)));
  }
  if (fired) *fired = fa;
  return va;
}

}  // namespace tinyrw::rw
