// GPU devices, CUDA and HIP: their runtimes, each loaded with dlopen on first use (tinyrw builds,
// and runs everything else, where no GPU driver is installed), and the device memory of buffers
// on them.
//
// A buffer on a GPU keeps its host bytes (runtime/storage.h) as a staging copy: tensors are made
// from host data into them and read out of them. Each buffer records which of its two copies is
// current; a kernel makes the device's current (copying in only when the host's is newer), a read
// makes the host's current (copying out only when the device's is newer), and a transfer between
// a GPU and the host moves the contents once (between two GPUs, through host memory). Each
// buffer's record is changed under a lock: two devices' queues may use one buffer at once.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/uop.h"
#include "runtime/storage.h"

namespace tinyrw {

// A kernel loaded onto a device (a module and its function); unloaded when the last owner drops.
class GpuKernel {
 public:
  virtual ~GpuKernel() = default;
};

// One GPU, through its vendor's runtime. Every call may come from any thread (a device queue's):
// each makes the device's context current first. Failures raise TensorError naming the call and
// the runtime's error.
class GpuRuntime {
 public:
  virtual ~GpuRuntime() = default;
  virtual std::string arch() const = 0;      // "sm_90", "gfx90a"
  virtual std::string describe() const = 0;  // name, arch, memory, driver: the device query
  virtual uint64_t allocate(size_t bytes) = 0;
  virtual void release(uint64_t address) noexcept = 0;
  virtual void copy_in(uint64_t to, const void* from, size_t bytes) = 0;
  virtual void copy_out(void* to, uint64_t from, size_t bytes) = 0;
  // The code object `image` (PTX text for CUDA, an ELF code object for HIP) loaded, and its
  // kernel `name`.
  virtual std::shared_ptr<GpuKernel> load(const std::string& image, const std::string& name) = 0;
  // Launches `k` over `global` workgroups of `local` threads; `args[i]` points at argument i's
  // value. With `timed`, waits for it and returns its time in seconds between two events around
  // it; else returns 0 at once.
  double launch(const GpuKernel& k, const std::array<int64_t, 3>& global,
                const std::array<int64_t, 3>& local, void** args, bool timed);
  virtual void synchronize() = 0;

 protected:
  // Two events on the device's queue: the first recorded when made, the second by stop(), which
  // waits for it and returns the seconds between them. Destroyed however the launch ends.
  class EventPair {
   public:
    virtual ~EventPair() = default;
    virtual double stop() = 0;
  };
  virtual std::unique_ptr<EventPair> start_events() = 0;
  virtual void launch_kernel(const GpuKernel& k, const std::array<unsigned, 3>& global,
                             const std::array<unsigned, 3>& local, void** args) = 0;
};

// Whether a device is a GPU: base CUDA or HIP (runtime/device.h).
bool is_gpu_device(std::string_view canonical);
// The runtime of GPU device `canonical` ("CUDA", "CUDA:1", "HIP"), opened on first use. Throws a
// TensorError saying why it cannot be: no driver library (the dlopen error), a missing symbol,
// no device, an index beyond the devices there.
GpuRuntime& gpu_runtime(const std::string& canonical);
// That reason, or nothing where the device opens.
std::optional<std::string> gpu_unavailable(const std::string& canonical);
// Makes `runtime` GPU device `canonical` in place of what the driver would open, before anything
// used that device: a runtime made elsewhere (the tests' host memory standing in for a device, so
// that the bookkeeping of the two copies is checked without a GPU). Throws std::logic_error when
// the device is in use already.
void install_gpu_runtime(const std::string& canonical, std::unique_ptr<GpuRuntime> runtime);

// Device memory of a buffer, given back to its runtime's pool of freed blocks when dropped (one
// owner: not copyable).
struct DeviceMemory {
  DeviceMemory(GpuRuntime* r, uint64_t a, size_t n) : runtime(r), address(a), bytes(n) {}
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory();
  GpuRuntime* const runtime;
  const uint64_t address;
  const size_t bytes;
};

// True once the process is exiting: the drivers may be torn down before the last kernels and
// buffers are dropped, which then leave them to the process's end instead of calling the driver.
bool gpu_runtimes_closing();

// The device address of a buffer on a GPU, holding its contents (allocated on first use; copied
// in when the host bytes are newer).
uint64_t device_address(Storage& s);
// After a kernel on the GPU wrote the buffer: its host bytes are stale.
void written_on_device(Storage& s);
// Makes the buffer's host bytes current (copied out of its GPU when the device's are newer).
void make_host_current(Storage& s);
// After its host bytes were written (a receive, a restore): the device's copy is stale.
void written_on_host(Storage& s);
// `src`'s contents into `dst` (one size and dtype; either on any device): a GPU's copy in or out,
// or host memory.
void copy_contents(Storage& dst, Storage& src);

// A kernel ready to launch on a GPU: loaded, with its launch sizes and its arguments' order.
struct GpuProgram {
  std::string device;  // canonical
  std::string name;
  std::shared_ptr<GpuKernel> kernel;
  std::array<int64_t, 3> global_size{1, 1, 1}, local_size{1, 1, 1};
  std::vector<int64_t> input_slots;    // the buffers' PARAM slots, in argument order
  std::vector<bool> writes;            // whether it stores into each of them
  std::vector<std::string> variables;  // then the variables' names
  bool may_raise = false;              // checks the error flag after each launch
  std::string ir;                      // the LLVM IR it was compiled from (DEBUG=2)
};
// LINEAR program `program` (lowered for the device's target) rendered as LLVM IR, compiled for
// the device's architecture (runtime/gpu_compile.h) and loaded.
GpuProgram load_gpu_program(const UOp& program, const std::string& name, const std::string& device);
// Runs it over `buffers` (by input slot order) with `values` (by variables' order): raises the
// division by zero the kernel met. Returns the kernel's time in seconds with `timed`, else 0.
double run_gpu_program(const GpuProgram& p, const std::vector<Storage*>& buffers,
                       const std::vector<int64_t>& values, bool timed);

// Whether a kernel may raise when it runs (unlike ir/graph.h's may_raise, which asks the ranges):
// an integer division or modulo whose divisor is not a constant, or is the constant 0.
bool kernel_may_raise(const UOp& graph);

}  // namespace tinyrw
