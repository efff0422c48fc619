// function(): tinygrad's @function for C++ callables over Tensors. Calling one traces the
// callable once into a CALL whose body is the computation over PARAM placeholders and whose
// arguments are the tensors passed (equal graphs are one input) plus any tensors the body read
// without being given them ("implicit" inputs). The result tensors are the CALL's outputs; when
// realized the body is inlined, or with `precompile` compiled as its own kernels. Gradients
// differentiate the body (a backward CALL, precompiled with `precompile_backward`) unless a
// custom gradient function is given.
//
// custom_kernel(): a kernel written directly in UOps (ranges, loads, stores over PARAMs), run as
// one unit of the schedule; what it reads and writes comes from its LOAD/STORE operands.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace tinyrw {

// A CALL's gradient: given one gradient per output (none where an output received none) and the
// call's arguments, one gradient per argument (none, or fewer entries, for no gradient).
using CallGradFn = std::function<std::vector<std::optional<Tensor>>(
    const std::vector<std::optional<Tensor>>& output_grads, const std::vector<Tensor>& args)>;

struct FunctionOptions {
  std::string name = "function";     // the CALL's name (the backward CALL is name + "_backward")
  bool precompile = false;           // the body as its own kernels, inputs and outputs in buffers
  bool precompile_backward = false;  // the same for the backward CALL
  bool allow_implicit = true;        // false: reading a tensor that was not passed is an error
  CallGradFn grad_fxn{};             // replaces differentiating the body
};

// The untyped core: traces `body` (called with the caller's own tensors, which it may assign
// to) into a CALL and returns its outputs. `grad_fn` is opts.grad_fxn as registered (or -1);
// `writable[i]` is args[i] when the caller passed it as a non-const tensor (it is restored if
// tracing fails), else null.
std::vector<Tensor> trace_function(const FunctionOptions& opts, int64_t grad_fn,
                                   const std::vector<const Tensor*>& args,
                                   const std::vector<Tensor*>& writable,
                                   const std::function<std::vector<Tensor>()>& body);

namespace detail {
template <class T>
Tensor* writable(T& t) {
  if constexpr (std::is_const_v<T>) {
    return nullptr;
  } else {
    return &t;
  }
}

// Custom gradients live here; a CALL refers to one by number (CallInfo::grad_fn). A function
// registers its gradient once; each custom_kernel call with a gradient function registers it.
int64_t register_grad_fn(CallGradFn fn);
const CallGradFn& registered_grad_fn(int64_t id);

inline std::vector<Tensor> flatten(Tensor t) { return {std::move(t)}; }
inline std::vector<Tensor> flatten(std::vector<Tensor> ts) { return ts; }
template <class... Ts>
std::vector<Tensor> flatten(std::tuple<Ts...> t) {
  return std::apply([](auto&&... x) { return std::vector<Tensor>{Tensor(x)...}; }, std::move(t));
}
template <class A, class B>
std::vector<Tensor> flatten(std::pair<A, B> p) {
  return {Tensor(std::move(p.first)), Tensor(std::move(p.second))};
}
template <class R>
struct Unflatten {  // std::tuple<Tensor...> and std::pair<Tensor, Tensor>
  static R from(std::vector<Tensor>& v) {
    return [&]<size_t... I>(std::index_sequence<I...>) { return R{std::move(v[I])...}; }
    (std::make_index_sequence<std::tuple_size_v<R>>{});
  }
};
template <>
struct Unflatten<Tensor> {
  static Tensor from(std::vector<Tensor>& v) { return std::move(v.at(0)); }
};
template <>
struct Unflatten<std::vector<Tensor>> {
  static std::vector<Tensor> from(std::vector<Tensor>& v) { return std::move(v); }
};
}  // namespace detail

// A callable over Tensors made into a function: call it like the callable (Tensor arguments by
// value or reference; a Tensor, a pair/tuple of Tensors or a vector of Tensors returned).
template <class F>
class Function {
 public:
  Function(F fn, FunctionOptions opts)
      : fn_(std::move(fn)),
        opts_(std::move(opts)),
        grad_fn_(opts_.grad_fxn ? detail::register_grad_fn(opts_.grad_fxn) : -1) {}
  template <class... Ts>
  auto operator()(Ts&&... args) const {
    using R = std::decay_t<std::invoke_result_t<const F&, Ts&...>>;
    const std::vector<const Tensor*> ins{static_cast<const Tensor*>(&args)...};
    const std::vector<Tensor*> writable{detail::writable(args)...};
    std::vector<Tensor> outs = trace_function(opts_, grad_fn_, ins, writable,
                                              [&] { return detail::flatten(fn_(args...)); });
    return detail::Unflatten<R>::from(outs);
  }
  const FunctionOptions& options() const { return opts_; }

 private:
  F fn_;
  FunctionOptions opts_;
  int64_t grad_fn_;  // registered once per function, not per call
};

template <class F>
Function<F> function(F fn, FunctionOptions opts = {}) {
  return Function<F>(std::move(fn), std::move(opts));
}

// A custom kernel over `tensors`: `kernel` receives one PARAM per tensor (its dtype and shape)
// and returns the kernel as SINK(stores...) using ranges (UOp::range), indexing (kernel_index),
// loads and stores, ending loops with END. The result has one tensor per argument: that
// argument after the kernel ran (its new contents where the kernel writes it). `grad_fxn`
// receives the gradients of those outputs.
std::vector<Tensor> custom_kernel(const std::vector<Tensor>& tensors,
                                  const std::function<UOp(const std::vector<UOp>&)>& kernel,
                                  CallGradFn grad_fxn = nullptr, std::string name = "kernel");

// Kernel-building helpers for custom_kernel bodies.
UOp kernel_index(const UOp& param, std::initializer_list<UOp> idx);  // param[i, j, ...]
UOp kernel_store(const UOp& dst, const UOp& value);
UOp kernel_end(const UOp& effect, std::initializer_list<UOp> ranges);
UOp kernel_sink(std::initializer_list<UOp> effects, std::string name = "");

}  // namespace tinyrw
