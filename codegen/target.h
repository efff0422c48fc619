// What a device's renderer computes itself. The late decompositions (rules/decompositions.rw,
// rules/transcendental.rw) turn every other op into ops it does compute, as tinygrad keys its
// decompositions on a renderer's code_for_op.
#pragma once

#include <array>
#include <cstdint>
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
  // What the optimizer may shape a kernel into (tinygrad's Renderer fields): workgroups with
  // local ids and shared memory (GPUs), or a launch over threads that each run the kernel with
  // their own core_id (CPU), and the limits of each.
  bool has_local = false, has_shared = false, has_threads = false;
  int64_t shared_max = 0;  // bytes of shared memory a workgroup may use
  // The most workgroups (global) and threads a workgroup (local) along each launch dimension x,
  // y, z, and the most threads of a launch along each (workgroups times their threads; 0: no such
  // limit): rules/gpudims.rw groups and splits a kernel's ranges to fit (tinygrad's Renderer
  // fields).
  std::array<int64_t, 3> global_max{}, local_max{}, global_prod_max{};
  // The widest vector load or store the devectorizer makes (rules/devectorizer.rw): tinygrad's
  // float4, 16 bytes, except on the CPU, whose LLVM vectorizes a run of loads as wide as the
  // host's SIMD registers (AVX: 32 bytes, 8 floats; AVX-512: 64) into one register per run.
  int64_t vector_bytes = 16;
  // Whether a vector access may start at any element (x86: a window's row shifted by one element
  // still loads as whole vectors) or only at a multiple of its length (GPUs, tinygrad's float4).
  bool unaligned_vectors = false;
  // Whether its renderer computes float32 ALU ops on vectors (the CPU's LLVM: one FMA of 16
  // lanes), so rules/devectorizer.rw's vectorize_alu gathers isomorphic lanes into vector ops;
  // INTERP and the GPUs (a lane per thread) compute scalars, as tinygrad's renderers do.
  bool vector_alu = false;
  bool renders(Op op, DType dtype) const;
  // The most threads a THREAD opt may launch: cpu_threads() on a target that has threads, else 1.
  int64_t thread_limit() const;
  // INTERP runs every op; CPU (LLVM) has no floor division or modulo, no ThreeFry (32-bit
  // integer ops in rules/decompositions.rw, as tinygrad lowers it for every real renderer), and
  // computes float32 (and narrower) exp2 and log2 as polynomials, which vectorize (LLVM's
  // intrinsics call the C library one lane at a time: 2-2.4x slower on 16M floats). float64's
  // need 64-bit float-to-int casts, which x86 does through a library call: the C library's are
  // faster. Its sin is the C library's: tinygrad's polynomial computes both of its range
  // reductions for every lane (4x slower), and its float64 one is wrong beyond 2^32
  // (docs/tinygrad-differences.md).
  // CUDA and HIP shape kernels into workgroups (LOCAL and GROUP opts, shared memory, barriers).
  // INTERP runs the CPU's kernels, or with INTERP_TARGET=CUDA (or HIP) the kernels of that target
  // (in lockstep, runtime/interp.h), so the GPU path runs and is tested on any machine.
  static const Target& of(const std::string& device);
};

// The GPU target INTERP runs the kernels of ("CUDA", "HIP"), from $INTERP_TARGET; "" when unset
// (the CPU's kernels). Throws std::invalid_argument for another value.
std::string interp_target();

// The threads a CPU kernel launch runs on: $CPU_THREADS, else every core the machine has.
// Every core is those the process may run on, within its cgroup's CPU quota. Throws
// std::invalid_argument for a CPU_THREADS that is not a number from 1 to 1024.
int64_t cpu_threads();

}  // namespace tinyrw
