#include "dsl/verify.h"

#include <cstdlib>

#include <fmt/format.h>

#include "compiler/runtime.h"
#include "ir/graph.h"

namespace tinyrw {

bool spec_enabled() {
  const char* s = std::getenv("SPEC");
  return s && std::atoi(s) >= 1;
}

void verify(const UOp& root, std::string_view verifier_set) {
  const rw::RuleSetMatcher* v = rw::compiled_rules(verifier_set);
  if (!v) throw SpecError(fmt::format("no compiled verifier '{}'", verifier_set));
  RewriteContext ctx;
  for (const UOp& u : toposort(root)) {
    const RuleInfo* rule = nullptr;
    std::optional<rw::Value> r;
    std::string reason;
    try {
      r = v->apply(u, ctx, &rule);
    } catch (const std::exception& e) {
      reason = e.what();
    }
    if (reason.empty()) {
      if (!r)
        reason = "no rule accepts this op";
      else if (!r->status_ok()) {
        reason = r->kind() == rw::Value::Kind::Status && !r->status_ok()
                     ? r->as_string()
                     : "the rule's check is false";
        if (reason.empty()) reason = "rejected";
        if (rule) reason += fmt::format(" ({} at {})", rule->name, rule->location());
      }
    }
    if (reason.empty()) continue;
    std::string srcs;
    for (const UOp& s : u.src())
      srcs += fmt::format("{}{} {}", srcs.empty() ? "" : ", ", op_info(s.op()).py_name,
                          s.dtype().repr());
    throw SpecError(fmt::format("SPEC: {} rejects {} {} with sources ({}) arg {}: {}", verifier_set,
                                op_info(u.op()).py_name, u.dtype().repr(), srcs, u.arg().repr(),
                                reason));
  }
}

}  // namespace tinyrw
