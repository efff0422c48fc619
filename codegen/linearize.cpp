#include "codegen/linearize.h"

#include <limits>
#include <optional>
#include <unordered_map>

#include "ir/builders.h"
#include "ir/graph.h"
#include "ir/kernel_info.h"
#include "ir/rewrite.h"
#include "rules/helpers/kernel.h"
#include "rules_gen/reduce.h"

#include <fmt/format.h>

namespace tinyrw {

namespace {

class Linearizer {
 public:
  std::vector<UOp> program;

  // Emits the instructions computing u and returns the node that holds its value there: u with
  // its sources replaced by theirs (a reduction's value is its accumulator load). Once per scope;
  // inner scopes see outer values.
  // An explicit stack instead of recursion: a chain of any depth, in the order a recursive walk
  // would emit it (sources first, left to right).
  UOp emit(const UOp& root) {
    if (const UOp* v = find(root)) return *v;
    std::vector<std::pair<const UOp*, bool>> stack{{&root, false}};  // (node, sources pushed)
    while (!stack.empty()) {
      auto& [u, expanded] = stack.back();
      const UOp* node = u;
      if (find(*node)) {
        stack.pop_back();
        continue;
      }
      if (node->op() == Op::Range)
        throw std::logic_error("linearize: a range used outside its loop");
      if (node->op() == Op::Reduce)
        throw std::logic_error("linearize: a REDUCE left (rules/reduce.rw reduce_to_acc)");
      // an AFTER is its buffer once the effects it orders have run: those are no values
      const size_t values = node->op() == Op::After ? 1 : node->nsrc();
      if (!expanded) {
        expanded = true;
        for (size_t k = values; k-- > 0;)
          if (!find(node->src(k))) stack.emplace_back(&node->src(k), false);
        continue;
      }
      stack.pop_back();
      if (node->op() == Op::After) {
        effects(std::vector<UOp>(node->src().begin() + 1, node->src().end()));
        scopes_.back().emplace(node->node(), *find(node->src(0)));
        continue;
      }
      std::vector<UOp> src;
      for (const UOp& s : node->src()) src.push_back(*find(s));
      const UOp v = node->nsrc() ? node->with_src(src) : *node;
      program.push_back(v);
      scopes_.back().emplace(node->node(), v);
    }
    return *find(root);
  }
  const UOp* find(const UOp& u) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      if (auto f = it->find(u.node()); f != it->end()) return &f->second;
    }
    return nullptr;
  }

  void open(const UOp& range) {
    for (const UOp& s : range.src()) emit(s);  // a computed bound is evaluated before the loop
    program.push_back(range);
    scopes_.emplace_back();
    scopes_.back().emplace(range.node(), range);
  }
  // A scope of values of its own: what is emitted in it is dropped when it ends, so a later
  // computation emits it again (a load after a store then sees the store).
  void push_scope() { scopes_.emplace_back(); }
  void pop_scope() { scopes_.pop_back(); }
  void close(const UOp& range) {
    scopes_.pop_back();
    program.push_back(UOp::make(Op::End, dtypes::void_, {range}));
  }

 public:
  // The effects (STOREs, ENDs of loops around them, GROUPs) in order, each store's values computed
  // afresh (a load after an earlier store sees the store).
  void effects(const std::vector<UOp>& es) {
    walk_effects(
        UOp::sink(es),
        {.store =
             [&](const UOp& st) {
               const UOp& dst = st.src(0);
               if (dst.op() != Op::Index)
                 throw GraphError("custom kernel: a STORE must write an element of a parameter");
               push_scope();
               // (an AFTER target: the buffer once what it orders has run)
               const UOp buf = dst.src(0).op() == Op::Buffer ? dst.src(0) : emit(dst.src(0));
               const UOp at = emit(dst.src(1));
               const UOp v = emit(st.src(1));
               program.push_back(UOp::make(Op::Store, dtypes::void_, {dst.with_src({buf, at}), v}));
               pop_scope();
             },
         .open =
             [&](const UOp& end) {
               for (size_t k = 1; k < end.nsrc(); ++k) open(end.src(k));
             },
         .close =
             [&](const UOp& end) {
               for (size_t k = end.nsrc(); k-- > 1;) close(end.src(k));
             }});
  }

 private:
  std::vector<std::unordered_map<const UOpNode*, UOp>> scopes_{1};
};

}  // namespace

Op reduce_op(const UOp& reduce) {
  const Arg& a = reduce.arg();
  if (a.is_tuple() && !a.items().empty()) return a.items()[0].as_op();
  return a.as_op();
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
      if (u.op() == Op::Store && u.src(0).op() == Op::Index && src[0].op() != Op::Index)
        throw GraphError(
            "custom kernel: a STORE through a gated index (where(valid, i, Invalid)) is not "
            "supported; store where the gate holds inside the loops instead");
      bound_.emplace(u, u.nsrc() ? u.with_src(src) : u);
    }
    return value_of(root);
  }

 private:
  UOp buffer(const UOp& param) const {
    const size_t k = slot_of(param);
    if (k >= buffers_.size())
      throw GraphError(fmt::format("custom kernel: PARAM {} but {} arguments", k, buffers_.size()));
    return buffers_[k];
  }
  // param[i, j, ...] as one row-major index (a single index is already flat). A gated index,
  // where(valid, i, Invalid), reads element i where valid holds and 0 elsewhere (a padded read).
  UOp element(const UOp& param, const UOp& index) {
    const Shape shape = param.shape();
    std::vector<UOp> idx;
    UOp gate;
    for (size_t k = 1; k < index.nsrc(); ++k) {
      UOp i = value_of(index.src(k));
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
    const UOp read =
        checked(param, UOp::make(Op::Index, param.dtype(), {buffer(param), flat}), gate);
    // the index may leave the buffer where the gate does not hold: the devices clamp such a read
    // and the where discards its value
    return gate ? gate.where(read, read.const_like(Arg::integer(0))) : read;
  }
  // An access that may leave its buffer is refused: it would read or corrupt other memory. A
  // gated access is checked only where its gate holds (given_gate).
  UOp checked(const UOp& param, const UOp& index, const UOp& gate = UOp()) {
    const int64_t size = static_cast<int64_t>(index.src(0).arg().field("size").as_int());
    UOp i = index.src(1);
    if (gate) {
      const std::optional<UOp> narrowed = given_gate(i, gate);
      if (!narrowed) return index;  // the gate never holds: nothing is read
      i = *narrowed;
    }
    // an index over an empty loop is never computed (a zero-size output)
    for (const UOp& u : toposort(i))
      if (u.op() == Op::Range && u.vmax() < u.vmin()) return index;
    if (i.vmin() < Num::of(0) || i.vmax() > Num::of(size - 1))
      throw GraphError(fmt::format(
          "kernel '{}': PARAM {} is accessed at indices {}..{}{}, outside its {} elements", name_,
          slot_of(param), i.vmin().repr(), i.vmax().repr(), gate ? " where its gate holds" : "",
          size));
    return index;
  }
  // `i` with each expression the gate bounds (a RANGE, or a sum like r0 + r1 a pad under a
  // convolution's window gives) replaced by a variable over the narrowed interval, so its
  // vmin/vmax hold where the gate does; nothing when the gate never holds. Clauses of the gate's
  // conjunction the bounds use: x < c, c < x, !(x < c), !(c < x) for an integer CONST c; any
  // other clause is ignored (the bounds stay wider, never wrong). A variable taking x's place
  // where i uses x (replaced whole, outermost first) can only widen i's bounds.
  static std::optional<UOp> given_gate(const UOp& i, const UOp& gate) {
    std::unordered_map<UOp, std::pair<i128, i128>> bounds;
    auto bound = [&](const UOp& r, i128 lo, i128 hi) {
      if (r.op() == Op::Const || !r.dtype().is_int() || r.vmin().is_infinite() ||
          r.vmax().is_infinite())
        return;
      auto [it, fresh] = bounds.emplace(r, std::pair{r.vmin().i, r.vmax().i});
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
    std::unordered_map<UOp, UOp> vars;
    for (const auto& [r, lohi] : bounds) {
      if (lohi.first > lohi.second) return std::nullopt;
      vars.emplace(r, UOp::variable(fmt::format("gated{}", vars.size()), lohi.first, lohi.second,
                                    r.dtype()));
    }
    return vars.empty() ? i : substitute(i, vars, /*walk=*/true);
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
    return checked(u, UOp::make(Op::Index, u.dtype(), {buffer(u), UOp::cint(0)}));
  }

  const std::vector<UOp>& buffers_;
  std::unordered_map<UOp, UOp> bound_;
  std::string name_;
};

}  // namespace

UOp bind_kernel(const UOp& sink, const std::vector<UOp>& buffers) {
  if (sink.op() != Op::Sink) throw GraphError("custom kernel: the body must be a SINK");
  return KernelBinder(buffers, KernelInfo::of(sink).name).bind(sink);
}

void walk_effects(const UOp& sink, const EffectVisitor& visit) {
  std::vector<std::pair<UOp, bool>> work;  // (effect, closing its loops), in reverse
  for (size_t k = sink.nsrc(); k-- > 0;) work.emplace_back(sink.src(k), false);
  while (!work.empty()) {
    auto [u, closing] = work.back();
    work.pop_back();
    if (closing) {
      visit.close(u);
      continue;
    }
    switch (u.op()) {
      case Op::Store:
        visit.store(u);
        break;
      case Op::End:
        for (size_t k = 1; k < u.nsrc(); ++k)
          if (u.src(k).op() != Op::Range) throw GraphError("custom kernel: END closes RANGEs only");
        visit.open(u);
        work.emplace_back(u, true);
        work.emplace_back(u.src(0), false);
        break;
      case Op::Group:
      case Op::Sink:
        for (size_t k = u.nsrc(); k-- > 0;) work.emplace_back(u.src(k), false);
        break;
      default:
        throw GraphError(
            fmt::format("custom kernel: {} is not an effect (STORE, END, GROUP)", op_name(u.op())));
    }
  }
}

UOp linearize_kernel(const UOp& bound) {
  rw::KernelContext ctx;
  const UOp late = graph_rewrite(bound, &rules::reduce_to_acc(),
                                 {.ctx = &ctx, .name = "reduce to accumulators"});
  Linearizer l;
  l.effects(std::vector<UOp>(late.src().begin(), late.src().end()));
  return UOp::make(Op::Linear, dtypes::void_, l.program);
}

}  // namespace tinyrw
