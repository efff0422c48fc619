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
  std::optional<Value> va = a_.apply(node, ctx, &fa, gradient);
  std::optional<Value> vb = b_.apply(node, ctx, &fb, gradient);
  ++compared_;
  const bool same = va.has_value() == vb.has_value() && (!va || *va == *vb) &&
                    (fa == nullptr) == (fb == nullptr) && (!fa || fa->location() == fb->location());
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
