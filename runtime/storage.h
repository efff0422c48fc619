// Host memory of buffers, shared by the Tensor front end (tensor/) and the devices (runtime/),
// which must not include the front end.
#pragma once

#include <cstdint>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/arg.h"
#include "ir/dtype.h"

namespace tinyrw {

struct DeviceMemory;  // runtime/gpu_runtime.h

// A shape or dtype mistake made through the Tensor API, raised where the user made it; devices
// raise it too (a buffer too large, a kernel error), so it lives with the storage they share.
class TensorError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// The largest tensor, in bytes (int64's maximum, so that every element count and byte offset fits
// an int64). A shape beyond it raises a TensorError naming the size and this limit; a buffer the
// host cannot allocate raises one too.
inline constexpr int64_t kMaxTensorBytes = INT64_MAX;

// Every buffer's host memory starts at a multiple of this many bytes, a cache line: the CPU
// renderer aligns vector accesses by it, and a 32-byte vector load that straddles two lines costs
// a matmul a quarter of its speed (measured: 512x512, 61 against 46 GFLOPS).
inline constexpr int64_t kBufferAlign = 64;

// std::allocator with kBufferAlign-aligned blocks, for buffers' host memory.
template <class T>
struct BufferAllocator {
  using value_type = T;
  BufferAllocator() = default;
  template <class U>
  BufferAllocator(const BufferAllocator<U>&) {}
  T* allocate(size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{kBufferAlign}));
  }
  void deallocate(T* p, size_t) { ::operator delete (p, std::align_val_t{kBufferAlign}); }
  template <class U>
  bool operator==(const BufferAllocator<U>&) const {
    return true;
  }
};
using BufferBytes = std::vector<uint8_t, BufferAllocator<uint8_t>>;

// Host memory of one buffer (the INTERP and CPU devices compute in it directly; a GPU's buffer
// stages its contents there).
struct Storage {
  int64_t id;
  DType dtype;
  int64_t size;  // elements
  BufferBytes bytes;
  std::vector<int64_t> executed_assignments{};  // ids of the assignments written, oldest first
  bool uninitialized = false;                   // Tensor::empty()'s, until something writes it
  // the canonical name of the device it belongs to (runtime/device.h); "" until a tensor or a
  // kernel's output first places it
  std::string device{};
  // On a GPU (runtime/gpu_runtime.h): its device memory once something needed it there, and which
  // copy holds the contents (neither, for a buffer nothing has written yet; the host bytes are the
  // only copy elsewhere).
  std::shared_ptr<DeviceMemory> device_memory{};
  bool host_current = true, device_current = false;
  ~Storage();  // large buffers go back to a pool for reuse (no fresh page faults per kernel)
};
// Host storage for `size` elements, from the pool when a freed buffer of that size is there
// (its old contents remain: every kernel writes its whole output).
std::shared_ptr<Storage> allocate_storage(DType dtype, int64_t size);

// Element i in the buffer's own representation (bools are bytes, halves IEEE binary16 bits...).
Arg load_element(const Storage& s, int64_t i);
// Converts v to the buffer's dtype as a CAST does, then stores it.
void store_element(Storage& s, int64_t i, const Arg& v);

}  // namespace tinyrw
