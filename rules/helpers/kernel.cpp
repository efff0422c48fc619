// Facts the kernel verifiers of rules/spec.rw read: the axis type names of ir/axis.h, the kind of
// a value (a RANGE's arg is ints then a type name), and two walks over a kernel AST. None of them
// is a rewrite.
#include <algorithm>
#include <unordered_map>

#include "dsl/typed_helper.h"
#include "ir/axis.h"
#include "ir/graph.h"

namespace tinyrw::rw {
namespace {

const HelperRegistrar kAxisTypeNames(typed_helper(
    "axis_type_names", +[]() {
      std::vector<Value> out;
      for (const AxisTypeInfo& i : axis_types()) out.push_back(Value::string(std::string(i.name)));
      return out;
    }));

// The checker's name of the value's type (a bool is "bool", not "int"), or a record's type name.
const HelperRegistrar kTypeOf(typed_helper(
    "type_of", +[](const Value& v) {
      if (v.kind() == Value::Kind::Record) return v.as_record().record_type();
      for (Type t : {Type::None, Type::Bool, Type::Int, Type::Float, Type::String, Type::UOp,
                     Type::DType, Type::Op, Type::Tuple, Type::Status})
        if (value_has_type(v, t)) return std::string(type_name(t));
      return std::string("any");
    }));

// Kept C++: a walk of the whole kernel (iterative, any depth). The RANGEs u depends on that no END
// or REDUCE under u closes (tinygrad's UOp.ranges), in order of first use.
std::vector<Value> open_ranges(const UOp& root) {
  std::unordered_map<UOp, std::vector<UOp>> open;
  for (const UOp& u : toposort(root)) {
    std::vector<UOp> s;
    auto add = [&s](const UOp& r) {
      if (std::find(s.begin(), s.end(), r) == s.end()) s.push_back(r);
    };
    for (const UOp& src : u.src())
      for (const UOp& r : open.at(src)) add(r);
    if (u.op() == Op::Range) add(u);
    if (u.op() == Op::End || u.op() == Op::Reduce)
      for (size_t k = 1; k < u.nsrc(); ++k) std::erase(s, u.src(k));
    open.emplace(u, std::move(s));
  }
  std::vector<Value> out;
  for (const UOp& r : open.at(root)) out.push_back(Value::uop(r));
  return out;
}
const HelperRegistrar kOpenRanges(typed_helper("open_ranges", &open_ranges));

// Kept C++: a walk of the whole kernel. Its PARAM nodes, each once, in order of first use.
const HelperRegistrar kKernelParams(typed_helper(
    "kernel_params", +[](const UOp& root) {
      std::vector<Value> out;
      for (const UOp& u : toposort(root))
        if (u.op() == Op::Param) out.push_back(Value::uop(u));
      return out;
    }));

}  // namespace
}  // namespace tinyrw::rw
