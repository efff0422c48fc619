// BEAM search (codegen/search.h): the search keeps the fastest candidates by the timer it is
// given, stops when a round gains nothing, keeps the heuristics' opts where nothing beats them,
// and stores its result on disk per kernel, settings and width; through realize (BEAM=2) a kernel
// computes what it computes without the search.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "codegen/linearize.h"
#include "codegen/opt.h"
#include "codegen/search.h"
#include "ir/builders.h"
#include "ir/kernel_info.h"
#include "tensor/function.h"
#include "tensor/tensor.h"
#include "tests/scoped_env.h"

using namespace tinyrw;

namespace {

// c[i, j] = sum_k a[i, k] * b[k, j] over (16, 16) by (16, 16), bound to buffers
UOp matmul_kernel() {
  auto param = [](int64_t slot, int64_t n) {
    return UOp::make(
        Op::Param, dtypes::float32, {},
        Arg::record("ParamArg", {{"slot", Arg::integer(slot)}, {"size", Arg::integer(n)}}));
  };
  const UOp c = param(0, 256), a = param(1, 256), b = param(2, 256);
  const UOp r0 = UOp::range(UOp::cint(16), 0), r1 = UOp::range(UOp::cint(16), 1),
            r2 = UOp::range(UOp::cint(16), 2, AxisType::Reduce);
  const UOp prod =
      kernel_index(a, {r0 * UOp::cint(16) + r2}) * kernel_index(b, {r2 * UOp::cint(16) + r1});
  const UOp red = UOp::make(Op::Reduce, dtypes::float32, {prod, r2},
                            Arg::tuple({Arg::op(Op::Add), Arg::integer(0)}));
  const UOp store = kernel_store(kernel_index(c, {r0 * UOp::cint(16) + r1}), red);
  const UOp sink = UOp::sink(std::vector<UOp>{UOp::make(Op::End, dtypes::void_, {store, r0, r1})});
  return simplify_ranges(bind_kernel(sink, param_buffers(sink)));
}

// A timer by formula: fewer seconds the more lanes the opts make, up to 16, and a penalty beyond
// (so the best is known): the search must reach 16 lanes and stop.
struct FakeDevice {
  const UOp kernel = matmul_kernel();
  int timings = 0;
  KernelRenderer render = [this](const std::vector<Opt>& o) -> std::optional<std::string> {
    std::string s;
    for (const Opt& x : o) s += opt_repr(x) + ";";
    return s;
  };
  KernelTimer time = [this](const std::vector<Opt>& o, double) -> std::optional<double> {
    ++timings;
    int64_t lanes = 1;
    for (const Opt& x : o)
      if (x.op == OptOp::Upcast || x.op == OptOp::Unroll) lanes *= x.arg == 0 ? 16 : x.arg;
    return lanes <= 16 ? 1.0 / static_cast<double>(lanes) : 1.0 + static_cast<double>(lanes);
  };
};

int64_t lanes_of(const std::vector<Opt>& o) {
  int64_t lanes = 1;
  for (const Opt& x : o)
    if (x.op == OptOp::Upcast || x.op == OptOp::Unroll) lanes *= x.arg == 0 ? 16 : x.arg;
  return lanes;
}

}  // namespace

TEST(BeamSearch, KeepsTheFastestAndStopsWhenARoundGainsNothing) {
  FakeDevice dev;
  const BeamResult r = beam_search(dev.kernel, Target::of("CPU"), 2, dev.render, dev.time);
  EXPECT_FALSE(r.cached);
  EXPECT_EQ(lanes_of(r.opts), 16) << "the fastest the timer allows";
  EXPECT_DOUBLE_EQ(r.seconds, 1.0 / 16);
  EXPECT_EQ(r.timed, dev.timings);
  EXPECT_GT(r.timed, 10);
  EXPECT_NO_THROW(apply_opts(dev.kernel, r.opts, Target::of("CPU")));
  // a wider beam times at least as many candidates
  FakeDevice wide;
  EXPECT_GE(beam_search(wide.kernel, Target::of("CPU"), 4, wide.render, wide.time).timed, r.timed);
}

TEST(BeamSearch, TheHeuristicsStandWhereNothingBeatsThem) {
  FakeDevice dev;
  const std::vector<Opt> start = {{OptOp::Upcast, 0, 4}, {OptOp::Upcast, 1, 4}};
  // every candidate but the start fails to compile
  const KernelTimer only_start = [&](const std::vector<Opt>& o, double) -> std::optional<double> {
    if (o == start) return 0.5;
    return std::nullopt;
  };
  const BeamResult r = beam_search(dev.kernel, Target::of("CPU"), 2, dev.render, only_start, start);
  EXPECT_EQ(r.opts, start);
  EXPECT_DOUBLE_EQ(r.seconds, 0.5);
}

TEST(BeamSearch, ResultsAreCachedOnDiskPerKernelSettingsAndWidth) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tinyrw-beam-test-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const ScopedEnv env("TINYRW_CACHE_DIR", dir.c_str());
  EXPECT_EQ(cache_dir(), dir.string());
  FakeDevice first;
  const BeamResult searched =
      beam_search(first.kernel, Target::of("CPU"), 2, first.render, first.time, {}, "CPU,test");
  ASSERT_FALSE(searched.cached);
  FakeDevice again;
  const BeamResult hit =
      beam_search(again.kernel, Target::of("CPU"), 2, again.render, again.time, {}, "CPU,test");
  EXPECT_TRUE(hit.cached);
  EXPECT_EQ(hit.opts, searched.opts);
  EXPECT_EQ(again.timings, 0) << "a cached result is not searched again";
  // another width, other settings: searched
  FakeDevice other;
  EXPECT_FALSE(
      beam_search(other.kernel, Target::of("CPU"), 3, other.render, other.time, {}, "CPU,test")
          .cached);
  EXPECT_FALSE(
      beam_search(other.kernel, Target::of("CPU"), 2, other.render, other.time, {}, "CPU,other")
          .cached);
  // a damaged entry is searched again (and says so), then rewritten
  for (const auto& f : std::filesystem::recursive_directory_iterator(dir))
    if (f.is_regular_file()) std::ofstream(f.path()) << "{not json";
  FakeDevice damaged;
  testing::internal::CaptureStderr();
  const BeamResult redone = beam_search(damaged.kernel, Target::of("CPU"), 2, damaged.render,
                                        damaged.time, {}, "CPU,test");
  EXPECT_NE(testing::internal::GetCapturedStderr().find("ignoring the cache entry"),
            std::string::npos);
  EXPECT_FALSE(redone.cached);
  EXPECT_EQ(redone.opts, searched.opts);
  // IGNORE_BEAM_CACHE=1 searches even with an entry
  {
    const ScopedEnv ignore("IGNORE_BEAM_CACHE", "1");
    FakeDevice ignored;
    EXPECT_FALSE(beam_search(ignored.kernel, Target::of("CPU"), 2, ignored.render, ignored.time, {},
                             "CPU,test")
                     .cached);
  }
  std::filesystem::remove_all(dir);
}

// BEAM=2 through realize, on the device: the searched kernel computes the values of the
// heuristics' kernel, and a second realize in the process compiles nothing new.
TEST(BeamSearch, Beam2OnTheDeviceKeepsTheValues) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tinyrw-beam-real-" + std::to_string(::getpid()));
  const ScopedEnv env("TINYRW_CACHE_DIR", dir.c_str());
  for (const char* device : {"CPU", "INTERP"}) {
    if (!device_available(device)) continue;
    set_default_device(device);
    const Tensor a = Tensor::rand({16, 24}, 1).realize(), b = Tensor::rand({24, 8}, 2).realize();
    const std::vector<double> want = a.matmul(b).to_doubles();
    const ScopedEnv beam("BEAM", "2");
    const std::vector<double> got = a.matmul(b).to_doubles();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], want[i], 1e-4) << device << " " << i;
    (void)a.matmul(b).to_doubles();
    EXPECT_EQ(last_compile_count(), 0) << device;
    EXPECT_TRUE(std::filesystem::exists(dir / "beam")) << "the search stored its result";
    set_default_device("");
  }
  std::filesystem::remove_all(dir);
}
