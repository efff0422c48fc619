#include "nn/state.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace tinyrw::nn {

namespace {

using json = nlohmann::json;

// The format's dtype names.
const std::vector<std::pair<std::string, DType>>& dtype_names() {
  static const std::vector<std::pair<std::string, DType>> names = {
      {"BOOL", dtypes::bool_},    {"U8", dtypes::uint8},   {"I8", dtypes::int8},
      {"U16", dtypes::uint16},    {"I16", dtypes::int16},  {"F16", dtypes::float16},
      {"BF16", dtypes::bfloat16}, {"U32", dtypes::uint32}, {"I32", dtypes::int32},
      {"F32", dtypes::float32},   {"U64", dtypes::uint64}, {"I64", dtypes::int64},
      {"F64", dtypes::float64}};
  return names;
}

std::string dtype_name(DType d) {
  for (const auto& [name, t] : dtype_names())
    if (t == d) return name;
  throw TensorError(fmt::format("safetensors has no dtype for {}", d.name()));
}

// The largest header the format allows (100 MB, as the reference implementation).
constexpr uint64_t kMaxHeader = 100'000'000;
constexpr int kMaxDepth = 4;

[[noreturn]] void bad(const std::string& name, const std::string& what) {
  throw SafetensorsError(fmt::format("{}: not a valid safetensors file: {}", name, what));
}

struct Entry {
  std::string name;
  DType dtype;
  Dims shape;
  uint64_t begin, end;
};

// The header's tensors, each checked against the data that follows it.
std::vector<Entry> parse_header(const uint8_t* data, size_t size, const std::string& name,
                                std::map<std::string, std::string>* metadata, size_t* data_start) {
  if (size < 8) bad(name, fmt::format("{} bytes, fewer than the 8 of the header length", size));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | data[i];
  if (n > kMaxHeader)
    bad(name, fmt::format("a header length of {} bytes, over the format's 100 MB", n));
  if (n > size - 8)
    bad(name, fmt::format("a header length of {} bytes, but only {} follow", n, size - 8));
  json header;
  try {
    // the format nests three levels (header, tensor, shape): deeper input is refused while it is
    // parsed, so nothing recursive (printing it in a message) ever sees it
    const json::parser_callback_t shallow = [&](int depth, json::parse_event_t, json&) {
      if (depth > kMaxDepth)
        bad(name, fmt::format("the header nests deeper than {} levels", kMaxDepth));
      return true;
    };
    header = json::parse(data + 8, data + 8 + n, shallow);
  } catch (const json::exception& e) {
    bad(name, std::string("the header is not JSON: ") + e.what());
  }
  if (!header.is_object()) bad(name, "the header is not a JSON object");
  *data_start = 8 + n;
  const uint64_t available = size - *data_start;
  std::vector<Entry> entries;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) bad(name, "__metadata__ is not an object");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) bad(name, fmt::format("__metadata__ '{}' is not a string", mk));
        if (metadata) (*metadata)[mk] = mv.get<std::string>();
      }
      continue;
    }
    auto field = [&](const char* f) -> const json& {
      if (!value.is_object() || !value.contains(f))
        bad(name, fmt::format("tensor '{}' has no \"{}\"", key, f));
      return value.at(f);
    };
    const json &dt = field("dtype"), &shape = field("shape"), &offsets = field("data_offsets");
    if (!dt.is_string()) bad(name, fmt::format("tensor '{}': dtype is not a string", key));
    const auto known = std::find_if(dtype_names().begin(), dtype_names().end(), [&](const auto& p) {
      return p.first == dt.get<std::string>();
    });
    if (known == dtype_names().end())
      bad(name, fmt::format("tensor '{}': unknown dtype '{}'", key, dt.get<std::string>()));
    Entry e{key, known->second, {}, 0, 0};
    if (!shape.is_array()) bad(name, fmt::format("tensor '{}': shape is not a list", key));
    unsigned __int128 count = 1;
    for (const json& d : shape) {
      if (!d.is_number_unsigned())
        bad(name, fmt::format("tensor '{}': shape {} is not a list of sizes", key, shape.dump()));
      const uint64_t v = d.get<uint64_t>();
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        bad(name, fmt::format("tensor '{}': size {} is too large", key, v));
      e.shape.push_back(static_cast<int64_t>(v));
      count *= v;
      if (count > available) count = static_cast<unsigned __int128>(available) + 1;  // no overflow
    }
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned())
      bad(name,
          fmt::format("tensor '{}': data_offsets {} is not [begin, end]", key, offsets.dump()));
    e.begin = offsets[0].get<uint64_t>();
    e.end = offsets[1].get<uint64_t>();
    if (e.begin > e.end || e.end > available)
      bad(name, fmt::format("tensor '{}': data_offsets [{}, {}] outside the {} bytes of data", key,
                            e.begin, e.end, available));
    const unsigned __int128 want = count * static_cast<unsigned>(e.dtype.itemsize());
    if (want != e.end - e.begin)
      bad(name, fmt::format("tensor '{}': {} bytes of data for shape {} of {}", key,
                            e.end - e.begin, shape.dump(), dt.get<std::string>()));
    entries.push_back(std::move(e));
  }
  // the data is covered exactly: no overlaps, no holes (the format's rule)
  std::vector<const Entry*> order;
  for (const Entry& e : entries) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t at = 0;
  for (const Entry* e : order) {
    if (e->begin < at)
      bad(name, fmt::format("tensor '{}' overlaps the tensor before it (bytes [{}, {}))", e->name,
                            e->begin, e->end));
    if (e->begin > at)
      bad(name, fmt::format("bytes [{}, {}) of the data belong to no tensor", at, e->begin));
    at = e->end;
  }
  if (at != available)
    bad(name, fmt::format("bytes [{}, {}) of the data belong to no tensor", at, available));
  return entries;
}

// A file mapped read-only for the length of a load.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0)
      throw SafetensorsError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd_);
      throw SafetensorsError(fmt::format("{}: not a regular file", path));
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
      if (p == MAP_FAILED) {
        ::close(fd_);
        throw SafetensorsError(fmt::format("{}: cannot map: {}", path, std::strerror(errno)));
      }
      data_ = static_cast<const uint8_t*>(p);
    }
  }
  ~MappedFile() {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
    ::close(fd_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  std::string path_;
  int fd_ = -1;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace

std::map<std::string, Tensor> safe_load_bytes(const uint8_t* data, size_t size,
                                              const std::string& name) {
  size_t start = 0;
  const std::vector<Entry> entries = parse_header(data, size, name, nullptr, &start);
  std::map<std::string, Tensor> out;
  for (const Entry& e : entries)
    out.emplace(e.name,
                Tensor::from_bytes(data + start + e.begin, e.end - e.begin, e.shape, e.dtype));
  return out;
}

std::map<std::string, Tensor> safe_load(const std::string& path) {
  const MappedFile f(path);
  return safe_load_bytes(f.data(), f.size(), path);
}

std::map<std::string, std::string> safe_load_metadata(const std::string& path) {
  const MappedFile f(path);
  std::map<std::string, std::string> metadata;
  size_t start = 0;
  parse_header(f.data(), f.size(), path, &metadata, &start);
  return metadata;
}

void safe_save(const std::map<std::string, Tensor>& tensors, const std::string& path,
               const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<std::vector<uint8_t>> blobs;
  uint64_t at = 0;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__") throw TensorError("safe_save: '__metadata__' names no tensor");
    Tensor copy = t;
    blobs.push_back(copy.to_bytes());
    header[name] = {{"dtype", dtype_name(t.dtype())},
                    {"shape", t.shape()},
                    {"data_offsets", {at, at + blobs.back().size()}}};
    at += blobs.back().size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  // a temporary file of its own (mkstemp) next to the target, flushed to disk and renamed over
  // it: a failure leaves no half-written file, and concurrent saves do not mix
  std::string name = path + ".XXXXXX";
  const int fd = ::mkstemp(name.data());
  if (fd < 0)
    throw TensorError(
        fmt::format("safe_save: cannot create a file next to {}: {}", path, std::strerror(errno)));
  auto fail = [&](const std::string& what) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    std::remove(name.c_str());
    throw TensorError(fmt::format("safe_save: {} {}: {}", what, name, why));
  };
  auto write_all = [&](const void* data, size_t size) {
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
      const ssize_t n = ::write(fd, p, size);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail("writing");
      p += n;
      size -= static_cast<size_t>(n);
    }
  };
  uint8_t len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
  write_all(len, 8);
  write_all(text.data(), text.size());
  for (const auto& b : blobs) write_all(b.data(), b.size());
  if (::fchmod(fd, 0644) != 0 || ::fsync(fd) != 0) fail("flushing");
  if (::close(fd) != 0) {
    std::remove(name.c_str());
    throw TensorError(fmt::format("safe_save: closing {} failed", name));
  }
  if (std::rename(name.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(name.c_str());
    throw TensorError(fmt::format("safe_save: cannot move {} to {}: {}", name, path, why));
  }
}

void safe_save(const StateDict& state, const std::string& path,
               const std::map<std::string, std::string>& metadata) {
  std::map<std::string, Tensor> tensors;
  for (const NamedTensor& t : state) {
    if (!tensors.emplace(t.name, *t.tensor).second)
      throw TensorError(fmt::format("safe_save: two tensors named '{}'", t.name));
  }
  safe_save(tensors, path, metadata);
}

}  // namespace tinyrw::nn
