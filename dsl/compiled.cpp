#include "dsl/compiled.h"

#include <chrono>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "dsl/resolve.h"
#include "ir/stats.h"

namespace tinyrw::rw::gen {

bool arg_equals(const Arg& actual, const Arg& literal) {
  return arg_literal_matches(literal, actual);
}

bool all_sources_same(const UOp& u) {
  for (uint32_t i = 1; i < nsrc(u); ++i)
    if (!(src(u, i) == src(u, 0))) return false;
  return true;
}

const Helper& helper(std::string_view name, std::span<const Type> params, Type result) {
  const Helper* h = find_helper(name);
  if (!h) throw RwError(fmt::format("helper '{}' used by compiled rules is not registered", name));
  const int n = static_cast<int>(params.size());
  if (n < h->min_args || n > h->max_args || h->result != result) {
    throw RwError(fmt::format(
        "helper '{}' is declared with {} argument(s) -> {}, but the C++ helper registered under "
        "that name takes {} to {} -> {}",
        name, params.size(), type_name(result), h->min_args, h->max_args, type_name(h->result)));
  }
  if (auto why = helper_signature_mismatch(*h, params, result)) {
    throw RwError(
        fmt::format("helper '{}' does not match the C++ helper registered under that "
                    "name: {}",
                    name, *why));
  }
  return *h;
}

CompiledMatcher::CompiledMatcher(std::string name, std::span<const RuleInfo> rules)
    : name_(std::move(name)), rules_(rules) {}

std::optional<Value> CompiledMatcher::apply(const UOp& node, RewriteContext& ctx,
                                            const RuleInfo** fired, const UOp* gradient) const {
  int rule = -1;
  // An error inside a rule is reported with the rule's location.
  auto run = [&]() -> std::optional<Value> {
    try {
      return dispatch(node, ctx, gradient, rule);
    } catch (const EvalError& e) {
      const RuleInfo& r = rules_[static_cast<size_t>(rule)];
      throw RwError(fmt::format("{}: error in rule {}: {}", r.location(), r.name, e.what()));
    }
  };
  if (!match_stats::enabled()) {
    std::optional<Value> v = run();
    if (v && fired) *fired = &rules_[static_cast<size_t>(rule)];
    return v;
  }
  // Statistics: every rule of the root op up to the one that fired counts as attempted; the time
  // of the whole dispatch goes to the last rule tried.
  const auto t0 = std::chrono::steady_clock::now();
  std::optional<Value> v = run();
  const auto dt = std::chrono::steady_clock::now() - t0;
  const std::span<const int> tried = order(node.op());
  for (size_t i = 0; i < tried.size(); ++i) {
    const bool hit = v && tried[i] == rule;
    const bool last = hit || i + 1 == tried.size();
    match_stats::record(rules_[static_cast<size_t>(tried[i])], hit,
                        last ? dt : std::chrono::nanoseconds(0));
    if (hit) break;
  }
  if (v && fired) *fired = &rules_[static_cast<size_t>(rule)];
  return v;
}

namespace {
struct Entry {
  std::string file;
  MatcherFactory make;
  std::unique_ptr<CompiledMatcher> instance;
};
std::map<std::string, Entry, std::less<>>& registry() {
  static auto* r = new std::map<std::string, Entry, std::less<>>();
  return *r;
}
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
}  // namespace

void register_compiled(const std::string& name, const std::string& file, MatcherFactory make) {
  auto& r = registry();
  if (auto it = r.find(name); it != r.end()) {
    // Two rule files define the same set: a build error surfaced at first use.
    it->second.make = [name, a = it->second.file, file]() -> std::unique_ptr<CompiledMatcher> {
      throw RwError(fmt::format("rule set '{}' is defined in both {} and {}", name, a, file));
    };
    return;
  }
  r.emplace(name, Entry{file, std::move(make), nullptr});
}

const RuleSetMatcher& registered(std::string_view name) {
  const RuleSetMatcher* m = compiled_rules(name);
  if (!m) throw RwError(fmt::format("rule set '{}' is not registered yet", name));
  return *m;
}

}  // namespace tinyrw::rw::gen

namespace tinyrw::rw {

const RuleSetMatcher* compiled_rules(std::string_view name) {
  std::lock_guard lock(gen::registry_mutex());
  auto& r = gen::registry();
  auto it = r.find(name);
  if (it == r.end()) return nullptr;
  if (!it->second.instance) it->second.instance = it->second.make();
  return it->second.instance.get();
}

std::vector<std::string> compiled_rule_set_names() {
  std::vector<std::string> out;
  for (const auto& [name, e] : gen::registry()) out.push_back(name);
  return out;
}

}  // namespace tinyrw::rw
