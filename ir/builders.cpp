// UOp's graph builders: movement ops, reductions, INDEX and AFTER, each checked where it is made.
#include "ir/builders.h"

#include <algorithm>
#include <climits>
#include <cstdint>

#include <fmt/format.h>

namespace tinyrw {

namespace {

// The node's shape check (ir/properties.cpp) run now: its GraphError is the builder's.
UOp checked(UOp u) {
  u.check_shape();
  return u;
}

[[noreturn]] void fail(Op op, const std::string& why) {
  throw GraphError(fmt::format("{}: {}", op_info(op).py_name, why));
}

void check_reduce_op(Op op) {
  if (op != Op::Add && op != Op::Mul && op != Op::Max)
    fail(Op::Reduce, fmt::format("cannot reduce with {} (ADD, MUL or MAX)", op_info(op).py_name));
}

bool all_zero(const Shape& s) {
  return std::all_of(s.begin(), s.end(), [](const SInt& d) { return d == SInt(0); });
}

}  // namespace

Shape to_shape(const Dims& d) { return Shape(d.begin(), d.end()); }
Dims to_dims(const Shape& s) {
  Dims out;
  out.reserve(s.size());
  for (const SInt& d : s) out.push_back(d.value());
  return out;
}

UOp UOp::reshape(const Shape& s) const {
  if (shape_is(s)) return *this;
  return checked(make(Op::Reshape, dtype(), {*this, shape_to_uop(s)}));
}

UOp UOp::permute(const std::vector<int64_t>& order) const {
  std::vector<Arg> p;
  p.reserve(order.size());
  for (int64_t k : order) p.push_back(Arg::integer(k));
  return checked(make(Op::Permute, dtype(), {*this}, Arg::tuple(std::move(p))));
}

UOp UOp::expand(const Shape& s) const {
  if (shape_is(s)) return *this;
  return checked(make(Op::Expand, dtype(), {*this, shape_to_uop(s)}));
}

UOp UOp::pad(const Shape& offsets, const Shape& s) const {
  if (all_zero(offsets) && shape_is(s)) return *this;
  return checked(make(Op::Pad, dtype(), {*this, shape_to_uop(offsets), shape_to_uop(s)}));
}

UOp UOp::shrink(const Shape& offsets, const Shape& sizes) const {
  if (all_zero(offsets) && shape_is(sizes)) return *this;
  return checked(make(Op::Shrink, dtype(), {*this, shape_to_uop(offsets), shape_to_uop(sizes)}));
}

UOp UOp::flip(const std::vector<bool>& axes) const {
  std::vector<Arg> f;
  f.reserve(axes.size());
  for (bool b : axes) f.push_back(Arg::boolean(b));
  return checked(make(Op::Flip, dtype(), {*this}, Arg::tuple(std::move(f))));
}

UOp UOp::reduce_first(Op op, int64_t n) const {
  check_reduce_op(op);
  return checked(make(Op::Reduce, dtype(), {*this}, Arg::tuple({Arg::op(op), Arg::integer(n)})));
}

UOp UOp::reduce(Op op, const std::vector<int64_t>& axes, bool keepdim) const {
  check_reduce_op(op);
  const Shape s = shape();
  std::vector<bool> reduced(s.size(), false);
  for (int64_t a : axes) {
    if (a < 0 || a >= static_cast<int64_t>(s.size()))
      fail(Op::Reduce, fmt::format("axis {} is out of range for shape {}", a, shape_repr(s)));
    if (reduced[static_cast<size_t>(a)])
      fail(Op::Reduce, fmt::format("axis {} appears more than once", a));
    reduced[static_cast<size_t>(a)] = true;
  }
  // REDUCE reduces the first n axes: the reduced ones go first, the kept ones keep their order.
  // An axis of size 1 is not reduced (as tinygrad's _rop): it is reshaped away, and a reduction
  // over such axes alone is a reshape (no kernel).
  auto size_one = [&](size_t k) { return s[k].is_int() && s[k].value() == 1; };
  std::vector<int64_t> order;
  Shape keep_shape, out_shape;
  for (size_t k = 0; k < s.size(); ++k)
    if (reduced[k] && !size_one(k)) order.push_back(static_cast<int64_t>(k));
  const auto n = static_cast<int64_t>(order.size());
  for (size_t k = 0; k < s.size(); ++k) {
    if (!reduced[k] || size_one(k)) order.push_back(static_cast<int64_t>(k));
    keep_shape.push_back(reduced[k] ? SInt(1) : s[k]);
    if (!reduced[k]) out_shape.push_back(s[k]);
  }
  if (n == 0) return reshape(keepdim ? keep_shape : out_shape);
  const UOp r = permute(order).reduce_first(op, n);
  return r.reshape(keepdim ? keep_shape : out_shape);
}

UOp UOp::reduce_over(Op op, std::span<const UOp> ranges) const {
  check_reduce_op(op);
  std::vector<UOp> src{*this};
  for (const UOp& r : ranges) {
    if (r.op() != Op::Range)
      fail(Op::Reduce, fmt::format("reduces over RANGEs, got {}", op_info(r.op()).py_name));
    src.push_back(r);
  }
  return make(Op::Reduce, dtype(), src,
              Arg::tuple({Arg::op(op), Arg::integer(0)}));  // as a kernel AST has it
}

UOp UOp::index(std::span<const UOp> idx) const {
  std::vector<UOp> src{*this};
  for (const UOp& i : idx) {
    if (!i || !i.dtype().is_int())
      fail(Op::Index, fmt::format("an index must be an integer, got {}",
                                  i ? i.dtype().repr() : std::string("an empty UOp")));
    src.push_back(i);
  }
  // Not shape-checked here: rangeify indexes views whose shape sources are mid-rewrite, and a
  // CONST reads the same at any index. The shape check runs when the INDEX's shape is asked.
  return make(Op::Index, dtype(), src);
}

UOp UOp::after(std::span<const UOp> deps) const {
  if (deps.empty()) fail(Op::After, "needs at least one dependency");
  std::vector<UOp> src{*this};
  src.insert(src.end(), deps.begin(), deps.end());
  return make(Op::After, dtype(), src);
}

// ---- the table
// ----------------------------------------------------------------------------------------

namespace {

const UOp* uop_arg(const BuilderArg& a) { return std::get_if<UOp>(&a); }
const Arg* arg_arg(const BuilderArg& a) { return std::get_if<Arg>(&a); }

[[noreturn]] void bad_arg(std::string_view name, size_t i, std::string_view want) {
  throw GraphError(fmt::format("{}: argument {} must be {}", name, i + 1, want));
}

Shape shape_arg(std::string_view name, std::span<const BuilderArg> a, size_t i) {
  if (const UOp* u = uop_arg(a[i])) return uop_to_shape(*u);
  const Arg* t = arg_arg(a[i]);
  if (!t || !t->is_tuple()) bad_arg(name, i, "a shape (a tuple of sizes)");
  Shape out;
  for (const Arg& d : t->items()) {
    if (!d.is_int() || d.as_int() < INT64_MIN || d.as_int() > INT64_MAX)
      bad_arg(name, i, "a shape (a tuple of sizes)");
    out.emplace_back(static_cast<int64_t>(d.as_int()));
  }
  return out;
}

std::vector<int64_t> ints_arg(std::string_view name, std::span<const BuilderArg> a, size_t i) {
  const Arg* t = arg_arg(a[i]);
  if (!t || !t->is_tuple()) bad_arg(name, i, "a tuple of ints");
  std::vector<int64_t> out;
  for (const Arg& d : t->items()) {
    if (!d.is_int() || d.as_int() < INT64_MIN || d.as_int() > INT64_MAX)
      bad_arg(name, i, "a tuple of ints");
    out.push_back(static_cast<int64_t>(d.as_int()));
  }
  return out;
}

std::vector<bool> bools_arg(std::string_view name, std::span<const BuilderArg> a, size_t i) {
  const Arg* t = arg_arg(a[i]);
  if (!t || !t->is_tuple()) bad_arg(name, i, "a tuple of bools");
  std::vector<bool> out;
  for (const Arg& d : t->items()) {
    if (!d.is_bool()) bad_arg(name, i, "a tuple of bools");
    out.push_back(d.as_bool());
  }
  return out;
}

Op op_arg(std::string_view name, std::span<const BuilderArg> a, size_t i) {
  const Arg* t = arg_arg(a[i]);
  if (!t || !t->is_op()) bad_arg(name, i, "an op");
  return t->as_op();
}

DType dtype_arg(std::string_view name, std::span<const BuilderArg> a, size_t i) {
  const Arg* t = arg_arg(a[i]);
  if (!t || !t->is_dtype()) bad_arg(name, i, "a dtype");
  return t->as_dtype();
}

const UOp& one_uop(std::string_view name, std::span<const BuilderArg> a, size_t i) {
  const UOp* u = uop_arg(a[i]);
  if (!u) bad_arg(name, i, "a UOp");
  return *u;
}

std::vector<UOp> uops_from(std::string_view name, std::span<const BuilderArg> a, size_t first) {
  std::vector<UOp> out;
  for (size_t i = first; i < a.size(); ++i) out.push_back(one_uop(name, a, i));
  return out;
}

constexpr size_t kAny = SIZE_MAX;

const UOpBuilder kBuilders[] = {
    {"reshape", 1, 1, "x.reshape(shape)",
     [](const UOp& x, std::span<const BuilderArg> a) {
       return x.reshape(shape_arg("reshape", a, 0));
     }},
    {"permute", 1, 1, "x.permute(order)",
     [](const UOp& x, std::span<const BuilderArg> a) {
       return x.permute(ints_arg("permute", a, 0));
     }},
    {"expand", 1, 1, "x.expand(shape)",
     [](const UOp& x, std::span<const BuilderArg> a) {
       return x.expand(shape_arg("expand", a, 0));
     }},
    {"pad", 2, 2, "x.pad(offsets, shape)",
     [](const UOp& x, std::span<const BuilderArg> a) {
       return x.pad(shape_arg("pad", a, 0), shape_arg("pad", a, 1));
     }},
    {"shrink", 2, 2, "x.shrink(offsets, sizes)",
     [](const UOp& x, std::span<const BuilderArg> a) {
       return x.shrink(shape_arg("shrink", a, 0), shape_arg("shrink", a, 1));
     }},
    {"flip", 1, 1, "x.flip(flags)",
     [](const UOp& x, std::span<const BuilderArg> a) { return x.flip(bools_arg("flip", a, 0)); }},
    {"reduce", 2, 2, "x.reduce(op, axes)",
     [](const UOp& x, std::span<const BuilderArg> a) {
       return x.reduce(op_arg("reduce", a, 0), ints_arg("reduce", a, 1));
     }},
    {"r", 2, 2, "x.r(op, axes)",
     [](const UOp& x, std::span<const BuilderArg> a) {
       return x.r(op_arg("r", a, 0), ints_arg("r", a, 1));
     }},
    {"reduce_over", 1, kAny, "x.reduce_over(op, ranges...)",
     [](const UOp& x, std::span<const BuilderArg> a) {
       return x.reduce_over(op_arg("reduce_over", a, 0), uops_from("reduce_over", a, 1));
     }},
    {"index", 0, kAny, "x.index(idx...)",
     [](const UOp& x, std::span<const BuilderArg> a) {
       return x.index(std::span<const UOp>(uops_from("index", a, 0)));
     }},
    {"after", 1, kAny, "x.after(deps...)",
     [](const UOp& x, std::span<const BuilderArg> a) {
       return x.after(std::span<const UOp>(uops_from("after", a, 0)));
     }},
    {"cast", 1, 1, "x.cast(dtype)",
     [](const UOp& x, std::span<const BuilderArg> a) { return x.cast(dtype_arg("cast", a, 0)); }},
    {"bitcast", 1, 1, "x.bitcast(dtype)",
     [](const UOp& x, std::span<const BuilderArg> a) {
       return x.bitcast(dtype_arg("bitcast", a, 0));
     }},
    {"where", 2, 2, "cond.where(a, b)",
     [](const UOp& x, std::span<const BuilderArg> a) {
       return x.where(one_uop("where", a, 0), one_uop("where", a, 1));
     }},
};

}  // namespace

std::span<const UOpBuilder> uop_builders() { return kBuilders; }

const UOpBuilder* find_uop_builder(std::string_view name) {
  for (const UOpBuilder& b : kBuilders)
    if (b.name == name) return &b;
  return nullptr;
}

UOp call_uop_builder(std::string_view name, const UOp& self, std::span<const BuilderArg> args) {
  const UOpBuilder* b = find_uop_builder(name);
  if (!b) throw GraphError(fmt::format("no UOp builder named '{}'", name));
  if (args.size() < b->min_args || args.size() > b->max_args)
    throw GraphError(fmt::format("{}: {} argument(s) given, {}", b->signature, args.size(),
                                 b->min_args == b->max_args
                                     ? fmt::format("expects {}", b->min_args)
                                     : fmt::format("expects at least {}", b->min_args)));
  return b->build(self, args);
}

UOp buffer_uop(DType dtype, int64_t slot, int64_t size, std::string_view device) {
  return UOp::make(Op::Buffer, dtype, {},
                   Arg::record("ParamArg", {{"slot", Arg::integer(slot)},
                                            {"size", Arg::integer(size)},
                                            {"device", Arg::string(device)}}));
}

UOp buffer_view(const UOp& buffer, const Shape& shape) {
  if (buffer.op() != Op::Buffer)
    throw GraphError(
        fmt::format("a buffer view needs a BUFFER, got {}", op_info(buffer.op()).py_name));
  return UOp::make(Op::Reshape, buffer.dtype(), {buffer, shape_to_uop(shape)});
}

bool is_buffer_view(const UOp& u) { return u.op() == Op::Reshape && u.src(0).op() == Op::Buffer; }

bool is_buffer_state(const UOp& u) {
  return u.op() == Op::Buffer || u.op() == Op::After || is_buffer_view(u);
}

UOp view_base(const UOp& u) {
  UOp v = u;
  while (!is_buffer_state(v) && groups::movement().contains(v.op())) v = v.src(0);
  return v;
}

UOp movement_base(const UOp& u) {
  UOp v = u;
  while (v.op() == Op::Detach || groups::movement().contains(v.op())) v = v.src(0);
  return v;
}

bool is_gated_index(const UOp& i) {
  return i.op() == Op::Where && i.src(2).op() == Op::Const && i.src(2).arg().is_invalid();
}

UOp rebase_view(const UOp& u, const UOp& from, const UOp& to) {
  std::vector<UOp> chain;
  for (UOp v = u; v != from; v = v.src(0)) {
    if (!groups::movement().contains(v.op())) return UOp();
    chain.push_back(v);
  }
  UOp out = to;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    std::vector<UOp> src(it->src().begin(), it->src().end());
    src[0] = out;
    out = it->with_src(src);
  }
  return out;
}

}  // namespace tinyrw
