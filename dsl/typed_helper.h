// A C++ helper registered from a typed function: its arity and its parameter and result types
// come from the signature, so the `extern fn` line in rules/prelude.rw is checked against the
// function itself, and no registration unboxes its arguments by hand.
//   const HelperRegistrar kGcd(typed_helper("gcd", &gcd_of, "gcd(a, b): ..."));
// Parameter and result types: bool, i128 (int), double (float), std::string, UOp (an empty UOp
// result is none: no rewrite), DType, Op, std::vector<Value> (tuple), Value (any; as a result
// give its Type). A function whose first parameter is RewriteContext& reads the running pass's
// context.
#pragma once

#include <string>
#include <type_traits>
#include <utility>

#include "dsl/value.h"

namespace tinyrw::rw {
namespace typed {

template <class T>
struct Conv;
template <>
struct Conv<bool> {
  static constexpr Type type = Type::Bool;
  static bool in(const Value& v) { return v.as_bool(); }
  static Value out(bool b) { return Value::boolean(b); }
};
template <>
struct Conv<i128> {
  static constexpr Type type = Type::Int;
  static i128 in(const Value& v) { return v.as_int(); }
  static Value out(i128 v) { return Value::integer(v); }
};
template <>
struct Conv<double> {
  static constexpr Type type = Type::Float;
  static double in(const Value& v) { return v.as_float(); }
  static Value out(double v) { return Value::real(v); }
};
template <>
struct Conv<std::string> {
  static constexpr Type type = Type::String;
  static const std::string& in(const Value& v) { return v.as_string(); }
  static Value out(std::string s) { return Value::string(std::move(s)); }
};
template <>
struct Conv<UOp> {
  static constexpr Type type = Type::UOp;
  static const UOp& in(const Value& v) { return v.as_uop(); }
  static Value out(UOp u) { return u ? Value::uop(std::move(u)) : Value(); }
};
template <>
struct Conv<DType> {
  static constexpr Type type = Type::DType;
  static DType in(const Value& v) { return v.as_dtype(); }
  static Value out(DType d) { return Value::dtype(d); }
};
template <>
struct Conv<Op> {
  static constexpr Type type = Type::Op;
  static Op in(const Value& v) { return v.as_op(); }
  static Value out(Op o) { return Value::op(o); }
};
template <>
struct Conv<std::vector<Value>> {
  static constexpr Type type = Type::Tuple;
  static const std::vector<Value>& in(const Value& v) { return v.items(); }
  static Value out(std::vector<Value> items) { return Value::tuple(std::move(items)); }
};
template <>
struct Conv<Value> {
  static constexpr Type type = Type::Any;
  static const Value& in(const Value& v) { return v; }
  static Value out(Value v) { return v; }
};
template <class T>
using C = Conv<std::remove_cvref_t<T>>;

template <class R, class... A, size_t... I>
Value call(R (*fn)(A...), [[maybe_unused]] std::span<const Value> a, std::index_sequence<I...>) {
  return C<R>::out(fn(C<A>::in(a[I])...));
}
template <class R, class... A, size_t... I>
Value call(R (*fn)(RewriteContext&, A...), RewriteContext& ctx,
           [[maybe_unused]] std::span<const Value> a, std::index_sequence<I...>) {
  return C<R>::out(fn(ctx, C<A>::in(a[I])...));
}

}  // namespace typed

// `result` overrides the result type where the C++ type says less (a Value that is a tuple).
template <class R, class... A>
Helper typed_helper(std::string name, R (*fn)(A...), Type result = typed::C<R>::type) {
  Helper h{std::move(name), sizeof...(A), sizeof...(A), result, nullptr, {typed::C<A>::type...}};
  h.fn = [fn](RewriteContext&, std::span<const Value> a) {
    return typed::call(fn, a, std::index_sequence_for<A...>{});
  };
  return h;
}
template <class R, class... A>
Helper typed_helper(std::string name, R (*fn)(RewriteContext&, A...),
                    Type result = typed::C<R>::type) {
  Helper h{std::move(name), sizeof...(A), sizeof...(A), result, nullptr, {typed::C<A>::type...}};
  h.fn = [fn](RewriteContext& ctx, std::span<const Value> a) {
    return typed::call(fn, ctx, a, std::index_sequence_for<A...>{});
  };
  return h;
}

}  // namespace tinyrw::rw
