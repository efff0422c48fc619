// The .rw syntax tree, as written (names unresolved, for loops and alternatives unexpanded).
// Every node has a source location. Depth is bounded when the tree is built (dsl/parse.cpp), so
// walking it recursively is safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dsl/diagnostics.h"
#include "ir/arg.h"

namespace tinyrw::rw {

// ---- expressions
// ------------------------------------------------------------------------------------

enum class ExprKind {
  Literal,  // literal
  Name,     // name
  Call,     // name(args)          callee in `name`, args in kids
  Member,   // kids[0].name        or kids[0].name(args) when is_call (args in kids[1..])
  Index,    // kids[0][kids[1]]
  Unary,    // op kids[0]          op: "-", "~", "!"
  Binary,   // kids[0] op kids[1]  op: + - * // % / & | ^ << >> == != < <= > >= in, not in, && ||
  Tuple,    // (kids...) and [kids...]
  Slice,    // kids[0][kids[1]:kids[2]:kids[3]]  (a missing bound is a `none` literal)
  Comp,     // [kids[0] comp...]: kids[1 + i] is the iterable or filter of comp[i]
  Cond,     // kids[0] if kids[1] else kids[2]  (only the chosen branch is evaluated)
};

// The target of a comprehension's `for`: a name, `_`, or a (nested) tuple of targets.
struct Target {
  enum class Kind { Name, Discard, Tuple } kind = Kind::Name;
  Loc loc;
  std::string name;
  std::vector<Target> items;
};
struct CompClause {
  bool is_if = false;  // `if cond`; otherwise `for target in iterable`
  Loc loc;
  Target target;
};

struct Expr {
  ExprKind kind;
  Loc loc;
  Arg literal;       // Literal: int/float/bool/string/None
  std::string name;  // Name, Call, Member
  std::string op;    // Unary, Binary
  bool is_call = false;
  std::vector<std::unique_ptr<Expr>> kids;
  std::vector<std::string> arg_names;  // Call/Member call: "" for positional arguments
  std::vector<CompClause> comp;        // Comp
  bool generator = false;  // Comp: the one argument of f(x for x in t), consumed as made
  int depth = 1;
};
using ExprPtr = std::unique_ptr<Expr>;

// ---- patterns
// ---------------------------------------------------------------------------------------

struct ArgPat {
  enum class Kind { Literal, Name, Any, Tuple } kind = Kind::Any;
  Loc loc;
  Arg literal;
  std::string name;
  std::vector<ArgPat> items;
};

// One constraint of an alternative: `Add|Mul(x, y){arg}`, `x`, `int`, `0`, `_`, `(pattern)`.
struct Pattern;
struct Constraint {
  enum class Kind { Op, Group, Literal, Wildcard } kind = Kind::Wildcard;
  Loc loc;
  std::vector<std::string> names;  // Op: the names between '|' (ops, groups, dtypes, captures)
  bool optional = false;           // Op?: matches the op around its single source, or the source
  bool has_sources = false;
  bool commutative = false;  // [a, b]: both orders
  struct Source {
    Loc loc;
    std::unique_ptr<Pattern> pattern;  // null for `...`
    bool repeat = false;               // `p*`: every source matches p
  };
  std::vector<Source> sources;
  std::unique_ptr<ArgPat> arg;
  std::unique_ptr<Pattern> group;  // Group: a parenthesized pattern
  Arg literal;                     // Literal: a constant's value
};

// a:b:c || d:e ... — alternatives of constraint chains. In a chain, a leading bare lowercase
// name is the capture; the rest constrain the same node.
struct Pattern {
  Loc loc;
  std::vector<std::vector<Constraint>> alternatives;
  int depth = 1;
};
using PatternPtr = std::unique_ptr<Pattern>;

// ---- rules and declarations
// -------------------------------------------------------------------------

struct Clause {
  enum class Kind { Guard, Let, Require } kind;
  Loc loc;
  std::string name;  // Let: the bound name; Require: the reason
  ExprPtr expr;
  Loc why_loc;  // Require: the reason's string literal
};

struct Member {
  enum class Kind { Rule, Use, For } kind;
  Loc loc;
  // Rule
  PatternPtr pattern;
  std::vector<Clause> clauses;
  ExprPtr result;
  std::string text;  // the rule as written, for statistics and VIZ
  std::string name;  // `name: pattern => result`; empty for an unnamed rule
  Loc name_loc;
  // Use
  std::string use;
  // For: `for var in (A, B) { members }`
  std::string for_var;
  std::vector<std::pair<std::string, Loc>> for_values;
  std::vector<Member> body;
};

enum class SetKind { Rules, Gradient, Verifier };

// `extern fn name(a: int, b: uop) -> bool`: a C++ helper's signature, types by name as written.
struct ExternFn {
  std::vector<std::pair<std::string, Loc>> params;  // each parameter's type name and location
  std::vector<std::string> param_names;
  std::string result;
  Loc result_loc;
};

struct Decl {
  enum class Kind { Include, OpGroup, RuleSet, Compose, Extern, Def } kind;
  Loc loc;
  std::string name;                                // group / rule set name; include path
  std::vector<std::pair<std::string, Loc>> names;  // OpGroup members; Compose parts
  SetKind set_kind = SetKind::Rules;
  std::vector<Member> members;
  ExternFn fn;                                           // Extern
  ExprPtr body;                                          // Def: `def name(names...) = body`
  std::vector<std::pair<std::string, Loc>> param_types;  // Def: per parameter, "" when untyped
};

struct FileAst {
  const SourceFile* source = nullptr;
  std::vector<Decl> decls;
};

}  // namespace tinyrw::rw
