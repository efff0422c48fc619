// Opts (tinygrad's Opt and Scheduler.apply_opt, codegen/opt/postrange.py): an opt reshapes one
// of a kernel's loop ranges. Most split a range r of size s in two, r' (size s/n) and a new range
// u of size n of the opt's axis type (n = 0: the whole range):
//   UPCAST(axis, n)   an output range, r' * n + u, u UPCAST (vector lanes; the expander,
//                     rules/expander.rw, makes them lanes)
//   UNROLL(axis, n)   a reduce range, likewise UNROLL lanes
//   LOCAL(axis, n)    an output range, u LOCAL (a workgroup dimension; GPU targets)
//   GROUP(axis, n)    a reduce range, u GROUP_REDUCE (a reduction shared by a workgroup);
//   GROUPTOP          the same with u the outer part: u * (s/n) + r'
//   THREAD(axis, n)   an output range every output loops over, u * (s/n) + r' with u THREAD:
//                     the kernel runs n times concurrently, once per core_id
// and three do not split:
//   PADTO(axis, m)    the range runs to the next multiple of m; the extra iterations read
//                     nothing, write nothing and reduce the identity
//   SWAP(axis, other) two GLOBAL ranges trade their ids (their order in the launch grid)
//   NOLOCALS          the kernel keeps no locals (no LOCAL or GROUP opt may follow)
// BEAM search (codegen/search.h) and the heuristics apply opts through apply_opt.
#pragma once

#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "codegen/target.h"
#include "ir/uop.h"

namespace tinyrw {

enum class OptOp { Upcast, Unroll, Local, Group, GroupTop, Thread, Padto, Swap, Nolocals };

struct Opt {
  OptOp op;
  // UNROLL: among the reduce ranges longer than 1; GROUP and GROUPTOP: among the REDUCE ranges;
  // NOLOCALS: none (-1); else among the kernel's ranges (opt_ranges order)
  int axis = -1;
  int64_t arg = 0;  // the new range's size (0: the whole range); PADTO: the multiple; SWAP: the
                    // other axis
  bool operator==(const Opt&) const = default;
};
std::string opt_repr(const Opt& o);  // "UPCAST(0, 4)", "NOLOCALS"
// An opt in a KernelInfo's applied_opts or opts_to_apply: ("UPCAST", axis, arg).
Arg opt_to_arg(const Opt& o);
Opt opt_from_arg(const Arg& a);  // throws KernelOptError for another arg

// The kernel as opts see it: loops merged where the kernel indexes with them as one
// (rules/expander.rw simplify_ranges, tinygrad's pm_simplify_ranges).
UOp simplify_ranges(const UOp& sink);

// A kernel's ranges as opts address them (tinygrad's Scheduler.rngs): every RANGE longer than 1,
// ordered by axis type as kernel names order them (ir/axis.h: loops, then thread and global,
// warp, local and group reduce, upcast, reduce, unroll), then by id.
std::vector<UOp> opt_ranges(const UOp& sink);

// On a target with workgroups, the output loops every output runs over become GLOBAL ranges (the
// launch grid; tinygrad's convert_loop_to_global); elsewhere the kernel as it is.
UOp convert_loop_to_global(const UOp& sink, const Target& target);

// The kernel (a kernel AST SINK) with the opt applied, its KernelInfo's applied_opts extended and
// its name updated. Throws KernelOptError naming the opt and the reason when it cannot apply on
// `target` (tinygrad's checks): an axis out of range; a range of the wrong type; a size that does
// not divide the range's; an upcast over 16 lanes, an unroll over 32; a LOCAL or GROUP on a target
// without locals or after NOLOCALS; a group whose shared memory exceeds the target's or that sits
// inside another reduction; a THREAD on a target without threads, over its thread limit, twice,
// or on a range some output does not loop over; a PADTO of a symbolic, upcast or thread range or
// that more than quadruples the work; a SWAP of ranges that are not both GLOBAL.
UOp apply_opt(const UOp& sink, const Opt& opt, const Target& target);
UOp apply_opts(const UOp& sink, std::span<const Opt> opts, const Target& target);
// The kernel with opts to apply when it is lowered (its KernelInfo's opts_to_apply), as tinygrad's
// KernelInfo(opts_to_apply=...): a custom kernel's opts by hand.
UOp with_opts(const UOp& sink, std::span<const Opt> opts);

// The opts a generated kernel gets when it names none: tinygrad's hand_coded_optimizations
// (codegen/opt/heuristic.py, without tensor cores). On targets with locals: a matrix-vector
// product grouped by 8 threads a row, reductions with few outputs grouped by 16 (and nothing
// more). Small output axes that gate a where are upcast whole; while 1024 outputs or more remain
// and fewer than 32 lanes, an output axis some buffer's index ignores is upcast by 3 or 4 (fewest
// indexes using it, then smallest strides); the last reduce axis is unrolled whole up to 32, else
// by 4; a kernel with no lanes yet has its last output axis upcast by 4. Then workgroups (output
// axes a buffer ignores first, up to 128 threads) on targets with locals, or on targets with
// threads the largest of 32, 16, 12, 8, 6, 5, 4, 3, 2 threads within the thread limit that leaves
// each 128Ki operations, split off the first output axis it divides.
std::vector<Opt> hand_coded_opts(const UOp& sink, const Target& target);

class KernelOptError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tinyrw
