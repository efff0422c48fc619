#include "dsl/verify.h"

#include <cstdlib>
#include <unordered_set>

#include <fmt/format.h>

#include "dsl/compiled.h"
#include "ir/call.h"
#include "ir/graph.h"

namespace tinyrw {

bool spec_enabled() {
  const char* s = std::getenv("SPEC");
  return s && std::atoi(s) >= 1;
}

void verify(const UOp& root, std::string_view verifier_set, bool enter_calls) {
  const rw::RuleSetMatcher* v = rw::compiled_rules(verifier_set);
  if (!v) throw SpecError(fmt::format("no compiled verifier '{}'", verifier_set));
  verify(root, *v, enter_calls);
}

void verify(const UOp& root, const rw::RuleSetMatcher& verifier, bool enter_calls) {
  const rw::RuleSetMatcher* v = &verifier;
  const std::string_view verifier_set = verifier.name();
  RewriteContext ctx;
  for (const UOp& u : toposort(root, nullptr, enter_calls)) {
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

void verify_with_calls(const UOp& root, const rw::RuleSetMatcher& tensor_set,
                       const rw::RuleSetMatcher& kernel_body_set) {
  std::vector<std::pair<UOp, bool>> work{{root, false}};  // (graph, is a kernel body)
  std::unordered_set<UOp> seen;
  while (!work.empty()) {
    const auto [graph, kernel] = work.back();
    work.pop_back();
    verify(graph, kernel ? kernel_body_set : tensor_set, /*enter_calls=*/false);
    for (const UOp& u : toposort(graph, nullptr, /*enter_calls=*/false))
      if (u.op() == Op::Call && seen.insert(u).second)
        work.emplace_back(u.src(0), CallInfo::of(u).kernel);
  }
}

}  // namespace tinyrw
