// `rwc prove FILE.rw [--set NAME]... [--json] [--verbose] [--min-proven PERCENT]`: each rewrite
// rule of the integer and boolean rule sets proven with Z3 (compiler/prove_model.h states the
// semantics), or refuted with a counterexample at its line; a rule the model cannot translate (a
// helper without an SMT model, a comprehension over a capture's terms) is tested instead: instances
// of its pattern over small variables, every value of them, compared with what the rule gives.
#pragma once

#include <string>
#include <vector>

namespace tinyrw::rw {

struct ProveOptions {
  std::vector<std::string> sets;  // empty: every rule set the file itself defines
  bool json = false;
  bool verbose = false;  // list each instantiation left unproven under its rule's row
  // fail unless this share of the rules is proven outright and none is left unchecked (< 0: off)
  double min_proven = -1;
  // Z3's resource limit per query, tried with each form of division (compiler/prove_model.cpp's
  // floor_div); an instance past both is tested instead
  unsigned rlimit = 600000;
  bool every_width = false;  // also int16, uint16 and uint32 (slower; the others have both ends)
  int test_rounds = 160;     // random instances tried per pattern instantiation when testing
};

// 0: nothing refuted (and --min-proven met); 1: a rule refuted, or the goal missed; 2: bad input.
int prove_rules(const std::string& path, const ProveOptions& opts);

}  // namespace tinyrw::rw
