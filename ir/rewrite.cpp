#include "ir/rewrite.h"

#include <chrono>

#include <fmt/format.h>

#include "ir/graph.h"
#include "ir/stats.h"
#include "ir/uop_node.h"
#include "ir/viz.h"

namespace tinyrw {

// ---- LambdaMatcher / ChainMatcher
// -------------------------------------------------------------------

LambdaMatcher& LambdaMatcher::add(OpSet ops, Fn fn, std::string label, std::source_location loc) {
  RuleInfo info{label.empty() ? fmt::format("{}#{}", name_, rules_.size()) : std::move(label),
                loc.file_name(), static_cast<int>(loc.line()), ""};
  const size_t idx = rules_.size();
  rules_.push_back({std::move(fn), std::move(info)});
  if (ops.empty()) ops = OpSet::all();
  ops.for_each([&](Op o) { by_op_[static_cast<size_t>(o)].push_back(idx); });
  return *this;
}

UOp LambdaMatcher::rewrite(const UOp& node, RewriteContext& ctx, const RuleInfo** fired) const {
  const bool stats = match_stats::enabled();
  for (size_t idx : by_op_[static_cast<size_t>(node.op())]) {
    const Rule& r = rules_[idx];
    const auto t0 =
        stats ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    UOp out = r.fn(ctx, node);
    const bool matched = out && !(out == node);
    if (stats) match_stats::record(r.info, matched, std::chrono::steady_clock::now() - t0);
    if (matched) {
      if (fired) *fired = &r.info;
      return out;
    }
  }
  return UOp();
}

ChainMatcher::ChainMatcher(std::vector<const Matcher*> parts, std::string name)
    : parts_(std::move(parts)), name_(std::move(name)) {}

UOp ChainMatcher::rewrite(const UOp& node, RewriteContext& ctx, const RuleInfo** fired) const {
  for (const Matcher* m : parts_) {
    if (UOp out = m->rewrite(node, ctx, fired); out && !(out == node)) return out;
  }
  return UOp();
}

// ---- graph_rewrite
// ----------------------------------------------------------------------------------

namespace {

thread_local int g_rewrite_depth = 0;

// Successive rewrites of one node beyond this are a runaway rule (each result differs).
constexpr uint32_t kMaxRewriteChain = 100000;

class Rewriter {
 public:
  Rewriter(const Matcher* pm, const Matcher* bpm, const RewriteOptions& opts, int viz_call)
      : pm_(pm), bpm_(bpm), opts_(opts), viz_call_(viz_call) {
    ctx_.user = opts.ctx;
    ctx_.depth = g_rewrite_depth;
    ctx_.pm = pm;
    ctx_.bpm = bpm;
  }

  UOp run(const UOp& root) {
    push(root, 0);
    while (!stack_.empty()) step();
    return entry(root)->result;
  }

 private:
  enum class Stage : uint8_t { Enter, Sources, Link };
  struct Frame {
    UOp n;     // the node whose result this frame computes
    UOp cur;   // n after the pre-order rewrites
    UOp link;  // Link: the rewritten form whose result becomes n's
    uint32_t next_src = 0;
    uint32_t first_changed = UINT32_MAX;  // the first source whose result differs from it
    uint32_t chain = 0;
    Stage stage = Stage::Enter;
  };
  struct Entry {
    // Keeps the key node alive when the walk maps nodes by address (a nested walk), so that the
    // address is never reused for another node while mapped. A walk that numbers nodes in the
    // nodes needs no key: a node made in a dead node's cell starts unnumbered.
    UOp key;
    UOp result;
    bool done = false;
  };

  Entry* entry(const UOp& u) {
    const uint32_t i = slots_.find(u.node());
    return i == NodeSlots::kNone ? nullptr : &memo_[i];
  }
  void push(const UOp& n, uint32_t chain) {
    if (chain > kMaxRewriteChain) {
      throw RewriteError(fmt::format(
          "infinite loop in graph_rewrite '{}': more than {} successive rewrites, last {}",
          opts_.name, kMaxRewriteChain, n.repr(1)));
    }
    UOp key = slots_.numbers_in_nodes() ? UOp() : n;
    if (Entry* e = entry(n)) {
      *e = Entry{std::move(key), UOp(), false};
    } else {
      slots_.set(UOpAccess::node(n), static_cast<uint32_t>(memo_.size()));
      memo_.push_back(Entry{std::move(key), UOp(), false});
    }
    stack_.push_back(Frame{n, UOp(), UOp(), 0, UINT32_MAX, chain, Stage::Enter});
  }
  void finish(const UOp& n, const UOp& result) {
    Entry& e = *entry(n);
    e.result = result;
    e.done = true;
    stack_.pop_back();
  }
  [[noreturn]] void cycle(const UOp& at) {
    throw RewriteError(
        fmt::format("infinite loop in graph_rewrite '{}': the rewrite of {} depends on itself",
                    opts_.name, at.repr(1)));
  }

  UOp apply(const Matcher* m, const UOp& x) {
    const RuleInfo* fired = nullptr;
    const bool tracing = viz_call_ >= 0;
    const auto t0 =
        tracing ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    UOp r = m->rewrite(x, ctx_, &fired);
    if (r == x) return UOp();
    if (r && tracing)
      viz::record_match(viz_call_, x, r, fired, std::chrono::steady_clock::now() - t0);
    return r;
  }

  // The result of `next` becomes the result of the top frame (which stays until it is known).
  void link_to(const UOp& next) {
    const size_t top = stack_.size() - 1;
    if (Entry* e = entry(next)) {
      if (!e->done) cycle(next);
      finish(stack_[top].n, e->result);
      return;
    }
    stack_[top].link = next;
    stack_[top].stage = Stage::Link;
    push(next, stack_[top].chain + 1);
  }

  void step() {
    const size_t top = stack_.size() - 1;
    switch (stack_[top].stage) {
      case Stage::Enter:
        return enter(top);
      case Stage::Sources:
        return sources(top);
      case Stage::Link: {
        const Entry* e = entry(stack_[top].link);
        finish(stack_[top].n, e->result);
        return;
      }
    }
  }

  void enter(size_t top) {
    UOp cur = stack_[top].n;
    if (bpm_) {
      if (opts_.walk) {
        if (UOp r = apply(bpm_, cur)) return finish(stack_[top].n, r);
      } else {
        std::vector<UOp> seen;
        while (UOp r = apply(bpm_, cur)) {
          for (const UOp& s : seen) {
            if (s == r) {
              throw RewriteError(fmt::format(
                  "infinite loop in fixed_point_rewrite of graph_rewrite '{}': {} came back",
                  opts_.name, r.repr(1)));
            }
          }
          if (seen.size() > kMaxRewriteChain) cycle(r);
          seen.push_back(cur);
          cur = r;
        }
      }
    }
    stack_[top].cur = std::move(cur);
    stack_[top].stage = Stage::Sources;
    sources(top);
  }

  // A CALL's body (source 0) is not walked unless the options ask for it.
  bool skipped_source(const UOpNode* cur, size_t i) const {
    return !opts_.enter_calls && i == 0 && cur->op() == Op::Call;
  }

  void sources(size_t top) {
    Frame& f = stack_[top];
    const UOpNode* cur = UOpAccess::node(f.cur);  // f.cur keeps it alive while f is on the stack
    const uint32_t n = cur->nsrc();
    while (f.next_src < n) {
      const uint32_t i = f.next_src;
      const UOp& c = cur->srcs()[i];
      if (skipped_source(cur, i)) {
        ++f.next_src;
        continue;
      }
      if (const Entry* e = entry(c)) {
        if (!e->done) cycle(c);
        if (f.first_changed == UINT32_MAX && !(e->result == c)) f.first_changed = i;
        ++f.next_src;
        continue;
      }
      push(c, 0);  // invalidates f; resumes here once c is done
      return;
    }
    if (f.first_changed != UINT32_MAX) {
      // A skipped source is source 0 and never changes, so it lies before first_changed.
      std::vector<UOp> new_src(cur->srcs(), cur->srcs() + n);
      for (uint32_t i = f.first_changed; i < n; ++i) new_src[i] = entry(new_src[i])->result;
      UOp rebuilt = f.cur.with_src(new_src);
      if (opts_.walk) {
        UOp r = pm_ ? apply(pm_, rebuilt) : UOp();
        return finish(stack_[top].n, r ? r : rebuilt);
      }
      return link_to(rebuilt);
    }
    UOp r = pm_ ? apply(pm_, f.cur) : UOp();
    if (!r) return finish(f.n, f.cur);
    if (opts_.walk) return finish(f.n, r);
    link_to(r);
  }

  const Matcher* pm_;
  const Matcher* bpm_;
  const RewriteOptions& opts_;
  int viz_call_;
  RewriteContext ctx_;
  std::vector<Frame> stack_;
  NodeSlots slots_;  // node -> its Entry in memo_
  std::vector<Entry> memo_;
};

std::string mode_name(const Matcher* pm, const Matcher* bpm, bool walk) {
  std::string m = pm && bpm ? "pm+bpm" : bpm ? "bpm" : "pm";
  return walk ? m + " walk" : m;
}

}  // namespace

UOp graph_rewrite(const UOp& root, const Matcher* pm, const RewriteOptions& opts,
                  std::source_location caller) {
  if (!root) throw GraphError("graph_rewrite of an empty UOp");
  const Matcher* bpm = opts.bpm;
  if (opts.bottom_up) {
    if (bpm) throw GraphError("graph_rewrite: bottom_up and bpm are exclusive");
    bpm = pm;
    pm = nullptr;
  }
  const int call =
      viz::enabled()
          ? viz::begin_rewrite(opts.name.empty() ? (pm    ? pm->name()
                                                    : bpm ? bpm->name()
                                                          : "")
                                                 : std::string_view(opts.name),
                               caller, root, g_rewrite_depth, mode_name(pm, bpm, opts.walk))
          : -1;
  struct DepthGuard {
    DepthGuard() { ++g_rewrite_depth; }
    ~DepthGuard() { --g_rewrite_depth; }
  };
  UOp result;
  {
    Rewriter rw(pm, bpm, opts, call);
    DepthGuard guard;
    result = rw.run(root);
  }
  if (call >= 0) viz::end_rewrite(call, result);
  return result;
}

UOp substitute(const UOp& root, const std::unordered_map<UOp, UOp>& map, bool walk,
               std::source_location caller) {
  LambdaMatcher m("substitute");
  m.add({}, [&map](RewriteContext&, const UOp& x) {
    auto it = map.find(x);
    return it == map.end() ? UOp() : it->second;
  });
  return graph_rewrite(root, &m, {.bottom_up = true, .walk = walk, .name = "substitute"}, caller);
}

UOp substitute_gated(const UOp& root, const std::unordered_map<UOp, UOp>& map,
                     const std::function<bool(const UOp&)>& enter) {
  std::unordered_map<UOp, UOp> out;  // each node walked, with its replacement
  const std::vector<UOp> order =
      toposort(root, [&](const UOp& u) { return !map.contains(u) && enter(u); });
  for (const UOp& u : order) {
    if (const auto it = map.find(u); it != map.end()) {
      out.emplace(u, it->second);
      continue;
    }
    std::vector<UOp> src;
    bool changed = false;
    if (enter(u))
      for (const UOp& s : u.src()) {
        src.push_back(out.at(s));
        changed = changed || src.back() != s;
      }
    out.emplace(u, changed ? u.with_src(src) : u);
  }
  return out.at(root);
}

}  // namespace tinyrw
