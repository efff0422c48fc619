// Adjoints of movement ops and reductions for rules/gradient.rw: each returns one gradient per
// source of the node (none for the shape sources), built as tensor-level UOps.
#include <numeric>
#include <optional>

#include <fmt/format.h>

#include "dsl/value.h"
#include "ir/call.h"

namespace tinyrw::rw {
namespace {

std::vector<int64_t> dims(const UOp& x) {
  std::vector<int64_t> out;
  for (const SInt& d : x.shape()) out.push_back(d.value());
  return out;
}
UOp shape_uop(const std::vector<int64_t>& d) {
  Shape s;
  for (int64_t x : d) s.emplace_back(x);
  return shape_to_uop(s);
}
UOp reshape(const UOp& x, const std::vector<int64_t>& d) {
  return dims(x) == d ? x : UOp::make(Op::Reshape, x.dtype(), {x, shape_uop(d)});
}
UOp expand(const UOp& x, const std::vector<int64_t>& d) {
  return dims(x) == d ? x : UOp::make(Op::Expand, x.dtype(), {x, shape_uop(d)});
}
UOp permute(const UOp& x, const std::vector<int64_t>& order) {
  std::vector<Arg> p;
  for (int64_t o : order) p.push_back(Arg::integer(o));
  return UOp::make(Op::Permute, x.dtype(), {x}, Arg::tuple(std::move(p)));
}
// Sums g over `axes` (keeping them as size 1).
UOp sum_axes(const UOp& g, const std::vector<bool>& axes) {
  const std::vector<int64_t> s = dims(g);
  std::vector<int64_t> order, keep_shape;
  for (size_t k = 0; k < s.size(); ++k)
    if (axes[k]) order.push_back(static_cast<int64_t>(k));
  const int64_t n = static_cast<int64_t>(order.size());
  if (n == 0) return g;
  for (size_t k = 0; k < s.size(); ++k) {
    if (!axes[k]) order.push_back(static_cast<int64_t>(k));
    keep_shape.push_back(axes[k] ? 1 : s[k]);
  }
  const UOp r = UOp::make(Op::Reduce, g.dtype(), {permute(g, order)},
                          Arg::tuple({Arg::op(Op::Add), Arg::integer(n)}));
  return reshape(r, keep_shape);
}

Value movement_grad(const UOp& x, const UOp& g) {
  const UOp& a = x.src(0);
  const std::vector<int64_t> in = dims(a);
  UOp ga;
  switch (x.op()) {
    case Op::Reshape:
      ga = reshape(g, in);
      break;
    case Op::Permute: {
      auto p = x.arg().items();
      std::vector<int64_t> inv(p.size());
      for (size_t k = 0; k < p.size(); ++k)
        inv[static_cast<size_t>(p[k].as_int())] = static_cast<int64_t>(k);
      ga = permute(g, inv);
      break;
    }
    case Op::Expand: {
      const std::vector<int64_t> out = dims(x);
      std::vector<bool> axes(out.size());
      for (size_t k = 0; k < out.size(); ++k) axes[k] = in[k] == 1 && out[k] != 1;
      ga = reshape(sum_axes(g, axes), in);
      break;
    }
    case Op::Pad:
      ga = UOp::make(Op::Shrink, g.dtype(), {g, x.src(1), shape_uop(in)});
      break;
    case Op::Shrink:
      ga = UOp::make(Op::Pad, g.dtype(), {g, x.src(1), shape_uop(in)});
      break;
    case Op::Flip:
      ga = UOp::make(Op::Flip, g.dtype(), {g}, x.arg());
      break;
    case Op::Reduce: {
      const Op op = x.arg().items()[0].as_op();
      const size_t n = static_cast<size_t>(x.arg().items()[1].as_int());
      std::vector<int64_t> kept(n, 1);
      kept.insert(kept.end(), in.begin() + static_cast<long>(n), in.end());
      const UOp gb =
          expand(reshape(g, kept), in);  // the gradient broadcast back over the reduced axes
      if (op == Op::Add) {
        ga = gb;
      } else if (op == Op::Max) {  // shared among the maxima
        const UOp xb = expand(reshape(x, kept), in);
        const UOp is_max = a.ne(xb).logical_not().cast(g.dtype());
        std::vector<bool> axes(in.size(), false);
        for (size_t k = 0; k < n; ++k) axes[k] = true;
        const UOp count = expand(sum_axes(is_max, axes), in);
        ga = is_max * gb * UOp::make(Op::Reciprocal, g.dtype(), {count});
      } else if (op == Op::Mul) {
        ga = gb * expand(reshape(x, kept), in) * UOp::make(Op::Reciprocal, a.dtype(), {a});
      } else {
        throw EvalError("no gradient for a reduction with " + std::string(op_name(op)));
      }
      break;
    }
    default:
      throw EvalError("movement_grad of " + std::string(op_name(x.op())));
  }
  std::vector<Value> out{Value::uop(ga)};
  for (size_t k = 1; k < x.nsrc(); ++k) out.emplace_back();
  return Value::tuple(std::move(out));
}

// A kernel CALL `call` among an AFTER's deps over t: the index of the output it gives t (the
// argument it writes that is t), or none when it only reads t. Aliasing t another way, or as two
// arguments, leaves the output's gradient ambiguous and is refused.
std::optional<size_t> call_output_for(const UOp& call, const UOp& t) {
  const std::string name = CallInfo::of(call).name;
  std::vector<size_t> outputs;
  for (size_t w : call_access(call).writes) {
    const UOp& arg = call.src(w + 1);
    if (arg == t) {
      outputs.push_back(w);
    } else if (storage_root(arg) == storage_root(t)) {
      throw EvalError(fmt::format(
          "gradient through an aliased write: CALL '{}' writes argument {}, another view of the "
          "buffer this AFTER returns",
          name, w));
    }
  }
  if (outputs.empty()) return std::nullopt;
  for (size_t k = 0; k + 1 < call.nsrc(); ++k)
    if (k != outputs[0] && call.src(k + 1) == t)
      throw EvalError(fmt::format(
          "ambiguous CALL output gradient: CALL '{}' gets the buffer this AFTER returns as "
          "arguments {} and {}",
          name, outputs[0], k));
  return outputs[0];
}

// AFTER(t, deps...): t once the deps ran. A STORE that overwrites exactly t, or a kernel CALL that
// writes t as one of its outputs, gives the result its value (the last such dep wins); stores
// elsewhere and calls that only read t leave t's gradient path alone.
Value after_grad(const UOp& a, const UOp& g) {
  const UOp& t = a.src(0);
  std::vector<Value> out(a.nsrc());
  size_t route = 0;     // the source the gradient goes to: t, or the dep that wrote it
  int64_t output = -1;  // the routed CALL's output, -1 for a STORE (or none)
  for (size_t k = 1; k < a.nsrc(); ++k) {
    const UOp& dep = a.src(k);
    if (dep.op() == Op::Call) {
      if (auto i = call_output_for(dep, t)) {
        if (route != 0)
          throw EvalError(
              "ambiguous CALL output gradient: several deps of an AFTER write the "
              "buffer it returns");
        route = k;
        output = static_cast<int64_t>(*i);
      }
      continue;
    }
    if (dep.op() != Op::Store) continue;
    if (dep.src(0) == t) {
      route = k;
      output = -1;
    } else if (storage_root(dep.src(0)) == storage_root(t)) {
      throw EvalError(
          "gradient through an aliased write: a STORE writes part of (or another view of) the "
          "buffer this AFTER returns");
    }
  }
  out[route] = Value::uop(
      output >= 0 ? call_grad_bundle(call_outputs(a.src(route)), static_cast<size_t>(output), g)
                  : g);
  return Value::tuple(std::move(out));
}

// RETURNED(call): output i's gradient, bundled for the CALL.
Value returned_grad(const UOp& r, const UOp& g) {
  const UOp& call = r.src(0);
  return Value::tuple(
      {Value::uop(call_grad_bundle(call_outputs(call), static_cast<size_t>(r.arg().as_int()), g))});
}

const HelperRegistrar kReturnedGrad(
    {"returned_grad", 2, 2, Type::Tuple,
     [](RewriteContext&, std::span<const Value> a) {
       return returned_grad(a[0].as_uop(), a[1].as_uop());
     },
     "returned_grad(returned, g): output i's gradient as the CALL's bundle of output gradients"});

const HelperRegistrar kAfterGrad({"after_grad", 2, 2, Type::Tuple,
                                  [](RewriteContext&, std::span<const Value> a) {
                                    return after_grad(a[0].as_uop(), a[1].as_uop());
                                  },
                                  "after_grad(after, g): the gradient of an AFTER per source (t, "
                                  "or the store or CALL writing it)"});

const HelperRegistrar kMovementGrad(
    {"movement_grad", 2, 2, Type::Tuple,
     [](RewriteContext&, std::span<const Value> a) {
       return movement_grad(a[0].as_uop(), a[1].as_uop());
     },
     "movement_grad(x, g): the gradient of a movement op or reduction per source"});

}  // namespace
}  // namespace tinyrw::rw
