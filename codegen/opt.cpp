#include "codegen/opt.h"

#include <algorithm>
#include <optional>
#include <tuple>

#include <fmt/format.h>

#include "codegen/kernel_name.h"
#include "ir/axis.h"
#include "ir/builders.h"
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

namespace {

bool is_output_axis(AxisType t) {
  return t == AxisType::Global || t == AxisType::Local || t == AxisType::Weak ||
         t == AxisType::Loop;
}
bool is_reduce_axis(AxisType t) { return t == AxisType::Reduce || t == AxisType::GroupReduce; }

// The kernel as tinygrad's Scheduler sees it for the heuristics (codegen/opt/postrange.py).
struct KernelView {
  std::vector<UOp> rngs;                  // opt_ranges
  std::vector<std::vector<UOp>> indexes;  // each INDEX's index sources, ungated (get_idx())
  bool reduces = false;
  explicit KernelView(const UOp& k) : rngs(opt_ranges(k)) {
    for (const UOp& u : toposort(k)) {
      if (u.op() == Op::Reduce) reduces = true;
      if (u.op() != Op::Index || u.nsrc() < 2) continue;
      std::vector<UOp> parts;
      for (size_t s = 1; s < u.nsrc(); ++s)
        parts.push_back(is_gated_index(u.src(s)) ? u.src(s).src(1) : u.src(s));
      indexes.push_back(std::move(parts));
    }
  }
  int64_t size(size_t axis) const { return size_of(rngs[axis]); }
  AxisType type(size_t axis) const { return axis_type_of(rngs[axis]); }
  std::vector<int> axes(bool (*pred)(AxisType)) const {
    std::vector<int> out;
    for (size_t a = 0; a < rngs.size(); ++a)
      if (pred(type(a)) && size(a) > 1) out.push_back(static_cast<int>(a));
    return out;
  }
  std::vector<int> upcastable() const { return axes(is_output_axis); }
  std::vector<int> unrollable() const { return axes(is_reduce_axis); }
  // UNROLL's axis for range `axis`: its place among the reduce ranges (apply_opt's numbering)
  int unroll_axis(int axis) const {
    int n = 0;
    for (int a = 0; a < axis; ++a) n += is_reduce_axis(type(static_cast<size_t>(a)));
    return n;
  }
  std::vector<UOp> lanes() const {  // the UPCAST and UNROLL ranges
    std::vector<UOp> out;
    for (const UOp& r : rngs)
      if (axis_type_of(r) == AxisType::Upcast || axis_type_of(r) == AxisType::Unroll)
        out.push_back(r);
    return out;
  }
  int64_t upcast_size() const {
    int64_t n = 1;
    for (const UOp& r : lanes()) n *= size_of(r);
    return n;
  }
};

// Whether index sources `parts` use range r: r is one of them or below one.
bool uses(const std::vector<UOp>& parts, const UOp& r) {
  return std::any_of(parts.begin(), parts.end(), [&](const UOp& p) {
    const std::vector<UOp> below = toposort(p);
    return std::find(below.begin(), below.end(), r) != below.end();
  });
}
// Whether they use r as tinygrad's heuristics read it: `rng in idx.backward_slice` leaves out an
// index that is the bare range. In a reduction this deviates: there the bare range counts, else
// a reduction's lone output axis counts as ignored by the output itself and is upcast (its row
// sums of 4096^2 are r_1024_4_1024_4), and the first kernel of a 16M-float sum ran 2.3x slower
// upcast (docs/tinygrad-differences.md). An elementwise kernel keeps tinygrad's reading (3072
// elements: E_1024_3).
bool uses_as_tinygrad(const std::vector<UOp>& parts, const UOp& r, bool reduces) {
  if (reduces) return uses(parts, r);
  return std::any_of(parts.begin(), parts.end(),
                     [&](const UOp& p) { return p != r && uses({p}, r); });
}

}  // namespace

std::vector<Opt> hand_coded_opts(const UOp& sink) {
  std::vector<Opt> out;
  UOp k = sink;
  // every opt below applies by construction (a refusal is a bug and raises), but the unroll
  auto apply = [&](const Opt& o) {
    k = apply_opt(k, o);
    out.push_back(o);
  };
  // small output axes that gate a where (a stack's, a pad's) are upcast whole, up to 7 x 7 lanes
  {
    const KernelView v(k);
    std::vector<UOp> gated;
    for (const UOp& u : toposort(k))
      if (u.op() == Op::Where)
        for (const UOp& x : toposort(u.src(0)))
          if (x.op() == Op::Range) gated.push_back(x);
    std::vector<int> to_upcast;
    int64_t lanes = 1;
    for (int a : v.upcastable()) {
      const bool masked = std::find(gated.begin(), gated.end(), v.rngs[a]) != gated.end();
      if (v.size(a) <= 7 && masked && lanes * v.size(a) <= 49) {
        to_upcast.push_back(a);
        lanes *= v.size(a);
      }
    }
    for (auto a = to_upcast.rbegin(); a != to_upcast.rend(); ++a) apply({OptOp::Upcast, *a, 0});
  }
  // more upcasts of output axes that some buffer's index ignores (a matmul's), fewest and smallest
  // strides first, while the outputs number 1024 or more and the lanes fewer than 32
  std::vector<int> upcast_axes;
  for (;;) {
    const KernelView v(k);
    int64_t outputs = 1;
    for (int a : v.upcastable()) outputs *= v.size(a);
    if (outputs < 1024 || v.upcast_size() >= 32) break;
    const std::vector<UOp> lanes = v.lanes();
    std::optional<std::tuple<int64_t, int64_t, int, int64_t>> best;
    for (int a : v.upcastable()) {
      for (int64_t amount : {3, 4}) {
        if (std::ranges::find(upcast_axes, a) != upcast_axes.end() || v.size(a) % amount != 0)
          continue;
        const UOp& r = v.rngs[a];
        // (a lane counts where it is the bare index: tinygrad's whole-range upcast leaves r*n+u)
        const bool ignored =
            std::any_of(v.indexes.begin(), v.indexes.end(), [&](const std::vector<UOp>& idx) {
              return !uses_as_tinygrad(idx, r, v.reduces) &&
                     std::all_of(lanes.begin(), lanes.end(),
                                 [&](const UOp& l) { return uses(idx, l); });
            });
        if (!ignored) continue;
        int64_t num = 0, sum = 0;
        for (const std::vector<UOp>& idx : v.indexes) {
          if (uses_as_tinygrad(idx, r, v.reduces)) ++num;
          for (const UOp& part : idx)
            for (const UOp& c : part.split(Op::Add)) {
              if (c == r) sum += 1;
              if (c.op() == Op::Mul && c.src(0) == r && c.src(1).op() == Op::Const)
                sum += static_cast<int64_t>(c.src(1).arg().as_int());
              if (c.op() == Op::Mul && c.src(1) == r && c.src(0).op() == Op::Const)
                sum += static_cast<int64_t>(c.src(0).arg().as_int());
            }
        }
        const auto choice = std::tuple(num, sum, a, amount);
        if (!best || choice < *best) best = choice;
      }
    }
    if (!best) break;
    apply({OptOp::Upcast, std::get<2>(*best), std::get<3>(*best)});
    upcast_axes.push_back(std::get<2>(*best));
  }
  // the last reduce axis unrolls whole up to 32 (and a second one too where both are tiny), by 4
  // beyond; as tinygrad's, a refused unroll (a multireduce whose sizes differ) is skipped
  try {
    const KernelView v(k);
    const std::vector<int> red = v.unrollable();
    const bool unrolled = std::any_of(v.rngs.begin(), v.rngs.end(), [](const UOp& r) {
      return axis_type_of(r) == AxisType::Unroll;
    });
    if (!red.empty() && (v.upcast_size() <= 4 || !unrolled) && v.upcast_size() < 64) {
      const int64_t s = v.size(static_cast<size_t>(red.back()));
      if (s <= 32) {
        apply({OptOp::Unroll, v.unroll_axis(red.back()), 0});
        const KernelView w(k);
        const std::vector<int> rest = w.unrollable();
        if (!rest.empty() && s <= 3 && w.size(static_cast<size_t>(rest.back())) <= 3)
          apply({OptOp::Unroll, w.unroll_axis(rest.back()), 0});
      } else if (s % 4 == 0) {
        apply({OptOp::Unroll, v.unroll_axis(red.back()), 4});
      }
    }
  } catch (const KernelOptError&) {
  }
  // where nothing is upcast or unrolled yet, the last output axis is upcast by 4
  {
    const KernelView v(k);
    const std::vector<int> up = v.upcastable();
    if (v.lanes().empty() && !up.empty() && v.size(static_cast<size_t>(up.back())) % 4 == 0)
      apply({OptOp::Upcast, up.back(), 4});
  }
  return out;
}

UOp apply_opts(const UOp& sink, std::span<const Opt> opts) {
  UOp out = sink;
  for (const Opt& o : opts) out = apply_opt(out, o);
  return out;
}

}  // namespace tinyrw
