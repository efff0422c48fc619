// The CUDA device: the CUDA Driver API from libcuda.so.1, loaded with dlopen (never linked, so
// tinyrw builds and runs where no NVIDIA driver is installed). The few types and constants of
// cuda.h it needs are declared here (the Driver API's ABI is stable), so no CUDA toolkit is
// needed to build it either. CUDA_DRIVER_LIBRARY names another library file to load.

#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "runtime/driver_library.h"
#include "runtime/gpu_runtime.h"

namespace tinyrw {

namespace {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUevent = struct CUevent_st*;
using CUstream = struct CUstream_st*;
constexpr CUresult kSuccess = 0;
constexpr int kAttrMaxThreadsPerBlock = 1, kAttrMultiprocessors = 16, kAttrMajor = 75,
              kAttrMinor = 76;
constexpr int kJitErrorLogBuffer = 5, kJitErrorLogBufferSize = 6;
constexpr int kOldestDriver = 11050;  // cuDriverGetVersion's 1000 * major + 10 * minor

// The entry points used, by their exported names (the _v2 ones are the 64-bit-size forms cuda.h
// maps the plain names to).
struct CudaApi {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDriverGetVersion)(int*);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*cuDeviceTotalMem)(size_t*, CUdevice);
  CUresult (*cuCtxCreate)(CUcontext*, unsigned, CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t);
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t);
  CUresult (*cuModuleLoadDataEx)(CUmodule*, const void*, unsigned, int*, void**);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**, void**);
  CUresult (*cuEventCreate)(CUevent*, unsigned);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuGetErrorName)(CUresult, const char**);
  CUresult (*cuGetErrorString)(CUresult, const char**);
};

// The driver library, loaded once; a TensorError when it cannot be.
const CudaApi& cuda_api() {
  return load_once<CudaApi>([](CudaApi& a) {
    const DriverLibrary lib("CUDA", "CUDA_DRIVER_LIBRARY", "libcuda.so.1", "driver library",
                            "no NVIDIA driver here");
    lib.resolve("cuInit", a.cuInit);
    lib.resolve("cuDriverGetVersion", a.cuDriverGetVersion);
    lib.resolve("cuDeviceGetCount", a.cuDeviceGetCount);
    lib.resolve("cuDeviceGet", a.cuDeviceGet);
    lib.resolve("cuDeviceGetName", a.cuDeviceGetName);
    lib.resolve("cuDeviceGetAttribute", a.cuDeviceGetAttribute);
    lib.resolve("cuDeviceTotalMem_v2", a.cuDeviceTotalMem);
    lib.resolve("cuCtxCreate_v2", a.cuCtxCreate);
    lib.resolve("cuCtxSetCurrent", a.cuCtxSetCurrent);
    lib.resolve("cuCtxSynchronize", a.cuCtxSynchronize);
    lib.resolve("cuMemAlloc_v2", a.cuMemAlloc);
    lib.resolve("cuMemFree_v2", a.cuMemFree);
    lib.resolve("cuMemcpyHtoD_v2", a.cuMemcpyHtoD);
    lib.resolve("cuMemcpyDtoH_v2", a.cuMemcpyDtoH);
    lib.resolve("cuModuleLoadDataEx", a.cuModuleLoadDataEx);
    lib.resolve("cuModuleGetFunction", a.cuModuleGetFunction);
    lib.resolve("cuModuleUnload", a.cuModuleUnload);
    lib.resolve("cuLaunchKernel", a.cuLaunchKernel);
    lib.resolve("cuEventCreate", a.cuEventCreate);
    lib.resolve("cuEventRecord", a.cuEventRecord);
    lib.resolve("cuEventSynchronize", a.cuEventSynchronize);
    lib.resolve("cuEventElapsedTime", a.cuEventElapsedTime);
    lib.resolve("cuEventDestroy_v2", a.cuEventDestroy);
    lib.resolve("cuGetErrorName", a.cuGetErrorName);
    lib.resolve("cuGetErrorString", a.cuGetErrorString);
  });
}

// The names of the errors a user is likely to meet, for a driver that cannot name its own (the
// toolkit's stub library answers every call, cuGetErrorName too, with CUDA_ERROR_STUB_LIBRARY).
const char* known_error_name(CUresult r) {
  switch (r) {
    case 1:
      return "CUDA_ERROR_INVALID_VALUE";
    case 2:
      return "CUDA_ERROR_OUT_OF_MEMORY";
    case 3:
      return "CUDA_ERROR_NOT_INITIALIZED";
    case 34:
      return "CUDA_ERROR_STUB_LIBRARY";
    case 100:
      return "CUDA_ERROR_NO_DEVICE";
    case 101:
      return "CUDA_ERROR_INVALID_DEVICE";
    case 209:
      return "CUDA_ERROR_NO_BINARY_FOR_GPU";
    case 218:
      return "CUDA_ERROR_INVALID_PTX";
    case 222:
      return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
    case 500:
      return "CUDA_ERROR_NOT_FOUND";
    case 700:
      return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case 701:
      return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
    case 719:
      return "CUDA_ERROR_LAUNCH_FAILED";
    case 803:
      return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    case 804:
      return "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE";
    default:
      return nullptr;
  }
}

// A failed call as "CUDA: cuMemAlloc of 64 bytes: CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
void check(CUresult r, const char* call, const std::string& detail = "") {
  if (r == kSuccess) return;
  const CudaApi& api = cuda_api();
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.cuGetErrorName(r, &name) != kSuccess) name = known_error_name(r);
  if (api.cuGetErrorString(r, &text) != kSuccess) text = nullptr;
  throw TensorError(fmt::format("CUDA: {}{}: {} ({})", call, detail,
                                name ? name : fmt::format("error {}", r),
                                text ? text : "the driver gives no description"));
}

class CudaKernel final : public GpuKernel {
 public:
  CudaKernel(CUcontext c, CUmodule m, CUfunction f) : context(c), module(m), function(f) {}
  // (unloaded from its device's context, which need not be this thread's)
  ~CudaKernel() override {
    if (gpu_runtimes_closing()) return;
    const CudaApi& api = cuda_api();
    if (api.cuCtxSetCurrent(context) == kSuccess) (void)api.cuModuleUnload(module);
  }
  CUcontext context;
  CUmodule module;
  CUfunction function;
};

class Cuda final : public GpuRuntime {
 public:
  explicit Cuda(int index) : api_(cuda_api()) {
    check(api_.cuInit(0), "cuInit");
    // the kernels are PTX 7.5 (runtime/gpu_compile.h), which drivers before CUDA 11.5 refuse
    int driver = 0;
    check(api_.cuDriverGetVersion(&driver), "cuDriverGetVersion");
    if (driver < kOldestDriver)
      throw TensorError(fmt::format(
          "CUDA: the driver supports CUDA {}.{}; tinyrw's kernels are PTX 7.5, which needs 11.5 "
          "or newer",
          driver / 1000, driver % 1000 / 10));
    int count = 0;
    check(api_.cuDeviceGetCount(&count), "cuDeviceGetCount");
    if (index >= count)
      throw TensorError(index == 0 ? std::string("CUDA: the driver finds no device")
                                   : fmt::format("CUDA:{}: the driver finds {} device{}", index,
                                                 count, count == 1 ? "" : "s"));
    check(api_.cuDeviceGet(&device_, index), "cuDeviceGet");
    check(api_.cuCtxCreate(&context_, 0, device_), "cuCtxCreate");
    int major = 0, minor = 0;
    check(api_.cuDeviceGetAttribute(&major, kAttrMajor, device_), "cuDeviceGetAttribute");
    check(api_.cuDeviceGetAttribute(&minor, kAttrMinor, device_), "cuDeviceGetAttribute");
    arch_ = fmt::format("sm_{}{}", major, minor);
  }

  std::string arch() const override { return arch_; }

  std::string describe() const override {
    char name[256] = {};
    int driver = 0, sms = 0, threads = 0;
    size_t memory = 0;
    check(api_.cuDeviceGetName(name, sizeof(name) - 1, device_), "cuDeviceGetName");
    check(api_.cuDriverGetVersion(&driver), "cuDriverGetVersion");
    check(api_.cuDeviceGetAttribute(&sms, kAttrMultiprocessors, device_), "cuDeviceGetAttribute");
    check(api_.cuDeviceGetAttribute(&threads, kAttrMaxThreadsPerBlock, device_),
          "cuDeviceGetAttribute");
    check(api_.cuDeviceTotalMem(&memory, device_), "cuDeviceTotalMem");
    return fmt::format(
        "{}, {}, {} multiprocessors, {} threads per block at most, {:.1f} GiB, driver {}.{}", name,
        arch_, sms, threads, static_cast<double>(memory) / (1 << 30), driver / 1000,
        driver % 1000 / 10);
  }

  uint64_t allocate(size_t bytes) override {
    current();
    CUdeviceptr p = 0;
    check(api_.cuMemAlloc(&p, bytes), "cuMemAlloc", fmt::format(" of {} bytes", bytes));
    return p;
  }
  void release(uint64_t address) noexcept override {
    if (api_.cuCtxSetCurrent(context_) == kSuccess) (void)api_.cuMemFree(address);
  }
  void copy_in(uint64_t to, const void* from, size_t bytes) override {
    current();
    check(api_.cuMemcpyHtoD(to, from, bytes), "cuMemcpyHtoD");
  }
  void copy_out(void* to, uint64_t from, size_t bytes) override {
    current();
    check(api_.cuMemcpyDtoH(to, from, bytes), "cuMemcpyDtoH");
  }

  std::shared_ptr<GpuKernel> load(const std::string& image, const std::string& name) override {
    current();
    // the JIT's own message when the driver refuses the PTX
    std::vector<char> log(8192, '\0');
    int options[] = {kJitErrorLogBuffer, kJitErrorLogBufferSize};
    void* values[] = {log.data(), reinterpret_cast<void*>(log.size() - 1)};
    CUmodule m = nullptr;
    const CUresult r = api_.cuModuleLoadDataEx(&m, image.c_str(), 2, options, values);
    if (r != kSuccess)
      check(r, "cuModuleLoadDataEx", fmt::format(" of kernel {}: {}", name, log.data()));
    CUfunction f = nullptr;
    const CUresult g = api_.cuModuleGetFunction(&f, m, name.c_str());
    if (g != kSuccess) {
      (void)api_.cuModuleUnload(m);
      check(g, "cuModuleGetFunction", fmt::format(" {}", name));
    }
    return std::make_shared<CudaKernel>(context_, m, f);
  }

  void synchronize() override {
    current();
    check(api_.cuCtxSynchronize(), "cuCtxSynchronize");
  }

 protected:
  void launch_kernel(const GpuKernel& k, const std::array<unsigned, 3>& global,
                     const std::array<unsigned, 3>& local, void** args) override {
    current();
    check(api_.cuLaunchKernel(static_cast<const CudaKernel&>(k).function, global[0], global[1],
                              global[2], local[0], local[1], local[2], 0, nullptr, args, nullptr),
          "cuLaunchKernel");
  }

  class Events final : public EventPair {
   public:
    explicit Events(const CudaApi& api) : api_(api) {}
    // (not in the constructor: what it made is destroyed when a later call fails)
    void begin() {
      check(api_.cuEventCreate(&start_, 0), "cuEventCreate");
      check(api_.cuEventCreate(&end_, 0), "cuEventCreate");
      check(api_.cuEventRecord(start_, nullptr), "cuEventRecord");
    }
    ~Events() override {
      if (start_) (void)api_.cuEventDestroy(start_);
      if (end_) (void)api_.cuEventDestroy(end_);
    }
    double stop() override {
      float ms = 0;
      check(api_.cuEventRecord(end_, nullptr), "cuEventRecord");
      check(api_.cuEventSynchronize(end_), "cuEventSynchronize");
      check(api_.cuEventElapsedTime(&ms, start_, end_), "cuEventElapsedTime");
      return ms * 1e-3;
    }

   private:
    const CudaApi& api_;
    CUevent start_ = nullptr, end_ = nullptr;
  };
  std::unique_ptr<EventPair> start_events() override {
    current();
    auto events = std::make_unique<Events>(api_);
    events->begin();
    return events;
  }

 private:
  // a thread's calls go to the context made current on it: every call makes this device's so
  void current() const { check(api_.cuCtxSetCurrent(context_), "cuCtxSetCurrent"); }

  const CudaApi& api_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  std::string arch_;
};

}  // namespace

std::unique_ptr<GpuRuntime> open_cuda(int index) { return std::make_unique<Cuda>(index); }

}  // namespace tinyrw
