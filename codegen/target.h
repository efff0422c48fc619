// What a device's renderer computes itself. The late decompositions (rules/decompositions.rw,
// rules/transcendental.rw) turn every other op into ops it does compute, as tinygrad keys its
// decompositions on a renderer's code_for_op.
#pragma once

#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/ops.h"

namespace tinyrw {

struct Target {
  struct Decomposed {
    Op op;
    std::vector<DType> dtypes;  // of its result; empty: every dtype
  };
  std::string device;
  std::vector<Decomposed> decomposed;  // what its renderer leaves to the late decompositions
  bool renders(Op op, DType dtype) const;
  // INTERP runs every op; CPU (LLVM) has no floor division or modulo and computes float32 (and
  // narrower) exp2 and log2 as polynomials, which vectorize (LLVM's intrinsics call the C
  // library one lane at a time: 2-2.4x slower on 16M floats). float64's need 64-bit float-to-int
  // casts, which x86 does through a library call: the C library's are faster. Its sin is the C
  // library's: tinygrad's polynomial computes both of its range reductions for every lane (4x
  // slower), and its float64 one is wrong beyond 2^32 (docs/tinygrad-differences.md).
  static const Target& of(const std::string& device);
};

}  // namespace tinyrw
