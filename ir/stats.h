// Per-rule match statistics: attempts, matches and time, keyed by the rule's location.
// On with TRACK_MATCH_STATS=1 (printed at exit) or through set_enabled().
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "ir/rewrite.h"

namespace tinyrw::match_stats {

struct Counters {
  uint64_t attempts = 0;
  uint64_t matches = 0;
  uint64_t nanos = 0;
};

struct RuleStats {
  RuleInfo rule;
  Counters counts;
};

bool enabled();
void set_enabled(bool on);
void record(const RuleInfo& rule, bool matched, std::chrono::nanoseconds elapsed);
// All rules seen so far, most time first.
std::vector<RuleStats> snapshot();
void reset();
// A table: matches, attempts, time, location, rule.
void print(std::FILE* out);

}  // namespace tinyrw::match_stats
