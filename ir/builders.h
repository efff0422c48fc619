// The UOp graph builders (UOp::reshape, ::permute, ... in ir/uop.h) by name, from one table, so
// that a front end can expose all of them at once; and how tensors hold buffers (buffer views).
#pragma once

#include <span>
#include <string_view>
#include <variant>

#include "ir/uop.h"

namespace tinyrw {

// Arguments after the receiver are UOps or Args: a shape is a tuple of ints (or a shape UOp), axes
// a tuple of ints, flip flags a tuple of bools, an op an Arg::op, a dtype an Arg::dtype; a
// variadic builder takes the rest as UOps.
using BuilderArg = std::variant<UOp, Arg>;

struct UOpBuilder {
  std::string_view name;
  size_t min_args, max_args;   // after the receiver; SIZE_MAX: any number
  std::string_view signature;  // e.g. "x.pad(offsets, shape)"
  UOp (*build)(const UOp& self, std::span<const BuilderArg> args);
};

std::span<const UOpBuilder> uop_builders();
const UOpBuilder* find_uop_builder(std::string_view name);  // nullptr when there is none
// Calls builder `name`; a wrong count or kind of argument raises a GraphError naming it.
UOp call_uop_builder(std::string_view name, const UOp& self, std::span<const BuilderArg> args);

// A BUFFER of `size` elements held in storage `slot` on `device`.
UOp buffer_uop(DType dtype, int64_t slot, int64_t size, std::string_view device);
// How a tensor holds a whole buffer: RESHAPE(BUFFER, shape), built even when `shape` is the
// buffer's own 1-d shape. is_buffer_view recognizes exactly these: a bare BUFFER is the flat
// source under such a view, never a tensor of its own (a walk over a graph meets both, and
// counting the BUFFER too would see each storage twice). The shape is not checked against the
// buffer's size: realize views an assignment's target storage in the assigned value's shape.
UOp buffer_view(const UOp& buffer, const Shape& shape);
bool is_buffer_view(const UOp& u);
// A state of a buffer's contents: the BUFFER, a whole view of it, or an assignment chain (AFTER).
bool is_buffer_state(const UOp& u);
// The node u views: u down through movement ops (their first source) to the first node that is
// no movement op or is a buffer state; u itself when it is none.
UOp view_base(const UOp& u);
// tinygrad's UOp.base: u down through movement ops and DETACH (their first source) to the first
// node that is neither.
UOp movement_base(const UOp& u);
// A gated index, where(valid, i, Invalid) (tinygrad's form of a read that only some lanes make).
bool is_gated_index(const UOp& i);
// u with `from`, reached from u through movement ops, replaced by `to` (the movement ops rebuilt
// over it); an empty UOp when u's movement ops do not reach `from`.
UOp rebase_view(const UOp& u, const UOp& from, const UOp& to);

}  // namespace tinyrw
