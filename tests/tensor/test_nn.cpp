// nn/: layers against reference loops, optimizers against their update formulas step by step,
// and safetensors files written byte by byte to the format's specification.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>

#include <unistd.h>

#include <zlib.h>

#include "nn/datasets.h"
#include "nn/nn.h"
#include "nn/optim.h"
#include "nn/state.h"
#include "on_device.h"
#include "tests/scoped_env.h"

using namespace tinyrw;
using namespace tinyrw::nn;

namespace {

class NN : public OnDevice {};
using Values = std::vector<double>;

void expect_near(const Values& got, const Values& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::fabs(want[i]))) << what << " at " << i;
}

void expect_error(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no error, expected one containing: " << part;
  } catch (const TensorError& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

struct TwoLayers : Module {
  Linear l1{3, 4}, l2{4, 2, false};
  BatchNorm bn{4};
  void tensors(const std::string& prefix, StateDict& out) override {
    add(out, prefix, "l1", l1);
    add(out, prefix, "bn", bn);
    add(out, prefix, "l2", l2);
  }
  Tensor operator()(const Tensor& x) { return l2(bn(l1(x)).relu()); }
};

std::vector<std::string> names(const StateDict& s) {
  std::vector<std::string> out;
  for (const NamedTensor& t : s) out.push_back(t.name);
  return out;
}

}  // namespace

TEST_P(NN, LinearConvAndEmbeddingMatchTheirDefinitions) {
  Tensor::manual_seed(3);
  Linear lin(3, 2);
  const Values w = Tensor(lin.weight).to_doubles(), b = Tensor(*lin.bias).to_doubles();
  for (double v : w) EXPECT_LE(std::fabs(v), 1 / std::sqrt(3.0));  // uniform(+-1/sqrt(in))
  const Values x{1, 2, 3, -1, 0.5, 4};
  const Values y = lin(Tensor::from_vector(x, {2, 3}, dtypes::float32)).to_doubles();
  for (int r = 0; r < 2; ++r)
    for (int o = 0; o < 2; ++o) {
      double want = b[static_cast<size_t>(o)];
      for (int i = 0; i < 3; ++i)
        want += x[static_cast<size_t>(r * 3 + i)] * w[static_cast<size_t>(o * 3 + i)];
      EXPECT_NEAR(y[static_cast<size_t>(r * 2 + o)], want, 1e-5);
    }
  // leading axes pass through
  EXPECT_EQ(lin(Tensor::ones({5, 4, 3})).shape(), (Dims{5, 4, 2}));

  Conv2d conv(2, 4, {3}, {.padding = {1}});
  EXPECT_EQ(conv.weight.shape(), (Dims{4, 2, 3, 3}));
  const Tensor img = Tensor::rand({1, 2, 5, 5}, 9);
  expect_near(conv(img).to_doubles(),
              img.conv2d(conv.weight, &*conv.bias, {.padding = {1}}).to_doubles(), 1e-6, "Conv2d");
  EXPECT_EQ(conv(img).shape(), (Dims{1, 4, 5, 5}));

  Embedding emb(5, 3);
  const Tensor idx = Tensor::from_vector(std::vector<int32_t>{4, 0, 4}, {3}, dtypes::int32);
  // an index outside the table gives a row of zeros (tinygrad's), not a row from the end
  const Tensor outside = Tensor::from_vector(std::vector<int32_t>{-1, 5}, {2}, dtypes::int32);
  EXPECT_EQ(emb(outside).to_doubles(), Values(6, 0.0));
  const Values table = Tensor(emb.weight).to_doubles(), rows = emb(idx).to_doubles();
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(rows[3 + k], table[k]) << "row 0";
  // its gradient counts how often each row was used
  const Values dw = emb(idx).sum().gradient({emb.weight})[0].to_doubles();
  EXPECT_EQ(dw, (Values{1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2}));
}

TEST_P(NN, BatchNormTracksRunningStatisticsInTrainingOnly) {
  BatchNorm bn(2);
  const Values xv{1, 2, 3, 4, 5, 6, 7, 8};  // (2, 2, 2): channel 0 = 1,2,5,6; channel 1 = 3,4,7,8
  const Tensor x = Tensor::from_vector(xv, {2, 2, 2}, dtypes::float32);
  Tensor::set_training(true);
  Tensor y = bn(x);
  Tensor::realize_all({&y, &bn.running_mean, &bn.running_var, &bn.num_batches_tracked});
  Tensor::set_training(false);
  // batch mean 3.5 and 5.5, biased variance 4.25; the running variance moves toward the
  // unbiased one (4.25 * 4/3)
  expect_near(Tensor(bn.running_mean).to_doubles(), {0.35, 0.55}, 1e-6, "running mean");
  expect_near(Tensor(bn.running_var).to_doubles(),
              {0.9 + 0.1 * 4.25 * 4 / 3, 0.9 + 0.1 * 4.25 * 4 / 3}, 1e-6, "running var");
  EXPECT_EQ(Tensor(bn.num_batches_tracked).item<int64_t>(), 1);
  const Values got = y.to_doubles();
  for (size_t i = 0; i < 8; ++i) {
    const double mean = (i / 2) % 2 == 0 ? 3.5 : 5.5;
    EXPECT_NEAR(got[i], (xv[i] - mean) / std::sqrt(4.25 + 1e-5), 1e-5) << i;
  }
  // evaluation: the running statistics
  const Values eval = bn(x).to_doubles();
  const double rv = 0.9 + 0.1 * 4.25 * 4 / 3;
  EXPECT_NEAR(eval[0], (1 - 0.35) / std::sqrt(rv + 1e-5), 1e-5);
  EXPECT_EQ(Tensor(bn.num_batches_tracked).item<int64_t>(), 1);

  LayerNorm ln({2, 2});
  const Values l = ln(x).to_doubles();
  EXPECT_NEAR(l[0], (1 - 2.5) / std::sqrt(1.25 + 1e-5), 1e-5);
  expect_error(
      [&] {
        ln(Tensor::ones({2, 3}));
      },
      "LayerNorm: the last axes of (2, 3) must be (2, 2)");
}

TEST_P(NN, StateDictsNameEveryTensorInOrder) {
  TwoLayers m;
  EXPECT_EQ(
      names(get_state_dict(m)),
      (std::vector<std::string>{"l1.weight", "l1.bias", "bn.weight", "bn.bias", "bn.running_mean",
                                "bn.running_var", "bn.num_batches_tracked", "l2.weight"}));
  EXPECT_EQ(get_parameters(m).size(), 5u);  // not the running statistics
  // load_state_dict: strict about names, shapes must agree
  std::map<std::string, Tensor> state;
  for (const NamedTensor& t : get_state_dict(m))
    state.emplace(t.name, Tensor::ones(t.tensor->shape(), t.tensor->dtype()));
  load_state_dict(m, state);
  EXPECT_EQ(Tensor(m.l2.weight).to_doubles(), Values(8, 1.0));
  state.emplace("extra", Tensor::ones({1}));
  expect_error([&] { load_state_dict(m, state); }, "the model has no tensor named 'extra'");
  state.erase("extra");
  state.erase("l1.bias");
  expect_error([&] { load_state_dict(m, state); }, "no tensor named 'l1.bias'");
  state.emplace("l1.bias", Tensor::ones({3}));
  expect_error([&] { load_state_dict(m, state); }, "'l1.bias' has shape (3), the model's (4)");
}

// Each optimizer against its formula for two steps with the gradient c of sum(p * c).
TEST_P(NN, OptimizersFollowTheirUpdateFormulas) {
  const Values p0{1.0, -2.0, 0.5}, c{0.3, -0.2, 1.5};
  auto run = [&](const std::function<std::unique_ptr<Optimizer>(Tensor*)>& make) {
    Tensor p = Tensor::from_vector(p0, {3}, dtypes::float32).realize();
    const Tensor ct = Tensor::from_vector(c, {3}, dtypes::float32);
    std::unique_ptr<Optimizer> opt = make(&p);
    std::vector<Values> after;
    Tensor::set_training(true);
    for (int step = 0; step < 2; ++step) {
      opt->zero_grad();
      (p * ct).sum().backward({&p});
      opt->step();
      after.push_back(p.to_doubles());
    }
    Tensor::set_training(false);
    return after;
  };
  const double lr = 0.1;
  auto check = [&](const std::vector<Values>& got,
                   const std::function<double(int, size_t, double)>& want,
                   const std::string& what) {
    Values p = p0;
    for (int step = 0; step < 2; ++step) {
      for (size_t i = 0; i < 3; ++i) p[i] = want(step, i, p[i]);
      expect_near(got[static_cast<size_t>(step)], p, 1e-5, what + " step " + std::to_string(step));
    }
  };
  check(
      run([&](Tensor* p) { return std::make_unique<SGD>(std::vector<Tensor*>{p}, lr); }),
      [&](int, size_t i, double p) { return p - lr * c[i]; }, "SGD");
  // momentum 0.9: b = c, then 1.9 c; nesterov steps by c + 0.9 b: 1.9 c, then 2.71 c
  check(
      run([&](Tensor* p) { return std::make_unique<SGD>(std::vector<Tensor*>{p}, lr, 0.9); }),
      [&](int s, size_t i, double p) { return p - lr * (s == 0 ? 1.0 : 1.9) * c[i]; }, "momentum");
  check(
      run([&](Tensor* p) {
        return std::make_unique<SGD>(std::vector<Tensor*>{p}, lr, 0.9, 0, true);
      }),
      [&](int s, size_t i, double p) { return p - lr * (s == 0 ? 1.9 : 2.71) * c[i]; }, "nesterov");
  check(
      run([&](Tensor* p) { return std::make_unique<SGD>(std::vector<Tensor*>{p}, lr, 0, 0.01); }),
      [&](int, size_t i, double p) { return p - lr * (c[i] + 0.01 * p); }, "weight decay");
  // Adam with a constant gradient: m_hat = c and v_hat = c^2 at every step
  check(
      run([&](Tensor* p) { return std::make_unique<Adam>(std::vector<Tensor*>{p}, lr); }),
      [&](int, size_t i, double p) { return p - lr * c[i] / (std::fabs(c[i]) + 1e-8); }, "Adam");
  check(
      run([&](Tensor* p) {
        return std::make_unique<AdamW>(std::vector<Tensor*>{p}, lr, 0.9, 0.999, 1e-8, 0.1);
      }),
      [&](int, size_t i, double p) { return p - lr * (c[i] / (std::fabs(c[i]) + 1e-8) + 0.1 * p); },
      "AdamW");
  // outside training, or without a gradient, a step is refused
  Tensor q = Tensor::ones({2}).realize();
  SGD sgd({&q}, 0.1);
  expect_error([&] { sgd.step(); }, "optimizer step outside training");
  Tensor::set_training(true);
  expect_error([&] { sgd.step(); }, "parameter 0 has no gradient");
  Tensor::set_training(false);
  EXPECT_NEAR(sgd.lr(), 0.1, 1e-7);
  sgd.set_lr(0.5);
  EXPECT_NEAR(sgd.lr(), 0.5, 1e-7);
  // a new rate is data, not code: setting it again compiles nothing (a schedule that changes the
  // rate every step compiled a kernel every step when the rate was a constant)
  sgd.set_lr(0.25);
  EXPECT_EQ(last_compile_count(), 0);
  EXPECT_NEAR(sgd.lr(), 0.25, 1e-7);
}

// The schedule cache (tinygrad's SCACHE): from the third step on, a training step's graph (new
// batch, new gradients, the optimizer's assignments, all one schedule: backward() is lazy) is
// scheduled from the cache, and every value equals the uncached run's; a changed scheduling
// setting misses. The first step reads the parameters as their initializers left them, the second
// as the first step's assignments left them (buffer states): where the initializers left views of
// buffers (the CPU's kernels), the second step's graph is new too, so it is not checked (tinygrad's
// TinyJit likewise captures on its second call).
TEST_P(NN, TrainingStepsReplayTheirScheduleFromTheCache) {
  auto train = [](const char* scache) {
    const ScopedEnv env("SCACHE", scache);
    Tensor::manual_seed(5);
    TwoLayers m;
    std::vector<Tensor*> params = get_parameters(m), buffers = get_buffers(m);
    SGD opt(params, 0.1, 0.9);
    std::vector<bool> cached;
    std::vector<double> losses;
    Tensor::set_training(true);
    for (int step = 0; step < 4; ++step) {
      const Tensor x = Tensor::rand({6, 3}, 100 + static_cast<uint64_t>(step));
      const Tensor y =
          Tensor::from_vector(std::vector<int32_t>{0, 1, 1, 0, 1, 0}, {6}, dtypes::int32);
      opt.zero_grad();
      Tensor loss = m(x).sparse_categorical_crossentropy(y);
      loss.backward(params);
      std::vector<Tensor*> also{&loss};
      also.insert(also.end(), buffers.begin(), buffers.end());
      opt.step(also);
      cached.push_back(last_schedule_cached());
      losses.push_back(loss.item<float>());
    }
    Tensor::set_training(false);
    losses.push_back(Tensor(m.bn.running_var).to_doubles()[0]);
    return std::pair{cached, losses};
  };
  const auto [cached, losses] = train("1");
  const auto [uncached, plain] = train("0");
  ASSERT_EQ(cached.size(), 4u);
  EXPECT_FALSE(cached[0]);
  EXPECT_TRUE(cached[2]);
  EXPECT_TRUE(cached[3]);
  EXPECT_EQ(uncached, (std::vector<bool>{false, false, false, false}));
  EXPECT_EQ(losses, plain);
  // the same graph under another scheduling setting is scheduled again
  const Tensor a = Tensor::rand({64, 1024}, 1).realize();
  a.sum().realize();
  a.sum().realize();
  EXPECT_TRUE(last_schedule_cached());
  const ScopedEnv split("SPLIT_REDUCEOP", "0");
  Tensor s = a.sum();
  s.realize();
  EXPECT_FALSE(last_schedule_cached());
  EXPECT_EQ(last_kernel_count(), 1);  // not split, as the setting says
}

namespace {
// A safetensors file from its parts, as the format lays them out.
std::string file_bytes(const std::string& header, const std::string& data) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  return out + header + data;
}
template <class T>
std::string raw(std::initializer_list<T> v) {
  std::string out(v.size() * sizeof(T), '\0');
  std::memcpy(out.data(), std::data(v), out.size());
  return out;
}
std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("tinyrw_" + std::to_string(::getpid()) + "_" + name))
      .string();
}
std::string write_file(const std::string& name, const std::string& bytes) {
  const std::string path = temp_path(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}
}  // namespace

TEST_P(NN, SafetensorsReadsFilesWrittenToTheSpecification) {
  // three tensors, written by hand: a float32 (2, 2), an int64 (3) and a bool (2), then a half
  const std::string header = R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
                             R"("b":{"dtype":"I64","shape":[3],"data_offsets":[16,40]},)"
                             R"("c":{"dtype":"BOOL","shape":[2],"data_offsets":[40,42]},)"
                             R"("h":{"dtype":"F16","shape":[1],"data_offsets":[42,44]},)"
                             R"("__metadata__":{"format":"pt"}})";
  const std::string data = raw<float>({1.5f, -2, 0, 3.25f}) +
                           raw<int64_t>({7, -1, int64_t{1} << 40}) + std::string("\x01\x00", 2) +
                           std::string("\x00\x3c", 2);  // half 1.0
  const std::string path = write_file("good.safetensors", file_bytes(header, data));
  std::map<std::string, Tensor> t = safe_load(path);
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t.at("a").shape(), (Dims{2, 2}));
  EXPECT_EQ(t.at("a").to_doubles(), (Values{1.5, -2, 0, 3.25}));
  EXPECT_EQ(t.at("b").dtype(), dtypes::int64);
  EXPECT_EQ(t.at("b").data<int64_t>(), (std::vector<int64_t>{7, -1, int64_t{1} << 40}));
  EXPECT_EQ(t.at("c").data<bool>(), (std::vector<bool>{true, false}));
  EXPECT_EQ(t.at("h").to_doubles(), (Values{1.0}));
  EXPECT_EQ(safe_load_metadata(path).at("format"), "pt");
  std::filesystem::remove(path);
}

TEST_P(NN, SafetensorsRoundTripsAModelAtomically) {
  Tensor::manual_seed(11);
  TwoLayers m, other;
  const std::string path = temp_path("model.safetensors");
  safe_save(get_state_dict(m), path, {{"step", "3"}});
  for (const auto& f :
       std::filesystem::directory_iterator(std::filesystem::path(path).parent_path()))
    EXPECT_FALSE(f.path().string().rfind(path + ".", 0) == 0) << "left behind: " << f.path();
  load_state_dict(other, safe_load(path));
  EXPECT_EQ(Tensor(other.l1.weight).to_doubles(), Tensor(m.l1.weight).to_doubles());
  EXPECT_EQ(Tensor(other.bn.num_batches_tracked).dtype(), dtypes::int64);
  EXPECT_EQ(safe_load_metadata(path).at("step"), "3");
  // the header is padded so that the data starts 8-byte aligned
  std::ifstream in(path, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  EXPECT_EQ(n % 8, 0u);
  std::filesystem::remove(path);
  // a file that cannot be written leaves nothing behind
  EXPECT_THROW(safe_save(get_state_dict(m), "/nonexistent-dir/x.safetensors"), TensorError);
}

TEST_P(NN, BadSafetensorsFilesAreNamedAndRefused) {
  const std::string f32 = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string eight(8, '\0');
  struct Case {
    std::string name, bytes, message;
  };
  std::string huge_len(8, '\xff');
  const std::vector<Case> cases = {
      {"short", "abc", "3 bytes, fewer than the 8 of the header length"},
      {"length", file_bytes(f32, eight).replace(0, 1, "\xf0"), "but only"},
      {"huge", huge_len + "{}", "over the format's 100 MB"},
      {"json", file_bytes("{not json", ""), "the header is not JSON"},
      {"array", file_bytes("[1,2]", ""), "the header is not a JSON object"},
      {"dtype", file_bytes(R"({"a":{"dtype":"F7","shape":[2],"data_offsets":[0,8]}})", eight),
       "unknown dtype 'F7'"},
      {"range", file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})", eight),
       "data_offsets [0, 16] outside the 8 bytes of data"},
      {"truncated", file_bytes(f32, "1234"), "outside the 4 bytes of data"},
      {"size", file_bytes(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight),
       "8 bytes of data for shape [3] of F32"},
      {"overlap",
       file_bytes(
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
           eight),
       "overlaps the tensor before it"},
      {"hole", file_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", eight),
       "bytes [0, 4) of the data belong to no tensor"},
      {"reversed", file_bytes(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", eight),
       "data_offsets [8, 0]"},
      {"shape", file_bytes(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight),
       "is not a list of sizes"},
      {"missing", file_bytes(R"({"a":{"dtype":"F32","shape":[2]}})", eight),
       "has no \"data_offsets\""},
  };
  for (const Case& c : cases) {
    const std::string path = write_file(c.name + ".safetensors", c.bytes);
    try {
      safe_load(path);
      ADD_FAILURE() << c.name << ": loaded";
    } catch (const SafetensorsError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(path), std::string::npos) << c.name << ": " << msg;
      EXPECT_NE(msg.find(c.message), std::string::npos) << c.name << ": " << msg;
    }
    std::filesystem::remove(path);
  }
  expect_error([] { safe_load("/nonexistent.safetensors"); },
               "/nonexistent.safetensors: cannot open");
}

namespace {
// An IDX file of unsigned bytes, gzip-compressed by zlib as the dataset's files are.
std::string idx_bytes(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data,
                      uint8_t type = 0x08) {
  std::string raw{'\0', '\0', static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8)
      raw.push_back(static_cast<char>((d >> shift) & 0xff));
  raw.append(data.begin(), data.end());
  return raw;
}
std::string write_gz(const std::string& name, const std::string& raw) {
  const std::string path = temp_path(name);
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, raw.data(), static_cast<unsigned>(raw.size()));
  gzclose(f);
  return path;
}
}  // namespace

TEST_P(NN, IdxFilesLoadAndBadOnesAreNamed) {
  std::vector<uint8_t> pixels(2 * 3 * 4);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 11);
  const std::string good = write_gz("images.gz", idx_bytes({2, 3, 4}, pixels));
  Tensor t = load_idx(good);
  EXPECT_EQ(t.shape(), (Dims{2, 3, 4}));
  EXPECT_EQ(t.dtype(), dtypes::uint8);
  EXPECT_EQ(t.data<uint8_t>(), pixels);
  auto refused = [](const std::string& path, const std::string& part) {
    try {
      load_idx(path);
      ADD_FAILURE() << path << " loaded";
    } catch (const DatasetError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
    std::filesystem::remove(path);
  };
  refused(write_gz("magic.gz", idx_bytes({2}, {1, 2}, 0x0d)), "not an IDX file of unsigned bytes");
  refused(write_gz("short.gz", idx_bytes({2, 3, 4}, {1, 2, 3})), "truncated");
  refused(write_gz("long.gz", idx_bytes({2}, {1, 2, 3})), "trailing bytes");
  refused(write_gz("header.gz", std::string("\0\0\x08\x03\0\0", 6)), "truncated inside the header");
  // a gzip stream cut short
  std::string gz;
  {
    std::ifstream in(good, std::ios::binary);
    gz.assign(std::istreambuf_iterator<char>(in), {});
  }
  refused(write_file("cut.gz", gz.substr(0, gz.size() / 2)), "truncated");
  std::filesystem::remove(good);
  // a missing set names the Debian package
  expect_error([] { load_mnist("/nonexistent-dir"); }, "dataset-fashion-mnist");
}

INSTANTIATE_TEST_SUITE_P(Devices, NN, ::testing::ValuesIn(test_devices()), device_test_name);
