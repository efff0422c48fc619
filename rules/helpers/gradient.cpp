// Adjoints of movement ops and reductions for rules/gradient.rw: each returns one gradient per
// source of the node (none for the shape sources), built as tensor-level UOps.
#include <optional>

#include <fmt/format.h>

#include "dsl/value.h"
#include "ir/call.h"

namespace tinyrw::rw {
namespace {

// Sums g over `axes` (keeping them as size 1).
UOp sum_axes(const UOp& g, const std::vector<bool>& axes) {
  std::vector<int64_t> reduced;
  for (size_t k = 0; k < axes.size(); ++k)
    if (axes[k]) reduced.push_back(static_cast<int64_t>(k));
  return reduced.empty() ? g : g.r(Op::Add, reduced);
}

Value movement_grad(const UOp& x, const UOp& g) {
  const UOp& a = x.src(0);
  const Shape in = a.shape();
  UOp ga;
  switch (x.op()) {
    case Op::Reshape:
      ga = g.reshape(in);
      break;
    case Op::Permute: {
      auto p = x.arg().items();
      std::vector<int64_t> inv(p.size());
      for (size_t k = 0; k < p.size(); ++k)
        inv[static_cast<size_t>(p[k].as_int())] = static_cast<int64_t>(k);
      ga = g.permute(inv);
      break;
    }
    case Op::Expand: {
      const Shape out = x.shape();
      std::vector<bool> axes(out.size());
      for (size_t k = 0; k < out.size(); ++k) axes[k] = in[k] == SInt(1) && out[k] != SInt(1);
      ga = sum_axes(g, axes).reshape(in);
      break;
    }
    case Op::Pad:
      ga = g.shrink(uop_to_shape(x.src(1)), in);
      break;
    case Op::Shrink:
      ga = g.pad(uop_to_shape(x.src(1)), in);
      break;
    case Op::Flip: {
      std::vector<bool> flags;
      for (const Arg& f : x.arg().items()) flags.push_back(f.as_bool());
      ga = g.flip(flags);
      break;
    }
    case Op::Reduce: {
      const Op op = x.arg().items()[0].as_op();
      const size_t n = static_cast<size_t>(x.arg().items()[1].as_int());
      Shape kept(n, SInt(1));
      kept.insert(kept.end(), in.begin() + static_cast<long>(n), in.end());
      const UOp gb = g.reshape(kept).expand(in);  // broadcast back over the reduced axes
      if (op == Op::Add) {
        ga = gb;
      } else if (op == Op::Max) {  // shared among the maxima
        const UOp xb = x.reshape(kept).expand(in);
        const UOp is_max = a.ne(xb).logical_not().cast(g.dtype());
        std::vector<bool> axes(in.size(), false);
        for (size_t k = 0; k < n; ++k) axes[k] = true;
        const UOp count = sum_axes(is_max, axes).expand(in);
        ga = is_max * gb * UOp::make(Op::Reciprocal, g.dtype(), {count});
      } else if (op == Op::Mul) {
        ga = gb * x.reshape(kept).expand(in) * UOp::make(Op::Reciprocal, a.dtype(), {a});
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
