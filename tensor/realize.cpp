// realize(): cuts the tensor graph into kernels (rules/rangeify.rw decides where), lowers each
// kernel with the rangeify and symbolic rules, and runs it on the INTERP device.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "codegen/linearize.h"
#include "compiler/runtime.h"
#include "dsl/verify.h"
#include "ir/alu.h"
#include "ir/graph.h"
#include "ir/viz.h"
#include "rules/helpers/rangeify.h"
#include "runtime/cpu.h"
#include "runtime/interp.h"
#include "runtime/llvm_render.h"
#include "tensor/storage.h"
#include "tensor/tensor.h"

namespace tinyrw {

namespace {

int g_kernel_count = 0;
std::string g_device;  // "" = the default

const rw::RuleSetMatcher& rules(const char* name) {
  const rw::RuleSetMatcher* m = rw::compiled_rules(name);
  if (!m) throw std::logic_error(fmt::format("rule set '{}' is not compiled in", name));
  return *m;
}

}  // namespace

struct Realizer {
  std::map<int64_t, std::shared_ptr<Storage>> buffers;

  static UOp buffer_uop(const Storage& s) {
    return UOp::make(Op::Buffer, s.dtype, {},
                     Arg::record("ParamArg", {{"slot", Arg::integer(s.id)},
                                              {"size", Arg::integer(s.size)},
                                              {"device", Arg::string(default_device())}}));
  }

  // One instruction a line, indented by loop depth (DEBUG=2 on INTERP).
  static std::string render_program(const UOp& program) {
    std::string out;
    std::unordered_map<const UOpNode*, int> id;
    int depth = 0, pos = 0;
    for (const UOp& u : program.src()) {
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
      id[u.node()] = n;  // later uses refer to the latest execution
      out += fmt::format("{:>4} {}{} {} ({}){}\n", n,
                         std::string(static_cast<size_t>(depth) * 2, ' '), op_info(u.op()).py_name,
                         u.dtype().repr(), srcs, u.arg().is_none() ? "" : " " + u.arg().repr());
      if (u.op() == Op::Range) ++depth;
    }
    return out;
  }

  // A buffer view with the node's shape, backed by new storage filled by one kernel.
  UOp run_kernel(const UOp& node, std::shared_ptr<Storage>& out) {
    Dims shape;
    for (const SInt& d : node.shape()) shape.push_back(d.value());
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    out = allocate_storage(node.dtype(), n);
    buffers[out->id] = out;

    rw::RangeifyContext ctx;
    std::vector<UOp> ranges;
    for (int64_t d : shape) ranges.push_back(UOp::range(UOp::cint(d), ctx.next_axis++));
    std::vector<UOp> src{node};
    src.insert(src.end(), ranges.begin(), ranges.end());
    if (ranges.empty()) src.push_back(UOp::cint(0));  // a scalar: index 0 of a 1-element view
    const UOp root =
        ranges.empty() ? UOp::make(Op::Index, node.dtype(),
                                   {UOp::make(Op::Reshape, node.dtype(), {node, shape_to_uop({1})}),
                                    UOp::cint(0)})
                       : UOp::make(Op::Index, node.dtype(), src);
    viz::Group kernel_group("kernel " + std::to_string(g_kernel_count + 1));
    const UOp value = graph_rewrite(root, &rules("lower"), {.ctx = &ctx, .name = "rangeify"});
    if (spec_enabled()) verify(value, "spec_kernel");
    ++g_kernel_count;
    const std::string device = default_device();
    const auto t0 = std::chrono::steady_clock::now();
    if (device == "CPU") {
      // the LINEAR program the CPU's code corresponds to, for the VIZ trace
      if (viz::enabled())
        record_stage("linearize", value, linearize(value, ranges, shape, buffer_uop(*out)));
      run_cpu(value, ranges, shape, *out);
    } else {
      run_interp(value, ranges, shape, *out);
    }
    if (debug_level() >= 2) {
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      std::fprintf(stderr, "kernel %d on %s: %lld elements, %.1f us\n", g_kernel_count,
                   device.c_str(), static_cast<long long>(n), us);
    }
    const UOp buf = buffer_uop(*out);
    Shape s;
    for (int64_t d : shape) s.emplace_back(d);
    return UOp::make(Op::Reshape, out->dtype, {buf, shape_to_uop(s)});
  }

  void run_cpu(const UOp& value, const std::vector<UOp>& ranges, const Dims& shape, Storage& out) {
    std::vector<std::pair<int64_t, int64_t>> sizes;
    for (const auto& [id, s] : buffers) sizes.emplace_back(id, s->size);
    const RenderedKernel k = render_llvm(value, ranges, out.dtype, shape, sizes);
    if (debug_level() >= 2) std::fprintf(stderr, "%s\n", k.ir.c_str());
    const KernelFn fn = cpu_compile(k.ir);
    std::vector<void*> bufs{out.bytes.data()};
    for (int64_t slot : k.input_slots) bufs.push_back(buffers.at(slot)->bytes.data());
    if (out.size > 0) fn(bufs.data());
  }

  // INTERP: the kernel linearized into a LINEAR program, executed instruction by instruction.
  void run_interp(const UOp& value, const std::vector<UOp>& ranges, const Dims& shape,
                  Storage& out) {
    const UOp program = linearize(value, ranges, shape, buffer_uop(out));
    record_stage("linearize", value, program);
    if (spec_enabled()) verify(program, "spec_program");
    if (debug_level() >= 2) std::fprintf(stderr, "%s\n", render_program(program).c_str());
    interp_run(program, buffers);
  }

  // Realizes `root` (and every kernel boundary below it, in dependency order).
  UOp realize(const UOp& root, std::vector<std::shared_ptr<Storage>>& keep) {
    viz::Group group("realize");
    if (spec_enabled()) verify(root, "spec_tensor");
    const rw::RuleSetMatcher& boundary = rules("kernel_boundary");
    std::unordered_map<UOp, UOp> done;
    RewriteContext rctx;
    for (const UOp& u : toposort(root)) {
      const bool is_root = u == root;
      if (!is_root && !boundary.apply(u, rctx, nullptr).has_value()) continue;
      const UOp ready = done.empty() ? u : substitute(u, done);
      std::shared_ptr<Storage> out;
      done.emplace(u, run_kernel(ready, out));
      keep.push_back(out);
    }
    // the schedule as one VIZ step: the tensor graph, and the kernels' outputs in order
    std::vector<UOp> kernels;
    for (const UOp& u : toposort(root))
      if (auto it = done.find(u); it != done.end()) kernels.push_back(it->second);
    record_stage("schedule", root, UOp::sink(kernels));
    return done.at(root);
  }

  // A stage that is not a graph_rewrite (scheduling, linearization) in the VIZ trace: one call
  // from its input to its output.
  static void record_stage(std::string_view name, const UOp& in, const UOp& out,
                           std::source_location loc = std::source_location::current()) {
    if (!viz::enabled()) return;
    const int call = viz::begin_rewrite(name, loc, in, 0, "stage");
    // one step from input to output, attributed to the C++ stage (it has no .rw rule)
    const RuleInfo stage{std::string(name), loc.file_name(), static_cast<int>(loc.line()),
                         "C++ stage: " + std::string(name)};
    viz::record_match(call, in, out, &stage, std::chrono::nanoseconds(0));
    viz::end_rewrite(call, out);
  }
};

int last_kernel_count() { return g_kernel_count; }

int debug_level() {
  const char* d = std::getenv("DEBUG");
  return d ? std::atoi(d) : 0;
}

bool device_available(const std::string& name) {
  if (name == "INTERP") return true;
  if (name == "CPU") return cpu_available();
  return false;
}

void set_default_device(const std::string& name) {
  if (!name.empty() && name != "INTERP" && name != "CPU") {
    throw TensorError("unknown device '" + name + "' (INTERP or CPU)");
  }
  g_device = name;
}

std::string default_device() {
  if (!g_device.empty()) return g_device;
  if (const char* d = std::getenv("DEV")) {
    const std::string dev = d;
    if (dev != "INTERP" && dev != "CPU")
      throw TensorError("DEV=" + dev + ": unknown device (INTERP or CPU)");
    return dev;
  }
  return cpu_available() ? "CPU" : "INTERP";
}

Tensor& Tensor::realize() {
  if (uop_.op() == Op::Reshape && uop_.src(0).op() == Op::Buffer) return *this;  // already a buffer
  Realizer r;
  for (const auto& s : deps_) r.buffers[s->id] = s;
  g_kernel_count = 0;
  std::vector<std::shared_ptr<Storage>> kept;
  const UOp view = r.realize(uop_, kept);
  uop_ = view;
  deps_ = {kept.back()};
  return *this;
}

std::vector<double> Tensor::to_doubles() {
  realize();
  const Storage& s = *deps_.at(0);
  std::vector<double> out;
  for (int64_t i = 0; i < s.size; ++i) out.push_back(load_element(s, i).as_float());
  return out;
}

template <class T>
std::vector<T> Tensor::data() {
  realize();
  const Storage& s = *deps_.at(0);
  std::vector<T> out;
  for (int64_t i = 0; i < s.size; ++i) {
    const Arg v = load_element(s, i);
    if constexpr (std::is_floating_point_v<T>) {
      out.push_back(static_cast<T>(v.as_float()));
    } else {
      out.push_back(static_cast<T>(v.is_float() ? static_cast<i128>(v.as_float()) : v.as_int()));
    }
  }
  return out;
}
template std::vector<float> Tensor::data();
template std::vector<double> Tensor::data();
template std::vector<int32_t> Tensor::data();
template std::vector<int64_t> Tensor::data();
template std::vector<uint8_t> Tensor::data();

}  // namespace tinyrw
