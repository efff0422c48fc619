// Values of .rw guards, lets and results, and the operations on them. Both executors use this
// one library: the interpreter through the resolved expression tree, generated matchers by
// calling these functions, so the two agree by construction on every operation.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/int128.h"
#include "ir/rewrite.h"
#include "ir/uop.h"

namespace tinyrw::rw {

// Static types the checker infers for expressions.
enum class Type : uint8_t {
  Any,
  None,
  Bool,
  Int,
  Float,
  String,
  UOp,
  DType,
  Op,
  Tuple,
  Status,
  Record,  // a record arg (CallInfo, ParamArg, ...): named fields, read as `x.arg.field`
};
std::string_view type_name(Type t);

class Value {
 public:
  enum class Kind : uint8_t {
    None,
    Bool,
    Int,
    Float,
    String,
    UOp,
    DType,
    Op,
    Tuple,
    Status,
    Record
  };

  Value() = default;
  static Value boolean(bool b) { return scalar(Kind::Bool, &Scalar::b, b); }
  static Value integer(i128 v) { return scalar(Kind::Int, &Scalar::i, v); }
  static Value real(double v) { return scalar(Kind::Float, &Scalar::f, v); }
  static Value string(std::string s);
  static Value uop(UOp u);
  static Value dtype(DType d) { return scalar(Kind::DType, &Scalar::d, d); }
  static Value op(Op o) { return scalar(Kind::Op, &Scalar::o, o); }
  static Value tuple(std::vector<Value> items);
  static Value ok();
  static Value fail(std::string message);
  static Value record(Arg a);           // a record arg (Arg::Kind::Record), kept whole
  static Value from_arg(const Arg& a);  // tuples become tuples of values
  static Value from_num(const Num& n);

  Kind kind() const { return kind_; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_uop() const { return kind_ == Kind::UOp; }
  bool is_number() const {
    return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool;
  }
  bool as_bool() const;  // truthiness of bools and numbers; errors for the rest
  i128 as_int() const { return kind_ == Kind::Int ? s_.i : as_int_other(); }
  double as_float() const;
  const std::string& as_string() const;
  const UOp& as_uop() const;
  DType as_dtype() const;
  Op as_op() const;
  const std::vector<Value>& items() const;
  const Arg& as_record() const;
  bool status_ok() const;
  Arg to_arg() const;  // for constants and args built by results
  std::string repr() const;
  std::string text() const;  // as a message shows it: a string's characters, else repr()
  bool operator==(const Value& o) const;  // UOps by identity, numbers by value
  // A tuple's first item equal to x (`x in t`, `t.index(x)`), or none. A long tuple looked up
  // again is hashed and the index kept for the next lookups: a rule that looks each lane of an
  // access up among all of them is linear in the lanes, not quadratic.
  std::optional<size_t> find(const Value& x) const;

 private:
  explicit Value(Kind kind) : kind_(kind) {}
  i128 as_int_other() const;  // a bool, else the type error
  union Scalar;
  // A value of a scalar kind, made inline: ints, bools and ops are made on every operation.
  template <class T>
  static Value scalar(Kind kind, T Scalar::*member, T x) {
    Value v(kind);
    v.s_.*member = x;
    return v;
  }
  // A value of `kind` with one member set: the shape of every factory.
  template <class Member, class T>
  static Value with(Kind kind, Member Value::*member, T&& x) {
    Value v(kind);
    v.*member = std::forward<T>(x);
    return v;
  }
  Kind kind_ = Kind::None;
  // The scalar of the kind (every read checks kind_ first): one slot instead of five keeps a Value
  // small, and values are copied on every operation.
  union Scalar {
    Scalar() : i(0) {}
    bool b;
    i128 i;
    double f;
    Op o;
    DType d;  // trivially copyable: here it costs no constructor call per Value
  } s_;
  UOp u_;
  // the tuple's items (Tuple), the text (String, a failed Status) or the Arg (Record); null
  // otherwise
  std::shared_ptr<const void> p_;
  const std::vector<Value>& items_ref() const {
    return *static_cast<const std::vector<Value>*>(p_.get());
  }
  const std::string* str_ptr() const { return static_cast<const std::string*>(p_.get()); }
};

// A require's reason: text[0] args[0] text[1] ..., each arg as text() shows it.
std::string reason_text(std::span<const std::string> text, std::span<const Value> args);

// Errors while evaluating a rule (a type error the checker could not see, a bad helper result).
class EvalError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// ---- operations
// ---------------------------------------------------------------------------------------

enum class BinOp : uint8_t {
  Add,
  Sub,
  Mul,
  FloorDiv,
  Mod,
  Div,
  And,
  Or,
  Xor,
  Shl,
  Shr,
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  In,    // `x in t`: membership in a tuple
  NotIn  // `x not in t`
};
std::optional<BinOp> binop_from(std::string_view text);
std::string_view binop_text(BinOp op);
// The ALU op that a binary operator builds between UOps (`//` FloorDiv, `%` FloorMod, `/` FDiv,
// `-` Sub, which UOp builds as a + b * -1); nullopt for comparisons, which .lt/.eq and so on
// build. The interpreter builds by it and the checker types by it.
std::optional<Op> uop_binop(BinOp op);

// < <= > >= on two numbers of one kind; nullopt for every other operator.
template <class T>
std::optional<Value> compare(BinOp op, T x, T y) {
  switch (op) {
    case BinOp::Lt:
      return Value::boolean(x < y);
    case BinOp::Le:
      return Value::boolean(x <= y);
    case BinOp::Gt:
      return Value::boolean(x > y);
    case BinOp::Ge:
      return Value::boolean(x >= y);
    default:
      return std::nullopt;
  }
}
// Numbers follow Python (floor // and %); UOp operands build nodes (numbers become constants of
// the UOp operand's dtype); == and != on UOps compare identity.
Value binary_general(BinOp op, const Value& a, const Value& b);
// + - * // % (Python floor semantics, saturating) and the comparisons of two ints; nullopt for
// every other operator and for a zero divisor (binary_general raises it).
inline std::optional<Value> int_binary(BinOp op, i128 x, i128 y) {
  switch (op) {
    case BinOp::Add:
      return Value::integer(sat_add(x, y));
    case BinOp::Sub:
      return Value::integer(sat_sub(x, y));
    case BinOp::Mul:
      return Value::integer(sat_mul(x, y));
    case BinOp::FloorDiv:
      return y == 0 ? std::nullopt : std::optional(Value::integer(floor_div(x, y)));
    case BinOp::Mod:
      return y == 0 ? std::nullopt : std::optional(Value::integer(floor_mod(x, y)));
    case BinOp::Eq:
      return Value::boolean(x == y);
    case BinOp::Ne:
      return Value::boolean(x != y);
    default:
      return compare(op, x, y);
  }
}
// Two ints, the most frequent operands of rule arithmetic, are computed inline.
inline Value binary(BinOp op, const Value& a, const Value& b) {
  if (a.kind() == Value::Kind::Int && b.kind() == Value::Kind::Int)
    if (auto v = int_binary(op, a.as_int(), b.as_int())) return *v;
  return binary_general(op, a, b);
}
// One step of sum() and prod(): the first item starts the total, so no `0 + x` or `1 * x` node is
// built. The builtins, the interpreter's generator sum and rwc's generated code all step with it.
inline void accumulate(std::optional<Value>& total, BinOp op, Value item) {
  total = total ? binary(op, *total, item) : std::move(item);
}
Value negate(const Value& a);
Value invert(const Value& a);  // ~x
// Properties and methods: x.vmin, x.src, x.replace(src: ...), d.is_int, ...
Value member(const Value& recv, std::string_view name);
// A UOp's properties by number: generated code names the property when it is compiled, so a
// UOp receiver is neither boxed into a Value nor looked up by name on each call.
enum class UOpProp : uint8_t {
  Op,
  DType,
  Arg,
  Tag,
  NSrc,
  VMin,
  VMax,
  Shape,
  Src,
  IsConst,
  Finite,
  MayWrap,
  MayRaise,
  Ranges,
  Base,
  Device
};
// The analyses of ir/ as UOp methods (x.terms(), x.divides(v), ...: docs/rw-language.md), by
// number, so generated code calls one without looking its name up.
enum class Analysis : uint8_t {
  Terms,
  Factors,
  Split,
  ConstFactor,
  Divides,
  DivideExact,
  PopConst,
  Substitute,
  Spine,
  ChainTerms,
  Precedes,
  Toposort,
  Under
};
std::optional<Analysis> analysis_from_name(std::string_view name);
// recv.name(args...) for the analysis; recv must be a UOp (else method()'s error).
Value analysis(const Value& recv, Analysis a, std::span<const Value> args);
std::optional<UOpProp> uop_prop_from_name(std::string_view name);
std::string_view uop_prop_name(UOpProp p);
Value uop_member(const UOp& u, UOpProp p);
// The same on a receiver of any kind (member(recv, name) unless it is a UOp), and typed forms
// that generated code uses where it knows the result's kind: recv.op, recv.vmin / recv.vmax, and
// recv.src[i] without building the tuple of sources. Each gives the value, or throws the error,
// that the generic member() and index() give.
Value member(const Value& recv, UOpProp p);
Op op_of(const Value& recv);
Num num_member(const Value& recv, UOpProp p);  // VMin or VMax
UOp src_item(const UOp& u, i128 i);
UOp src_item(const UOp& u, const Value& idx);
UOp src_item(const Value& recv, i128 i);
UOp src_item(const Value& recv, const Value& idx);
Value method(const Value& recv, std::string_view name, std::span<const Value> args,
             std::span<const std::string> arg_names);
Value index(const Value& recv, const Value& idx);

// ---- record args
// A record type the checker knows: its fields and their types, so `c.arg.kernel` of a CALL `c` is
// typed (bool) and a misspelt field is a check-time error. `op`: the op whose arg is always this
// record (CALL: CallInfo); Noop where the record has no op of its own or its fields may be absent.
struct RecordSchema {
  std::string_view name;
  Op op = Op::Noop;
  std::vector<std::pair<std::string_view, Type>> fields;
  std::optional<Type> field_type(std::string_view field) const;
  std::string field_list() const;  // "name, kernel, ..."
};
const RecordSchema* record_schema(std::string_view name);
const RecordSchema* record_schema_of(Op op);  // the record `op`'s arg always is, if any
bool is_record_field(std::string_view name);  // a field of some known record type
// recv.field of a record: its value, or an EvalError naming the record type and its fields.
// `expect` (a known record type's name, or empty) is what the checker typed recv as: a receiver
// of another kind or type, or a field whose value is not of its declared type, is an EvalError.
Value record_field(const Arg& recv, std::string_view field, std::string_view expect);
Value record_field(const Value& recv, std::string_view field, std::string_view expect);

// ---- the running rule set
// `rewritten(u)`: u rewritten once by the rule set that runs (RewriteContext::pm), none when no
// rule fires; `rewritten_fully(u)`: to a fixed point by a nested graph_rewrite (u itself when no
// rule fires). Builtins, since a rule cannot name the set it belongs to; outside a running
// rewrite (a rule applied alone) each is an EvalError.
// Calls nest on the C++ stack (a rule, the rule its node fires, ...): at most
// kMaxRewrittenDepth deep on one thread (the rewritten depth limit), past which it is an
// EvalError, not a stack overflow. rules/symbolic.rw nests at most log2 of a divisor (< 128).
// `rewritten_fully(u, "set")` rewrites u to a fixed point with another rule set, named by a string
// literal the checker finds among the loaded sets, in the running context: a rule that must try
// a rewrite of a subgraph with rules of its own and keep it only if it succeeds (tinygrad's
// reduce_collapse rewriting with pm_reduce_collapse). The executor that runs the rule runs the
// named set too: `named` finds it for the interpreter; null means the compiled sets.
inline constexpr int kMaxRewrittenDepth = 256;
using NamedRuleSets = std::function<const Matcher*(std::string_view)>;
Value rewritten(RewriteContext& ctx, const Value& u, bool fully, const Matcher* with = nullptr);
bool is_context_builtin(std::string_view name);  // rewritten, rewritten_fully
Value call_context_builtin(RewriteContext& ctx, std::string_view name, std::span<const Value> args,
                           const NamedRuleSets* named = nullptr);

// ---- tuples: slices, comprehensions
// Tuples that range(), repetition, concatenation and zip() build hold at most kMaxTupleSize items,
// and one evaluation of a comprehension runs its loop bodies at most that many times in all (the
// tuple size limit): past it, an EvalError.
inline constexpr size_t kMaxTupleSize = 65536;
// x.spine(op) gives at most kMaxSpineNodes nodes (UOp::spine's limit), so a rule searching a chain
// (combine_divmod_terms in rules/symbolic.rw) costs at most that many steps in a long sum.
inline constexpr size_t kMaxSpineNodes = 1024;
// t[lo:hi:step] as Python (negative bounds count from the end; none is the default).
Value slice(const Value& recv, const Value& lo, const Value& hi, const Value& step);
// The items a comprehension iterates over (a tuple), or an EvalError.
const std::vector<Value>& items_of(const Value& seq);
// The items of `v` for a destructuring target of n names (a tuple of exactly n items).
const std::vector<Value>& unpack(const Value& v, size_t n);
// Counts one run of a comprehension's loop body against the tuple size limit.
void comp_step(size_t& steps);
// The items of range(args...) as Python computes them: lo, lo + step, ... (n of them; past
// kMaxTupleSize an EvalError). The builtin and both executors' `for k in range(...)` loops (which
// build no tuple) share it.
struct RangeSpan {
  i128 lo = 0, step = 1;
  size_t n = 0;
  Value at(size_t i) const { return Value::integer(lo + static_cast<i128>(i) * step); }
};
RangeSpan range_span(std::span<const Value> args);
// The first item of enumerate(args...) (its optional start), checked as the builtin checks it.
i128 enumerate_start(std::span<const Value> args);
// Builtin functions (const_like, max, min, abs, uop, fail, ...), and op constructors (Add(a, b)).
Value call_builtin(std::string_view name, std::span<const Value> args,
                   std::span<const std::string> arg_names);
// The builtins by number: generated code names the builtin when it is compiled, so a call is not
// looked up by name each time (call_builtin(name, ...) is builtin_from_name, then this).
enum class Builtin : uint8_t {
  ConstLike,
  Max,
  Min,
  Abs,
  Len,
  Int,
  Float,
  Select,
  Fail,
  Uop,
  Zip,
  Enumerate,
  Range,
  Sum,
  Prod,
  All,
  Any,
  Argsort,
  Tuple,
  Fold,
  TypeOf
};
std::optional<Builtin> builtin_from_name(std::string_view name);
std::string_view builtin_name(Builtin b);
Value call_builtin(Builtin b, std::span<const Value> args, std::span<const std::string> arg_names);
// select(c, a, b) as call_builtin gives it, without the builtin's dispatch (generated code).
inline Value select_of(const std::array<Value, 3>& args) {
  if (args[0].is_uop()) return call_builtin(Builtin::Select, args, {});
  return args[0].as_bool() ? args[1] : args[2];
}
Value construct(Op op, std::span<const Value> args);

// The static type of a member/method/builtin, for the checker; nullopt when the name is unknown.
std::optional<Type> member_type(Type recv, std::string_view name, bool is_call);
std::optional<Type> builtin_type(std::string_view name);
bool is_builtin(std::string_view name);

// ---- typed values
// Whether a value fits a declared type (`x: uop` of a def, an `extern fn` parameter): its kind,
// with an int or bool also a float and a bool also an int; `any` takes everything.
bool value_has_type(const Value& v, Type t);
// A typed def parameter at run time: an EvalError naming the def, the argument and both types.
void check_def_arg(const Value& v, Type t, std::string_view def, size_t index,
                   std::string_view param);

// ---- C++ helpers callable from rules
// ------------------------------------------------------------------

using HelperFn = std::function<Value(RewriteContext&, std::span<const Value>)>;
struct Helper {
  std::string name;
  int min_args = 0;
  int max_args = 0;
  Type result = Type::Any;  // UOp helpers may return None for "no rewrite"
  HelperFn fn;
  // The type of each parameter (max_args of them), as its `extern fn` line declares it: the
  // checker and generated code compare them, so a declaration cannot drift from its C++.
  std::vector<Type> params;
};
// How a registered helper's parameter and result types differ from a declaration's, in words
// ("argument 2 is declared int, registered uop"); nullopt when they agree.
std::optional<std::string> helper_signature_mismatch(const Helper& h, std::span<const Type> params,
                                                     Type result);
// Registers a helper once (at static initialization); a second registration of a name throws.
void register_helper(Helper helper);
const Helper* find_helper(std::string_view name);
std::vector<const Helper*> all_helpers();

// `HelperRegistrar kGcd({"gcd", 2, 2, Type::Int, fn}, {Type::Int, Type::Int})`: the helper, then
// each parameter's type (or a Helper whose `params` are set already). What a helper gives is
// documented where rules read it, at its `extern fn` line in rules/prelude.rw.
struct HelperRegistrar {
  explicit HelperRegistrar(Helper h) { register_helper(std::move(h)); }
  HelperRegistrar(Helper h, std::vector<Type> params) {
    h.params = std::move(params);
    register_helper(std::move(h));
  }
};

}  // namespace tinyrw::rw
