// An error met while a kernel ran: an integer division or modulo by zero, which the spec leaves
// undefined. INTERP raises it at the element, CPU after the kernel from the error code the kernel
// returns; both name the op. realize() keeps a buffer that a failed kernel was writing as it was.
#pragma once

#include <string>

#include <fmt/format.h>

#include "ir/ops.h"
#include "runtime/storage.h"

namespace tinyrw {

class KernelError : public TensorError {
 public:
  using TensorError::TensorError;
};

inline KernelError division_by_zero(const std::string& device, Op op) {
  return KernelError(fmt::format("{}: integer division by zero in {} (undefined by the spec)",
                                 device, op_name(op)));
}

}  // namespace tinyrw
