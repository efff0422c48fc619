// Device names. A device is a base (INTERP, CPU, CUDA, HIP) and an optional index: CPU:1 is a
// second CPU device with buffers of its own, which the multi-device rules copy between and shard
// over; INTERP and CPU compute on this host (an index separates buffers, not machines), CUDA:1 is
// the second NVIDIA GPU (runtime/gpu_runtime.h).
#pragma once

#include <string>
#include <string_view>

namespace tinyrw {

// The canonical form of a device name (tinygrad's Device.canonicalize): the base upper-cased and
// ":0" dropped, so "cpu", "CPU:0" and "CPU" are one device. An unknown base or an index that is no
// non-negative number raises a TensorError naming the name.
std::string canonical_device(std::string_view name);
// The base of a canonical name, which picks the runtime and compiler: "CPU:1" -> "CPU".
std::string device_base(std::string_view canonical);

}  // namespace tinyrw
