#include "tensor/gradient.h"

#include <map>

#include <fmt/format.h>

#include "compiler/runtime.h"
#include "ir/call.h"
#include "ir/graph.h"
#include "ir/rewrite.h"
#include "tensor/function.h"

namespace tinyrw {

namespace {

class GradientPass {
 public:
  GradientPass(const std::unordered_set<UOp>& targets,
               const std::vector<std::shared_ptr<Storage>>& storages)
      : targets_(targets), storages_(storages) {}

  // Differentiates several roots at once, each seeded with its gradient.
  std::unordered_map<UOp, UOp> run(const std::vector<std::pair<UOp, UOp>>& seeded) {
    const rw::RuleSetMatcher* rules = rw::compiled_rules("grad");
    if (!rules) throw std::logic_error("the gradient rules are not compiled in");
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
    RewriteContext ctx;
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const UOp& u = *it;
      if (!on_path.contains(u)) continue;
      if (u.op() == Op::Call) {
        if (auto c = call_grads_.find(u); c != call_grads_.end()) call_gradient(u, c->second);
        continue;
      }
      auto g = grads_.find(u);
      if (g == grads_.end()) continue;
      const UOp gu = g->second;
      if (u.op() == Op::Returned) {  // collected per output; the CALL is differentiated once
        add_output_grad(u.src(0), static_cast<size_t>(u.arg().as_int()), gu);
        continue;
      }
      if (u.op() == Op::After && after_call(u, gu)) continue;
      const std::optional<rw::Value> r = rules->apply(u, ctx, nullptr, &gu);
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
    if (!fresh) slot->second = slot->second + g;
  }
  void add_output_grad(const UOp& call, size_t i, const UOp& g) {
    auto [slot, fresh] = call_grads_[call].emplace(i, g);
    if (!fresh) slot->second = slot->second + g;
  }

  // AFTER(t, ..., CALL, ...): t as a kernel CALL left it. Where the call writes t, the gradient
  // is that call output's; a call that only reads t leaves it unchanged (the gradient flows to t).
  bool after_call(const UOp& after, const UOp& g) {
    bool has_call = false;
    for (size_t k = 1; k < after.nsrc(); ++k) has_call |= after.src(k).op() == Op::Call;
    if (!has_call) return false;
    const UOp& t = after.src(0);
    bool routed = false;
    for (size_t k = 1; k < after.nsrc(); ++k) {
      const UOp& dep = after.src(k);
      if (dep.op() != Op::Call) {
        if (dep.op() == Op::Store && storage_root(dep.src(0)) == storage_root(t))
          throw TensorError(
              "gradient through an aliased write: an AFTER mixes a kernel CALL with "
              "a STORE to the same buffer");
        continue;
      }
      const CallInfo info = CallInfo::of(dep);
      const CallAccess acc = call_access(dep);
      std::vector<size_t> outputs;
      for (size_t w : acc.writes) {
        const UOp& arg = dep.src(w + 1);
        if (arg == t) {
          outputs.push_back(w);
        } else if (storage_root(arg) == storage_root(t)) {
          throw TensorError(fmt::format(
              "gradient through an aliased write: CALL '{}' writes argument {}, a different view "
              "of the buffer this AFTER returns",
              info.name, w));
        }
      }
      if (outputs.empty()) continue;  // read only: t is unchanged by this call
      if (outputs.size() > 1 || routed)
        throw TensorError(fmt::format(
            "ambiguous CALL output gradient: CALL '{}' writes the returned buffer as {} "
            "arguments",
            info.name, outputs.size() + (routed ? 1 : 0)));
      // the same buffer passed again read-only also makes the output ambiguous
      for (size_t k = 0; k + 1 < dep.nsrc(); ++k)
        if (k != outputs[0] && dep.src(k + 1) == t)
          throw TensorError(fmt::format(
              "ambiguous CALL output gradient: CALL '{}' gets the returned buffer as arguments "
              "{} and {}",
              info.name, outputs[0], k));
      add_output_grad(dep, outputs[0], g);
      routed = true;
    }
    if (!routed) add(t, g);
    return true;
  }

  Tensor as_tensor(const UOp& u) const { return Tensor::over_storages(u, storages_); }

  // Gradients of the arguments of `call` from the gradients of its outputs.
  void call_gradient(const UOp& call, const std::map<size_t, UOp>& out_grads) {
    const CallInfo info = CallInfo::of(call);
    const size_t nargs = call.nsrc() - 1;
    if (info.grad_fn >= 0) {
      const size_t nout = info.kernel ? nargs : call.src(0).nsrc();
      std::vector<std::optional<Tensor>> outs(nout);
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
        const UOp& arg = call.src(k + 1);
        if (res[k]->uop().shape() != arg.shape())
          throw TensorError(fmt::format(
              "the gradient function of CALL '{}' returned a gradient of shape {} for argument "
              "{} of shape {}",
              info.name, shape_repr(res[k]->uop().shape()), k, shape_repr(arg.shape())));
        add(arg,
            res[k]->uop().dtype() == arg.dtype() ? res[k]->uop() : res[k]->uop().cast(arg.dtype()));
      }
      return;
    }
    if (info.kernel)
      throw TensorError(fmt::format(
          "custom kernel '{}' has no gradient function, and a gradient reaches an argument it "
          "writes",
          info.name));
    differentiate_body(call, info, out_grads);
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
    // forward outputs referenced by the gradients become parameters bound to the outputs
    std::unordered_map<UOp, UOp> fwd;
    for (size_t i = 0; i < body.nsrc(); ++i) {
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
      add(call.src(slots[j] + 1),
          UOp::make(Op::Returned, outs[j].dtype(), {bwd_call}, Arg::integer(static_cast<i128>(j))));
    }
  }

  const std::unordered_set<UOp>& targets_;
  const std::vector<std::shared_ptr<Storage>>& storages_;
  std::unordered_map<UOp, UOp> grads_;
  std::unordered_map<UOp, std::map<size_t, UOp>> call_grads_;  // per output of each CALL
};

}  // namespace

std::unordered_map<UOp, UOp> compute_gradient(
    const UOp& root, const UOp& root_grad, const std::unordered_set<UOp>& targets,
    const std::vector<std::shared_ptr<Storage>>& storages) {
  return GradientPass(targets, storages).run({{root, root_grad}});
}

}  // namespace tinyrw
