#include "ir/stats.h"

#include <algorithm>
#include <cstdlib>
#include <unordered_map>

#include <fmt/format.h>

namespace tinyrw::match_stats {

namespace {

struct Registry {
  bool on = false;
  std::unordered_map<std::string, RuleStats> rules;  // key: location + name
};

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry();
    const char* env = std::getenv("TRACK_MATCH_STATS");
    if (env && std::atoi(env) > 0) {
      reg->on = true;
      std::atexit([] { print(stderr); });
    }
    return reg;
  }();
  return *r;
}

}  // namespace

bool enabled() { return registry().on; }
void set_enabled(bool on) { registry().on = on; }

void record(const RuleInfo& rule, bool matched, std::chrono::nanoseconds elapsed) {
  auto& rules = registry().rules;
  std::string key = rule.location() + "|" + rule.name;
  auto it = rules.find(key);
  if (it == rules.end()) it = rules.emplace(std::move(key), RuleStats{rule, {}}).first;
  Counters& c = it->second.counts;
  ++c.attempts;
  c.matches += matched;
  c.nanos += static_cast<uint64_t>(elapsed.count());
}

std::vector<RuleStats> snapshot() {
  std::vector<RuleStats> out;
  for (const auto& [key, s] : registry().rules) out.push_back(s);
  std::sort(out.begin(), out.end(), [](const RuleStats& a, const RuleStats& b) {
    if (a.counts.nanos != b.counts.nanos) return a.counts.nanos > b.counts.nanos;
    return a.rule.location() < b.rule.location();
  });
  return out;
}

void reset() { registry().rules.clear(); }

void print(std::FILE* out) {
  const auto rows = snapshot();
  Counters total;
  fmt::print(out, "{:>9} {:>9} {:>10}  {:<40} {}\n", "matches", "attempts", "time(ms)", "location",
             "rule");
  for (const RuleStats& s : rows) {
    fmt::print(out, "{:>9} {:>9} {:>10.3f}  {:<40} {}\n", s.counts.matches, s.counts.attempts,
               static_cast<double>(s.counts.nanos) / 1e6, s.rule.location(),
               s.rule.source.empty() ? s.rule.name : s.rule.name + "  " + s.rule.source);
    total.matches += s.counts.matches;
    total.attempts += s.counts.attempts;
    total.nanos += s.counts.nanos;
  }
  fmt::print(out, "{:>9} {:>9} {:>10.3f}  total over {} rules\n", total.matches, total.attempts,
             static_cast<double>(total.nanos) / 1e6, rows.size());
}

}  // namespace tinyrw::match_stats
