// The checked, resolved form of a .rw program that both executors run.
//
// Resolution checks every name against the op table, the dtypes, the helpers and the captures,
// infers expression types, and expands what the matchers never see: `for` loops, alternatives
// (`||`), commutative sources (`[a, b]`), optional wrappers (`Cast?(x)`) and rule-set
// composition. Each expansion ("variant") keeps its rule's source location.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dsl/ast.h"
#include "dsl/parse.h"
#include "dsl/value.h"

namespace tinyrw::rw {

// A dtype constraint: a group (int, uint, sint, float, bool, index, ...) or one exact dtype.
struct DTypeFilter {
  enum class Kind : uint8_t {
    Any,
    Exact,
    Int,
    UInt,
    SInt,
    Float,
    Bool,
    Index,
    Void,
    Ptr
  } kind = Kind::Any;
  DType exact;
  bool accepts(DType d) const;
  bool subset_of(const DTypeFilter& o) const;  // conservative
  std::string str() const;
  bool operator==(const DTypeFilter& o) const { return kind == o.kind && exact == o.exact; }
};
std::optional<DTypeFilter> dtype_filter_from_name(std::string_view name);

// Rule variants over every rule set of one program, after `for` loops, alternatives and
// `use`/composition are expanded, and separately the repetitions of `for` bodies; a program past
// either is an error (the rule-set expansion limit).
inline constexpr size_t kMaxExpandedRules = 100000;

// A resolved arg pattern: a literal, a binding (slot), anything, or a tuple of these.
struct ArgMatch {
  enum class Kind : uint8_t { Any, Literal, Bind, Tuple } kind = Kind::Any;
  Arg literal;
  int slot = -1;
  std::vector<ArgMatch> items;
  bool operator==(const ArgMatch& o) const;
};
bool arg_literal_matches(const Arg& literal, const Arg& actual);  // numbers compare by value

// One node of a resolved pattern variant.
struct MatchNode {
  enum class Sources : uint8_t { Any, Exact, Prefix, Repeat };
  std::vector<int> slots;  // captures of this node (bound on first sight, compared after)
  bool any_op = true;
  OpSet ops;
  DTypeFilter dtype;
  ArgMatch arg;
  Sources sources = Sources::Any;
  std::vector<MatchNode> srcs;  // Exact/Prefix: one per position; Repeat: exactly one
  bool operator==(const MatchNode& o) const;
};

// What the checker knows of a UOp expression's dtype: its class, or nothing.
enum class DClass : uint8_t { Unknown, Bool, Int, Float };
std::string_view dclass_name(DClass c);

// A declared helper (`extern fn name(a: int) -> bool`): what the checker knows of a C++ helper
// without linking it. Calls are checked against it; the registered helper is found by name at
// run time (the interpreter) or by the generated code, which both check it matches.
struct HelperDecl {
  std::string name;
  std::vector<std::string> param_names;
  std::vector<Type> params;
  Type result = Type::Any;
  Loc loc;
};
// The declaration's type names: any, none, bool, int, float, string, uop, dtype, op, tuple, status.
std::optional<Type> helper_type_from_name(std::string_view name);
// Whether a registered helper agrees with its declaration (arity, each parameter's type and the
// result type); the mismatch in words otherwise.
std::optional<std::string> helper_mismatch(const HelperDecl& decl, const Helper& registered);
// A declared parameter's type accepts the argument's static type: the same type, anything of
// unknown type, and narrower numbers (a float takes an int or a bool, an int a bool).
bool param_accepts(Type param, Type actual);

// A comprehension's `for` target: a slot (-1 for `_`), or a tuple of targets to unpack.
struct RTarget {
  int slot = -1;
  bool is_tuple = false;
  std::vector<RTarget> items;
};
struct RCompClause {
  bool is_if = false;  // a filter; otherwise `for target in iterable`
  RTarget target;
};

// `def` functions: recursion is refused, and the expression levels one def's evaluation nests
// through the defs it calls (its body's depth, each call adding its callee's) are at most
// kMaxDefDepth, so evaluating a call stays shallow on the C++ stack (the def depth limit).
inline constexpr int kMaxDefDepth = 512;
struct ResolvedDef;

// A resolved expression: names are slots or constants, calls are bound to their targets.
struct RExpr {
  enum class K : uint8_t {
    Const,
    Slot,
    Binary,
    And,
    Or,
    Not,
    Neg,
    Invert,
    Member,
    Method,
    Index,
    Builtin,
    Construct,
    Helper,
    Tuple,
    Slice,    // kids: receiver, lo, hi, step
    Comp,     // kids[0] the element, kids[1 + i] the iterable or filter of comp[i]
    DefCall,  // def_(kids...)
    Cond,     // kids[0] if kids[1] else kids[2]: only the chosen branch is evaluated
  };
  K k = K::Const;
  Loc loc;
  Type type = Type::Any;
  DClass dclass = DClass::Unknown;  // UOps: the dtype class, when the checker can tell
  Value value;                      // Const
  int slot = -1;                    // Slot
  BinOp bop = BinOp::Add;
  std::optional<UOpProp> prop;       // Member: the UOp property of that name, if there is one
  std::string name;                  // Member, Method, Builtin, Helper
  Op op = Op::Noop;                  // Construct
  const Helper* helper = nullptr;    // Helper: the registered helper when linked (else at run time)
  const HelperDecl* decl = nullptr;  // Helper: its declaration
  const ResolvedDef* def = nullptr;  // DefCall
  std::vector<RExpr> kids;           // Method: receiver first
  std::vector<std::string> arg_names;
  std::vector<RCompClause> comp;  // Comp
  bool generator = false;         // Comp: f(x for x in t)'s argument (generator_use)
  // A value of a record type the checker knows (type Record; `c.arg` of a CALL is a CallInfo):
  // its name, so a field access on it is typed and checked at run time against it.
  std::string record;
};

// The builtins that take a generator's items as they are made, building no tuple:
// any(x for ...) and all(x for ...) stop at the first item that decides them, as Python's do (the
// items after it are never made; an error one of them would raise does not come), and
// sum(x for ...) adds each item as it comes (the sum builtin's value: from the first item, 0 for
// none). A list comprehension's argument (any([...])) is built whole first, as in Python.
enum class GeneratorUse : uint8_t { Any, All, Sum };
inline std::optional<GeneratorUse> generator_use(const RExpr& e) {
  if (e.k != RExpr::K::Builtin || e.kids.size() != 1 || !e.kids[0].generator) return std::nullopt;
  if (e.name == "any") return GeneratorUse::Any;
  if (e.name == "all") return GeneratorUse::All;
  if (e.name == "sum") return GeneratorUse::Sum;
  return std::nullopt;
}

// A `def name(params) = body`: params are slots 0..nparams-1, the body's comprehension
// variables follow.
struct ResolvedDef {
  std::string name;
  Loc loc;
  int nparams = 0;
  std::vector<Type> param_types;  // per parameter: as annotated (`x: uop`), Any when untyped
  std::vector<std::string> slot_names;
  RExpr body;
  Type item = Type::Any;  // a tuple body: the type of its items, when known
};

struct Step {
  bool is_let = false;  // let slot = expr; otherwise a guard
  int slot = -1;
  RExpr expr;
  // require(expr, "why"): where false, a verifier fails with `why`, and any other rule stops the
  // rewrite with the error `why` (raises)
  bool is_require = false;
  bool raises = false;
  std::string why;
  // the reason with its {name} placeholders: why_text[0] why_args[0] why_text[1] ... (why_text
  // has one more item); without placeholders why_text is {why}
  std::vector<std::string> why_text;
  std::vector<RExpr> why_args;
};

struct ResolvedRule {
  RuleInfo info;  // name "<set>#<rule>", the .rw file and line, the rule's text
  Loc loc;
  int rule_index = 0;  // position of the rule in its set (variants share it)
  int variant = 0;
  MatchNode root;
  std::vector<std::string> slot_names;
  std::vector<Step> steps;
  RExpr result;
  bool has_identity = false;  // a capture appears twice: the pattern compares nodes
  int gradient_slot = -1;     // gradient rules: the slot of `g`, the incoming gradient
};

struct ResolvedSet {
  std::string name;
  SetKind kind = SetKind::Rules;
  Loc loc;
  std::vector<ResolvedRule> rules;
};

struct ResolvedProgram {
  Program program;  // owns the sources and trees the rules point into
  std::map<std::string, ResolvedSet> sets;
  std::map<std::string, HelperDecl> helpers;       // declared helpers (`extern fn`), by name
  std::vector<std::unique_ptr<ResolvedDef>> defs;  // callees before their callers
  const ResolvedSet* find(std::string_view name) const;
};

// Resolves and checks a loaded program; errors and warnings (unused captures, rules that can
// never fire, duplicates) go to diags. Returns null when there are errors.
std::unique_ptr<ResolvedProgram> resolve(Program program, Diagnostics& diags);
// Loads, parses and resolves a file and its includes.
std::unique_ptr<ResolvedProgram> load_rules(const std::string& path, Diagnostics& diags);
std::unique_ptr<ResolvedProgram> load_rules_text(const std::string& path, std::string text,
                                                 Diagnostics& diags);

}  // namespace tinyrw::rw
