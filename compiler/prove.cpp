#include "compiler/prove.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "compiler/prove_index.h"
#include "compiler/prove_model.h"
#include "dsl/interp.h"
#include "ir/alu.h"
#include "ir/graph.h"
#include "ir/render.h"

namespace tinyrw::rw {

using namespace prove;

namespace {

// The dtypes a capture is tried at: bool, sized ints of both signs and both ends of the widths,
// and index (exact); with --every-width also int16, uint16 and uint32 (set once, before the
// proofs start). A rule is proven at each that its pattern admits.
bool g_every_width = false;
const std::vector<DType>& model_dtypes() {
  static const std::vector<DType> some{dtypes::bool_, dtypes::int8,   dtypes::uint8, dtypes::int32,
                                       dtypes::int64, dtypes::uint64, dtypes::index};
  static const std::vector<DType> every{
      dtypes::bool_, dtypes::int8,   dtypes::uint8, dtypes::int16,  dtypes::uint16,
      dtypes::int32, dtypes::uint32, dtypes::int64, dtypes::uint64, dtypes::index};
  return g_every_width ? every : some;
}
using Domain = uint32_t;  // a set of model_dtypes() by position
constexpr Domain kBool = 1u;
Domain all_dtypes() { return (1u << model_dtypes().size()) - 1; }
Domain int_dtypes() { return all_dtypes() & ~kBool; }
Domain domain_of(const DTypeFilter& f) {
  Domain out = 0;
  for (size_t i = 0; i < model_dtypes().size(); ++i)
    if (f.accepts(model_dtypes()[i])) out |= 1u << i;
  return out;
}

// The ALU ops the IR types at no integer or bool dtype (Sqrt, FDiv, ...): outside the model.
// Found by building UOps, so first asked on the main thread, before the proofs' threads start
// (the UOp table is not shared between threads).
const OpSet& float_only_ops() {
  static const OpSet ops = [] {
    OpSet out;
    for (int o = 0; o < kNumOps; ++o) {
      const Op op = static_cast<Op>(o);
      if (!op_info(op).is_alu()) continue;
      const int n = op_info(op).min_src;
      bool typed = false;
      for (DType d : {dtypes::int32, dtypes::bool_}) {
        std::vector<UOp> src(static_cast<size_t>(n), UOp::constant(d, Arg::integer(0)));
        if (op == Op::Where) src[0] = UOp::cbool(false);
        try {
          alu_result_dtype(op, src);
          typed = true;
        } catch (const GraphError&) {
        }
      }
      if (!typed) out = out | OpSet{op};
    }
    return out;
  }();
  return ops;
}
bool float_only(Op op) { return float_only_ops().contains(op); }
bool leaf_op(Op op) { return op == Op::DefineVar || op == Op::Range || op == Op::Special; }

// ---- pattern instantiations: each pattern node with one op, its sources and a dtype class

struct PNode {
  const MatchNode* m = nullptr;  // null: a source the pattern leaves open
  Op op = Op::Noop;              // Noop: any node (a leaf of the model)
  std::vector<int> kids;
  int cls = -1;
  // an expanded leaf (a rule that looks into a capture, as gate(l) does): Noop is then a node
  // that is neither a WHERE nor a constant; Const with invalid set is the index constant Invalid
  bool other = false, invalid = false;
};
struct Shape {
  std::vector<PNode> nodes;  // nodes[0] is the root
};

constexpr size_t kMaxShapes = 256;     // op choices of a pattern
constexpr size_t kMaxDtypings = 1024;  // dtype choices of one (three independent classes: 343)

// Every choice of ops for the pattern under m (sources the pattern leaves open become leaves). With
// `expand`, each capture the pattern leaves open is, in turn, a WHERE of leaves, a constant, the
// index constant Invalid, or any other node. Past kMaxShapes, `truncated` is set.
struct ShapeOpts {
  bool expand = false;
  bool truncated = false;
  std::string skipped;
};
std::vector<Shape> shapes_of(const MatchNode& m, ShapeOpts& so) {
  std::vector<Shape> out;
  auto with_kids = [&](Op op, const std::vector<const MatchNode*>& kids) {
    std::vector<Shape> acc(1);
    acc[0].nodes.push_back(PNode{&m, op, {}, -1});
    for (const MatchNode* k : kids) {
      std::vector<Shape> subs;
      if (k) {
        subs = shapes_of(*k, so);
      } else {
        subs.resize(1);
        subs[0].nodes.push_back(PNode{});
      }
      std::vector<Shape> next;
      for (const Shape& a : acc)
        for (const Shape& s : subs) {
          if (next.size() >= kMaxShapes) {
            so.truncated = true;
            break;
          }
          Shape c = a;
          const int base = static_cast<int>(c.nodes.size());
          for (PNode n : s.nodes) {
            for (int& kk : n.kids) kk += base;
            c.nodes.push_back(n);
          }
          c.nodes[0].kids.push_back(base);
          next.push_back(std::move(c));
        }
      acc = std::move(next);
    }
    for (Shape& s : acc) {
      if (out.size() >= kMaxShapes) {
        so.truncated = true;
        break;
      }
      out.push_back(std::move(s));
    }
  };
  using S = MatchNode::Sources;
  if (m.any_op) {
    if (m.sources == S::Exact || m.sources == S::Prefix || m.sources == S::Repeat)
      throw Unsupported("a pattern of any op with sources");
    with_kids(Op::Noop, {});
    if (so.expand) {
      out.back().nodes[0].other = true;
      with_kids(Op::Const, {});
      with_kids(Op::Const, {});
      out.back().nodes[0].invalid = true;
      with_kids(Op::Where, {nullptr, nullptr, nullptr});
    }
    return out;
  }
  for (int o = 0; o < kNumOps; ++o) {
    const Op op = static_cast<Op>(o);
    if (!m.ops.contains(op)) continue;
    const OpInfo& info = op_info(op);
    if (op == Op::Const || leaf_op(op)) {
      if (m.sources == S::Exact && !m.srcs.empty()) continue;
      with_kids(op, {});
      // a constant pattern matches the index constant Invalid too (its arg is none)
      if (op == Op::Const && m.arg.kind != ArgMatch::Kind::Literal && !out.empty()) {
        with_kids(op, {});
        out.back().nodes[0].invalid = true;
      }
      continue;
    }
    if (!info.is_alu() && op != Op::Cast && op != Op::Bitcast)
      throw Unsupported(fmt::format("{} is not an integer or boolean op", op_name(op)));
    if (info.is_alu() && float_only(op)) {
      so.skipped = "float ops are not modelled";
      continue;
    }
    const size_t arity = static_cast<size_t>(info.min_src);
    std::vector<const MatchNode*> kids(arity, nullptr);
    switch (m.sources) {
      case S::Any:
        break;
      case S::Exact:
        if (m.srcs.size() != arity) continue;
        for (size_t i = 0; i < arity; ++i) kids[i] = &m.srcs[i];
        break;
      case S::Prefix:
        if (m.srcs.size() > arity) continue;
        for (size_t i = 0; i < m.srcs.size(); ++i) kids[i] = &m.srcs[i];
        break;
      case S::Repeat:
        for (size_t i = 0; i < arity; ++i) kids[i] = &m.srcs[0];
        break;
    }
    with_kids(op, kids);
  }
  return out;
}

// Whether the rule looks into a capture its pattern leaves open (`l.src[2]`, `l.arg` of a leaf):
// its leaves are then expanded. Found by a first instantiation, whose model says so.
bool expands(const ResolvedRule& rule);

// dtype classes: nodes that must share a dtype, by union-find; class 0 is bool
struct Classes {
  std::vector<int> parent;
  std::vector<Domain> dom;
  int add(Domain d) {
    parent.push_back(static_cast<int>(parent.size()));
    dom.push_back(d);
    return parent.back();
  }
  int find(int x) {
    return parent[static_cast<size_t>(x)] == x
               ? x
               : parent[static_cast<size_t>(x)] = find(parent[static_cast<size_t>(x)]);
  }
  void unite(int a, int b) {
    a = find(a);
    b = find(b);
    if (a == b) return;
    parent[static_cast<size_t>(b)] = a;
    dom[static_cast<size_t>(a)] &= dom[static_cast<size_t>(b)];
  }
  void restrict(int a, Domain d) { dom[static_cast<size_t>(find(a))] &= d; }
};

// Every assignment of model dtypes to the shape's nodes that types (past kMaxDtypings,
// `truncated` is set).
std::vector<std::vector<DType>> dtypings(Shape& s, bool& truncated) {
  Classes c;
  const int boolean = c.add(kBool);
  for (PNode& n : s.nodes) {
    n.cls = c.add(all_dtypes());
    if (n.m) c.restrict(n.cls, domain_of(n.m->dtype));
  }
  for (PNode& n : s.nodes) {
    auto kid = [&](size_t i) { return s.nodes[static_cast<size_t>(n.kids[i])].cls; };
    const Op op = n.op;
    if (op == Op::Noop) continue;
    if (op == Op::Const) {
      if (n.invalid) c.restrict(n.cls, domain_of(DTypeFilter{DTypeFilter::Kind::Index, {}}));
      if (n.m && n.m->arg.kind == ArgMatch::Kind::Literal) {
        const Arg& lit = n.m->arg.literal;
        if (lit.is_bool())
          c.restrict(n.cls, kBool);
        else if (lit.is_number() && !lit.is_float())
          c.restrict(n.cls, int_dtypes());
        else
          c.restrict(n.cls, 0);
      }
    } else if (leaf_op(op)) {
      c.restrict(n.cls, int_dtypes());
    } else if (op == Op::CmpLt || op == Op::CmpNe || op == Op::CmpEq) {
      c.unite(boolean, n.cls);
      c.unite(kid(0), kid(1));
    } else if (op == Op::Where) {
      c.unite(boolean, kid(0));
      c.unite(n.cls, kid(1));
      c.unite(n.cls, kid(2));
    } else if (op == Op::Cast || op == Op::Bitcast) {
      // the source's dtype is its own
    } else {
      for (size_t i = 0; i < n.kids.size(); ++i) c.unite(n.cls, kid(i));
      if (op == Op::FloorDiv || op == Op::FloorMod || op == Op::CDiv || op == Op::CMod ||
          op == Op::Shl || op == Op::Shr || op == Op::Sub || op == Op::Neg || op == Op::MulAcc ||
          op == Op::Trunc || op == Op::ThreeFry)
        c.restrict(n.cls, int_dtypes());
    }
  }
  std::vector<int> roots;
  for (PNode& n : s.nodes) {
    n.cls = c.find(n.cls);
    if (std::find(roots.begin(), roots.end(), n.cls) == roots.end()) roots.push_back(n.cls);
  }
  std::vector<std::map<int, DType>> acc(1);
  for (int r : roots) {
    std::vector<std::map<int, DType>> next;
    for (const auto& a : acc)
      for (size_t i = 0; i < model_dtypes().size(); ++i)
        if ((c.dom[static_cast<size_t>(r)] >> i) & 1u) {
          if (next.size() >= kMaxDtypings) {
            truncated = true;
            break;
          }
          auto b = a;
          b[r] = model_dtypes()[i];
          next.push_back(std::move(b));
        }
    acc = std::move(next);
  }
  std::vector<std::vector<DType>> out;
  for (const auto& a : acc) {
    std::vector<DType> d;
    for (const PNode& n : s.nodes) d.push_back(a.at(n.cls));
    out.push_back(std::move(d));
  }
  return out;
}

// ---- proving one instantiation

enum class Verdict { Proven, Refuted, Vacuous, Unsupported, Unknown };
struct Outcome {
  Verdict v = Verdict::Vacuous;
  std::string why;                 // Refuted: the counterexample; Unsupported/Unknown: the reason
  bool symbolic_division = false;  // Unknown: the other form of division may decide it
};

std::string dtype_short(DType d) { return std::string(d.name()); }

// An instantiation as text, for --verbose: FloorMod:int64(FloorMod:int64(_:int64, y:int64), y)
std::string shape_text(const ResolvedRule& rule, const Shape& s, const std::vector<DType>& dts,
                       size_t i = 0) {
  const PNode& n = s.nodes[i];
  const std::string name =
      n.m && !n.m->slots.empty() ? rule.slot_names[static_cast<size_t>(n.m->slots[0])] : "";
  std::string head = n.op == Op::Noop ? (name.empty() ? "_" : name)
                     : n.invalid      ? "Invalid"
                                      : std::string(op_name(n.op));
  std::string out = fmt::format("{}:{}", head, dtype_short(dts[i]));
  if (n.kids.empty()) return out;
  std::vector<std::string> kids;
  for (int k : n.kids) kids.push_back(shape_text(rule, s, dts, static_cast<size_t>(k)));
  return fmt::format("{}({})", out, fmt::join(kids, ", "));
}

// Builds the model's nodes of one instantiation, post-order, binding the captures.
SNode* build_shape(Model& m, const Shape& s, const std::vector<DType>& dts, size_t i,
                   std::map<int, SNode*>& bound, Evaluator* ev, const ResolvedRule& rule) {
  const PNode& n = s.nodes[i];
  const DType d = dts[i];
  if (n.m)
    for (int slot : n.m->slots)
      if (auto it = bound.find(slot); it != bound.end()) {
        if (it->second->dtype != d) throw Vacuous{};
        return it->second;
      }
  std::vector<SNode*> src;
  for (int k : n.kids)
    src.push_back(build_shape(m, s, dts, static_cast<size_t>(k), bound, ev, rule));
  SNode* out = nullptr;
  const std::string name =
      n.m && !n.m->slots.empty() ? rule.slot_names[static_cast<size_t>(n.m->slots[0])] : "_";
  if (n.op == Op::Noop || leaf_op(n.op)) {
    out = m.leaf(d, name);
    out->op = n.op;
    out->other = n.other;
  } else if (n.op == Op::Const && n.invalid) {
    out = m.invalid();
    if (n.m && n.m->arg.kind == ArgMatch::Kind::Bind) ev->bind(n.m->arg.slot, SVal{});
  } else if (n.op == Op::Const) {
    z3::expr v = d.is_bool() ? m.bool01(m.fresh_bool(name)) : m.fresh_int(name);
    if (n.m && n.m->arg.kind == ArgMatch::Kind::Literal) {
      const Arg& lit = n.m->arg.literal;
      const i128 x = lit.is_bool() ? (lit.as_bool() ? 1 : 0) : lit.as_int();
      if (!d.is_index() && !d.is_bool() && (x < d.int_min() || x > d.int_max())) throw Vacuous{};
      v = m.int_val(x);
    } else if (n.m && n.m->arg.kind == ArgMatch::Kind::Tuple) {
      throw Unsupported("a tuple arg pattern");
    }
    // a constant's arg: in the dtype's range (index: short of the saturated infinity)
    out = m.constant(d, v);  // its arg's range: prove_instance bounds it
    if (n.m && n.m->arg.kind == ArgMatch::Kind::Bind)
      ev->bind(n.m->arg.slot, d.is_bool() ? sbool(out->val != 0) : sint(out->val));
  } else {
    out = m.alu(n.op, d, std::move(src));
  }
  if (n.m)
    for (int slot : n.m->slots) {
      bound[slot] = out;
      ev->bind(slot, snode(out));
    }
  return out;
}

std::string model_text(const z3::model& mdl, const z3::expr& e) {
  const z3::expr v = mdl.eval(e, true);
  return v.is_numeral() ? v.get_decimal_string(0) : v.to_string();
}

Outcome prove_instance(const ResolvedRule& rule, const Shape& s, const std::vector<DType>& dts,
                       unsigned rlimit, bool quotient_vars) {
  z3::context c;
  Model m(c, quotient_vars);
  Evaluator ev(m, rule);
  try {
    std::map<int, SNode*> bound;
    SNode* root = build_shape(m, s, dts, 0, bound, &ev, rule);
    std::vector<z3::expr> extra;
    // constant args of index short of the saturated infinity; of sized ints within the dtype
    for (const auto& [slot, node] : bound)
      if (node->op == Op::Const && !node->leaf && !node->invalid)
        extra.push_back(node->dtype.is_index() ? !m.is_infinite(node->val)
                                               : m.in_dtype(node->dtype, node->val));
    const z3::expr path = ev.run_steps();
    const SVal r = ev.result();
    if (r.k == SVal::K::None) return {Verdict::Vacuous, ""};
    if (r.k != SVal::K::Node) throw Unsupported("a result that is not a UOp");
    // The query: the model's facts, the path and guards, and a matched node that is defined and
    // differs from a result (or a result that is undefined there).
    std::vector<z3::expr> facts = m.axioms();
    facts.insert(facts.end(), extra.begin(), extra.end());
    facts.push_back(path);
    facts.push_back(ev.result_guards());
    if (r.none) facts.push_back(!*r.none);
    SNode* rhs = r.u;
    const bool dtype_differs = rhs->dtype != root->dtype;
    // two values with bits (bitwise ops) are equal as bit-vectors, which Z3 bit-blasts
    const z3::expr same = rhs->bv && root->bv ? *rhs->bv == *root->bv : rhs->val == root->val;
    // A solver with a deterministic resource limit (Z3's timeout runs a timer thread, which can
    // deadlock in Debian's Z3 4.8.12, and makes results depend on the machine's speed); with
    // `preprocess`, Z3's equation solving runs before its SMT core: bounds and guards such as
    // vmin == vmax become substitutions, which the core alone searches for at length
    auto solver = [&](unsigned limit, bool nonlinear, bool preprocess = true) {
      z3::solver sol = preprocess ? (z3::tactic(c, "simplify") & z3::tactic(c, "propagate-values") &
                                     z3::tactic(c, "solve-eqs") & z3::tactic(c, "smt"))
                                        .mk_solver()
                                  : z3::solver(c);
      z3::params p(c);
      p.set("rlimit", limit);
      // without nonlinear arithmetic a product is an unknown of its own: a weaker theory, so
      // its unsat is a proof, found where the nonlinear search would wander
      if (!nonlinear) p.set("arith.nl", false);
      sol.set(p);
      return sol;
    };
    // Cheap first: the values equal whatever holds (a ring identity of the reps, an identity of
    // bit-vectors); the matched node defined and the result not is then all that is left to ask
    bool values_equal = false;
    if (!dtype_differs) {
      auto differ = [&](const z3::expr& claim) {
        z3::solver quick = solver(rlimit * 2, false);
        quick.add(claim);
        return quick.check();
      };
      const z3::expr differs = !same;
      values_equal = differ(differs) == z3::unsat;
      // else case by case on up to 3 bool captures (a WHERE's condition): each case simplifies
      // the branches away, which bit-vector shifts and 128-bit ops need
      const std::vector<z3::expr>& bools = m.bool_leaves();
      if (!values_equal && !bools.empty() && bools.size() <= 3) {
        values_equal = true;
        for (unsigned k = 0; k < (1u << bools.size()) && values_equal; ++k) {
          z3::expr_vector from(c), to(c);
          for (size_t b = 0; b < bools.size(); ++b) {
            from.push_back(bools[b]);
            to.push_back(c.bool_val((k >> b) & 1));
          }
          values_equal = differ(z3::expr(differs).substitute(from, to).simplify()) == z3::unsat;
        }
      }
    }
    auto ask = [&](z3::solver& q) {
      for (const z3::expr& f : facts) q.add(f);
      if (!dtype_differs) {
        q.add(root->def);
        q.add(values_equal ? !rhs->def : !(rhs->def && same));
      }
      return q.check();
    };
    // then with the equations solved first; then Z3's SMT core alone (each proves rules the
    // other runs out of resources on)
    {
      z3::solver pre = solver(rlimit, true);
      if (ask(pre) == z3::unsat) return {Verdict::Proven, ""};
    }
    z3::solver sol = solver(rlimit, true, false);
    switch (ask(sol)) {
      case z3::unsat:
        return {Verdict::Proven, ""};
      case z3::unknown:
        return {Verdict::Unknown, fmt::format("Z3: {}", sol.reason_unknown()),
                m.divides_symbolically()};
      case z3::sat:
        break;
    }
    const z3::model mdl = sol.get_model();
    std::vector<std::string> parts;
    std::set<std::string> seen;
    for (size_t slot = 0; slot < rule.slot_names.size(); ++slot) {
      const std::string& nm = rule.slot_names[slot];
      if (seen.count(nm)) continue;
      const SVal v = ev.slot(static_cast<int>(slot));
      if (v.k == SVal::K::Node && (v.u->leaf || v.u->op == Op::Const) && !v.u->invalid) {
        parts.push_back(fmt::format("{}={}", nm, model_text(mdl, v.u->val)));
        if (v.u->leaf)
          parts.back() += fmt::format(" ({} in [{}, {}]{}{})", dtype_short(v.u->dtype),
                                      model_text(mdl, v.u->vmin), model_text(mdl, v.u->vmax),
                                      mdl.eval(v.u->def, true).is_false() ? ", undefined" : "",
                                      mdl.eval(v.u->may_wrap, true).is_true() ? ", may wrap" : "");
        seen.insert(nm);
      } else if (v.k == SVal::K::Int || v.k == SVal::K::Bool) {
        parts.push_back(fmt::format("{}={}", nm, model_text(mdl, *v.e)));
        seen.insert(nm);
      }
    }
    std::string what;
    if (dtype_differs)
      what = fmt::format("the result is {}, the matched node {}", dtype_short(rhs->dtype),
                         dtype_short(root->dtype));
    else if (mdl.eval(rhs->def, true).is_false())
      what = fmt::format("the matched node is {}, the result is undefined",
                         model_text(mdl, root->val));
    else
      what = fmt::format("the matched node is {}, the result {}", model_text(mdl, root->val),
                         model_text(mdl, rhs->val));
    return {Verdict::Refuted, fmt::format("{} ({} at the root): {}", fmt::join(parts, ", "),
                                          dtype_short(dts[0]), what)};
  } catch (const Vacuous&) {
    return {Verdict::Vacuous, ""};
  } catch (const Unsupported& e) {
    return {Verdict::Unsupported, e.what()};
  } catch (const z3::exception& e) {
    return {Verdict::Unsupported, fmt::format("Z3: {}", e.msg())};
  } catch (const std::exception& e) {  // a helper run on constants raised (EvalError, ...)
    return {Verdict::Unsupported, e.what()};
  }
}

bool expands(const ResolvedRule& rule) {
  try {
    ShapeOpts so;
    for (Shape& s : shapes_of(rule.root, so)) {
      bool truncated = false;
      for (const auto& dts : dtypings(s, truncated)) {
        // evaluation alone tells (a query of the least resources follows it)
        const Outcome o = prove_instance(rule, s, dts, 1, false);
        if (o.v == Verdict::Unsupported && o.why.find("does not fix") != std::string::npos)
          return true;
      }
    }
  } catch (const Unsupported&) {
    // a pattern the model cannot instantiate: nothing to expand (the proof reports why)
  }
  return false;
}

// ---- bounded testing: instances of the pattern over small variables, every value checked

constexpr long kMaxPoints = 2048;  // values checked per instance
// constant combinations tried per rule by exhaustive testing, shared by its open instances
constexpr long kExhaustiveBudget = 4096;
// rewrites below which a rule's exhaustive testing is topped up with random instances (a pattern
// whose guard few small instances pass)
constexpr int kMinFired = 32;

std::string open_key(const ResolvedRule* r, const Shape& s, const std::vector<DType>& dts) {
  return fmt::format("{}|{}", static_cast<const void*>(r), shape_text(*r, s, dts));
}

class Tester {
 public:
  Tester(std::shared_ptr<const ResolvedProgram> prog, const ResolvedSet& whole)
      : prog_(std::move(prog)), whole_(prog_, whole) {}
  void seed(uint64_t s) { rng_.seed(s); }

  struct Result {
    int fired = 0;
    long points = 0;
    std::string failure;  // a counterexample
    std::string error;    // the first error the rule raised
    // exhaustive(): the constants took every value of [-range, range] (the smallest such range
    // over the instances; 0: none was exhaustive)
    int range = 0;
  };

  // Bounded exhaustive testing of one instance: its constant captures take every value in
  // [-r, r] (within their dtype), r as large as `budget` combinations allow up to 64, each
  // with new small expressions for the open captures; every point of their variables is checked.
  void exhaustive(const ResolvedRule& rule, const Shape& s, const std::vector<DType>& dts,
                  long budget, Result& res) {
    std::vector<size_t> consts;
    for (size_t i = 0; i < s.nodes.size(); ++i) {
      const PNode& n = s.nodes[i];
      if (n.op == Op::Const && !n.invalid && !dts[i].is_bool() &&
          !(n.m && n.m->arg.kind == ArgMatch::Kind::Literal))
        consts.push_back(i);
    }
    int r = 64;
    auto combos = [&](int range) {
      long c = 1;
      for (size_t i = 0; i < consts.size() && c <= budget; ++i) c *= 2 * range + 1;
      return c;
    };
    while (r > 1 && combos(r) > budget) r /= 2;
    if (!consts.empty()) res.range = res.range == 0 ? r : std::min(res.range, r);
    // what the budget leaves: each combination again, with other expressions for the captures
    const long passes = std::max(1L, budget / combos(r));
    ResolvedSet one;
    one.name = "prove";
    one.rules.push_back(rule);
    InterpretedMatcher matcher(prog_, one);
    std::vector<i128> at(consts.size());
    for (size_t k = 0; k < consts.size(); ++k) at[k] = std::max<i128>(-r, dts[consts[k]].int_min());
    fixed_.clear();
    while (res.failure.empty()) {
      for (size_t k = 0; k < consts.size(); ++k) fixed_[consts[k]] = at[k];
      for (long pass = 0; pass < passes && res.failure.empty(); ++pass)
        attempt(matcher, rule, s, dts, res, 256);
      size_t k = 0;  // the next combination
      for (; k < consts.size(); ++k) {
        const i128 hi = std::min<i128>(r, dts[consts[k]].int_max());
        if (++at[k] <= hi) break;
        at[k] = std::max<i128>(-r, dts[consts[k]].int_min());
      }
      if (k == consts.size()) break;
    }
    fixed_.clear();
  }

  void run(const ResolvedRule& rule, const Shape& s, const std::vector<DType>& dts, int rounds,
           Result& res) {
    ResolvedSet one;
    one.name = "prove";
    one.rules.push_back(rule);
    InterpretedMatcher matcher(prog_, one);
    for (int round = 0; round < rounds && res.failure.empty(); ++round)
      attempt(matcher, rule, s, dts, res, kMaxPoints);
  }

 private:
  // one random instance (constants from fixed_ where it has them) rewritten by the rule and checked
  void attempt(const InterpretedMatcher& matcher, const ResolvedRule& rule, const Shape& s,
               const std::vector<DType>& dts, Result& res, long max_points) {
    vars_.clear();
    divisor_ = 2 + pick(3);
    scale_ = 1 + pick(2);
    std::map<int, UOp> bound;
    UOp root;
    try {
      root = build(rule, s, dts, 0, bound);
    } catch (const Vacuous&) {
      return;
    } catch (const std::exception&) {
      return;  // an instance the IR refuses to build (a type it does not accept)
    }
    const std::optional<UOp> out = rewrite_once(matcher, whole_, root, res.error);
    if (!out) return;
    ++res.fired;
    try {
      check(root, *out, res, max_points);
    } catch (const NotEvaluable&) {
      --res.fired;  // an op the tester does not evaluate: this instance is left out
    }
  }

  i128 small(DType d, i128 lo = -64, i128 hi = 64) {
    if (d.is_bool()) return std::uniform_int_distribution<int>(0, 1)(rng_);
    lo = std::max(lo, d.int_min());
    hi = std::min(hi, d.int_max());
    static const i128 special[] = {0, 1, -1, 2, 3, 4, 8, 16, -2};
    if (std::uniform_int_distribution<int>(0, 2)(rng_) == 0) {
      const i128 v = special[std::uniform_int_distribution<size_t>(0, 8)(rng_)];
      if (v >= lo && v <= hi) return v;
    }
    return static_cast<i128>(std::uniform_int_distribution<long long>(
        static_cast<long long>(lo), static_cast<long long>(hi))(rng_));
  }
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }

  UOp var(DType d) {
    if (vars_.size() >= 3 || (!vars_.empty() && pick(3) == 0))
      return vars_[static_cast<size_t>(pick(static_cast<int>(vars_.size())))];
    const i128 lo = small(d, -16, 16);
    const i128 hi = std::min<i128>(lo + 1 + pick(12), d.is_index() ? 64 : d.int_max());
    UOp v = UOp::variable(fmt::format("v{}", vars_.size()), lo, std::max(lo, hi), d);
    vars_.push_back(v);
    return v;
  }
  // a small index expression: what symbolic rules meet in kernels
  UOp expr(DType d, int depth, bool invalid_ok = false) {
    if (d.is_bool()) {
      const DType i = dtypes::index;
      const UOp a = expr(i, depth + 1);
      return pick(2) ? a.lt(a.const_like(small(i))) : a.ne(a.const_like(small(i)));
    }
    // Invalid: only where a gated index has it, the false branch of a WHERE
    if (invalid_ok && pick(3) == 0) return UOp::constant(d, Arg::invalid());
    if (d.is_index() && depth == 0 && pick(4) == 0) {  // a gated index: where(valid, i, Invalid)
      const UOp i = expr(d, 1);
      return expr(dtypes::bool_, 1).where(i, UOp::constant(d, Arg::invalid()));
    }
    const int choice = depth >= 2 ? pick(2) : pick(10);
    const UOp v = var(d);
    auto k = [&](i128 lo, i128 hi) { return v.const_like(small(d, lo, hi)); };
    switch (choice) {
      case 0:
        return v;
      case 1:
        return v.const_like(small(d));
      case 2:
        return v * k(-8, 8);
      case 3:
        return v.floordiv(k(1, 9));
      case 4:
        return v.floormod(k(1, 9));
      case 5:
        return expr(d, depth + 1) + expr(d, depth + 1);
      case 6:
        return expr(d, depth + 1) * k(-6, 6) + expr(d, depth + 1);
      case 7:
        return (expr(d, depth + 1) + k(-8, 8)).floordiv(k(1, 9));
      // the terms of a split index, m*(v%c) and m*c*(v//c), which sums recombine
      case 8:
        return v.floormod(v.const_like(divisor_)) * v.const_like(scale_) + expr(d, depth + 1);
      default:
        return v.floordiv(v.const_like(divisor_)) * v.const_like(divisor_ * scale_);
    }
  }

  UOp build(const ResolvedRule& rule, const Shape& s, const std::vector<DType>& dts, size_t i,
            std::map<int, UOp>& bound, bool invalid_ok = false) {
    const PNode& n = s.nodes[i];
    const DType d = dts[i];
    if (n.m)
      for (int slot : n.m->slots)
        if (auto it = bound.find(slot); it != bound.end()) return it->second;
    std::vector<UOp> src;
    for (size_t k = 0; k < n.kids.size(); ++k)
      src.push_back(
          build(rule, s, dts, static_cast<size_t>(n.kids[k]), bound, n.op == Op::Where && k == 2));
    UOp out;
    if (n.op == Op::Noop) {
      out = expr(d, 0, invalid_ok && d.is_index());
    } else if (n.op == Op::DefineVar) {
      out = var(d.is_bool() ? dtypes::index : d);
    } else if (leaf_op(n.op)) {
      throw Vacuous{};
    } else if (n.op == Op::Const && n.invalid) {
      out = UOp::constant(d, Arg::invalid());
    } else if (n.op == Op::Const) {
      if (n.m && n.m->arg.kind == ArgMatch::Kind::Literal)
        out = UOp::constant(d, n.m->arg.literal);
      else if (auto f = fixed_.find(i); f != fixed_.end())
        out = UOp::constant(d, Arg::integer(f->second));
      else
        out = UOp::constant(d, Arg::integer(small(d)));
    } else if (n.op == Op::Cast || n.op == Op::Bitcast) {
      out = UOp::make(n.op, d, {src[0]});
    } else {
      out = src[0].alu(n.op, std::span<const UOp>(src).subspan(1));
      if (out.dtype() != d) throw Vacuous{};
    }
    if (n.m)
      for (int slot : n.m->slots) bound[slot] = out;
    return out;
  }

  // a node of an op the tester does not evaluate
  struct NotEvaluable {};
  static std::string shown(const UOp& u) {
    try {
      return render(u);
    } catch (const std::exception&) {
      return fmt::format("a {} node", op_name(u.op()));
    }
  }

  // a node's value at the point env (nullopt: undefined)
  static std::optional<Arg> value(const UOp& u, const std::map<const void*, i128>& env,
                                  std::map<const void*, std::optional<Arg>>& memo) {
    const void* key = &u.arg();
    if (auto it = memo.find(key); it != memo.end()) return it->second;
    std::optional<Arg> r;
    if (u.op() == Op::Const) {
      if (!u.arg().is_invalid()) r = u.arg();
    } else if (u.op() == Op::DefineVar) {
      auto it = env.find(key);
      if (it == env.end()) throw std::runtime_error("a variable the instance does not define");
      r = Arg::integer(it->second);
    } else if (u.op() == Op::Where) {
      const auto c = value(u.src(0), env, memo);
      if (c)
        r = value(u.src(c->as_int() != 0 || (c->is_bool() && c->as_bool()) ? 1 : 2), env, memo);
    } else if (u.op() == Op::Cast) {
      if (auto a = value(u.src(0), env, memo)) r = cast_value(u.dtype(), *a);
    } else if (!op_info(u.op()).is_alu()) {
      throw NotEvaluable{};  // a BITCAST, a RANGE, ...: the instance is left out
    } else {
      std::vector<Arg> args;
      bool ok = true;
      for (const UOp& s : u.src()) {
        auto a = value(s, env, memo);
        if (!a) {
          ok = false;
          break;
        }
        args.push_back(*a);
      }
      if (ok) r = exec_alu(u.op(), u.dtype(), args);
    }
    memo[key] = r;
    return r;
  }

  void check(const UOp& lhs, const UOp& rhs, Result& res, long max_points) {
    std::vector<UOp> vs;
    for (const UOp& u : toposort(lhs))
      if (u.op() == Op::DefineVar) vs.push_back(u);
    std::vector<std::pair<i128, i128>> ranges;
    long total = 1;
    for (const UOp& v : vs) {
      ranges.emplace_back(v.vmin().i, v.vmax().i);
      total *= static_cast<long>(v.vmax().i - v.vmin().i + 1);
    }
    std::vector<i128> at(vs.size());
    for (size_t i = 0; i < vs.size(); ++i) at[i] = ranges[i].first;
    // every point of small instances; a sample of the rest's (a stride through them)
    const long stride = std::max(1L, total / max_points);
    for (long p = 0; p < total; p += stride) {
      std::map<const void*, i128> env;
      for (size_t i = 0; i < vs.size(); ++i) env[&vs[i].arg()] = at[i];
      std::map<const void*, std::optional<Arg>> memo;
      ++res.points;
      const auto a = value(lhs, env, memo);
      std::optional<Arg> b;
      std::string err;
      try {
        b = value(rhs, env, memo);
      } catch (const std::exception& e) {  // (NotEvaluable is not one: it leaves the instance)
        err = e.what();
      }
      if (a && (!b || !(*a == *b))) {
        std::vector<std::string> pts;
        for (size_t i = 0; i < vs.size(); ++i)
          pts.push_back(fmt::format("{}={}", vs[i].arg().items()[0].as_string(), to_string(at[i])));
        res.failure = fmt::format("{} at {}: the matched node is {}, the result {} ({})",
                                  shown(lhs), fmt::join(pts, ", "), a->repr(),
                                  b             ? b->repr()
                                  : err.empty() ? "undefined"
                                                : err,
                                  shown(rhs));
        return;
      }
      long step = p + stride < total ? stride : 0;  // the next point: `stride` further on
      for (size_t i = 0; i < vs.size() && step > 0; ++i) {
        const i128 n = ranges[i].second - ranges[i].first + 1;
        const i128 pos = at[i] - ranges[i].first + step;
        at[i] = ranges[i].first + pos % n;
        step = static_cast<long>(pos / n);
      }
    }
  }

  std::shared_ptr<const ResolvedProgram> prog_;
  InterpretedMatcher whole_;
  std::mt19937_64 rng_;
  std::vector<UOp> vars_;
  i128 divisor_ = 2, scale_ = 1;  // of the split-index terms of one instance
  std::map<size_t, i128> fixed_;  // exhaustive(): the constant at each shape node
};

// ---- the report

struct RuleReport {
  const ResolvedRule* rule = nullptr;
  std::string set;
  std::string status;  // proven, refuted, tested, unsupported
  int proven = 0, instances = 0;
  Tester::Result tests;
  std::string reason;  // unsupported: why; tested: why not proven
  std::string counterexample;
  std::vector<std::string> open_instances;  // --verbose: each instantiation left unproven, and why
  double ms = 0;
};

}  // namespace

int prove_rules(const std::string& path, const ProveOptions& opts) {
  g_every_width = opts.every_width;
  float_only_ops();  // (builds UOps: on this thread, before the proofs' threads start)
  Diagnostics diags;
  std::shared_ptr<const ResolvedProgram> prog = load_rules(path, diags);
  std::fputs(diags.render().c_str(), stderr);
  if (!prog) return 2;
  // the rules of the selected sets, each once (a composed set repeats its parts' rules), with the
  // largest selected set holding each as the running set for rewritten()
  std::vector<const ResolvedSet*> sets;
  for (const auto& [name, set] : prog->sets) {
    if (set.kind != SetKind::Rules) continue;
    const bool chosen =
        opts.sets.empty() ? set.loc.file && set.loc.file->path == path
                          : std::find(opts.sets.begin(), opts.sets.end(), name) != opts.sets.end();
    if (chosen) sets.push_back(&set);
  }
  for (const std::string& name : opts.sets)
    if (!prog->find(name)) {
      fmt::print(stderr, "rwc prove: {} has no rule set '{}'\n", path, name);
      return 2;
    }
  // variants by rule (file:line:col), in source order
  std::map<std::string, std::vector<const ResolvedRule*>> variants;
  std::map<std::string, const ResolvedSet*> home;
  std::vector<std::string> order;
  for (const ResolvedSet* set : sets)
    for (const ResolvedRule& r : set->rules) {
      const std::string key = r.loc.str();
      auto& v = variants[key];
      if (std::find_if(v.begin(), v.end(),
                       [&](const ResolvedRule* o) { return o->variant == r.variant; }) == v.end()) {
        if (v.empty()) order.push_back(key);
        v.push_back(&r);
      }
      auto& h = home[key];
      if (!h || set->rules.size() > h->rules.size()) h = set;
    }
  std::sort(order.begin(), order.end(), [&](const std::string& a, const std::string& b) {
    const Loc& x = variants[a][0]->loc;
    const Loc& y = variants[b][0]->loc;
    return std::tie(x.line, x.col) < std::tie(y.line, y.col);
  });

  // the table, a row as each rule is done (a long run shows its progress)
  auto print_row = [](const RuleReport& r) {
    std::string detail = r.rule->info.source;
    if (const size_t nl = detail.find('\n'); nl != std::string::npos) detail = detail.substr(0, nl);
    if (detail.size() > 60) detail = detail.substr(0, 57) + "...";
    if (r.status == "tested" && r.tests.fired == 0)
      detail = r.reason;
    else if (r.status == "tested")
      detail = fmt::format(
          "{} instances fired, {} points{}; not proven: {}", r.tests.fired, r.tests.points,
          r.tests.range ? fmt::format(", constants every value of [-{0}, {0}]", r.tests.range) : "",
          r.reason);
    else if (r.status == "unsupported")
      detail = r.reason;
    fmt::print("{:<28} {:<12} {:>4}/{:<4} {:>9.1f}  {}\n", r.rule->info.location(), r.status,
               r.proven, r.instances, r.ms, detail);
    for (const std::string& o : r.open_instances) fmt::print("    not proven: {}\n", o);
    std::fflush(stdout);
  };
  if (!opts.json)
    fmt::print("{:<28} {:<12} {:>9} {:>9}  {}\n", "rule", "status", "instances", "ms", "detail");
  const auto t_all = std::chrono::steady_clock::now();
  std::vector<RuleReport> reports;
  std::map<const ResolvedSet*, std::unique_ptr<Tester>> testers;
  Diagnostics out;
  // The Z3 queries of the rules run on a thread per core (one Z3 context each); testing, which
  // runs the interpreter, and the report follow in rule order on this thread.
  struct Proofs {
    RuleReport rep;
    bool open = false;  // some instantiation is neither proven nor vacuous
    std::string skipped;
    size_t instances = 0;
    double ms = 0;
    std::vector<bool> expand;  // per variant: its open captures are expanded (expands())
    bool index = false;        // an index rule of rangeify: checked on views (prove_index.h)
    // the instances left open, by variant and shape_text (tested exhaustively), and whether some
    // are open that are not listed (truncated, or untranslatable: tested at random)
    std::set<std::string> open_keys;
    bool unlisted = false;
  };
  std::vector<Proofs> proofs(order.size());
  std::vector<std::promise<void>> done(order.size());
  std::atomic<size_t> next{0};
  auto prove_rule = [&](size_t i) {
    Proofs& p = proofs[i];
    const auto t0 = std::chrono::steady_clock::now();
    p.index = std::all_of(variants[order[i]].begin(), variants[order[i]].end(),
                          [](const ResolvedRule* r) { return is_index_rule(*r); });
    // (an index rule is checked on views, in rule order on the main thread)
    for (const ResolvedRule* r : variants[order[i]]) {
      if (p.index) break;
      try {
        ShapeOpts so;
        so.expand = expands(*r);
        p.expand.push_back(so.expand);
        std::vector<Shape> shapes = shapes_of(r->root, so);
        p.skipped = so.skipped;
        bool truncated = so.truncated;
        for (Shape& s : shapes)
          for (const auto& dts : dtypings(s, truncated)) {
            ++p.instances;
            // once an instance is left open the rule is tested whatever the others give: they
            // are only searched for a counterexample, with less (--verbose: with the same)
            const unsigned limit =
                p.open && !opts.verbose ? std::max(1u, opts.rlimit / 8) : opts.rlimit;
            Outcome o = prove_instance(*r, s, dts, limit, false);
            if (o.v == Verdict::Unknown && o.symbolic_division) {  // the other form of division
              Outcome o2 = prove_instance(*r, s, dts, limit, true);
              if (o2.v != Verdict::Unknown) o = std::move(o2);
            }
            if (o.v == Verdict::Vacuous) continue;
            ++p.rep.instances;
            if (o.v == Verdict::Proven) {
              ++p.rep.proven;
            } else if (o.v == Verdict::Refuted) {
              if (p.rep.counterexample.empty()) p.rep.counterexample = o.why;
            } else {
              p.open = true;
              p.open_keys.insert(open_key(r, s, dts));
              if (p.rep.reason.empty()) p.rep.reason = o.why;
              if (opts.verbose)
                p.rep.open_instances.push_back(
                    fmt::format("{}: {}", shape_text(*r, s, dts), o.why));
            }
          }
        if (truncated) {
          p.open = p.unlisted = true;
          if (p.rep.reason.empty())
            p.rep.reason = fmt::format("more than {} instances", kMaxShapes);
        }
      } catch (const Unsupported& e) {
        p.open = p.unlisted = true;
        if (p.rep.reason.empty()) p.rep.reason = e.what();
      }
    }
    p.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  std::vector<std::thread> workers;
  const unsigned nthreads = std::max(1u, std::min(8u, std::thread::hardware_concurrency()));
  for (unsigned t = 0; t < nthreads; ++t)
    workers.emplace_back([&] {
      for (size_t i; (i = next.fetch_add(1)) < order.size();) {
        try {
          prove_rule(i);
          done[i].set_value();
        } catch (...) {
          done[i].set_exception(std::current_exception());
        }
      }
    });
  struct Join {
    std::vector<std::thread>& w;
    ~Join() {
      for (std::thread& t : w) t.join();
    }
  } join{workers};
  for (size_t ri = 0; ri < order.size(); ++ri) {
    const std::string& key = order[ri];
    done[ri].get_future().get();
    RuleReport rep = std::move(proofs[ri].rep);
    rep.rule = variants[key][0];
    rep.set = home[key]->name;
    const auto t0 = std::chrono::steady_clock::now();
    const bool open = proofs[ri].open;
    const std::string& skipped = proofs[ri].skipped;
    const size_t ninstances = proofs[ri].instances;
    if (proofs[ri].index) {
      // run on the catalog of views (the interpreter, so on this thread)
      IndexCheck ic;
      for (const ResolvedRule* r : variants[key]) {
        const IndexCheck one = check_index_rule(prog, *home[key], *r, opts.rlimit);
        ic.views += one.views;
        ic.proofs += one.proofs;
        for (auto [to, from] : {std::pair{&ic.failure, &one.failure},
                                {&ic.error, &one.error},
                                {&ic.undecided, &one.undecided}})
          if (to->empty()) *to = *from;
        if (!ic.failure.empty()) break;
      }
      rep.instances = ic.views;
      rep.proven = static_cast<int>(ic.proofs);
      if (!ic.failure.empty()) {
        rep.status = "refuted";
        rep.counterexample = ic.failure;
      } else if (ic.views > 0 && ic.undecided.empty()) {
        rep.status = "tested";
        rep.reason = fmt::format(
            "index math, proven by Z3 for every index of {} views of fixed shapes (ranks 0-3)",
            ic.views);
      } else {
        rep.status = "unsupported";
        rep.reason = !ic.undecided.empty() ? ic.undecided
                     : ic.error.empty()    ? "no view of the catalog is rewritten by it"
                                           : fmt::format("no view rewritten: {}", ic.error);
      }
    } else if (!rep.counterexample.empty()) {
      rep.status = "refuted";
    } else if (!open && rep.proven > 0) {
      rep.status = "proven";
    } else if (ninstances == 0 || (!open && rep.proven == 0)) {
      rep.status = "unsupported";
      if (rep.reason.empty())
        rep.reason = skipped.empty() ? "no instance at int, index or bool dtypes" : skipped;
    } else {
      // bounded testing
      auto& tester = testers[home[key]];
      if (!tester) tester = std::make_unique<Tester>(prog, *home[key]);
      // the same instances on every run: the random stream starts from the rule's location
      tester->seed(std::hash<std::string>{}(key));
      // every instantiation of the rule's variants (variants of one rule share shapes by position)
      auto each_instance = [&](const auto& fn) {
        const std::vector<bool>& expand = proofs[ri].expand;
        for (size_t vi = 0; vi < variants[key].size(); ++vi) {
          const ResolvedRule* r = variants[key][vi];
          ShapeOpts so;
          so.expand = vi < expand.size() && expand[vi];
          std::vector<Shape> shapes;
          try {
            shapes = shapes_of(r->root, so);
          } catch (const Unsupported&) {
            // a pattern the model cannot instantiate: its reason is the rule's already
          }
          for (Shape& s : shapes)
            for (const auto& dts : dtypings(s, so.truncated))
              if (rep.tests.failure.empty()) fn(r, s, dts);
        }
      };
      // The open instances: exhaustive in their constants, within a budget of combinations
      // shared by them. Then, where some open instances are not known (or few fired), random
      // instances of every instantiation: a budget of rounds shared by them, four times more
      // where none fired, then 4x and 16x more again (past the per-instantiation cap) where still
      // none did: a guard that few random instances pass (a gate that narrows a variable the
      // other branch uses) fires on about one in ten thousand, and with fewer tries whether it
      // fires at all depended on the random stream, which moves with the rule's line.
      const std::set<std::string>& open_keys = proofs[ri].open_keys;
      if (!open_keys.empty()) {
        const long per =
            std::max<long>(64, kExhaustiveBudget / static_cast<long>(open_keys.size()));
        each_instance([&](const ResolvedRule* r, const Shape& s, const std::vector<DType>& dts) {
          if (open_keys.count(open_key(r, s, dts))) tester->exhaustive(*r, s, dts, per, rep.tests);
        });
      }
      if (proofs[ri].unlisted || rep.tests.fired < kMinFired)
        for (int tier : {4, 16, 64, 1024}) {
          const int most = tier > 16 ? opts.test_rounds * tier / 16 : opts.test_rounds;
          const int rounds = std::clamp(
              opts.test_rounds * tier / std::max(1, static_cast<int>(ninstances)), 8, most);
          each_instance([&](const ResolvedRule* r, const Shape& s, const std::vector<DType>& dts) {
            tester->run(*r, s, dts, rounds, rep.tests);
          });
          if (rep.tests.fired > 0 || !rep.tests.failure.empty()) break;
        }
      if (!rep.tests.failure.empty()) {
        rep.status = "refuted";
        rep.counterexample = rep.tests.failure;
      } else if (rep.tests.fired > 0) {
        rep.status = "tested";
      } else {
        rep.status = "unsupported";
        rep.reason += rep.tests.error.empty() ? "; testing found no instance it rewrites"
                                              : fmt::format("; testing: {}", rep.tests.error);
      }
    }
    rep.ms =
        proofs[ri].ms +
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (rep.status == "refuted")
      out.error(rep.rule->loc, fmt::format("rule refuted: {}", rep.counterexample));
    if (!opts.json) print_row(rep);
    reports.push_back(std::move(rep));
  }
  const double total_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_all).count();

  int proven = 0, refuted = 0, tested = 0, unsupported = 0;
  for (const RuleReport& r : reports) {
    proven += r.status == "proven";
    refuted += r.status == "refuted";
    tested += r.status == "tested";
    unsupported += r.status == "unsupported";
  }
  const int total = static_cast<int>(reports.size());
  const double share = total ? 100.0 * proven / total : 0;
  std::fputs(out.render().c_str(), stderr);
  if (opts.json) {
    nlohmann::json j;
    j["file"] = path;
    for (const RuleReport& r : reports) {
      nlohmann::json row{{"rule", r.rule->info.location()},
                         {"name", r.rule->info.name},
                         {"set", r.set},
                         {"status", r.status},
                         {"instances", r.instances},
                         {"proven_instances", r.proven},
                         {"ms", r.ms}};
      if (!r.reason.empty()) row["reason"] = r.reason;
      if (!r.counterexample.empty()) row["counterexample"] = r.counterexample;
      if (r.status == "tested" || r.tests.fired)
        row["tests"] = {{"fired", r.tests.fired}, {"points", r.tests.points}};
      j["rules"].push_back(row);
    }
    j["totals"] = {{"rules", total},     {"proven", proven},           {"tested", tested},
                   {"refuted", refuted}, {"unsupported", unsupported}, {"ms", total_ms}};
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("{} rules: {} proven ({:.0f}%), {} tested, {} refuted, {} unsupported; {:.1f} s\n",
               total, proven, share, tested, refuted, unsupported, total_ms / 1000);
  }
  if (refuted) return 1;
  if (opts.min_proven >= 0 && (share < opts.min_proven || unsupported > 0)) {
    fmt::print(stderr,
               "rwc prove: {:.0f}% of the rules proven and {} unchecked; --min-proven {} asks for "
               "at least {}% and every other rule tested\n",
               share, unsupported, opts.min_proven, opts.min_proven);
    return 1;
  }
  return 0;
}

}  // namespace tinyrw::rw
