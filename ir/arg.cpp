#include "ir/arg.h"

#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

namespace tinyrw {

struct ArgHeap {
  uint32_t refcount = 1;
  i128 big = 0;      // Int values outside int64
  std::string text;  // String payload, or the Record type name
  std::vector<Arg> items;
  std::vector<std::pair<std::string, Arg>> fields;
};

namespace {
size_t mix(size_t h, size_t v) { return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)); }

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

Arg Arg::integer(i128 v) {
  Arg a;
  a.kind_ = Kind::Int;
  if (v >= std::numeric_limits<int64_t>::min() && v <= std::numeric_limits<int64_t>::max()) {
    a.i_ = static_cast<int64_t>(v);
  } else {
    a.heap_ = true;
    a.p_ = new ArgHeap();
    a.p_->big = v;
  }
  return a;
}
Arg Arg::real(double v) {
  Arg a;
  a.kind_ = Kind::Float;
  a.f_ = std::isnan(v) ? std::numeric_limits<double>::quiet_NaN() : v;  // one canonical nan
  return a;
}
Arg Arg::boolean(bool v) {
  Arg a;
  a.kind_ = Kind::Bool;
  a.i_ = 0;
  a.b_ = v;
  return a;
}
Arg Arg::string(std::string_view s) {
  Arg a;
  a.kind_ = Kind::String;
  a.heap_ = true;
  a.p_ = new ArgHeap();
  a.p_->text = s;
  return a;
}
Arg Arg::tuple(std::vector<Arg> items) {
  Arg a;
  a.kind_ = Kind::Tuple;
  a.heap_ = true;
  a.p_ = new ArgHeap();
  a.p_->items = std::move(items);
  return a;
}
Arg Arg::dtype(DType d) {
  Arg a;
  a.kind_ = Kind::DType;
  a.d_ = d.data();
  return a;
}
Arg Arg::op(Op o) {
  Arg a;
  a.kind_ = Kind::Op;
  a.i_ = 0;
  a.o_ = o;
  return a;
}
Arg Arg::record(std::string_view type_name, std::vector<std::pair<std::string, Arg>> fields) {
  Arg a;
  a.kind_ = Kind::Record;
  a.heap_ = true;
  a.p_ = new ArgHeap();
  a.p_->text = type_name;
  a.p_->fields = std::move(fields);
  return a;
}
Arg Arg::invalid() {
  Arg a;
  a.kind_ = Kind::Invalid;
  return a;
}

void Arg::retain() const {
  if (heap_) ++p_->refcount;
}
void Arg::release() {
  if (heap_ && --p_->refcount == 0) delete p_;
  heap_ = false;
}
Arg::Arg(const Arg& o) : kind_(o.kind_), heap_(o.heap_), i_(o.i_) {
  if (heap_) p_ = o.p_;
  retain();
}
Arg::Arg(Arg&& o) noexcept : kind_(o.kind_), heap_(o.heap_), i_(o.i_) {
  if (heap_) p_ = o.p_;
  o.heap_ = false;
  o.kind_ = Kind::None;
}
Arg& Arg::operator=(const Arg& o) {
  if (this != &o) {
    o.retain();
    release();
    kind_ = o.kind_;
    heap_ = o.heap_;
    i_ = o.i_;
    if (heap_) p_ = o.p_;
  }
  return *this;
}
Arg& Arg::operator=(Arg&& o) noexcept {
  if (this != &o) {
    release();
    kind_ = o.kind_;
    heap_ = o.heap_;
    i_ = o.i_;
    if (heap_) p_ = o.p_;
    o.heap_ = false;
    o.kind_ = Kind::None;
  }
  return *this;
}
Arg::~Arg() { release(); }

i128 Arg::as_int() const {
  if (kind_ == Kind::Int) return heap_ ? p_->big : i_;
  if (kind_ == Kind::Bool) return b_ ? 1 : 0;
  wrong_kind("int", kind_);
}
double Arg::as_float() const {
  if (kind_ == Kind::Float) return f_;
  if (kind_ == Kind::Int || kind_ == Kind::Bool) return static_cast<double>(as_int());
  wrong_kind("float", kind_);
}
bool Arg::as_bool() const {
  if (kind_ == Kind::Bool) return b_;
  if (kind_ == Kind::Int) return as_int() != 0;
  wrong_kind("bool", kind_);
}
const std::string& Arg::as_string() const {
  if (kind_ != Kind::String) wrong_kind("str", kind_);
  return p_->text;
}
std::span<const Arg> Arg::items() const {
  if (kind_ != Kind::Tuple) wrong_kind("tuple", kind_);
  return p_->items;
}
DType Arg::as_dtype() const {
  if (kind_ != Kind::DType) wrong_kind("dtype", kind_);
  return DType(d_);
}
Op Arg::as_op() const {
  if (kind_ != Kind::Op) wrong_kind("op", kind_);
  return o_;
}
const std::string& Arg::record_type() const {
  if (kind_ != Kind::Record) wrong_kind("record", kind_);
  return p_->text;
}
const Arg* Arg::find_field(std::string_view name) const {
  if (kind_ != Kind::Record) wrong_kind("record", kind_);
  for (const auto& [k, v] : p_->fields)
    if (k == name) return &v;
  return nullptr;
}
const Arg& Arg::field(std::string_view name) const {
  if (const Arg* a = find_field(name)) return *a;
  throw std::logic_error(fmt::format("{} has no field '{}'", p_->text, name));
}
std::span<const std::pair<std::string, Arg>> Arg::fields() const {
  if (kind_ != Kind::Record) wrong_kind("record", kind_);
  return p_->fields;
}

size_t Arg::hash() const {
  size_t h = static_cast<size_t>(kind_) * 0x100000001b3ULL;
  switch (kind_) {
    case Kind::None:
    case Kind::Invalid:
      return h;
    case Kind::Int: {
      const i128 v = as_int();
      return mix(mix(h, static_cast<uint64_t>(v)), static_cast<uint64_t>(v >> 64));
    }
    case Kind::Float:
      return mix(h, std::bit_cast<uint64_t>(f_));
    case Kind::Bool:
      return mix(h, b_);
    case Kind::DType:
      return mix(h, reinterpret_cast<size_t>(d_));
    case Kind::Op:
      return mix(h, static_cast<size_t>(o_));
    case Kind::String:
      return mix(h, std::hash<std::string>()(p_->text));
    case Kind::Tuple:
      for (const Arg& a : p_->items) h = mix(h, a.hash());
      return h;
    case Kind::Record:
      h = mix(h, std::hash<std::string>()(p_->text));
      for (const auto& [k, v] : p_->fields) h = mix(mix(h, std::hash<std::string>()(k)), v.hash());
      return h;
  }
  return h;
}

bool Arg::operator==(const Arg& o) const {
  if (kind_ != o.kind_) return false;
  if (heap_ && o.heap_ && p_ == o.p_) return true;
  switch (kind_) {
    case Kind::None:
    case Kind::Invalid:
      return true;
    case Kind::Int:
      return as_int() == o.as_int();
    case Kind::Float:
      return std::bit_cast<uint64_t>(f_) == std::bit_cast<uint64_t>(o.f_);
    case Kind::Bool:
      return b_ == o.b_;
    case Kind::DType:
      return d_ == o.d_;
    case Kind::Op:
      return o_ == o.o_;
    case Kind::String:
      return p_->text == o.p_->text;
    case Kind::Tuple:
      return p_->items == o.p_->items;
    case Kind::Record:
      return p_->text == o.p_->text && p_->fields == o.p_->fields;
  }
  return false;
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
  switch (kind_) {
    case Kind::None:
      return "None";
    case Kind::Invalid:
      return "Invalid";
    case Kind::Int:
      return to_string(as_int());
    case Kind::Float:
      return float_repr(f_);
    case Kind::Bool:
      return b_ ? "True" : "False";
    case Kind::DType:
      return as_dtype().repr();
    case Kind::Op:
      return fmt::format("Ops.{}", op_info(o_).py_name);
    case Kind::String: {
      std::string out = "'";
      for (char c : p_->text) {
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
      std::string out = "(";
      for (size_t i = 0; i < p_->items.size(); ++i) {
        if (i) out += ", ";
        out += p_->items[i].repr();
      }
      if (p_->items.size() == 1) out += ",";
      return out + ")";
    }
    case Kind::Record: {
      std::string out = p_->text + "(";
      for (size_t i = 0; i < p_->fields.size(); ++i) {
        if (i) out += ", ";
        out += p_->fields[i].first + "=" + p_->fields[i].second.repr();
      }
      return out + ")";
    }
  }
  return "?";
}

}  // namespace tinyrw
