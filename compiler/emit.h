// rwc's back end: resolved rule sets -> one decision tree per root op -> readable C++.
#pragma once

#include <string>

#include "dsl/resolve.h"

namespace tinyrw::rw {

// The C++ source of every rule set declared in `root` (included files contribute through
// composition). `shown_path` is the path written into `// file.rw:line` comments and RuleInfos.
// Deterministic: the same input always gives the same text.
std::string emit_cpp(const ResolvedProgram& program, const SourceFile& root,
                     const std::string& shown_path);

// The header declaring one accessor per rule set of `root` (`const RuleSetMatcher& rangeify();` in
// namespace tinyrw::rules), defined by emit_cpp's output.
std::string emit_header(const ResolvedProgram& program, const SourceFile& root,
                        const std::string& shown_path);

// A readable dump of the decision trees (rwc dump).
std::string dump_decision_trees(const ResolvedProgram& program, const SourceFile& root);

}  // namespace tinyrw::rw
