// Facts the kernel verifiers of rules/spec.rw read: the axis type names of ir/axis.h and the kind
// of a value (a RANGE's arg is ints then a type name). None of them is a rewrite.
#include "dsl/typed_helper.h"
#include "ir/axis.h"

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

}  // namespace
}  // namespace tinyrw::rw
