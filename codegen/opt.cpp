#include "codegen/opt.h"

#include <algorithm>
#include <tuple>

#include <fmt/format.h>

#include "codegen/kernel_name.h"
#include "ir/axis.h"
#include "ir/graph.h"
#include "ir/kernel_info.h"
#include "ir/rewrite.h"
#include "rules_gen/expander.h"

namespace tinyrw {

namespace {

// tinygrad's axis_to_pos: the order of a kernel's axes for opts
int opt_position(AxisType t) {
  switch (t) {
    case AxisType::Loop:
    case AxisType::Weak:
      return -1;
    case AxisType::Thread:
      return 0;
    case AxisType::Global:
      return 1;
    case AxisType::Warp:
      return 2;
    case AxisType::Local:
      return 3;
    case AxisType::Upcast:
      return 4;
    case AxisType::GroupReduce:
      return 5;
    case AxisType::Reduce:
      return 6;
    case AxisType::Unroll:
      return 7;
    default:
      return 8;
  }
}

std::vector<i128> ids_of(const UOp& r) {
  std::vector<i128> ids;
  const auto items = r.arg().items();
  for (size_t k = 0; k + 1 < items.size(); ++k) ids.push_back(items[k].as_int());
  return ids;
}

int64_t size_of(const UOp& r) {
  if (r.src(0).op() != Op::Const) return -1;  // a symbolic size: no opt splits it
  return static_cast<int64_t>(r.src(0).arg().as_int());
}

UOp apply_opt(const UOp& sink, const Opt& opt) {
  const std::string what = opt_repr(opt);
  const std::vector<UOp> rngs = opt_ranges(sink);
  std::vector<UOp> candidates;
  for (const UOp& r : rngs) {
    const AxisType t = axis_type_of(r);
    if (opt.op == OptOp::Unroll ? (t == AxisType::Reduce || t == AxisType::GroupReduce) : true)
      candidates.push_back(r);
  }
  if (opt.axis < 0 || static_cast<size_t>(opt.axis) >= candidates.size())
    throw KernelOptError(fmt::format("{}: the kernel has {} {} axes", what, candidates.size(),
                                     opt.op == OptOp::Unroll ? "reduce" : "opt"));
  const UOp& r = candidates[static_cast<size_t>(opt.axis)];
  const AxisType t = axis_type_of(r);
  if (opt.op == OptOp::Upcast && t != AxisType::Global && t != AxisType::Local &&
      t != AxisType::Weak && t != AxisType::Loop)
    throw KernelOptError(
        fmt::format("{}: upcast is for output axes, not {}", what, axis_type_name(t)));
  const int64_t size = size_of(r);
  const int64_t amount = opt.arg == 0 ? size : opt.arg;
  if (size <= 0 || amount <= 0 || size % amount != 0)
    throw KernelOptError(
        fmt::format("{}: {} does not divide the range's size {}", what, amount, size));
  if (amount == 1) throw KernelOptError(fmt::format("{}: one lane splits nothing off", what));
  const int64_t limit = opt.op == OptOp::Upcast ? 16 : 32;
  if (amount > limit)
    throw KernelOptError(fmt::format("{}: {} lanes, more than {}", what, amount, limit));
  // the new range's id: one past the kernel's largest
  i128 next = 0;
  for (const UOp& u : toposort(sink))
    if (u.op() == Op::Range) next = std::max(next, ids_of(u).front() + 1);
  const UOp lanes = UOp::range(UOp::cint(amount), static_cast<int>(next),
                               opt.op == OptOp::Upcast ? AxisType::Upcast : AxisType::Unroll);
  // the lanes take the whole range: no loop is left (a range of one would stay a loop)
  const UOp split =
      size == amount ? lanes : r.with_src({UOp::cint(size / amount)}) * UOp::cint(amount) + lanes;
  UOp out = substitute(sink, {{r, split}});
  out = graph_rewrite(out, &rules::flatten_range(), {.name = "flatten range"});
  KernelInfo info = KernelInfo::of(sink);
  info.applied_opts.push_back(opt_to_arg(opt));
  info.name = kernel_name(out);
  return out.with_arg(info.to_arg());
}

}  // namespace

std::string opt_repr(const Opt& o) {
  return fmt::format("{}({}, {})", o.op == OptOp::Upcast ? "UPCAST" : "UNROLL", o.axis, o.arg);
}

UOp simplify_ranges(const UOp& sink) {
  return graph_rewrite(sink, &rules::simplify_ranges(), {.name = "simplify ranges"});
}

Arg opt_to_arg(const Opt& o) {
  return Arg::tuple({Arg::string(o.op == OptOp::Upcast ? "UPCAST" : "UNROLL"), Arg::integer(o.axis),
                     Arg::integer(o.arg)});
}

Opt opt_from_arg(const Arg& a) {
  const bool ok = a.is_tuple() && a.items().size() == 3 && a.items()[0].is_string() &&
                  a.items()[1].is_int() && a.items()[2].is_int();
  const std::string op = ok ? a.items()[0].as_string() : "";
  if (op != "UPCAST" && op != "UNROLL")
    throw KernelOptError("an opt is (\"UPCAST\" or \"UNROLL\", axis, size), got " + a.repr());
  return Opt{op == "UPCAST" ? OptOp::Upcast : OptOp::Unroll,
             static_cast<int>(a.items()[1].as_int()), static_cast<int64_t>(a.items()[2].as_int())};
}

UOp with_opts(const UOp& sink, std::span<const Opt> opts) {
  KernelInfo info = KernelInfo::of(sink);
  std::vector<Arg> args;
  for (const Opt& o : opts) args.push_back(opt_to_arg(o));
  info.opts_to_apply = std::move(args);
  return sink.with_arg(info.to_arg());
}

std::vector<UOp> opt_ranges(const UOp& sink) {
  std::vector<UOp> out;
  for (const UOp& u : toposort(sink))
    if (u.op() == Op::Range && size_of(u) != 0 && size_of(u) != 1) out.push_back(u);
  std::stable_sort(out.begin(), out.end(), [](const UOp& a, const UOp& b) {
    return std::tuple(opt_position(axis_type_of(a)), ids_of(a)) <
           std::tuple(opt_position(axis_type_of(b)), ids_of(b));
  });
  return out;
}

std::vector<Opt> default_opts(const UOp& sink) {
  std::vector<Opt> out;
  UOp k = sink;
  auto take = [&](const Opt& o) {
    try {
      k = apply_opt(k, o);
      out.push_back(o);
      return true;
    } catch (const KernelOptError&) {  // this one does not apply: the kernel goes without it
      return false;
    }
  };
  const std::vector<UOp> rngs = opt_ranges(sink);
  std::vector<UOp> outputs;
  bool reduces = false;
  for (const UOp& r : rngs) {
    const AxisType t = axis_type_of(r);
    if (t == AxisType::Reduce) reduces = true;
    if (t == AxisType::Weak || t == AxisType::Loop || t == AxisType::Global) outputs.push_back(r);
  }
  // An output axis of a reduction is upcast where some buffer read inside the reduction's loop
  // ignores it (a matmul's: each value read serves every lane). Elsewhere its lanes read one more
  // stream each, which only slows the loop.
  std::vector<std::vector<UOp>> reads;  // the index math of each read inside a reduction loop
  for (const UOp& u : toposort(sink)) {
    if (u.op() != Op::Index || u.nsrc() < 2) continue;
    const UOp b = u.src(0).under(Op::After);
    if (b.op() != Op::Param && b.op() != Op::Buffer) continue;
    std::vector<UOp> below = toposort(UOp::sink({u.src().begin() + 1, u.src().end()}));
    if (std::any_of(below.begin(), below.end(), [](const UOp& x) {
          return x.op() == Op::Range && axis_type_of(x) == AxisType::Reduce;
        }))
      reads.push_back(std::move(below));
  }
  auto reused = [&](const UOp& r) {
    return std::any_of(reads.begin(), reads.end(), [&](const std::vector<UOp>& below) {
      return std::find(below.begin(), below.end(), r) == below.end();
    });
  };
  const auto last = static_cast<int>(outputs.size()) - 1;
  if (!outputs.empty() && (!reduces || reused(outputs.back()))) take({OptOp::Upcast, last, 4});
  if (reduces && outputs.size() > 1 && reused(outputs.front())) take({OptOp::Upcast, 0, 4});
  // a reduction without a register tile unrolls further: its lanes are independent chains of
  // one accumulator (rules/reduce.rw keeps_lanes); a tile's registers are spoken for
  const bool tiled = !out.empty();
  if (reduces && !(!tiled && take({OptOp::Unroll, 0, 8}))) take({OptOp::Unroll, 0, 4});
  return out;
}

UOp apply_opts(const UOp& sink, std::span<const Opt> opts) {
  UOp out = sink;
  for (const Opt& o : opts) out = apply_opt(out, o);
  return out;
}

}  // namespace tinyrw
