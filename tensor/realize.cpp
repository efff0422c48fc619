// realize(): inlines function CALLs (rules/call.rw), cuts the tensor graphs into kernels
// (rules/schedule.rw decides where), assignments (a STORE into a buffer or a view of one) and
// kernel CALLs (custom kernels, whose accesses ir/call.h derives), orders them so that every read
// sees exactly the assignments it was made after (per buffer region), lowers each kernel with the
// rangeify and symbolic rules into a kernel AST (tinygrad's kernel form), and runs it on INTERP or
// CPU, compiled once per distinct AST.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "codegen/linearize.h"
#include "dsl/verify.h"
#include "ir/alu.h"
#include "ir/builders.h"
#include "ir/call.h"
#include "ir/graph.h"
#include "ir/kernel_info.h"
#include "ir/viz.h"
#include "rules/helpers/rangeify.h"
#include "rules/helpers/schedule.h"
#include "rules_gen/call.h"
#include "rules_gen/rangeify.h"
#include "rules_gen/schedule.h"
#include "rules_gen/spec.h"
#include "rules_gen/symbolic.h"
#include "runtime/cpu.h"
#include "runtime/interp.h"
#include "runtime/kernel_error.h"
#include "runtime/llvm_render.h"
#include "schedule/rangeify.h"
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

// An INDEX of a tensor graph lowered to index math over buffers: rules/rangeify.rw pre-order (an
// INDEX passes a view before the symbolic rules fold the view's source), `sym` post-order; then
// reduce collapse.
UOp lower_index(const UOp& index, rw::RangeifyContext& ctx, const char* name) {
  const UOp lowered =
      graph_rewrite(index, &rules::sym(), {.ctx = &ctx, .bpm = &rules::rangeify(), .name = name});
  return graph_rewrite(lowered, &rules::reduce_collapse(), {.name = "reduce collapse"});
}

// A kernel's value: `node` indexed by one WEAK range per dimension (ids from 0; a scalar is index
// 0 of a 1-element view) and lowered. `ranges` receives the output loops.
UOp lower_node(const UOp& node, rw::RangeifyContext& ctx, std::vector<UOp>& ranges) {
  for (int64_t d : to_dims(node.shape()))
    ranges.push_back(UOp::range(UOp::cint(d), ctx.next_axis++));
  const UOp root = ranges.empty() ? node.reshape({1}).index({UOp::cint(0)}) : node.index(ranges);
  return lower_index(root, ctx, "rangeify");
}

}  // namespace

struct Realizer {
  std::map<int64_t, std::shared_ptr<Storage>> buffers;

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
    return tinyrw::buffer_uop(s.dtype, s.id, s.size, default_device());
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
  // (`out` given: the kernel writes into that storage instead, as an assignment does; `dest` a
  // view of it: element i of the node goes where element i of that view is.)
  UOp run_kernel(const UOp& node, std::shared_ptr<Storage>& out, const UOp& dest = UOp()) {
    const Dims shape = to_dims(node.shape());
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    if (!out) out = allocate_storage(node.dtype(), n);
    buffers[out->id] = out;

    rw::RangeifyContext ctx;
    std::vector<UOp> ranges;  // the output loops
    viz::Group kernel_group("kernel " + std::to_string(g_kernel_count + 1));
    const UOp value = lower_node(node, ctx, ranges);
    if (spec_enabled()) verify(value, rules::spec_kernel());
    const UOp out_buffer = buffer_uop(*out);
    const UOp dest_index = dest ? store_index(dest, ranges, out_buffer, ctx) : UOp();
    std::vector<int64_t> slots;  // the storage each PARAM slot stands for
    const UOp sink = kernel_ast(value, ranges, out_buffer, dest_index, slots);
    record_stage("kernel ast", value, sink);
    if (spec_enabled()) verify(sink, rules::spec_kernel_ast());
    ++g_kernel_count;
    g_kernel_outputs.push_back(n);
    const std::string device = default_device();
    const auto t0 = std::chrono::steady_clock::now();
    const bool fresh = !g_compiled[device].contains(sink);
    const CompiledKernel& k = compile(sink, device);
    g_kernel_names.push_back(k.name);
    g_kernel_asts.push_back(sink);
    if (debug_level() >= 2 && fresh)
      std::fprintf(stderr, "%s\n",
                   device == "CPU" ? k.ir.c_str() : render_program(k.program).c_str());
    record_stage("linearize", sink, k.program);
    if (n > 0) run_compiled(k, slots);
    out->uninitialized = false;
    if (debug_level() >= 2) {
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      std::fprintf(stderr, "kernel %d %s on %s: %lld elements, %.1f us%s\n", g_kernel_count,
                   k.name.c_str(), device.c_str(), static_cast<long long>(n), us,
                   fresh ? "" : " (compiled before)");
    }
    return buffer_view(buffer_uop(*out), to_shape(shape));
  }

  // The kernel AST of a lowered value over the output `ranges` (rules/spec.rw's spec_kernel_ast):
  //   SINK[KernelInfo](END(STORE(INDEX(PARAM 0, dest or row-major flat), value), ranges...))
  // with every BUFFER read an INDEX of a PARAM (slot 0 the output, then the inputs in first-use
  // order; `slots[k]` receives PARAM k's storage) and every read whose index may leave its
  // buffer gated by the conditions of the WHEREs it sits in (a pad's). Equal kernels over other
  // buffers of the same sizes are equal UOps (the compile cache's key).
  // (`out`: the BUFFER stored to.)
  static UOp kernel_ast(const UOp& value, const std::vector<UOp>& ranges, const UOp& out,
                        const UOp& dest_index, std::vector<int64_t>& slots) {
    if (value.dtype() != out.dtype())
      throw std::logic_error("realize: a kernel's value and output dtypes differ");
    UOp flat = ranges.empty() ? UOp::cint(0) : ranges[0];  // row-major: r0*d1 + r1 ...
    for (size_t k = 1; k < ranges.size(); ++k) flat = flat * ranges[k].src(0) + ranges[k];
    const UOp target = UOp::make(Op::Index, out.dtype(), {out, dest_index ? dest_index : flat});
    const UOp store = UOp::make(Op::Store, dtypes::void_, {target, gate_reads(value)});
    UOp effect = store;
    if (!ranges.empty()) {
      std::vector<UOp> src{store};
      src.insert(src.end(), ranges.begin(), ranges.end());
      effect = UOp::make(Op::End, dtypes::void_, src);
    }
    // BUFFER -> PARAM in first-use order (the output's first), ranges renumbered
    std::vector<UOp> buffers;
    const UOp sink = kernel_sink(effect, buffers);
    for (const UOp& b : buffers)
      slots.push_back(static_cast<int64_t>(storage_root(b).arg().field("slot").as_int()));
    return sink;
  }

  // `value` with each read INDEX(BUFFER, i) whose i may leave the buffer read at the gated index
  // where(c, i, Invalid), c the conjunction of the conditions of the WHEREs whose true branch
  // holds it (there, and only there, the read's value is used): a pad's `where(valid, x, 0)`
  // gates the reads of x. The binder then checks the index only where the gate holds.
  static UOp gate_reads(const UOp& value) {
    auto leaves = [](const UOp& read) {
      const i128 size = read.src(0).arg().field("size").as_int();
      const UOp& i = read.src(1);
      return i.vmin() < Num::of(0) || i.vmax() > Num::of(size - 1);
    };
    const std::vector<UOp> order = toposort(value);
    // the nodes with a read below them that may leave its buffer: only WHEREs over those gate
    std::unordered_set<UOp> leaving;
    for (const UOp& u : order)
      if ((u.op() == Op::Index && u.src(0).op() == Op::Buffer && leaves(u)) ||
          std::any_of(u.src().begin(), u.src().end(),
                      [&](const UOp& s) { return leaving.contains(s); }))
        leaving.insert(u);
    if (leaving.empty()) return value;
    const UOp invalid = UOp::constant(dtypes::index, Arg::invalid());
    std::unordered_map<UOp, UOp> out;  // each node with the reads below it gated
    for (const UOp& u : order) {
      std::vector<UOp> src;
      for (const UOp& s : u.src()) src.push_back(out.at(s));
      if (u.op() == Op::Where && u.dtype() != dtypes::index && leaving.contains(u.src(1))) {
        // the reads of the true branch that may leave their buffer, gated by the condition (a
        // read an inner WHERE gated already: by both conditions)
        std::unordered_map<UOp, UOp> gated;
        for (const UOp& r : toposort(src[1])) {
          if (r.op() != Op::Index || r.src(0).op() != Op::Buffer) continue;
          const UOp& i = r.src(1);
          if (is_gated_index(i))
            gated.emplace(r, r.with_src({r.src(0), (src[0] & i.src(0)).where(i.src(1), invalid)}));
          else if (leaves(r))
            gated.emplace(r, r.with_src({r.src(0), src[0].where(i, invalid)}));
        }
        if (!gated.empty()) src[1] = substitute(src[1], gated, /*walk=*/true);
      }
      out.emplace(u, u.nsrc() ? u.with_src(src) : u);
    }
    return out.at(value);
  }

  // A compiled kernel: its PARAMs bound to placeholder buffers (slot k for PARAM k), linearized,
  // and on CPU rendered and compiled by LLVM.
  struct CompiledKernel {
    std::string name{};
    UOp program{};          // the LINEAR program (INTERP runs it)
    KernelFn fn = nullptr;  // CPU
    std::string ir{};       // CPU: the LLVM IR
    // CPU: the PARAM slot of each argument after the unused 0th
    std::vector<int64_t> input_slots{};
  };
  // Identical kernel ASTs compile once per device (linearize, render, LLVM).
  static inline std::map<std::string, std::unordered_map<UOp, CompiledKernel>> g_compiled;

  static const CompiledKernel& compile(const UOp& sink, const std::string& device) {
    auto& cache = g_compiled[device];
    if (auto it = cache.find(sink); it != cache.end()) return it->second;
    std::map<int64_t, UOp> by_slot;
    for (const UOp& u : toposort(sink))
      if (u.op() == Op::Param)
        by_slot.emplace(static_cast<int64_t>(u.arg().field("slot").as_int()), u);
    std::vector<UOp> bufs;
    std::vector<std::pair<int64_t, int64_t>> sizes;
    for (const auto& [slot, p] : by_slot) {
      const int64_t size = p.src(0).src(0).arg().as_int();
      bufs.push_back(UOp::make(
          Op::Buffer, p.dtype(), {},
          Arg::record("ParamArg", {{"slot", Arg::integer(slot)}, {"size", Arg::integer(size)}})));
      sizes.emplace_back(slot, size);
    }
    const UOp bound = bind_kernel(sink, bufs);
    CompiledKernel k{.name = KernelInfo::of(sink).name};
    k.program = linearize_kernel(bound);
    if (spec_enabled()) verify(k.program, rules::spec_program());
    if (device == "CPU") {
      const RenderedKernel r = render_llvm_effects(bound, sizes);
      k.fn = cpu_compile(r.ir);
      k.ir = r.ir;
      k.input_slots = r.input_slots;
    }
    ++g_compile_count;
    return cache.emplace(sink, std::move(k)).first->second;
  }

  // Runs a compiled kernel over the storages its PARAM slots stand for.
  void run_compiled(const CompiledKernel& k, const std::vector<int64_t>& slots) {
    if (k.fn) {
      std::vector<void*> ptrs{nullptr};  // argument 0 (an output of its own) is unused
      for (int64_t p : k.input_slots) ptrs.push_back(storage(slots.at(p))->bytes.data());
      check_kernel_result(k.fn(ptrs.data()));
      return;
    }
    std::map<int64_t, std::shared_ptr<Storage>> bound;
    for (size_t p = 0; p < slots.size(); ++p) bound.emplace(p, storage(slots[p]));
    interp_run(k.program, bound);
  }

  // A kernel CALL's body bound to buffers of its arguments' sizes, linearized and (on CPU)
  // rendered: every refusal (an access out of bounds, an unindexed parameter, an effect that is
  // none, a loop bound CPU cannot compile) happens before the schedule runs anything.
  static void check_kernel_call(const UOp& call) {
    std::vector<UOp> bufs;
    std::vector<std::pair<int64_t, int64_t>> sizes;
    for (size_t a = 1; a < call.nsrc(); ++a) {
      int64_t n = 1;
      for (const SInt& d : call.src(a).shape()) n *= d.value();
      const int64_t slot = -static_cast<int64_t>(a);  // placeholders, never run
      bufs.push_back(UOp::make(
          Op::Buffer, call.src(a).dtype(), {},
          Arg::record("ParamArg", {{"slot", Arg::integer(slot)}, {"size", Arg::integer(n)}})));
      sizes.emplace_back(slot, n);
    }
    const UOp& body = call.src(0).op() == Op::Program ? call.src(0).src(0) : call.src(0);
    const UOp bound = bind_kernel(body, bufs);
    linearize_kernel(bound);
    if (default_device() == "CPU") render_llvm_effects(bound, sizes);
  }

  // A kernel CALL (custom_kernel): its body over the arguments' buffers, in place; on CPU
  // compiled by LLVM, on INTERP run as its LINEAR program.
  void run_kernel_call(const UOp& call, const std::vector<int64_t>& writes,
                       const std::unordered_map<UOp, UOp>& done) {
    std::vector<UOp> bufs;
    for (size_t a = 1; a < call.nsrc(); ++a) {
      const UOp view = base_view(substitute(call.src(a), done, /*walk=*/true));
      if (!is_buffer_view(view))
        throw std::logic_error("realize: a kernel CALL argument was not computed into a buffer");
      bufs.push_back(view.src(0));
    }
    viz::Group kernel_group("kernel " + std::to_string(g_kernel_count + 1));
    // a PROGRAM body runs from the SINK it was compiled from
    const UOp& body = call.src(0).op() == Op::Program ? call.src(0).src(0) : call.src(0);
    const UOp bound = bind_kernel(body, bufs);
    const bool cpu = default_device() == "CPU";
    UOp program;  // the LINEAR program: run on INTERP, traced and verified on request on CPU
    if (!cpu || viz::enabled() || spec_enabled()) {
      program = linearize_kernel(bound);
      record_stage("linearize", call.src(0), program);
      if (spec_enabled()) verify(program, rules::spec_program());
    }
    const std::string name = CallInfo::of(call).name;
    ++g_kernel_count;
    g_kernel_outputs.push_back(0);
    if (cpu) {
      std::vector<std::pair<int64_t, int64_t>> sizes;
      for (const auto& [id, st] : buffers) sizes.emplace_back(id, st->size);
      const RenderedKernel k = render_llvm_effects(bound, sizes);
      if (debug_level() >= 2)
        std::fprintf(stderr, "custom kernel %s\n%s\n", name.c_str(), k.ir.c_str());
      std::vector<void*> ptrs{nullptr};  // argument 0 (an output of its own) is unused
      for (int64_t slot : k.input_slots) ptrs.push_back(storage(slot)->bytes.data());
      check_kernel_result(cpu_compile(k.ir)(ptrs.data()));
    } else {
      if (debug_level() >= 2)
        std::fprintf(stderr, "custom kernel %s\n%s\n", name.c_str(),
                     render_program(program).c_str());
      interp_run(program, buffers);
    }
    for (int64_t slot : writes) {
      storage(slot)->executed_assignments.push_back(assignment_id(call));
      storage(slot)->uninitialized = false;
    }
  }

  // Where element (ranges) of a store through the view `dest` of `out` goes: the view indexed
  // like the value and lowered by the same rules, which must address one element of `out`.
  static UOp store_index(const UOp& dest, const std::vector<UOp>& ranges, const UOp& out,
                         rw::RangeifyContext& ctx) {
    // a scalar: index 0 of a 1-element view
    const UOp at = ranges.empty() ? dest.reshape({1}).index({UOp::cint(0)}) : dest.index(ranges);
    const UOp idx = lower_index(at, ctx, "rangeify store");
    if (idx.op() != Op::Index || idx.nsrc() != 2 || idx.src(0).op() != Op::Buffer ||
        idx.src(0).arg().field("slot") != out.arg().field("slot"))
      throw TensorError(fmt::format(
          "cannot assign through this view: its elements do not map one to one onto the "
          "target buffer (it lowers to {})",
          op_name(idx.op())));
    return idx.src(1);
  }

  // A CPU kernel's return value: 0, or the division by zero it met (it ran to its end with a
  // substitute divisor; what it wrote is discarded by the caller).
  static void check_kernel_result(int32_t code) {
    if (code == 0) return;
    if (const std::optional<Op> op = kernel_error_op(code)) throw division_by_zero("CPU", *op);
    throw std::logic_error(fmt::format("CPU: a kernel returned the unknown error code {}", code));
  }

  // Runs `run`, which writes the storages `slots` in place; when `graph` may raise (an integer
  // division or modulo whose divisor is not a constant) their contents are saved first and put
  // back if it does, so that a failed kernel leaves no half-written buffer a user could read.
  template <class F>
  void restoring_on_error(const UOp& graph, const std::vector<int64_t>& slots, F run) {
    bool may_raise = false;
    for (const UOp& u : toposort(graph, nullptr, /*enter_calls=*/true))
      if ((u.op() == Op::CDiv || u.op() == Op::CMod || u.op() == Op::FloorDiv ||
           u.op() == Op::FloorMod) &&
          !u.dtype().is_float() && u.src(1).op() != Op::Const) {
        may_raise = true;
        break;
      }
    if (!may_raise) return run();
    struct Saved {
      std::shared_ptr<Storage> storage;
      std::vector<uint8_t> bytes;
      bool uninitialized;
    };
    std::vector<Saved> saved;
    for (int64_t slot : slots) {
      const std::shared_ptr<Storage>& st = storage(slot);
      saved.push_back({st, st->bytes, st->uninitialized});
    }
    try {
      run();
    } catch (...) {
      for (Saved& sv : saved) {
        sv.storage->bytes = std::move(sv.bytes);
        sv.storage->uninitialized = sv.uninitialized;
      }
      throw;
    }
  }

  // The elements [lo, hi] of a buffer an access may touch (flat indices; the whole buffer unless
  // a view narrows it): a read and a write of disjoint regions do not conflict.
  struct Region {
    int64_t lo = 0, hi = std::numeric_limits<int64_t>::max();
    bool overlaps(const Region& o) const { return lo <= o.hi && o.lo <= hi; }
  };
  struct Read {
    int64_t slot;
    std::vector<UOp> seen;  // the stores it must see
    Region region;
  };
  // One unit of the schedule: a kernel boundary, a root to compute, an assignment's STORE, or a
  // kernel CALL.
  struct Kernel {
    UOp node;
    std::vector<int64_t> writes;        // storages a STORE or CALL writes
    std::vector<Region> write_regions;  // the part of each it writes
    std::vector<size_t> after;          // kernels that must run first
    std::vector<Read> reads;
    bool reads_own_destination = false;
  };

  // The region of its buffer a view (movement ops and assignment chains over a buffer view)
  // addresses: the bounds of its lowered index.
  Region region_of(const UOp& view) { return lowered_region(view).value_or(Region{}); }
  // The same, or nothing when the view's index does not lower to one element of its buffer.
  std::optional<Region> lowered_region(const UOp& view) {
    // the view over the plain buffer: the chains only order, they do not move elements
    std::vector<UOp> chain;
    UOp u = view;
    for (; !is_buffer_view(u) && (u.op() == Op::After || groups::movement().contains(u.op()));
         u = u.src(0))
      if (u.op() != Op::After) chain.push_back(u);
    if (!is_buffer_view(u) || chain.empty()) return Region{};
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      std::vector<UOp> src((*it).src().begin(), (*it).src().end());
      src[0] = u;
      u = it->with_src(src);
    }
    rw::RangeifyContext ctx;
    std::vector<UOp> idx;
    for (const SInt& d : u.shape())
      idx.push_back(UOp::range(UOp::cint(d.value()), ctx.next_axis++));
    if (idx.empty()) return Region{};
    const UOp lowered = lower_index(u.index(idx), ctx, "region");
    if (lowered.op() != Op::Index || lowered.nsrc() != 2 || lowered.src(0).op() != Op::Buffer)
      return std::nullopt;
    const UOp& e = lowered.src(1);
    return Region{
        std::max<int64_t>(0, static_cast<int64_t>(e.vmin().i)),
        static_cast<int64_t>(std::min<i128>(e.vmax().i, std::numeric_limits<int64_t>::max()))};
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
  static UOp base_view(UOp u) {
    while (u.op() == Op::After) u = u.src(0);
    return u;
  }
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

  // What kernel k reads (buffers, and at which assignment state) and which kernels it follows.
  void analyze(Kernel& k, const std::unordered_map<UOp, size_t>& kernel_of) {
    std::unordered_set<UOp> seen;
    std::vector<UOp> stack;
    auto push_sources = [&](const UOp& u) {
      for (const UOp& s : u.src()) stack.push_back(s);
    };
    auto drain = [&] {
      while (!stack.empty()) {
        const UOp u = stack.back();
        stack.pop_back();
        if (!seen.insert(u).second) continue;
        if (auto it = kernel_of.find(u); it != kernel_of.end()) {
          k.after.push_back(it->second);
          continue;
        }
        if (u.op() == Op::Store || u.op() == Op::Call) continue;  // executed in an earlier realize
        if (u.op() == Op::After && is_buffer_view(view_root(u))) {
          const std::vector<UOp> stores = chain_stores(u);
          k.reads.push_back({storage_of(view_root(u)), stores, {}});
          for (const UOp& st : stores) stack.push_back(st);
          continue;
        }
        if (u.op() == Op::Buffer) k.reads.push_back({storage_of(u), {}, {}});
        push_sources(u);
      }
    };
    if (k.node.op() == Op::Store) {
      // the value first: whether it reads the target decides if it needs a temporary; the
      // target itself (its assignment chain) only orders the store
      stack.push_back(k.node.src(1));
      drain();
      for (const Read& read : k.reads)
        if (read.slot == k.writes.at(0)) k.reads_own_destination = true;
      // the target's chain, as the part of the buffer written: the store follows the chain's
      // stores and precedes other writes to that part
      const size_t first = k.reads.size();
      stack.push_back(k.node.src(0));
      drain();
      for (size_t r = first; r < k.reads.size(); ++r)
        if (k.reads[r].slot == k.writes.at(0)) k.reads[r].region = k.write_regions.at(0);
    } else if (k.node.op() == Op::Call) {
      // the arguments (the body has only parameters): ordered like reads, whether the kernel
      // reads or only writes them, so it follows their assignments and precedes later ones
      for (size_t a = 1; a < k.node.nsrc(); ++a) stack.push_back(k.node.src(a));
    } else if (k.node.op() == Op::After) {  // a root chain over a view: one read of the chain
      k.reads.push_back({storage_of(view_root(k.node)), chain_stores(k.node), region_of(k.node)});
      for (const UOp& st : chain_stores(k.node)) stack.push_back(st);
    } else {
      push_sources(k.node);
    }
    drain();
    for (const Read& r : k.reads) check_not_overwritten(r.slot, r.seen);
  }

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
  // buffer. An order that cannot do both is refused before anything runs.
  std::vector<size_t> order_kernels(std::vector<Kernel>& ks) {
    std::vector<std::vector<size_t>> before(ks.size());  // before[a]: kernels that follow a
    std::vector<int> pending(ks.size(), 0);
    auto edge = [&](size_t a, size_t b) {
      before[a].push_back(b);
      ++pending[b];
    };
    for (size_t k = 0; k < ks.size(); ++k) {
      for (size_t d : ks[k].after) edge(d, k);
      for (const Read& r : ks[k].reads)
        for (size_t s = 0; s < ks.size(); ++s) {
          if (s == k) continue;
          bool conflicts = false;  // s writes the part of the buffer this read needs
          for (size_t w = 0; w < ks[s].writes.size(); ++w)
            conflicts |= ks[s].writes[w] == r.slot && ks[s].write_regions[w].overlaps(r.region);
          if (conflicts && std::find(r.seen.begin(), r.seen.end(), ks[s].node) == r.seen.end())
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
          stuck += fmt::format("{}{}", stuck.empty() ? "" : ", ", op_name(ks[k].node.op()));
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
  // one kernel). A read through another view, a movement op or a kernel boundary over the target
  // reads elements other than the one written. Decided once per store: the schedule's hazard
  // facts and the store's run both ask.
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

  // The facts rules/schedule.rw decides the kernel boundaries by (rules/helpers/schedule.h):
  // analyses of the whole schedule, not rewrites. `order`: the nodes to schedule, sources first.
  rw::ScheduleContext schedule_facts(const std::vector<UOp>& order, const std::vector<UOp>& roots) {
    rw::ScheduleContext facts;
    facts.roots.insert(roots.begin(), roots.end());
    facts.max_fused_depth = kMaxFusedDepth;
    std::vector<UOp> stores;
    std::unordered_map<int64_t, int> writers;  // pending assignments per buffer
    for (const UOp& u : order) {
      if (u.op() == Op::Call && !is_kernel_call(u))
        throw std::logic_error("realize: a function CALL was left after inlining");
      if (u.op() == Op::Call) facts.call_arguments.insert(u.src().begin() + 1, u.src().end());
      if ((u.op() != Op::Store && u.op() != Op::Call) || executed(u)) continue;
      facts.pending.insert(u);
      if (u.op() == Op::Store) {
        stores.push_back(u);
        ++writers[storage_of(view_root(u.src(0)))];
      }
    }
    // an assignment's value that reads a buffer another assignment of this schedule writes (or
    // its own target, written through a view, other than element by element): if realized
    // first, its reads run before any of those writes, and slices of one buffer assigned from
    // themselves order as all reads, then all writes. (A whole-buffer assignment reading only its
    // own target computes into a temporary instead, or in place when it reads element by element.)
    for (const UOp& st : stores) {
      const int64_t own = storage_of(view_root(st.src(0)));
      const bool partial = !is_buffer_view(base_view(st.src(0)));
      for (int64_t slot : read_storages(st.src(1)))
        if (writers[slot] - (slot == own ? 1 : 0) > 0 ||
            (slot == own && partial && !reads_in_place(st)))
          facts.hazards.insert(st.src(1));
    }
    // the views an assignment writes through stay views of its buffer
    for (const UOp& st : stores)
      for (UOp v = st.src(0); v.op() == Op::After || groups::movement().contains(v.op());
           v = v.src(0))
        if (!facts.pinned.insert(v).second) break;
    return facts;
  }

  // A unit of the schedule for node u (its writes, and the checks that can fail before anything
  // runs: a store through a view that does not address its buffer element by element, a custom
  // kernel that would go out of bounds).
  Kernel make_kernel(const UOp& u) {
    Kernel k;
    k.node = u;
    if (u.op() == Op::Store || u.op() == Op::Call) k.writes = written_storages(u);
    k.write_regions.assign(k.writes.size(), Region{});
    if (u.op() == Op::Store) {
      const std::optional<Region> r = lowered_region(u.src(0));
      if (!r)
        throw TensorError(
            "cannot assign through this view: its elements do not map one to one onto the "
            "target buffer");
      k.write_regions[0] = *r;
    }
    if (u.op() == Op::Call) check_kernel_call(u);
    return k;
  }

  // The kernels of one schedule, before anything runs: the graph (function CALLs inlined), its
  // roots, one Kernel per realized node in the order they run, and each assignment chain's view.
  struct Plan {
    UOp all;
    std::vector<UOp> bases;  // what each tensor asked for realizes (root_bases)
    std::vector<UOp> roots;
    std::vector<Kernel> ks;
    std::vector<size_t> order;
    std::unordered_map<UOp, UOp> done;
  };

  // The boundary decisions of rules/schedule.rw over `tensor_roots` and the order the kernels run
  // in (throws "cycle" and the other scheduling errors before anything runs).
  // A root that reshapes a computed value realizes the value, and the root is a view of its
  // buffer (tinygrad realizes the bases), so roots over one value share its kernel.
  static std::vector<UOp> root_bases(const std::vector<UOp>& tensor_roots) {
    std::vector<UOp> bases;
    for (const UOp& r : tensor_roots) {
      UOp b = r;
      while (b.op() == Op::Reshape) b = b.src(0);
      bases.push_back(is_buffer_state(b) ? r : b);
    }
    return bases;
  }

  Plan plan(const std::vector<UOp>& tensor_roots) {
    if (spec_enabled())
      for (const UOp& r : tensor_roots)
        verify_with_calls(r, rules::spec_tensor(), rules::spec_kernel_body());
    std::vector<UOp> bases = root_bases(tensor_roots);
    // function CALLs inlined (rules/call.rw) and the earliest rewrites (rules/rangeify.rw);
    // kernel CALLs stay, as units of the schedule. What an executed effect computed is done:
    // nothing under it is scheduled again.
    auto ran = [this](const UOp& u) {
      return (u.op() == Op::Store || is_kernel_call(u)) && executed(u);
    };
    KernelGraph g = get_kernel_graph(UOp::sink(bases), ran, kMaxFusedDepth);
    const UOp all = g.sink;
    std::vector<UOp> roots(all.src().begin(), all.src().end());
    const std::vector<UOp> order = toposort(
        all, [&](const UOp& u) { return !ran(u); }, /*enter_calls=*/false);
    rw::ScheduleContext facts = schedule_facts(order, roots);
    facts.staged = realized_nodes(g);
    std::vector<Kernel> ks;
    std::unordered_map<UOp, size_t> kernel_of;
    std::unordered_map<UOp, UOp> done;  // kernel outputs, and each assignment chain's buffer view
    auto add_kernel = [&](const UOp& u) {
      kernel_of.emplace(u, ks.size());
      ks.push_back(make_kernel(u));
    };
    const rw::RuleSetMatcher& boundary = rules::kernel_boundary();
    RewriteContext rctx{.user = &facts};
    std::vector<std::pair<UOp, const RuleInfo*>> decisions;  // for VIZ: what each rule realized
    for (const UOp& u : order) {
      if (u == all) continue;
      // an assignment chain reads its buffer; a chain over a view, that view of the buffer
      if (u.op() == Op::After) done.emplace(u, substitute(base_view(u), done, /*walk=*/true));
      // the node a rule realizes: u, or a source below it fused so far (depth_limit_broadcast)
      const RuleInfo* fired = nullptr;
      const std::optional<rw::Value> r = boundary.apply(u, rctx, &fired);
      const UOp cut = r ? r->as_uop().src(0) : UOp();
      if (cut && viz::enabled()) decisions.emplace_back(r->as_uop(), fired);
      if (cut && cut != u) {
        if (!facts.depth.erase(cut))
          throw std::logic_error("realize: a kernel-boundary rule realized a source not fused");
        add_kernel(cut);
        // the views between it and u now start from its buffer (other users of them keep their
        // older, longer depths: they may be cut earlier than needed, never later)
        std::vector<UOp> path;
        for (UOp v = u.src(0); v != cut && v.nsrc() > 0; v = v.src(0)) path.push_back(v);
        for (auto it = path.rbegin(); it != path.rend(); ++it) facts.fuse(*it);
      }
      if (cut == u)
        add_kernel(u);
      else
        facts.fuse(u);
    }
    record_boundaries(all, decisions);
    for (Kernel& k : ks) analyze(k, kernel_of);
    std::vector<size_t> schedule = order_kernels(ks);  // throws before anything runs
    return Plan{all,           std::move(bases),    std::move(roots),
                std::move(ks), std::move(schedule), std::move(done)};
  }

  // Realizes `roots` together (and every kernel boundary and pending assignment below them) and
  // returns each root's buffer view.
  std::vector<UOp> realize(const std::vector<UOp>& tensor_roots,
                           std::vector<std::shared_ptr<Storage>>& keep) {
    viz::Group group("realize");
    Plan p = plan(tensor_roots);
    const UOp& all = p.all;
    const std::vector<UOp>& roots = p.roots;
    std::vector<Kernel>& ks = p.ks;
    const std::vector<size_t>& schedule = p.order;
    std::unordered_map<UOp, UOp>& done = p.done;
    std::unordered_map<UOp, UOp> computed;  // the buffer view each computed kernel filled
    for (size_t i : schedule) {
      const Kernel& k = ks[i];
      if (k.node.op() == Op::Call) {
        restoring_on_error(k.node, k.writes, [&] { run_kernel_call(k.node, k.writes, done); });
        continue;
      }
      if (k.node.op() != Op::Store) {
        // walk: original nodes only, since a read before and one after an assignment look
        // alike once their chains are replaced by the buffer
        const UOp ready = substitute(k.node, done, /*walk=*/true);
        std::shared_ptr<Storage> out;
        computed[k.node] = run_kernel(ready, out);
        // (an assignment chain over a view mapped to that view above: its copy replaces it)
        done.insert_or_assign(k.node, computed[k.node]);
        keep.push_back(out);
        continue;
      }
      // an assignment: the value computed straight into the target's storage, or through a
      // temporary when the value reads the target other than element by element (another
      // element may already be overwritten)
      std::shared_ptr<Storage> target = storage(k.writes.at(0)), out;
      const bool temporary = k.reads_own_destination && !reads_in_place(k.node);
      const UOp dest = substitute(k.node.src(0), done, /*walk=*/true);
      UOp value = substitute(k.node.src(1), done, /*walk=*/true);
      if (!is_buffer_view(dest)) {  // a view of the target: written through its index map
        if (temporary) {
          std::shared_ptr<Storage> tmp;
          value = run_kernel(value, tmp);
          keep.push_back(tmp);
        }
        restoring_on_error(value, k.writes, [&] { run_kernel(value, target, dest); });
      } else {
        if (!temporary) out = target;
        restoring_on_error(value, out == target ? k.writes : std::vector<int64_t>{},
                           [&] { run_kernel(value, out); });
        if (out != target) {
          std::copy(out->bytes.begin(), out->bytes.end(), target->bytes.begin());
          target->uninitialized = false;
        }
      }
      target->executed_assignments.push_back(assignment_id(k.node));
    }
    // the schedule as one VIZ step: the tensor graph, and the kernels' outputs in order
    std::vector<UOp> outputs;
    for (size_t i : schedule)
      if (auto it = done.find(ks[i].node); it != done.end()) outputs.push_back(it->second);
    record_stage("schedule", all, UOp::sink(outputs));
    std::vector<UOp> views;
    for (size_t i = 0; i < roots.size(); ++i) {
      const UOp& r = roots[i];
      UOp v = computed.contains(r) ? computed.at(r) : settled(r);
      if (p.bases[i] != tensor_roots[i])
        v = is_buffer_view(v) ? buffer_view(v.src(0), tensor_roots[i].shape())
                              : v.reshape(tensor_roots[i].shape());
      views.push_back(v);
    }
    return views;
  }

  // The kernels of `tensor_roots` in the order they would run, each lowered as its kernel would
  // be (rules/rangeify.rw), nothing allocated or run: a computed kernel's output is a BUFFER
  // numbered like a storage but holding no memory. A kernel CALL is its own AST.
  std::vector<ScheduleItem> schedule(const std::vector<UOp>& tensor_roots) {
    viz::Group group("schedule");
    Plan p = plan(tensor_roots);
    std::vector<ScheduleItem> items;
    for (size_t i : p.order) {
      const UOp& node = p.ks[i].node;
      if (node.op() == Op::Call) {
        items.push_back({node, node});
        continue;
      }
      // an assignment: its value stored through the target view's index map
      const bool store = node.op() == Op::Store;
      const UOp value = substitute(store ? node.src(1) : node, p.done, true);
      const Dims shape = to_dims(value.shape());
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      const UOp dest = store ? substitute(node.src(0), p.done, true) : UOp();
      // a computed node's output: a fresh storage number, no memory
      const UOp out = store
                          ? view_root(dest).src(0)
                          : tinyrw::buffer_uop(node.dtype(), allocate_storage(node.dtype(), 0)->id,
                                               n, default_device());
      rw::RangeifyContext ctx;
      std::vector<UOp> ranges;
      std::vector<int64_t> slots;
      const UOp lowered = lower_node(value, ctx, ranges);
      const UOp dest_index = store ? store_index(dest, ranges, out, ctx) : UOp();
      items.push_back({node, kernel_ast(lowered, ranges, out, dest_index, slots)});
      // readers see the target's buffer (p.done), or the computed node's
      if (!store) p.done.insert_or_assign(node, buffer_view(out, to_shape(shape)));
    }
    return items;
  }

  // A root that is no kernel (a buffer, or an assignment chain over one) is read as it stands:
  // refused if an executed assignment outside its chain has overwritten it. Its result keeps the
  // buffer's state as a one-link chain, so later reads stay checked against later assignments.
  UOp settled(const UOp& root) const {
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

  // The kernel boundaries in the VIZ trace: one step per realized node, from the node to the
  // STAGE a rule of rules/schedule.rw answered, and as the result the graph with those STAGEs.
  static void record_boundaries(const UOp& graph,
                                const std::vector<std::pair<UOp, const RuleInfo*>>& decisions,
                                std::source_location loc = std::source_location::current()) {
    if (!viz::enabled()) return;
    const int call = viz::begin_rewrite("kernel boundaries", loc, graph, 0, "stage");
    std::unordered_map<UOp, UOp> staged;
    for (const auto& [stage, rule] : decisions) {
      viz::record_match(call, stage.src(0), stage, rule, std::chrono::nanoseconds(0));
      staged.emplace(stage.src(0), stage);
    }
    viz::end_rewrite(call, substitute(graph, staged, /*walk=*/true));
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
const std::vector<std::string>& last_kernel_names() { return g_kernel_names; }
const std::vector<UOp>& last_kernel_asts() { return g_kernel_asts; }
const std::vector<int64_t>& last_kernel_outputs() { return g_kernel_outputs; }

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
  // already a buffer that no assignment has touched: nothing to run or check
  if (is_buffer_view(uop_) && deps_.size() == 1 && deps_[0]->executed_assignments.empty())
    return *this;
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
    is_view.push_back(base != t->uop_ && is_buffer_state(base));
    roots.push_back(is_view.back() ? base : t->uop_);
  }
  g_kernel_count = 0;
  g_compile_count = 0;
  g_kernel_outputs.clear();
  g_kernel_names.clear();
  g_kernel_asts.clear();
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
    t.deps_ = {r.storage(Realizer::storage_of(Realizer::base_view(views[i])))};
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

std::vector<double> Tensor::to_doubles() {
  realize();
  if (view_base(uop_) != uop_) return contiguous().to_doubles();  // a view: its elements in order
  const Storage& s = *deps_.at(0);
  std::vector<double> out;
  for (int64_t i = 0; i < s.size; ++i) out.push_back(load_element(s, i).as_float());
  return out;
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
  realize();
  if (view_base(uop_) != uop_) return contiguous().data<T>();  // a view: its elements in order
  const Storage& s = *deps_.at(0);
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
