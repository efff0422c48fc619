// libFuzzer target for the safetensors reader (nn/state.h): any bytes either load as tensors or
// raise a SafetensorsError naming the problem. A crash, a hang, a sanitizer report or any other
// escaping exception is a finding.
#include <cstddef>
#include <cstdint>

#include "nn/state.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    for (auto& [name, t] : tinyrw::nn::safe_load_bytes(data, size, "fuzz.safetensors"))
      (void)t.to_bytes();                          // the loaded elements are readable
  } catch (const tinyrw::nn::SafetensorsError&) {  // the expected outcome for bad bytes
  }
  return 0;
}
