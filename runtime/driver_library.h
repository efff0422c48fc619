// A vendor's GPU runtime library (the CUDA driver, the HIP runtime) opened with dlopen, never
// linked, and its entry points looked up: what runtime/cuda.cpp and runtime/hip.cpp share.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "runtime/storage.h"

namespace tinyrw {

class DriverLibrary {
 public:
  // The file $`env` names, else `file`, loaded (and kept loaded: its functions outlive this). A
  // TensorError "WHO: cannot load the KIND FILE (dlerror's reason): HINT" when it does not load.
  DriverLibrary(std::string who, const char* env, const char* file, const std::string& kind,
                const std::string& hint);
  // Entry point `symbol` into the function pointer `fn`; a TensorError "WHO: FILE has no SYMBOL"
  // when the library lacks it (it is not the vendor's).
  template <class F>
  void resolve(const char* symbol, F& fn) const {
    fn = reinterpret_cast<F>(lookup(symbol));
  }

 private:
  void* lookup(const char* symbol) const;
  std::string who_, path_;
  void* handle_ = nullptr;
};

// The entry points `Api` that `load` resolves, loaded once per process; every call after a
// failure raises the first one's TensorError again (a library does not appear while a process
// runs).
template <class Api, class Load>
const Api& load_once(Load load) {
  static const Api* api = nullptr;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [&] {
    try {
      auto loaded = std::make_unique<Api>();
      load(*loaded);
      api = loaded.release();  // never unloaded: kernels and buffers may outlive everything
    } catch (const TensorError& e) {
      failure = e.what();
    }
  });
  if (!api) throw TensorError(failure);
  return *api;
}

}  // namespace tinyrw
