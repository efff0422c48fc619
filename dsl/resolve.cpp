#include "dsl/resolve.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <set>
#include <unordered_set>

#include <fmt/format.h>

#include "ir/builders.h"

namespace tinyrw::rw {

// ---- dtype filters, arg matches, equality
// ---------------------------------------------------------------

bool DTypeFilter::accepts(DType d) const {
  switch (kind) {
    case Kind::Any:
      return true;
    case Kind::Exact:
      return d == exact;
    case Kind::Int:
      return d.is_int();
    case Kind::UInt:
      return d.is_unsigned();
    case Kind::SInt:
      return d.is_int() && !d.is_unsigned() && !d.is_index();
    case Kind::Float:
      return d.is_float();
    case Kind::Bool:
      return d.is_bool();
    case Kind::Index:
      return d.is_index();
    case Kind::Void:
      return d.is_void();
    case Kind::Ptr:
      return d.is_ptr();
  }
  return false;
}

bool DTypeFilter::subset_of(const DTypeFilter& o) const {
  if (o.kind == Kind::Any || *this == o) return true;
  if (kind == Kind::Exact) return o.accepts(exact);
  if (o.kind == Kind::Int) return kind == Kind::UInt || kind == Kind::SInt || kind == Kind::Index;
  return false;
}

std::string DTypeFilter::str() const {
  switch (kind) {
    case Kind::Any:
      return "any";
    case Kind::Exact:
      return std::string(exact.name());
    case Kind::Int:
      return "int";
    case Kind::UInt:
      return "uint";
    case Kind::SInt:
      return "sint";
    case Kind::Float:
      return "float";
    case Kind::Bool:
      return "bool";
    case Kind::Index:
      return "index";
    case Kind::Void:
      return "void";
    case Kind::Ptr:
      return "ptr";
  }
  return "?";
}

std::optional<DTypeFilter> dtype_filter_from_name(std::string_view name) {
  using K = DTypeFilter::Kind;
  static const std::pair<std::string_view, K> kGroups[] = {
      {"int", K::Int},   {"uint", K::UInt},   {"sint", K::SInt}, {"float", K::Float},
      {"bool", K::Bool}, {"index", K::Index}, {"void", K::Void}, {"ptr", K::Ptr}};
  for (const auto& [n, k] : kGroups)
    if (n == name) return DTypeFilter{k, DType()};
  if (auto d = DType::from_name(name)) return DTypeFilter{K::Exact, *d};
  return std::nullopt;
}

bool arg_literal_matches(const Arg& literal, const Arg& actual) {
  // True/False match only bool constants, numbers only numeric ones (an int 1 is not True).
  if (literal.is_bool() != actual.is_bool()) return false;
  if (literal.is_number() && actual.is_number()) {
    if (literal.is_float() || actual.is_float()) return literal.as_float() == actual.as_float();
    return literal.as_int() == actual.as_int();
  }
  return literal == actual;
}

bool ArgMatch::operator==(const ArgMatch& o) const {
  return kind == o.kind && literal == o.literal && slot == o.slot && items == o.items;
}

bool MatchNode::operator==(const MatchNode& o) const {
  return slots == o.slots && any_op == o.any_op && ops == o.ops && dtype == o.dtype &&
         arg == o.arg && sources == o.sources && srcs == o.srcs;
}

std::string_view dclass_name(DClass c) {
  switch (c) {
    case DClass::Unknown:
      return "unknown";
    case DClass::Bool:
      return "bool";
    case DClass::Int:
      return "int";
    case DClass::Float:
      return "float";
  }
  return "?";
}

const ResolvedSet* ResolvedProgram::find(std::string_view name) const {
  auto it = sets.find(std::string(name));
  return it == sets.end() ? nullptr : &it->second;
}

namespace {

// Builtin op groups (tinygrad's GroupOp); user opgroups of the same name take precedence.
std::optional<OpSet> builtin_group(std::string_view name) {
  static const std::pair<std::string_view, const OpSet& (*)()> kGroups[] = {
      {"UnaryOps", groups::unary},          {"BinaryOps", groups::binary},
      {"TernaryOps", groups::ternary},      {"ALU", groups::alu},
      {"Elementwise", groups::elementwise}, {"Commutative", groups::commutative},
      {"Associative", groups::associative}, {"Idempotent", groups::idempotent},
      {"Comparison", groups::comparison},   {"ReduceOps", groups::reduce_ops},
      {"Movement", groups::movement},       {"Irreducible", groups::irreducible},
      {"Defines", groups::defines}};
  for (const auto& [n, fn] : kGroups)
    if (n == name) return fn();
  if (name == "All") return OpSet::all();
  return std::nullopt;
}

constexpr size_t kMaxVariants = 64;

std::string arity_text(const OpInfo& info) {
  return info.max_src < 0               ? fmt::format("at least {}", info.min_src)
         : info.min_src == info.max_src ? fmt::format("{}", info.min_src)
                                        : fmt::format("{} to {}", info.min_src, info.max_src);
}

struct SlotInfo {
  std::string name;
  Type type = Type::UOp;
  bool from_pattern = true;
  int pattern_uses = 0;  // occurrences in the pattern
  int expr_uses = 0;
  Loc loc;
  DClass dclass = DClass::Unknown;  // UOp slots
  bool hidden = false;              // a comprehension variable past its comprehension
  Type item = Type::Any;            // tuples: the type of every item, when known
  // UOp captures: the ops the pattern allows in every variant (nullopt: any op); lets of a known
  // record type: its name
  std::optional<OpSet> ops = std::nullopt;
  std::string record = {};
};

// Per-rule state: slots by name and their uses.
struct RuleCtx {
  std::vector<SlotInfo> slots;
  std::map<std::string, std::string> for_env;  // loop variable -> op or group name
  SetKind kind = SetKind::Rules;
  bool in_def = false;  // a def's body: `ok` and `fail` are allowed (the caller's kind decides)
  int slot_of(const std::string& name) const {
    for (size_t i = 0; i < slots.size(); ++i)
      if (slots[i].name == name && !slots[i].hidden) return static_cast<int>(i);
    return -1;
  }
  int bind(const std::string& name, Type type, bool from_pattern, const Loc& loc) {
    int s = slot_of(name);
    if (s < 0) {
      slots.push_back({name, type, from_pattern, 0, 0, loc});
      s = static_cast<int>(slots.size()) - 1;
    }
    return s;
  }
};

class Resolver {
 public:
  Resolver(ResolvedProgram& out, Diagnostics& diags) : out_(out), diags_(diags) {}

  void run() {
    // helper declarations first, so a def of a helper's name is refused wherever it stands
    for (const auto& ast : out_.program.asts)
      for (const Decl& d : ast->decls)
        if (d.kind == Decl::Kind::Extern) declare_helper(d);
    for (const auto& ast : out_.program.asts) {
      for (const Decl& d : ast->decls) {
        if (d.kind == Decl::Kind::OpGroup) declare_group(d);
        if (d.kind == Decl::Kind::RuleSet || d.kind == Decl::Kind::Compose) declare_set(d);
        if (d.kind == Decl::Kind::Def) declare_def(d);
      }
    }
    resolve_defs();
    resolve_all();
  }

 private:
  // ---- declarations
  // `extern fn`: calls are checked against the declaration. When the helper is linked (the
  // interpreter in the library) the registration must agree; rwc links no helpers.
  void declare_helper(const Decl& d) {
    if (auto it = out_.helpers.find(d.name); it != out_.helpers.end()) {
      error_with_note(d.loc, fmt::format("helper '{}' is declared twice", d.name), it->second.loc,
                      "first declared here");
      return;
    }
    if (is_builtin(d.name) || op_from_name(d.name) || DType::from_name(d.name)) {
      diags_.error(d.loc, fmt::format("'{}' is a builtin, op or dtype name, not a helper", d.name));
      return;
    }
    HelperDecl h;
    h.name = d.name;
    h.loc = d.loc;
    h.param_names = d.fn.param_names;
    for (const auto& [type, at] : d.fn.params) h.params.push_back(type_of(type, at));
    h.result = type_of(d.fn.result, d.fn.result_loc);
    if (const Helper* reg = find_helper(d.name)) {
      if (auto why = helper_mismatch(h, *reg))
        diags_.error(d.loc, fmt::format("declaration of helper '{}' does not match the C++ helper "
                                        "registered under that name: {}",
                                        d.name, *why));
    }
    out_.helpers.emplace(d.name, std::move(h));
  }

  // A type name of an `extern fn` or a typed def parameter.
  Type type_of(const std::string& name, const Loc& at) {
    if (auto t = helper_type_from_name(name)) return *t;
    diags_.error(at, fmt::format("unknown type '{}' (any, none, bool, int, float, string, uop, "
                                 "dtype, op, tuple, status, record)",
                                 name));
    return Type::Any;
  }

  void declare_group(const Decl& d) {
    if (auto it = groups_.find(d.name); it != groups_.end()) {
      error_with_note(d.loc, fmt::format("opgroup '{}' is defined twice", d.name),
                      it->second.second, "first defined here");
      return;
    }
    if (op_from_name(d.name)) {
      diags_.error(d.loc, fmt::format("opgroup '{}' has the name of an op", d.name));
      return;
    }
    OpSet set;
    for (const auto& [n, loc] : d.names) {
      if (auto o = op_from_name(n)) {
        set.add(*o);
      } else if (auto g = group(n)) {
        set = set | *g;
      } else {
        diags_.error(loc, unknown_op_message(n));
      }
    }
    groups_.emplace(d.name, std::make_pair(set, d.loc));
  }

  void declare_set(const Decl& d) {
    if (auto it = set_decls_.find(d.name); it != set_decls_.end()) {
      error_with_note(d.loc, fmt::format("rule set '{}' is defined twice", d.name), it->second->loc,
                      "first defined here");
      return;
    }
    set_decls_.emplace(d.name, &d);
  }

  void error_with_note(const Loc& at, std::string msg, const Loc& other, std::string note) {
    diags_.error_with_notes(at, std::move(msg), {{other, std::move(note)}});
  }

  std::optional<OpSet> group(const std::string& name) const {
    if (auto it = groups_.find(name); it != groups_.end()) return it->second.first;
    return builtin_group(name);
  }

  static std::string unknown_op_message(const std::string& n) {
    std::string msg = fmt::format("unknown op or op group '{}'", n);
    // Suggest the op whose name matches ignoring case.
    std::string lower = n;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    for (int i = 0; i < kNumOps; ++i) {
      std::string cand(op_name(static_cast<Op>(i)));
      std::string cl = cand;
      std::transform(cl.begin(), cl.end(), cl.begin(), ::tolower);
      if (cl == lower) return msg + fmt::format(" (did you mean '{}'?)", cand);
    }
    return msg;
  }

  // ---- rule sets
  // Every set is resolved once, after the sets it uses or composes. The order comes from a
  // depth-first walk with an explicit stack: a chain of `use`s is as long as the file allows.
  void resolve_all() {
    for (const auto& [name, decl] : set_decls_) {
      if (state_[name] != 0) continue;
      state_[name] = 1;
      struct Frame {
        std::string name;
        std::vector<std::pair<std::string, Loc>> deps;
        size_t next = 0;
      };
      std::vector<Frame> stack;
      stack.push_back({name, dependencies(*decl)});
      while (!stack.empty()) {
        Frame& f = stack.back();
        if (f.next < f.deps.size()) {
          const auto& [dep, loc] = f.deps[f.next++];
          auto it = set_decls_.find(dep);
          if (it == set_decls_.end()) continue;  // reported where it is spliced in
          int& st = state_[dep];
          if (st == 1) {
            diags_.error(loc, fmt::format("rule set '{}' includes itself", dep));
          } else if (st == 0) {
            st = 1;
            stack.push_back({dep, dependencies(*it->second)});
          }
          continue;
        }
        build_set(f.name);
        state_[f.name] = 2;
        stack.pop_back();
      }
    }
  }

  // The sets a declaration splices in, in written order (`for` bodies included).
  static std::vector<std::pair<std::string, Loc>> dependencies(const Decl& d) {
    std::vector<std::pair<std::string, Loc>> out;
    if (d.kind == Decl::Kind::Compose) return d.names;
    // `for` bodies nest only as deep as their braces (kMaxNesting), so this recursion is shallow.
    std::function<void(const std::vector<Member>&)> walk = [&](const std::vector<Member>& ms) {
      for (const Member& m : ms) {
        if (m.kind == Member::Kind::Use) out.emplace_back(m.use, m.loc);
        if (m.kind == Member::Kind::For) walk(m.body);
      }
    };
    walk(d.members);
    return out;
  }

  // Per resolved set: the set each of its rules was written in (parallel to its rules).
  struct Expansion {
    std::vector<int> origin;
  };

  void build_set(const std::string& name) {
    const Decl& d = *set_decls_.at(name);
    ResolvedSet set;
    set.name = name;
    set.loc = d.loc;
    set.kind = d.set_kind;
    // The sets whose rules this set holds: a set spliced in twice is included once, at its
    // first use.
    included_.clear();
    included_.insert(set_id(name));
    spliced_.clear();
    expansions_[name];
    if (d.kind == Decl::Kind::Compose) {
      for (const auto& [part, loc] : d.names) append_set(set, part, loc);
    } else {
      std::map<std::string, std::string> env;
      resolve_members(d.members, env, set);
    }
    if (set.kind == SetKind::Rules) analyze(set);
    out_.sets.emplace(name, std::move(set));
  }

  int set_id(const std::string& name) {
    return ids_.emplace(name, static_cast<int>(ids_.size())).first->second;
  }

  // Counts `n` more expanded rules against kMaxExpandedRules; false (with one error) past it.
  bool charge(size_t n, const Loc& at, const std::string& set) {
    if (over_limit_) return false;
    expanded_ += n;
    if (expanded_ <= kMaxExpandedRules) return true;
    return over_limit(at, fmt::format("rule set '{}' expands to more than {} rules in total", set,
                                      kMaxExpandedRules));
  }

  // Counts one more repetition of a `for` body against the same limit: a body that adds no rules
  // (empty, or `use`s of sets already included) costs time all the same, and nested loops
  // multiply it (nine nested loops over eight ops ran for minutes).
  bool charge_repetition(const Loc& at, const std::string& set) {
    if (over_limit_) return false;
    if (++repetitions_ <= kMaxExpandedRules) return true;
    return over_limit(at, fmt::format("the for loops of rule set '{}' repeat their bodies more "
                                      "than {} times in total",
                                      set, kMaxExpandedRules));
  }

  bool over_limit(const Loc& at, const std::string& what) {
    over_limit_ = true;
    diags_.error(at, what + " (the rule-set expansion limit)");
    return false;
  }

  void append_set(ResolvedSet& into, const std::string& part, const Loc& loc) {
    if (over_limit_) return;
    if (!set_decls_.count(part)) {
      diags_.error(loc, fmt::format("unknown rule set '{}'", part));
      return;
    }
    const ResolvedSet* s = out_.find(part);
    if (!s) return;  // part of a cycle (reported when found)
    if (s->kind != into.kind) {
      diags_.error(loc, fmt::format("cannot combine rule set '{}' with '{}': different kinds", part,
                                    into.name));
      return;
    }
    // Splicing a set again adds nothing: every rule of it is included already.
    if (!spliced_.insert(part).second) return;
    Expansion& ex = expansions_[into.name];
    const Expansion& from = expansions_.at(part);
    // Rules of a set already included come later than their first copy, so they could never
    // fire first: they are dropped, which keeps repeated and diamond-shaped `use`s linear.
    std::vector<size_t> keep;
    for (size_t i = 0; i < s->rules.size(); ++i)
      if (!included_.count(from.origin[i])) keep.push_back(i);
    if (keep.empty() || !charge(keep.size(), loc, into.name)) return;
    int index = into.rules.empty() ? 0 : into.rules.back().rule_index + 1;
    int last = s->rules[keep[0]].rule_index;
    for (size_t i : keep) {
      ResolvedRule r = s->rules[i];
      if (r.rule_index != last) ++index, last = r.rule_index;
      r.rule_index = index;
      into.rules.push_back(std::move(r));
      ex.origin.push_back(from.origin[i]);
    }
    for (size_t i : keep) included_.insert(from.origin[i]);
  }

  void resolve_members(const std::vector<Member>& members,
                       const std::map<std::string, std::string>& env, ResolvedSet& set) {
    for (const Member& m : members) {
      if (over_limit_) return;
      switch (m.kind) {
        case Member::Kind::Rule:
          resolve_rule(m, env, set);
          break;
        case Member::Kind::Use:
          append_set(set, m.use, m.loc);
          break;
        case Member::Kind::For: {
          for (const auto& [value, loc] : m.for_values) {
            if (!charge_repetition(loc, set.name)) return;
            if (!op_from_name(value) && !group(value)) {
              diags_.error(loc, unknown_op_message(value));
              continue;
            }
            auto inner = env;
            inner[m.for_var] = value;
            resolve_members(m.body, inner, set);
          }
          break;
        }
      }
    }
  }

  // ---- one rule
  void resolve_rule(const Member& m, const std::map<std::string, std::string>& env,
                    ResolvedSet& set) {
    if (over_limit_) return;
    const int errors_before = diags_.error_count();
    RuleCtx rc;
    rc.for_env = env;
    rc.kind = set.kind;
    std::vector<MatchNode> variants = pattern(*m.pattern, rc);
    if (variants.size() > kMaxVariants) {
      diags_.error(
          m.loc,
          fmt::format("rule expands to {} variants (more than {}: the per-rule variant limit)",
                      variants.size(), kMaxVariants));
      return;
    }
    const int pattern_slots = static_cast<int>(rc.slots.size());
    if (set.kind == SetKind::Gradient && rc.slot_of("g") >= 0) {
      diags_.error(rc.slots[static_cast<size_t>(rc.slot_of("g"))].loc,
                   "'g' is the incoming gradient in gradient rules and cannot be a capture");
      return;
    }
    assign_slot_classes(variants, rc);
    assign_slot_ops(variants, rc);
    const int g_slot = set.kind == SetKind::Gradient ? rc.bind("g", Type::UOp, false, m.loc) : -1;
    std::vector<Step> steps;
    for (const Clause& c : m.clauses) {
      Step s;
      s.expr = expr(*c.expr, rc);
      if (c.kind == Clause::Kind::Require) {
        require_step(s, c.name, c.why_loc, set.kind, rc);
      } else if (c.kind == Clause::Kind::Let) {
        if (rc.slot_of(c.name) >= 0) {
          diags_.error(c.loc, fmt::format("'{}' is already bound", c.name));
        }
        s.is_let = true;
        s.slot = rc.bind(c.name, s.expr.type, false, c.loc);
        rc.slots[static_cast<size_t>(s.slot)].dclass = s.expr.dclass;
        rc.slots[static_cast<size_t>(s.slot)].item = item_type(s.expr, rc);
        rc.slots[static_cast<size_t>(s.slot)].record = s.expr.record;
      } else if (!guard_type_ok(s.expr.type)) {
        diags_.error(c.expr->loc,
                     fmt::format("a guard must be a bool, got {}", type_name(s.expr.type)));
      }
      steps.push_back(std::move(s));
    }
    RExpr result;
    if (is_require(*m.result) && set.kind != SetKind::Verifier) {
      diags_.error(m.result->loc,
                   "'=> require(...)' is a verifier result; a rewrite or gradient rule has it as "
                   "a clause before its '=>'");
      result.loc = m.result->loc;
      result.type = Type::Any;
    } else if (is_require(*m.result)) {
      // `=> require(cond, "why")`: a last require clause, then ok
      Step s;
      s.expr = expr(*m.result->kids[0], rc);
      require_step(s, m.result->kids[1]->literal.as_string(), m.result->kids[1]->loc, set.kind, rc);
      steps.push_back(std::move(s));
      result.loc = m.result->loc;
      result.value = Value::ok();
      result.type = Type::Status;
    } else {
      result = expr(*m.result, rc);
    }
    check_result(result, set.kind, m.result->loc);

    // Every capture the clauses or the result use must be bound by every variant.
    for (int slot = 0; slot < pattern_slots; ++slot) {
      const SlotInfo& info = rc.slots[static_cast<size_t>(slot)];
      if (info.expr_uses == 0) continue;
      for (const MatchNode& v : variants) {
        if (!binds(v, slot)) {
          diags_.error(
              info.loc,
              fmt::format("capture '{}' is used but not bound in every alternative", info.name));
          break;
        }
      }
    }
    for (int slot = 0; slot < pattern_slots; ++slot) {
      const SlotInfo& info = rc.slots[static_cast<size_t>(slot)];
      if (info.expr_uses == 0 && info.pattern_uses == 1 && info.name[0] != '_') {
        diags_.warning(
            info.loc,
            fmt::format("capture '{}' is never used (write '_' or drop the name)", info.name));
      }
    }
    // A rule that fails still counts: a `for` loop repeating it must stay bounded.
    if (diags_.error_count() > errors_before) {
      charge(1, m.loc, set.name);
      return;
    }

    if (!m.name.empty() && !unique_rule_name(m, set.name)) {
      charge(1, m.loc, set.name);
      return;
    }
    const int index = set.rules.empty() ? 0 : set.rules.back().rule_index + 1;
    std::vector<MatchNode> unique;
    for (MatchNode& v : variants)
      if (std::find(unique.begin(), unique.end(), v) == unique.end())
        unique.push_back(std::move(v));
    if (!charge(unique.size(), m.loc, set.name)) return;
    std::vector<int>& origin = expansions_[set.name].origin;
    origin.insert(origin.end(), unique.size(), set_id(set.name));
    for (size_t i = 0; i < unique.size(); ++i) {
      ResolvedRule r;
      r.loc = m.loc;
      std::string bindings;
      for (const auto& [var, value] : env)
        bindings += (bindings.empty() ? "" : ",") + var + "=" + value;
      // a named rule is `<set>.<name>`; an unnamed one `<set>#<position>`
      r.info = RuleInfo{
          fmt::format("{}{}{}", set.name, m.name.empty() ? fmt::format("#{}", index) : "." + m.name,
                      bindings.empty() ? "" : "[" + bindings + "]"),
          m.loc.file ? m.loc.file->path : "", m.loc.line, m.text};
      r.rule_index = index;
      r.variant = static_cast<int>(i);
      r.root = std::move(unique[i]);
      for (const SlotInfo& s : rc.slots) r.slot_names.push_back(s.name);
      r.steps = steps;
      r.result = result;
      r.has_identity = has_identity(r.root, static_cast<int>(rc.slots.size()));
      r.gradient_slot = g_slot;
      set.rules.push_back(std::move(r));
    }
  }

  // ---- rule names: unique among the rules written in one set (a `for` body's rule is one rule)
  bool unique_rule_name(const Member& m, const std::string& set) {
    auto [it, fresh] = rule_names_.emplace(set + "." + m.name, &m);
    if (fresh || it->second == &m) return true;
    error_with_note(m.name_loc,
                    fmt::format("rule name '{}' is used twice in rule set '{}'", m.name, set),
                    it->second->name_loc, "first used here");
    return false;
  }

  // ---- require(cond, "why"), a clause or a whole result of a rule (verifiers: a result)
  static bool is_require(const Expr& e) {
    return e.kind == ExprKind::Call && e.name == "require" && e.kids.size() == 2 &&
           e.kids[1]->kind == ExprKind::Literal && e.kids[1]->literal.is_string();
  }
  void require_step(Step& s, std::string why, const Loc& why_loc, SetKind kind, RuleCtx& rc) {
    s.is_require = true;
    s.raises = kind != SetKind::Verifier;  // a rewrite or gradient has no "fail" result
    s.why = std::move(why);
    reason_parts(s, why_loc, rc);
    if (!guard_type_ok(s.expr.type))
      diags_.error(s.expr.loc,
                   fmt::format("require needs a bool condition, got {}", type_name(s.expr.type)));
  }

  // "... {name} ...": each placeholder is the value of a capture or let bound before the require
  // (shown as text); '{{' and '}}' are braces. Columns are counted in the unescaped reason.
  void reason_parts(Step& s, const Loc& why_loc, RuleCtx& rc) {
    const std::string& w = s.why;
    std::string text;
    auto at = [&](size_t i) {
      Loc l = why_loc;
      l.col += static_cast<int>(i) + 1;  // past the opening quote
      return l;
    };
    for (size_t i = 0; i < w.size(); ++i) {
      const bool twice = i + 1 < w.size() && w[i + 1] == w[i];
      if ((w[i] == '{' || w[i] == '}') && twice) {
        text += w[i++];
        continue;
      }
      if (w[i] == '}') {
        diags_.error(at(i), "a '}' in a require reason closes nothing (write '}}' for a brace)");
        continue;
      }
      if (w[i] != '{') {
        text += w[i];
        continue;
      }
      const size_t end = w.find('}', i);
      const std::string name = end == std::string::npos ? "" : w.substr(i + 1, end - i - 1);
      const bool ident = !name.empty() &&
                         (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_') &&
                         std::all_of(name.begin(), name.end(), [](char ch) {
                           return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
                         });
      if (!ident) {
        diags_.error(at(i),
                     "a '{' in a require reason starts a placeholder '{name}' of a capture "
                     "or let (write '{{' for a brace)");
        if (end != std::string::npos) i = end;  // one error for the whole placeholder
        continue;
      }
      Expr e;
      e.kind = ExprKind::Name;
      e.loc = at(i + 1);
      e.name = name;
      s.why_text.push_back(std::move(text));
      text.clear();
      s.why_args.push_back(expr(e, rc));
      i = end;
    }
    s.why_text.push_back(std::move(text));
  }

  static bool guard_type_ok(Type t) { return t == Type::Bool || t == Type::Int || t == Type::Any; }

  void check_result(const RExpr& r, SetKind kind, const Loc& at) {
    const Type t = r.type;
    switch (kind) {
      case SetKind::Rules:
        if (t != Type::UOp && t != Type::Any && t != Type::None) {
          diags_.error(at, fmt::format("a rule must produce a UOp, got {}", type_name(t)));
        }
        break;
      case SetKind::Verifier:
        if (t != Type::Status && t != Type::Bool && t != Type::Any) {
          diags_.error(
              at, fmt::format("a verifier rule must produce ok, fail(\"...\") or a bool, got {}",
                              type_name(t)));
        }
        break;
      case SetKind::Gradient:
        if (t != Type::Tuple && t != Type::UOp && t != Type::Any && t != Type::None) {
          diags_.error(at,
                       fmt::format("a gradient rule must produce one gradient per source, got {}",
                                   type_name(t)));
        }
        break;
    }
  }

  static bool binds_anything(const MatchNode& n) {
    if (!n.slots.empty() || n.arg.kind == ArgMatch::Kind::Bind ||
        n.arg.kind == ArgMatch::Kind::Tuple)
      return true;
    for (const MatchNode& s : n.srcs)
      if (binds_anything(s)) return true;
    return false;
  }
  static bool binds(const MatchNode& n, int slot) {
    if (std::find(n.slots.begin(), n.slots.end(), slot) != n.slots.end()) return true;
    if (arg_binds(n.arg, slot)) return true;
    for (const MatchNode& s : n.srcs)
      if (binds(s, slot)) return true;
    return false;
  }
  static bool arg_binds(const ArgMatch& a, int slot) {
    if (a.kind == ArgMatch::Kind::Bind && a.slot == slot) return true;
    for (const ArgMatch& i : a.items)
      if (arg_binds(i, slot)) return true;
    return false;
  }
  static void count_arg_slots(const ArgMatch& a, std::vector<int>& counts) {
    if (a.kind == ArgMatch::Kind::Bind) ++counts[static_cast<size_t>(a.slot)];
    for (const ArgMatch& i : a.items) count_arg_slots(i, counts);
  }
  static void count_slots(const MatchNode& n, std::vector<int>& counts) {
    for (int s : n.slots) ++counts[static_cast<size_t>(s)];
    count_arg_slots(n.arg, counts);
    for (const MatchNode& c : n.srcs) count_slots(c, counts);
  }
  static bool has_identity(const MatchNode& n, int nslots) {
    std::vector<int> counts(static_cast<size_t>(nslots), 0);
    count_slots(n, counts);
    if (n.sources == MatchNode::Sources::Repeat && !n.srcs.empty() && !n.srcs[0].slots.empty())
      return true;
    return std::any_of(counts.begin(), counts.end(), [](int c) { return c > 1; });
  }

  // ---- patterns
  std::vector<MatchNode> pattern(const Pattern& p, RuleCtx& rc) {
    std::vector<MatchNode> out;
    for (const auto& chain : p.alternatives) {
      for (MatchNode& v : chain_variants(chain, rc)) out.push_back(std::move(v));
    }
    return out;
  }

  enum class NameKind { Op, Group, ForVar, DType, Capture, Unknown };
  NameKind classify(const std::string& n, const RuleCtx& rc) const {
    if (rc.for_env.count(n)) return NameKind::ForVar;
    if (op_from_name(n) && std::isupper(static_cast<unsigned char>(n[0]))) return NameKind::Op;
    if (group(n)) return NameKind::Group;
    if (dtype_filter_from_name(n)) return NameKind::DType;
    if (std::islower(static_cast<unsigned char>(n[0])) || n[0] == '_') return NameKind::Capture;
    return NameKind::Unknown;
  }

  std::optional<OpSet> ops_of(const std::string& n, const RuleCtx& rc) const {
    std::string name = n;
    if (auto it = rc.for_env.find(n); it != rc.for_env.end()) name = it->second;
    if (auto o = op_from_name(name)) return OpSet{*o};
    return group(name);
  }

  std::vector<MatchNode> chain_variants(const std::vector<Constraint>& chain, RuleCtx& rc) {
    std::vector<MatchNode> acc(1);
    size_t first = 0;
    const Constraint& head = chain[0];
    if (head.kind == Constraint::Kind::Op && head.names.size() == 1 && !head.has_sources &&
        !head.arg && !head.optional && classify(head.names[0], rc) == NameKind::Capture) {
      const int s = rc.bind(head.names[0], Type::UOp, true, head.loc);
      ++rc.slots[static_cast<size_t>(s)].pattern_uses;
      acc[0].slots.push_back(s);
      first = 1;
    }
    for (size_t i = first; i < chain.size(); ++i) {
      std::vector<MatchNode> next;
      for (const MatchNode& part : constraint_variants(chain[i], rc, i > 0)) {
        for (const MatchNode& a : acc) {
          if (auto m = intersect(a, part, chain[i].loc)) next.push_back(std::move(*m));
        }
      }
      acc = std::move(next);
      if (acc.size() > kMaxVariants * 4) break;
    }
    return acc;
  }

  std::optional<MatchNode> intersect(const MatchNode& a, const MatchNode& b, const Loc& at) {
    MatchNode out = a;
    out.slots.insert(out.slots.end(), b.slots.begin(), b.slots.end());
    if (!b.any_op) {
      if (out.any_op) {
        out.any_op = false;
        out.ops = b.ops;
      } else {
        out.ops = out.ops & b.ops;
        if (out.ops.empty()) {
          diags_.error(at, "op constraints of this node never overlap");
          return std::nullopt;
        }
      }
    }
    if (b.dtype.kind != DTypeFilter::Kind::Any) {
      if (out.dtype.kind != DTypeFilter::Kind::Any && !(out.dtype == b.dtype)) {
        diags_.error(at, fmt::format("conflicting dtype constraints {} and {}", out.dtype.str(),
                                     b.dtype.str()));
        return std::nullopt;
      }
      out.dtype = b.dtype;
    }
    if (b.arg.kind != ArgMatch::Kind::Any) {
      if (out.arg.kind != ArgMatch::Kind::Any) {
        diags_.error(at, "the arg of this node is matched twice");
        return std::nullopt;
      }
      out.arg = b.arg;
    }
    if (b.sources != MatchNode::Sources::Any) {
      if (out.sources != MatchNode::Sources::Any) {
        diags_.error(at, "the sources of this node are matched twice");
        return std::nullopt;
      }
      out.sources = b.sources;
      out.srcs = b.srcs;
    }
    return out;
  }

  std::vector<MatchNode> constraint_variants(const Constraint& c, RuleCtx& rc, bool in_chain_tail) {
    MatchNode n;
    switch (c.kind) {
      case Constraint::Kind::Wildcard:
        return {n};
      case Constraint::Kind::Literal:
        n.any_op = false;
        n.ops = OpSet{Op::Const};
        n.arg.kind = ArgMatch::Kind::Literal;
        n.arg.literal = c.literal;
        return {n};
      case Constraint::Kind::Group:
        return pattern(*c.group, rc);
      case Constraint::Kind::Op:
        break;
    }
    // A lone dtype name: a dtype constraint.
    if (c.names.size() == 1 && !c.has_sources && !c.arg && !c.optional &&
        classify(c.names[0], rc) == NameKind::DType) {
      n.dtype = *dtype_filter_from_name(c.names[0]);
      return {n};
    }
    n.any_op = false;
    for (const std::string& name : c.names) {
      const NameKind k = classify(name, rc);
      if (k == NameKind::Capture && c.names.size() == 1 && !c.has_sources && !c.optional) {
        diags_.error(c.loc, in_chain_tail
                                ? fmt::format("'{}' is not an op, op group or dtype", name)
                                : fmt::format("'{}' cannot be a capture here", name));
        return {};
      }
      auto set = ops_of(name, rc);
      if (!set) {
        diags_.error(c.loc, k == NameKind::DType
                                ? fmt::format("dtype '{}' cannot be combined with ops", name)
                                : unknown_op_message(name));
        return {};
      }
      n.ops = n.ops | *set;
    }
    if (c.arg) n.arg = arg_match(*c.arg, rc);
    if (!c.has_sources) return {n};

    // Sources: positional, '...' tail, repeated, or commutative (every order).
    std::vector<const Constraint::Source*> pos;
    bool rest = false, repeat = false;
    for (size_t i = 0; i < c.sources.size(); ++i) {
      const auto& s = c.sources[i];
      if (!s.pattern) {
        if (i + 1 != c.sources.size()) {
          diags_.error(s.loc, "'...' must be the last source");
          return {};
        }
        rest = true;
        continue;
      }
      if (s.repeat) {
        if (c.sources.size() != 1) {
          diags_.error(s.loc, "a repeated source 'p*' must be the only source");
          return {};
        }
        repeat = true;
      }
      pos.push_back(&s);
    }
    if (c.commutative && (rest || repeat || pos.size() < 2 || pos.size() > 3)) {
      diags_.error(c.loc, "commutative sources [..] take two or three patterns");
      return {};
    }
    if (!repeat) {
      // Arity: at least one op of the set must accept this many sources.
      const int n_src = static_cast<int>(pos.size());
      bool any_ok = false;
      n.ops.for_each([&](Op o) {
        const OpInfo& info = op_info(o);
        any_ok |= rest ? (info.max_src < 0 || info.max_src >= n_src) : info.accepts_arity(n_src);
      });
      if (!any_ok) {
        std::string names;
        n.ops.for_each(
            [&](Op o) { names += (names.empty() ? "" : "|") + std::string(op_name(o)); });
        const OpInfo& info = op_info([&] {
          Op f = Op::Noop;
          n.ops.for_each([&](Op o) {
            if (f == Op::Noop) f = o;
          });
          return f;
        }());
        const std::string want = arity_text(info);
        diags_.error(c.loc, fmt::format("wrong arity: {} takes {} sources, the pattern has {}",
                                        names, want, n_src));
        return {};
      }
    }
    std::vector<std::vector<MatchNode>> per_source;
    for (const auto* s : pos) per_source.push_back(pattern(*s->pattern, rc));
    if (repeat) {
      for (const MatchNode& v : per_source[0]) {
        for (const MatchNode& child : v.srcs) {
          if (binds_anything(child)) {
            diags_.error(pos[0]->loc,
                         "captures inside a repeated source may only name the repeated node");
            return {};
          }
        }
        if (v.arg.kind != ArgMatch::Kind::Any && v.arg.kind != ArgMatch::Kind::Literal) {
          diags_.error(pos[0]->loc, "a repeated source cannot bind its arg");
          return {};
        }
      }
    }
    std::vector<std::vector<size_t>> orders;
    std::vector<size_t> order(pos.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    do {
      orders.push_back(order);
    } while (c.commutative && std::next_permutation(order.begin(), order.end()));

    std::vector<MatchNode> out;
    for (const auto& ord : orders) {
      std::vector<MatchNode> partial(1, n);
      for (auto& p : partial) {
        p.sources = repeat ? MatchNode::Sources::Repeat
                    : rest ? MatchNode::Sources::Prefix
                           : MatchNode::Sources::Exact;
      }
      for (size_t k : ord) {
        std::vector<MatchNode> grown;
        for (const MatchNode& p : partial) {
          for (const MatchNode& sv : per_source[k]) {
            MatchNode q = p;
            q.srcs.push_back(sv);
            grown.push_back(std::move(q));
          }
        }
        partial = std::move(grown);
        if (partial.size() > kMaxVariants * 4) break;
      }
      for (MatchNode& p : partial) out.push_back(std::move(p));
    }
    if (c.optional) {
      if (pos.size() != 1 || rest || repeat) {
        diags_.error(c.loc, "an optional wrapper 'Op?(p)' takes exactly one source");
        return {};
      }
      for (const MatchNode& v : per_source[0])
        out.push_back(v);  // resolved once: captures counted once
    }
    return out;
  }

  ArgMatch arg_match(const ArgPat& a, RuleCtx& rc) {
    ArgMatch m;
    switch (a.kind) {
      case ArgPat::Kind::Any:
        return m;
      case ArgPat::Kind::Literal:
        m.kind = ArgMatch::Kind::Literal;
        m.literal = a.literal;
        return m;
      case ArgPat::Kind::Name: {
        if (auto o = op_from_name(a.name);
            o && std::isupper(static_cast<unsigned char>(a.name[0]))) {
          m.kind = ArgMatch::Kind::Literal;
          m.literal = Arg::op(*o);
          return m;
        }
        if (auto it = rc.for_env.find(a.name); it != rc.for_env.end() && op_from_name(it->second)) {
          m.kind = ArgMatch::Kind::Literal;
          m.literal = Arg::op(*op_from_name(it->second));
          return m;
        }
        m.kind = ArgMatch::Kind::Bind;
        m.slot = rc.bind(a.name, Type::Any, true, a.loc);
        ++rc.slots[static_cast<size_t>(m.slot)].pattern_uses;
        rc.slots[static_cast<size_t>(m.slot)].type = Type::Any;
        return m;
      }
      case ArgPat::Kind::Tuple:
        m.kind = ArgMatch::Kind::Tuple;
        for (const ArgPat& i : a.items) m.items.push_back(arg_match(i, rc));
        return m;
    }
    return m;
  }

  // ---- dtype classes of UOp expressions
  // What a pattern node says of its dtype: a dtype constraint, or comparison ops (bool).
  static DClass class_of(DType d) {
    if (d.is_bool()) return DClass::Bool;
    if (d.is_float()) return DClass::Float;
    if (d.is_int()) return DClass::Int;  // index included
    return DClass::Unknown;
  }
  static DClass node_class(const MatchNode& n) {
    using K = DTypeFilter::Kind;
    switch (n.dtype.kind) {
      case K::Exact:
        return class_of(n.dtype.exact);
      case K::Int:
      case K::UInt:
      case K::SInt:
      case K::Index:
        return DClass::Int;
      case K::Float:
        return DClass::Float;
      case K::Bool:
        return DClass::Bool;
      default:
        break;
    }
    if (!n.any_op && !n.ops.empty() && (n.ops & groups::comparison()) == n.ops) return DClass::Bool;
    // Ranges count in the index dtype (spec.rw checks it), so a captured Range is an int.
    if (!n.any_op && n.ops == OpSet{Op::Range}) return DClass::Int;
    return DClass::Unknown;
  }
  // `implied`: what the parent node says of this one (spec_alu: a Where's condition is a bool).
  static void collect_classes(const MatchNode& n, std::map<int, DClass>& out,
                              DClass implied = DClass::Unknown) {
    DClass c = node_class(n);
    if (c == DClass::Unknown) c = implied;
    for (int s : n.slots) {
      auto [it, fresh] = out.emplace(s, c);
      if (!fresh && it->second == DClass::Unknown) it->second = c;
    }
    const bool where =
        !n.any_op && n.ops == OpSet{Op::Where} && n.sources != MatchNode::Sources::Repeat;
    for (size_t i = 0; i < n.srcs.size(); ++i) {  // as deep as the brackets
      collect_classes(n.srcs[i], out, where && i == 0 ? DClass::Bool : DClass::Unknown);
    }
  }
  // A capture's class is known when every variant that binds it agrees.
  static void assign_slot_classes(const std::vector<MatchNode>& variants, RuleCtx& rc) {
    std::map<int, std::optional<DClass>> agreed;
    for (const MatchNode& v : variants) {
      std::map<int, DClass> here;
      collect_classes(v, here);
      for (const auto& [slot, c] : here) {
        auto [it, fresh] = agreed.emplace(slot, c);
        if (!fresh && it->second != c) it->second = DClass::Unknown;
      }
    }
    for (const auto& [slot, c] : agreed) rc.slots[static_cast<size_t>(slot)].dclass = *c;
  }

  // The ops a capture may have: those its nodes allow, over every variant (any op when one node
  // has no op constraint). `c.arg` of a capture that is always a CALL is a CallInfo record.
  static void collect_ops(const MatchNode& n, std::map<int, std::optional<OpSet>>& out) {
    for (int s : n.slots) {
      auto [it, fresh] = out.emplace(s, n.any_op ? std::nullopt : std::optional<OpSet>(n.ops));
      if (!fresh && it->second) {
        if (n.any_op)
          it->second.reset();
        else
          it->second = *it->second | n.ops;
      }
    }
    for (const MatchNode& k : n.srcs) collect_ops(k, out);  // as deep as the brackets
  }
  static void assign_slot_ops(const std::vector<MatchNode>& variants, RuleCtx& rc) {
    std::map<int, std::optional<OpSet>> ops;
    for (const MatchNode& v : variants) collect_ops(v, ops);
    for (const auto& [slot, o] : ops) rc.slots[static_cast<size_t>(slot)].ops = o;
  }
  // The record type of `x.arg`, when every op x may have carries the same known record.
  const RecordSchema* arg_record(const RExpr& x, const RuleCtx& rc) const {
    if (x.k != RExpr::K::Slot) return nullptr;
    const std::optional<OpSet>& ops = rc.slots[static_cast<size_t>(x.slot)].ops;
    if (!ops || ops->empty()) return nullptr;
    const RecordSchema* out = nullptr;
    for (int o = 0; o < kNumOps; ++o) {
      if (!ops->contains(static_cast<Op>(o))) continue;
      const RecordSchema* s = record_schema_of(static_cast<Op>(o));
      if (!s || (out && out != s)) return nullptr;
      out = s;
    }
    return out;
  }

  // The operands of an ALU op built by an expression: UOps, or numbers that become constants of
  // the UOp operands' dtype. Checks what rules/spec.rw's spec_alu verifies at run time, as far as
  // the classes are known, and returns the class of the result.
  DClass check_alu(Op op, std::string_view label, const Loc& at,
                   std::initializer_list<const RExpr*> operands) {
    std::vector<const RExpr*> ops(operands);
    size_t first = 0;
    DClass cond = DClass::Unknown;
    if (op == Op::Where) {  // the condition is checked on its own
      cond = ops[0]->dclass;
      if (ops[0]->type == Type::UOp && cond != DClass::Unknown && cond != DClass::Bool) {
        diags_.error(at,
                     fmt::format("{} needs a bool condition, got {}", label, dclass_name(cond)));
      }
      first = 1;
    }
    if (op == Op::Shl || op == Op::Shr) {  // the count may have another int dtype, but is an int
      for (const RExpr* o : ops) {
        if (o->type == Type::UOp && o->dclass != DClass::Unknown && o->dclass != DClass::Int) {
          diags_.error(at,
                       fmt::format("{} needs int operands, got {}", label, dclass_name(o->dclass)));
          return DClass::Unknown;
        }
      }
    }
    DClass joined = DClass::Unknown;
    bool float_number = false;
    for (size_t i = first; i < ops.size(); ++i) {
      const RExpr& o = *ops[i];
      if (o.type != Type::UOp) {
        float_number |= o.type == Type::Float;
        continue;
      }
      if (o.dclass == DClass::Unknown) continue;
      if (joined == DClass::Unknown) {
        joined = o.dclass;
      } else if (joined != o.dclass &&
                 !(op == Op::Shl || op == Op::Shr)) {  // a shift count is any int
        diags_.error(at, fmt::format("{} needs operands of one dtype class, got {} and {}", label,
                                     dclass_name(joined), dclass_name(o.dclass)));
        return DClass::Unknown;
      }
    }
    if (float_number && (joined == DClass::Int || joined == DClass::Bool)) {
      diags_.error(at, fmt::format("{} makes a float number a constant of a UOp of {} dtype", label,
                                   dclass_name(joined)));
      return DClass::Unknown;
    }
    auto need = [&](bool ok, std::string_view what) {
      if (joined != DClass::Unknown && !ok) {
        diags_.error(at,
                     fmt::format("{} needs {} operands, got {}", label, what, dclass_name(joined)));
      }
    };
    static const OpSet kFloatOnly{Op::FDiv, Op::Pow,  Op::Exp2,      Op::Log2,
                                  Op::Sin,  Op::Sqrt, Op::Reciprocal};
    static const OpSet kIntOnly{Op::CDiv, Op::CMod, Op::FloorDiv, Op::FloorMod, Op::Shl, Op::Shr};
    static const OpSet kBitwise{Op::And, Op::Or, Op::Xor};
    if (kFloatOnly.contains(op)) need(joined == DClass::Float, "float");
    if (kIntOnly.contains(op)) need(joined == DClass::Int, "int");
    if (kBitwise.contains(op)) need(joined == DClass::Int || joined == DClass::Bool, "int or bool");
    if (groups::comparison().contains(op)) return DClass::Bool;
    return joined;
  }

  // A dtype given as a constant (`float32`), or nothing when it is computed.
  static DClass dtype_arg_class(const RExpr& d) {
    return d.k == RExpr::K::Const && d.type == Type::DType ? class_of(d.value.as_dtype())
                                                           : DClass::Unknown;
  }

  // Methods and builtins that build UOps.
  void check_uop_call(RExpr& r, const Loc& at) {
    const std::string& n = r.name;
    auto arg = [&](size_t i) -> const RExpr* { return i < r.kids.size() ? &r.kids[i] : nullptr; };
    auto named = [&](std::string_view key) -> const RExpr* {
      for (size_t i = 0; i < r.kids.size(); ++i)
        if (i < r.arg_names.size() && r.arg_names[i] == key) return &r.kids[i];
      return nullptr;
    };
    const std::string label = fmt::format("'{}'", n);
    if (r.k == RExpr::K::Method) {
      const RExpr& recv = r.kids[0];
      if (recv.type != Type::UOp) return;
      static const std::map<std::string_view, Op> kAlu = {
          {"lt", Op::CmpLt},          {"le", Op::CmpLt},    {"gt", Op::CmpLt},
          {"ge", Op::CmpLt},          {"ne", Op::CmpNe},    {"eq", Op::CmpNe},
          {"maximum", Op::Max},       {"minimum", Op::Max}, {"floordiv", Op::FloorDiv},
          {"floormod", Op::FloorMod}, {"cdiv", Op::CDiv},   {"cmod", Op::CMod}};
      if (auto it = kAlu.find(n); it != kAlu.end() && arg(1)) {
        r.dclass = check_alu(it->second, label, at, {&recv, arg(1)});
      } else if (n == "where" && arg(2)) {
        r.dclass = check_alu(Op::Where, label, at, {&recv, arg(1), arg(2)});
      } else if (n == "logical_not") {
        if (recv.dclass != DClass::Unknown && recv.dclass != DClass::Bool)
          diags_.error(
              at, fmt::format("'logical_not' needs a bool UOp, got {}", dclass_name(recv.dclass)));
        r.dclass = DClass::Bool;
      } else if (n == "const_like" && arg(1)) {
        r.dclass = check_alu(Op::Add, label, at, {&recv, arg(1)});
      } else if ((n == "cast" || n == "bitcast") && arg(1)) {
        r.dclass = dtype_arg_class(*arg(1));
      } else if (n == "replace") {
        if (const RExpr* d = named("dtype"))
          r.dclass = dtype_arg_class(*d);
        else if (!named("op"))
          r.dclass = recv.dclass;
      } else if (find_uop_builder(n)) {  // movement ops, reductions, INDEX, AFTER
        r.dclass = recv.dclass;
      }
      return;
    }
    // builtins
    if (n == "const_like" && arg(1) && arg(0)->type == Type::UOp) {
      r.dclass = check_alu(Op::Add, label, at, {arg(0), arg(1)});
    } else if ((n == "max" || n == "min") && arg(1) && r.type == Type::UOp) {
      r.dclass = check_alu(Op::Max, label, at, {arg(0), arg(1)});
    } else if (n == "select" && arg(2) && arg(0)->type == Type::UOp) {
      r.dclass = check_alu(Op::Where, label, at, {arg(0), arg(1), arg(2)});
    } else if (n == "uop" && arg(1)) {
      r.dclass = dtype_arg_class(*arg(1));
    }
  }

  // ---- expressions
  RExpr expr(const Expr& e, RuleCtx& rc) {
    RExpr r;
    r.loc = e.loc;
    switch (e.kind) {
      case ExprKind::Literal:
        r.k = RExpr::K::Const;
        r.value = Value::from_arg(e.literal);
        r.type = literal_type(e.literal);
        return r;
      case ExprKind::Name:
        return name(e, rc);
      case ExprKind::Call:
        return call(e, rc);
      case ExprKind::Member: {
        r.k = e.is_call ? RExpr::K::Method : RExpr::K::Member;
        r.name = e.name;
        if (!e.is_call) r.prop = uop_prop_from_name(e.name);
        for (const auto& k : e.kids) r.kids.push_back(expr(*k, rc));
        r.arg_names = e.arg_names;
        const Type recv = r.kids[0].type;
        if (const RecordSchema* rs = record_schema(r.kids[0].record); rs && !e.is_call) {
          // a field of a known record type: its declared type, or an error naming the fields
          const std::optional<Type> ft = rs->field_type(e.name);
          if (!ft)
            diags_.error(e.loc, fmt::format("{} has no field '{}' (its fields: {})", rs->name,
                                            e.name, rs->field_list()));
          r.prop.reset();
          r.type = ft.value_or(Type::Any);
          return r;
        }
        auto t = member_type(recv, e.name, e.is_call);
        if (!t && !e.is_call && is_record_field(e.name)) {
          diags_.error(e.loc, recv == Type::UOp
                                  ? fmt::format("UOp has no property '{}' (a record's fields are "
                                                "read through the arg: x.arg.{})",
                                                e.name, e.name)
                                  : fmt::format("{} has no field '{}' (only a record arg has "
                                                "fields)",
                                                type_name(recv), e.name));
        } else if (!t) {
          diags_.error(e.loc, fmt::format("{} has no {} '{}'", type_name(recv),
                                          e.is_call ? "method" : "property", e.name));
        }
        r.type = t.value_or(Type::Any);
        if (!e.is_call && e.name == "arg" && recv == Type::UOp) {
          if (const RecordSchema* rs = arg_record(r.kids[0], rc)) {
            r.type = Type::Record;
            r.record = std::string(rs->name);
          }
        }
        if (t && r.type == Type::UOp) check_uop_call(r, e.loc);
        return r;
      }
      case ExprKind::Index:
        r.k = RExpr::K::Index;
        for (const auto& k : e.kids) r.kids.push_back(expr(*k, rc));
        if (r.kids[0].type != Type::Tuple && r.kids[0].type != Type::Any) {
          diags_.error(e.loc, fmt::format("cannot index a {}", type_name(r.kids[0].type)));
        }
        r.type = item_type(r.kids[0], rc);
        return r;
      case ExprKind::Unary: {
        r.kids.push_back(expr(*e.kids[0], rc));
        const Type t = r.kids[0].type;
        if (e.op == "!") {
          r.k = RExpr::K::Not;
          r.type = Type::Bool;
          if (!guard_type_ok(t))
            diags_.error(e.loc, fmt::format("'!' needs a bool, got {}", type_name(t)));
        } else {
          r.k = e.op == "-" ? RExpr::K::Neg : RExpr::K::Invert;
          r.type = t;
          if (t == Type::UOp) {  // -x is x * -1 (a logical not of a bool): same class; ~x is x ^ -1
            r.dclass =
                e.op == "-" ? r.kids[0].dclass : check_alu(Op::Xor, "'~'", e.loc, {&r.kids[0]});
          }
          if (t != Type::UOp && t != Type::Int && t != Type::Float && t != Type::Any &&
              t != Type::Bool) {
            diags_.error(e.loc,
                         fmt::format("'{}' needs a number or a UOp, got {}", e.op, type_name(t)));
          }
        }
        return r;
      }
      case ExprKind::Binary:
        return binary_expr(e, rc);
      case ExprKind::Slice:
        return slice_expr(e, rc);
      case ExprKind::Comp:
        return comprehension(e, rc);
      case ExprKind::Cond:
        return conditional(e, rc);
      case ExprKind::Tuple:
        r.k = RExpr::K::Tuple;
        r.type = Type::Tuple;
        for (const auto& k : e.kids) r.kids.push_back(expr(*k, rc));
        return r;
    }
    return r;
  }

  static Type literal_type(const Arg& a) {
    if (a.is_bool()) return Type::Bool;
    if (a.is_int()) return Type::Int;
    if (a.is_float()) return Type::Float;
    if (a.is_string()) return Type::String;
    return Type::None;
  }

  RExpr name(const Expr& e, RuleCtx& rc) {
    RExpr r;
    r.loc = e.loc;
    r.k = RExpr::K::Const;
    if (int s = rc.slot_of(e.name); s >= 0) {
      r.k = RExpr::K::Slot;
      r.slot = s;
      r.type = rc.slots[static_cast<size_t>(s)].type;
      r.dclass = rc.slots[static_cast<size_t>(s)].dclass;
      r.record = rc.slots[static_cast<size_t>(s)].record;
      ++rc.slots[static_cast<size_t>(s)].expr_uses;
      return r;
    }
    if (auto it = rc.for_env.find(e.name); it != rc.for_env.end()) {
      if (auto o = op_from_name(it->second)) {
        r.value = Value::op(*o);
        r.type = Type::Op;
        return r;
      }
    }
    if (e.name == "ok") {
      if (rc.kind != SetKind::Verifier && !rc.in_def)
        diags_.error(e.loc, "'ok' is only a result of verifier rules");
      r.value = Value::ok();
      r.type = Type::Status;
      return r;
    }
    if (auto d = DType::from_name(e.name)) {
      r.value = Value::dtype(*d);
      r.type = Type::DType;
      return r;
    }
    if (auto o = op_from_name(e.name)) {
      r.value = Value::op(*o);
      r.type = Type::Op;
      return r;
    }
    diags_.error(e.loc, fmt::format("'{}' is not bound (not a capture, let, dtype or op)", e.name));
    return r;
  }

  RExpr call(const Expr& e, RuleCtx& rc) {
    RExpr r;
    r.loc = e.loc;
    r.name = e.name;
    r.arg_names = e.arg_names;
    for (const auto& k : e.kids) r.kids.push_back(expr(*k, rc));
    const bool any_uop = std::any_of(r.kids.begin(), r.kids.end(),
                                     [](const RExpr& k) { return k.type == Type::UOp; });
    std::string op_text = e.name;
    if (auto it = rc.for_env.find(e.name); it != rc.for_env.end()) op_text = it->second;
    if (auto o = op_from_name(op_text); o && std::isupper(static_cast<unsigned char>(op_text[0]))) {
      r.k = RExpr::K::Construct;
      r.op = *o;
      r.type = Type::UOp;
      const OpInfo& info = op_info(*o);
      if (!info.is_alu()) {
        diags_.error(e.loc,
                     fmt::format("{}(...) builds ALU ops only; use uop({}, dtype, src: (...))",
                                 info.name, info.name));
      } else if (!info.accepts_arity(static_cast<int>(r.kids.size()))) {
        diags_.error(e.loc, fmt::format("wrong arity: {} takes {} sources, got {}", info.name,
                                        arity_text(info), r.kids.size()));
      } else {
        const std::string label(info.name);
        const size_t n = r.kids.size();
        r.dclass = check_alu(
            *o, label, e.loc,
            n == 1   ? std::initializer_list<const RExpr*>{&r.kids[0]}
            : n == 2 ? std::initializer_list<const RExpr*>{&r.kids[0], &r.kids[1]}
                     : std::initializer_list<const RExpr*>{&r.kids[0], &r.kids[1], &r.kids[2]});
      }
      return r;
    }
    if (is_require(e)) {
      diags_.error(e.loc,
                   "require(cond, \"why\") is a clause or the whole result of a rule, not "
                   "part of an expression");
      return r;
    }
    if (def_decls_.count(e.name)) return def_call(e, std::move(r));
    if (auto t = builtin_type(e.name)) {
      r.k = RExpr::K::Builtin;
      r.type = *t;
      if ((e.name == "max" || e.name == "min" || e.name == "select") && any_uop) r.type = Type::UOp;
      check_builtin_args(r, e.loc);
      fold_like_type(r, rc);
      if (r.type == Type::UOp) check_uop_call(r, e.loc);
      if (e.name == "fail" && rc.kind != SetKind::Verifier && !rc.in_def)
        diags_.error(e.loc, "'fail' is only a result of verifier rules");
      if (is_context_builtin(e.name) && rc.kind != SetKind::Rules && !rc.in_def)
        diags_.error(e.loc,
                     fmt::format("'{}' rewrites with the running rule set: only the rules "
                                 "of a ruleset run in one (not a {}'s)",
                                 e.name, rc.kind == SetKind::Verifier ? "verifier" : "gradient"));
      return r;
    }
    if (auto it = out_.helpers.find(e.name); it != out_.helpers.end()) {
      const HelperDecl& h = it->second;
      r.k = RExpr::K::Helper;
      r.decl = &h;
      r.helper = find_helper(e.name);  // null when not linked (rwc): looked up at run time
      r.type = h.result;
      if (r.kids.size() != h.params.size()) {
        error_with_note(e.loc,
                        fmt::format("helper '{}' takes {} argument(s), got {}", e.name,
                                    h.params.size(), r.kids.size()),
                        h.loc, "declared here");
        return r;
      }
      for (size_t i = 0; i < r.kids.size(); ++i) {
        if (!e.arg_names[i].empty())
          diags_.error(r.kids[i].loc,
                       fmt::format("helper '{}' takes positional arguments only", e.name));
        if (!param_accepts(h.params[i], r.kids[i].type))
          error_with_note(r.kids[i].loc,
                          fmt::format("argument {} ('{}') of helper '{}' is {}, got {}", i + 1,
                                      h.param_names[i], e.name, type_name(h.params[i]),
                                      type_name(r.kids[i].type)),
                          h.loc, "declared here");
      }
      return r;
    }
    if (find_helper(e.name)) {
      diags_.error(e.loc, fmt::format("helper '{}' is not declared; include the prelude that "
                                      "declares it (rules/prelude.rw) or declare it with "
                                      "`extern fn {}(...) -> type`",
                                      e.name, e.name));
      return r;
    }
    diags_.error(e.loc, fmt::format("unknown function or helper '{}' (helpers are declared with "
                                    "`extern fn`, see rules/prelude.rw)",
                                    e.name));
    return r;
  }

  RExpr binary_expr(const Expr& e, RuleCtx& rc) {
    RExpr r;
    r.loc = e.loc;
    r.kids.push_back(expr(*e.kids[0], rc));
    r.kids.push_back(expr(*e.kids[1], rc));
    const Type a = r.kids[0].type, b = r.kids[1].type;
    if (e.op == "&&" || e.op == "||") {
      r.k = e.op == "&&" ? RExpr::K::And : RExpr::K::Or;
      r.type = Type::Bool;
      for (const RExpr& k : r.kids)
        if (!guard_type_ok(k.type))
          diags_.error(k.loc, fmt::format("'{}' needs bools, got {}", e.op, type_name(k.type)));
      return r;
    }
    r.k = RExpr::K::Binary;
    r.bop = *binop_from(e.op);
    const bool eq = r.bop == BinOp::Eq || r.bop == BinOp::Ne;
    if (r.bop == BinOp::In || r.bop == BinOp::NotIn ||
        (!eq && (a == Type::Tuple || b == Type::Tuple)))
      return tuple_binary(e, r);
    const bool cmp =
        r.bop == BinOp::Lt || r.bop == BinOp::Le || r.bop == BinOp::Gt || r.bop == BinOp::Ge;
    if (r.bop == BinOp::Eq || r.bop == BinOp::Ne) {
      auto number = [](Type t) { return t == Type::Int || t == Type::Float || t == Type::Bool; };
      if ((a == Type::UOp && number(b)) || (b == Type::UOp && number(a))) {
        diags_.error(e.loc, fmt::format("'{}' compares a UOp with a number (always unequal); "
                                        "compare x.arg, or match a literal in the pattern",
                                        e.op));
      }
      r.type = Type::Bool;
      return r;
    }
    auto numeric = [](Type t) {
      return t == Type::Int || t == Type::Float || t == Type::Bool || t == Type::Any;
    };
    if (cmp && (a == Type::UOp || b == Type::UOp)) return uop_compare(e, r);
    if (cmp) {
      if (!numeric(a) || !numeric(b)) {
        diags_.error(e.loc, fmt::format("'{}' compares numbers, got {} and {}", e.op, type_name(a),
                                        type_name(b)));
      }
      r.type = Type::Bool;
      return r;
    }
    if (a == Type::UOp || b == Type::UOp) {
      if ((a != Type::UOp && !numeric(a)) || (b != Type::UOp && !numeric(b))) {
        diags_.error(e.loc, fmt::format("'{}' needs UOps or numbers, got {} and {}", e.op,
                                        type_name(a), type_name(b)));
      } else {
        r.dclass = check_alu(uop_binop(r.bop).value_or(Op::Noop), fmt::format("'{}'", e.op), e.loc,
                             {&r.kids[0], &r.kids[1]});
      }
      r.type = Type::UOp;
      return r;
    }
    if (!numeric(a) || !numeric(b)) {
      diags_.error(e.loc, fmt::format("'{}' needs numbers or UOps, got {} and {}", e.op,
                                      type_name(a), type_name(b)));
    }
    r.type = (a == Type::Any || b == Type::Any)                              ? Type::Any
             : (a == Type::Float || b == Type::Float || r.bop == BinOp::Div) ? Type::Float
             : (a == Type::Bool && b == Type::Bool &&
                (r.bop == BinOp::And || r.bop == BinOp::Or || r.bop == BinOp::Xor))
                 ? Type::Bool
                 : Type::Int;
    return r;
  }

  // ---- expression features: comprehensions, slices, tuple operators, UOp comparisons
  // `x < y` with a UOp operand builds CmpLt (`<=`, `>`, `>=` as .le/.gt/.ge build them): the
  // operands are one dtype class, and the result is a bool UOp.
  RExpr uop_compare(const Expr& e, RExpr r) {
    const Type a = r.kids[0].type, b = r.kids[1].type;
    auto operand = [](Type t) {
      return t == Type::UOp || t == Type::Int || t == Type::Float || t == Type::Bool ||
             t == Type::Any;
    };
    if (!operand(a) || !operand(b)) {
      diags_.error(e.loc, fmt::format("'{}' needs UOps or numbers, got {} and {}", e.op,
                                      type_name(a), type_name(b)));
    } else {
      r.dclass = check_alu(Op::CmpLt, fmt::format("'{}'", e.op), e.loc, {&r.kids[0], &r.kids[1]});
    }
    r.type = Type::UOp;
    return r;
  }

  // `x in t`, `t + u` (concatenation), `t * n` and `n * t` (repetition).
  RExpr tuple_binary(const Expr& e, RExpr r) {
    const Type a = r.kids[0].type, b = r.kids[1].type;
    auto is = [](Type t, std::initializer_list<Type> ok) {
      return t == Type::Any || std::find(ok.begin(), ok.end(), t) != ok.end();
    };
    const std::string types = fmt::format("{} and {}", type_name(a), type_name(b));
    if (r.bop == BinOp::In || r.bop == BinOp::NotIn) {
      r.type = Type::Bool;
      if (!is(b, {Type::Tuple}))
        diags_.error(e.loc,
                     fmt::format("'{}' needs a tuple on the right, got {}", e.op, type_name(b)));
      return r;
    }
    r.type = Type::Tuple;
    if (r.bop == BinOp::Add) {
      if (!is(a, {Type::Tuple}) || !is(b, {Type::Tuple}))
        diags_.error(e.loc, fmt::format("'+' joins two tuples, got {}", types));
    } else if (r.bop == BinOp::Mul) {
      const bool ok =
          a == Type::Tuple ? is(b, {Type::Int, Type::Bool}) : is(a, {Type::Int, Type::Bool});
      if (!ok) diags_.error(e.loc, fmt::format("'*' repeats a tuple by an int, got {}", types));
    } else {
      diags_.error(e.loc, fmt::format("'{}' does not apply to tuples, got {}", e.op, types));
      if (r.bop >= BinOp::Lt && r.bop <= BinOp::Ge) r.type = Type::Bool;  // one error, not two
    }
    return r;
  }

  // `a if c else b`: c is a bool (or an int); the value has the branches' type when they agree
  // (`none` joins a UOp: "no rewrite" in one branch), else any. Only one branch runs.
  RExpr conditional(const Expr& e, RuleCtx& rc) {
    RExpr r;
    r.loc = e.loc;
    r.k = RExpr::K::Cond;
    for (const auto& k : e.kids) r.kids.push_back(expr(*k, rc));
    const RExpr &a = r.kids[0], &c = r.kids[1], &b = r.kids[2];
    if (!guard_type_ok(c.type))
      diags_.error(c.loc, fmt::format("the condition of 'a if c else b' must be a bool, got {}",
                                      type_name(c.type)));
    if (a.type == b.type)
      r.type = a.type;
    else if ((a.type == Type::None && b.type == Type::UOp) ||
             (a.type == Type::UOp && b.type == Type::None))
      r.type = Type::UOp;
    else
      r.type = Type::Any;
    if (a.type == Type::UOp && b.type == Type::UOp && a.dclass == b.dclass) r.dclass = a.dclass;
    return r;
  }

  // t[lo:hi:step]: the bounds are ints or left out (none).
  RExpr slice_expr(const Expr& e, RuleCtx& rc) {
    RExpr r;
    r.loc = e.loc;
    r.k = RExpr::K::Slice;
    r.type = Type::Tuple;
    for (const auto& k : e.kids) r.kids.push_back(expr(*k, rc));
    const Type t = r.kids[0].type;
    if (t != Type::Tuple && t != Type::Any)
      diags_.error(e.loc, fmt::format("cannot slice a {}", type_name(t)));
    for (size_t i = 1; i < r.kids.size(); ++i) {
      const Type b = r.kids[i].type;
      if (b != Type::Int && b != Type::Bool && b != Type::None && b != Type::Any)
        diags_.error(r.kids[i].loc, fmt::format("slice bounds must be ints, got {}", type_name(b)));
    }
    return r;
  }

  // [elem for target in iterable if cond ...]: clauses bind left to right, the element last;
  // the targets' names are visible only inside the comprehension.
  RExpr comprehension(const Expr& e, RuleCtx& rc) {
    RExpr r;
    r.loc = e.loc;
    r.k = RExpr::K::Comp;
    r.type = Type::Tuple;
    r.generator = e.generator;
    r.kids.emplace_back();  // the element, resolved once every target is bound
    if (e.comp[0].is_if) diags_.error(e.comp[0].loc, "a comprehension starts with 'for', not 'if'");
    std::vector<int> scope;
    for (size_t i = 0; i < e.comp.size(); ++i) {
      const CompClause& c = e.comp[i];
      RExpr x = expr(*e.kids[i + 1], rc);
      RCompClause clause;
      clause.is_if = c.is_if;
      if (c.is_if) {
        if (!guard_type_ok(x.type))
          diags_.error(x.loc, fmt::format("a comprehension filter must be a bool, got {}",
                                          type_name(x.type)));
      } else {
        if (x.type != Type::Tuple && x.type != Type::Any)
          diags_.error(x.loc, fmt::format("cannot iterate over a {}", type_name(x.type)));
        clause.target = bind_target(c.target, rc, scope, item_type(x, rc));
      }
      r.kids.push_back(std::move(x));
      r.comp.push_back(std::move(clause));
    }
    r.kids[0] = expr(*e.kids[0], rc);
    for (int s : scope) rc.slots[static_cast<size_t>(s)].hidden = true;
    return r;
  }
  // `item`: the type of what the target receives (the iterable's items), when known.
  RTarget bind_target(const Target& t, RuleCtx& rc, std::vector<int>& scope, Type item) {
    RTarget out;
    if (t.kind == Target::Kind::Name) {
      if (rc.slot_of(t.name) >= 0)
        diags_.error(t.loc, fmt::format("'{}' is already bound", t.name));
      out.slot = rc.bind(t.name, item, false, t.loc);
      scope.push_back(out.slot);
    } else if (t.kind == Target::Kind::Tuple) {
      out.is_tuple = true;
      for (const Target& sub : t.items) out.items.push_back(bind_target(sub, rc, scope, Type::Any));
    }
    return out;
  }

  // The type every item of a tuple expression has, when the checker can tell: `x.src`,
  // `x.terms()`, `x.factors()`, `x.split(op)`, `x.spine(op)` and `x.chain_terms(op)` hold UOps,
  // `range(...)` and `argsort(...)` ints, a comprehension its element's type, a tuple literal its
  // items' common type; slices, concatenation, repetition, lets and defs keep it.
  Type item_type(const RExpr& r, const RuleCtx& rc) const {
    switch (r.k) {
      case RExpr::K::Member:
        return (r.name == "src" || r.name == "ranges") && r.kids[0].type == Type::UOp ? Type::UOp
                                                                                      : Type::Any;
      case RExpr::K::Method:  // the terms of a sum, the factors of a product, a spine
        return (r.name == "terms" || r.name == "factors" || r.name == "split" ||
                r.name == "spine" || r.name == "chain_terms" || r.name == "toposort") &&
                       r.kids[0].type == Type::UOp
                   ? Type::UOp
                   : Type::Any;
      case RExpr::K::Builtin:
        if (r.name == "range" || r.name == "argsort") return Type::Int;
        if (r.name == "tuple" && r.kids.size() == 1) return item_type(r.kids[0], rc);
        return Type::Any;
      case RExpr::K::Comp:
        return r.kids[0].type;
      case RExpr::K::Tuple: {
        if (r.kids.empty()) return Type::Any;
        for (const RExpr& k : r.kids)
          if (k.type != r.kids[0].type) return Type::Any;
        return r.kids[0].type;
      }
      case RExpr::K::Slice:
        return item_type(r.kids[0], rc);
      case RExpr::K::Binary: {
        if (r.type != Type::Tuple) return Type::Any;
        if (r.bop == BinOp::Mul)
          return item_type(r.kids[r.kids[0].type == Type::Tuple ? 0 : 1], rc);
        const Type a = item_type(r.kids[0], rc);
        return a == item_type(r.kids[1], rc) ? a : Type::Any;
      }
      case RExpr::K::Slot:
        return rc.slots[static_cast<size_t>(r.slot)].item;
      case RExpr::K::DefCall:
        return r.def ? r.def->item : Type::Any;
      case RExpr::K::Cond: {
        const Type a = item_type(r.kids[0], rc);
        return a == item_type(r.kids[2], rc) ? a : Type::Any;
      }
      default:
        return Type::Any;
    }
  }

  // sum, prod, max/min of one tuple and fold combine a tuple's items: their value has the items'
  // type when the checker knows it (`sum((1, 2))` is an int, so no rule result), and fold builds
  // ops, so a tuple known to hold no UOps is an error.
  void fold_like_type(RExpr& r, const RuleCtx& rc) {
    const std::string& n = r.name;
    const size_t nargs = r.kids.size();
    const bool one_tuple = (n == "max" || n == "min") && nargs == 1;
    if (n == "fold" && nargs == 2 && r.kids[1].type == Type::Tuple) {
      const Type item = item_type(r.kids[1], rc);
      if (item != Type::Any && item != Type::UOp)
        diags_.error(r.kids[1].loc,
                     fmt::format("'fold' builds ops from a tuple of UOps, got a tuple of {}",
                                 type_name(item)));
      return;
    }
    if (!(n == "sum" || n == "prod" || one_tuple) || nargs == 0) return;
    if (r.kids[0].type != Type::Tuple) return;
    Type item = item_type(r.kids[0], rc);
    if (item == Type::Bool && !one_tuple) item = Type::Int;  // True + True is 2
    if (item != Type::Int && item != Type::Float && item != Type::UOp && item != Type::Bool) return;
    if (n == "sum" && nargs == 2) {  // sum(t, start): the start joins the items
      const Type start = r.kids[1].type;
      if (item == Type::UOp || start == Type::UOp)
        item = Type::UOp;
      else if (start == Type::Float)
        item = Type::Float;
      else if (start != Type::Int && start != Type::Bool)
        return;
    }
    r.type = item;
  }

  // The rule set `rewritten_fully(u, "set")` names: a string literal naming a loaded set.
  void check_named_set(const std::string& builtin, const RExpr& set) {
    if (set.k != RExpr::K::Const || set.value.kind() != Value::Kind::String) {
      diags_.error(set.loc, fmt::format("'{}' names its rule set by a string literal, got {}",
                                        builtin, type_name(set.type)));
      return;
    }
    if (!set_decls_.contains(set.value.as_string()))
      diags_.error(set.loc, fmt::format("'{}': no rule set named '{}' in the loaded files", builtin,
                                        set.value.as_string()));
  }

  // Argument counts and kinds of the tuple builtins.
  void check_builtin_args(const RExpr& r, const Loc& at) {
    static const std::map<std::string_view, std::pair<size_t, size_t>> kArity = {
        {"zip", {1, SIZE_MAX}},     {"enumerate", {1, 2}}, {"range", {1, 3}}, {"sum", {1, 2}},
        {"prod", {1, 1}},           {"all", {1, 1}},       {"any", {1, 1}},   {"argsort", {1, 1}},
        {"tuple", {1, 1}},          {"len", {1, 1}},       {"fold", {2, 2}},  {"rewritten", {1, 1}},
        {"rewritten_fully", {1, 2}}};
    const size_t n = r.kids.size();
    if ((r.name == "max" || r.name == "min") && n == 1) {
      if (r.kids[0].type != Type::Tuple && r.kids[0].type != Type::Any)
        diags_.error(at, fmt::format("'{}' of one argument needs a tuple, got {}", r.name,
                                     type_name(r.kids[0].type)));
      return;
    }
    auto it = kArity.find(r.name);
    if (it == kArity.end()) return;
    const auto [lo, hi] = it->second;
    if (n < lo || n > hi) {
      diags_.error(at, fmt::format("'{}' takes {} argument(s), got {}", r.name,
                                   hi == SIZE_MAX ? fmt::format("at least {}", lo)
                                   : lo == hi     ? std::to_string(lo)
                                                  : fmt::format("{} to {}", lo, hi),
                                   n));
      return;
    }
    if (is_context_builtin(r.name)) {  // rewritten(u), rewritten_fully(u), ...(u, "set")
      const Type t = r.kids[0].type;
      if (t != Type::UOp && t != Type::Any)
        diags_.error(r.kids[0].loc, fmt::format("'{}' needs a UOp, got {}", r.name, type_name(t)));
      if (n == 2) check_named_set(r.name, r.kids[1]);
      return;
    }
    for (size_t i = 0; i < n; ++i) {
      const Type t = r.kids[i].type;
      if (r.name == "fold" && i == 0) {  // fold(Op, t): an op first
        if (t != Type::Op && t != Type::Any)
          diags_.error(r.kids[i].loc,
                       fmt::format("'fold' needs an op first, got {}", type_name(t)));
        continue;
      }
      const bool want_tuple =
          r.name == "zip" || (i == 0 && r.name != "range") || (r.name == "fold" && i == 1);
      if (want_tuple && t != Type::Tuple && t != Type::Any) {
        diags_.error(r.kids[i].loc,
                     fmt::format("'{}' needs a tuple, got {}", r.name, type_name(t)));
      } else if (!want_tuple && (r.name == "range" || r.name == "enumerate") && t != Type::Int &&
                 t != Type::Bool && t != Type::Any) {
        diags_.error(r.kids[i].loc,
                     fmt::format("'{}' needs int arguments, got {}", r.name, type_name(t)));
      }
    }
  }

  // ---- def functions
  // `def f(params) = body` lives in one namespace over all loaded files. Bodies are resolved
  // once, callees first (Kahn's order over the call graph); a def on a cycle is refused.
  void declare_def(const Decl& d) {
    if (auto it = def_decls_.find(d.name); it != def_decls_.end()) {
      error_with_note(d.loc, fmt::format("def '{}' is defined twice", d.name), it->second->loc,
                      "first defined here");
      return;
    }
    const bool op = op_from_name(d.name) && std::isupper(static_cast<unsigned char>(d.name[0]));
    if (op || is_builtin(d.name) || find_helper(d.name) || out_.helpers.contains(d.name)) {
      diags_.error(d.loc, fmt::format("def '{}' has the name of {}", d.name,
                                      op                   ? "an op"
                                      : is_builtin(d.name) ? "a builtin function"
                                                           : "a helper"));
      return;
    }
    for (size_t i = 0; i < d.names.size(); ++i) {
      for (size_t k = 0; k < i; ++k) {
        if (d.names[k].first == d.names[i].first) {
          diags_.error(d.names[i].second,
                       fmt::format("parameter '{}' is given twice", d.names[i].first));
        }
      }
    }
    def_decls_.emplace(d.name, &d);
  }

  struct CallSite {
    std::string callee;
    Loc loc;
    int level;  // of the call node, the body's root being 1
  };
  static void calls_in(const Expr& e, int level, std::vector<CallSite>& out) {
    if (e.kind == ExprKind::Call) out.push_back({e.name, e.loc, level});
    for (const auto& k : e.kids) calls_in(*k, level + 1, out);  // as deep as the tree depth limit
  }

  void resolve_defs() {
    std::map<std::string, std::vector<CallSite>> callees;
    std::map<std::string, std::vector<std::string>> callers;
    std::map<std::string, size_t> pending;  // distinct callees not resolved yet
    for (const auto& [name, d] : def_decls_) {
      std::vector<CallSite> calls;
      calls_in(*d->body, 1, calls);
      std::set<std::string> distinct;
      for (CallSite& c : calls) {
        if (!def_decls_.count(c.callee)) continue;
        if (distinct.insert(c.callee).second) callers[c.callee].push_back(name);
        callees[name].push_back(std::move(c));
      }
      pending[name] = distinct.size();
    }
    std::vector<std::string> ready;
    for (const auto& [name, n] : pending)
      if (n == 0) ready.push_back(name);
    std::map<std::string, int> depth;
    for (size_t i = 0; i < ready.size(); ++i) {
      const std::string name = ready[i];
      int d = def_decls_[name]->body->depth;
      bool callee_over = false;
      for (const CallSite& c : callees[name]) {
        d = std::max(d, c.level + depth[c.callee]);
        callee_over |= depth[c.callee] > kMaxDefDepth;
      }
      depth[name] = std::min(d, 2 * kMaxDefDepth);  // past the limit, how far does not matter
      if (d > kMaxDefDepth && !callee_over) {  // reported once, where the limit is first passed
        diags_.error(def_decls_[name]->loc,
                     fmt::format("def '{}' nests {} levels deep through the defs it calls (more "
                                 "than {}: the def depth limit)",
                                 name, d, kMaxDefDepth));
      }
      resolve_def(*def_decls_[name]);
      for (const std::string& caller : callers[name])
        if (--pending[caller] == 0) ready.push_back(caller);
    }
    // What is left calls, directly or not, a def on a cycle: follow unresolved callees from it
    // until a def repeats, and report that cycle once at the call that closes it.
    std::set<std::string> reported;
    for (const auto& [start, n] : pending) {
      if (n == 0 || reported.count(start)) continue;
      std::vector<std::string> path{start};
      std::map<std::string, size_t> at{{start, 0}};
      for (;;) {
        const CallSite* next = nullptr;
        for (const CallSite& c : callees[path.back()])
          if (pending[c.callee] > 0) next = next ? next : &c;
        if (!next) break;  // unreachable: a pending def has a pending callee
        if (auto it = at.find(next->callee); it != at.end()) {
          if (!reported.count(next->callee)) {
            std::string cycle;  // a long cycle shows its first and last defs
            const size_t len = path.size() - it->second;
            for (size_t k = it->second; k < path.size(); ++k) {
              const size_t pos = k - it->second;
              if (len > 8 && pos == 4) cycle += fmt::format("... ({} more) -> ", len - 6);
              if (len <= 8 || pos < 4 || pos >= len - 2) cycle += path[k] + " -> ";
            }
            diags_.error(next->loc, fmt::format("def '{}' is recursive: {}{} (defs cannot recurse)",
                                                next->callee, cycle, next->callee));
          }
          break;
        }
        if (reported.count(next->callee)) break;  // leads into a cycle reported already
        at.emplace(next->callee, path.size());
        path.push_back(next->callee);
      }
      reported.insert(path.begin(), path.end());
    }
  }

  void resolve_def(const Decl& d) {
    auto out = std::make_unique<ResolvedDef>();
    out->name = d.name;
    out->loc = d.loc;
    out->nparams = static_cast<int>(d.names.size());
    RuleCtx rc;
    rc.in_def = true;
    for (size_t i = 0; i < d.names.size(); ++i) {
      const auto& [type, at] = d.param_types[i];
      out->param_types.push_back(type.empty() ? Type::Any : type_of(type, at));
      rc.slots.push_back(
          {d.names[i].first, out->param_types.back(), false, 0, 0, d.names[i].second});
    }
    out->body = expr(*d.body, rc);
    out->item = item_type(out->body, rc);
    for (const SlotInfo& s : rc.slots) out->slot_names.push_back(s.name);
    defs_[d.name] = out.get();
    out_.defs.push_back(std::move(out));
  }

  RExpr def_call(const Expr& e, RExpr r) {
    const Decl& d = *def_decls_.at(e.name);
    r.k = RExpr::K::DefCall;
    r.type = Type::Any;
    if (r.kids.size() != d.names.size()) {
      diags_.error(e.loc, fmt::format("def '{}' takes {} argument(s), got {}", e.name,
                                      d.names.size(), r.kids.size()));
    }
    for (size_t i = 0; i < r.arg_names.size(); ++i) {
      if (!r.arg_names[i].empty()) {
        diags_.error(r.kids[i].loc,
                     fmt::format("def '{}' takes positional arguments only", e.name));
        break;
      }
    }
    if (auto it = defs_.find(e.name); it != defs_.end()) {  // absent when on a cycle
      // typed parameters: an argument of a known type is checked here, any other at run time
      const std::vector<Type>& want = it->second->param_types;
      for (size_t i = 0; i < r.kids.size() && i < want.size(); ++i) {
        if (!param_accepts(want[i], r.kids[i].type))
          error_with_note(
              r.kids[i].loc,
              fmt::format("argument {} ('{}') of def '{}' is {}, got {}", i + 1, d.names[i].first,
                          e.name, type_name(want[i]), type_name(r.kids[i].type)),
              d.loc, "defined here");
      }
      r.def = it->second;
      r.type = it->second->body.type;
      r.dclass = it->second->body.dclass;
    }
    return r;
  }

  // ---- static analysis: rules that can never fire, duplicates
  static bool arg_subsumes(const ArgMatch& a, const ArgMatch& b) {
    if (a.kind == ArgMatch::Kind::Any || a.kind == ArgMatch::Kind::Bind) return true;
    return a == b;
  }
  static bool subsumes(const MatchNode& a, const MatchNode& b) {
    if (!a.any_op && (b.any_op || !((b.ops & a.ops) == b.ops))) return false;
    if (!b.dtype.subset_of(a.dtype)) return false;
    if (!arg_subsumes(a.arg, b.arg)) return false;
    using S = MatchNode::Sources;
    switch (a.sources) {
      case S::Any:
        return true;
      case S::Exact:
        if (b.sources != S::Exact || b.srcs.size() != a.srcs.size()) return false;
        for (size_t i = 0; i < a.srcs.size(); ++i)
          if (!subsumes(a.srcs[i], b.srcs[i])) return false;
        return true;
      case S::Prefix:
        if ((b.sources != S::Exact && b.sources != S::Prefix) || b.srcs.size() < a.srcs.size())
          return false;
        for (size_t i = 0; i < a.srcs.size(); ++i)
          if (!subsumes(a.srcs[i], b.srcs[i])) return false;
        return true;
      case S::Repeat:
        if (b.sources == S::Repeat) return subsumes(a.srcs[0], b.srcs[0]);
        if (b.sources != S::Exact) return false;
        for (const MatchNode& s : b.srcs)
          if (!subsumes(a.srcs[0], s)) return false;
        return true;
    }
    return false;
  }
  // A rule that always produces a rewrite when its pattern matches.
  static bool unconditional(const ResolvedRule& r) {
    return r.steps.empty() && !r.has_identity && r.result.type == Type::UOp &&
           (r.result.k == RExpr::K::Construct || r.result.k == RExpr::K::Const ||
            (r.result.k == RExpr::K::Binary) ||
            (r.result.k == RExpr::K::Builtin && r.result.name == "const_like"));
  }

  void analyze(const ResolvedSet& set) {
    // Only rules written in this set are reported (composed sets were analyzed on their own).
    std::map<int, std::vector<const ResolvedRule*>> by_rule;
    for (const ResolvedRule& r : set.rules) by_rule[r.rule_index].push_back(&r);
    // Earlier rules that always rewrite, by root op (kNumOps: rules of any op). Each variant is
    // compared with at most kMaxShadowChecks of them, which keeps huge sets near linear.
    constexpr size_t kMaxShadowChecks = 1000;
    std::vector<std::vector<const ResolvedRule*>> earlier(static_cast<size_t>(kNumOps) + 1);
    std::map<std::string, const ResolvedRule*> texts;
    for (const auto& [idx, variants] : by_rule) {
      const ResolvedRule& first = *variants[0];
      const bool own = first.info.name.rfind(set.name + "#", 0) == 0;
      // For-loop bindings are part of a rule's identity: `op(x)` for Add and for Mul differ.
      const size_t bracket = first.info.name.find('[');
      std::string norm = bracket == std::string::npos ? "" : first.info.name.substr(bracket);
      for (char ch : first.info.source)
        if (!std::isspace(static_cast<unsigned char>(ch))) norm += ch;
      if (own && !norm.empty()) {
        if (auto it = texts.find(norm); it != texts.end() && it->second->loc.file) {
          diags_.warning(first.loc, "duplicate rule", {{it->second->loc, "the same rule is here"}});
        } else {
          texts.emplace(norm, &first);
        }
      }
      const ResolvedRule* shadow = nullptr;
      bool all_shadowed = own;
      for (const ResolvedRule* v : variants) {
        if (!all_shadowed) break;
        // The first earlier rule that covers v (pointers into set.rules are in rule order).
        const ResolvedRule* by = nullptr;
        auto scan = [&](const std::vector<const ResolvedRule*>& cands) {
          for (size_t i = 0; i < cands.size() && i < kMaxShadowChecks; ++i) {
            if (subsumes(cands[i]->root, v->root)) {
              if (!by || cands[i] < by) by = cands[i];
              return;
            }
          }
        };
        scan(earlier[static_cast<size_t>(kNumOps)]);
        if (!v->root.any_op) {
          std::optional<Op> first_op;
          v->root.ops.for_each([&](Op o) {
            if (!first_op) first_op = o;
          });
          if (first_op) scan(earlier[static_cast<size_t>(*first_op)]);
        }
        if (!by)
          all_shadowed = false;
        else
          shadow = by;
      }
      if (all_shadowed && shadow && !(texts.count(norm) && texts[norm] != &first)) {
        diags_.warning(first.loc, "rule can never fire: an earlier rule always matches first",
                       {{shadow->loc, "this rule matches first"}});
      }
      for (const ResolvedRule* v : variants) {
        if (!unconditional(*v)) continue;
        if (v->root.any_op)
          earlier[static_cast<size_t>(kNumOps)].push_back(v);
        else
          v->root.ops.for_each([&](Op o) { earlier[static_cast<size_t>(o)].push_back(v); });
      }
    }
  }

  ResolvedProgram& out_;
  Diagnostics& diags_;
  std::map<std::string, std::pair<OpSet, Loc>> groups_;
  std::map<std::string, const Decl*> set_decls_;
  std::map<std::string, const Decl*> def_decls_;
  std::map<std::string, const ResolvedDef*> defs_;  // resolved, by name
  std::map<std::string, int> state_;  // 1 while its dependencies resolve, 2 when resolved
  std::map<std::string, Expansion> expansions_;
  std::unordered_set<int> included_;  // of the set being built
  std::map<std::string, int> ids_;
  std::map<std::string, const Member*> rule_names_;  // "<set>.<name>" -> the named rule
  std::set<std::string> spliced_;  // sets `use`d or composed into the set being built
  size_t expanded_ = 0;            // rules expanded so far, over every set
  size_t repetitions_ = 0;         // `for` bodies resolved so far, over every set
  bool over_limit_ = false;
};

}  // namespace

std::optional<Type> helper_type_from_name(std::string_view name) {
  static const std::pair<std::string_view, Type> kTypes[] = {
      {"any", Type::Any},     {"none", Type::None},     {"bool", Type::Bool},
      {"int", Type::Int},     {"float", Type::Float},   {"string", Type::String},
      {"uop", Type::UOp},     {"dtype", Type::DType},   {"op", Type::Op},
      {"tuple", Type::Tuple}, {"status", Type::Status}, {"record", Type::Record}};
  for (const auto& [n, t] : kTypes)
    if (n == name) return t;
  return std::nullopt;
}

bool param_accepts(Type param, Type actual) {
  if (param == Type::Any || actual == Type::Any || param == actual) return true;
  if (param == Type::Float) return actual == Type::Int || actual == Type::Bool;
  if (param == Type::Int) return actual == Type::Bool;
  return false;
}

std::optional<std::string> helper_mismatch(const HelperDecl& decl, const Helper& registered) {
  const int n = static_cast<int>(decl.params.size());
  if (n < registered.min_args || n > registered.max_args) {
    return fmt::format("declared with {} argument(s), registered with {}", n,
                       registered.min_args == registered.max_args
                           ? std::to_string(registered.min_args)
                           : fmt::format("{} to {}", registered.min_args, registered.max_args));
  }
  if (auto why = helper_signature_mismatch(registered, decl.params, decl.result)) return why;
  return std::nullopt;
}

std::unique_ptr<ResolvedProgram> resolve(Program program, Diagnostics& diags) {
  auto out = std::make_unique<ResolvedProgram>();
  out->program = std::move(program);
  const int before = diags.error_count();
  Resolver(*out, diags).run();
  if (diags.error_count() > before) return nullptr;
  return out;
}

std::unique_ptr<ResolvedProgram> load_rules(const std::string& path, Diagnostics& diags) {
  Program p;
  if (!load_program(path, p, diags)) return nullptr;
  return resolve(std::move(p), diags);
}

std::unique_ptr<ResolvedProgram> load_rules_text(const std::string& path, std::string text,
                                                 Diagnostics& diags) {
  Program p;
  if (!load_program_text(path, std::move(text), p, diags)) return nullptr;
  return resolve(std::move(p), diags);
}

}  // namespace tinyrw::rw
