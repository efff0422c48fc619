#include "tensor/function.h"

#include <algorithm>
#include <deque>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "ir/builders.h"
#include "ir/call.h"
#include "ir/graph.h"
#include "ir/kernel_info.h"
#include "ir/rewrite.h"
#include "tensor/storage.h"

namespace tinyrw {

namespace detail {
namespace {
std::mutex g_grad_mutex;
std::deque<CallGradFn>& grad_fns() {  // a deque: references stay valid as it grows
  static std::deque<CallGradFn> fns;
  return fns;
}
}  // namespace

int64_t register_grad_fn(CallGradFn fn) {
  std::lock_guard lock(g_grad_mutex);
  grad_fns().push_back(std::move(fn));
  return static_cast<int64_t>(grad_fns().size()) - 1;
}
const CallGradFn& registered_grad_fn(int64_t id) {
  std::lock_guard lock(g_grad_mutex);
  return grad_fns().at(static_cast<size_t>(id));
}
}  // namespace detail

namespace {

// Whether kernel CALL `call` writes its argument k without reading it.
bool only_writes(const UOp& call, size_t k) {
  if (call.op() != Op::Call || !CallInfo::of(call).kernel) return false;
  try {
    const CallAccess a = call_access(call);
    return std::find(a.writes.begin(), a.writes.end(), k) != a.writes.end() &&
           std::find(a.reads.begin(), a.reads.end(), k) == a.reads.end();
  } catch (const GraphError&) {
    return false;  // opaque: counted as a read (realize refuses it anyway)
  }
}

// A buffer view over a never-written Tensor::empty() whose every use in `nodes` is as an
// argument that kernel CALLs only write, or as the buffer AFTER such a call returns.
bool is_scratch(const UOp& view, const std::vector<UOp>& nodes,
                const std::vector<std::shared_ptr<Storage>>& storages) {
  const int64_t slot = static_cast<int64_t>(view.src(0).arg().field("slot").as_int());
  auto st =
      std::find_if(storages.begin(), storages.end(), [&](const auto& s) { return s->id == slot; });
  if (st == storages.end() || !(*st)->uninitialized) return false;
  for (const UOp& n : nodes)
    for (size_t k = 0; k < n.nsrc(); ++k) {
      if (n.src(k) != view) continue;
      if (n.op() == Op::Call && k > 0 && only_writes(n, k - 1)) continue;
      if (n.op() == Op::After && k == 0) continue;  // the buffer once its deps wrote it
      if (n.op() == Op::Store && k == 0) continue;  // an assignment's destination
      return false;
    }
  return true;
}

}  // namespace

std::vector<Tensor> trace_function(const FunctionOptions& opts, int64_t grad_fn,
                                   const std::vector<const Tensor*>& args,
                                   const std::vector<Tensor*>& writable,
                                   const std::function<std::vector<Tensor>()>& body) {
  // the explicit inputs, one slot per distinct graph (the same tensor twice is one input)
  std::vector<UOp> inputs;
  std::unordered_map<UOp, UOp> to_param;
  std::vector<std::shared_ptr<Storage>> deps;
  for (size_t i = 0; i < args.size(); ++i)
    if (!args[i])
      throw TensorError(fmt::format("function {}: argument {} is a null pointer", opts.name, i));
  for (const Tensor* t : args) {
    if (!to_param.contains(t->uop())) {
      to_param.emplace(t->uop(), param_like(t->uop(), inputs.size()));
      inputs.push_back(t->uop());
    }
    add_storages(deps, t->storages());
  }
  // run it on the real tensors, then turn the inputs into parameters. An exception (thrown by
  // the callable, or a refusal below) leaves nothing behind: no CALL, and the arguments as they
  // were (an assignment the callable made to one is undone)
  struct Restore {
    std::vector<std::pair<Tensor*, Tensor>> saved;
    bool done = false;
    ~Restore() {
      if (!done)
        for (auto& [t, before] : saved) *t = before;
    }
  } restore;
  for (Tensor* t : writable)
    if (t) restore.saved.emplace_back(t, *t);
  // the callable's assignments are seen by every tensor over the buffers they write: undone too
  AssignmentJournal journal;
  const std::vector<Tensor> outs = body();
  if (outs.empty()) throw TensorError(fmt::format("function {} returned no tensors", opts.name));
  std::vector<UOp> results;
  for (const Tensor& o : outs) {
    results.push_back(replace_outside_calls(o.uop(), to_param));
    add_storages(deps, o.storages());
  }

  // implicit inputs: buffers the body reads that were not passed (a fresh, never written buffer
  // that the body only lets kernels write into is scratch of the body's own, not an input)
  std::vector<UOp> implicit;
  std::unordered_map<UOp, UOp> implicit_param;
  const std::vector<UOp> nodes = toposort(UOp::sink(results), nullptr, /*enter_calls=*/false);
  for (const UOp& u : nodes) {
    if (!is_buffer_view(u) || implicit_param.contains(u)) continue;
    if (is_scratch(u, nodes, deps)) continue;
    implicit_param.emplace(u, param_like(u, inputs.size() + implicit.size()));
    implicit.push_back(u);
  }
  if (!implicit.empty()) {
    if (!opts.allow_implicit) {
      std::string list;
      for (size_t i = 0; i < implicit.size(); ++i) {
        const UOp& b = implicit[i].src(0);
        list +=
            fmt::format("\n  {}: dtype={}, size={}, device={}", i, b.dtype().repr(),
                        static_cast<int64_t>(b.arg().field("size").as_int()), b.device().repr());
      }
      throw TensorError(fmt::format(
          "function {} has {} implicit buffer(s), but allow_implicit=false (pass them as "
          "arguments):{}",
          opts.name, implicit.size(), list));
    }
    for (UOp& r : results) r = replace_outside_calls(r, implicit_param);
  }

  const CallInfo info{.name = opts.name,
                      .precompile = opts.precompile,
                      .precompile_backward = opts.precompile_backward,
                      .grad_fn = grad_fn};
  std::vector<UOp> src{UOp::sink(results)};
  src.insert(src.end(), inputs.begin(), inputs.end());
  src.insert(src.end(), implicit.begin(), implicit.end());
  const UOp call = UOp::make(Op::Call, dtypes::void_, src, info.to_arg());
  restore.done = true;
  journal.commit();
  std::vector<Tensor> ret;
  for (size_t i = 0; i < results.size(); ++i)
    ret.push_back(Tensor::over_storages(
        UOp::make(Op::Returned, results[i].dtype(), {call}, Arg::integer(static_cast<i128>(i))),
        deps));
  return ret;
}

// ---- custom kernels
// --------------------------------------------------------------------------------

std::vector<Tensor> custom_kernel(const std::vector<Tensor>& tensors,
                                  const std::function<UOp(const std::vector<UOp>&)>& kernel,
                                  CallGradFn grad_fxn, std::string name) {
  std::vector<UOp> params, args;
  std::vector<std::shared_ptr<Storage>> deps;
  for (size_t k = 0; k < tensors.size(); ++k) {
    params.push_back(param_like(tensors[k].uop(), k));
    args.push_back(tensors[k].uop());
    add_storages(deps, tensors[k].storages());
  }
  const UOp body = kernel(params);
  if (!body) throw TensorError(fmt::format("custom kernel {} returned an empty UOp", name));
  if (body.op() != Op::Sink && body.op() != Op::Program)
    throw TensorError(
        fmt::format("custom kernel {} must return a SINK of its effects (or a PROGRAM), not {}",
                    name, op_name(body.op())));
  CallInfo info{.name = std::move(name), .kernel = true, .id = next_effect_id()};
  if (grad_fxn) info.grad_fn = detail::register_grad_fn(std::move(grad_fxn));
  std::vector<UOp> src{body};
  src.insert(src.end(), args.begin(), args.end());
  const UOp call = UOp::make(Op::Call, dtypes::void_, src, info.to_arg());
  std::vector<Tensor> out;
  for (const UOp& a : args) out.push_back(Tensor::over_storages(a.after({call}), deps));
  return out;
}

UOp kernel_index(const UOp& param, std::initializer_list<UOp> idx) {
  if (!param) throw TensorError("kernel_index: the parameter is an empty UOp");
  std::vector<UOp> src;
  for (const UOp& i : idx) {
    if (!i) throw TensorError("kernel_index: an index is an empty UOp");
    src.push_back(i.cast(dtypes::index));
  }
  try {
    return param.index(src);
  } catch (const GraphError& e) {
    throw TensorError(fmt::format("kernel_index: {}", e.what()));
  }
}
UOp kernel_store(const UOp& dst, const UOp& value) {
  if (!dst || !value) throw TensorError("kernel_store: the target or the value is an empty UOp");
  const UOp v = value.dtype() == dst.dtype() ? value : value.cast(dst.dtype());
  return UOp::make(Op::Store, dtypes::void_, {dst, v});
}
UOp kernel_end(const UOp& effect, std::initializer_list<UOp> ranges) {
  std::vector<UOp> src{effect};
  src.insert(src.end(), ranges.begin(), ranges.end());
  return UOp::make(Op::End, dtypes::void_, src);
}
UOp kernel_sink(std::initializer_list<UOp> effects, std::string name) {
  // an unnamed kernel's SINK keeps a none arg (KernelInfo::of reads it as the defaults)
  return UOp::make(Op::Sink, dtypes::void_, effects,
                   name.empty() ? Arg() : KernelInfo{.name = std::move(name)}.to_arg());
}

}  // namespace tinyrw
