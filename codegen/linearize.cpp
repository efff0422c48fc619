#include "codegen/linearize.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <queue>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "codegen/index_proof.h"
#include "codegen/kernel_name.h"
#include "codegen/opt.h"
#include "ir/axis.h"
#include "ir/builders.h"
#include "ir/graph.h"
#include "ir/kernel_info.h"
#include "ir/render.h"
#include "ir/rewrite.h"
#include "rules/helpers/kernel.h"
#include "rules_gen/decompositions.h"
#include "rules_gen/devectorizer.h"
#include "rules_gen/expander.h"
#include "rules_gen/gpudims.h"
#include "rules_gen/linearize.h"
#include "rules_gen/reduce.h"
#include "rules_gen/symbolic.h"
#include "rules_gen/transcendental.h"

#include <fmt/format.h>

namespace tinyrw {

AddrSpace buffer_addrspace(const UOp& buffer) {
  const Arg* space = buffer.arg().is_record() ? buffer.arg().find_field("addrspace") : nullptr;
  if (space && space->is_string())
    for (const AddrSpace a : {AddrSpace::Local, AddrSpace::Reg})
      if (space->as_string() == addrspace_name(a)) return a;
  return AddrSpace::Global;
}

std::vector<UOp> param_buffers(const UOp& sink) {
  std::map<int64_t, UOp> by_slot;
  for (const UOp& u : toposort(sink))
    if (u.op() == Op::Param)
      by_slot.emplace(static_cast<int64_t>(u.arg().field("slot").as_int()), u);
  std::vector<UOp> bufs;
  for (const auto& [slot, p] : by_slot) {
    int64_t n = 1;
    for (const SInt& d : p.shape()) n *= d.value();
    bufs.push_back(UOp::make(
        Op::Buffer, p.dtype(), {},
        Arg::record("ParamArg", {{"slot", Arg::integer(slot)}, {"size", Arg::integer(n)}})));
  }
  return bufs;
}

namespace {

size_t slot_of(const UOp& param) { return static_cast<size_t>(param.arg().field("slot").as_int()); }

// The kernel's graph with PARAM accesses turned into INDEX(BUFFER, flat index).
class KernelBinder {
 public:
  // `name`: the kernel's, for errors (a generated kernel's or a custom kernel's)
  KernelBinder(const std::vector<UOp>& buffers, std::string name)
      : buffers_(buffers), name_(std::move(name)) {}

  UOp bind(const UOp& root) {
    for (const UOp& u : toposort(root)) {
      if (u.op() == Op::Param) continue;  // its users decide how it is addressed
      if (u.op() == Op::Index && u.src(0).op() == Op::Param) {
        bound_.emplace(u, element(u.src(0), u));
        continue;
      }
      if (u.op() == Op::Load) {
        bound_.emplace(u, value_of(u.src(0)));
        continue;
      }
      std::vector<UOp> src;
      for (const UOp& s : u.src()) src.push_back(value_of(s));
      bound_.emplace(u, u.nsrc() ? u.with_src(src) : u);
    }
    return value_of(root);
  }

  // Within one of the kernel's effects (its SINK's sources, which run in order), a buffer the
  // effect writes may be read only at an element it is written at (a read-modify-write): the
  // loops run in no defined order, so another element may or may not be written yet.
  void check_reads_of_writes(const UOp& bound) const {
    auto slot = [](const UOp& index) {
      return static_cast<int64_t>(index.src(0).arg().field("slot").as_int());
    };
    for (const UOp& effect : bound.src()) {
      std::unordered_map<int64_t, std::vector<UOp>> written;  // slot -> the indexes stored to
      const std::vector<UOp> nodes = toposort(effect);
      for (const UOp& u : nodes)
        if (u.op() == Op::Store) written[slot(u.src(0))].push_back(u.src(0));
      for (const UOp& u : nodes) {
        if (u.op() != Op::Index || u.src(0).op() != Op::Buffer) continue;
        auto it = written.find(slot(u));
        if (it == written.end() ||
            std::find(it->second.begin(), it->second.end(), u) != it->second.end())
          continue;
        throw GraphError(fmt::format(
            "kernel '{}': buffer {} is read at other elements than the ones the kernel writes "
            "(at {}); the order of its loops is not defined: write to another buffer",
            name_, slot(u), render(u.src(1))));
      }
    }
  }

 private:
  UOp buffer(const UOp& param) const {
    const size_t k = slot_of(param);
    if (k >= buffers_.size())
      throw GraphError(fmt::format("custom kernel: PARAM {} but {} arguments", k, buffers_.size()));
    return buffers_[k];
  }
  // param[i, j, ...] as one row-major index (a single index is already flat). A gated index,
  // where(valid, i, Invalid), reads element i where valid holds and 0 elsewhere (a padded read):
  // the gate stays on the flat index (rules/linearize.rw moves it onto the load).
  UOp element(const UOp& param, const UOp& index) {
    const Shape shape = param.shape();
    std::vector<UOp> idx;
    UOp gate;
    for (size_t k = 1; k < index.nsrc(); ++k) {
      UOp i = value_of(index.src(k));
      if (i.op() == Op::Const && i.arg().is_invalid())  // never accessed (rules/linearize.rw)
        return UOp::make(Op::Index, param.dtype(), {buffer(param), i});
      if (is_gated_index(i)) {
        gate = gate ? (gate & i.src(0)) : i.src(0);
        i = i.src(1);
      }
      idx.push_back(i);
    }
    UOp flat = UOp::cint(0);
    if (idx.size() == 1) {
      flat = idx[0];
    } else if (idx.size() == shape.size()) {
      for (size_t k = 0; k < idx.size(); ++k) flat = flat * UOp::cint(shape[k].value()) + idx[k];
    } else {
      throw GraphError(fmt::format("custom kernel: PARAM {} of shape {} indexed with {} indices",
                                   slot_of(param), shape_repr(shape), idx.size()));
    }
    check(param, flat, gate);
    const UOp at = gate ? gate.where(flat, UOp::constant(dtypes::index, Arg::invalid())) : flat;
    return UOp::make(Op::Index, param.dtype(), {buffer(param), at});
  }
  // An access that may leave its buffer is refused: it would read or corrupt other memory. A
  // gated access is checked only where its gate holds (within).
  void check(const UOp& param, const UOp& flat, const UOp& gate = UOp()) {
    const int64_t size = static_cast<int64_t>(buffer(param).arg().field("size").as_int());
    // an index over an empty loop is never computed (a zero-size output)
    for (const UOp& u : toposort(flat))
      if (u.op() == Op::Range && u.vmax() < u.vmin()) return;
    int budget = kCaseBudget;
    if (within(flat, gate, size, budget)) return;
    // index math the intervals cannot follow (a pool's gradient): decided by Z3
    const IndexProofResult proof = prove_index_in_bounds(flat, gate, size);
    if (proof.verdict == IndexProof::InBounds) return;
    UOp i = flat;
    if (gate)
      if (const std::optional<GateIntervals> held = gate_intervals(gate)) i = narrowed(i, *held);
    throw GraphError(fmt::format(
        "kernel '{}': PARAM {} is accessed at indices {}..{}{}, outside its {} elements ({})",
        name_, slot_of(param), i.vmin().repr(), i.vmax().repr(),
        gate ? " where its gate holds" : "", size,
        proof.verdict == IndexProof::OutOfBounds ? "for example at " + proof.detail
                                                 : "not proven: " + proof.detail));
  }
  // Whether `flat` stays in [0, size) wherever `gate` holds. Interval bounds first (of the index
  // with the gate's bounded expressions narrowed, and of its linear form); where those are too
  // wide -- a gate the simplifier rewrote, r0 + r2 >= 1 for 2*r0 + r2 >= 1 -- each value of the
  // gate's smallest loop is tried on its own, up to kCaseBudget cases in all.
  static constexpr int kCaseBudget = 256;
  static bool within(const UOp& flat, const UOp& gate, int64_t size, int& budget) {
    UOp i = flat;
    std::optional<std::pair<i128, i128>> linear;
    if (gate) {
      const std::optional<GateIntervals> held = gate_intervals(gate);
      if (!held) return true;  // the gate never holds: nothing is accessed
      i = narrowed(i, *held);
      linear = linear_bounds(flat, *held);
    }
    // two sound over-approximations: the index is within both
    const bool low_ok = i.vmin() >= Num::of(0) || (linear && linear->first >= 0);
    const bool high_ok = i.vmax() <= Num::of(size - 1) || (linear && linear->second <= size - 1);
    if (low_ok && high_ok) return true;
    if (!gate) return false;
    UOp split;
    auto cases = [](const UOp& r) { return r.vmax().i - r.vmin().i + 1; };
    for (const UOp& u : toposort(gate))
      if (u.op() == Op::Range && !u.vmin().is_infinite() && !u.vmax().is_infinite() &&
          cases(u) >= 1 && cases(u) <= 16 && (!split || cases(u) < cases(split)))
        split = u;
    if (!split || budget < cases(split)) return false;
    budget -= static_cast<int>(cases(split));
    for (i128 v = split.vmin().i; v <= split.vmax().i; ++v) {
      const std::unordered_map<UOp, UOp> at{{split, UOp::cint(static_cast<int64_t>(v))}};
      if (!within(substitute(flat, at, /*walk=*/true), substitute(gate, at, /*walk=*/true), size,
                  budget))
        return false;
    }
    return true;
  }
  // The interval each expression the gate bounds (a RANGE, or a sum like r0 + r1 a pad under a
  // convolution's window gives) takes where the gate holds, in the order the clauses come;
  // nothing when the gate never holds. Clauses of the gate's conjunction the bounds use: x < c,
  // c < x, !(x < c), !(c < x) for an integer CONST c; any other clause is ignored (the bounds stay
  // wider, never wrong).
  using GateIntervals = std::vector<std::pair<UOp, std::pair<i128, i128>>>;
  static std::optional<GateIntervals> gate_intervals(const UOp& gate) {
    GateIntervals bounds;
    auto bound = [&](const UOp& r, i128 lo, i128 hi) {
      if (r.op() == Op::Const || !r.dtype().is_int() || r.vmin().is_infinite() ||
          r.vmax().is_infinite())
        return;
      auto it =
          std::find_if(bounds.begin(), bounds.end(), [&](const auto& b) { return b.first == r; });
      if (it == bounds.end()) it = bounds.insert(bounds.end(), {r, {r.vmin().i, r.vmax().i}});
      it->second = {std::max(it->second.first, lo), std::min(it->second.second, hi)};
    };
    auto cst = [](const UOp& c) { return c.op() == Op::Const && c.arg().is_int(); };
    constexpr i128 kLow = std::numeric_limits<int64_t>::min(),
                   kHigh = std::numeric_limits<int64_t>::max();
    for (const UOp& c : gate.split(Op::And)) {
      bool negated = false;
      UOp lt = c;
      if (c.op() == Op::CmpNe && c.src(1).op() == Op::Const && c.src(1).arg().is_bool() &&
          c.src(1).arg().as_bool()) {
        negated = true;
        lt = c.src(0);
      }
      if (lt.op() != Op::CmpLt) continue;
      const UOp &a = lt.src(0), &b = lt.src(1);
      if (cst(b)) {  // a < c, or a >= c
        const i128 v = b.arg().as_int();
        negated ? bound(a, v, kHigh) : bound(a, kLow, v - 1);
      } else if (cst(a)) {  // c < b, or b <= c
        const i128 v = a.arg().as_int();
        negated ? bound(b, kLow, v) : bound(b, v + 1, kHigh);
      }
    }
    for (const auto& [r, lohi] : bounds)
      if (lohi.first > lohi.second) return std::nullopt;
    return bounds;
  }
  // `i` with each bounded expression replaced by a variable over its interval, so its vmin/vmax
  // hold where the gate does. A variable taking x's place where i uses x (replaced whole,
  // outermost first) can only widen i's bounds.
  static UOp narrowed(const UOp& i, const GateIntervals& bounds) {
    std::unordered_map<UOp, UOp> vars;
    for (const auto& [r, lohi] : bounds)
      vars.emplace(r, UOp::variable(fmt::format("gated{}", vars.size()), lohi.first, lohi.second,
                                    r.dtype()));
    return vars.empty() ? i : substitute(i, vars, /*walk=*/true);
  }
  // An integer expression as constant + sum of coefficient * term over ADD and MUL by a constant
  // (a term: any other node).
  struct LinearForm {
    i128 constant = 0;
    std::vector<std::pair<UOp, i128>> terms;
    void add(const UOp& u, i128 scale) {
      if (u.op() == Op::Add) {
        add(u.src(0), scale);
        add(u.src(1), scale);
      } else if (u.op() == Op::Mul && u.src(1).op() == Op::Const && u.src(1).arg().is_int()) {
        add(u.src(0), scale * u.src(1).arg().as_int());
      } else if (u.op() == Op::Mul && u.src(0).op() == Op::Const && u.src(0).arg().is_int()) {
        add(u.src(1), scale * u.src(0).arg().as_int());
      } else if (u.op() == Op::Const && u.arg().is_int()) {
        constant += scale * u.arg().as_int();
      } else {
        auto it =
            std::find_if(terms.begin(), terms.end(), [&](const auto& t) { return t.first == u; });
        if (it == terms.end())
          terms.emplace_back(u, scale);
        else
          it->second += scale;
      }
      // far beyond any index: give up rather than overflow (an empty form proves nothing)
      if (scale > kScaleLimit || scale < -kScaleLimit || constant > kConstantLimit ||
          constant < -kConstantLimit)
        overflow = true;
    }
    // the terms that remain (a coefficient can cancel to 0)
    void drop_zeros() {
      std::erase_if(terms, [](const auto& t) { return t.second == 0; });
    }
    // coefficients below 2^40 times bounds below 2^64, summed, stay far inside i128
    static constexpr i128 kScaleLimit = i128{1} << 40, kConstantLimit = i128{1} << 100;
    bool overflow = false;
    i128 coefficient(const UOp& u) const {
      for (const auto& [t, c] : terms)
        if (t == u) return c;
      return 0;
    }
  };
  // Bounds of `i` where the gate holds when i holds a bounded expression scaled: a strided
  // window's r0*10 + r2*5 is 5 * (r0*2 + r2), and the gate bounds r0*2 + r2. Nothing when a term
  // left over is unbounded.
  static std::optional<std::pair<i128, i128>> linear_bounds(const UOp& i,
                                                            const GateIntervals& bounds) {
    if (!i.dtype().is_int()) return std::nullopt;
    LinearForm li;
    li.add(i, 1);
    li.drop_zeros();
    if (li.overflow) return std::nullopt;
    i128 lo = li.constant, hi = li.constant;
    for (const auto& [e, lohi] : bounds) {
      LinearForm le;
      le.add(e, 1);
      le.drop_zeros();
      constexpr i128 kSmall = i128{1} << 62;
      if (le.overflow || le.terms.empty() || le.constant > kSmall || le.constant < -kSmall)
        continue;
      const i128 first = li.coefficient(le.terms[0].first);
      if (first == 0 || first % le.terms[0].second != 0) continue;
      const i128 k = first / le.terms[0].second;
      if (!std::all_of(le.terms.begin(), le.terms.end(),
                       [&](const auto& t) { return li.coefficient(t.first) == k * t.second; }))
        continue;
      for (const auto& t : le.terms)
        li.terms.erase(std::find_if(li.terms.begin(), li.terms.end(),
                                    [&](const auto& u) { return u.first == t.first; }));
      const i128 a = k * (lohi.first - le.constant), b = k * (lohi.second - le.constant);
      lo += std::min(a, b);
      hi += std::max(a, b);
    }
    for (const auto& [t, c] : li.terms) {
      if (t.vmin().is_infinite() || t.vmax().is_infinite()) return std::nullopt;
      const i128 a = c * t.vmin().i, b = c * t.vmax().i;
      lo += std::min(a, b);
      hi += std::max(a, b);
    }
    return std::pair{lo, hi};
  }
  UOp value_of(const UOp& u) {
    if (u.op() != Op::Param) return bound_.at(u);
    int64_t n = 1;  // a bare PARAM: its only element
    for (const SInt& d : u.shape()) n *= d.value();
    if (n != 1)
      throw GraphError(fmt::format(
          "custom kernel: PARAM {} of shape {} used without an index (only a one-element "
          "parameter may be)",
          slot_of(u), shape_repr(u.shape())));
    check(u, UOp::cint(0));
    return UOp::make(Op::Index, u.dtype(), {buffer(u), UOp::cint(0)});
  }

  const std::vector<UOp>& buffers_;
  std::unordered_map<UOp, UOp> bound_;
  std::string name_;
};

}  // namespace

namespace {
// A bound kernel's effects: STOREs into an element of a parameter's buffer, ENDs of RANGEs around
// effects (each RANGE closed by one END: a loop is one place in the program), GROUPs of effects.
void check_effects(const UOp& sink) {
  std::unordered_map<UOp, int> ends;
  std::vector<UOp> work(sink.src().begin(), sink.src().end());
  std::unordered_set<UOp> seen;
  while (!work.empty()) {
    const UOp e = work.back();
    work.pop_back();
    if (!seen.insert(e).second) continue;
    switch (e.op()) {
      case Op::Store:
        if (e.src(0).op() != Op::Index || e.src(0).src(0).op() != Op::Buffer)
          throw GraphError("custom kernel: a STORE must write an element of a parameter");
        break;
      case Op::End:
        for (size_t k = 1; k < e.nsrc(); ++k) {
          if (e.src(k).op() != Op::Range) throw GraphError("custom kernel: END closes RANGEs only");
          if (++ends[e.src(k)] > 1)
            throw GraphError(fmt::format(
                "custom kernel: the RANGE {} is closed by two ENDs; give each loop its own RANGE",
                range_label(e.src(k))));
        }
        work.push_back(e.src(0));
        break;
      case Op::Group:
        work.insert(work.end(), e.src().begin(), e.src().end());
        break;
      default:
        throw GraphError(
            fmt::format("custom kernel: {} is not an effect (STORE, END, GROUP)", op_name(e.op())));
    }
  }
}
}  // namespace

UOp bind_kernel(const UOp& sink, const std::vector<UOp>& buffers) {
  if (sink.op() != Op::Sink) throw GraphError("custom kernel: the body must be a SINK");
  KernelBinder binder(buffers, KernelInfo::of(sink).name);
  const UOp bound = binder.bind(sink);
  check_effects(bound);
  binder.check_reads_of_writes(bound);
  return bound;
}

namespace {

// The loops u runs in (tinygrad's UOp.ranges for ordering): its sources' and its own RANGE, less
// the ones an END at u closes. Unlike ir/graph.h's open_ranges, an AFTER keeps the loops of what
// it orders (an accumulator read inside a loop runs in it).
std::unordered_map<const UOpNode*, std::vector<UOp>> loops_of(const std::vector<UOp>& topo) {
  std::unordered_map<const UOpNode*, std::vector<UOp>> out;
  for (const UOp& u : topo) {
    std::vector<UOp> rs;
    for (const UOp& s : u.src())
      for (const UOp& r : out.at(s.node()))
        if (std::find(rs.begin(), rs.end(), r) == rs.end()) rs.push_back(r);
    if (u.op() == Op::Range) rs.push_back(u);
    if (u.op() == Op::End)
      for (size_t k = 1; k < u.nsrc(); ++k) std::erase(rs, u.src(k));
    out.emplace(u.node(), std::move(rs));
  }
  return out;
}

int placement(const UOp& u) {
  switch (u.op()) {
    case Op::Param:
      return -20;
    case Op::Buffer:
      return -18;
    case Op::Load:
      return -1;  // loads early
    case Op::Store:
      return 1;  // stores late
    case Op::Range:
      return 5;  // a loop opens as late as it can
    case Op::End:
      return -5;  // and closes as early
    default:
      return 0;
  }
}

// Every value is used inside the loops it is computed in (each of its runs is seen by its users):
// the order above guarantees it; a broken one is a bug, not a kernel to refuse.
void check_scopes(const std::vector<UOp>& order) {
  std::vector<const UOpNode*> open;                       // the open RANGEs, innermost last
  std::unordered_map<const UOpNode*, const UOpNode*> in;  // value -> the RANGE it is computed in
  for (const UOp& u : order) {
    for (const UOp& s : u.src()) {
      auto it = in.find(s.node());
      if (it != in.end() && it->second &&
          std::find(open.begin(), open.end(), it->second) == open.end())
        throw std::logic_error(fmt::format("linearize: {} computed in a loop is used after it",
                                           op_info(s.op()).py_name));
    }
    if (u.op() == Op::End) {
      if (open.empty() || open.back() != u.src(u.nsrc() - 1).node())
        throw std::logic_error("linearize: an END that does not close the innermost open RANGE");
      open.pop_back();
    }
    in.emplace(u.node(), open.empty() ? nullptr : open.back());
    if (u.op() == Op::Range) open.push_back(u.node());
  }
  if (!open.empty()) throw std::logic_error("linearize: a RANGE without its END");
}

}  // namespace

// A loop is one place in the program: a RANGE two reductions still close apart (one reduces the
// other's result over the same RANGE) is refused, not ordered.
void check_one_end_per_range(const UOp& sink) {
  std::unordered_map<UOp, int> ends;
  for (const UOp& u : toposort(sink))
    if (u.op() == Op::End)
      for (size_t k = 1; k < u.nsrc(); ++k)
        if (++ends[u.src(k)] > 1)
          throw GraphError(fmt::format(
              "kernel '{}': the RANGE {} is looped over twice (a reduction over another's result "
              "over the same RANGE); give each reduction its own RANGE",
              KernelInfo::of(sink).name, range_label(u.src(k))));
}

std::vector<UOp> linearize(const UOp& sink) {
  const std::vector<UOp> topo = toposort(sink);
  const auto loops = loops_of(topo);
  struct Key {
    double runs;  // how often it runs: the product of its loops' sizes
    int place;
    int64_t slot;
  };
  std::unordered_map<const UOpNode*, Key> key;
  std::unordered_map<const UOpNode*, int> consumers;
  for (const UOp& u : topo) {
    // (a loop counts as at least 2 runs: one inside more loops than another runs more often even
    // where a loop has one iteration, or none)
    double runs = 1;
    for (const UOp& r : loops.at(u.node())) runs *= std::max(r.vmax().as_double() + 1, 2.0);
    const bool param = u.op() == Op::Param || u.op() == Op::Buffer;
    key.emplace(u.node(), Key{runs, placement(u),
                              param ? static_cast<int64_t>(u.arg().field("slot").as_int()) : 0});
    for (const UOp& s : u.src()) ++consumers[s.node()];
  }
  // the ideal order: by key, ties in toposort order
  std::vector<size_t> ideal(topo.size());
  for (size_t k = 0; k < ideal.size(); ++k) ideal[k] = k;
  std::stable_sort(ideal.begin(), ideal.end(), [&](size_t a, size_t b) {
    const Key &x = key.at(topo[a].node()), &y = key.at(topo[b].node());
    return std::tie(x.runs, x.place, x.slot) < std::tie(y.runs, y.place, y.slot);
  });
  std::unordered_map<const UOpNode*, size_t> rank;
  for (size_t k = 0; k < ideal.size(); ++k) rank.emplace(topo[ideal[k]].node(), k);
  // backwards from the sink: of the nodes whose users are all placed, the latest in the ideal order
  // goes last
  auto later = [&](const UOp* a, const UOp* b) { return rank.at(a->node()) < rank.at(b->node()); };
  std::priority_queue<const UOp*, std::vector<const UOp*>, decltype(later)> ready(later);
  ready.push(&sink);
  std::vector<UOp> order;
  while (!ready.empty()) {
    const UOp* u = ready.top();
    ready.pop();
    order.push_back(*u);
    for (const UOp& s : u->src())
      if (--consumers.at(s.node()) == 0) ready.push(&s);
  }
  std::reverse(order.begin(), order.end());
  check_scopes(order);
  return order;
}

UOp linearize_kernel(const UOp& bound, const Target& target, const StageTrace& trace,
                     bool default_opts_if_none, std::string* optimized_name) {
  rw::KernelContext ctx{.target = &target};
  UOp sink = bound;
  auto stage = [&](const char* name, const Matcher& rules, void* context = nullptr,
                   bool bottom_up = false) {
    sink = graph_rewrite(sink, &rules, {.ctx = context, .bottom_up = bottom_up, .name = name});
    if (trace) trace(name, sink);
  };
  sink = convert_loop_to_global(simplify_ranges(sink), target);
  if (trace) trace("simplify ranges", sink);
  std::vector<Opt> todo;
  if (const auto& opts = KernelInfo::of(sink).opts_to_apply) {
    for (const Arg& a : *opts) todo.push_back(opt_from_arg(a));
  } else if (default_opts_if_none) {
    todo = hand_coded_opts(sink, target);
  }
  if (!todo.empty()) {
    sink = apply_opts(sink, todo, target);
    if (trace) trace("apply opts", sink);
  }
  if (optimized_name) *optimized_name = kernel_name(sink);
  stage("add gpudims", rules::add_gpudims());
  stage("order effects", rules::order_effects(), nullptr, /*bottom_up=*/true);
  stage("add loads", rules::add_loads());
  stage("expander", rules::expander());
  stage("reduce to accumulators", rules::reduce_to_acc(), &ctx);
  stage("merge reduce ends", rules::merge_reduce_ends());
  check_one_end_per_range(sink);
  stage("add workgroups", rules::add_workgroups(), &ctx);
  stage("expand broadcast", rules::expand_broadcast());
  stage("devectorize", rules::devectorize(), &ctx);
  // each lane's own gate and index, simplified as tinygrad's "early symbolic" does: an unrolled
  // window's lane whose gate can never hold reads nothing (rules/symbolic.rw simplify_valid)
  stage("early symbolic", rules::sym());
  stage("move gates from index", rules::move_gates_from_index());
  stage("lower index dtype", rules::lower_index_dtype());
  stage("transcendental", rules::transcendental(), &ctx);
  stage("late decompositions", rules::late_decompositions(), &ctx);
  stage("vectorize alu", rules::vectorize_alu(), &ctx);
  stage("add barriers", rules::add_barriers());
  stage("split ends", rules::split_ends());
  stage("add control flow", rules::add_control_flow());
  const UOp program = UOp::make(Op::Linear, dtypes::void_, linearize(sink));
  if (trace) trace("linearize", program);
  const UOp clean =
      graph_rewrite(program, &rules::linearize_cleanups(), {.name = "linearize cleanups"});
  if (trace && clean != program) trace("linearize cleanups", clean);
  return clean;
}

std::string render_program(const UOp& program) {
  if (program.op() == Op::Linear) return render_instructions(program.src());
  const std::vector<UOp> nodes = toposort(program);
  return render_instructions(nodes);
}

std::string render_instructions(std::span<const UOp> instructions) {
  std::string out;
  std::unordered_map<const UOpNode*, int> id;
  int depth = 0, pos = 0;
  for (const UOp& u : instructions) {
    if (u.op() == Op::End) --depth;
    std::string srcs;
    for (const UOp& x : u.src()) {
      auto it = id.find(x.node());
      srcs += (srcs.empty() ? "" : ", ") + (it != id.end() ? fmt::format("%{}", it->second)
                                            : x.op() == Op::Const
                                                ? x.arg().repr()
                                                : std::string(op_info(x.op()).py_name));
    }
    const int n = pos++;
    id[u.node()] = n;
    out += fmt::format("{:>4} {}{} {} ({}){}\n", n,
                       std::string(static_cast<size_t>(depth) * 2, ' '), op_info(u.op()).py_name,
                       u.dtype().repr(), srcs, u.arg().is_none() ? "" : " " + u.arg().repr());
    if (u.op() == Op::Range) ++depth;
  }
  return out;
}

}  // namespace tinyrw
