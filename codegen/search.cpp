#include "codegen/search.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <thread>

#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "codegen/linearize.h"
#include "ir/axis.h"
#include "ir/env.h"
#include "ir/kernel_info.h"

namespace tinyrw {

namespace {

// The product of the sizes of a kernel's ranges of these types.
int64_t product_of(const UOp& k, std::initializer_list<AxisType> types) {
  int64_t n = 1;
  for (const UOp& r : opt_ranges(k))
    if (std::ranges::find(types, axis_type_of(r)) != types.end() && r.src(0).op() == Op::Const)
      n *= static_cast<int64_t>(r.src(0).arg().as_int());
  return n;
}

// 64-bit FNV-1a: a file name for a cache key (the key itself is stored and compared).
std::string fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (const unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return fmt::format("{:016x}", h);
}

std::filesystem::path cache_file(const std::string& key) {
  return std::filesystem::path(cache_dir()) / "beam" / (fnv1a(key) + ".json");
}

// The opts stored for `key`, when a file holds exactly that key and they still apply.
std::optional<std::vector<Opt>> cache_get(const std::string& key, const UOp& sink,
                                          const Target& target) {
  if (env_int("IGNORE_BEAM_CACHE", 0)) return std::nullopt;
  std::ifstream in(cache_file(key));
  if (!in) return std::nullopt;
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    if (j.at("key").get<std::string>() != key) return std::nullopt;
    std::vector<Opt> opts;
    for (const auto& o : j.at("opts"))
      opts.push_back(opt_from_arg(
          Arg::tuple({Arg::string(o.at(0).get<std::string>()), Arg::integer(o.at(1).get<int64_t>()),
                      Arg::integer(o.at(2).get<int64_t>())})));
    apply_opts(sink, opts, target);
    return opts;
  } catch (const std::exception& e) {  // a damaged or outdated entry is searched again
    std::fprintf(stderr, "BEAM: ignoring the cache entry %s: %s\n",
                 cache_file(key).string().c_str(), e.what());
    return std::nullopt;
  }
}

// Stores the result; a cache that cannot be written is reported and the search's result kept.
void cache_put(const std::string& key, const std::vector<Opt>& opts) {
  const auto fail = [](const std::filesystem::path& f, const std::string& why) {
    std::fprintf(stderr, "BEAM: cannot write the cache file %s: %s\n", f.string().c_str(),
                 why.c_str());
  };
  nlohmann::json j{{"key", key}, {"opts", nlohmann::json::array()}};
  for (const Opt& o : opts) {
    const Arg a = opt_to_arg(o);
    j["opts"].push_back({a.items()[0].as_string(), static_cast<int64_t>(a.items()[1].as_int()),
                         static_cast<int64_t>(a.items()[2].as_int())});
  }
  const std::filesystem::path file = cache_file(key);
  std::error_code ec;
  std::filesystem::create_directories(file.parent_path(), ec);
  // written whole under a name of this process and thread, then renamed over the old one: a
  // concurrent reader sees one or the other
  const std::filesystem::path tmp =
      file.string() + fmt::format(".{}.{}.tmp", ::getpid(),
                                  std::hash<std::thread::id>{}(std::this_thread::get_id()));
  std::ofstream out(tmp);
  out << j.dump() << "\n";
  out.close();
  if (!out) {
    fail(tmp, "the write failed");
    std::filesystem::remove(tmp, ec);
    return;
  }
  std::filesystem::rename(tmp, file, ec);
  if (ec) {
    fail(file, ec.message());
    std::filesystem::remove(tmp, ec);
  }
}

// tinygrad's BEAM_MIN_PROGRESS: microseconds a round must gain to go on (0.01 by default).
double min_progress_seconds() {
  const char* v = std::getenv("BEAM_MIN_PROGRESS");
  if (!v || !*v) return 0.01e-6;
  char* end = nullptr;
  const double us = std::strtod(v, &end);
  if (*end != '\0' || !(us >= 0))
    throw std::invalid_argument(
        fmt::format("$BEAM_MIN_PROGRESS='{}' is not a number of microseconds", v));
  return us * 1e-6;
}

// The cache's format: opts address axes by position, so a change to opts or their order makes
// old entries mean other kernels.
constexpr const char* kCacheVersion = "beam cache 1";

std::string opts_repr(const std::vector<Opt>& opts) {
  std::string s;
  for (const Opt& o : opts) s += (s.empty() ? "" : " ") + opt_repr(o);
  return s.empty() ? "(none)" : s;
}

}  // namespace

std::string cache_dir() {
  if (const char* d = std::getenv("TINYRW_CACHE_DIR"); d && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return std::string(d) + "/tinyrw";
  if (const char* d = std::getenv("HOME"); d && *d) return std::string(d) + "/.cache/tinyrw";
  return "/tmp/tinyrw-cache";
}

const std::vector<Opt>& beam_actions() {
  static const std::vector<Opt> actions = [] {
    std::vector<Opt> a;
    for (int64_t n : {0, 2, 3, 4, 5, 7})
      for (int axis = 0; axis < 8; ++axis) a.push_back({OptOp::Upcast, axis, n});
    for (int64_t n : {0, 4, 7})
      for (int axis = 0; axis < 5; ++axis) a.push_back({OptOp::Unroll, axis, n});
    for (int64_t n : {2, 3, 4, 8, 13, 16, 29})
      for (int axis = 0; axis < 6; ++axis) a.push_back({OptOp::Local, axis, n});
    for (int64_t n : {13, 16, 28, 29, 32, 49, 64, 256})
      for (int axis = 0; axis < 3; ++axis) a.push_back({OptOp::GroupTop, axis, n});
    for (int64_t n : {0, 4, 8, 16})
      for (int axis = 0; axis < 3; ++axis) a.push_back({OptOp::Group, axis, n});
    if (env_int("BEAM_PADTO", 0))
      for (int axis = 0; axis < 7; ++axis) a.push_back({OptOp::Padto, axis, 32});
    a.push_back({OptOp::Local, 0, 32});
    a.push_back({OptOp::Local, 6, 2});
    for (int axis = 0; axis < 5; ++axis)
      for (int other = axis + 1; other < 5; ++other) a.push_back({OptOp::Swap, axis, other});
    for (int64_t n : {2, 3, 4, 5, 8, 12, 16, 24, 32, 64})
      for (int axis = 0; axis < 3; ++axis) a.push_back({OptOp::Thread, axis, n});
    if (env_int("NOLOCALS", 0)) a.push_back({OptOp::Nolocals});
    return a;
  }();
  return actions;
}

BeamResult beam_search(const UOp& sink, const Target& target, int width,
                       const KernelRenderer& render, const KernelTimer& time,
                       const std::vector<Opt>& start, const std::string& cache_key) {
  const std::string key = cache_key.empty() ? ""
                                            : fmt::format("{}\n{}\nwidth {}\n{}", kCacheVersion,
                                                          cache_key, width, render_program(sink));
  if (!key.empty())
    if (std::optional<std::vector<Opt>> hit = cache_get(key, sink, target))
      return {.opts = *hit, .cached = true};
  const int debug = static_cast<int>(env_int("DEBUG", 0));
  const double min_progress = min_progress_seconds();
  const int64_t max_up = env_int("BEAM_UPCAST_MAX", 256),
                max_local = env_int("BEAM_LOCAL_MAX", 1024);
  constexpr double kInf = std::numeric_limits<double>::infinity();
  struct Entry {
    std::vector<Opt> opts;
    UOp kernel;
    double seconds;
  };
  std::vector<Entry> beam{{{}, sink, kInf}};
  std::set<std::string> seen;  // programs timed already
  BeamResult result;
  // the heuristics' choice bounds the first round's timing (tinygrad's bound is a second) and
  // stands where the search finds nothing faster; the search starts from no opts, as tinygrad's
  double bound = 1.0;
  std::optional<Entry> heuristic;
  std::string heuristic_code;  // a candidate of the same program joins the beam at its time
  if (!start.empty())
    if (std::optional<std::string> code = render(start))
      if (std::optional<double> t = time(start, kInf)) {
        ++result.timed;
        bound = 3 * *t;
        heuristic = Entry{start, apply_opts(sink, start, target), *t};
        heuristic_code = *code;
      }
  for (;;) {
    std::vector<Entry> timed;
    int candidates = 0;
    for (const Entry& e : beam) {
      for (const Opt& a : beam_actions()) {
        UOp k;
        try {
          k = apply_opt(e.kernel, a, target);
        } catch (const KernelOptError&) {
          continue;
        }
        if (product_of(k, {AxisType::Upcast, AxisType::Unroll}) > max_up ||
            product_of(k, {AxisType::Warp, AxisType::Local, AxisType::GroupReduce}) > max_local)
          continue;
        std::vector<Opt> opts = e.opts;
        opts.push_back(a);
        ++candidates;
        const std::optional<std::string> code = render(opts);
        if (!code || !seen.insert(*code).second) continue;
        if (heuristic && *code == heuristic_code) {
          timed.push_back({std::move(opts), k, heuristic->seconds});
          continue;
        }
        const double give_up = beam.front().seconds < kInf ? 3 * beam.front().seconds : bound;
        const std::optional<double> t = time(opts, give_up);
        if (!t) continue;
        ++result.timed;
        timed.push_back({std::move(opts), k, *t});
      }
    }
    std::sort(timed.begin(), timed.end(),
              [](const Entry& a, const Entry& b) { return a.seconds < b.seconds; });
    const bool done = timed.empty() || timed.front().seconds < min_progress ||
                      beam.front().seconds - timed.front().seconds < min_progress;
    if (!done) {
      timed.resize(std::min(timed.size(), static_cast<size_t>(std::max(width, 1))));
      beam = std::move(timed);
    } else if (!timed.empty() && timed.front().seconds < beam.front().seconds) {
      beam = {timed.front()};
    }
    if (debug >= 2)
      std::fprintf(stderr, "BEAM %s: %.1f us from %d candidates: %s\n",
                   KernelInfo::of(sink).name.c_str(), beam.front().seconds * 1e6, candidates,
                   opts_repr(beam.front().opts).c_str());
    if (done) break;
  }
  const Entry& best =
      heuristic && heuristic->seconds <= beam.front().seconds ? *heuristic : beam.front();
  result.opts = best.opts;
  result.seconds = best.seconds;
  // a search that timed nothing keeps the heuristics' opts and stores nothing
  if (best.seconds == kInf) {
    result.opts = start;
    return result;
  }
  if (!key.empty()) cache_put(key, result.opts);
  return result;
}

}  // namespace tinyrw
