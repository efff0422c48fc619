#include "tensor/gradient.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "dsl/typed_helper.h"
#include "ir/call.h"
#include "ir/graph.h"
#include "ir/rewrite.h"
#include "rules_gen/gradient.h"
#include "tensor/function.h"
#include "tensor/storage.h"

namespace tinyrw {

namespace {

class GradientPass {
 public:
  GradientPass(const std::unordered_set<UOp>& targets,
               std::vector<std::shared_ptr<Storage>>& storages)
      : targets_(targets), storages_(storages) {}

  // Differentiates several roots at once, each seeded with its gradient.
  std::unordered_map<UOp, UOp> run(const std::vector<std::pair<UOp, UOp>>& seeded) {
    const rw::RuleSetMatcher& gradient_rules = rules::grad();
    std::vector<UOp> roots;
    for (const auto& [root, g] : seeded) {
      add(root, g);
      roots.push_back(root);
    }
    // CALL bodies have their own parameters: a CALL is differentiated as one node
    const std::vector<UOp> order = toposort(UOp::sink(roots), nullptr, /*enter_calls=*/false);
    // only nodes with a target below them carry gradient; one of them without a rule is an
    // error, never a silent zero
    std::unordered_set<UOp> on_path(targets_.begin(), targets_.end());
    auto leads_to_target = [&](const UOp& u) {
      for (size_t k = u.op() == Op::Call ? 1 : 0; k < u.nsrc(); ++k)
        if (on_path.contains(u.src(k))) return true;
      return false;
    };
    for (const UOp& u : order)
      if (leads_to_target(u)) on_path.insert(u);
    RewriteContext ctx{.user = this};  // for call_grad
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const UOp& u = *it;
      if (!on_path.contains(u)) continue;
      auto g = grads_.find(u);
      if (g == grads_.end()) continue;
      const UOp gu = g->second;
      const std::optional<rw::Value> r = gradient_rules.apply(u, ctx, nullptr, &gu);
      if (!r) {
        if (!leads_to_target(u)) continue;  // a target that is a leaf: its gradient is complete
        throw TensorError(fmt::format("no gradient rule in rules/gradient.rw matches {} ({})",
                                      op_name(u.op()), u.dtype().repr()));
      }
      const std::vector<rw::Value>& per_src = r->items();
      for (size_t k = 0; k < per_src.size() && k < u.nsrc(); ++k)
        if (per_src[k].is_uop()) add(u.src(k), per_src[k].as_uop());
    }
    return std::move(grads_);
  }

 private:
  void add(const UOp& to, const UOp& g) {
    auto [slot, fresh] = grads_.emplace(to, g);
    if (fresh) return;
    slot->second =
        is_call_grad_bundle(g) ? add_call_grad_bundles(slot->second, g) : slot->second + g;
  }

  Tensor as_tensor(const UOp& u) const { return Tensor::over_storages(u, storages_); }

  // An argument's gradient from the CALL being differentiated.
  void add_arg(size_t k, const UOp& g) { arg_grads_[k] = arg_grads_[k] ? arg_grads_[k] + g : g; }

 public:
  // call_grad: one gradient per source of `call` (none for its body) from the bundle of its
  // outputs' gradients.
  rw::Value call_grad(const UOp& call, const UOp& bundle) {
    std::map<size_t, UOp> out_grads;
    for (size_t i = 0; i < bundle.nsrc(); ++i)
      if (bundle.src(i).op() != Op::Noop) out_grads.emplace(i, bundle.src(i));
    arg_grads_.assign(call.nsrc() - 1, UOp());
    call_gradient(call, out_grads);
    std::vector<rw::Value> out{rw::Value()};
    for (const UOp& g : arg_grads_) out.push_back(g ? rw::Value::uop(g) : rw::Value());
    return rw::Value::tuple(std::move(out));
  }

 private:
  // Gradients of the arguments of `call` from the gradients of its outputs.
  void call_gradient(const UOp& call, const std::map<size_t, UOp>& out_grads) {
    const CallInfo info = CallInfo::of(call);
    const size_t nargs = call.nsrc() - 1;
    if (info.grad_fn >= 0) {
      std::vector<std::optional<Tensor>> outs(call_outputs(call));
      for (const auto& [i, g] : out_grads) outs.at(i) = as_tensor(g);
      std::vector<Tensor> args;
      for (size_t k = 0; k < nargs; ++k) args.push_back(as_tensor(call.src(k + 1)));
      const std::vector<std::optional<Tensor>> res =
          detail::registered_grad_fn(info.grad_fn)(outs, args);
      if (res.size() > nargs)
        throw TensorError(
            fmt::format("the gradient function of CALL '{}' returned {} gradients for {} arguments",
                        info.name, res.size(), nargs));
      for (size_t k = 0; k < res.size(); ++k) {
        if (!res[k]) continue;
        add_storages(storages_, res[k]->storages());
        const UOp& arg = call.src(k + 1);
        if (res[k]->uop().shape() != arg.shape())
          throw TensorError(fmt::format(
              "the gradient function of CALL '{}' returned a gradient of shape {} for argument "
              "{} of shape {}",
              info.name, shape_repr(res[k]->uop().shape()), k, shape_repr(arg.shape())));
        add_arg(k, res[k]->uop().dtype() == arg.dtype() ? res[k]->uop()
                                                        : res[k]->uop().cast(arg.dtype()));
      }
      return;
    }
    differentiate_body(call, info, out_grads);  // a kernel without one: refused by the rule
  }

  // A function CALL without a custom gradient: its body differentiated with respect to its
  // parameters, packaged as a backward CALL over (arguments, output gradients, forward outputs)
  // so that the forward values are reused, not recomputed.
  void differentiate_body(const UOp& call, const CallInfo& info,
                          const std::map<size_t, UOp>& out_grads) {
    const UOp& body = call.src(0);
    const size_t nargs = call.nsrc() - 1;
    std::map<size_t, UOp> params;  // slot -> PARAM
    for (const UOp& u : toposort(body, nullptr, /*enter_calls=*/false))
      if (u.op() == Op::Param) params.emplace(u.arg().field("slot").as_int(), u);
    std::unordered_set<UOp> wanted;
    for (const auto& [slot, p] : params) wanted.insert(p);
    std::vector<UOp> bwd_args(call.src().begin() + 1, call.src().end());
    // the outputs' gradients become parameters too, and the body is differentiated once for
    // all of them (a custom gradient inside sees every output's gradient together)
    std::vector<std::pair<UOp, UOp>> seeded;
    for (const auto& [i, g] : out_grads) {
      seeded.emplace_back(body.src(i), param_like(g, bwd_args.size()));
      bwd_args.push_back(g);
    }
    std::map<size_t, UOp> param_grads;
    for (const auto& [p, pg] : GradientPass(wanted, storages_).run(seeded))
      if (wanted.contains(p)) param_grads.emplace(p.arg().field("slot").as_int(), pg);
    if (param_grads.empty()) return;
    // forward outputs the gradients use become parameters bound to those outputs (not
    // recomputed)
    std::vector<UOp> grads;
    for (const auto& [slot, pg] : param_grads) grads.push_back(pg);
    std::unordered_set<UOp> used;
    for (const UOp& u : toposort(UOp::sink(grads), nullptr, /*enter_calls=*/false)) used.insert(u);
    std::unordered_map<UOp, UOp> fwd;
    for (size_t i = 0; i < body.nsrc(); ++i) {
      if (!used.contains(body.src(i)) || fwd.contains(body.src(i))) continue;
      fwd.emplace(body.src(i), param_like(body.src(i), bwd_args.size()));
      bwd_args.push_back(
          UOp::make(Op::Returned, body.src(i).dtype(), {call}, Arg::integer(static_cast<i128>(i))));
    }
    std::vector<UOp> outs;
    std::vector<size_t> slots;
    for (const auto& [slot, pg] : param_grads) {
      outs.push_back(replace_outside_calls(pg, fwd));
      slots.push_back(slot);
    }
    CallInfo bwd{.name = info.name + "_backward", .precompile = info.precompile_backward};
    std::vector<UOp> src{UOp::sink(outs)};
    src.insert(src.end(), bwd_args.begin(), bwd_args.end());
    const UOp bwd_call = UOp::make(Op::Call, dtypes::void_, src, bwd.to_arg());
    for (size_t j = 0; j < slots.size(); ++j) {
      if (slots[j] >= nargs) continue;
      add_arg(slots[j], UOp::make(Op::Returned, outs[j].dtype(), {bwd_call},
                                  Arg::integer(static_cast<i128>(j))));
    }
  }

  const std::unordered_set<UOp>& targets_;
  // the buffers the graph reads; buffers that custom gradients create are added
  std::vector<std::shared_ptr<Storage>>& storages_;
  std::unordered_map<UOp, UOp> grads_;
  std::vector<UOp> arg_grads_;  // per argument of the CALL being differentiated
};

const rw::HelperRegistrar kCallGrad(rw::typed_helper(
    "call_grad",
    +[](RewriteContext& ctx, const UOp& call, const UOp& grads) {
      if (!ctx.user) throw rw::EvalError("call_grad runs inside a gradient pass only");
      return ctx.as<GradientPass>().call_grad(call, grads);
    },
    rw::Type::Tuple));

}  // namespace

std::unordered_map<UOp, UOp> compute_gradient(const UOp& root, const UOp& root_grad,
                                              const std::unordered_set<UOp>& targets,
                                              std::vector<std::shared_ptr<Storage>>& storages) {
  return GradientPass(targets, storages).run({{root, root_grad}});
}

}  // namespace tinyrw
