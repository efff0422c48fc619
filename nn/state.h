// safetensors files (https://github.com/huggingface/safetensors): an 8-byte little-endian header
// length N, N bytes of JSON naming each tensor's dtype, shape and [begin, end) data offsets, then
// the data. safe_load maps the file and checks every field before it copies anything.
#pragma once

#include <map>
#include <string>

#include "nn/nn.h"
#include "tensor/tensor.h"

namespace tinyrw::nn {

// A bad file: the message names the file and what is wrong with it.
struct SafetensorsError : TensorError {
  using TensorError::TensorError;
};

// Writes every tensor (realized first) to `path`, atomically: a temporary file renamed into
// place, so a failure leaves no half-written file. `metadata` goes to the header's
// "__metadata__".
void safe_save(const std::map<std::string, Tensor>& tensors, const std::string& path,
               const std::map<std::string, std::string>& metadata = {});
void safe_save(const StateDict& state, const std::string& path,
               const std::map<std::string, std::string>& metadata = {});
std::map<std::string, Tensor> safe_load(const std::string& path);
// The same checks on bytes in memory (the fuzz target's entry); `name` is used in messages.
std::map<std::string, Tensor> safe_load_bytes(const uint8_t* data, size_t size,
                                              const std::string& name);
std::map<std::string, std::string> safe_load_metadata(const std::string& path);

}  // namespace tinyrw::nn
