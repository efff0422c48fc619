// The VIZ trace recorder: named groups, every graph_rewrite call, every match with its rule's
// location, and a table of the nodes involved; written as JSON (format: docs/viz-format.md).
// On with VIZ=1 (written at exit to $VIZ_PATH, default viz.json) or through enable().
#pragma once

#include <chrono>
#include <source_location>
#include <string>
#include <string_view>

#include "ir/rewrite.h"

namespace tinyrw::viz {

bool enabled();
void enable(std::string path = "");  // path "" keeps the current one
void disable();
void clear();
// Writes the trace recorded so far; throws std::runtime_error when the file cannot be written.
void write(const std::string& path);
void write();  // to the configured path
std::string to_json();

// Groups nest; every rewrite call is recorded in the innermost open group.
class Group {
 public:
  explicit Group(std::string_view name);
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

 private:
  bool active_;
  int index_ = -1;
};

// Called by graph_rewrite.
int begin_rewrite(std::string_view name, const std::source_location& caller, const UOp& root,
                  int depth, std::string_view mode);
void record_match(int call, const UOp& before, const UOp& after, const RuleInfo* rule,
                  std::chrono::nanoseconds elapsed);
void end_rewrite(int call, const UOp& result);

}  // namespace tinyrw::viz
