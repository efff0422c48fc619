// The one fact the kernel verifiers of rules/spec.rw read from C++: the axis type names of
// ir/axis.h (a table, not a rewrite).
#include "dsl/typed_helper.h"
#include "ir/axis.h"

namespace tinyrw::rw {
namespace {

// C++: the table of ir/axis.h, which the IR and the devices use.
const HelperRegistrar kAxisTypeNames(typed_helper(
    "axis_type_names", +[]() {
      std::vector<Value> out;
      for (const AxisTypeInfo& i : axis_types()) out.push_back(Value::string(std::string(i.name)));
      return out;
    }));

}  // namespace
}  // namespace tinyrw::rw
