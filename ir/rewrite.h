// graph_rewrite: the engine every pass runs on, and the Matcher interface that generated (.rw →
// C++) and interpreted rule sets both implement.
#pragma once

#include <functional>
#include <source_location>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/uop.h"

namespace tinyrw {

// Where a rule comes from: a .rw file and line for rules, a C++ location for test matchers.
struct RuleInfo {
  std::string name;  // e.g. "symbolic#12" or a user-given label
  std::string file;  // "rules/symbolic.rw"
  int line = 0;
  std::string source;  // the rule's text, for VIZ and statistics
  std::string location() const { return file + ":" + std::to_string(line); }
};

class Matcher;

// What a rule sees besides the node: the user's context and the running rewrite.
struct RewriteContext {
  void* user = nullptr;
  int depth = 0;                // nesting depth of graph_rewrite calls (0 = outermost)
  const Matcher* pm = nullptr;  // the running rewrite's matchers, for rules that recurse
  const Matcher* bpm = nullptr;
  template <class T>
  T& as() const {
    return *static_cast<T*>(user);
  }
};

// One rule set. `rewrite` tries the rules for `node` in order and returns the first result; an
// empty UOp (or `node` itself) means no rule matched. `fired` receives the winning rule.
class Matcher {
 public:
  virtual ~Matcher() = default;
  virtual UOp rewrite(const UOp& node, RewriteContext& ctx, const RuleInfo** fired) const = 0;
  virtual std::string_view name() const = 0;
};

// A matcher from C++ callables, filtered by op (tinygrad's PatternMatcher with lambdas). Used by
// tests, tools and substitute(); product rules live in .rw files.
class LambdaMatcher : public Matcher {
 public:
  using Fn = std::function<UOp(RewriteContext&, const UOp&)>;
  explicit LambdaMatcher(std::string name = "lambda") : name_(std::move(name)) {}
  // ops empty: the rule is tried on every node.
  LambdaMatcher& add(OpSet ops, Fn fn, std::string label = "",
                     std::source_location loc = std::source_location::current());
  UOp rewrite(const UOp& node, RewriteContext& ctx, const RuleInfo** fired) const override;
  std::string_view name() const override { return name_; }

 private:
  struct Rule {
    Fn fn;
    RuleInfo info;
  };
  std::string name_;
  std::vector<Rule> rules_;
  std::vector<std::vector<size_t>> by_op_ = std::vector<std::vector<size_t>>(kNumOps);
};

// Two matchers tried one after the other (tinygrad's pm1 + pm2).
class ChainMatcher : public Matcher {
 public:
  ChainMatcher(std::vector<const Matcher*> parts, std::string name);
  UOp rewrite(const UOp& node, RewriteContext& ctx, const RuleInfo** fired) const override;
  std::string_view name() const override { return name_; }

 private:
  std::vector<const Matcher*> parts_;
  std::string name_;
};

struct RewriteOptions {
  void* ctx = nullptr;           // handed to rules as RewriteContext::user
  bool bottom_up = false;        // use `pm` as the pre-order (bpm) matcher
  const Matcher* bpm = nullptr;  // pre-order matcher, run before descending into sources
  bool walk = false;             // one pass: no fixed point, replacements are never re-entered
  bool enter_calls = true;       // false: the body (source 0) of a CALL is left untouched
  std::string name{};            // shown in VIZ and statistics
};

// The rewrite loop is broken when a node's rewrites cycle or grow without end; the message says
// "infinite loop".
class RewriteError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Rewrites the graph under `root`:
// - pm runs post-order on a node once its sources are rewritten, bpm pre-order before descending;
//   both to a fixed point per node, and every result is itself rewritten again;
// - walk mode visits each node once: bpm pre-order (a match replaces the whole subtree), then
//   sources, then pm once on the rebuilt node; replacements are not rewritten again;
// - iterative (no C++ recursion), re-entrant (rules may call graph_rewrite).
UOp graph_rewrite(const UOp& root, const Matcher* pm, const RewriteOptions& opts = {},
                  std::source_location caller = std::source_location::current());

// Replaces nodes by the map, greedily and bottom-up (replacements are rewritten again unless walk).
UOp substitute(const UOp& root, const std::unordered_map<UOp, UOp>& map, bool walk = false,
               std::source_location caller = std::source_location::current());

// Replaces nodes by the map in one walk (replacements are not substituted again), not descending
// into a node for which `enter` is false (tinygrad's gated substitute: a subgraph that cannot hold
// the replaced nodes is not walked).
UOp substitute_gated(const UOp& root, const std::unordered_map<UOp, UOp>& map,
                     const std::function<bool(const UOp&)>& enter);

}  // namespace tinyrw
