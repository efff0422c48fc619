// The HIP device: the HIP runtime from libamdhip64 (Debian's libamdhip64-5), loaded with dlopen
// (never linked, so tinyrw runs where ROCm is not installed). Its header (libamdhip64-dev)
// gives the types; HIP_RUNTIME_LIBRARY names another library file to load.

#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

#include <fmt/format.h>

#include "runtime/driver_library.h"
#include "runtime/gpu_runtime.h"

#if __has_include(<hip/hip_runtime_api.h>)
#define __HIP_PLATFORM_AMD__ 1
#include <hip/hip_runtime_api.h>
#define TINYRW_HIP_HEADERS 1
#endif

namespace tinyrw {

#ifndef TINYRW_HIP_HEADERS

std::unique_ptr<GpuRuntime> open_hip(int) {
  throw TensorError(
      "HIP: tinyrw was built without HIP's header (Debian's libamdhip64-dev, which "
      "scripts/setup.sh installs): rebuild with it for the HIP device");
}

#else

namespace {

// The entry points used (declared here as pointers: the header's own declarations are never
// linked).
struct HipApi {
  hipError_t (*hipInit)(unsigned);
  hipError_t (*hipGetDeviceCount)(int*);
  hipError_t (*hipSetDevice)(int);
  hipError_t (*hipGetDeviceProperties)(hipDeviceProp_t*, int);
  hipError_t (*hipDriverGetVersion)(int*);
  hipError_t (*hipDeviceSynchronize)();
  hipError_t (*hipMalloc)(void**, size_t);
  hipError_t (*hipFree)(void*);
  hipError_t (*hipMemcpyHtoD)(hipDeviceptr_t, void*, size_t);
  hipError_t (*hipMemcpyDtoH)(void*, hipDeviceptr_t, size_t);
  hipError_t (*hipModuleLoadData)(hipModule_t*, const void*);
  hipError_t (*hipModuleGetFunction)(hipFunction_t*, hipModule_t, const char*);
  hipError_t (*hipModuleUnload)(hipModule_t);
  hipError_t (*hipModuleLaunchKernel)(hipFunction_t, unsigned, unsigned, unsigned, unsigned,
                                      unsigned, unsigned, unsigned, hipStream_t, void**, void**);
  hipError_t (*hipEventCreate)(hipEvent_t*);
  hipError_t (*hipEventRecord)(hipEvent_t, hipStream_t);
  hipError_t (*hipEventSynchronize)(hipEvent_t);
  hipError_t (*hipEventElapsedTime)(float*, hipEvent_t, hipEvent_t);
  hipError_t (*hipEventDestroy)(hipEvent_t);
  const char* (*hipGetErrorName)(hipError_t);
  const char* (*hipGetErrorString)(hipError_t);
};

// The runtime library, loaded once; a TensorError when it cannot be.
const HipApi& hip_api() {
  return load_once<HipApi>([](HipApi& a) {
    const DriverLibrary lib("HIP", "HIP_RUNTIME_LIBRARY", "libamdhip64.so.5", "runtime library",
                            "install Debian's libamdhip64-5");
    lib.resolve("hipInit", a.hipInit);
    lib.resolve("hipGetDeviceCount", a.hipGetDeviceCount);
    lib.resolve("hipSetDevice", a.hipSetDevice);
    lib.resolve("hipGetDeviceProperties", a.hipGetDeviceProperties);
    lib.resolve("hipDriverGetVersion", a.hipDriverGetVersion);
    lib.resolve("hipDeviceSynchronize", a.hipDeviceSynchronize);
    lib.resolve("hipMalloc", a.hipMalloc);
    lib.resolve("hipFree", a.hipFree);
    lib.resolve("hipMemcpyHtoD", a.hipMemcpyHtoD);
    lib.resolve("hipMemcpyDtoH", a.hipMemcpyDtoH);
    lib.resolve("hipModuleLoadData", a.hipModuleLoadData);
    lib.resolve("hipModuleGetFunction", a.hipModuleGetFunction);
    lib.resolve("hipModuleUnload", a.hipModuleUnload);
    lib.resolve("hipModuleLaunchKernel", a.hipModuleLaunchKernel);
    lib.resolve("hipEventCreate", a.hipEventCreate);
    lib.resolve("hipEventRecord", a.hipEventRecord);
    lib.resolve("hipEventSynchronize", a.hipEventSynchronize);
    lib.resolve("hipEventElapsedTime", a.hipEventElapsedTime);
    lib.resolve("hipEventDestroy", a.hipEventDestroy);
    lib.resolve("hipGetErrorName", a.hipGetErrorName);
    lib.resolve("hipGetErrorString", a.hipGetErrorString);
  });
}

// A failed call as "HIP: hipMalloc of 64 bytes: hipErrorOutOfMemory (out of memory)".
void check(hipError_t r, const char* call, const std::string& detail = "") {
  if (r == hipSuccess) return;
  const HipApi& api = hip_api();
  throw TensorError(fmt::format("HIP: {}{}: {} ({})", call, detail, api.hipGetErrorName(r),
                                api.hipGetErrorString(r)));
}

class HipKernel final : public GpuKernel {
 public:
  HipKernel(int d, hipModule_t m, hipFunction_t f) : device(d), module(m), function(f) {}
  // (unloaded on its device, which need not be this thread's)
  ~HipKernel() override {
    if (gpu_runtimes_closing()) return;
    const HipApi& api = hip_api();
    if (api.hipSetDevice(device) == hipSuccess) (void)api.hipModuleUnload(module);
  }
  int device;
  hipModule_t module;
  hipFunction_t function;
};

class Hip final : public GpuRuntime {
 public:
  explicit Hip(int index) : api_(hip_api()), index_(index) {
    check(api_.hipInit(0), "hipInit");
    int count = 0;
    check(api_.hipGetDeviceCount(&count), "hipGetDeviceCount");
    if (index >= count)
      throw TensorError(index == 0 ? std::string("HIP: the runtime finds no device")
                                   : fmt::format("HIP:{}: the runtime finds {} device{}", index,
                                                 count, count == 1 ? "" : "s"));
    check(api_.hipGetDeviceProperties(&props_, index), "hipGetDeviceProperties");
    // "gfx90a:sramecc+:xnack-": the processor before the features
    const std::string arch(props_.gcnArchName);
    arch_ = arch.substr(0, arch.find(':'));
  }

  std::string arch() const override { return arch_; }

  std::string describe() const override {
    int driver = 0;
    check(api_.hipDriverGetVersion(&driver), "hipDriverGetVersion");
    return fmt::format(
        "{}, {}, {} compute units, {} threads per block at most, {:.1f} GiB, "
        "driver {}",
        props_.name, arch_, props_.multiProcessorCount, props_.maxThreadsPerBlock,
        static_cast<double>(props_.totalGlobalMem) / (1 << 30), driver);
  }

  uint64_t allocate(size_t bytes) override {
    current();
    void* p = nullptr;
    check(api_.hipMalloc(&p, bytes), "hipMalloc", fmt::format(" of {} bytes", bytes));
    return reinterpret_cast<uint64_t>(p);
  }
  void release(uint64_t address) noexcept override {
    if (api_.hipSetDevice(index_) == hipSuccess)
      (void)api_.hipFree(reinterpret_cast<void*>(address));
  }
  void copy_in(uint64_t to, const void* from, size_t bytes) override {
    current();
    check(api_.hipMemcpyHtoD(reinterpret_cast<hipDeviceptr_t>(to), const_cast<void*>(from), bytes),
          "hipMemcpyHtoD");
  }
  void copy_out(void* to, uint64_t from, size_t bytes) override {
    current();
    check(api_.hipMemcpyDtoH(to, reinterpret_cast<hipDeviceptr_t>(from), bytes), "hipMemcpyDtoH");
  }

  std::shared_ptr<GpuKernel> load(const std::string& image, const std::string& name) override {
    current();
    hipModule_t m = nullptr;
    check(api_.hipModuleLoadData(&m, image.data()), "hipModuleLoadData",
          fmt::format(" of kernel {} for {}", name, arch_));
    hipFunction_t f = nullptr;
    const hipError_t g = api_.hipModuleGetFunction(&f, m, name.c_str());
    if (g != hipSuccess) {
      (void)api_.hipModuleUnload(m);
      check(g, "hipModuleGetFunction", fmt::format(" {}", name));
    }
    return std::make_shared<HipKernel>(index_, m, f);
  }

  void synchronize() override {
    current();
    check(api_.hipDeviceSynchronize(), "hipDeviceSynchronize");
  }

 protected:
  void launch_kernel(const GpuKernel& k, const std::array<unsigned, 3>& global,
                     const std::array<unsigned, 3>& local, void** args) override {
    current();
    check(api_.hipModuleLaunchKernel(static_cast<const HipKernel&>(k).function, global[0],
                                     global[1], global[2], local[0], local[1], local[2], 0, nullptr,
                                     args, nullptr),
          "hipModuleLaunchKernel");
  }

  class Events final : public EventPair {
   public:
    explicit Events(const HipApi& api) : api_(api) {}
    // (not in the constructor: what it made is destroyed when a later call fails)
    void begin() {
      check(api_.hipEventCreate(&start_), "hipEventCreate");
      check(api_.hipEventCreate(&end_), "hipEventCreate");
      check(api_.hipEventRecord(start_, nullptr), "hipEventRecord");
    }
    ~Events() override {
      if (start_) (void)api_.hipEventDestroy(start_);
      if (end_) (void)api_.hipEventDestroy(end_);
    }
    double stop() override {
      float ms = 0;
      check(api_.hipEventRecord(end_, nullptr), "hipEventRecord");
      check(api_.hipEventSynchronize(end_), "hipEventSynchronize");
      check(api_.hipEventElapsedTime(&ms, start_, end_), "hipEventElapsedTime");
      return ms * 1e-3;
    }

   private:
    const HipApi& api_;
    hipEvent_t start_ = nullptr, end_ = nullptr;
  };
  std::unique_ptr<EventPair> start_events() override {
    current();
    auto events = std::make_unique<Events>(api_);
    events->begin();
    return events;
  }

 private:
  // the device a thread's calls go to is per thread: every call sets this one
  void current() const { check(api_.hipSetDevice(index_), "hipSetDevice"); }

  const HipApi& api_;
  int index_;
  hipDeviceProp_t props_{};
  std::string arch_;
};

}  // namespace

std::unique_ptr<GpuRuntime> open_hip(int index) { return std::make_unique<Hip>(index); }

#endif

}  // namespace tinyrw
