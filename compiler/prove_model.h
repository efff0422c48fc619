// The SMT model of `rwc prove` (compiler/prove.cpp): UOps whose values are Z3 terms, and a
// symbolic evaluator of resolved guards, lets and results over them.
//
// Semantics (docs/rw-language.md, "Proving rules"): a node's value is the exact mathematical result
// of its op (Python floor division and modulo) represented in its dtype: ints wrap to their width,
// index is exact, bools are 0 or 1. Division and modulo by zero, a shift out of range and the index
// constant Invalid are undefined (spec/tinyspec.tex: rules may assume they do not happen), and an
// undefined value propagates through every op but the branch a WHERE does not take. A capture
// without a pattern of its own is any node: any value of its dtype, defined or not, with
// vmin/vmax any bounds that hold its value; may_wrap false means its value did not wrap, may_raise
// false that it is defined. A property the model cannot state exactly (x.precedes(y), the identity
// of two different nodes) is a fresh unknown, so a proof holds whatever the property is.
#pragma once

#include <deque>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <z3++.h>

#include "dsl/resolve.h"

namespace tinyrw::rw::prove {

// The rule uses something the model does not translate; the reason says what.
struct Unsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// This instantiation of a pattern cannot match or its guard is false whatever the values.
struct Vacuous {};

// A UOp with symbolic value and properties.
struct SNode {
  int id = 0;
  Op op = Op::Noop;
  DType dtype;
  bool leaf = false;  // a capture with no pattern of its own: its op and sources are unknown
  bool ite = false;   // select() of two nodes: only its value and properties are known
  bool invalid = false;
  bool other = false;  // a leaf that is neither a WHERE nor a constant (an expanded capture)
  // a leaf's facts, made when first asked: whether it is a constant, and whether its arg is none
  // (the constant Invalid, then undefined); else its arg is its value
  std::optional<z3::expr> is_const, arg_none;
  std::vector<SNode*> src;
  std::string name;  // leaves: the capture's name
  z3::expr arg, val, def, vmin, vmax, finite, may_wrap, may_raise;
  // A sized int's value before wrap-around, up to a multiple of 2^width: sums and products build it
  // from their sources' reps, so wrap(rep) is one term for every grouping of a ring expression
  // ((x*c)*y and (x*y)*c wrap the same product). Elsewhere rep is val.
  z3::expr rep;
  // The value as a bit-vector of the dtype's width, where bitwise ops made or read it (an equality
  // of two such values is then asked of the bit-vectors, which Z3 decides by bit-blasting)
  std::optional<z3::expr> bv;
  explicit SNode(z3::context& c)
      : arg(c), val(c), def(c), vmin(c), vmax(c), finite(c), may_wrap(c), may_raise(c), rep(c) {}
};

// A symbolic value of an expression: None, a Z3 bool or int, a node, or a concrete op, dtype,
// string or tuple. `none` is when a node or int value is none (fold_const of a division by 0).
struct SVal {
  enum class K { None, Bool, Int, Node, Op, DType, Str, Tuple } k = K::None;
  std::optional<z3::expr> e;  // Bool, Int
  SNode* u = nullptr;
  Op op = Op::Noop;
  DType dt;
  std::string s;
  std::vector<SVal> items;
  std::optional<z3::expr> none;  // Node, Int: when the value is none instead
};

class Model {
 public:
  // quotient_vars: floor division by a symbolic divisor as a fresh quotient (see floor_div)
  Model(z3::context& c, bool quotient_vars) : c_(c), quotient_vars_(quotient_vars) {}
  z3::context& ctx() { return c_; }
  // Facts that hold by construction of the nodes (wrap-around, bounds): assumed in every query.
  const std::vector<z3::expr>& axioms() const { return axioms_; }

  SNode* leaf(DType d, const std::string& name);
  // a leaf's is_const and arg_none (SNode), with the facts that tie them to its value
  void const_facts(SNode* n);
  SNode* constant(DType d, const z3::expr& value);  // value already in the dtype's range
  SNode* constant_of(DType d, const z3::expr& v);   // v converted to d as const_like does
  SNode* invalid(DType d = dtypes::index);
  SNode* alu(Op op, DType d, std::vector<SNode*> src);
  SNode* select(const z3::expr& cond, SNode* a, SNode* b);
  // A node built with the dtype the IR gives it (alu_result_dtype's rules for the model's dtypes).
  SNode* build(Op op, std::vector<SNode*> src);

  z3::expr fresh_int(const std::string& hint);
  z3::expr fresh_bool(const std::string& hint);
  z3::expr bool01(const z3::expr& b);  // a bool's value: 1 or 0
  z3::expr int_val(i128 v);
  z3::expr in_dtype(DType d, const z3::expr& v);
  z3::expr wrap(DType d, const z3::expr& rep);  // rep represented in d (sized ints: mod 2^width)
  z3::expr bits(SNode* n);                      // n's value as a bit-vector (SNode::bv)
  z3::expr floor_div(const z3::expr& a, const z3::expr& b);
  z3::expr floor_mod(const z3::expr& a, const z3::expr& b);
  z3::expr saturate(const z3::expr& v);  // rule arithmetic saturates at the 128-bit limits
  z3::expr sat_add(const z3::expr& a, const z3::expr& b);
  z3::expr sat_mul(const z3::expr& a, const z3::expr& b);
  z3::expr is_infinite(const z3::expr& v);
  // the Z3 bools of the bool captures: a query may be split into cases on them
  const std::vector<z3::expr>& bool_leaves() const { return bool_leaves_; }
  // some floor division had a symbolic divisor (the other form of division may then help)
  bool divides_symbolically() const { return symbolic_division_; }

 private:
  void bounds(SNode* n);
  z3::context& c_;
  std::vector<z3::expr> axioms_;
  std::deque<SNode> nodes_;
  std::map<std::string, SNode*> consed_;  // hash-consing: the same op, dtype, sources and arg
  bool quotient_vars_;
  bool symbolic_division_ = false;
  std::map<std::string, z3::expr> quotients_;
  std::vector<z3::expr> bool_leaves_;  // floor_div's quotient of (a, b), by term ids
  int fresh_ = 0;
};

// The symbolic evaluation of one rule variant over an instantiated pattern.
class Evaluator {
 public:
  Evaluator(Model& m, const ResolvedRule& rule) : m_(m), rule_(rule), pc_(m.ctx().bool_val(true)) {}
  // Binds a capture slot (the pattern instantiation does).
  void bind(int slot, SVal v);
  // Runs the guards and lets: the path condition that they pass. Throws Vacuous or Unsupported.
  z3::expr run_steps();
  SVal result();
  // the conditions of the result's evaluation (after result())
  z3::expr result_guards();
  SVal slot(int s) const { return slots_.at(static_cast<size_t>(s)); }

 private:
  SVal eval(const RExpr& e, std::vector<SVal>& frame);
  SVal member(const RExpr& e, const SVal& recv);
  SVal method(const RExpr& e, const SVal& recv, std::vector<SVal> args);
  SVal builtin(const RExpr& e, std::vector<SVal> args);
  SVal helper(const RExpr& e, std::vector<SVal> args);
  SVal binary(const RExpr& e, BinOp op, const SVal& a, const SVal& b);
  SVal equal(const SVal& a, const SVal& b);
  SNode* operand(const SVal& v, SNode* like);
  z3::expr truth(const SVal& v);
  z3::expr integer(const SVal& v);
  Model& m_;
  const ResolvedRule& rule_;
  std::vector<SVal> slots_;
  // conditions without which evaluating raises (a zero divisor in rule arithmetic): the rule stops
  // there, it does not rewrite
  std::vector<z3::expr> guards_;
  // the condition under which the expression being evaluated is (the left of && and ||, the
  // branch of `if else` taken): a guard of a part evaluated lazily holds only there
  z3::expr pc_;
  SVal raises();  // evaluating here raises: no rewrite where pc_ holds
};

SVal sbool(const z3::expr& e);
SVal sint(const z3::expr& e);
SVal snode(SNode* n);

}  // namespace tinyrw::rw::prove
