// `rwc prove` for the index rules of rangeify (rules/rangeify.rw's movement rules,
// rules/indexing.rw's pad_ranges): INDEX(view, i...) rewritten to an INDEX of the view's source.
// Their index math is built from the shapes, so each rule is run on a catalog of concrete views
// (ranks 0-3, small sizes, one or two movement ops over a buffer or a constant) and Z3 proves, for
// every index of each view, that the result reads the element the view reads (docs/rw-language.md,
// "Proving rules").
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "dsl/interp.h"
#include "dsl/resolve.h"

namespace tinyrw::rw::prove {

// What `rule` (a matcher of the one rule) rewrites root to, with `whole` as the running set for
// rewritten(); nullopt where it does not fire. The first error the rule raises is kept in `error`.
// (Bounded testing, compiler/prove.cpp, runs rules the same way.)
std::optional<UOp> rewrite_once(const InterpretedMatcher& rule, const InterpretedMatcher& whole,
                                const UOp& root, std::string& error);

// The rule's pattern may match an INDEX: checked here, not by the integer model.
bool is_index_rule(const ResolvedRule& rule);

struct IndexCheck {
  int views = 0;          // views of the catalog the rule rewrote
  long proofs = 0;        // Z3 queries proven (each covers every index of one view)
  std::string failure;    // a counterexample
  std::string error;      // the first error the rule raised
  std::string undecided;  // the first view Z3 did not decide within the limit, and why
};

// Runs `rule` (of `home`, the running set for rewritten()) on every view of the catalog.
IndexCheck check_index_rule(std::shared_ptr<const ResolvedProgram> prog, const ResolvedSet& home,
                            const ResolvedRule& rule, unsigned rlimit);

}  // namespace tinyrw::rw::prove
