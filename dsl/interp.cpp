#include "dsl/interp.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include <fmt/format.h>

#include "dsl/compiled.h"  // the node accessors generated matchers use (inline)
#include "ir/stats.h"

namespace tinyrw::rw {

namespace {

struct Slots {
  std::vector<Value> values;
  std::vector<bool> bound;
  explicit Slots(size_t n) : values(n), bound(n, false) {}
};

// A frame of n slots (a rule's, or a def call's) from a per-thread stack of reused frames: a rule
// runs for every node and a comprehension may call a def per item, and a fresh frame would
// allocate each time. Frames nest (a def calls a def; a helper rewrites with a matcher while a
// rule runs). The values are cleared on release: they must not keep nodes alive.
class FrameLease {
 public:
  explicit FrameLease(size_t n) : n_(n) {
    Stack& st = stack();
    if (st.depth == st.frames.size()) st.frames.push_back(std::make_unique<Slots>(0));
    slots_ = st.frames[st.depth].get();
    if (slots_->values.size() < n) {
      slots_->values.resize(n);
      slots_->bound.resize(n);
    }
    ++st.depth;  // last: a throw above leaves the stack as it was
  }
  ~FrameLease() {
    for (size_t i = 0; i < n_; ++i) slots_->values[i] = Value();
    --stack().depth;
  }
  FrameLease(const FrameLease&) = delete;
  FrameLease& operator=(const FrameLease&) = delete;
  Slots& slots() { return *slots_; }

 private:
  struct Stack {
    std::vector<std::unique_ptr<Slots>> frames;
    size_t depth = 0;
  };
  static Stack& stack() {
    thread_local Stack s;
    return s;
  }
  Slots* slots_;
  size_t n_;
};

// The named sets of the interpreted rule running on this thread (see rewritten_fully).
thread_local const NamedRuleSets* g_running_sets = nullptr;

bool match_arg(const ArgMatch& m, const Arg& a, Slots& s) {
  switch (m.kind) {
    case ArgMatch::Kind::Any:
      return true;
    case ArgMatch::Kind::Literal:
      return arg_literal_matches(m.literal, a);
    case ArgMatch::Kind::Bind: {
      const size_t slot = static_cast<size_t>(m.slot);
      Value v = Value::from_arg(a);
      if (s.bound[slot]) return s.values[slot] == v;
      s.values[slot] = std::move(v);
      s.bound[slot] = true;
      return true;
    }
    case ArgMatch::Kind::Tuple: {
      if (!a.is_tuple() || a.items().size() != m.items.size()) return false;
      for (size_t i = 0; i < m.items.size(); ++i)
        if (!match_arg(m.items[i], a.items()[i], s)) return false;
      return true;
    }
  }
  return false;
}

// The checks of a pattern that bind nothing (ops, source counts, dtypes), over the whole tree:
// most rules tried fail here, before any capture is copied into a slot (tinygrad's early reject).
bool fits(const MatchNode& m, const UOp& u) {
  if (!m.any_op && !m.ops.contains(gen::op(u))) return false;
  using S = MatchNode::Sources;
  const uint32_t n = gen::nsrc(u);
  if ((m.sources == S::Exact && n != m.srcs.size()) ||
      (m.sources == S::Prefix && n < m.srcs.size()))
    return false;
  if (!m.dtype.accepts(gen::dtype(u))) return false;
  if (m.sources == S::Repeat) {
    for (uint32_t i = 0; i < n; ++i)
      if (!fits(m.srcs[0], gen::src(u, i))) return false;
    return true;
  }
  for (size_t i = 0; i < m.srcs.size(); ++i)
    if (!fits(m.srcs[i], gen::src(u, i))) return false;
  return true;
}

bool match(const MatchNode& m, const UOp& u, Slots& s) {
  if (!m.any_op && !m.ops.contains(gen::op(u))) return false;
  using S = MatchNode::Sources;
  switch (m.sources) {
    case S::Any:
      break;
    case S::Exact:
      if (gen::nsrc(u) != m.srcs.size()) return false;
      break;
    case S::Prefix:
      if (gen::nsrc(u) < m.srcs.size()) return false;
      break;
    case S::Repeat:
      break;
  }
  if (!m.dtype.accepts(gen::dtype(u))) return false;
  if (!match_arg(m.arg, gen::arg(u), s)) return false;
  for (int slot : m.slots) {
    const size_t k = static_cast<size_t>(slot);
    if (s.bound[k]) {
      if (!(s.values[k].is_uop() && s.values[k].as_uop() == u)) return false;
    } else {
      s.values[k] = Value::uop(u);
      s.bound[k] = true;
    }
  }
  if (m.sources == S::Repeat) {
    if (gen::nsrc(u) == 0 && !m.srcs[0].slots.empty()) return false;  // nothing to bind
    for (uint32_t i = 0; i < gen::nsrc(u); ++i)
      if (!match(m.srcs[0], gen::src(u, i), s)) return false;
    return true;
  }
  for (size_t i = 0; i < m.srcs.size(); ++i)
    if (!match(m.srcs[i], gen::src(u, i), s)) return false;
  return true;
}

Value eval(const RExpr& e, Slots& s, RewriteContext& ctx);

void bind_target(const RTarget& t, const Value& v, Slots& s) {
  if (t.slot >= 0) s.values[static_cast<size_t>(t.slot)] = v;
  if (!t.is_tuple) return;
  const std::vector<Value>& items = unpack(v, t.items.size());
  for (size_t i = 0; i < t.items.size(); ++i) bind_target(t.items[i], items[i], s);
}

std::vector<Value> eval_kids(const RExpr& e, Slots& s, RewriteContext& ctx, size_t from = 0) {
  std::vector<Value> out;
  out.reserve(e.kids.size());
  for (size_t i = from; i < e.kids.size(); ++i) out.push_back(eval(e.kids[i], s, ctx));
  return out;
}

// Runs the comprehension's clauses from `clause` on: one loop level per `for` (the clauses are
// counted in the tree depth limit, so this recursion is bounded). Each item goes to `take`,
// which returns false to stop (any/all over a generator); comprehend returns false once stopped.
template <class Take>
bool comprehend(const RExpr& e, size_t clause, Slots& s, RewriteContext& ctx, Take& take,
                size_t& steps) {
  if (clause == e.comp.size()) return take(eval(e.kids[0], s, ctx));
  const RExpr& x = e.kids[clause + 1];
  if (e.comp[clause].is_if) {
    return !eval(x, s, ctx).as_bool() || comprehend(e, clause + 1, s, ctx, take, steps);
  }
  const RTarget& t = e.comp[clause].target;
  if (x.k == RExpr::K::Builtin &&
      (x.name == "range" || (x.name == "enumerate" && t.is_tuple && t.items.size() == 2))) {
    // `for k in range(...)` and `for k, x in enumerate(t)` count without building the tuple
    // (or its pairs) that the builtin gives
    const std::vector<Value> args = eval_kids(x, s, ctx);
    if (x.name == "range") {
      const RangeSpan r = range_span(args);
      for (size_t i = 0; i < r.n; ++i) {
        comp_step(steps);
        bind_target(t, r.at(i), s);
        if (!comprehend(e, clause + 1, s, ctx, take, steps)) return false;
      }
      return true;
    }
    const i128 start = enumerate_start(args);
    const std::vector<Value>& items = items_of(args[0]);
    for (size_t i = 0; i < items.size(); ++i) {
      comp_step(steps);
      bind_target(t.items[0], Value::integer(sat_add(start, static_cast<i128>(i))), s);
      bind_target(t.items[1], items[i], s);
      if (!comprehend(e, clause + 1, s, ctx, take, steps)) return false;
    }
    return true;
  }
  const Value seq = eval(x, s, ctx);
  for (const Value& item : items_of(seq)) {
    comp_step(steps);
    bind_target(t, item, s);
    if (!comprehend(e, clause + 1, s, ctx, take, steps)) return false;
  }
  return true;
}

Value eval(const RExpr& e, Slots& s, RewriteContext& ctx) {
  switch (e.k) {
    case RExpr::K::Const:
      return e.value;
    case RExpr::K::Slot:
      return s.values[static_cast<size_t>(e.slot)];
    case RExpr::K::Binary:
      return binary(e.bop, eval(e.kids[0], s, ctx), eval(e.kids[1], s, ctx));
    case RExpr::K::And:
      return Value::boolean(eval(e.kids[0], s, ctx).as_bool() && eval(e.kids[1], s, ctx).as_bool());
    case RExpr::K::Or:
      return Value::boolean(eval(e.kids[0], s, ctx).as_bool() || eval(e.kids[1], s, ctx).as_bool());
    case RExpr::K::Not:
      return Value::boolean(!eval(e.kids[0], s, ctx).as_bool());
    case RExpr::K::Neg:
      return negate(eval(e.kids[0], s, ctx));
    case RExpr::K::Invert:
      return invert(eval(e.kids[0], s, ctx));
    case RExpr::K::Member: {
      const Value recv = eval(e.kids[0], s, ctx);
      if (!e.kids[0].record.empty()) return record_field(recv, e.name, e.kids[0].record);
      if (e.prop && recv.is_uop()) return uop_member(recv.as_uop(), *e.prop);
      return member(recv, e.name);
    }
    case RExpr::K::Method: {
      const Value recv = eval(e.kids[0], s, ctx);
      const std::vector<Value> args = eval_kids(e, s, ctx, 1);
      return method(recv, e.name, args, std::span<const std::string>(e.arg_names).subspan(1));
    }
    case RExpr::K::Index: {
      const RExpr& seq = e.kids[0];
      if (seq.k == RExpr::K::Member && seq.prop == UOpProp::Src)  // x.src[i]: no tuple built
        return Value::uop(src_item(eval(seq.kids[0], s, ctx), eval(e.kids[1], s, ctx)));
      return index(eval(seq, s, ctx), eval(e.kids[1], s, ctx));
    }
    case RExpr::K::Builtin: {
      if (const std::optional<GeneratorUse> use = generator_use(e)) {
        size_t steps = 0;
        if (use == GeneratorUse::Sum) {
          std::optional<Value> acc;
          auto add = [&](Value v) {
            accumulate(acc, BinOp::Add, std::move(v));
            return true;
          };
          comprehend(e.kids[0], 0, s, ctx, add, steps);
          return acc ? *acc : Value::integer(0);
        }
        const bool stop = use == GeneratorUse::Any;  // the item truth that decides
        bool stopped = false;
        auto decide = [&](const Value& v) { return !(stopped = v.as_bool() == stop); };
        comprehend(e.kids[0], 0, s, ctx, decide, steps);
        return Value::boolean(stopped == stop);
      }
      const std::vector<Value> args = eval_kids(e, s, ctx);
      if (is_context_builtin(e.name))
        return call_context_builtin(ctx, e.name, args, g_running_sets);
      return call_builtin(e.name, args, e.arg_names);
    }
    case RExpr::K::Construct: {
      const std::vector<Value> args = eval_kids(e, s, ctx);
      return construct(e.op, args);
    }
    case RExpr::K::Helper: {
      const std::vector<Value> args = eval_kids(e, s, ctx);
      // resolved without the helper linked (the checker needs only its declaration)
      const Helper* h = e.helper ? e.helper : find_helper(e.name);
      if (!h)
        throw EvalError(
            fmt::format("helper '{}' is declared but no C++ helper of that name is "
                        "registered (not linked into this program)",
                        e.name));
      return h->fn(ctx, args);
    }
    case RExpr::K::Tuple:
      return Value::tuple(eval_kids(e, s, ctx));
    case RExpr::K::Slice: {
      const std::vector<Value> k = eval_kids(e, s, ctx);
      return slice(k[0], k[1], k[2], k[3]);
    }
    case RExpr::K::Comp: {
      std::vector<Value> out;
      size_t steps = 0;
      auto collect = [&out](Value v) {
        out.push_back(std::move(v));
        return true;
      };
      comprehend(e, 0, s, ctx, collect, steps);
      return Value::tuple(std::move(out));
    }
    case RExpr::K::DefCall: {  // a fresh frame: the parameters, then the body's own variables
      const ResolvedDef& d = *e.def;
      FrameLease lease(d.slot_names.size());
      Slots& frame = lease.slots();
      for (size_t i = 0; i < e.kids.size(); ++i) {
        frame.values[i] = eval(e.kids[i], s, ctx);
        check_def_arg(frame.values[i], d.param_types[i], d.name, i, d.slot_names[i]);
      }
      return eval(d.body, frame, ctx);
    }
    case RExpr::K::Cond:
      return eval(e.kids[1], s, ctx).as_bool() ? eval(e.kids[0], s, ctx) : eval(e.kids[2], s, ctx);
  }
  return Value();
}

}  // namespace

InterpretedMatcher::InterpretedMatcher(std::shared_ptr<const ResolvedProgram> program,
                                       const ResolvedSet& set)
    : program_(std::move(program)), set_(set), by_op_(kNumOps) {
  named_ = [this](std::string_view name) -> const Matcher* {
    const std::lock_guard lock(named_mutex_);
    auto it = named_sets_.find(name);
    if (it != named_sets_.end()) return it->second.get();
    const ResolvedSet* s = program_->find(name);
    if (!s) return nullptr;
    return named_sets_
        .emplace(std::string(name), std::make_unique<InterpretedMatcher>(program_, *s))
        .first->second.get();
  };
  for (const ResolvedRule& r : set_.rules) {
    max_slots_ = std::max(max_slots_, r.slot_names.size());
    for (int o = 0; o < kNumOps; ++o)
      if (r.root.any_op || r.root.ops.contains(static_cast<Op>(o)))
        by_op_[static_cast<size_t>(o)].push_back(&r);
  }
}

std::optional<Value> InterpretedMatcher::apply(const UOp& node, RewriteContext& ctx,
                                               const RuleInfo** fired, const UOp* gradient) const {
  const bool stats = match_stats::enabled();
  const std::vector<const ResolvedRule*>& rules = by_op_[static_cast<size_t>(node.op())];
  if (rules.empty()) return std::nullopt;
  // One frame for every rule tried (a rule's slots are unbound before it runs; a stale value is
  // never read: lets and comprehension targets are written before they are read).
  FrameLease lease(max_slots_);
  Slots& slots = lease.slots();
  struct Running {  // the named sets of this matcher's program while its rules run
    const NamedRuleSets* outer = g_running_sets;
    explicit Running(const NamedRuleSets* s) { g_running_sets = s; }
    ~Running() { g_running_sets = outer; }
  } running(&named_);
  for (const ResolvedRule* r : rules) {
    const auto t0 =
        stats ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    std::fill_n(slots.bound.begin(), r->slot_names.size(), false);
    std::optional<Value> out;
    try {
      if (r->gradient_slot >= 0 && !gradient) continue;  // gradient rules need `g`
      if (r->gradient_slot >= 0) {
        slots.values[static_cast<size_t>(r->gradient_slot)] = Value::uop(*gradient);
        slots.bound[static_cast<size_t>(r->gradient_slot)] = true;
      }
      if (fits(r->root, node) && match(r->root, node, slots)) {
        bool pass = true;
        for (const Step& st : r->steps) {
          Value v = eval(st.expr, slots, ctx);
          if (st.is_let) {
            slots.values[static_cast<size_t>(st.slot)] = std::move(v);
          } else if (!v.as_bool()) {
            if (st.is_require) {
              std::vector<Value> args;
              for (const RExpr& a : st.why_args) args.push_back(eval(a, slots, ctx));
              const std::string why = reason_text(st.why_text, args);
              if (st.raises) throw EvalError(why);  // a rewrite stops here
              out = Value::fail(why);               // the verifier fails here
            }
            pass = false;
            break;
          }
        }
        if (pass) {
          Value v = eval(r->result, slots, ctx);
          const bool no_match = v.is_none() || (v.is_uop() && v.as_uop() == node);
          if (!no_match) out = std::move(v);
        }
      }
    } catch (const EvalError& e) {
      throw RwError(
          fmt::format("{}: error in rule {}: {}", r->info.location(), r->info.name, e.what()));
    }
    if (stats) match_stats::record(r->info, out.has_value(), std::chrono::steady_clock::now() - t0);
    if (out) {
      if (fired) *fired = &r->info;
      return out;
    }
  }
  return std::nullopt;
}

std::unique_ptr<InterpretedMatcher> interpret(const std::string& path, const std::string& set,
                                              Diagnostics& diags) {
  std::shared_ptr<const ResolvedProgram> prog = load_rules(path, diags);
  if (!prog) return nullptr;
  const ResolvedSet* s = prog->find(set);
  if (!s) {
    diags.error(Loc{}, fmt::format("{} has no rule set '{}'", path, set));
    return nullptr;
  }
  return std::make_unique<InterpretedMatcher>(prog, *s);
}

}  // namespace tinyrw::rw
