// GPU devices: the registry of opened runtimes, pooled device memory, the two copies of a GPU
// buffer, and loading and launching kernels. The runtimes themselves are in cuda.cpp and hip.cpp.
#include "runtime/gpu_runtime.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "codegen/linearize.h"
#include "ir/graph.h"
#include "runtime/device.h"
#include "runtime/driver_library.h"
#include "runtime/gpu_compile.h"
#include "runtime/kernel_error.h"
#include "runtime/llvm_render.h"

namespace tinyrw {

// cuda.cpp and hip.cpp: device `index` opened, or a TensorError saying why not.
std::unique_ptr<GpuRuntime> open_cuda(int index);
std::unique_ptr<GpuRuntime> open_hip(int index);

namespace {

// A runtime opened once per device, or the reason it could not be (not retried: a driver does
// not appear while a process runs). Never destroyed: buffers may outlive static destructors.
struct Opened {
  GpuRuntime* runtime = nullptr;
  std::string why;
};
std::mutex g_open_mu;
std::map<std::string, Opened>& opened() {
  static auto* m = new std::map<std::string, Opened>();
  return *m;
}

std::atomic<bool> g_closing{false};

const Opened& open_device(const std::string& canonical) {
  std::lock_guard lock(g_open_mu);
  auto [it, fresh] = opened().try_emplace(canonical);
  if (!fresh) return it->second;
  static std::once_flag at_exit;
  std::call_once(at_exit, [] { std::atexit([] { g_closing = true; }); });
  try {
    const size_t colon = canonical.find(':');
    const int index = colon == std::string::npos ? 0 : std::stoi(canonical.substr(colon + 1));
    it->second.runtime =
        (device_base(canonical) == "CUDA" ? open_cuda(index) : open_hip(index)).release();
  } catch (const std::exception& e) {
    it->second.why = e.what();
    if (it->second.why.empty()) it->second.why = canonical + ": cannot open (no reason given)";
  }
  return it->second;
}

// Freed device blocks by runtime and size, reused before allocating: a CUDA free synchronizes
// the device, and an allocation costs far more than a kernel's launch.
constexpr size_t kPoolLimit = size_t{4} << 30;  // bytes kept per runtime at most
struct BlockPool {
  std::mutex mu;
  std::unordered_multimap<size_t, uint64_t> free;
  size_t bytes = 0;
};
BlockPool& pool_of(GpuRuntime* rt) {
  static auto* pools = new std::map<GpuRuntime*, BlockPool>();
  static std::mutex mu;
  std::lock_guard lock(mu);
  return (*pools)[rt];
}

// A block of `bytes`: a freed one of that size, else a new one; when the device is out of memory,
// the pool's blocks are given back to it and the allocation tried once more.
std::shared_ptr<DeviceMemory> allocate_device_memory(GpuRuntime& rt, size_t bytes) {
  BlockPool& pool = pool_of(&rt);
  {
    std::lock_guard lock(pool.mu);
    if (auto it = pool.free.find(bytes); it != pool.free.end()) {
      const uint64_t address = it->second;
      pool.free.erase(it);
      pool.bytes -= bytes;
      return std::make_shared<DeviceMemory>(&rt, address, bytes);
    }
  }
  uint64_t address = 0;
  try {
    address = rt.allocate(bytes);
  } catch (const TensorError&) {
    std::unordered_multimap<size_t, uint64_t> pooled;
    {
      std::lock_guard lock(pool.mu);
      pooled.swap(pool.free);
      pool.bytes = 0;
    }
    if (pooled.empty()) throw;
    for (const auto& [size, block] : pooled) rt.release(block);
    address = rt.allocate(bytes);
  }
  return std::make_shared<DeviceMemory>(&rt, address, bytes);
}

// The lock of a buffer's two-copies record (striped by address: buffers are many, contention is
// rare). Recursive: copy_contents holds two and calls what takes one of them again.
std::recursive_mutex& lock_of(const Storage& s) {
  static std::array<std::recursive_mutex, 64> locks;
  return locks[(reinterpret_cast<uintptr_t>(&s) / alignof(Storage)) % locks.size()];
}

size_t byte_size(const Storage& s) {
  return static_cast<size_t>(s.size) * static_cast<size_t>(s.dtype.itemsize());
}

// The PTX target for a CUDA device: its own up to sm_86, LLVM 15's newest (a newer device's
// driver compiles PTX for it when it loads it).
std::string ptx_arch(const std::string& device_arch) {
  const int sm = std::stoi(device_arch.substr(3));
  return sm > 86 ? "sm_86" : device_arch;
}

}  // namespace

DeviceMemory::~DeviceMemory() {
  if (g_closing) return;  // the process's end frees it with the driver
  BlockPool& pool = pool_of(runtime);
  {
    std::lock_guard lock(pool.mu);
    if (pool.bytes + bytes <= kPoolLimit) {
      pool.free.emplace(bytes, address);
      pool.bytes += bytes;
      return;
    }
  }
  runtime->release(address);
}

bool gpu_runtimes_closing() { return g_closing; }

DriverLibrary::DriverLibrary(std::string who, const char* env, const char* file,
                             const std::string& kind, const std::string& hint)
    : who_(std::move(who)) {
  const char* chosen = std::getenv(env);
  path_ = chosen ? chosen : file;
  handle_ = dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_)
    throw TensorError(
        fmt::format("{}: cannot load the {} {} ({}): {}", who_, kind, path_, dlerror(), hint));
}

void* DriverLibrary::lookup(const char* symbol) const {
  void* fn = dlsym(handle_, symbol);
  if (!fn) throw TensorError(fmt::format("{}: {} has no {}: not {}'s", who_, path_, symbol, who_));
  return fn;
}

double GpuRuntime::launch(const GpuKernel& k, const std::array<int64_t, 3>& global,
                          const std::array<int64_t, 3>& local, void** args, bool timed) {
  std::array<unsigned, 3> g{}, l{};  // (launch_shape keeps each within the target's limits)
  for (size_t d = 0; d < 3; ++d) {
    g[d] = static_cast<unsigned>(global[d]);
    l[d] = static_cast<unsigned>(local[d]);
  }
  const std::unique_ptr<EventPair> events = timed ? start_events() : nullptr;
  launch_kernel(k, g, l, args);
  return events ? events->stop() : 0;
}

bool is_gpu_device(std::string_view canonical) {
  const std::string base = device_base(canonical);
  return base == "CUDA" || base == "HIP";
}

void install_gpu_runtime(const std::string& canonical, std::unique_ptr<GpuRuntime> runtime) {
  std::lock_guard lock(g_open_mu);
  auto [it, fresh] = opened().try_emplace(canonical);
  if (!fresh && it->second.runtime)
    throw std::logic_error(fmt::format("install_gpu_runtime: {} is open already", canonical));
  it->second = Opened{.runtime = runtime.release(), .why = ""};
}

GpuRuntime& gpu_runtime(const std::string& canonical) {
  const Opened& o = open_device(canonical);
  if (!o.runtime) throw TensorError(o.why);
  return *o.runtime;
}

std::optional<std::string> gpu_unavailable(const std::string& canonical) {
  const Opened& o = open_device(canonical);
  if (o.runtime) return std::nullopt;
  return o.why;
}

uint64_t device_address(Storage& s) {
  std::lock_guard lock(lock_of(s));
  if (!s.device_memory)
    s.device_memory =
        allocate_device_memory(gpu_runtime(s.device), std::max<size_t>(1, byte_size(s)));
  if (!s.device_current && s.host_current && byte_size(s) > 0)
    s.device_memory->runtime->copy_in(s.device_memory->address, s.bytes.data(), byte_size(s));
  s.device_current = true;
  return s.device_memory->address;
}

void written_on_device(Storage& s) {
  std::lock_guard lock(lock_of(s));
  s.device_current = true;
  s.host_current = false;
}

void make_host_current(Storage& s) {
  std::lock_guard lock(lock_of(s));
  if (s.host_current || !s.device_current || !s.device_memory) return;
  if (byte_size(s) > 0)
    s.device_memory->runtime->copy_out(s.bytes.data(), s.device_memory->address, byte_size(s));
  s.host_current = true;
}

void written_on_host(Storage& s) {
  std::lock_guard lock(lock_of(s));
  s.host_current = true;
  s.device_current = false;
}

void copy_contents(Storage& dst, Storage& src) {
  const size_t n = byte_size(src);
  if (n == 0) return;
  std::scoped_lock lock(lock_of(dst), lock_of(src));
  const bool to_gpu = is_gpu_device(dst.device);
  // from a GPU whose copy is the current one straight into the host bytes it goes to
  if (is_gpu_device(src.device) && !src.host_current && src.device_current) {
    if (!to_gpu) {
      src.device_memory->runtime->copy_out(dst.bytes.data(), src.device_memory->address, n);
      return;
    }
    make_host_current(src);
  }
  if (to_gpu) {
    if (!dst.device_memory) dst.device_memory = allocate_device_memory(gpu_runtime(dst.device), n);
    dst.device_memory->runtime->copy_in(dst.device_memory->address, src.bytes.data(), n);
    written_on_device(dst);
  } else {
    std::memcpy(dst.bytes.data(), src.bytes.data(), n);
  }
}

bool kernel_may_raise(const UOp& graph) {
  for (const UOp& u : toposort(graph, nullptr, /*enter_calls=*/true))
    if ((u.op() == Op::CDiv || u.op() == Op::CMod || u.op() == Op::FloorDiv ||
         u.op() == Op::FloorMod) &&
        !u.dtype().is_float() && (u.src(1).op() != Op::Const || u.src(1).arg().as_int() == 0))
      return true;
  return false;
}

namespace {
// Whether `program` stores into each of `slots`: every STORE's address leads, through first
// sources (INDEX, casts, AFTER), to its BUFFER. A store whose buffer is not found so counts as a
// store into every one (its host copies are then read back, never left stale).
std::vector<bool> stored_slots(const UOp& program, const std::vector<int64_t>& slots) {
  std::set<int64_t> stored;
  for (const UOp& u : toposort(program)) {
    if (u.op() != Op::Store) continue;
    UOp at = u.src(0);
    while (at.op() != Op::Buffer && at.nsrc() > 0) at = at.src(0);
    if (at.op() != Op::Buffer) return std::vector<bool>(slots.size(), true);
    if (buffer_addrspace(at) == AddrSpace::Global)
      stored.insert(static_cast<int64_t>(at.arg().field("slot").as_int()));
  }
  std::vector<bool> writes;
  for (int64_t slot : slots) writes.push_back(stored.contains(slot));
  return writes;
}
}  // namespace

GpuProgram load_gpu_program(const UOp& program, const std::string& name,
                            const std::string& device) {
  GpuRuntime& rt = gpu_runtime(device);
  const bool cuda = device_base(device) == "CUDA";
  const RenderedKernel r =
      render_llvm(program, cuda ? LlvmTarget::Nvptx : LlvmTarget::Amdgpu, name);
  const std::string image =
      cuda ? compile_ptx(r.ir, ptx_arch(rt.arch())) : compile_amdgpu(r.ir, rt.arch());
  return GpuProgram{.device = device,
                    .name = r.name,
                    .kernel = rt.load(image, r.name),
                    .global_size = r.global_size,
                    .local_size = r.local_size,
                    .input_slots = r.input_slots,
                    .writes = stored_slots(program, r.input_slots),
                    .variables = r.variables,
                    .may_raise = kernel_may_raise(program),
                    .ir = r.ir};
}

double run_gpu_program(const GpuProgram& p, const std::vector<Storage*>& buffers,
                       const std::vector<int64_t>& values, bool timed) {
  GpuRuntime& rt = gpu_runtime(p.device);
  // the error flag: one int32 per device, cleared before a kernel that may raise (launches on
  // one device run one after another, on its queue)
  static std::mutex flag_mu;
  static std::map<GpuRuntime*, std::shared_ptr<DeviceMemory>> flags;
  std::shared_ptr<DeviceMemory> flag;
  {
    std::lock_guard lock(flag_mu);
    std::shared_ptr<DeviceMemory>& f = flags[&rt];
    if (!f) f = allocate_device_memory(rt, sizeof(int32_t));
    flag = f;
  }
  const int32_t clear = 0;
  if (p.may_raise) rt.copy_in(flag->address, &clear, sizeof(clear));
  // the kernel's parameters in llvm_render's order: buffers, the flag, the variables' values
  std::vector<uint64_t> addresses;
  for (Storage* s : buffers) addresses.push_back(device_address(*s));
  addresses.push_back(flag->address);
  std::vector<int64_t> vars = values;
  std::vector<void*> args;
  for (uint64_t& a : addresses) args.push_back(&a);
  for (int64_t& v : vars) args.push_back(&v);
  double seconds = 0;
  try {
    seconds = rt.launch(*p.kernel, p.global_size, p.local_size, args.data(), timed);
  } catch (const TensorError& e) {
    throw TensorError(fmt::format("{} (kernel {} over {}x{}x{} workgroups of {}x{}x{} threads)",
                                  e.what(), p.name, p.global_size[0], p.global_size[1],
                                  p.global_size[2], p.local_size[0], p.local_size[1],
                                  p.local_size[2]));
  }
  for (size_t i = 0; i < buffers.size(); ++i)
    if (p.writes.at(i)) written_on_device(*buffers[i]);
  if (p.may_raise) {
    int32_t code = 0;
    rt.copy_out(&code, flag->address, sizeof(code));
    if (code != 0) {
      if (const std::optional<Op> op = kernel_error_op(code)) throw division_by_zero(p.device, *op);
      throw std::logic_error(
          fmt::format("{}: kernel {} reported the unknown error code {}", p.device, p.name, code));
    }
  }
  return seconds;
}

}  // namespace tinyrw
