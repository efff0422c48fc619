#include "dsl/value.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <map>
#include <optional>
#include <type_traits>
#include <unordered_map>

#include <fmt/format.h>

#include "dsl/compiled.h"
#include "ir/builders.h"
#include "ir/graph.h"
#include "ir/hash.h"
#include "ir/rewrite.h"

namespace tinyrw::rw {

std::string_view type_name(Type t) {
  switch (t) {
    case Type::Any:
      return "any";
    case Type::None:
      return "none";
    case Type::Bool:
      return "bool";
    case Type::Int:
      return "int";
    case Type::Float:
      return "float";
    case Type::String:
      return "string";
    case Type::UOp:
      return "UOp";
    case Type::DType:
      return "dtype";
    case Type::Op:
      return "op";
    case Type::Tuple:
      return "tuple";
    case Type::Record:
      return "record";
    case Type::Status:
      return "verifier status";
  }
  return "?";
}

// ---- Value
// ------------------------------------------------------------------------------------------

// Value keeps its dtype in the scalar union, which copies it bytewise.
static_assert(std::is_trivially_copyable_v<DType> && std::is_trivially_destructible_v<DType>);

Value Value::string(std::string s) {
  return with(Kind::String, &Value::p_,
              std::shared_ptr<const void>(std::make_shared<const std::string>(std::move(s))));
}
Value Value::uop(UOp u) {
  if (!u) return Value();
  return with(Kind::UOp, &Value::u_, std::move(u));
}
Value Value::tuple(std::vector<Value> items) {
  return with(
      Kind::Tuple, &Value::p_,
      std::shared_ptr<const void>(std::make_shared<const std::vector<Value>>(std::move(items))));
}
Value Value::ok() {
  Value v(Kind::Status);
  v.s_.b = true;
  return v;
}
Value Value::fail(std::string message) {
  Value v(Kind::Status);
  v.s_.b = false;
  v.p_ = std::make_shared<const std::string>(std::move(message));
  return v;
}
Value Value::record(Arg a) {
  if (!a.is_record()) throw std::logic_error("Value::record of a non-record arg");
  return with(Kind::Record, &Value::p_,
              std::shared_ptr<const void>(std::make_shared<const Arg>(std::move(a))));
}
Value Value::from_arg(const Arg& a) {
  switch (a.kind()) {
    case Arg::Kind::None:
    case Arg::Kind::Invalid:
      return Value();
    case Arg::Kind::Int:
      return integer(a.as_int());
    case Arg::Kind::Float:
      return real(a.as_float());
    case Arg::Kind::Bool:
      return boolean(a.as_bool());
    case Arg::Kind::String:
      return string(a.as_string());
    case Arg::Kind::DType:
      return dtype(a.as_dtype());
    case Arg::Kind::Op:
      return op(a.as_op());
    case Arg::Kind::Tuple: {
      std::vector<Value> items;
      for (const Arg& x : a.items()) items.push_back(from_arg(x));
      return tuple(std::move(items));
    }
    case Arg::Kind::Record:
      return record(a);
  }
  return Value();
}
Value Value::from_num(const Num& n) { return n.is_float ? real(n.f) : integer(n.i); }

namespace {
[[noreturn]] void type_error(std::string_view want, const Value& got) {
  throw EvalError(fmt::format("expected {}, got {}", want, got.repr()));
}
}  // namespace

bool Value::as_bool() const {
  switch (kind_) {
    case Kind::Bool:
      return s_.b;
    case Kind::Int:
      return s_.i != 0;
    case Kind::Float:
      return s_.f != 0;
    case Kind::Status:
      return s_.b;
    default:
      type_error("a bool", *this);
  }
}
i128 Value::as_int_other() const {
  if (kind_ == Kind::Bool) return s_.b;
  type_error("an int", *this);
}
double Value::as_float() const {
  if (kind_ == Kind::Float) return s_.f;
  if (kind_ == Kind::Int) return static_cast<double>(s_.i);
  if (kind_ == Kind::Bool) return s_.b;
  type_error("a number", *this);
}
const std::string& Value::as_string() const {
  if (kind_ != Kind::String && !(kind_ == Kind::Status && p_)) type_error("a string", *this);
  return *str_ptr();
}
const UOp& Value::as_uop() const {
  if (kind_ != Kind::UOp) type_error("a UOp", *this);
  return u_;
}
DType Value::as_dtype() const {
  if (kind_ != Kind::DType) type_error("a dtype", *this);
  return s_.d;
}
Op Value::as_op() const {
  if (kind_ != Kind::Op) type_error("an op", *this);
  return s_.o;
}
const std::vector<Value>& Value::items() const {
  if (kind_ != Kind::Tuple) type_error("a tuple", *this);
  return items_ref();
}
const Arg& Value::as_record() const {
  if (kind_ != Kind::Record) type_error("a record", *this);
  return *static_cast<const Arg*>(p_.get());
}
bool Value::status_ok() const {
  if (kind_ == Kind::Status) return s_.b;
  return as_bool();
}

Arg Value::to_arg() const {
  switch (kind_) {
    case Kind::None:
      return Arg();
    case Kind::Bool:
      return Arg::boolean(s_.b);
    case Kind::Int:
      return Arg::integer(s_.i);
    case Kind::Float:
      return Arg::real(s_.f);
    case Kind::String:
      return Arg::string(*str_ptr());
    case Kind::DType:
      return Arg::dtype(s_.d);
    case Kind::Op:
      return Arg::op(s_.o);
    case Kind::Tuple: {
      std::vector<Arg> items;
      for (const Value& v : items_ref()) items.push_back(v.to_arg());
      return Arg::tuple(std::move(items));
    }
    case Kind::Record:
      return as_record();
    default:
      type_error("a value usable as an arg", *this);
  }
}

std::string Value::repr() const {
  switch (kind_) {
    case Kind::None:
      return "none";
    case Kind::Bool:
      return s_.b ? "True" : "False";
    case Kind::Int:
      return to_string(s_.i);
    case Kind::Float:
      return Arg::real(s_.f).repr();
    case Kind::String:
      return Arg::string(*str_ptr()).repr();
    case Kind::UOp:
      return u_.repr(1);
    case Kind::DType:
      return s_.d.repr();
    case Kind::Op:
      return std::string(op_name(s_.o));
    case Kind::Tuple: {
      std::string out = "(";
      const std::vector<Value>& items = items_ref();
      for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i].repr();
      return out + (items.size() == 1 ? ",)" : ")");
    }
    case Kind::Status:
      return s_.b ? "ok" : "fail(" + (p_ ? *str_ptr() : "") + ")";
    case Kind::Record:
      return as_record().repr();
  }
  return "?";
}

std::string Value::text() const { return kind_ == Kind::String ? *str_ptr() : repr(); }

std::string reason_text(std::span<const std::string> text, std::span<const Value> args) {
  std::string out = text.empty() ? std::string() : text[0];
  for (size_t i = 0; i < args.size() && i + 1 < text.size(); ++i)
    out += args[i].text() + text[i + 1];
  return out;
}

bool Value::operator==(const Value& o) const {
  if (is_number() && o.is_number()) {
    if (kind_ == Kind::Float || o.kind_ == Kind::Float) return as_float() == o.as_float();
    return as_int() == o.as_int();
  }
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::None:
      return true;
    case Kind::String:
      return *str_ptr() == *o.str_ptr();
    case Kind::UOp:
      return u_ == o.u_;
    case Kind::DType:
      return s_.d == o.s_.d;
    case Kind::Op:
      return s_.o == o.s_.o;
    case Kind::Tuple:
      return items_ref() == o.items_ref();
    case Kind::Status:
      return s_.b == o.s_.b;
    case Kind::Record:
      return as_record() == o.as_record();
    default:
      return false;
  }
}

namespace {
// A hash that agrees with Value::operator==: numbers equal across kinds (1, 1.0, True) hash
// alike, UOps by identity, tuples item by item.
size_t value_hash(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Bool:
    case Value::Kind::Int:
    case Value::Kind::Float: {
      // by the double: equal numbers of any kinds compare as doubles or as equal ints (whose
      // doubles are equal too); -0.0 == 0.0
      const double f = v.as_float();
      return std::hash<double>{}(f == 0 ? 0.0 : f);
    }
    case Value::Kind::String:
      return std::hash<std::string>{}(v.as_string());
    case Value::Kind::UOp:
      return std::hash<UOp>{}(v.as_uop());
    case Value::Kind::DType:
      return v.as_dtype().hash();
    case Value::Kind::Op:
      return static_cast<size_t>(v.as_op());
    case Value::Kind::Tuple: {
      size_t h = 0x7475706cULL;
      for (const Value& x : v.items()) h = hash_mix(h, value_hash(x));
      return h;
    }
    case Value::Kind::Status:
      return v.status_ok() ? 1 : 2;
    case Value::Kind::Record:
      return v.as_record().hash();
    default:
      return 0;
  }
}

// The hashed indexes of the tuples looked up last: item hash -> the item positions, ascending. A
// tuple's first lookup scans it (a tuple looked up once costs no index); its second builds the
// index. Each entry knows its tuple by a weak pointer (a tuple it indexed is not kept alive, nor
// its UOps, and its control block outlives it, so no later tuple is mistaken for it).
constexpr size_t kHashedTupleMin = 32;
struct TupleIndex {
  std::weak_ptr<const void> tuple;
  bool built = false;
  std::unordered_map<size_t, std::vector<size_t>> positions;
};
thread_local std::array<TupleIndex, 4> t_tuple_indexes;
thread_local size_t t_next_tuple_index = 0;
}  // namespace

std::optional<size_t> Value::find(const Value& x) const {
  const std::vector<Value>& xs = items();
  auto scan = [&]() -> std::optional<size_t> {
    for (size_t i = 0; i < xs.size(); ++i)
      if (xs[i] == x) return i;
    return std::nullopt;
  };
  if (xs.size() < kHashedTupleMin) return scan();
  TupleIndex* index = nullptr;
  for (TupleIndex& t : t_tuple_indexes)
    if (!t.tuple.owner_before(p_) && !p_.owner_before(t.tuple)) index = &t;
  if (!index) {  // first lookup: remembered, scanned
    TupleIndex& t = t_tuple_indexes[t_next_tuple_index++ % t_tuple_indexes.size()];
    t.tuple = p_;
    t.built = false;
    t.positions.clear();
    return scan();
  }
  if (!index->built) {
    for (size_t i = 0; i < xs.size(); ++i) index->positions[value_hash(xs[i])].push_back(i);
    index->built = true;
  }
  const auto it = index->positions.find(value_hash(x));
  if (it != index->positions.end())
    for (size_t i : it->second)
      if (xs[i] == x) return i;
  return std::nullopt;
}

// ---- operators
// ----------------------------------------------------------------------------------------

std::optional<BinOp> binop_from(std::string_view t) {
  static const std::pair<std::string_view, BinOp> kOps[] = {
      {"+", BinOp::Add}, {"-", BinOp::Sub},  {"*", BinOp::Mul},       {"//", BinOp::FloorDiv},
      {"%", BinOp::Mod}, {"/", BinOp::Div},  {"&", BinOp::And},       {"|", BinOp::Or},
      {"^", BinOp::Xor}, {"<<", BinOp::Shl}, {">>", BinOp::Shr},      {"==", BinOp::Eq},
      {"!=", BinOp::Ne}, {"<", BinOp::Lt},   {"<=", BinOp::Le},       {">", BinOp::Gt},
      {">=", BinOp::Ge}, {"in", BinOp::In},  {"not in", BinOp::NotIn}};
  for (const auto& [text, op] : kOps)
    if (text == t) return op;
  return std::nullopt;
}

std::string_view binop_text(BinOp op) {
  static const char* kText[] = {"+",  "-",  "*",  "//", "%",  "/", "&",  "|",  "^",     "<<",
                                ">>", "==", "!=", "<",  "<=", ">", ">=", "in", "not in"};
  return kText[static_cast<size_t>(op)];
}

std::optional<Op> uop_binop(BinOp op) {
  switch (op) {
    case BinOp::Add:
      return Op::Add;
    case BinOp::Sub:
      return Op::Sub;
    case BinOp::Mul:
      return Op::Mul;
    case BinOp::FloorDiv:
      return Op::FloorDiv;
    case BinOp::Mod:
      return Op::FloorMod;
    case BinOp::Div:
      return Op::FDiv;
    case BinOp::And:
      return Op::And;
    case BinOp::Or:
      return Op::Or;
    case BinOp::Xor:
      return Op::Xor;
    case BinOp::Shl:
      return Op::Shl;
    case BinOp::Shr:
      return Op::Shr;
    default:
      return std::nullopt;
  }
}

namespace {

UOp as_operand(const Value& v, const UOp& like) {
  if (v.is_uop()) return v.as_uop();
  if (v.kind() == Value::Kind::Float) return like.const_like(v.as_float());
  if (v.is_number()) return like.const_like(v.as_int());
  type_error("a UOp or a number", v);
}

Value uop_binary(BinOp op, const Value& a, const Value& b) {
  const UOp& like = a.is_uop() ? a.as_uop() : b.as_uop();
  const UOp x = as_operand(a, like), y = as_operand(b, like);
  switch (op) {  // comparisons build CmpLt (le/gt/ge as the methods build them)
    case BinOp::Lt:
      return Value::uop(x.lt(y));
    case BinOp::Le:
      return Value::uop(x.le(y));
    case BinOp::Gt:
      return Value::uop(x.gt(y));
    case BinOp::Ge:
      return Value::uop(x.ge(y));
    default:
      break;
  }
  const std::optional<Op> alu = uop_binop(op);
  if (!alu) throw EvalError(fmt::format("'{}' does not apply to UOps", binop_text(op)));
  return Value::uop(*alu == Op::Sub ? x - y : x.alu(*alu, {y}));
}

}  // namespace

namespace {

[[noreturn]] void too_large(std::string_view what, i128 n) {
  throw EvalError(fmt::format("{} of {} items (more than {}: the tuple size limit)", what,
                              to_string(n), kMaxTupleSize));
}

// `t + u` joins two tuples, `t * n` and `n * t` repeat one; nullopt for other operands.
std::optional<Value> tuple_binary(BinOp op, const Value& a, const Value& b) {
  const bool ta = a.kind() == Value::Kind::Tuple, tb = b.kind() == Value::Kind::Tuple;
  if (op == BinOp::Add && ta && tb) {
    const size_t n = a.items().size() + b.items().size();
    if (n > kMaxTupleSize) too_large("a tuple", static_cast<i128>(n));
    std::vector<Value> out(a.items());
    out.insert(out.end(), b.items().begin(), b.items().end());
    return Value::tuple(std::move(out));
  }
  if (op == BinOp::Mul && ta != tb) {
    const Value& t = ta ? a : b;
    const Value& count = ta ? b : a;
    if (count.kind() != Value::Kind::Int && count.kind() != Value::Kind::Bool) return std::nullopt;
    const i128 k = std::max<i128>(count.as_int(), 0);
    const i128 n = sat_mul(k, static_cast<i128>(t.items().size()));  // () * 10**30 is ()
    if (n > static_cast<i128>(kMaxTupleSize)) too_large("a tuple", n);
    std::vector<Value> out;
    out.reserve(static_cast<size_t>(n));
    for (i128 i = 0; i < k && !t.items().empty(); ++i)
      out.insert(out.end(), t.items().begin(), t.items().end());
    return Value::tuple(std::move(out));
  }
  return std::nullopt;
}

}  // namespace

Value binary_general(BinOp op, const Value& a, const Value& b) {
  if (op == BinOp::Eq) return Value::boolean(a == b);
  if (op == BinOp::Ne) return Value::boolean(!(a == b));
  if (op == BinOp::In || op == BinOp::NotIn) {
    const bool in = op == BinOp::In;
    if (b.kind() != Value::Kind::Tuple)
      throw EvalError(
          fmt::format("'{}' needs a tuple on the right, got {}", binop_text(op), b.repr()));
    return Value::boolean(b.find(a).has_value() == in);
  }
  if (a.kind() == Value::Kind::Tuple || b.kind() == Value::Kind::Tuple) {
    if (auto t = tuple_binary(op, a, b)) return *t;
  }
  if (a.is_uop() || b.is_uop()) return uop_binary(op, a, b);
  if (!a.is_number() || !b.is_number()) {
    throw EvalError(
        fmt::format("'{}' needs numbers, got {} and {}", binop_text(op), a.repr(), b.repr()));
  }
  const bool is_float = a.kind() == Value::Kind::Float || b.kind() == Value::Kind::Float;
  if (is_float) {
    const double x = a.as_float(), y = b.as_float();
    if (y == 0 && (op == BinOp::Div || op == BinOp::FloorDiv || op == BinOp::Mod)) {
      throw EvalError("float division by zero");  // as Python
    }
    if (auto c = compare(op, x, y)) return *c;
    switch (op) {
      case BinOp::Add:
        return Value::real(x + y);
      case BinOp::Sub:
        return Value::real(x - y);
      case BinOp::Mul:
        return Value::real(x * y);
      case BinOp::Div:
        return Value::real(x / y);
      case BinOp::FloorDiv:
        return Value::real(std::floor(x / y));
      case BinOp::Mod:
        return Value::real(x - std::floor(x / y) * y);
      default:
        throw EvalError(fmt::format("'{}' needs integers", binop_text(op)));
    }
  }
  const i128 x = a.as_int(), y = b.as_int();
  const bool both_bool = a.kind() == Value::Kind::Bool && b.kind() == Value::Kind::Bool;
  if (auto v = int_binary(op, x, y)) return *v;
  switch (op) {
    case BinOp::FloorDiv:
    case BinOp::Mod:  // by zero: int_binary gives every other quotient
      throw EvalError("integer division by zero");
    case BinOp::Div:
      if (y == 0) throw EvalError("division by zero");
      return Value::real(static_cast<double>(x) / static_cast<double>(y));
    case BinOp::And:
      return both_bool ? Value::boolean(x & y) : Value::integer(x & y);
    case BinOp::Or:
      return both_bool ? Value::boolean(x | y) : Value::integer(x | y);
    case BinOp::Xor:
      return both_bool ? Value::boolean(x ^ y) : Value::integer(x ^ y);
    case BinOp::Shl:
      if (y < 0 || y > 120) throw EvalError("shift count out of range");
      return Value::integer(sat_mul(x, static_cast<i128>(1) << static_cast<int>(y)));
    case BinOp::Shr:
      if (y < 0 || y > 120) throw EvalError("shift count out of range");
      return Value::integer(floor_div(x, static_cast<i128>(1) << static_cast<int>(y)));
    default:
      break;
  }
  throw EvalError("bad operator");
}

Value negate(const Value& a) {
  if (a.is_uop()) return Value::uop(-a.as_uop());
  if (a.kind() == Value::Kind::Float) return Value::real(-a.as_float());
  return Value::integer(sat_neg(a.as_int()));
}

Value invert(const Value& a) {
  if (a.is_uop()) return Value::uop(a.as_uop() ^ a.as_uop().const_like(static_cast<i128>(-1)));
  return Value::integer(-a.as_int() - 1);
}

// ---- members and methods
// -------------------------------------------------------------------------------

namespace {

Value shape_value(const UOp& u) {
  std::vector<Value> dims;
  for (const SInt& d : u.shape())
    dims.push_back(d.is_int() ? Value::integer(d.value()) : Value::uop(d.uop()));
  return Value::tuple(std::move(dims));
}

// The enumerator named `name` in `names`, a table of an enum's names in enumerator order.
template <class E, size_t N>
std::optional<E> enum_from_name(const std::string_view (&names)[N], std::string_view name) {
  for (size_t i = 0; i < N; ++i)
    if (names[i] == name) return static_cast<E>(i);
  return std::nullopt;
}

constexpr std::string_view kUOpProps[] = {
    "op",  "dtype",    "arg",    "tag",      "nsrc",      "vmin",   "vmax", "shape",
    "src", "is_const", "finite", "may_wrap", "may_raise", "ranges", "base", "device"};
static_assert(std::size(kUOpProps) == static_cast<size_t>(UOpProp::Device) + 1);

}  // namespace

std::optional<UOpProp> uop_prop_from_name(std::string_view name) {
  return enum_from_name<UOpProp>(kUOpProps, name);
}
std::string_view uop_prop_name(UOpProp p) { return kUOpProps[static_cast<size_t>(p)]; }

Value uop_member(const UOp& u, UOpProp p) {
  switch (p) {
    case UOpProp::Op:
      return Value::op(u.op());
    case UOpProp::DType:
      return Value::dtype(u.dtype());
    case UOpProp::Arg:
      return Value::from_arg(u.arg());
    case UOpProp::Tag:
      return Value::from_arg(u.tag());
    case UOpProp::NSrc:
      return Value::integer(static_cast<i128>(u.nsrc()));
    case UOpProp::VMin:
      return Value::from_num(u.vmin());
    case UOpProp::VMax:
      return Value::from_num(u.vmax());
    case UOpProp::Shape:
      return shape_value(u);
    case UOpProp::Src: {
      std::vector<Value> s;
      s.reserve(u.nsrc());
      for (const UOp& x : u.src()) s.push_back(Value::uop(x));
      return Value::tuple(std::move(s));
    }
    case UOpProp::IsConst:
      return Value::boolean(u.op() == Op::Const);
    case UOpProp::Finite:
      return Value::boolean(!u.vmin().is_infinite() && !u.vmax().is_infinite());
    case UOpProp::MayWrap:
      return Value::boolean(u.may_wrap());
    case UOpProp::MayRaise:
      return Value::boolean(may_raise(u));
    case UOpProp::Base:
      return Value::uop(movement_base(u));
    case UOpProp::Device:
      return Value::from_arg(u.device());
    case UOpProp::Ranges: {
      std::vector<Value> out;
      for (UOp& r : open_ranges(u)) out.push_back(Value::uop(std::move(r)));
      return Value::tuple(std::move(out));
    }
  }
  return Value();
}

Value member(const Value& recv, UOpProp p) {
  if (recv.is_uop()) return uop_member(recv.as_uop(), p);
  return member(recv, uop_prop_name(p));
}

Op op_of(const Value& recv) {
  if (recv.is_uop()) return recv.as_uop().op();
  return member(recv, UOpProp::Op).as_op();  // only a UOp has an op: this throws member's error
}

Num num_member(const Value& recv, UOpProp p) {
  if (recv.is_uop()) return p == UOpProp::VMin ? recv.as_uop().vmin() : recv.as_uop().vmax();
  const Value v = member(recv, p);  // only a UOp has bounds: this throws member's error
  return v.kind() == Value::Kind::Float ? Num::of_float(v.as_float()) : Num::of(v.as_int());
}

UOp src_item(const UOp& u, i128 i) {
  const i128 n = static_cast<i128>(u.nsrc());
  const i128 at = i < 0 ? i + n : i;
  if (at >= 0 && at < n) return u.src()[static_cast<size_t>(at)];
  return index(uop_member(u, UOpProp::Src), Value::integer(i)).as_uop();  // index's error
}

UOp src_item(const UOp& u, const Value& idx) {
  if (idx.kind() == Value::Kind::Int || idx.kind() == Value::Kind::Bool)
    return src_item(u, idx.as_int());
  return index(uop_member(u, UOpProp::Src), idx).as_uop();  // index's error
}

UOp src_item(const Value& recv, i128 i) {
  if (recv.is_uop()) return src_item(recv.as_uop(), i);
  return index(member(recv, UOpProp::Src), Value::integer(i)).as_uop();  // member's error
}

UOp src_item(const Value& recv, const Value& idx) {
  if (recv.is_uop()) return src_item(recv.as_uop(), idx);
  return index(member(recv, UOpProp::Src), idx).as_uop();  // member's error
}

namespace {

Value dtype_member(DType d, std::string_view name) {
  if (name == "is_int") return Value::boolean(d.is_int());
  if (name == "is_float") return Value::boolean(d.is_float());
  if (name == "is_unsigned") return Value::boolean(d.is_unsigned());
  if (name == "is_bool") return Value::boolean(d.is_bool());
  if (name == "is_index") return Value::boolean(d.is_index());
  if (name == "is_ptr") return Value::boolean(d.is_ptr());
  if (name == "count") return Value::integer(d.count());
  if (name == "itemsize") return Value::integer(d.itemsize());
  if (name == "scalar") return Value::dtype(d.scalar_type());
  if (name == "base") return Value::dtype(d.base());
  if (name == "min") return d.is_float() ? Value::real(d.float_min()) : Value::integer(d.int_min());
  if (name == "max") return d.is_float() ? Value::real(d.float_max()) : Value::integer(d.int_max());
  throw EvalError(fmt::format("dtype has no property '{}'", name));
}

const Value* named(std::span<const Value> args, std::span<const std::string> names,
                   std::string_view key) {
  for (size_t i = 0; i < args.size(); ++i)
    if (i < names.size() && names[i] == key) return &args[i];
  return nullptr;
}

void expect_args(std::string_view fn, std::span<const Value> args, size_t lo, size_t hi) {
  if (args.size() < lo || args.size() > hi) {
    throw EvalError(fmt::format("{} takes {} argument{}, got {}", fn,
                                lo == hi ? std::to_string(lo) : fmt::format("{} to {}", lo, hi),
                                hi == 1 ? "" : "s", args.size()));
  }
}

std::vector<UOp> uop_list(const Value& v) {
  std::vector<UOp> out;
  for (const Value& x : v.items()) out.push_back(x.as_uop());
  return out;
}

int64_t size_value(const Value& v) {
  const i128 i = v.as_int();
  if (i < INT64_MIN || i > INT64_MAX)
    throw EvalError(fmt::format("size {} is out of range", to_string(i)));
  return static_cast<int64_t>(i);
}

// The builders of ir/builders.h as UOp methods: a UOp argument stays one; a variadic builder
// (index, after, reduce_over) also takes its UOps as one tuple, spread in place (an empty one
// too: a 0-d index); elsewhere a tuple holding a UOp is a symbolic shape (its ints and UOps as one
// shape UOp), and any other value its Arg.
Value call_builder(const UOpBuilder& b, const UOp& u, std::span<const Value> args) {
  std::vector<BuilderArg> bargs;
  for (const Value& v : args) {
    if (v.is_uop()) {
      bargs.emplace_back(v.as_uop());
    } else if (v.kind() != Value::Kind::Tuple) {
      bargs.emplace_back(v.to_arg());
    } else if (b.max_args == SIZE_MAX) {
      for (const Value& x : v.items()) bargs.emplace_back(x.as_uop());
    } else if (std::none_of(v.items().begin(), v.items().end(),
                            [](const Value& x) { return x.is_uop(); })) {
      bargs.emplace_back(v.to_arg());
    } else {
      Shape s;
      for (const Value& x : v.items())
        s.push_back(x.is_uop() ? SInt(x.as_uop()) : SInt(size_value(x)));
      bargs.emplace_back(shape_to_uop(s));
    }
  }
  try {
    return Value::uop(call_uop_builder(b.name, u, bargs));
  } catch (const GraphError& e) {
    throw EvalError(e.what());  // reported with the rule's location
  }
}

// The analyses of ir/terms.cpp as UOp methods: terms(), factors(), split(op), const_factor(),
// divides(v), divide_exact(y), pop_const(op), spine(op); precedes(y) (ir/order.cpp); and
// substitute(pairs) (ir/rewrite.h). A UOp they cannot give is none, and so are the terms or
// factors past kMaxTupleSize (a loop over them would pass the limit).
constexpr std::string_view kAnalysisNames[] = {
    "terms",      "factors", "split",       "const_factor", "divides",  "divide_exact", "pop_const",
    "substitute", "spine",   "chain_terms", "precedes",     "toposort", "under"};
static_assert(std::size(kAnalysisNames) == static_cast<size_t>(Analysis::Under) + 1);

}  // namespace

std::optional<Analysis> analysis_from_name(std::string_view name) {
  return enum_from_name<Analysis>(kAnalysisNames, name);
}

// An op, or a tuple of ops (the nodes a gated walk does not enter).
static std::vector<Op> op_list(const Value& v) {
  if (v.kind() != Value::Kind::Tuple) return {v.as_op()};
  std::vector<Op> ops;
  for (const Value& o : v.items()) ops.push_back(o.as_op());
  return ops;
}

Value analysis(const Value& recv, Analysis a, std::span<const Value> args) {
  const UOp& u = recv.as_uop();
  const std::string_view name = kAnalysisNames[static_cast<size_t>(a)];
  auto maybe = [](UOp r) { return r ? Value::uop(std::move(r)) : Value(); };
  auto parts = [&](Op sep) {  // none past the tuple size limit: a rule leaves such a sum alone
    // The last few splits are kept: the divmod rules each ask one node for its terms in turn, and
    // symbolic.rw's bounds over both sides of a max or < ask two or three nodes by turns. Nodes
    // are immutable, so a tuple stays right; it keeps up to kKept nodes alive per thread.
    constexpr size_t kKept = 8;
    struct Kept {
      UOp node;
      Op sep = Op::Noop;
      Value parts;
    };
    thread_local std::array<Kept, kKept> kept;
    thread_local size_t next = 0;  // the slot the next split replaces (the oldest)
    for (const Kept& k : kept)
      if (k.node == u && k.sep == sep) return k.parts;
    std::vector<UOp> split = u.split(sep);
    Value result;
    if (split.size() <= kMaxTupleSize) {
      std::vector<Value> out;
      out.reserve(split.size());
      for (UOp& t : split) out.push_back(Value::uop(std::move(t)));
      result = Value::tuple(std::move(out));
    }
    kept[next] = {u, sep, result};
    next = (next + 1) % kKept;
    return result;
  };
  if (a == Analysis::Terms || a == Analysis::Factors) {
    expect_args(name, args, 0, 0);
    return parts(a == Analysis::Terms ? Op::Add : Op::Mul);
  }
  if (a == Analysis::Split) {
    expect_args(name, args, 1, 1);
    return parts(args[0].as_op());
  }
  if (a == Analysis::Spine ||
      a == Analysis::ChainTerms) {  // a chain of op nodes: at most kMaxSpineNodes
    expect_args(name, args, 1, 1);
    const Op sep = args[0].as_op();
    std::vector<UOp> nodes =
        a == Analysis::Spine ? u.spine(sep, kMaxSpineNodes) : u.chain_terms(sep, kMaxSpineNodes);
    std::vector<Value> out;
    out.reserve(nodes.size());
    for (UOp& n : nodes) out.push_back(Value::uop(std::move(n)));
    return Value::tuple(std::move(out));
  }
  if (a == Analysis::Toposort) {  // every node under u, sources first; none past the tuple limit
    expect_args(name, args, 0, 1);
    // toposort(ops): a node of one of these ops is listed, not entered
    const std::vector<Op> stop = args.empty() ? std::vector<Op>{} : op_list(args[0]);
    // (a CALL's body is not entered: it holds PARAMs, not the graph's nodes)
    auto enter = [&](const UOp& n) {
      return n == u || std::find(stop.begin(), stop.end(), n.op()) == stop.end();
    };
    std::vector<UOp> nodes = toposort(u, stop.empty() ? std::function<bool(const UOp&)>() : enter,
                                      /*enter_calls=*/false);
    if (nodes.size() > kMaxTupleSize) return Value();
    std::vector<Value> out;
    out.reserve(nodes.size());
    for (UOp& n : nodes) out.push_back(Value::uop(std::move(n)));
    return Value::tuple(std::move(out));
  }
  if (a == Analysis::Under) {  // u down through a chain of op nodes (their first source)
    expect_args(name, args, 1, 1);
    return Value::uop(u.under(args[0].as_op()));
  }
  if (a == Analysis::Precedes) {
    expect_args(name, args, 1, 1);
    return Value::boolean(u.precedes(args[0].as_uop()));
  }
  if (a ==
      Analysis::Substitute) {  // pairs ((from, to), ...): every `from` under u becomes its `to`
    expect_args(name, args, 1, 2);
    std::unordered_map<UOp, UOp> map;
    for (const Value& pair : args[0].items()) {
      if (pair.kind() != Value::Kind::Tuple || pair.items().size() != 2)
        throw EvalError(fmt::format("substitute takes pairs (from, to), got {}", pair.repr()));
      map.insert_or_assign(pair.items()[0].as_uop(), pair.items()[1].as_uop());
    }
    if (map.empty()) return recv;
    if (args.size() == 1) return Value::uop(substitute(u, map));
    // substitute(pairs, ops): one walk that does not descend below a node of those ops
    const std::vector<Op> stop = op_list(args[1]);
    return Value::uop(substitute_gated(u, map, [&](const UOp& n) {
      return n == u || std::find(stop.begin(), stop.end(), n.op()) == stop.end();
    }));
  }
  if (a == Analysis::ConstFactor) {
    expect_args(name, args, 0, 0);
    return Value::integer(u.const_factor());
  }
  if (a == Analysis::Divides) {
    expect_args(name, args, 1, 1);
    return maybe(u.divides(args[0].as_int()));
  }
  if (a == Analysis::DivideExact) {
    expect_args(name, args, 1, 1);
    return maybe(u.divide_exact(args[0].as_uop()));
  }
  if (a == Analysis::PopConst) {
    expect_args(name, args, 1, 1);
    auto [rest, c] = u.pop_const(args[0].as_op());
    return Value::tuple({Value::uop(std::move(rest)), Value::from_arg(c)});
  }
  return Value();
}

Value member(const Value& recv, std::string_view name) {
  if (recv.is_uop()) {
    if (auto p = uop_prop_from_name(name)) return uop_member(recv.as_uop(), *p);
    throw EvalError(fmt::format("UOp has no property '{}'", name));
  }
  if (recv.kind() == Value::Kind::DType) return dtype_member(recv.as_dtype(), name);
  if (recv.kind() == Value::Kind::Tuple && name == "len")
    return Value::integer(static_cast<i128>(recv.items().size()));
  if (recv.kind() == Value::Kind::Op && name == "name")
    return Value::string(std::string(op_name(recv.as_op())));
  if (recv.kind() == Value::Kind::Record) return record_field(recv.as_record(), name, "");
  throw EvalError(fmt::format("{} has no property '{}'", recv.repr(), name));
}

Value method(const Value& recv, std::string_view name, std::span<const Value> args,
             std::span<const std::string> names) {
  if (recv.kind() == Value::Kind::DType && name == "vec") {
    expect_args("vec", args, 1, 1);
    return Value::dtype(recv.as_dtype().vec(static_cast<int>(args[0].as_int())));
  }
  if (recv.kind() == Value::Kind::Tuple && name == "index") {  // Python's tuple.index
    expect_args("index", args, 1, 1);
    if (const std::optional<size_t> i = recv.find(args[0]))
      return Value::integer(static_cast<i128>(*i));
    throw EvalError(fmt::format("tuple.index(x): {} is not in the tuple", args[0].repr()));
  }
  const UOp& u = recv.as_uop();
  if (auto a = analysis_from_name(name)) return analysis(recv, *a, args);
  if (name == "replace") {
    UOp out = u;
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string& key = i < names.size() ? names[i] : "";
      if (key == "src")
        out = out.with_src(uop_list(args[i]));
      else if (key == "arg")
        out = out.with_arg(args[i].to_arg());
      else if (key == "dtype")
        out = out.with_dtype(args[i].as_dtype());
      else if (key == "op")
        out = out.with_op(args[i].as_op());
      else if (key == "tag")
        out = out.with_tag(args[i].to_arg());
      else
        throw EvalError(
            fmt::format("replace takes src:, arg:, dtype:, op: or tag:, got '{}'", key));
    }
    return Value::uop(out);
  }
  auto operand = [&](size_t i) { return as_operand(args[i], u); };
  if (name == "cast" || name == "bitcast") {
    expect_args(name, args, 1, 1);
    return Value::uop(name == "cast" ? u.cast(args[0].as_dtype()) : u.bitcast(args[0].as_dtype()));
  }
  if (name == "const_like") {
    expect_args(name, args, 1, 1);
    return Value::uop(u.const_like(args[0].to_arg()));
  }
  if (name == "logical_not") return Value::uop(u.logical_not());
  if (name == "where") {
    expect_args(name, args, 2, 2);
    const UOp& like = args[0].is_uop() ? args[0].as_uop() : args[1].as_uop();
    return Value::uop(u.where(as_operand(args[0], like), as_operand(args[1], like)));
  }
  static const std::map<std::string_view, UOp (UOp::*)(const UOp&) const> kBinary = {
      {"lt", &UOp::lt},
      {"le", &UOp::le},
      {"gt", &UOp::gt},
      {"ge", &UOp::ge},
      {"ne", &UOp::ne},
      {"eq", &UOp::eq},
      {"maximum", &UOp::maximum},
      {"minimum", &UOp::minimum},
      {"floordiv", &UOp::floordiv},
      {"floormod", &UOp::floormod},
      {"cdiv", &UOp::cdiv},
      {"cmod", &UOp::cmod}};
  if (auto it = kBinary.find(name); it != kBinary.end()) {
    expect_args(name, args, 1, 1);
    return Value::uop((u.*(it->second))(operand(0)));
  }
  if (const UOpBuilder* b = find_uop_builder(name)) return call_builder(*b, u, args);
  (void)named;
  throw EvalError(fmt::format("UOp has no method '{}'", name));
}

Value index(const Value& recv, const Value& idx) {
  const auto& items = recv.items();
  i128 i = idx.as_int();
  if (i < 0) i += static_cast<i128>(items.size());
  if (i < 0 || i >= static_cast<i128>(items.size())) {
    throw EvalError(
        fmt::format("index {} out of range for {}", to_string(idx.as_int()), recv.repr()));
  }
  return items[static_cast<size_t>(i)];
}

Value slice(const Value& recv, const Value& lo, const Value& hi, const Value& step) {
  const auto& items = recv.items();
  const i128 n = static_cast<i128>(items.size());
  i128 st = step.is_none() ? 1 : step.as_int();
  if (st == 0) throw EvalError("slice step cannot be zero");
  st = std::clamp<i128>(st, -(n + 1), n + 1);  // a longer step takes one item too, no overflow
  // Python's clamping: a negative bound counts from the end, then bounds are clipped to the
  // valid range for the direction of the step.
  auto bound = [&](const Value& v, i128 dflt) {
    if (v.is_none()) return dflt;
    i128 i = v.as_int();
    if (i < 0) i += n;
    if (st > 0) return std::clamp<i128>(i, 0, n);
    return std::clamp<i128>(i, -1, n - 1);
  };
  const i128 start = bound(lo, st > 0 ? 0 : n - 1), stop = bound(hi, st > 0 ? n : -1);
  std::vector<Value> out;
  for (i128 i = start; st > 0 ? i < stop : i > stop; i += st)
    out.push_back(items[static_cast<size_t>(i)]);
  return Value::tuple(std::move(out));
}

const std::vector<Value>& items_of(const Value& seq) {
  if (seq.kind() != Value::Kind::Tuple)
    throw EvalError(fmt::format("cannot iterate over {}", seq.repr()));
  return seq.items();
}

const std::vector<Value>& unpack(const Value& v, size_t n) {
  if (v.kind() != Value::Kind::Tuple || v.items().size() != n)
    throw EvalError(fmt::format("cannot unpack {} into {} names", v.repr(), n));
  return v.items();
}

void comp_step(size_t& steps) {
  if (++steps > kMaxTupleSize) {
    throw EvalError(fmt::format(
        "a comprehension runs its loop more than {} times (the tuple size limit)", kMaxTupleSize));
  }
}

Value construct(Op op, std::span<const Value> args) {
  const OpInfo& info = op_info(op);
  if (!info.is_alu()) {
    throw EvalError(fmt::format("{}(...) builds ALU ops only; use uop({}, dtype, src: ...)",
                                info.name, info.name));
  }
  if (!info.accepts_arity(static_cast<int>(args.size()))) {
    throw EvalError(
        fmt::format("{} takes {} sources, got {}", info.name, info.min_src, args.size()));
  }
  const Value* like = nullptr;
  for (const Value& a : args)
    if (a.is_uop() && !like) like = &a;
  if (!like) throw EvalError(fmt::format("{}(...) needs at least one UOp source", info.name));
  std::vector<UOp> src;
  for (const Value& a : args) src.push_back(as_operand(a, like->as_uop()));
  return Value::uop(src[0].alu(op, std::span<const UOp>(src).subspan(1)));
}

RangeSpan range_span(std::span<const Value> args) {
  expect_args("range", args, 1, 3);
  const i128 lo = args.size() > 1 ? args[0].as_int() : 0;
  const i128 hi = args.size() > 1 ? args[1].as_int() : args[0].as_int();
  const i128 st = args.size() > 2 ? args[2].as_int() : 1;
  if (st == 0) throw EvalError("range() step cannot be zero");
  // The length as Python computes it (a saturated span is past the limit anyway).
  const i128 span = st > 0 ? sat_sub(hi, lo) : sat_sub(lo, hi);
  const i128 step = st > 0 ? st : -st;
  const i128 n = span <= 0 ? 0 : (span - 1) / step + 1;
  if (n > static_cast<i128>(kMaxTupleSize)) too_large("range", n);
  return {lo, st, static_cast<size_t>(n)};
}

i128 enumerate_start(std::span<const Value> args) {
  expect_args("enumerate", args, 1, 2);
  return args.size() > 1 ? args[1].as_int() : 0;
}

namespace {

// Builtins over tuples: zip, enumerate, range, sum, prod, all, any, argsort, tuple, fold, and
// max/min of one tuple. nullopt for any other name.
std::optional<Value> tuple_builtin(Builtin b, std::span<const Value> args) {
  const std::string_view name = builtin_name(b);
  if (b == Builtin::Zip) {
    if (args.empty()) throw EvalError("zip takes at least 1 argument, got 0");
    size_t n = SIZE_MAX;
    for (const Value& a : args) n = std::min(n, items_of(a).size());
    std::vector<Value> out;
    for (size_t i = 0; i < n; ++i) {
      std::vector<Value> row;
      for (const Value& a : args) row.push_back(a.items()[i]);
      out.push_back(Value::tuple(std::move(row)));
    }
    return Value::tuple(std::move(out));
  }
  if (b == Builtin::Enumerate) {
    const i128 start = enumerate_start(args);
    std::vector<Value> out;
    for (const Value& x : items_of(args[0]))
      out.push_back(
          Value::tuple({Value::integer(sat_add(start, static_cast<i128>(out.size()))), x}));
    return Value::tuple(std::move(out));
  }
  if (b == Builtin::Range) {
    const RangeSpan r = range_span(args);
    std::vector<Value> out;
    out.reserve(r.n);
    for (size_t i = 0; i < r.n; ++i) out.push_back(r.at(i));
    return Value::tuple(std::move(out));
  }
  if (b == Builtin::Sum ||
      b == Builtin::Prod) {  // left to right from the first item: no `0 + x` node
    expect_args(name, args, 1, b == Builtin::Sum ? 2 : 1);
    const auto& items = items_of(args[0]);
    const BinOp op = b == Builtin::Sum ? BinOp::Add : BinOp::Mul;
    std::optional<Value> acc;
    if (args.size() > 1) acc = args[1];
    for (const Value& x : items) accumulate(acc, op, x);
    return acc ? *acc : Value::integer(b == Builtin::Sum ? 0 : 1);
  }
  if (b == Builtin::Fold) {  // fold(Op, t): ((t0 op t1) op t2) ..., as tinygrad folds with reduce()
    expect_args(name, args, 2, 2);
    const Op op = args[0].as_op();
    const auto& items = items_of(args[1]);
    if (items.empty()) throw EvalError("fold() of an empty tuple");
    Value acc = items[0];
    for (size_t i = 1; i < items.size(); ++i) acc = construct(op, std::array{acc, items[i]});
    return acc;
  }
  if (b == Builtin::All || b == Builtin::Any) {
    expect_args(name, args, 1, 1);
    const bool want = b == Builtin::Any;
    for (const Value& x : items_of(args[0]))
      if (x.as_bool() == want) return Value::boolean(want);
    return Value::boolean(!want);
  }
  if (b == Builtin::Argsort) {  // the indices that sort the tuple, ties in order (a stable sort)
    expect_args(name, args, 1, 1);
    const auto& items = items_of(args[0]);
    std::vector<size_t> idx(items.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::stable_sort(idx.begin(), idx.end(), [&](size_t x, size_t y) {
      return binary(BinOp::Lt, items[x], items[y]).as_bool();
    });
    std::vector<Value> out;
    for (size_t i : idx) out.push_back(Value::integer(static_cast<i128>(i)));
    return Value::tuple(std::move(out));
  }
  if (b == Builtin::Tuple) {
    expect_args(name, args, 1, 1);
    return Value::tuple(items_of(args[0]));
  }
  if ((b == Builtin::Max || b == Builtin::Min) && args.size() == 1) {
    const auto& items = items_of(args[0]);
    if (items.empty()) throw EvalError(fmt::format("{}() of an empty tuple", name));
    Value acc = items[0];
    for (size_t i = 1; i < items.size(); ++i) {
      const std::array<Value, 2> pair{acc, items[i]};
      acc = call_builtin(b, pair, {});
    }
    return acc;
  }
  return std::nullopt;
}

constexpr std::string_view kBuiltinNames[] = {
    "const_like", "max",  "min", "abs",     "len",       "int",   "float",
    "select",     "fail", "uop", "zip",     "enumerate", "range", "sum",
    "prod",       "all",  "any", "argsort", "tuple",     "fold",  "type_of"};
static_assert(std::size(kBuiltinNames) == static_cast<size_t>(Builtin::TypeOf) + 1);

}  // namespace

std::optional<Builtin> builtin_from_name(std::string_view name) {
  return enum_from_name<Builtin>(kBuiltinNames, name);
}
std::string_view builtin_name(Builtin b) { return kBuiltinNames[static_cast<size_t>(b)]; }

Value call_builtin(std::string_view name, std::span<const Value> args,
                   std::span<const std::string> names) {
  if (auto b = builtin_from_name(name)) return call_builtin(*b, args, names);
  throw EvalError(fmt::format("unknown function '{}'", name));
}

Value call_builtin(Builtin b, std::span<const Value> args, std::span<const std::string> names) {
  const std::string_view name = builtin_name(b);
  if (b == Builtin::ConstLike) {
    expect_args(name, args, 2, 2);
    return Value::uop(args[0].as_uop().const_like(args[1].to_arg()));
  }
  if (auto v = tuple_builtin(b, args)) return *v;
  if (b == Builtin::Max || b == Builtin::Min) {
    expect_args(name, args, 2, 2);
    if (args[0].is_uop() || args[1].is_uop()) {
      const UOp& like = args[0].is_uop() ? args[0].as_uop() : args[1].as_uop();
      const UOp x = as_operand(args[0], like), y = as_operand(args[1], like);
      return Value::uop(b == Builtin::Max ? x.maximum(y) : x.minimum(y));
    }
    const bool lt = binary(BinOp::Lt, args[0], args[1]).as_bool();
    return b == Builtin::Max ? (lt ? args[1] : args[0]) : (lt ? args[0] : args[1]);
  }
  if (b == Builtin::Abs) {
    expect_args(name, args, 1, 1);
    if (args[0].kind() == Value::Kind::Float) return Value::real(std::fabs(args[0].as_float()));
    const i128 v = args[0].as_int();
    return Value::integer(v < 0 ? sat_neg(v) : v);
  }
  if (b == Builtin::TypeOf) {  // the checker's name of the value's type, or a record's type name
    expect_args(name, args, 1, 1);
    const Value& v = args[0];
    if (v.kind() == Value::Kind::Record) return Value::string(v.as_record().record_type());
    for (Type t : {Type::None, Type::Bool, Type::Int, Type::Float, Type::String, Type::UOp,
                   Type::DType, Type::Op, Type::Tuple, Type::Status})
      if (value_has_type(v, t)) return Value::string(std::string(type_name(t)));
    return Value::string("any");
  }
  if (b == Builtin::Len) {
    expect_args(name, args, 1, 1);
    return Value::integer(static_cast<i128>(args[0].items().size()));
  }
  if (b == Builtin::Int) {
    expect_args(name, args, 1, 1);
    if (args[0].kind() == Value::Kind::Float) {
      const double f = args[0].as_float();
      if (!std::isfinite(f)) throw EvalError("int() of a non-finite float");
      return Value::integer(static_cast<i128>(std::trunc(f)));
    }
    return Value::integer(args[0].as_int());
  }
  if (b == Builtin::Float) {
    expect_args(name, args, 1, 1);
    return Value::real(args[0].as_float());
  }
  if (b == Builtin::Select) {  // select(cond, a, b): a value choice, or WHERE for a UOp condition
    expect_args(name, args, 3, 3);
    if (args[0].is_uop()) {
      const UOp& like = args[1].is_uop() ? args[1].as_uop() : args[2].as_uop();
      return Value::uop(
          args[0].as_uop().where(as_operand(args[1], like), as_operand(args[2], like)));
    }
    return args[0].as_bool() ? args[1] : args[2];
  }
  if (b == Builtin::Fail) {
    expect_args(name, args, 0, 1);
    return Value::fail(args.empty() ? "" : args[0].as_string());
  }
  if (b == Builtin::Uop) {  // uop(Op, dtype, src: (..), arg: v)
    if (args.size() < 2) throw EvalError("uop takes an op and a dtype, then src: and arg:");
    std::vector<UOp> src;
    Arg arg;
    for (size_t i = 2; i < args.size(); ++i) {
      const std::string& key = i < names.size() ? names[i] : "";
      if (key == "src")
        src = uop_list(args[i]);
      else if (key == "arg")
        arg = args[i].to_arg();
      else
        throw EvalError("uop takes src: and arg: after the op and dtype");
    }
    // a constant's value in its dtype's kind (a float 0.0, not the int 0), as const_like gives it
    if (args[0].as_op() == Op::Const && src.empty())
      return Value::uop(UOp::constant(args[1].as_dtype(), arg));
    return Value::uop(UOp::make(args[0].as_op(), args[1].as_dtype(), src, std::move(arg)));
  }
  throw EvalError(fmt::format("unknown function '{}'", name));
}

// ---- record args
// -------------------------------------------------------------------------------------

namespace {
// The record types the IR builds (Arg::record): CallInfo::to_arg (ir/call.h) writes every field;
// ParamArg (PARAM and BUFFER) and the others may leave some out, so they give names, not an op.
const std::vector<RecordSchema>& schemas() {
  static const std::vector<RecordSchema> kSchemas = {
      {"CallInfo",
       Op::Call,
       {{"name", Type::String},
        {"kernel", Type::Bool},
        {"precompile", Type::Bool},
        {"precompile_backward", Type::Bool},
        {"grad_fn", Type::Int},
        {"id", Type::Int}}},
      {"ParamArg", Op::Noop, {{"slot", Type::Int}, {"device", Type::Any}, {"size", Type::Int}}},
      {"ProgramInfo", Op::Noop, {{"ins", Type::Tuple}, {"outs", Type::Tuple}}},
      // a SINK's arg is a KernelInfo only in a kernel (KernelInfo::to_arg, ir/kernel_info.h)
      {"KernelInfo",
       Op::Noop,
       {{"name", Type::String},
        {"axis_types", Type::Tuple},
        {"dont_use_locals", Type::Bool},
        {"applied_opts", Type::Tuple},
        {"opts_to_apply", Type::Any},
        {"estimates", Type::Any},
        {"beam", Type::Int}}},
      {"Estimates", Op::Noop, {{"ops", Type::Int}, {"lds", Type::Int}, {"mem", Type::Int}}},
  };
  return kSchemas;
}
}  // namespace

std::optional<Type> RecordSchema::field_type(std::string_view field) const {
  for (const auto& [n, t] : fields)
    if (n == field) return t;
  return std::nullopt;
}
std::string RecordSchema::field_list() const {
  std::string out;
  for (const auto& [n, t] : fields) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}
const RecordSchema* record_schema(std::string_view name) {
  for (const RecordSchema& r : schemas())
    if (r.name == name) return &r;
  return nullptr;
}
const RecordSchema* record_schema_of(Op op) {
  for (const RecordSchema& r : schemas())
    if (r.op == op && op != Op::Noop) return &r;
  return nullptr;
}
bool is_record_field(std::string_view name) {
  for (const RecordSchema& r : schemas())
    if (r.field_type(name)) return true;
  return false;
}

Value record_field(const Arg& recv, std::string_view field, std::string_view expect) {
  if (!recv.is_record()) {
    throw EvalError(fmt::format("expected {} record, got {} (reading field '{}')",
                                expect.empty() ? "a" : fmt::format("a {}", expect), recv.repr(),
                                field));
  }
  if (!expect.empty() && recv.record_type() != expect) {
    throw EvalError(fmt::format("expected a {} record, got {} (reading field '{}')", expect,
                                recv.repr(), field));
  }
  const Arg* f = recv.find_field(field);
  if (!f) {
    std::string names;
    for (const auto& [n, v] : recv.fields()) names += (names.empty() ? "" : ", ") + n;
    throw EvalError(fmt::format("{} has no field '{}' (its fields: {})", recv.record_type(), field,
                                names.empty() ? "none" : names));
  }
  Value v = Value::from_arg(*f);
  if (const RecordSchema* s = record_schema(recv.record_type())) {
    if (auto t = s->field_type(field); t && !value_has_type(v, *t))
      throw EvalError(fmt::format("field '{}' of {} is {}, not {}", field, recv.record_type(),
                                  v.repr(), type_name(*t)));
  }
  return v;
}
Value record_field(const Value& recv, std::string_view field, std::string_view expect) {
  if (recv.kind() == Value::Kind::Record) return record_field(recv.as_record(), field, expect);
  throw EvalError(fmt::format("expected {} record, got {} (reading field '{}')",
                              expect.empty() ? "a" : fmt::format("a {}", expect), recv.repr(),
                              field));
}

// ---- the running rule set
// -------------------------------------------------------------------------------------

namespace {
thread_local int g_rewritten_depth = 0;
}  // namespace

Value rewritten(RewriteContext& ctx, const Value& u, bool fully, const Matcher* with) {
  const std::string_view name = fully ? "rewritten_fully" : "rewritten";
  if (g_rewritten_depth >= kMaxRewrittenDepth)
    throw EvalError(
        fmt::format("{}() nested more than {} deep (the rewritten depth limit): the "
                    "nodes a rule rewrites do not get smaller",
                    name, kMaxRewrittenDepth));
  struct Nest {
    Nest() { ++g_rewritten_depth; }
    ~Nest() { --g_rewritten_depth; }
  } nest;
  if (!ctx.pm && !with)
    throw EvalError(
        fmt::format("{}() needs a running rule set (a graph_rewrite); this rule was "
                    "applied on its own",
                    name));
  if (!u.is_uop()) throw EvalError(fmt::format("{}() needs a UOp, got {}", name, u.repr()));
  const UOp& x = u.as_uop();
  if (fully)
    return Value::uop(
        graph_rewrite(x, with ? with : ctx.pm,
                      {.ctx = ctx.user, .name = std::string(with ? with->name() : name)}));
  const RuleInfo* fired = nullptr;
  UOp r = ctx.pm->rewrite(x, ctx, &fired);
  return !r || r == x ? Value() : Value::uop(std::move(r));
}
bool is_context_builtin(std::string_view name) {
  return name == "rewritten" || name == "rewritten_fully";
}
Value call_context_builtin(RewriteContext& ctx, std::string_view name, std::span<const Value> args,
                           const NamedRuleSets* named) {
  const bool fully = name == "rewritten_fully";
  if (args.size() == 2 && fully) {
    if (args[1].kind() != Value::Kind::String)
      throw EvalError(
          fmt::format("'{}' names its rule set by a string, got {}", name, args[1].repr()));
    const std::string_view set = args[1].as_string();
    const Matcher* with = named ? (*named)(set) : compiled_rules(set);
    if (!with) throw EvalError(fmt::format("'{}': no rule set named '{}' is loaded", name, set));
    return rewritten(ctx, args[0], true, with);
  }
  if (args.size() != 1)
    throw EvalError(fmt::format("'{}' takes {} argument(s), got {}", name, fully ? "1 or 2" : "1",
                                args.size()));
  return rewritten(ctx, args[0], fully);
}

std::optional<Type> builtin_type(std::string_view name) {
  static const std::map<std::string_view, Type> kTypes = {
      {"const_like", Type::UOp},
      {"max", Type::Any},
      {"min", Type::Any},
      {"abs", Type::Any},
      {"len", Type::Int},
      {"int", Type::Int},
      {"float", Type::Float},
      {"select", Type::Any},
      {"fail", Type::Status},
      {"uop", Type::UOp},
      {"zip", Type::Tuple},
      {"enumerate", Type::Tuple},
      {"range", Type::Tuple},
      {"sum", Type::Any},
      {"prod", Type::Any},
      {"all", Type::Bool},
      {"any", Type::Bool},
      {"argsort", Type::Tuple},
      {"tuple", Type::Tuple},
      {"fold", Type::UOp},
      {"type_of", Type::String},
      // the running rule set (is_context_builtin): UOp or none
      {"rewritten", Type::UOp},
      {"rewritten_fully", Type::UOp},
  };
  auto it = kTypes.find(name);
  if (it == kTypes.end()) return std::nullopt;
  return it->second;
}
bool is_builtin(std::string_view name) { return builtin_type(name).has_value(); }

std::optional<Type> member_type(Type recv, std::string_view name, bool is_call) {
  static const std::map<std::string_view, Type> kUOpProps = {
      {"op", Type::Op},          {"dtype", Type::DType},  {"arg", Type::Any},
      {"tag", Type::Any},        {"nsrc", Type::Int},     {"vmin", Type::Any},
      {"vmax", Type::Any},       {"shape", Type::Tuple},  {"src", Type::Tuple},
      {"is_const", Type::Bool},  {"finite", Type::Bool},  {"may_wrap", Type::Bool},
      {"may_raise", Type::Bool}, {"ranges", Type::Tuple}, {"base", Type::UOp},
      {"device", Type::Any}};
  static const std::map<std::string_view, Type> kUOpMethods = {
      {"replace", Type::UOp},    {"cast", Type::UOp},        {"bitcast", Type::UOp},
      {"const_like", Type::UOp}, {"logical_not", Type::UOp}, {"where", Type::UOp},
      {"lt", Type::UOp},         {"le", Type::UOp},          {"gt", Type::UOp},
      {"ge", Type::UOp},         {"ne", Type::UOp},          {"eq", Type::UOp},
      {"maximum", Type::UOp},    {"minimum", Type::UOp},     {"floordiv", Type::UOp},
      {"floormod", Type::UOp},   {"cdiv", Type::UOp},        {"cmod", Type::UOp}};
  // the analyses of ir/terms.cpp and ir/order.cpp (is_analysis)
  static const std::map<std::string_view, Type> kUOpAnalyses = {
      {"terms", Type::Tuple},       {"factors", Type::Tuple},    {"const_factor", Type::Int},
      {"divides", Type::UOp},       {"divide_exact", Type::UOp}, {"pop_const", Type::Tuple},
      {"split", Type::Tuple},       {"substitute", Type::UOp},   {"spine", Type::Tuple},
      {"chain_terms", Type::Tuple}, {"precedes", Type::Bool},    {"toposort", Type::Tuple},
      {"under", Type::UOp}};
  static const std::map<std::string_view, Type> kDTypeProps = {
      {"is_int", Type::Bool},  {"is_float", Type::Bool}, {"is_unsigned", Type::Bool},
      {"is_bool", Type::Bool}, {"is_index", Type::Bool}, {"is_ptr", Type::Bool},
      {"count", Type::Int},    {"itemsize", Type::Int},  {"scalar", Type::DType},
      {"base", Type::DType},   {"min", Type::Any},       {"max", Type::Any}};
  auto lookup = [&](const std::map<std::string_view, Type>& m) -> std::optional<Type> {
    auto it = m.find(name);
    return it == m.end() ? std::nullopt : std::optional<Type>(it->second);
  };
  // the graph builders of ir/builders.h (reshape, permute, ...) are UOp methods too
  auto lookup_method = [&]() -> std::optional<Type> {
    if (auto t = lookup(kUOpMethods)) return t;
    if (auto t = lookup(kUOpAnalyses)) return t;
    if (find_uop_builder(name)) return Type::UOp;
    return std::nullopt;
  };
  switch (recv) {
    case Type::UOp:
      return is_call ? lookup_method() : lookup(kUOpProps);
    case Type::DType:
      if (is_call) return name == "vec" ? std::optional<Type>(Type::DType) : std::nullopt;
      return lookup(kDTypeProps);
    case Type::Tuple:  // t.len, t.index(x)
      if (name == (is_call ? "index" : "len")) return Type::Int;
      return std::nullopt;
    case Type::Op:
      return !is_call && name == "name" ? std::optional<Type>(Type::String) : std::nullopt;
    case Type::Record:  // of a record type the checker does not know: any field, checked at run
                        // time
      return is_call ? std::nullopt : std::optional<Type>(Type::Any);
    case Type::Any: {
      if (auto t = is_call ? lookup_method() : lookup(kUOpProps)) return Type::Any;
      if (auto t = lookup(kDTypeProps); t && !is_call) return Type::Any;
      if (name == "len" || name == "name" || name == "vec" || name == "index") return Type::Any;
      if (!is_call && is_record_field(name)) return Type::Any;
      return std::nullopt;
    }
    default:
      return std::nullopt;
  }
}

// ---- typed values
// ------------------------------------------------------------------------------------

bool value_has_type(const Value& v, Type t) {
  using K = Value::Kind;
  switch (t) {
    case Type::Any:
      return true;
    case Type::None:
      return v.kind() == K::None;
    case Type::Bool:
      return v.kind() == K::Bool;
    case Type::Int:
      return v.kind() == K::Int || v.kind() == K::Bool;
    case Type::Float:
      return v.is_number();
    case Type::String:
      return v.kind() == K::String;
    case Type::UOp:
      return v.kind() == K::UOp;
    case Type::DType:
      return v.kind() == K::DType;
    case Type::Op:
      return v.kind() == K::Op;
    case Type::Tuple:
      return v.kind() == K::Tuple;
    case Type::Status:
      return v.kind() == K::Status;
    case Type::Record:
      return v.kind() == K::Record;
  }
  return false;
}

void check_def_arg(const Value& v, Type t, std::string_view def, size_t index,
                   std::string_view param) {
  if (value_has_type(v, t)) return;
  throw EvalError(fmt::format("argument {} ('{}') of def '{}' must be {}, got {}", index + 1, param,
                              def, type_name(t), v.repr()));
}

// ---- helper registry
// ------------------------------------------------------------------------------------

std::optional<std::string> helper_signature_mismatch(const Helper& h, std::span<const Type> params,
                                                     Type result) {
  if (h.params.size() != static_cast<size_t>(h.max_args))
    return fmt::format("the C++ helper registers {} parameter type(s) for {} argument(s)",
                       h.params.size(), h.max_args);
  for (size_t i = 0; i < params.size() && i < h.params.size(); ++i) {
    if (params[i] != h.params[i])
      return fmt::format("argument {} is declared {}, registered {}", i + 1, type_name(params[i]),
                         type_name(h.params[i]));
  }
  if (result != h.result)
    return fmt::format("declared -> {}, registered -> {}", type_name(result), type_name(h.result));
  return std::nullopt;
}

namespace {
std::map<std::string, Helper, std::less<>>& helpers() {
  static auto* m = new std::map<std::string, Helper, std::less<>>();
  return *m;
}
}  // namespace

void register_helper(Helper helper) {
  auto& m = helpers();
  if (m.count(helper.name)) throw std::logic_error("helper '" + helper.name + "' registered twice");
  std::string name = helper.name;
  m.emplace(std::move(name), std::move(helper));
}
const Helper* find_helper(std::string_view name) {
  auto& m = helpers();
  auto it = m.find(name);
  return it == m.end() ? nullptr : &it->second;
}
std::vector<const Helper*> all_helpers() {
  std::vector<const Helper*> out;
  for (const auto& [name, h] : helpers()) out.push_back(&h);
  return out;
}

}  // namespace tinyrw::rw
