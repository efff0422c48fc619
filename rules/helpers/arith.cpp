// Integer helpers callable from .rw rules (registered once; compiled and interpreted rules share
// them). Each is a pure function of its arguments.
#include <numeric>

#include "dsl/value.h"

namespace tinyrw::rw {
namespace {

const HelperRegistrar kGcd({"gcd", 2, 2, Type::Int,
                            [](RewriteContext&, std::span<const Value> a) {
                              return Value::integer(gcd(a[0].as_int(), a[1].as_int()));
                            },
                            "gcd(a, b): the greatest common divisor of two integers (>= 0)"},
                           {Type::Int, Type::Int});

const HelperRegistrar kIsPow2({"is_pow2", 1, 1, Type::Bool,
                               [](RewriteContext&, std::span<const Value> a) {
                                 const i128 v = a[0].as_int();
                                 return Value::boolean(v > 0 && (v & (v - 1)) == 0);
                               },
                               "is_pow2(v): v is a positive power of two"},
                              {Type::Int});

const HelperRegistrar kLog2({"log2_int", 1, 1, Type::Int,
                             [](RewriteContext&, std::span<const Value> a) {
                               i128 v = a[0].as_int();
                               if (v <= 0) throw EvalError("log2_int of a non-positive number");
                               i128 r = 0;
                               while (v > 1) {
                                 v >>= 1;
                                 ++r;
                               }
                               return Value::integer(r);
                             },
                             "log2_int(v): floor(log2(v)) for v > 0"},
                            {Type::Int});

const HelperRegistrar kSafeCast(
    {"can_safe_cast", 2, 2, Type::Bool,
     [](RewriteContext&, std::span<const Value> a) {
       return Value::boolean(can_safe_cast(a[0].as_dtype(), a[1].as_dtype()));
     },
     "can_safe_cast(from, to): every value of dtype `from` fits in `to`"},
    {Type::DType, Type::DType});

}  // namespace
}  // namespace tinyrw::rw
