#include "codegen/opt.h"

#include <algorithm>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "codegen/kernel_name.h"
#include "ir/axis.h"
#include "ir/builders.h"
#include "ir/env.h"
#include "ir/graph.h"
#include "ir/kernel_info.h"
#include "ir/render.h"
#include "ir/rewrite.h"
#include "rules/helpers/kernel.h"
#include "rules_gen/collapse.h"
#include "rules_gen/expander.h"
#include "rules_gen/opts.h"

namespace tinyrw {

namespace {

constexpr std::pair<OptOp, const char*> kOptNames[] = {
    {OptOp::Upcast, "UPCAST"}, {OptOp::Unroll, "UNROLL"},     {OptOp::Local, "LOCAL"},
    {OptOp::Group, "GROUP"},   {OptOp::GroupTop, "GROUPTOP"}, {OptOp::Thread, "THREAD"},
    {OptOp::Padto, "PADTO"},   {OptOp::Swap, "SWAP"},         {OptOp::Nolocals, "NOLOCALS"}};

const char* opt_name(OptOp op) {
  for (const auto& [o, name] : kOptNames)
    if (o == op) return name;
  throw std::logic_error("an OptOp without a name");
}

// the order of a kernel's axes for opts and in its name (tinygrad's axis_to_pos)
int opt_position(AxisType t) { return axis_info(t).position.value_or(9); }

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

bool is_output_axis(AxisType t) {
  return t == AxisType::Global || t == AxisType::Local || t == AxisType::Weak ||
         t == AxisType::Loop;
}
bool is_reduce_axis(AxisType t) { return t == AxisType::Reduce || t == AxisType::GroupReduce; }

void check(bool ok, const Opt& opt, std::string_view why) {
  if (!ok) throw KernelOptError(fmt::format("{}: {}", opt_repr(opt), why));
}

// The output ranges every output of the kernel loops over, of a type a THREAD opt may split
// (tinygrad's _globalizable_rngs; an output that runs in every thread would be written by each).
std::vector<UOp> globalizable_ranges(const UOp& sink) {
  std::vector<UOp> effects;
  std::vector<UOp> todo(sink.src().begin(), sink.src().end());
  while (!todo.empty()) {
    const UOp e = todo.back();
    todo.pop_back();
    if (e.op() == Op::Group)
      todo.insert(todo.end(), e.src().begin(), e.src().end());
    else
      effects.push_back(e);
  }
  std::optional<std::vector<UOp>> common;
  for (const UOp& e : effects) {
    std::vector<UOp> mine;
    if (e.op() == Op::End)
      for (size_t s = 1; s < e.nsrc(); ++s)
        for (const UOp& r : toposort(e.src(s)))
          if (r.op() == Op::Range &&
              (axis_type_of(r) == AxisType::Weak || axis_type_of(r) == AxisType::Loop))
            mine.push_back(r);
    if (!common) {
      common = mine;
    } else {
      std::erase_if(*common,
                    [&](const UOp& r) { return std::ranges::find(mine, r) == mine.end(); });
    }
  }
  return common.value_or(std::vector<UOp>{});
}

// The ranges a store inside them does not index with: the store writes one element over and over
// (an accumulation in a custom kernel), so their iterations must stay in order, one at a time.
std::unordered_set<UOp> accumulating_ranges(const UOp& sink) {
  // the ranges each store's index uses, found once per store
  std::unordered_map<UOp, std::unordered_set<UOp>> indexed;
  for (const UOp& st : toposort(sink))
    if (st.op() == Op::Store) {
      std::unordered_set<UOp>& used = indexed[st];
      for (const UOp& x : toposort(st.src(0)))
        if (x.op() == Op::Range) used.insert(x);
    }
  std::unordered_set<UOp> out;
  for (const UOp& e : toposort(sink)) {
    if (e.op() != Op::End) continue;
    std::vector<const std::unordered_set<UOp>*> stores;
    for (const UOp& u : toposort(e.src(0)))
      if (u.op() == Op::Store) stores.push_back(&indexed.at(u));
    for (size_t k = 1; k < e.nsrc(); ++k)
      for (const UOp& r : toposort(e.src(k)))
        if (r.op() == Op::Range && std::any_of(stores.begin(), stores.end(),
                                               [&](const auto* s) { return !s->contains(r); }))
          out.insert(r);
  }
  return out;
}

// A fresh range id: one past the kernel's largest.
int next_range_id(const UOp& sink) {
  i128 next = 0;
  for (const UOp& u : toposort(sink))
    if (u.op() == Op::Range) next = std::max(next, ids_of(u).front() + 1);
  return static_cast<int>(next);
}

// tinygrad's shift_to: r (size s) becomes r' * n + u (or u * (s/n) + r' at the top), u a new
// range of size n and type t.
UOp shift_to(const UOp& sink, const Opt& opt, const UOp& r, int64_t amount, AxisType t, bool top) {
  const int64_t size = size_of(r);
  check(size >= 0, opt,
        fmt::format("only a range of constant size splits, not {}", render(r.src(0))));
  check(size > 0 && amount > 0 && size % amount == 0, opt,
        fmt::format("{} does not divide the range's size {}", amount, size));
  check(amount != 1, opt, "one lane splits nothing off");
  const UOp lanes = UOp::range(UOp::cint(amount), next_range_id(sink), t);
  // the new range takes the whole range: no loop is left (a range of one would stay a loop)
  const UOp rest = r.with_src({UOp::cint(size / amount)});
  const UOp split = size == amount ? lanes
                    : top          ? lanes * UOp::cint(size / amount) + rest
                                   : rest * UOp::cint(amount) + lanes;
  return substitute(sink, {{r, split}});
}

// PADTO: r runs to `padded`; rules/opts.rw gates what uses it to its old size.
UOp pad_to(const UOp& sink, const UOp& r, int64_t padded) {
  const UOp wider = r.with_src({UOp::cint(padded)});
  rw::KernelContext ctx{.padded_range = wider, .padded_size = size_of(r)};
  return graph_rewrite(substitute(sink, {{r, wider}}), &rules::pad_range(),
                       {.ctx = &ctx, .name = "pad range"});
}

}  // namespace

std::string opt_repr(const Opt& o) {
  if (o.op == OptOp::Nolocals) return "NOLOCALS";
  return fmt::format("{}({}, {})", opt_name(o.op), o.axis, o.arg);
}

UOp simplify_ranges(const UOp& sink) {
  // a sum picking one element by an index read from memory is that read (rules/collapse.rw)
  const UOp collapsed = graph_rewrite(sink, &rules::load_collapse(), {.name = "load collapse"});
  const UOp split = graph_rewrite(collapsed, &rules::split_ranges(), {.name = "split ranges"});
  const UOp flat = graph_rewrite(split, &rules::initial_symbolic(), {.name = "initial symbolic"});
  return graph_rewrite(flat, &rules::simplify_ranges(), {.name = "simplify ranges"});
}

Arg opt_to_arg(const Opt& o) {
  return Arg::tuple({Arg::string(opt_name(o.op)), Arg::integer(o.axis), Arg::integer(o.arg)});
}

Opt opt_from_arg(const Arg& a) {
  const bool ok = a.is_tuple() && a.items().size() == 3 && a.items()[0].is_string() &&
                  a.items()[1].is_int() && a.items()[2].is_int();
  const std::string name = ok ? a.items()[0].as_string() : "";
  for (const auto& [op, n] : kOptNames)
    if (name == n)
      return Opt{op, static_cast<int>(a.items()[1].as_int()),
                 static_cast<int64_t>(a.items()[2].as_int())};
  throw KernelOptError(
      "an opt is (name, axis, arg) with a name of UPCAST, UNROLL, LOCAL, GROUP, GROUPTOP, THREAD, "
      "PADTO, SWAP or NOLOCALS, got " +
      a.repr());
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

UOp convert_loop_to_global(const UOp& sink, const Target& target) {
  if (!target.has_local) return sink;
  std::unordered_map<UOp, UOp> global;
  for (const UOp& r : globalizable_ranges(sink)) {
    const auto items = r.arg().items();
    std::vector<Arg> arg(items.begin(), items.end());
    arg.back() = Arg::string(axis_type_name(AxisType::Global));
    global.emplace(r, r.with_arg(Arg::tuple(std::move(arg))));
  }
  return global.empty() ? sink : substitute(sink, global);
}

UOp apply_opt(const UOp& sink, const Opt& opt, const Target& target) {
  KernelInfo info = KernelInfo::of(sink);
  const std::vector<UOp> rngs = opt_ranges(sink);
  auto types = [&](std::initializer_list<AxisType> ts) {
    return std::any_of(rngs.begin(), rngs.end(), [&](const UOp& r) {
      return std::ranges::find(ts, axis_type_of(r)) != ts.end();
    });
  };
  auto finish = [&](const UOp& out) {
    info.applied_opts.push_back(opt_to_arg(opt));
    info.name = kernel_name(out);
    return out.with_arg(info.to_arg());
  };
  if (opt.op == OptOp::Nolocals) {
    check(!types({AxisType::Warp, AxisType::Local, AxisType::GroupReduce}), opt,
          "the kernel has locals already");
    info.dont_use_locals = true;
    return finish(sink);
  }
  if (opt.op == OptOp::Local || opt.op == OptOp::Group || opt.op == OptOp::GroupTop)
    check(target.has_local, opt,
          fmt::format("{} has no local memory or workgroups", target.device));
  // the range the opt addresses (tinygrad's real_axis)
  std::vector<UOp> candidates;
  std::string among = "opt";
  for (const UOp& r : rngs) {
    const AxisType t = axis_type_of(r);
    if (opt.op == OptOp::Unroll) {
      among = "reduce";
      if (is_reduce_axis(t) && size_of(r) > 1) candidates.push_back(r);
    } else if (opt.op == OptOp::Group || opt.op == OptOp::GroupTop) {
      among = "REDUCE";
      if (t == AxisType::Reduce) candidates.push_back(r);
    } else {
      candidates.push_back(r);
    }
  }
  check(opt.axis >= 0 && static_cast<size_t>(opt.axis) < candidates.size(), opt,
        fmt::format("the kernel has {} {} axes", candidates.size(), among));
  const UOp r = candidates[static_cast<size_t>(opt.axis)];
  const AxisType t = axis_type_of(r);
  std::optional<UOp> reduce;  // the kernel's first REDUCE
  for (const UOp& u : toposort(sink))
    if (u.op() == Op::Reduce) {
      reduce = u;
      break;
    }
  if (opt.op == OptOp::Padto) {
    check(size_of(r) > 0, opt, "only a range of constant size pads");
    check(t != AxisType::Upcast && t != AxisType::Unroll, opt, "an upcast range does not pad");
    check(t != AxisType::Thread, opt, "a thread range does not pad");
    check(opt.arg > 0, opt, "pads to a positive multiple");
    const int64_t padded = (size_of(r) + opt.arg - 1) / opt.arg * opt.arg;
    check(size_of(r) > padded / 4, opt, "the pad more than quadruples the work");
    return finish(pad_to(sink, r, padded));
  }
  if (opt.op == OptOp::Swap) {
    check(opt.arg >= 0 && static_cast<size_t>(opt.arg) < rngs.size(), opt,
          fmt::format("the kernel has {} opt axes", rngs.size()));
    const UOp& other = rngs[static_cast<size_t>(opt.arg)];
    check(t == AxisType::Global && axis_type_of(other) == AxisType::Global, opt,
          "swap is for GLOBAL ranges");
    auto renumbered = [](const UOp& x, const UOp& ids_from) {
      const auto from = ids_from.arg().items();
      std::vector<Arg> items(from.begin(), from.end());
      items.back() = x.arg().items().back();
      return x.with_arg(Arg::tuple(std::move(items)));
    };
    // in two steps: ranges of one size trade ids into each other's node
    const UOp parked =
        r.with_arg(Arg::tuple({Arg::integer(-1 - next_range_id(sink)), r.arg().items().back()}));
    const UOp out = substitute(substitute(sink, {{r, parked}}), {{other, renumbered(other, r)}});
    return finish(substitute(out, {{parked, renumbered(r, other)}}));
  }
  const int64_t amount = opt.arg == 0 ? size_of(r) : opt.arg;
  if (opt.op == OptOp::Upcast || opt.op == OptOp::Local || opt.op == OptOp::Thread)
    check(!accumulating_ranges(sink).contains(r), opt,
          "a store inside the loop does not index with it (it accumulates): its iterations run in "
          "order");
  const bool groups = opt.op == OptOp::Group || opt.op == OptOp::GroupTop;
  if (reduce && (groups || types({AxisType::GroupReduce}))) {
    int64_t lanes = 1;
    for (const UOp& x : rngs)
      if (axis_type_of(x) == AxisType::Upcast || axis_type_of(x) == AxisType::Warp ||
          axis_type_of(x) == AxisType::Local || axis_type_of(x) == AxisType::GroupReduce)
        lanes *= std::max<int64_t>(size_of(x), 1);
    const int64_t bytes = amount * lanes * reduce->dtype().itemsize();
    check(bytes <= target.shared_max, opt,
          fmt::format("needs {} bytes of shared memory, {} has {}", bytes, target.device,
                      target.shared_max));
  }
  AxisType to = AxisType::Upcast;
  switch (opt.op) {
    case OptOp::Unroll:
      check(amount <= 32, opt, fmt::format("{} lanes, more than 32", amount));
      check(is_reduce_axis(t), opt, "unroll is for reduce ranges");
      to = AxisType::Unroll;
      break;
    case OptOp::Upcast:
      check(amount <= 16, opt, fmt::format("{} lanes, more than 16", amount));
      check(is_output_axis(t), opt,
            fmt::format("upcast is for output axes, not {}", axis_type_name(t)));
      break;
    case OptOp::Local:
      check(!info.dont_use_locals, opt, "the kernel uses no locals (NOLOCALS)");
      check(t == AxisType::Global || t == AxisType::Weak || t == AxisType::Loop, opt,
            "local is for output ranges of the launch grid");
      // (every output must loop over it: an effect outside it would run in every thread of the
      // workgroup)
      if (t != AxisType::Global) {
        const std::vector<UOp> g = globalizable_ranges(sink);
        check(std::ranges::find(g, r) != g.end(), opt,
              "local splits only an output range every output loops over");
      }
      to = AxisType::Local;
      break;
    case OptOp::Thread: {
      check(target.has_threads, opt, fmt::format("{} runs no threads", target.device));
      check(amount <= target.thread_limit(), opt,
            fmt::format("{} threads, more than the {} this target runs", amount,
                        target.thread_limit()));
      check(!types({AxisType::Thread}), opt, "the kernel is threaded already");
      const std::vector<UOp> g = globalizable_ranges(sink);
      check(std::ranges::find(g, r) != g.end(), opt,
            "threads split only an output range every output loops over");
      to = AxisType::Thread;
      break;
    }
    case OptOp::Group:
    case OptOp::GroupTop: {
      check(!info.dont_use_locals, opt, "the kernel uses no locals (NOLOCALS)");
      check(t == AxisType::Reduce, opt, "group is for REDUCE ranges");
      for (const UOp& u : toposort(sink))
        if (u.op() == Op::Reduce &&
            std::find(u.src().begin() + 1, u.src().end(), r) != u.src().end())
          for (const UOp& o : open_ranges(u))
            check(axis_type_of(o) != AxisType::Reduce && axis_type_of(o) != AxisType::Unroll &&
                      axis_type_of(o) != AxisType::GroupReduce,
                  opt, "a group inside another reduction");
      to = AxisType::GroupReduce;
      break;
    }
    default:
      throw std::logic_error("apply_opt: an opt without a case");
  }
  UOp out = shift_to(sink, opt, r, amount, to,
                     /*top=*/opt.op == OptOp::GroupTop || opt.op == OptOp::Thread);
  out = graph_rewrite(out, &rules::flatten_range(), {.name = "flatten range"});
  return finish(out);
}

namespace {

// The kernel as tinygrad's Scheduler sees it for the heuristics (codegen/opt/postrange.py).
struct KernelView {
  // An INDEX's index sources, ungated (tinygrad's get_idx()), with the ranges below each.
  struct Access {
    std::vector<UOp> parts;
    std::vector<std::unordered_set<UOp>> ranges;
    // whether it uses range r: r is one of its parts or below one
    bool uses(const UOp& r) const {
      return std::any_of(ranges.begin(), ranges.end(),
                         [&](const auto& s) { return s.contains(r); });
    }
    // Whether it uses r as tinygrad's heuristics read it: `rng in idx.backward_slice` leaves out
    // an index that is the bare range. In a reduction this deviates: there the bare range counts,
    // else a reduction's lone output axis counts as ignored by the output itself and is upcast
    // (its row sums of 4096^2 are r_1024_4_1024_4), and the first kernel of a 16M-float sum ran
    // 2.3x slower upcast (docs/tinygrad-differences.md). An elementwise kernel keeps tinygrad's
    // reading (3072 elements: E_1024_3).
    bool uses_as_tinygrad(const UOp& r, bool reduces) const {
      if (reduces) return uses(r);
      for (size_t p = 0; p < parts.size(); ++p)
        if (parts[p] != r && ranges[p].contains(r)) return true;
      return false;
    }
  };
  std::vector<UOp> rngs;  // opt_ranges
  std::vector<Access> accesses;
  std::optional<UOp> reduce;  // the first REDUCE
  bool reduces = false;
  std::unordered_set<UOp> accumulating;  // output ranges no opt may split (accumulating_ranges)
  explicit KernelView(const UOp& k) : rngs(opt_ranges(k)), accumulating(accumulating_ranges(k)) {
    for (const UOp& u : toposort(k)) {
      if (u.op() == Op::Reduce && !reduce) reduce = u;
      if (u.op() != Op::Index || u.nsrc() < 2) continue;
      Access a;
      for (size_t s = 1; s < u.nsrc(); ++s) {
        a.parts.push_back(is_gated_index(u.src(s)) ? u.src(s).src(1) : u.src(s));
        std::unordered_set<UOp> below;
        for (const UOp& x : toposort(a.parts.back()))
          if (x.op() == Op::Range) below.insert(x);
        a.ranges.push_back(std::move(below));
      }
      accesses.push_back(std::move(a));
    }
    reduces = reduce.has_value();
  }
  int64_t size(size_t axis) const { return size_of(rngs[axis]); }
  AxisType type(size_t axis) const { return axis_type_of(rngs[axis]); }
  std::vector<int> axes(bool (*pred)(AxisType)) const {
    std::vector<int> out;
    for (size_t a = 0; a < rngs.size(); ++a)
      if (pred(type(a)) && size(a) > 1) out.push_back(static_cast<int>(a));
    return out;
  }
  std::vector<int> axes_of(std::initializer_list<AxisType> ts) const {
    std::vector<int> out;
    for (size_t a = 0; a < rngs.size(); ++a)
      if (std::ranges::find(ts, type(a)) != ts.end()) out.push_back(static_cast<int>(a));
    return out;
  }
  std::vector<int> upcastable() const {
    std::vector<int> out = axes(is_output_axis);
    std::erase_if(out, [&](int a) { return accumulating.contains(rngs[static_cast<size_t>(a)]); });
    return out;
  }
  std::vector<int> unrollable() const { return axes(is_reduce_axis); }
  // UNROLL's axis for range `axis`: its place among the reduce ranges (apply_opt's numbering)
  int unroll_axis(int axis) const {
    const std::vector<int> u = unrollable();
    return static_cast<int>(std::ranges::find(u, axis) - u.begin());
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
  // the elements of the output (reduce axes count 1), and every range's product
  int64_t outputs() const {
    int64_t n = 1;
    for (int a : upcastable()) n *= size(static_cast<size_t>(a));
    return n;
  }
  int64_t work() const {
    int64_t n = 1;
    for (size_t a = 0; a < rngs.size(); ++a) n *= std::max<int64_t>(size(a), 1);
    return n;
  }
};

// tinygrad's matvec heuristic (targets with locals and shared memory): a sum of products of two
// reads whose first index walks the first reduce range, and whose second read uses every range
// the first does, is grouped by 8 threads a row, 4 rows a workgroup, 4 rows a thread.
std::optional<std::vector<Opt>> matvec_opts(const UOp& k, const Target& target) {
  constexpr int64_t kBlock = 4, kThreadsPerRow = 8, kRowsPerThread = 4;
  if (!target.has_local || !target.has_shared) return {};
  const KernelView v(k);
  if (!v.reduce || v.rngs.size() < 2) return {};
  const UOp& red = *v.reduce;
  const UOp& mul = red.src(0);
  if (red.arg().items()[0].as_op() != Op::Add || mul.op() != Op::Mul ||
      mul.src(0).op() != Op::Index || mul.src(1).op() != Op::Index)
    return {};
  const std::vector<int> reduce_axes = v.axes_of({AxisType::Reduce});
  if (reduce_axes.empty()) return {};
  const UOp first = v.rngs[static_cast<size_t>(reduce_axes.front())];
  const KernelView::Access a0 = KernelView(mul.src(0)).accesses.back();
  const KernelView::Access a1 = KernelView(mul.src(1)).accesses.back();
  const std::vector<UOp> terms = a0.parts.front().split(Op::Add);
  if (std::ranges::find(terms, first) == terms.end()) return {};
  for (const UOp& r : a0.ranges.front())
    if (!a1.uses(r)) return {};
  for (int g : v.axes_of({AxisType::Global})) {
    if (size_of(first) % kThreadsPerRow != 0 ||
        v.size(static_cast<size_t>(g)) % (kBlock * kRowsPerThread) != 0)
      continue;
    std::vector<Opt> out;
    try {  // (as tinygrad's, the matvec goes on without the group where it is refused)
      (void)apply_opt(k, {OptOp::Group, 0, kThreadsPerRow}, target);
      out.push_back({OptOp::Group, 0, kThreadsPerRow});
    } catch (const KernelOptError&) {
    }
    out.push_back({OptOp::Local, g, kBlock});
    out.push_back({OptOp::Upcast, g, kRowsPerThread});
    return out;
  }
  return {};
}

}  // namespace

std::vector<Opt> hand_coded_opts(const UOp& sink, const Target& target) {
  std::vector<Opt> out;
  UOp k = sink;
  // every opt below applies by construction (a refusal is a bug and raises), but those tried
  auto apply = [&](const Opt& o) {
    k = apply_opt(k, o, target);
    out.push_back(o);
  };
  auto try_apply = [&](const Opt& o) {
    try {
      apply(o);
      return true;
    } catch (const KernelOptError&) {
      return false;
    }
  };
  if (std::optional<std::vector<Opt>> mv = matvec_opts(k, target)) {
    for (const Opt& o : *mv) apply(o);
    return out;
  }
  // are we grouping? (a reduction with few outputs, on a target with locals: elsewhere GROUPTOP
  // is refused)
  if (target.has_local && KernelView(k).outputs() <= (env_int("NOLOCALS", 0) ? 240 : 2048))
    for (int axis : {0, 1, 2})
      if (try_apply({OptOp::GroupTop, axis, 16})) break;
  if (!KernelView(k).axes_of({AxisType::GroupReduce}).empty()) return out;
  // small output axes that gate a where (a stack's, a pad's) are upcast whole, up to 7 x 7 lanes
  {
    const KernelView v(k);
    std::unordered_set<UOp> gated;
    for (const UOp& u : toposort(k))
      if (u.op() == Op::Where)
        for (const UOp& x : toposort(u.src(0)))
          if (x.op() == Op::Range) gated.insert(x);
    std::vector<int> to_upcast;
    int64_t lanes = 1;
    for (int a : v.upcastable()) {
      if (v.size(a) <= 7 && gated.contains(v.rngs[a]) && lanes * v.size(a) <= 49) {
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
    if (v.outputs() < 1024 || v.upcast_size() >= 32) break;
    const std::vector<UOp> lanes = v.lanes();
    std::optional<std::tuple<int64_t, int64_t, int, int64_t>> best;
    for (int a : v.upcastable()) {
      for (int64_t amount : {3, 4}) {
        if (std::ranges::find(upcast_axes, a) != upcast_axes.end() || v.size(a) % amount != 0)
          continue;
        const UOp& r = v.rngs[a];
        // (a lane counts where it is the bare index: tinygrad's whole-range upcast leaves r*n+u)
        const bool ignored =
            std::any_of(v.accesses.begin(), v.accesses.end(), [&](const KernelView::Access& idx) {
              return !idx.uses_as_tinygrad(r, v.reduces) &&
                     std::all_of(lanes.begin(), lanes.end(),
                                 [&](const UOp& l) { return idx.uses(l); });
            });
        if (!ignored) continue;
        int64_t num = 0, sum = 0;
        for (const KernelView::Access& idx : v.accesses) {
          if (idx.uses_as_tinygrad(r, v.reduces)) ++num;
          for (const UOp& part : idx.parts)
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
  // workgroups: output axes some buffer ignores first, then later axes, up to 128 threads
  if (target.has_local) {
    if (env_int("NOLOCALS", 0)) {
      apply({OptOp::Nolocals});
    } else {
      const KernelView v(k);
      std::vector<std::pair<bool, int>> ranking;
      // (the GLOBAL ones: every output loops over them; and not one a store accumulates over)
      const auto accumulating = accumulating_ranges(k);
      for (int a : v.axes_of({AxisType::Global})) {
        if (v.size(static_cast<size_t>(a)) < 0 ||
            accumulating.contains(v.rngs[static_cast<size_t>(a)]))
          continue;
        const bool ignored =
            std::any_of(v.accesses.begin(), v.accesses.end(), [&](const KernelView::Access& idx) {
              return !idx.uses(v.rngs[static_cast<size_t>(a)]);
            });
        ranking.emplace_back(ignored, a);
      }
      std::sort(ranking.begin(), ranking.end(), [](const auto& x, const auto& y) { return x > y; });
      std::vector<std::pair<int, int64_t>> to_local;
      for (const auto& [ignored, a] : ranking) {
        int64_t threads = 1;
        for (const auto& l : to_local) threads *= l.second;
        std::vector<int64_t> sizes{16, 8, 4, 3, 2};
        if (a == 0) sizes.insert(sizes.begin(), 32);
        for (int64_t n : sizes)
          if (v.size(static_cast<size_t>(a)) % n == 0 && threads * n <= 128) {
            to_local.emplace_back(a, n);
            break;
          }
      }
      if (to_local.size() > 3) to_local.resize(3);
      std::sort(to_local.begin(), to_local.end());
      int deleted = 0;
      for (const auto& [axis, n] : to_local) {
        const int a = axis - deleted;
        const bool whole = KernelView(k).size(static_cast<size_t>(a)) == n;
        apply({OptOp::Local, a, n});
        if (whole) ++deleted;
      }
    }
  }
  // threads: the most that leave each 128Ki operations, split off the first output axis they
  // divide
  if (target.has_threads) {
    for (int64_t threads : {32, 16, 12, 8, 6, 5, 4, 3, 2}) {
      const KernelView v(k);
      if (threads > target.thread_limit() || v.work() / (128 << 10) < threads) continue;
      bool applied = false;
      for (int a : v.axes_of({AxisType::Weak, AxisType::Loop}))
        if (v.size(static_cast<size_t>(a)) > 0 && v.size(static_cast<size_t>(a)) % threads == 0) {
          applied = try_apply({OptOp::Thread, a, threads});
          break;
        }
      if (applied) break;
    }
  }
  return out;
}

UOp apply_opts(const UOp& sink, std::span<const Opt> opts, const Target& target) {
  UOp out = sink;
  for (const Opt& o : opts) out = apply_opt(out, o, target);
  return out;
}

}  // namespace tinyrw
