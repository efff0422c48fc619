// Opts by hand (tinygrad's Opt and Scheduler.apply_opt, codegen/opt/postrange.py): an opt splits
// one of a kernel's loop ranges in two. UPCAST(axis, n) splits an output range r of size s into
// r' * n + u with r' of size s/n and u a new UPCAST range of size n (n = 0: the whole range);
// UNROLL(axis, n) does the same to a reduce range with a new UNROLL range. The expander
// (rules/expander.rw) turns UPCAST and UNROLL ranges into vector lanes. The optimizer (BEAM and
// the heuristics) applies opts through the same function.
#pragma once

#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/uop.h"

namespace tinyrw {

enum class OptOp { Upcast, Unroll };

struct Opt {
  OptOp op;
  int axis;     // UPCAST: among the kernel's ranges (opt_ranges order); UNROLL: among its
                // reduce ranges longer than 1
  int64_t arg;  // the new range's size; 0: the whole range
  bool operator==(const Opt&) const = default;
};
std::string opt_repr(const Opt& o);  // "UPCAST(0, 4)"
// An opt in a KernelInfo's applied_opts or opts_to_apply: ("UPCAST", axis, arg).
Arg opt_to_arg(const Opt& o);
Opt opt_from_arg(const Arg& a);  // throws KernelOptError for another arg

// The kernel as opts see it: loops merged where the kernel indexes with them as one
// (rules/expander.rw simplify_ranges, tinygrad's pm_simplify_ranges).
UOp simplify_ranges(const UOp& sink);

// A kernel's ranges as opts address them (tinygrad's Scheduler.rngs): every RANGE longer than 1,
// ordered by axis type (loops, then global, warp, local, upcast, group reduce, reduce, unroll),
// then by id.
std::vector<UOp> opt_ranges(const UOp& sink);

// The kernel (a kernel AST SINK) with the opts applied in order, its KernelInfo's applied_opts
// extended. Throws KernelOptError naming the opt when one cannot apply: an axis out of range, a
// range of the wrong type, a size that does not divide the range's, an upcast over 16 lanes or an
// unroll over 32.
UOp apply_opts(const UOp& sink, std::span<const Opt> opts);
// The kernel with opts to apply when it is lowered (its KernelInfo's opts_to_apply), as tinygrad's
// KernelInfo(opts_to_apply=...): a custom kernel's opts by hand.
UOp with_opts(const UOp& sink, std::span<const Opt> opts);

// The opts a generated kernel gets when it names none: tinygrad's hand_coded_optimizations
// (codegen/opt/heuristic.py), its CPU part without threads. Small output axes that gate a where
// are upcast whole; while 1024 outputs or more remain and fewer than 32 lanes, an output axis
// some buffer's index ignores is upcast by 3 or 4 (fewest indexes using it, then smallest
// strides); the last reduce axis is unrolled whole up to 32, else by 4; a kernel with no lanes
// yet has its last output axis upcast by 4.
std::vector<Opt> hand_coded_opts(const UOp& sink);

class KernelOptError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tinyrw
