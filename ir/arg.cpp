#include "ir/arg.h"

#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "ir/hash.h"

namespace tinyrw {

struct ArgHeap {
  uint32_t refcount = 1;
  Arg::Kind kind;
  i128 big = 0;      // Int values outside 48 bits
  std::string text;  // String payload, or the Record type name
  std::vector<Arg> items;
  std::vector<std::pair<std::string, Arg>> fields;
};

namespace {
[[noreturn]] void wrong_kind(std::string_view want, Arg::Kind got) {
  throw std::logic_error(fmt::format("arg is {}, expected {}", kind_name(got), want));
}
}  // namespace

std::string_view kind_name(Arg::Kind k) {
  switch (k) {
    case Arg::Kind::None:
      return "None";
    case Arg::Kind::Int:
      return "int";
    case Arg::Kind::Float:
      return "float";
    case Arg::Kind::Bool:
      return "bool";
    case Arg::Kind::String:
      return "str";
    case Arg::Kind::Tuple:
      return "tuple";
    case Arg::Kind::DType:
      return "dtype";
    case Arg::Kind::Op:
      return "op";
    case Arg::Kind::Record:
      return "record";
    case Arg::Kind::Invalid:
      return "Invalid";
  }
  return "?";
}

Arg::Kind Arg::heap_kind() const { return heap()->kind; }

Arg Arg::from_heap(ArgHeap* p) {
  const auto bits = reinterpret_cast<uintptr_t>(p);
  if ((bits & ~kPayloadMask) != 0) {
    delete p;
    throw std::logic_error("Arg: heap block above the 48-bit address space");
  }
  Arg a;
  a.w_ = word(kTagHeap, bits);
  return a;
}

Arg Arg::integer(i128 v) {
  constexpr i128 kInlineMax = (i128{1} << 47) - 1;
  Arg a;
  if (v >= -kInlineMax - 1 && v <= kInlineMax) {
    a.w_ = word(kTagInt, static_cast<uint64_t>(static_cast<int64_t>(v)));
    return a;
  }
  auto* p = new ArgHeap();
  p->kind = Kind::Int;
  p->big = v;
  return from_heap(p);
}
Arg Arg::real(double v) {
  Arg a;
  // One canonical nan: every other nan pattern (the tags live among the negative nans) is folded.
  a.w_ = std::bit_cast<uint64_t>(std::isnan(v) ? std::numeric_limits<double>::quiet_NaN() : v);
  return a;
}
Arg Arg::boolean(bool v) {
  Arg a;
  a.w_ = immediate(Kind::Bool, v ? 1 : 0);
  return a;
}
Arg Arg::string(std::string_view s) {
  auto* p = new ArgHeap();
  p->kind = Kind::String;
  p->text = s;
  return from_heap(p);
}
Arg Arg::tuple(std::vector<Arg> items) {
  auto* p = new ArgHeap();
  p->kind = Kind::Tuple;
  p->items = std::move(items);
  return from_heap(p);
}
Arg Arg::dtype(DType d) {
  const auto bits = reinterpret_cast<uintptr_t>(d.data());
  if ((bits & ~kPayloadMask) != 0)
    throw std::logic_error("Arg: dtype above the 48-bit address space");
  Arg a;
  a.w_ = word(kTagDType, bits);
  return a;
}
Arg Arg::op(Op o) {
  Arg a;
  a.w_ = immediate(Kind::Op, static_cast<uint64_t>(o));
  return a;
}
Arg Arg::record(std::string_view type_name, std::vector<std::pair<std::string, Arg>> fields) {
  auto* p = new ArgHeap();
  p->kind = Kind::Record;
  p->text = type_name;
  p->fields = std::move(fields);
  return from_heap(p);
}
Arg Arg::invalid() {
  Arg a;
  a.w_ = immediate(Kind::Invalid);
  return a;
}

void Arg::retain() const { ++heap()->refcount; }
void Arg::release() {
  ArgHeap* p = heap();
  w_ = immediate(Kind::None);
  if (--p->refcount == 0) delete p;
}

namespace {
// The 48-bit payload of an inline word, sign-extended.
int64_t inline_int(uint64_t w) { return static_cast<int64_t>(w << 16) >> 16; }
}  // namespace

i128 Arg::as_int() const {
  if (tag() == kTagInt) return inline_int(w_);
  const Kind k = kind();
  if (k == Kind::Int) return heap()->big;
  if (k == Kind::Bool) return (w_ >> 8) & 1;
  wrong_kind("int", k);
}
double Arg::as_float() const {
  if (is_float()) return std::bit_cast<double>(w_);
  const Kind k = kind();
  if (k == Kind::Int || k == Kind::Bool) return static_cast<double>(as_int());
  wrong_kind("float", k);
}
bool Arg::as_bool() const {
  const Kind k = kind();
  if (k == Kind::Bool) return (w_ >> 8) & 1;
  if (k == Kind::Int) return as_int() != 0;
  wrong_kind("bool", k);
}
const std::string& Arg::as_string() const {
  if (!is_string()) wrong_kind("str", kind());
  return heap()->text;
}
std::span<const Arg> Arg::items() const {
  if (!is_tuple()) wrong_kind("tuple", kind());
  return heap()->items;
}
DType Arg::as_dtype() const {
  if (tag() != kTagDType) wrong_kind("dtype", kind());
  return DType(reinterpret_cast<const DTypeData*>(w_ & kPayloadMask));
}
Op Arg::as_op() const {
  if (!is_op()) wrong_kind("op", kind());
  return static_cast<Op>(w_ >> 8 & 0xFF);
}
const std::string& Arg::record_type() const {
  if (!is_record()) wrong_kind("record", kind());
  return heap()->text;
}
const Arg* Arg::find_field(std::string_view name) const {
  if (!is_record()) wrong_kind("record", kind());
  for (const auto& [k, v] : heap()->fields)
    if (k == name) return &v;
  return nullptr;
}
const Arg& Arg::field(std::string_view name) const {
  if (const Arg* a = find_field(name)) return *a;
  throw std::logic_error(fmt::format("{} has no field '{}'", heap()->text, name));
}
std::span<const std::pair<std::string, Arg>> Arg::fields() const {
  if (!is_record()) wrong_kind("record", kind());
  return heap()->fields;
}

size_t Arg::hash() const {
  const Kind k = kind();
  size_t h = static_cast<size_t>(k) * 0x100000001b3ULL;
  switch (k) {
    case Kind::Int: {
      if (!on_heap()) return hash_mix(h, w_);  // ints are inline exactly when they fit 48 bits
      const i128 v = heap()->big;
      return hash_mix(hash_mix(h, static_cast<uint64_t>(v)), static_cast<uint64_t>(v >> 64));
    }
    case Kind::String:
      return hash_mix(h, std::hash<std::string>()(heap()->text));
    case Kind::Tuple:
      for (const Arg& a : heap()->items) h = hash_mix(h, a.hash());
      return h;
    case Kind::Record:
      h = hash_mix(h, std::hash<std::string>()(heap()->text));
      for (const auto& [name, v] : heap()->fields)
        h = hash_mix(hash_mix(h, std::hash<std::string>()(name)), v.hash());
      return h;
    default:  // every other kind is its word
      return hash_mix(h, w_);
  }
}

bool Arg::operator==(const Arg& o) const {
  if (w_ == o.w_) return true;  // same inline value, or the same heap block
  if (!on_heap() || !o.on_heap()) return false;
  const ArgHeap& a = *heap();
  const ArgHeap& b = *o.heap();
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::Int:
      return a.big == b.big;
    case Kind::String:
      return a.text == b.text;
    case Kind::Tuple:
      return a.items == b.items;
    case Kind::Record:
      return a.text == b.text && a.fields == b.fields;
    default:
      return false;
  }
}

namespace {
std::string float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string s = fmt::format("{}", v);  // shortest round-trip form
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}
}  // namespace

std::string Arg::repr() const {
  switch (kind()) {
    case Kind::None:
      return "None";
    case Kind::Invalid:
      return "Invalid";
    case Kind::Int:
      return to_string(as_int());
    case Kind::Float:
      return float_repr(as_float());
    case Kind::Bool:
      return as_bool() ? "True" : "False";
    case Kind::DType:
      return as_dtype().repr();
    case Kind::Op:
      return fmt::format("Ops.{}", op_info(as_op()).py_name);
    case Kind::String: {
      std::string out = "'";
      for (char c : heap()->text) {
        if (c == '\'' || c == '\\') out += '\\';
        if (c == '\n') {
          out += "\\n";
          continue;
        }
        out += c;
      }
      return out + "'";
    }
    case Kind::Tuple: {
      const std::vector<Arg>& items = heap()->items;
      std::string out = "(";
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += ", ";
        out += items[i].repr();
      }
      if (items.size() == 1) out += ",";
      return out + ")";
    }
    case Kind::Record: {
      const ArgHeap& r = *heap();
      std::string out = r.text + "(";
      for (size_t i = 0; i < r.fields.size(); ++i) {
        if (i) out += ", ";
        out += r.fields[i].first + "=" + r.fields[i].second.repr();
      }
      return out + ")";
    }
  }
  return "?";
}

}  // namespace tinyrw
