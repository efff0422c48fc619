#include "compiler/prove_index.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compiler/prove_model.h"
#include "dsl/interp.h"
#include "ir/builders.h"

namespace tinyrw::rw::prove {

namespace {

using Dims = std::vector<int64_t>;

Dims dims_of(const Shape& s) {
  Dims d;
  for (const SInt& v : s) d.push_back(v.value());
  return d;
}
Shape shape_of(const Dims& d) { return Shape(d.begin(), d.end()); }
int64_t product(const Dims& d, size_t from = 0) {
  int64_t p = 1;
  for (size_t k = from; k < d.size(); ++k) p *= d[k];
  return p;
}

// ---- the catalog: views of one or two movement ops over a buffer or a constant

// every combination of per-axis options (a choice from opts(n) for each axis of size n), at most
// `cap` of them evenly spread, without the combination of all first options (no change)
template <class T>
std::vector<std::vector<T>> combos(const Dims& s,
                                   const std::function<std::vector<T>(int64_t)>& opts, size_t cap) {
  std::vector<std::vector<T>> all(1);
  for (int64_t n : s) {
    std::vector<std::vector<T>> next;
    for (const auto& a : all)
      for (const T& o : opts(n)) {
        auto b = a;
        b.push_back(o);
        next.push_back(std::move(b));
      }
    all = std::move(next);
  }
  if (!all.empty()) all.erase(all.begin());  // every axis at its first option
  std::vector<std::vector<T>> out;
  const size_t step = std::max<size_t>(1, all.size() / cap);
  for (size_t i = 0; i < all.size() && out.size() < cap; i += step) out.push_back(all[i]);
  return out;
}

// the shapes of rank 1-3 with `total` elements, no size above 8
std::vector<Dims> shapes_with(int64_t total) {
  std::vector<Dims> out;
  std::function<void(Dims, int64_t)> go = [&](Dims d, int64_t left) {
    if (left == 1 && !d.empty()) out.push_back(d);
    if (d.size() == 3) return;
    for (int64_t f = 1; f <= std::min<int64_t>(left, 8); ++f)
      if (left % f == 0) {
        Dims e = d;
        e.push_back(f);
        go(e, left / f);
      }
  };
  go({}, total);
  return out;
}

std::vector<UOp> views_of(const UOp& x, size_t cap) {
  const Dims s = dims_of(x.shape());
  const size_t rank = s.size();
  std::vector<UOp> out;
  // reshapes, evenly spread over the shapes of the same size
  {
    std::vector<Dims> to;
    for (const Dims& t : shapes_with(product(s)))
      if (t != s) to.push_back(t);
    const size_t step = std::max<size_t>(1, to.size() / cap);
    for (size_t i = 0; i < to.size(); i += step) out.push_back(x.reshape(shape_of(to[i])));
  }
  // permutations
  if (rank >= 2) {
    std::vector<int64_t> order(rank);
    std::iota(order.begin(), order.end(), 0);
    while (std::next_permutation(order.begin(), order.end())) out.push_back(x.permute(order));
  }
  // broadcasts of size-1 axes to 3
  for (const auto& e : combos<int64_t>(
           s,
           [](int64_t n) {
             return n == 1 ? std::vector<int64_t>{1, 3} : std::vector{n};
           },
           cap))
    out.push_back(x.expand(shape_of(e)));
  // shrinks: (offset, size) per axis
  using Win = std::pair<int64_t, int64_t>;
  const auto shrinks = combos<Win>(
      s,
      [](int64_t n) {
        std::vector<Win> w{{0, n}};
        if (n >= 2) w.insert(w.end(), {{1, n - 1}, {n - 1, 1}, {0, n - 1}});
        if (n >= 3) w.push_back({1, 1});
        return w;
      },
      cap);
  for (const auto& w : shrinks) {
    Dims off, size;
    for (const Win& p : w) {
      off.push_back(p.first);
      size.push_back(p.second);
    }
    out.push_back(x.shrink(shape_of(off), shape_of(size)));
  }
  // flips
  for (const auto& f : combos<bool>(
           s,
           [](int64_t) {
             return std::vector<bool>{false, true};
           },
           cap)) {
    out.push_back(x.flip(f));
  }
  // pads: (before, after) per axis
  const auto pads = combos<Win>(
      s,
      [](int64_t) {
        return std::vector<Win>{{0, 0}, {1, 0}, {0, 2}, {2, 1}};
      },
      cap);
  for (const auto& p : pads) {
    Dims off, to;
    for (size_t k = 0; k < rank; ++k) {
      off.push_back(p[k].first);
      to.push_back(s[k] + p[k].first + p[k].second);
    }
    out.push_back(x.pad(shape_of(off), shape_of(to)));
  }
  return out;
}

std::vector<Dims> base_shapes() {
  std::vector<Dims> out{{}};
  for (size_t rank = 1; rank <= 2; ++rank) {
    Dims d(rank, 1);
    while (true) {  // every size in 1..3 on every axis
      out.push_back(d);
      size_t k = 0;
      while (k < rank && d[k] == 3) d[k++] = 1;
      if (k == rank) break;
      ++d[k];
    }
  }
  for (const Dims& d : std::vector<Dims>{{4},
                                         {6},
                                         {2, 4},
                                         {4, 6},
                                         {1, 1, 2},
                                         {2, 1, 3},
                                         {3, 2, 1},
                                         {2, 2, 2},
                                         {3, 1, 4},
                                         {2, 3, 4}})
    out.push_back(d);
  return out;
}

// Every view of the catalog: one movement op over a base (a buffer, or a constant broadcast to
// the base's shape as a tensor constant is), and a second one over some of those.
const std::vector<UOp>& catalog() {
  static const std::vector<UOp> views = [] {
    std::vector<UOp> out;
    int64_t slot = 0;
    const UOp c = UOp::cfloat(2.5);
    for (const Dims& d : base_shapes()) {
      const UOp buf =
          buffer_view(buffer_uop(dtypes::float32, slot++, product(d), "CPU"), shape_of(d));
      const UOp con = c.reshape(shape_of(Dims(d.size(), 1))).expand(shape_of(d));
      for (const UOp& base : {buf, con}) {
        const std::vector<UOp> first = views_of(base, 3);
        for (size_t i = 0; i < first.size(); ++i) {
          out.push_back(first[i]);
          if (i % 4 == 0 && base == buf)
            for (const UOp& v : views_of(first[i], 2)) out.push_back(v);
        }
      }
      if (d.empty()) out.push_back(c.reshape(shape_of({1, 1})));  // a constant's own reshape
    }
    // a view of a shapeless constant, as rewrites leave one mid-rewrite (unchecked: the IR's
    // builders refuse the rank)
    out.push_back(UOp::make(Op::Expand, c.dtype(), {c, shape_to_uop(shape_of({2, 3}))}));
    out.push_back(UOp::make(Op::Flip, c.dtype(), {c}, Arg::tuple({Arg::boolean(true)})));
    return out;
  }();
  return views;
}

// A view's shape; one over a shapeless constant (which the IR does not shape) has its arg's
// shape, or 2 on each flipped axis.
Dims view_dims(const UOp& v) {
  try {
    return dims_of(v.shape());
  } catch (const GraphError&) {
    if (v.src()[0].op() != Op::Const) throw;
  }
  if (v.op() == Op::Expand) return dims_of(uop_to_shape(v.src()[1]));
  return Dims(v.arg().items().size(), 2);
}

// views rewritten per rule: enough to meet each movement op over bases of every rank, gated and
// not, within about a second
constexpr int kMaxViews = 120;

// ---- what a view reads, in Z3 terms

bool is_view(Op op) {
  return op == Op::Reshape || op == Op::Permute || op == Op::Expand || op == Op::Shrink ||
         op == Op::Flip || op == Op::Pad;
}

// The element a node reads at an index: a non-view node (its base) at `at`, where `valid` holds
// (an index gated off, or a pad's border, reads nothing: the pad's value, 0, is put there by the
// PAD itself when ranges are applied).
struct Read {
  UOp base;
  std::vector<z3::expr> at;
  z3::expr valid;
};

class Reader {
 public:
  Reader(Model& m) : m_(m), c_(m.ctx()) {}

  // a variable of [0, n): an index of the view
  UOp variable(const std::string& name, int64_t n) {
    SNode* v = m_.leaf(dtypes::index, name);
    facts_.push_back(v->def && v->val >= 0 && v->val < c_.int_val(n));
    vars_.emplace_back(name, v->val);
    const UOp u = UOp::variable(name, 0, n - 1);
    terms_[u] = v;
    return u;
  }
  const std::vector<z3::expr>& facts() const { return facts_; }
  const std::vector<std::pair<std::string, z3::expr>>& vars() const { return vars_; }

  // an index expression (ALU ops over the variables and constants) as a model node
  SNode* term(const UOp& u) {
    if (auto it = terms_.find(u); it != terms_.end()) return it->second;
    SNode* n = nullptr;
    if (u.op() == Op::Const) {
      const Arg& a = u.arg();
      if (a.is_invalid())
        n = m_.invalid(u.dtype());
      else if (a.is_bool())
        n = m_.constant(u.dtype(), c_.int_val(a.as_bool() ? 1 : 0));
      else
        n = m_.constant(u.dtype(), m_.int_val(a.as_int()));
    } else {
      std::vector<SNode*> src;
      for (const UOp& s : u.src()) src.push_back(term(s));
      n = m_.alu(u.op(), u.dtype(), src);  // Unsupported for other ops
    }
    return terms_[u] = n;
  }

  Read read(const UOp& u, std::vector<z3::expr> at, z3::expr valid) {
    const Op op = u.op();
    if (op == Op::Index) {
      std::vector<z3::expr> idx;
      for (size_t k = 1; k < u.src().size(); ++k) {
        SNode* t = term(u.src()[k]);
        idx.push_back(t->val);
        valid = valid && t->def;
      }
      return read(u.src()[0], std::move(idx), valid);
    }
    if (!is_view(op)) return {u, std::move(at), valid};
    const UOp& x = u.src()[0];
    if (x.op() == Op::Const) return {x, {}, valid};  // the same value everywhere
    const Dims out = view_dims(u), in = dims_of(x.shape());
    if (at.size() != out.size())
      throw std::runtime_error(
          fmt::format("{} indices for a view of rank {}", at.size(), out.size()));
    std::vector<z3::expr> src;
    auto n = [&](int64_t v) { return c_.int_val(v); };
    switch (op) {
      case Op::Reshape: {
        z3::expr flat = n(0);
        for (size_t k = 0; k < out.size(); ++k) flat = flat + at[k] * n(product(out, k + 1));
        for (size_t k = 0; k < in.size(); ++k)
          src.push_back(m_.floor_mod(m_.floor_div(flat, n(product(in, k + 1))), n(in[k])));
        break;
      }
      case Op::Permute: {
        const auto& order = u.arg().items();
        src.assign(in.size(), n(0));
        for (size_t k = 0; k < order.size(); ++k)
          src[static_cast<size_t>(order[k].as_int())] = at[k];
        break;
      }
      case Op::Expand:
        for (size_t k = 0; k < in.size(); ++k) src.push_back(in[k] == 1 ? n(0) : at[k]);
        break;
      case Op::Shrink: {
        const Dims off = dims_of(uop_to_shape(u.src()[1]));
        for (size_t k = 0; k < in.size(); ++k) src.push_back(at[k] + n(off[k]));
        break;
      }
      case Op::Flip: {
        const auto& axes = u.arg().items();
        for (size_t k = 0; k < in.size(); ++k)
          src.push_back(axes[k].as_bool() ? n(in[k] - 1) - at[k] : at[k]);
        break;
      }
      default: {  // Pad: the source where the index lies within it
        const Dims off = dims_of(uop_to_shape(u.src()[1]));
        for (size_t k = 0; k < in.size(); ++k) {
          src.push_back(at[k] - n(off[k]));
          valid = valid && at[k] >= n(off[k]) && at[k] < n(off[k] + in[k]);
        }
      }
    }
    return read(x, std::move(src), valid);
  }

 private:
  Model& m_;
  z3::context& c_;
  std::vector<z3::expr> facts_;
  std::vector<std::pair<std::string, z3::expr>> vars_;
  std::unordered_map<UOp, SNode*> terms_;
};

std::string view_text(const UOp& u) {
  if (u.op() == Op::Index) {
    std::vector<std::string> idx;
    for (size_t k = 1; k < u.src().size(); ++k) {
      const UOp& i = u.src()[k];
      idx.push_back(i.op() == Op::DefineVar ? i.arg().items()[0].as_string() : "a gated index");
    }
    return fmt::format("Index({}, {})", view_text(u.src()[0]), fmt::join(idx, ", "));
  }
  const std::string shape = shape_repr(shape_of(view_dims(u)));
  if (u.op() == Op::Const) return fmt::format("a constant {}", u.arg().repr());
  if (!is_view(u.op()) || is_buffer_view(u)) return fmt::format("a buffer of shape {}", shape);
  std::string how;
  if (u.op() == Op::Permute || u.op() == Op::Flip)
    how = ", " + u.arg().repr();
  else if (u.op() == Op::Shrink || u.op() == Op::Pad)
    how = ", at " + shape_repr(uop_to_shape(u.src()[1]));
  return fmt::format("{}({}{}) of shape {}", op_name(u.op()), view_text(u.src()[0]), how, shape);
}

std::string point_text(const z3::model& mdl, const std::vector<z3::expr>& at) {
  std::vector<std::string> v;
  for (const z3::expr& e : at) v.push_back(mdl.eval(e, true).to_string());
  return v.size() == 1 ? "element " + v[0] : fmt::format("({})", fmt::join(v, ", "));
}

}  // namespace

std::optional<UOp> rewrite_once(const InterpretedMatcher& rule, const InterpretedMatcher& whole,
                                const UOp& root, std::string& error) {
  RewriteContext ctx;
  ctx.pm = &whole;
  std::optional<Value> out;
  try {
    const RuleInfo* fired = nullptr;
    out = rule.apply(root, ctx, &fired);
  } catch (const std::exception& e) {
    if (error.empty()) error = e.what();
    return std::nullopt;
  }
  if (!out || !out->is_uop() || out->as_uop() == root) return std::nullopt;
  return out->as_uop();
}

bool is_index_rule(const ResolvedRule& rule) {
  return !rule.root.any_op && rule.root.ops.contains(Op::Index);
}

IndexCheck check_index_rule(std::shared_ptr<const ResolvedProgram> prog, const ResolvedSet& home,
                            const ResolvedRule& rule, unsigned rlimit) {
  IndexCheck res;
  ResolvedSet one;
  one.name = "prove";
  one.rules.push_back(rule);
  InterpretedMatcher matcher(prog, one);
  InterpretedMatcher whole(prog, home);
  z3::context c;  // one for the rule: a context is slow to make, a model per view is not
  // the catalog visited in a stride that spreads the first views rewritten over all of it (bases of
  // every rank), up to kMaxViews of them
  const std::vector<UOp>& views = catalog();
  size_t stride = 97;
  while (std::gcd(stride, views.size()) != 1) stride += 2;
  for (size_t vi = 0; vi < views.size() && res.views < kMaxViews; ++vi) {
    const UOp& view = views[vi * stride % views.size()];
    const Dims shape = view_dims(view);
    // each index a variable of the view's axis, and with the last axis's gated (an index a pad
    // above gated already)
    for (bool gated : {false, true}) {
      if (gated && (shape.empty() || shape.back() < 2)) continue;
      Model m(c, false);
      Reader reader(m);
      std::vector<UOp> idx;
      for (size_t k = 0; k < shape.size(); ++k) {
        idx.push_back(reader.variable(fmt::format("i{}", k), shape[k]));
      }
      if (gated)
        idx.back() = idx.back()
                         .lt(idx.back().const_like(static_cast<i128>(shape.back() - 1)))
                         .where(idx.back(), UOp::constant(dtypes::index, Arg::invalid()));
      const UOp root = view.index(idx);
      const std::optional<UOp> out = rewrite_once(matcher, whole, root, res.error);
      if (!out) continue;
      ++res.views;
      const UOp& result = *out;
      auto refute = [&](const std::string& what) {
        res.failure = fmt::format("{}: {}", view_text(root), what);
      };
      // The claims: where the index is valid and the view reads its source, the result reads the
      // same element; where the view reads nothing (a pad's border), the result reads nothing;
      // and wherever the result reads, it reads within its base's shape.
      const Read lhs = reader.read(root, {}, c.bool_val(true));
      const Read rhs = reader.read(result, {}, c.bool_val(true));
      if (rhs.base != lhs.base) {
        refute(
            fmt::format("the result reads {}, not {}", view_text(rhs.base), view_text(lhs.base)));
        return res;
      }
      z3::expr in_valid = c.bool_val(true);
      for (const UOp& i : idx) in_valid = in_valid && reader.term(i)->def;
      z3::expr same = c.bool_val(true), inside = c.bool_val(true);
      const Dims base = dims_of(lhs.base.shape());
      for (size_t k = 0; k < lhs.at.size(); ++k) same = same && lhs.at[k] == rhs.at[k];
      for (size_t k = 0; k < rhs.at.size(); ++k)
        inside = inside && rhs.at[k] >= 0 && rhs.at[k] < c.int_val(base[k]);
      z3::solver sol(c);
      z3::params p(c);
      p.set("rlimit", rlimit);
      sol.set(p);
      for (const z3::expr& f : m.axioms()) sol.add(f);
      for (const z3::expr& f : reader.facts()) sol.add(f);
      sol.add((lhs.valid && !(rhs.valid && same)) || (in_valid && !lhs.valid && rhs.valid) ||
              (rhs.valid && !inside));
      const z3::check_result r = sol.check();
      if (r == z3::unknown) {
        if (res.undecided.empty())
          res.undecided = fmt::format("{}: Z3: {}", view_text(root), sol.reason_unknown());
        continue;
      }
      if (r == z3::unsat) {
        ++res.proofs;
        continue;
      }
      const z3::model mdl = sol.get_model();
      std::vector<std::string> at;
      for (const auto& [name, v] : reader.vars())
        at.push_back(fmt::format("{}={}", name, mdl.eval(v, true).to_string()));
      auto reads = [&](const Read& rd) {
        if (!mdl.eval(rd.valid, true).is_true()) return std::string("nothing");
        return lhs.base.op() == Op::Const ? std::string("the constant")
                                          : "the buffer " + point_text(mdl, rd.at);
      };
      refute(fmt::format("at {} the view reads {}, the result {}", fmt::join(at, ", "), reads(lhs),
                         reads(rhs)));
      return res;
    }
  }
  return res;
}

}  // namespace tinyrw::rw::prove
