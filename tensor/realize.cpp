// realize(): the tensor graphs to schedule (function CALLs inlined by rules/call.rw), every read
// checked against the assignments that ran, then the rangeify pipeline (schedule/rangeify.h: the
// realize map, range propagation, cleanups, add buffers, split kernels) gives the kernel graph:
// CALLs of kernel ASTs (tinygrad's kernel form) for computations and assignments, and custom
// kernel CALLs. They run in an order that makes every read see exactly the assignments it was made
// after (per buffer region; "cycle" when none can), on INTERP or CPU, compiled once per distinct
// AST.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "codegen/linearize.h"
#include "codegen/opt.h"
#include "codegen/search.h"
#include "dsl/verify.h"
#include "ir/alu.h"
#include "ir/builders.h"
#include "ir/call.h"
#include "ir/env.h"
#include "ir/graph.h"
#include "ir/kernel_info.h"
#include "ir/render.h"
#include "ir/viz.h"
#include "rules/helpers/schedule.h"
#include "rules_gen/rangeify.h"
#include "rules_gen/schedule.h"
#include "rules_gen/spec.h"
#include "runtime/cpu.h"
#include "runtime/device.h"
#include "runtime/device_queues.h"
#include "runtime/gpu_compile.h"
#include "runtime/gpu_runtime.h"
#include "runtime/interp.h"
#include "runtime/kernel_error.h"
#include "runtime/llvm_render.h"
#include "runtime/mpi.h"
#include "schedule/rangeify.h"
#include "tensor/multi.h"
#include "tensor/storage.h"
#include "tensor/tensor.h"

namespace tinyrw {

namespace {

int g_kernel_count = 0;
int g_compile_count = 0;                  // kernels the last realize compiled (not found cached)
std::vector<std::string> g_kernel_names;  // the names of the last realize's generated kernels
std::vector<UOp> g_kernel_asts;           // and their kernel ASTs
std::vector<int64_t> g_kernel_outputs;    // the elements each kernel of the last realize wrote
std::string g_device;                     // "" = the default

bool g_schedule_cached = false;  // whether the last realize's schedule came from the cache

// tinygrad's schedule cache (SCACHE): a graph equal to one scheduled before up to the buffers it
// reads and writes and the numbers of its effects gets that schedule's kernel graph, rebound to
// its own buffers and numbers, without running the pipeline again (a training step's graph is
// the same every step; its batch, gradients and updates are new buffers). In the cached form
// each buffer's slot and each effect number is replaced by its rank among the graph's own, so
// the order of buffers and of effects, which the scheduler reads, is kept.
class ScheduleKey {
 public:
  // Nothing for graphs the cache leaves alone: CALLs (function and custom kernel bodies keep
  // their own parameters) and STOREs not yet numbered.
  static std::optional<ScheduleKey> of(const UOp& sink) {
    ScheduleKey k;
    std::set<int64_t> slots, ids;
    const std::vector<UOp> nodes = toposort(sink, nullptr, /*enter_calls=*/false);
    for (const UOp& u : nodes) {
      if (u.op() == Op::Call) return std::nullopt;
      if (u.op() == Op::Buffer) {
        const int64_t slot = u.arg().field("slot").as_int();
        if (slot < 0) return std::nullopt;
        slots.insert(slot);
      }
      if (u.op() == Op::Store) {
        if (!u.arg().is_int()) return std::nullopt;
        ids.insert(static_cast<int64_t>(u.arg().as_int()));
      }
    }
    for (int64_t slot : slots)
      k.slots_.emplace(slot, kCanonical + static_cast<int64_t>(k.slots_.size()));
    for (int64_t id : ids) k.ids_.emplace(id, kCanonical + static_cast<int64_t>(k.ids_.size()));
    for (const auto& [real, canon] : k.slots_) k.real_slots_.emplace(canon, real);
    for (const auto& [real, canon] : k.ids_) k.real_ids_.emplace(canon, real);
    k.sink = k.rebind(sink, k.slots_, k.ids_);
    return k;
  }
  UOp to_canonical(const UOp& graph) const { return rebind(graph, slots_, ids_); }
  UOp to_real(const UOp& graph) const { return rebind(graph, real_slots_, real_ids_); }
  UOp sink;  // the canonical graph: the cache's key

 private:
  static constexpr int64_t kCanonical = int64_t{1} << 48;
  using Map = std::map<int64_t, int64_t>;
  // The graph with its BUFFERs' slots, STOREs' numbers and kernel CALLs' numbers mapped (those
  // not in the maps, such as new buffers of a kernel graph, stay); CALL bodies are not entered.
  static UOp rebind(const UOp& root, const Map& slots, const Map& ids) {
    std::unordered_map<UOp, UOp> memo;
    auto mapped = [&](const UOp& u) {
      const auto it = memo.find(u);
      return it == memo.end() ? u : it->second;
    };
    auto id_of = [&](int64_t id) {
      const auto it = ids.find(id);
      return it == ids.end() ? id : it->second;
    };
    for (const UOp& u : toposort(root, nullptr, /*enter_calls=*/false)) {
      std::vector<UOp> src;
      bool changed = false;
      for (const UOp& x : u.src()) {
        src.push_back(mapped(x));
        changed |= src.back() != x;
      }
      UOp out = changed ? u.with_src(src) : u;
      if (u.op() == Op::Buffer) {
        const auto it = slots.find(u.arg().field("slot").as_int());
        if (it != slots.end())
          out = buffer_uop(u.dtype(), it->second, u.arg().field("size").as_int(),
                           u.arg().field("device").as_string());
      } else if (u.op() == Op::Store && u.arg().is_int()) {
        out = UOp::make(Op::Store, u.dtype(), src,
                        Arg::integer(id_of(static_cast<int64_t>(u.arg().as_int()))));
      } else if (u.op() == Op::Call) {
        CallInfo info = CallInfo::of(u);
        if (info.kernel && info.id != 0) {
          info.id = id_of(info.id);
          out = UOp::make(Op::Call, u.dtype(), src, info.to_arg());
        }
      }
      if (out != u) memo.emplace(u, out);
    }
    return mapped(root);
  }
  Map slots_, ids_, real_slots_, real_ids_;
};

struct CachedSchedule {
  std::string device, settings;
  UOp graph;  // canonical
};
std::mutex g_schedule_cache_mu;
std::unordered_map<UOp, CachedSchedule>& schedule_cache() {
  static std::unordered_map<UOp, CachedSchedule> cache;
  return cache;
}
constexpr size_t kScheduleCacheEntries = 256;  // beyond it the cache starts over

}  // namespace

struct Realizer {
  std::map<int64_t, std::shared_ptr<Storage>> buffers;
  // The CPU kernels this realize launches: each compile is done before the launches run, and
  // before the realize ends, even by an error (no compile outlives the realize, nor LLVM at exit).
  std::vector<std::shared_future<KernelFn>> compiling_;
  Realizer() = default;
  Realizer(const Realizer&) = delete;
  Realizer& operator=(const Realizer&) = delete;
  ~Realizer() {
    for (const std::shared_future<KernelFn>& f : compiling_) f.wait();
  }

  // The storage of BUFFER `slot`: one of the tensors' own (a graph that reads a buffer no tensor
  // holds is a bug in whatever built it).
  const std::shared_ptr<Storage>& storage(int64_t slot) const {
    auto it = buffers.find(slot);
    if (it == buffers.end())
      throw std::logic_error(fmt::format(
          "realize: buffer {} is read but no tensor being realized holds its storage", slot));
    return it->second;
  }

  static UOp buffer_uop(const Storage& s) {
    return tinyrw::buffer_uop(s.dtype, s.id, s.size,
                              s.device.empty() ? default_device() : s.device);
  }
  // The device a kernel runs on: its buffers' (the kernel graph holds no kernel over two devices
  // but a copy), the default one for a kernel of no buffers.
  std::string kernel_device(const std::vector<int64_t>& slots) const {
    for (int64_t slot : slots)
      if (const std::string& d = storage(slot)->device; !d.empty()) return d;
    return default_device();
  }

  // What the last realize reports of a launch (last_kernel_names and the like), recorded once it
  // has started; a custom kernel is counted but not named.
  struct LaunchRecord {
    std::string name{};
    UOp ast{};
    int64_t elements = 0;
    bool named = true;
    bool here = true;  // run by this process (with MPI, another runs its devices' launches)
  };

  // Kernel AST `sink` (compiled once per device and settings) over the storages its PARAM slots
  // stand for (slots[k]: PARAM k's), ready to queue as launch number `number` of this realize: on
  // CPU a native function and its buffers' addresses (nothing of the IR is touched when it runs),
  // on INTERP its program, run on the caller's thread.
  QueuedLaunch kernel_launch(const UOp& sink, const std::vector<int64_t>& slots, int number,
                             LaunchRecord& rec) {
    if (spec_enabled()) verify(sink, rules::spec_kernel_ast());
    const std::string device = kernel_device(slots);
    const std::string base = device_base(device);  // CPU:1 runs CPU's compiled code
    std::map<std::string, int64_t> values;
    const UOp kernel = unbound(sink, values);
    // a GPU's kernels are loaded into that GPU (CUDA:1 has modules of its own)
    auto& cache = g_compiled[compile_key(is_gpu_device(base) ? device : base)];
    bool fresh = false;
    const CompiledKernel& k = compile(kernel, device, cache, &fresh);
    rec = {.name = k.name, .ast = kernel, .elements = loop_elements(kernel)};
    if (debug_level() >= 2 && fresh)
      std::fprintf(stderr, "; kernel %s\n%s\n", k.name.c_str(),
                   k.ir.empty() ? render_program(k.program).c_str() : k.ir.c_str());
    record_stage("linearize", sink, k.program);
    const std::string label =
        fmt::format("kernel {} {} on {}: {} elements, ", number, k.name, device, rec.elements);
    if (rec.elements == 0)
      return {.queue = device, .run = timed(label, fresh ? "" : " (compiled before)", [] {})};
    return compiled_launch(k, slots, values, device, label, fresh);
  }

  // Runs a compiled CPU kernel split into `threads` calls (one per core) on its share of the cores
  // among the devices' launches running at this moment (two devices' launches at once would each
  // take every core otherwise, and crowd them). Safe on any thread: it touches no IR.
  void run_cpu(KernelFn fn, void** ptrs, int64_t threads) {
    struct Running {
      std::atomic<int64_t>& n;
      const int64_t now = ++n;
      ~Running() { --n; }
    } running{cpu_running_};
    check_kernel_result(cpu_launch(fn, ptrs, threads, std::max<int64_t>(1, threads / running.now)));
  }
  std::atomic<int64_t> cpu_running_{0};

  // A kernel loaded onto a GPU, launched over `args` with `vars`, on the GPU's queue; DEBUG>=2
  // prints the line `before` + its time on the device (events around it) + `after`. The buffers
  // outlive the launch: the realize's map holds them.
  static QueuedLaunch gpu_launch(std::shared_ptr<const GpuProgram> p, std::vector<Storage*> args,
                                 std::vector<int64_t> vars, std::string before, std::string after) {
    QueuedLaunch l{.queue = p->device};
    l.run = [p, args = std::move(args), vars = std::move(vars), before = std::move(before),
             after = std::move(after)] {
      const bool timed = debug_level() >= 2;
      const double seconds = run_gpu_program(*p, args, vars, timed);
      if (timed)
        std::fprintf(stderr, "%s%.1f us%s\n", before.c_str(), seconds * 1e6, after.c_str());
    };
    return l;
  }

  // Kernel AST `sink` with its variables unbound (rules/schedule.rw's unbind_variables) and
  // the values they were bound to, by name: the kernels every device runs with its own
  // _device_num (rules/multi.rw) are one compiled kernel.
  static UOp unbound(const UOp& sink, std::map<std::string, int64_t>& values) {
    for (const UOp& u : toposort(sink))
      if (u.op() == Op::Bind) {
        const std::string name = u.src(0).arg().items()[0].as_string();
        const auto v = static_cast<int64_t>(u.src(1).arg().as_int());
        if (const auto [it, fresh] = values.emplace(name, v); !fresh && it->second != v)
          throw std::logic_error(
              fmt::format("realize: a kernel binds {} to both {} and {}", name, it->second, v));
      }
    if (values.empty()) return sink;
    return graph_rewrite(sink, &rules::unbind_variables(), {.name = "unbind variables"});
  }

  // `run`, printing at DEBUG>=2 the line `before` + its time + `after` once it has run.
  static std::function<void()> timed(std::string before, std::string after,
                                     std::function<void()> run) {
    if (debug_level() < 2) return run;
    return [before = std::move(before), after = std::move(after), run = std::move(run)] {
      const auto t0 = std::chrono::steady_clock::now();
      run();
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      std::fprintf(stderr, "%s%.1f us%s\n", before.c_str(), us, after.c_str());
    };
  }

  // A compiled kernel: its PARAMs bound to placeholder buffers (slot k for PARAM k), linearized,
  // and on CPU rendered and compiled by LLVM.
  struct CompiledKernel {
    std::string name{};
    UOp program{};  // the LINEAR program (INTERP runs it)
    // CPU: compiling on its own thread (cpu_compile_async) while the next kernel is lowered;
    // a realize waits for all of its kernels' before the first launch (compile errors first)
    std::shared_future<KernelFn> fn{};
    std::string ir{};  // CPU: the LLVM IR
    // CPU: the PARAM slot of each argument after the unused 0th, then the variables' names
    std::vector<int64_t> input_slots{};
    std::vector<std::string> variables{};
    int64_t threads = 1;                      // CPU: the calls a launch makes, one per core_id
    std::shared_ptr<const GpuProgram> gpu{};  // CUDA, HIP: loaded onto the device
  };
  // Identical kernel ASTs compile once per device and codegen settings (linearize, render, LLVM).
  static inline std::map<std::string, std::unordered_map<UOp, CompiledKernel>> g_compiled;
  // The device and the settings that change what the late stages make of a kernel AST (the
  // thread count the heuristics split kernels for among them).
  static std::string compile_key(const std::string& device) {
    std::string key =
        device + (noopt() ? ",NOOPT" : "") + fmt::format(",threads={}", cpu_threads());
    for (const char* setting : {"TRANSCENDENTAL", "DISABLE_FAST_IDIV", "BEAM", "INTERP_TARGET"})
      if (const char* v = std::getenv(setting)) key += fmt::format(",{}={}", setting, v);
    return key;
  }

  using CompileCache = std::unordered_map<UOp, CompiledKernel>;
  // (`on`: the canonical device, whose base picks the target)
  // `aliased`: the PARAMs' buffers where two PARAMs are one buffer (a custom kernel given one
  // storage twice); the kernel is then kept under its bound form. `fresh`: whether it compiled now.
  const CompiledKernel& compile(const UOp& sink, const std::string& on, CompileCache& cache,
                                bool* fresh = nullptr, const std::vector<UOp>& aliased = {}) {
    UOp bound = aliased.empty() ? UOp() : bind_kernel(sink, aliased);
    const UOp& key = aliased.empty() ? sink : bound;
    if (fresh) *fresh = !cache.contains(key);
    if (auto it = cache.find(key); it != cache.end()) {
      // (a kernel whose compile failed keeps its error: this realize throws it before it runs)
      if (it->second.fn.valid()) compiling_.push_back(it->second.fn);
      return it->second;
    }
    const std::string device = device_base(on);
    if (aliased.empty()) bound = bind_kernel(sink, param_buffers(sink));
    CompiledKernel k{.name = KernelInfo::of(sink).name};
    // BEAM=N: the opts a search times on the device, for a kernel that names none
    if (const int64_t width = beam_width(sink); width > 0 && !KernelInfo::of(sink).opts_to_apply)
      bound = with_opts(bound, beam_opts(bound, on, width));
    // a kernel that names no opts gets the hand-coded ones (none under NOOPT=1, as tinygrad's);
    // it is named by its ranges after them, as tinygrad's
    k.program = lower(bound, KernelInfo::of(sink).name, device, !noopt(), &k.name);
    if (gpu_compile_check_enabled()) check_gpu_compiles(bound, k.name);
    if (device == "CPU") {
      const RenderedKernel r = render_llvm(k.program);
      k.fn = cpu_compile_async(r.ir);
      compiling_.push_back(k.fn);
      k.ir = r.ir;
      k.input_slots = r.input_slots;
      k.variables = r.variables;
      k.threads = r.threads;
    } else if (is_gpu_device(device)) {
      k.gpu = std::make_shared<const GpuProgram>(load_gpu_program(k.program, k.name, on));
      k.ir = k.gpu->ir;
    }
    ++g_compile_count;
    return cache.emplace(key, std::move(k)).first->second;
  }

  // A compiled kernel's launch over the storages `slots` (its PARAM k is slots[k]), its
  // variables at `values`; DEBUG=2 prints `label` with its time.
  QueuedLaunch compiled_launch(const CompiledKernel& k, const std::vector<int64_t>& slots,
                               const std::map<std::string, int64_t>& values,
                               const std::string& device, const std::string& label, bool fresh) {
    const char* again = fresh ? "" : " (compiled before)";
    QueuedLaunch l{.queue = device};
    if (k.gpu) {
      std::vector<Storage*> args;
      for (int64_t p : k.gpu->input_slots) args.push_back(storage(slots.at(p)).get());
      std::vector<int64_t> vars;
      for (const std::string& v : k.gpu->variables) vars.push_back(values.at(v));
      return gpu_launch(k.gpu, args, vars, label, again);
    } else if (k.fn.valid()) {
      std::vector<void*> ptrs{nullptr};  // argument 0 (an output of its own) is unused
      for (int64_t p : k.input_slots) ptrs.push_back(storage(slots.at(p))->bytes.data());
      // the variables' values follow the buffers, each behind a pointer (runtime/llvm_render.h)
      std::vector<int64_t> vars;
      for (const std::string& v : k.variables) vars.push_back(values.at(v));
      l.run = [this, fn = k.fn, ptrs, vars, threads = k.threads]() mutable {
        const size_t first = ptrs.size();
        ptrs.resize(first + vars.size());
        for (size_t j = 0; j < vars.size(); ++j) ptrs[first + j] = &vars[j];
        run_cpu(fn.get(), ptrs.data(), threads);
        ptrs.resize(first);
      };
    } else {
      std::map<int64_t, std::shared_ptr<Storage>> bound;
      for (size_t p = 0; p < slots.size(); ++p) bound.emplace(p, storage(slots[p]));
      l.on_caller = true;
      l.run = [program = k.program, bound, values] { interp_run(program, bound, values); };
    }
    l.run = timed(label, again, std::move(l.run));
    return l;
  }

  // BEAM's width: the kernel's own (KernelInfo.beam), else $BEAM, else 0 (no search).
  static int64_t beam_width(const UOp& sink) {
    if (const int64_t own = KernelInfo::of(sink).beam; own > 0) return own;
    return env_int("BEAM", 0);
  }

  // The opts BEAM finds for a bound kernel on device `on` (codegen/search.h): each candidate is
  // lowered, compiled and run over scratch buffers of the kernel's sizes (zeros: a division by
  // zero it meets is not an error here), timed as the best of 3 runs (on a GPU by events around
  // the kernel).
  static std::vector<Opt> beam_opts(const UOp& bound, const std::string& on, int64_t width) {
    const std::string device = device_base(on);
    const Target& target = Target::of(device);
    const UOp base = convert_loop_to_global(simplify_ranges(bound), target);
    std::map<int64_t, std::shared_ptr<Storage>> scratch;
    for (const UOp& u : toposort(bound))
      if (u.op() == Op::Buffer && !is_register(u)) {
        const auto slot = static_cast<int64_t>(u.arg().field("slot").as_int());
        const auto n = static_cast<int64_t>(u.arg().field("size").as_int());
        auto st = std::make_shared<Storage>(Storage{
            slot, u.dtype(), n, BufferBytes(static_cast<size_t>(n * u.dtype().itemsize()))});
        st->device = on;
        scratch.emplace(slot, std::move(st));
      }
    // a variable (a device's _device_num) at its least value
    std::map<std::string, int64_t> least;
    for (const UOp& u : toposort(bound))
      if (u.op() == Op::DefineVar)
        least[u.arg().items()[0].as_string()] = static_cast<int64_t>(u.arg().items()[1].as_int());
    // each candidate lowered (and on CPU rendered) once, for render and time both
    struct Lowered {
      UOp program;
      RenderedKernel cpu;
    };
    std::unordered_map<std::string, std::optional<Lowered>> lowered;
    auto lower_opts = [&](const std::vector<Opt>& opts) -> const std::optional<Lowered>& {
      std::string key;
      for (const Opt& o : opts) key += opt_repr(o) + ";";
      auto [it, fresh] = lowered.try_emplace(key);
      if (fresh) try {
          Lowered l{.program = linearize_kernel(with_opts(bound, opts), target), .cpu = {}};
          if (device == "CPU") l.cpu = render_llvm(l.program);
          it->second = std::move(l);
        } catch (const std::exception&) {  // a candidate that does not lower is not timed
        }
      return it->second;
    };
    const KernelRenderer render = [&](const std::vector<Opt>& opts) -> std::optional<std::string> {
      const std::optional<Lowered>& l = lower_opts(opts);
      if (!l) return std::nullopt;
      return device == "CPU" ? l->cpu.ir : render_program(l->program);
    };
    const KernelTimer time = [&](const std::vector<Opt>& opts,
                                 double give_up) -> std::optional<double> {
      const std::optional<Lowered>& l = lower_opts(opts);
      if (!l) return std::nullopt;
      std::function<double()> run;  // the kernel's time when it measures it, else 0
      if (is_gpu_device(device)) {
        std::shared_ptr<const GpuProgram> p;
        try {
          p = std::make_shared<const GpuProgram>(load_gpu_program(l->program, "beam", on));
        } catch (const TensorError&) {  // what the device refuses to load is not timed
          return std::nullopt;
        } catch (const std::runtime_error&) {  // nor what does not compile for it
          return std::nullopt;
        }
        std::vector<Storage*> args;
        for (int64_t slot : p->input_slots) args.push_back(scratch.at(slot).get());
        std::vector<int64_t> vars;
        for (const std::string& v : p->variables) vars.push_back(least.at(v));
        run = [p, args, vars] { return run_gpu_program(*p, args, vars, /*timed=*/true); };
      } else if (device == "CPU") {
        KernelFn fn = nullptr;
        try {
          fn = cpu_compile(l->cpu.ir);
        } catch (const std::exception&) {
          return std::nullopt;
        }
        auto ptrs = std::make_shared<std::vector<void*>>(1, nullptr);
        for (int64_t slot : l->cpu.input_slots) ptrs->push_back(scratch.at(slot)->bytes.data());
        for (const std::string& v : l->cpu.variables) ptrs->push_back(&least.at(v));
        run = [fn, ptrs, threads = l->cpu.threads] {
          (void)cpu_launch(fn, ptrs->data(), threads);
          return 0.0;
        };
      } else {
        run = [&, p = l->program] {
          interp_run(p, scratch, least);
          return 0.0;
        };
      }
      double best = std::numeric_limits<double>::infinity();
      for (int k = 0; k < 3; ++k) {
        const auto t0 = std::chrono::steady_clock::now();
        double measured = 0;
        try {
          measured = run();
        } catch (const std::runtime_error&) {  // INTERP's division by zero over the zeros
        } catch (const KernelError&) {         // a GPU's
        } catch (const TensorError&) {         // a launch the GPU refuses (too many threads...)
          return std::nullopt;
        }
        const double wall =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        best = std::min(best, measured > 0 ? measured : wall);
        if (best > give_up) break;
      }
      return best;
    };
    const std::vector<Opt> start = noopt() ? std::vector<Opt>{} : hand_coded_opts(base, target);
    // (timings on one GPU model are not another's)
    const BeamResult r = beam_search(
        base, target, static_cast<int>(width), render, time, start,
        compile_key(device) + (is_gpu_device(device) ? ",arch=" + gpu_runtime(on).arch() : ""));
    if (debug_level() >= 1)
      std::fprintf(
          stderr, "BEAM=%lld %s: %s%s\n", static_cast<long long>(width),
          KernelInfo::of(bound).name.c_str(), r.cached ? "cached " : "",
          r.cached ? ""
          : r.timed == 0
              ? "nothing to time (no loop to optimize)"
              : fmt::format("{:.1f} us after {} timings", r.seconds * 1e6, r.timed).c_str());
    return r.opts;
  }

  // The late stages (codegen/linearize.h) on a bound kernel: DEBUG=5 prints the program after
  // each, SPEC=1 verifies the result.
  static UOp lower(const UOp& bound, const std::string& name, const std::string& device,
                   bool default_opts = false, std::string* optimized_name = nullptr) {
    StageTrace trace;
    if (debug_level() >= 5)
      trace = [&](const std::string& stage, const UOp& u) {
        std::fprintf(stderr, "kernel %s after %s:\n%s\n", name.c_str(), stage.c_str(),
                     render_program(u).c_str());
      };
    const UOp program =
        linearize_kernel(bound, Target::of(device), trace, default_opts, optimized_name);
    if (spec_enabled()) verify(program, rules::spec_program());
    return program;
  }

  // A COPY kernel: storage slots[1]'s bytes into slots[0]'s, another device's buffer of its size
  // (a copy of host bytes; a GPU's buffer copied in or out of its device memory,
  // runtime/gpu_runtime.h), queued on the device it copies to and named as tinygrad names a
  // transfer ("copy 16 B, CPU:1 <- CPU"). With MPI (runtime/mpi.h), a copy between two processes'
  // devices is a send on the source's process and a receive on the destination's, paired by the
  // copy's place `tag` in the schedule, each on a queue of its own (a transfer waiting for the
  // other process holds back no device); the receive is posted before anything runs when nothing
  // here must read the destination first
  // (`posted`: a buffer new in this schedule).
  QueuedLaunch transfer_launch(const UOp& copy, const std::vector<int64_t>& slots, int number,
                               int tag, bool posted, LaunchRecord& rec) {
    Storage& dst = *storage(slots.at(0));
    Storage& src = *storage(slots.at(1));
    if (dst.size != src.size || dst.dtype != src.dtype)
      throw std::logic_error(fmt::format("realize: a copy of {} {} elements into {} {} elements",
                                         src.size, src.dtype.repr(), dst.size, dst.dtype.repr()));
    const size_t nbytes = static_cast<size_t>(src.size) * static_cast<size_t>(src.dtype.itemsize());
    rec = {.name = fmt::format("copy {:>10}, {:>7} <- {:7}", bytes_repr(nbytes),
                               dst.device.substr(0, 7), src.device.substr(0, 7)),
           .ast = copy,
           .elements = dst.size};
    const std::string to = kernel_device({slots.at(0)}), from = kernel_device({slots.at(1)});
    const bool to_here = mpi::is_local(to), from_here = mpi::is_local(from);
    if (to_here != from_here && tag > mpi::world().max_tag)
      throw TensorError(fmt::format(
          "a copy between MPI ranks at place {} of a schedule: beyond MPI's largest tag {}", tag,
          mpi::world().max_tag));
    // a GPU that cannot open says why, before anything runs
    for (const std::string& d : {to, from})
      if (is_gpu_device(d) && mpi::is_local(d)) (void)gpu_runtime(d);
    QueuedLaunch l{.queue = to};
    if (to_here && from_here) {
      l.run = [to = &dst, from = &src] { copy_contents(*to, *from); };
    } else if (from_here) {
      l.queue = "MPI send";
      l.run = [from = &src, nbytes, peer = mpi::owner(to), tag] {
        make_host_current(*from);
        mpi::send(from->bytes.data(), nbytes, peer, tag);
      };
    } else if (to_here) {
      l.queue = "MPI receive";
      const int peer = mpi::owner(from);
      if (posted) {
        auto receive = std::make_shared<mpi::PostedReceive>(dst.bytes.data(), nbytes, peer, tag);
        l.run = [receive, to = &dst] {
          receive->wait();
          written_on_host(*to);
        };
      } else {
        l.run = [to = &dst, nbytes, peer, tag] {
          mpi::receive(to->bytes.data(), nbytes, peer, tag);
          written_on_host(*to);
        };
      }
    } else {  // between two other processes
      return run_elsewhere(to, rec);
    }
    l.run = timed(fmt::format("kernel {} {}: ", number, rec.name), "", std::move(l.run));
    return l;
  }
  // A launch another process runs (MPI: on a device it owns): nothing here, and not counted as
  // this process's; its place in the schedule stays, so the launches after it wait as elsewhere.
  static QueuedLaunch run_elsewhere(const std::string& device, LaunchRecord& rec) {
    rec.here = false;
    return {.queue = device, .on_caller = true, .run = [] {}};
  }
  // A byte count as tinygrad prints it: "16 B", "1.50 KB", "2.00 MB", "1.00 GB".
  static std::string bytes_repr(size_t n) {
    constexpr std::pair<size_t, const char*> kUnits[] = {
        {size_t{1} << 30, "GB"}, {size_t{1} << 20, "MB"}, {size_t{1} << 10, "KB"}};
    for (const auto& [unit, name] : kUnits)
      if (n >= unit) return fmt::format("{:.2f} {}", static_cast<double>(n) / unit, name);
    return fmt::format("{} B", n);
  }

  // A kernel CALL's body bound to buffers of its arguments' sizes, linearized and (on CPU)
  // rendered: every refusal (an access out of bounds, an unindexed parameter, an effect that is
  // none, a loop bound CPU cannot compile) happens before the schedule runs anything.
  static void check_kernel_call(const UOp& call) {
    // (on its arguments' device; the kernel graph holds no kernel over two)
    const Arg on = call.nsrc() > 1 ? storage_root(call.src(1)).device() : Arg();
    const std::string base = device_base(on.is_string() ? on.as_string() : default_device());
    std::vector<UOp> bufs;
    for (size_t a = 1; a < call.nsrc(); ++a) {
      int64_t n = 1;
      for (const SInt& d : call.src(a).shape()) n *= d.value();
      const int64_t slot = -static_cast<int64_t>(a);  // placeholders, never run
      bufs.push_back(UOp::make(
          Op::Buffer, call.src(a).dtype(), {},
          Arg::record("ParamArg", {{"slot", Arg::integer(slot)}, {"size", Arg::integer(n)}})));
    }
    const UOp& body = call.src(0).op() == Op::Program ? call.src(0).src(0) : call.src(0);
    const UOp bound = bind_kernel(body, bufs);
    // (a kernel called again with arguments of the same sizes was checked at its first call)
    static std::map<std::string, std::unordered_set<UOp>> checked;
    if (checked[base].contains(bound)) return;
    const UOp program = linearize_kernel(bound, Target::of(base));
    if (base == "CPU") render_llvm(program);
    if (is_gpu_device(base))
      render_llvm(program, base == "CUDA" ? LlvmTarget::Nvptx : LlvmTarget::Amdgpu);
    checked[base].insert(bound);
  }

  // A kernel CALL (custom_kernel): its body over the storages `slots` of its arguments, in place,
  // ready to queue: on CPU compiled by LLVM, on a GPU compiled and loaded onto it, on INTERP its
  // LINEAR program run on the caller's thread.
  QueuedLaunch custom_launch(const UOp& call, const std::vector<int64_t>& slots, int number,
                             LaunchRecord& rec) {
    // a PROGRAM body runs from the SINK it was compiled from
    const UOp& body = call.src(0).op() == Op::Program ? call.src(0).src(0) : call.src(0);
    const std::string name = CallInfo::of(call).name;
    const std::string device = kernel_device(slots);
    const std::string base = device_base(device);
    // The body (over PARAMs) is compiled once, as a schedule's kernels are, and later calls
    // reuse it. A storage passed twice binds its PARAMs to one buffer (at the first one's
    // position), and the kernel is compiled for that aliasing.
    std::vector<UOp> aliased;
    if (std::set<int64_t>(slots.begin(), slots.end()).size() != slots.size()) {
      for (int64_t slot : slots) {
        const auto first = std::find(slots.begin(), slots.end(), slot) - slots.begin();
        const Storage& s = *storage(slot);
        aliased.push_back(UOp::make(Op::Buffer, s.dtype, {},
                                    Arg::record("ParamArg", {{"slot", Arg::integer(first)},
                                                             {"size", Arg::integer(s.size)}})));
      }
    }
    CompileCache& cache = g_compiled[compile_key(is_gpu_device(base) ? device : base)];
    bool fresh = false;
    const CompiledKernel& k = compile(body, device, cache, &fresh, aliased);
    if ((k.gpu && !k.gpu->variables.empty()) || !k.variables.empty())
      throw TensorError(
          fmt::format("custom kernel {} on {}: a kernel with variables ({}) is not supported", name,
                      device, fmt::join(k.gpu ? k.gpu->variables : k.variables, ", ")));
    if (debug_level() >= 2 && fresh)
      std::fprintf(stderr, "custom kernel %s\n%s\n", name.c_str(),
                   k.ir.empty() ? render_program(k.program).c_str() : k.ir.c_str());
    record_stage("linearize", call.src(0), k.program);
    rec = {.name = name, .ast = call.src(0), .elements = 0, .named = false};
    return compiled_launch(k, slots, {}, device,
                           fmt::format("kernel {} custom {} on {}: ", number, name, device), fresh);
  }

  // A CPU kernel's return value: 0, or the division by zero it met (it ran to its end with a
  // substitute divisor; what it wrote is discarded by the caller).
  static void check_kernel_result(int32_t code) {
    if (code == 0) return;
    if (const std::optional<Op> op = kernel_error_op(code)) throw division_by_zero("CPU", *op);
    throw std::logic_error(fmt::format("CPU: a kernel returned the unknown error code {}", code));
  }

  // `run`, which writes the storages `slots` in place; when `graph` may raise (an integer
  // division or modulo whose divisor is not a constant, or is 0: kernel_may_raise) their contents
  // are saved first and put back if it does, so that a failed kernel leaves no half-written buffer
  // a user could read. (Put back in place: the queued launches hold the buffers' addresses. A GPU's
  // buffer is saved from its host bytes made current, and put back there.)
  std::function<void()> restoring_on_error(const UOp& graph, const std::vector<int64_t>& slots,
                                           std::function<void()> run) const {
    if (!kernel_may_raise(graph)) return run;
    std::vector<std::shared_ptr<Storage>> written;
    for (int64_t slot : slots) written.push_back(storage(slot));
    return [written, run = std::move(run)] {
      std::vector<BufferBytes> saved;
      for (const std::shared_ptr<Storage>& st : written) {
        make_host_current(*st);
        saved.push_back(st->bytes);
      }
      try {
        run();
      } catch (...) {
        for (size_t i = 0; i < written.size(); ++i) {
          std::copy(saved[i].begin(), saved[i].end(), written[i]->bytes.begin());
          written_on_host(*written[i]);
        }
        throw;
      }
    };
  }

  // The elements [lo, hi] of a buffer an access may touch (flat indices; the whole buffer unless
  // its indexes bound it): a read and a write of disjoint regions do not conflict.
  struct Region {
    int64_t lo = 0, hi = std::numeric_limits<int64_t>::max();
    bool overlaps(const Region& o) const { return lo <= o.hi && o.lo <= hi; }
    // (an empty region, lo > hi, grows to o)
    void cover(const Region& o) {
      *this = lo > hi ? o : Region{std::min(lo, o.lo), std::max(hi, o.hi)};
    }
  };
  struct Read {
    int64_t slot;
    std::vector<UOp> seen;  // the kernel CALLs whose writes it must see
    Region region;
  };
  // One unit of the schedule: a kernel CALL of the kernel graph (a computation, an assignment's
  // store, or a custom kernel), its arguments' storages (a new buffer's negative slot until it
  // runs), what it writes and reads, and the units that must run first.
  struct Unit {
    UOp call{};
    std::vector<int64_t> args{};          // the storage of each argument (PARAM k: args[k])
    std::vector<int64_t> writes{};        // argument indexes it writes
    std::vector<Region> write_regions{};  // the part of each it writes
    std::vector<size_t> after{};          // units that must run first
    std::vector<Read> reads{};
    bool custom = false;  // a custom kernel (its own AST), not one the pipeline made
  };

  // The slot a kernel graph argument stands for (a BUFFER's, under views and AFTERs).
  static int64_t arg_slot(const UOp& arg) {
    const UOp b = storage_root(arg);
    if (b.op() != Op::Buffer)
      throw std::logic_error(
          fmt::format("realize: a kernel argument that is no buffer: {}", op_name(b.op())));
    return static_cast<int64_t>(b.arg().field("slot").as_int());
  }
  // The elements an index may address: its bounds, the whole buffer for a gated one.
  static Region index_region(const UOp& index) {
    if (index.nsrc() != 2 || is_gated_index(index.src(1))) return Region{};
    const UOp& i = index.src(1);
    constexpr i128 kMax = std::numeric_limits<int64_t>::max();
    return Region{static_cast<int64_t>(std::clamp<i128>(i.vmin().i, 0, kMax)),
                  static_cast<int64_t>(std::clamp<i128>(i.vmax().i, 0, kMax))};
  }

  // The unit of kernel CALL `call`: its arguments' slots, its writes (a generated kernel's
  // STOREs; a custom kernel's by call_access, checked to compile before anything runs), and a
  // read of every argument at its assignment state (ordered after the kernels that state follows).
  Unit make_unit(const UOp& call, const std::unordered_map<UOp, size_t>& unit_of,
                 const std::unordered_set<UOp>& custom_bodies) {
    Unit k{.call = call};
    const UOp& body = call.src(0).op() == Op::Program ? call.src(0).src(0) : call.src(0);
    k.custom = custom_bodies.contains(call.src(0));
    for (size_t a = 1; a < call.nsrc(); ++a) k.args.push_back(arg_slot(call.src(a)));
    std::vector<Region> touched(k.args.size(), Region{0, -1});
    if (k.custom) {
      check_kernel_call(call);
      for (size_t w : call_access(call).writes) {
        k.writes.push_back(static_cast<int64_t>(w));
        k.write_regions.push_back(Region{});
      }
      touched.assign(k.args.size(), Region{});
    } else if (body.op() == Op::Copy) {  // a transfer: all of argument 1 into argument 0
      k.writes.push_back(0);
      k.write_regions.push_back(Region{});
      touched.assign(k.args.size(), Region{});
    } else {
      for (const UOp& u : toposort(body)) {
        if (u.op() == Op::Index && u.src(0).op() == Op::Param) {
          const auto p = static_cast<size_t>(u.src(0).arg().field("slot").as_int());
          touched.at(p).cover(index_region(u));
        }
        if (u.op() != Op::Store) continue;
        const UOp& target = u.src(0);
        if (is_gated_index(target.src(1)))
          throw TensorError(
              "cannot assign through this view: its elements do not map one to one onto the "
              "target buffer");
        const auto p = static_cast<int64_t>(target.src(0).arg().field("slot").as_int());
        k.writes.push_back(p);
        k.write_regions.push_back(index_region(target));
      }
    }
    for (size_t a = 1; a < call.nsrc(); ++a) {
      // (the kernel graph orders a buffer after kernel CALLs only)
      const std::vector<UOp> deps = chain_stores(call.src(a));
      for (const UOp& d : deps) k.after.push_back(unit_of.at(d));
      k.reads.push_back({k.args[a - 1], deps, touched[a - 1]});
    }
    return k;
  }

  // The stores an assignment chain After(After(view, S1), S2) has applied: {S1, S2} (also
  // through movement ops: a view of a chain has applied the chain's stores).
  static std::vector<UOp> chain_stores(UOp u) {
    std::vector<UOp> out;
    for (; u.op() == Op::After || groups::movement().contains(u.op()); u = u.src(0))
      for (size_t i = 1; u.op() == Op::After && i < u.nsrc(); ++i) out.push_back(u.src(i));
    return out;
  }
  // The buffer view under views and assignment chains (what a STORE target writes into).
  static UOp view_root(UOp u) {
    while (u.op() == Op::After ||
           (groups::movement().contains(u.op()) && !is_buffer_view(u) && u.nsrc() > 0))
      u = u.src(0);
    return u;
  }
  static UOp base_view(const UOp& u) { return u.under(Op::After); }
  static int64_t storage_of(const UOp& view) {
    const UOp b = view.op() == Op::Reshape ? view.src(0) : view;
    if (b.op() != Op::Buffer) throw TensorError("an assignment target must be a realized buffer");
    return static_cast<int64_t>(b.arg().find_field("slot")->as_int());
  }
  // An effect's identity: the number its STORE (or kernel CALL) carries; the log keeps numbers,
  // not graphs.
  static int64_t assignment_id(const UOp& effect) {
    return effect.op() == Op::Call ? CallInfo::of(effect).id
                                   : static_cast<int64_t>(effect.arg().as_int());
  }
  // The storages an effect writes: an assignment's target, the arguments a kernel CALL writes
  // (from its LOAD/STORE operands; an opaque body is refused here, before anything runs).
  // (computed once per effect and realize: a kernel CALL's costs an access analysis)
  const std::vector<int64_t>& written_storages(const UOp& effect) {
    auto it = written_.find(effect);
    if (it == written_.end()) it = written_.emplace(effect, find_written_storages(effect)).first;
    return it->second;
  }
  std::unordered_map<UOp, std::vector<int64_t>> written_;
  static std::vector<int64_t> find_written_storages(const UOp& effect) {
    if (effect.op() == Op::Store) {
      const UOp target = view_root(effect.src(0));
      if (!is_buffer_view(target))
        throw TensorError("an assignment target must be a realized buffer or a view of one");
      return {storage_of(target)};
    }
    std::vector<int64_t> out;
    for (size_t w : call_access(effect).writes) {
      const UOp target = base_view(effect.src(w + 1));
      if (!is_buffer_view(target))
        throw TensorError(fmt::format(
            "custom kernel '{}' writes argument {}, which is not a realized buffer (realize it "
            "first)",
            CallInfo::of(effect).name, w));
      out.push_back(storage_of(target));
    }
    return out;
  }
  static std::unordered_set<int64_t> read_storages(const UOp& value) {
    std::unordered_set<int64_t> out;
    for (const UOp& u : toposort(value, nullptr, /*enter_calls=*/false))
      if (u.op() == Op::Buffer) out.insert(static_cast<int64_t>(u.arg().field("slot").as_int()));
    return out;
  }
  bool executed(const UOp& effect) {
    for (int64_t slot : written_storages(effect)) {
      const auto& log = storage(slot)->executed_assignments;
      if (std::find(log.begin(), log.end(), assignment_id(effect)) != log.end()) return true;
    }
    return false;
  }
  static bool is_kernel_call(const UOp& u) { return u.op() == Op::Call && CallInfo::of(u).kernel; }

  // A read whose assignments have all run needs the buffer as the last of them left it: refused
  // when a later assignment, not in its chain, has already overwritten that.
  void check_not_overwritten(int64_t slot, const std::vector<UOp>& seen) const {
    const std::vector<int64_t>& log = storage(slot)->executed_assignments;
    if (seen.empty() && !log.empty())  // read as it was before any assignment
      throw TensorError(
          "cannot schedule this read: it needs a buffer's contents from before an assignment "
          "that has already run and overwritten them; realize the read before the assignment");
    std::vector<int64_t> ids;
    for (const UOp& st : seen) ids.push_back(assignment_id(st));
    size_t last = 0;
    for (int64_t id : ids) {
      auto it = std::find(log.begin(), log.end(), id);
      if (it == log.end()) return;  // part of this schedule: ordered by order_kernels
      last = std::max(last, static_cast<size_t>(it - log.begin()));
    }
    for (size_t i = last + 1; i < log.size(); ++i)
      if (std::find(ids.begin(), ids.end(), log[i]) == ids.end())
        throw TensorError(
            "cannot schedule this read: it needs a buffer's contents from before an assignment "
            "that has already run and overwritten them (a cycle with work already done); "
            "realize the read before realizing the later assignment");
  }

  // The kernels in an order that keeps every read between the writes it must and must not see:
  // a read follows the stores of its assignment chain and precedes every other store to that
  // buffer. An order that cannot do both is refused before anything runs. `waits[k]` receives the
  // kernels k must follow (what a device's queue waits for from another's).
  std::vector<size_t> order_kernels(const std::vector<Unit>& ks,
                                    std::vector<std::vector<size_t>>& waits) {
    std::vector<std::vector<size_t>> before(ks.size());  // before[a]: kernels that follow a
    std::vector<int> pending(ks.size(), 0);
    waits.assign(ks.size(), {});
    auto edge = [&](size_t a, size_t b) {
      before[a].push_back(b);
      waits[b].push_back(a);
      ++pending[b];
    };
    for (size_t k = 0; k < ks.size(); ++k) {
      for (size_t d : ks[k].after) edge(d, k);
      for (const Read& r : ks[k].reads)
        for (size_t s = 0; s < ks.size(); ++s) {
          if (s == k) continue;
          bool conflicts = false;  // s writes the part of the buffer this read needs
          for (size_t w = 0; w < ks[s].writes.size(); ++w)
            conflicts |= ks[s].args[static_cast<size_t>(ks[s].writes[w])] == r.slot &&
                         ks[s].write_regions[w].overlaps(r.region);
          if (conflicts && std::find(r.seen.begin(), r.seen.end(), ks[s].call) == r.seen.end())
            edge(k, s);
        }
    }
    std::vector<size_t> ready, out;
    for (size_t k = ks.size(); k-- > 0;)
      if (pending[k] == 0) ready.push_back(k);
    while (!ready.empty()) {
      const size_t k = ready.back();
      ready.pop_back();
      out.push_back(k);
      for (size_t n : before[k])
        if (--pending[n] == 0) ready.push_back(n);
    }
    if (out.size() != ks.size()) {
      std::string stuck;
      for (size_t k = 0; k < ks.size(); ++k)
        if (pending[k] > 0)
          stuck += fmt::format("{}{}", stuck.empty() ? "" : ", ", CallInfo::of(ks[k].call).name);
      throw TensorError(fmt::format(
          "cannot schedule these assignments: their reads and writes form a cycle (kernels "
          "{}); a read would see a buffer that another assignment must already have "
          "overwritten. Realize the read before the conflicting assignment.",
          stuck));
    }
    return out;
  }

  // The STORE's value reads the target's buffer only through the target view itself, and only
  // by elementwise ops: each element is read in the same loop step that then writes it, so the
  // store writes in place with no temporary (tinygrad's in-place assign: `xs.assign(xs + 1)` is
  // one kernel). A read through another view, a movement op or a CONTIGUOUS over the target
  // reads elements other than the one written (a hazard: the value is computed first).
  bool reads_in_place(const UOp& store) {
    if (auto it = in_place_.find(store); it != in_place_.end()) return it->second;
    const UOp& target = store.src(0);
    const int64_t own = storage_of(view_root(target));
    std::vector<UOp> stack{store.src(1)};
    std::unordered_set<UOp> seen;
    bool in_place = true;
    while (in_place && !stack.empty()) {
      const UOp u = stack.back();
      stack.pop_back();
      if (u == target || !seen.insert(u).second) continue;
      if (groups::elementwise().contains(u.op()))
        stack.insert(stack.end(), u.src().begin(), u.src().end());
      else
        in_place = !read_storages(u).contains(own);
    }
    return in_place_[store] = in_place;
  }
  std::unordered_map<UOp, bool> in_place_;

  // A root that views a computed value (movement ops over it) realizes the value, and the root
  // is that view of its buffer (tinygrad realizes the bases): roots over one value share its
  // kernel, an expand of it stores no repeats, a pad no zeros and a transpose keeps the value's
  // layout. Unlike tinygrad a SHRINK is realized itself: its value's other elements are asked for
  // by no one (a gradient's shrink of a padded scan would compute the padding). A constant is
  // realized in the root's shape (a tensor of zeros is a buffer to assign into), as is a root over
  // a buffer (its view is the root itself).
  static UOp root_base(const UOp& r) {
    UOp b = r;
    while (groups::movement().contains(b.op()) && b.op() != Op::Shrink && !is_buffer_state(b))
      b = b.src(0);
    if (is_buffer_state(b)) return r;
    if (b.op() != Op::Const) return b;
    for (b = r; b.op() == Op::Reshape;) b = b.src(0);
    return b;
  }
  static std::vector<UOp> root_bases(const std::vector<UOp>& tensor_roots) {
    std::vector<UOp> bases;
    for (const UOp& r : tensor_roots) bases.push_back(root_base(r));
    return bases;
  }

  // The facts the realize map decides by (rules/helpers/schedule.h), over the graph after the
  // earliest rewrites: analyses of the whole schedule, not rewrites. Every effect in it is
  // pending (the executed ones were dropped). `custom_bodies` receives the custom kernels' bodies.
  rw::ScheduleContext schedule_facts(const UOp& sink, std::unordered_set<UOp>& custom_bodies) {
    rw::ScheduleContext facts;
    facts.max_fused_depth = kMaxFusedDepth;
    std::vector<UOp> stores;
    std::vector<int64_t> store_slots;          // the buffer each writes
    std::unordered_map<int64_t, int> writers;  // pending assignments per buffer
    for (const UOp& u : toposort(sink, nullptr, /*enter_calls=*/false)) {
      if (u.op() == Op::Call && !is_kernel_call(u))
        throw std::logic_error("realize: a function CALL was left after inlining");
      if (u.op() == Op::Call) custom_bodies.insert(u.src(0));
      if (u.op() != Op::Store) continue;
      stores.push_back(u);
      store_slots.push_back(storage_of(view_root(u.src(0))));
      ++writers[store_slots.back()];
    }
    // an assignment's value that reads a buffer another assignment of this schedule writes, or
    // its own target other than element by element: computed into a buffer first, so all its
    // reads happen before any of those writes (slices of one buffer assigned from themselves
    // order as all reads, then all writes); `xs.assign(xs + 1)` writes in place
    for (size_t k = 0; k < stores.size(); ++k) {
      const UOp& st = stores[k];
      const int64_t own = store_slots[k];
      for (int64_t slot : read_storages(st.src(1)))
        if (writers[slot] - (slot == own ? 1 : 0) > 0 || (slot == own && !reads_in_place(st)))
          facts.hazards.insert(st.src(1));
    }
    // a tensor asked for that is a buffer at an earlier state than an assignment of this schedule
    // leaves it (a read made before the assignment): copied before that runs
    for (const UOp& root : sink.src()) {
      const UOp base = view_root(root);
      if (base.op() != Op::Buffer && !is_buffer_view(base)) continue;
      const std::vector<UOp> seen = chain_stores(root);
      const int64_t slot = storage_of(base);
      for (size_t k = 0; k < stores.size(); ++k)
        if (store_slots[k] == slot && std::find(seen.begin(), seen.end(), stores[k]) == seen.end())
          facts.hazards.insert(root);
    }
    // the views an assignment writes through stay views of its buffer
    for (const UOp& st : stores)
      for (UOp v = st.src(0); v.op() == Op::After || groups::movement().contains(v.op());
           v = v.src(0))
        if (!facts.pinned.insert(v).second) break;
    return facts;
  }

  // The graph a schedule starts from: the tensors' roots verified at SPEC=1, function CALLs
  // inlined (rules/call.rw; kernel CALLs stay, as units of the schedule), and what each root
  // realizes (root_bases: a view a function returns, conv2d's reshape of its sum, is a view too).
  struct Roots {
    std::vector<UOp> inlined;  // the roots, calls inlined
    std::vector<UOp> bases;    // what each realizes: the schedule's sink holds these
  };
  static Roots schedule_roots(const std::vector<UOp>& tensor_roots) {
    if (spec_enabled())
      for (const UOp& r : tensor_roots)
        verify_with_calls(r, rules::spec_tensor(), rules::spec_kernel_body());
    const UOp inlined = inline_calls(UOp::sink(tensor_roots));
    std::vector<UOp> roots(inlined.src().begin(), inlined.src().end());
    std::vector<UOp> bases = root_bases(roots);
    return {std::move(roots), std::move(bases)};
  }

  // Every read of a buffer in `sink` checked against the assignments that ran
  // (check_not_overwritten: a read made before an assignment that has overwritten what it needs is
  // refused), and the links of assignment chains that ran dropped: what is left to schedule.
  UOp without_executed(const UOp& sink) {
    auto ran = [this](const UOp& u) {
      return (u.op() == Op::Store || is_kernel_call(u)) && executed(u);
    };
    rw::ScheduleContext ran_effects;  // (for rules/schedule.rw's drop_executed)
    std::unordered_set<UOp> seen;
    std::vector<UOp> stack(sink.src().begin(), sink.src().end());
    while (!stack.empty()) {
      const UOp u = stack.back();
      stack.pop_back();
      if (!seen.insert(u).second) continue;
      if (ran(u)) {
        ran_effects.executed.insert(u);
        continue;
      }
      if (u.op() == Op::After && is_buffer_view(view_root(u))) {  // a buffer at a state
        const std::vector<UOp> stores = chain_stores(u);
        check_not_overwritten(storage_of(view_root(u)), stores);
        stack.insert(stack.end(), stores.begin(), stores.end());
        continue;
      }
      if (u.op() == Op::Buffer) check_not_overwritten(storage_of(u), {});
      // (a kernel CALL's body has parameters only: its arguments are what it reads)
      stack.insert(stack.end(), u.src().begin() + (is_kernel_call(u) ? 1 : 0), u.src().end());
    }
    if (ran_effects.executed.empty()) return sink;
    return graph_rewrite(
        sink, &rules::drop_executed(),
        {.ctx = &ran_effects, .bottom_up = true, .enter_calls = false, .name = "drop executed"});
  }

  // The kernel graph of a schedule (schedule/rangeify.h) and its units in the order they run.
  struct Schedule {
    UOp graph{};  // SINK(root i's buffer after the kernel that fills it, or the buffer view it is)
    std::vector<Unit> units{};
    std::vector<size_t> order{};
    std::vector<std::vector<size_t>> waits{};  // waits[k]: the units unit k must follow
  };
  Schedule make_schedule(const Roots& r) {
    const UOp unexecuted = without_executed(UOp::sink(r.bases));
    std::unordered_set<UOp> custom_bodies;
    // the key is made once: looked up here, stored below on a miss
    const std::optional<ScheduleKey> key =
        env_int("SCACHE", 1) != 0 ? ScheduleKey::of(unexecuted) : std::nullopt;
    Schedule s{.graph = key ? cached_kernel_graph(*key) : UOp()};
    g_schedule_cached = static_cast<bool>(s.graph);
    if (!s.graph) {
      const UOp sink = earliest_rewrites(unexecuted);
      rw::ScheduleContext facts = schedule_facts(sink, custom_bodies);
      // (rules/rangeify.rw's copy_stale_roots: such a root is read through a copy)
      RewriteContext rctx{.user = &facts};
      const std::optional<rw::Value> copied = rules::copy_stale_roots().apply(sink, rctx, nullptr);
      KernelGraph g = with_realize_map(copied ? copied->as_uop() : sink, facts);
      g.ctx.device = default_device();
      s.graph = kernel_graph(g);
      if (spec_enabled()) verify(s.graph, rules::spec_kernel_graph(), /*enter_calls=*/false);
      if (key && custom_bodies.empty()) cache_kernel_graph(*key, s.graph);
    }
    std::unordered_map<UOp, size_t> unit_of;
    for (const UOp& u : toposort(s.graph, nullptr, /*enter_calls=*/false))
      if (u.op() == Op::Call) {
        unit_of.emplace(u, s.units.size());
        s.units.push_back(make_unit(u, unit_of, custom_bodies));
      }
    s.order = order_kernels(s.units, s.waits);  // throws before anything runs
    return s;
  }

  // The schedule cache's kernel graph for `key`, rebound to its buffers; nothing on a miss.
  static UOp cached_kernel_graph(const ScheduleKey& key) {
    const std::lock_guard<std::mutex> lock(g_schedule_cache_mu);
    const auto it = schedule_cache().find(key.sink);
    if (it == schedule_cache().end() || it->second.device != default_device() ||
        it->second.settings != env_signature())
      return {};
    return key.to_real(it->second.graph);
  }
  static void cache_kernel_graph(const ScheduleKey& key, const UOp& graph) {
    const std::lock_guard<std::mutex> lock(g_schedule_cache_mu);
    if (schedule_cache().size() >= kScheduleCacheEntries) schedule_cache().clear();
    schedule_cache()[key.sink] = {default_device(), env_signature(), key.to_canonical(graph)};
  }

  // Runs the schedule's units in order, each new buffer given a storage when first used; returns
  // each root's buffer view (`roots`: the sink's sources before the pipeline; `keep` receives the
  // storages the results live in).
  std::vector<UOp> run_schedule(Schedule& s, const std::vector<UOp>& roots,
                                std::vector<std::shared_ptr<Storage>>& keep) {
    std::unordered_map<int64_t, int64_t> fresh;  // new buffer's slot -> its storage
    auto storage_slot = [&](const UOp& b) {
      const auto slot = static_cast<int64_t>(b.arg().field("slot").as_int());
      if (slot >= 0) return slot;
      auto [it, first] = fresh.try_emplace(slot);
      if (first) {
        const Arg& device = b.arg().field("device");
        const std::string on = device.is_string() ? device.as_string() : default_device();
        const auto size = static_cast<int64_t>(b.arg().field("size").as_int());
        // (another process's device: its size without memory here, never read: Tensor::data
        // refuses it)
        const std::shared_ptr<Storage> st =
            allocate_storage(b.dtype(), mpi::is_local(on) ? size : 0);
        st->size = size;
        st->device = on;
        if (is_gpu_device(on)) st->host_current = false;  // its kernel writes it on the device
        buffers[st->id] = st;
        it->second = st->id;
      }
      return it->second;
    };
    // every unit compiled and given its storages first (here: the IR is single-threaded), then
    // run on its device's queue (runtime/device_queues.h: devices at once)
    std::vector<QueuedLaunch> launches;
    std::vector<LaunchRecord> records(s.order.size());
    std::vector<std::vector<int64_t>> unit_slots(s.order.size());
    std::vector<size_t> position(s.units.size());
    for (size_t p = 0; p < s.order.size(); ++p) {
      const Unit& k = s.units[s.order[p]];
      position[s.order[p]] = p;
      const int number = g_kernel_count + static_cast<int>(p) + 1;
      viz::Group kernel_group("kernel " + std::to_string(number));
      std::vector<int64_t>& slots = unit_slots[p];
      for (size_t a = 1; a < k.call.nsrc(); ++a)
        slots.push_back(storage_slot(storage_root(k.call.src(a))));
      std::vector<int64_t> writes;  // the storages it writes that hold data before it runs
      for (int64_t w : k.writes)
        if (k.args.at(static_cast<size_t>(w)) >= 0) writes.push_back(slots[static_cast<size_t>(w)]);
      const UOp& body = k.call.src(0);
      const bool copy = !k.custom && body.op() == Op::Copy;
      QueuedLaunch l;
      if (!copy && !mpi::is_local(kernel_device(slots))) {
        l = run_elsewhere(kernel_device(slots), records[p]);
      } else {
        l = k.custom ? custom_launch(k.call, slots, number, records[p])
            : copy   ? transfer_launch(body, slots, number, static_cast<int>(p),
                                       /*posted=*/k.args.at(0) < 0, records[p])
                     : kernel_launch(body, slots, number, records[p]);
        l.run = restoring_on_error(body, writes, std::move(l.run));
      }
      for (size_t d : s.waits[s.order[p]]) l.waits.push_back(position[d]);
      launches.push_back(std::move(l));
    }
    // the kernels compiling on LLVM's thread are done (or this throws their error) before any
    // launch runs, as when they compiled in line: a realize that fails to compile writes nothing
    for (const std::shared_future<KernelFn>& f : compiling_) f.get();
    std::vector<LaunchState> states;
    std::exception_ptr error;
    try {
      run_device_queues(launches, states);
      // a GPU runs its kernels asynchronously: a fault in one is this realize's, reported here
      std::set<std::string> gpus;
      for (const QueuedLaunch& l : launches)
        if (is_gpu_device(l.queue)) gpus.insert(l.queue);
      for (const std::string& gpu : gpus) {
        try {
          gpu_runtime(gpu).synchronize();
        } catch (const TensorError& e) {
          throw TensorError(
              fmt::format("{} after the kernels of this realize on {}", e.what(), gpu));
        }
      }
    } catch (...) {  // what did run is still counted and its writes recorded
      error = std::current_exception();
    }
    for (size_t p = 0; p < s.order.size(); ++p) {
      if (states.at(p) == LaunchState::NotStarted) continue;
      if (const LaunchRecord& rec = records[p]; rec.here) {
        ++g_kernel_count;
        g_kernel_outputs.push_back(rec.elements);
        if (rec.named) {
          g_kernel_names.push_back(rec.name);
          g_kernel_asts.push_back(rec.ast);
        }
      }
      // (the writes of another process's launches are recorded too: every rank keeps the same
      // assignment log)
      if (states[p] != LaunchState::Finished) continue;
      const Unit& k = s.units[s.order[p]];
      const int64_t id = CallInfo::of(k.call).id;
      for (int64_t w : k.writes) {
        const std::shared_ptr<Storage>& st = storage(unit_slots[p][static_cast<size_t>(w)]);
        st->uninitialized = false;
        if (id != 0 && k.args[static_cast<size_t>(w)] >= 0) st->executed_assignments.push_back(id);
      }
    }
    if (error) std::rethrow_exception(error);
    record_stage("schedule", UOp::sink(roots), s.graph);
    std::vector<UOp> views;
    for (size_t i = 0; i < roots.size(); ++i) {
      const UOp& r = s.graph.src(i);
      if (r.op() == Op::After && r.src(0).op() == Op::Buffer &&
          r.src(0).arg().field("slot").as_int() < 0) {
        const std::shared_ptr<Storage>& st = storage(storage_slot(r.src(0)));
        keep.push_back(st);
        views.push_back(buffer_view(buffer_uop(*st), roots[i].shape()));
      } else {
        views.push_back(settled(roots[i]));
      }
    }
    return views;
  }
  // The elements a generated kernel stores: the product of the loops its ENDs close.
  static int64_t loop_elements(const UOp& ast) {
    int64_t n = 1;
    for (const UOp& u : toposort(ast))
      if (u.op() == Op::End)
        for (size_t k = 1; k < u.nsrc(); ++k)
          n *= static_cast<int64_t>(u.src(k).src(0).arg().as_int());
    return n;
  }

  // The tensors' views from their roots' (a root that views a computed value realized the
  // value: the tensor is that view of its buffer; a reshape of a buffer view is a buffer view).
  static std::vector<UOp> tensor_views(const Roots& r, std::vector<UOp> views) {
    for (size_t i = 0; i < views.size(); ++i) {
      const UOp& root = r.inlined[i];
      if (r.bases[i] == root) continue;
      bool reshapes_only = true;
      for (UOp v = root; v != r.bases[i]; v = v.src(0)) reshapes_only &= v.op() == Op::Reshape;
      if (reshapes_only)
        views[i] = is_buffer_view(views[i]) ? buffer_view(views[i].src(0), root.shape())
                                            : views[i].reshape(root.shape());
      else
        views[i] = substitute(root, {{r.bases[i], views[i]}});
    }
    return views;
  }

  // Realizes `roots` together (every kernel and pending assignment below them) and returns each
  // root's buffer view.
  std::vector<UOp> realize(const std::vector<UOp>& tensor_roots,
                           std::vector<std::shared_ptr<Storage>>& keep) {
    viz::Group group("realize");
    // (a multi-device root is one root per device: tensor/multi.h)
    const DeviceSplit split(tensor_roots);
    const Roots start = schedule_roots(split.roots());
    Schedule s = make_schedule(start);
    return split.join(tensor_views(start, run_schedule(s, start.bases, keep)));
  }

  // The kernels of `tensor_roots` in the order they would run, nothing allocated or run: the
  // kernel CALLs of the kernel graph (a new buffer has a negative slot and no storage).
  std::vector<ScheduleItem> schedule(const std::vector<UOp>& tensor_roots) {
    viz::Group group("schedule");
    const Schedule s = make_schedule(schedule_roots(DeviceSplit(tensor_roots).roots()));
    std::vector<ScheduleItem> items;
    for (size_t i : s.order) items.push_back({s.units[i].call, s.units[i].call.src(0)});
    return items;
  }

  // A root that is no kernel (a buffer, or an assignment chain over one) is read as it stands:
  // refused if an executed assignment outside its chain has overwritten it. Its result keeps the
  // buffer's state as a one-link chain, so later reads stay checked against later assignments.
  // (A gradient marker over it passes the buffer unchanged.)
  UOp settled(UOp root) const {
    while (root.op() == Op::Detach || root.op() == Op::ContiguousBackward) root = root.src(0);
    const UOp view = base_view(root);
    const int64_t slot = storage_of(view);
    check_not_overwritten(slot, chain_stores(root));
    const std::vector<int64_t>& log = storage(slot)->executed_assignments;
    return log.empty() ? view : state_after(view, log.back());
  }
  // The buffer as assignment `id` left it: AFTER over an executed STORE that carries only the id
  // (the value's graph is not kept alive).
  static UOp state_after(const UOp& view, int64_t id) {
    const UOp marker =
        UOp::make(Op::Store, dtypes::void_, {view, UOp::constant(view.dtype(), Arg::integer(0))},
                  Arg::integer(id));
    return view.after({marker});
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
int last_compile_count() { return g_compile_count; }
bool last_schedule_cached() { return g_schedule_cached; }
const std::vector<std::string>& last_kernel_names() { return g_kernel_names; }
const std::vector<UOp>& last_kernel_asts() { return g_kernel_asts; }
const std::vector<int64_t>& last_kernel_outputs() { return g_kernel_outputs; }

bool noopt() {
  const char* v = std::getenv("NOOPT");
  return v && std::atoi(v) != 0;
}

int debug_level() {
  const char* d = std::getenv("DEBUG");
  return d ? std::atoi(d) : 0;
}

bool device_available(const std::string& name) {
  std::string base;
  try {
    base = device_base(canonical_device(name));
  } catch (const TensorError&) {
    return false;
  }
  if (is_gpu_device(base)) return !gpu_unavailable(canonical_device(name));
  return base == "INTERP" || (base == "CPU" && cpu_available());
}

void set_default_device(const std::string& name) {
  g_device = name.empty() ? std::string() : canonical_device(name);
}

std::string default_device() {
  if (!g_device.empty()) return g_device;
  if (const char* d = std::getenv("DEV")) {
    try {
      return canonical_device(d);
    } catch (const TensorError& e) {
      throw TensorError(fmt::format("DEV={}: {}", d, e.what()));
    }
  }
  return cpu_available() ? "CPU" : "INTERP";
}

// The last realize's report (last_kernel_count() and the like) starts empty.
static void clear_last_realize() {
  g_kernel_count = 0;
  g_compile_count = 0;
  g_kernel_outputs.clear();
  g_kernel_names.clear();
  g_kernel_asts.clear();
}

bool Tensor::untouched_buffer() const {
  return is_buffer_view(uop_) && deps_.size() == 1 && deps_[0]->executed_assignments.empty();
}

void Tensor::realize_to_read() {
  if (!untouched_buffer()) realize();
}

Tensor& Tensor::realize() {
  // nothing to run or check: a report of no kernels, not the previous realize's
  if (untouched_buffer()) {
    clear_last_realize();
    return *this;
  }
  realize_all({this});
  return *this;
}

void Tensor::realize_all(const std::vector<Tensor*>& tensors) {
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i] == nullptr)
      throw TensorError(fmt::format("realize_all: tensor {} is a null pointer", i));
  Realizer r;
  // A view of a buffer (movement ops over a buffer state) stays a view of it, as in tinygrad: the
  // buffer state is realized (its pending assignments run), not a copy of the view, so the view
  // keeps seeing later assignments to the buffer.
  std::vector<UOp> roots;
  std::vector<bool> is_view;
  for (Tensor* t : tensors) {
    for (const auto& s : t->deps_) r.buffers[s->id] = s;
    const UOp base = view_base(t->uop_);
    // (a multi-device tensor is no view of one buffer: MSTACK and UNSHARD are movement ops)
    is_view.push_back(!t->uop_.device().is_tuple() && base != t->uop_ && is_buffer_state(base));
    roots.push_back(is_view.back() ? base : t->uop_);
  }
  clear_last_realize();
  std::vector<std::shared_ptr<Storage>> kept;
  const std::vector<UOp> views = r.realize(roots, kept);
  for (size_t i = 0; i < tensors.size(); ++i) {
    // a computed tensor keeps the graph (and buffers) it was computed by, for gradients; an
    // assigned one does not (its history would keep every earlier buffer alive)
    Tensor& t = *tensors[i];
    if (is_view[i]) {
      t.uop_ = rebase_view(t.uop_, roots[i], views[i]);
      continue;
    }
    if (t.uop_ != views[i] && t.uop_.op() != Op::After) {
      if (t.differentiable_uop() == t.uop_) {
        t.computed_by_ = t.uop_;
        t.computed_by_storages_ = t.deps_;
      }
      t.realized_view_ = views[i];
    } else if (t.uop_ != views[i]) {
      t.computed_by_ = UOp();
      t.computed_by_storages_.clear();
    }
    t.uop_ = views[i];
    if (views[i].device().is_tuple()) {  // a buffer on each device
      StorageList::Items deps;
      for (int64_t slot : Realizer::read_storages(views[i])) deps.push_back(r.storage(slot));
      t.deps_ = deps;
    } else {
      t.deps_ = {r.storage(Realizer::storage_of(Realizer::view_root(views[i])))};
    }
  }
  // the other tensors over a buffer state an assignment left read the buffer from now on, so
  // that later assignments to it reach them too
  for (size_t i = 0; i < tensors.size(); ++i)
    if (roots[i].op() == Op::After && roots[i] != views[i]) rebase_live(roots[i], views[i], {});
}

std::vector<ScheduleItem> Tensor::schedule(const std::vector<const Tensor*>& tensors) {
  Realizer r;
  std::vector<UOp> roots;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i] == nullptr)
      throw TensorError(fmt::format("schedule: tensor {} is a null pointer", i));
    for (const auto& s : tensors[i]->deps_) r.buffers[s->id] = s;
    // a view of a buffer state schedules that state, as realize_all does
    const UOp base = view_base(tensors[i]->uop_);
    roots.push_back(base != tensors[i]->uop_ && is_buffer_state(base) ? base : tensors[i]->uop_);
  }
  return r.schedule(roots);
}

Tensor Tensor::readable() const {
  const std::vector<std::string> ds = devices();
  if (!uop_.device().is_tuple()) return *this;
  if (mpi::world().size == 1) return to(ds[0]);
  const auto mine =
      std::find_if(ds.begin(), ds.end(), [](const std::string& d) { return mpi::is_local(d); });
  if (mine == ds.end())
    throw TensorError(fmt::format("none of this tensor's devices {} belongs to MPI rank {}",
                                  uop_.device().repr(), mpi::world().rank));
  // the whole value on every device, realized by every rank alike (the gather's sends and
  // receives pair up), then this rank's copy, which is there already
  Tensor everywhere = *this;
  if (shard_axis()) {
    std::vector<Arg> names;
    for (const std::string& d : ds) names.push_back(Arg::string(d));
    everywhere = with(UOp::make(Op::Copy, dtype(), {uop_}, Arg::tuple(names)));
  }
  everywhere.realize();
  return everywhere.with(
      UOp::make(Op::MSelect, dtype(), {everywhere.uop_}, Arg::integer(mine - ds.begin())));
}

namespace {
// The storage a realized tensor's elements are read from, its host bytes current; refused when
// another process owns its device (MPI: its memory is not here).
const Storage& local_storage(Storage& s) {
  const std::string& d = s.device.empty() ? default_device() : s.device;
  if (!mpi::is_local(d))
    throw TensorError(fmt::format(
        "this tensor is on {}, which MPI rank {} owns (this is rank {}): copy it to a device of "
        "this rank to read it",
        d, mpi::owner(d), mpi::world().rank));
  make_host_current(s);  // a GPU's contents copied out when its device holds them
  return s;
}
}  // namespace

std::vector<double> Tensor::to_doubles() {
  if (uop_.device().is_tuple()) return readable().to_doubles();
  realize_to_read();
  if (view_base(uop_) != uop_) return contiguous().to_doubles();  // a view: its elements in order
  const Storage& s = local_storage(*deps_.at(0));
  std::vector<double> out;
  for (int64_t i = 0; i < s.size; ++i) out.push_back(load_element(s, i).as_float());
  return out;
}

std::vector<uint8_t> Tensor::to_bytes() {
  if (uop_.device().is_tuple()) return readable().to_bytes();
  realize_to_read();
  if (view_base(uop_) != uop_) return contiguous().to_bytes();  // a view: its elements in order
  const Storage& s = local_storage(*deps_.at(0));
  const size_t n = static_cast<size_t>(s.size) * static_cast<size_t>(s.dtype.itemsize());
  return std::vector<uint8_t>(s.bytes.begin(), s.bytes.begin() + static_cast<std::ptrdiff_t>(n));
}

namespace {
// The dtype whose values a host integer type T holds.
template <class T>
DType host_dtype() {
  if constexpr (std::is_same_v<T, bool>)
    return dtypes::bool_;
  else if constexpr (std::is_same_v<T, int8_t>)
    return dtypes::int8;
  else if constexpr (std::is_same_v<T, int16_t>)
    return dtypes::int16;
  else if constexpr (std::is_same_v<T, int32_t>)
    return dtypes::int32;
  else if constexpr (std::is_same_v<T, int64_t>)
    return dtypes::int64;
  else if constexpr (std::is_same_v<T, uint8_t>)
    return dtypes::uint8;
  else if constexpr (std::is_same_v<T, uint16_t>)
    return dtypes::uint16;
  else if constexpr (std::is_same_v<T, uint32_t>)
    return dtypes::uint32;
  else {
    static_assert(std::is_same_v<T, uint64_t>,
                  "data<T> takes bool, float types or fixed-width ints");
    return dtypes::uint64;
  }
}
}  // namespace

template <class T>
std::vector<T> Tensor::data() {
  if (uop_.device().is_tuple()) return readable().data<T>();
  realize_to_read();
  if (view_base(uop_) != uop_) return contiguous().data<T>();  // a view: its elements in order
  const Storage& s = local_storage(*deps_.at(0));
  std::vector<T> out;
  out.reserve(static_cast<size_t>(s.size));
  for (int64_t i = 0; i < s.size; ++i) {
    const Arg v = load_element(s, i);
    if constexpr (std::is_floating_point_v<T>) {
      out.push_back(static_cast<T>(v.as_float()));
    } else {
      // an element that T cannot hold is an error, never a wrapped or undefined conversion
      check_fits(host_dtype<T>(), v, "data", i);
      out.push_back(
          static_cast<T>(v.is_float() ? static_cast<i128>(std::trunc(v.as_float())) : v.as_int()));
    }
  }
  return out;
}
// every element type the API takes (a type missing here would fail only at link time)
template std::vector<float> Tensor::data();
template std::vector<double> Tensor::data();
template std::vector<bool> Tensor::data();
template std::vector<int8_t> Tensor::data();
template std::vector<int16_t> Tensor::data();
template std::vector<int32_t> Tensor::data();
template std::vector<int64_t> Tensor::data();
template std::vector<uint8_t> Tensor::data();
template std::vector<uint16_t> Tensor::data();
template std::vector<uint32_t> Tensor::data();
template std::vector<uint64_t> Tensor::data();

}  // namespace tinyrw
