#include "nn/datasets.h"

#include <zlib.h>

#include <filesystem>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tinyrw::nn {

namespace {

// The whole decompressed file; a read error or a damaged stream raises.
std::vector<uint8_t> gunzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw DatasetError(fmt::format("{}: cannot open", path));
  std::vector<uint8_t> out;
  uint8_t chunk[1 << 16];
  for (;;) {
    const int n = gzread(f, chunk, sizeof chunk);
    if (n < 0) {
      int code = 0;
      const std::string why = gzerror(f, &code);
      gzclose(f);
      throw DatasetError(fmt::format("{}: corrupted or truncated gzip data ({})", path, why));
    }
    if (n == 0) break;
    out.insert(out.end(), chunk, chunk + n);
    if (out.size() > (size_t{1} << 32)) {
      gzclose(f);
      throw DatasetError(fmt::format("{}: more than 4 GiB decompressed", path));
    }
  }
  // a stream cut short reads as an early end: gzclose reports it
  if (gzclose(f) != Z_OK) throw DatasetError(fmt::format("{}: truncated gzip stream", path));
  return out;
}

uint32_t big_endian(const std::vector<uint8_t>& b, size_t at) {
  return (uint32_t{b[at]} << 24) | (uint32_t{b[at + 1]} << 16) | (uint32_t{b[at + 2]} << 8) |
         uint32_t{b[at + 3]};
}

}  // namespace

Tensor load_idx(const std::string& path) {
  const std::vector<uint8_t> b = gunzip(path);
  if (b.size() < 4)
    throw DatasetError(fmt::format("{}: truncated: {} bytes, no IDX header", path, b.size()));
  // magic: two zero bytes, the element type (0x08: unsigned byte), the number of dimensions
  if (b[0] != 0 || b[1] != 0 || b[2] != 0x08 || b[3] < 1 || b[3] > 4)
    throw DatasetError(fmt::format(
        "{}: not an IDX file of unsigned bytes: magic {:02x} {:02x} {:02x} {:02x} (want 00 00 08 "
        "and 1 to 4 dimensions)",
        path, b[0], b[1], b[2], b[3]));
  const size_t ndim = b[3], data = 4 + 4 * ndim;
  if (b.size() < data) throw DatasetError(fmt::format("{}: truncated inside the header", path));
  Dims shape;
  size_t count = 1;
  for (size_t i = 0; i < ndim; ++i) {
    shape.push_back(big_endian(b, 4 + 4 * i));
    count *= static_cast<size_t>(shape.back());
    if (count > b.size()) break;  // the size check below fails; no overflow
  }
  if (b.size() - data != count)
    throw DatasetError(fmt::format("{}: {} data bytes for dimensions {} ({} elements): {}", path,
                                   b.size() - data, fmt::join(shape, "x"), count,
                                   b.size() - data < count ? "truncated" : "trailing bytes"));
  return Tensor::from_bytes(b.data() + data, count, shape, dtypes::uint8);
}

Mnist load_mnist(const std::string& dir) {
  auto file = [&](const char* name) {
    const std::string path = (std::filesystem::path(dir) / name).string();
    if (!std::filesystem::exists(path))
      throw DatasetError(fmt::format(
          "{}: no such file; Fashion-MNIST comes with Debian's dataset-fashion-mnist package "
          "(apt-get install dataset-fashion-mnist), or give the directory of the four files",
          path));
    return load_idx(path);
  };
  Mnist m{file("train-images-idx3-ubyte.gz"), file("train-labels-idx1-ubyte.gz"),
          file("t10k-images-idx3-ubyte.gz"), file("t10k-labels-idx1-ubyte.gz")};
  auto images = [&](Tensor& t, Tensor& labels, const char* what) {
    const Dims s = t.shape();
    if (s.size() != 3 || labels.ndim() != 1 || labels.shape()[0] != s[0])
      throw DatasetError(fmt::format("{}: {} images and labels do not pair up", dir, what));
    t = t.reshape({s[0], 1, s[1], s[2]});
  };
  images(m.x_train, m.y_train, "training");
  images(m.x_test, m.y_test, "test");
  return m;
}

}  // namespace tinyrw::nn
