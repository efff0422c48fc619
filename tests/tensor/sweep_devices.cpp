// The device sweep: random Tensor programs (elementwise, movement, reduce; integer division and
// modulo with zeros and at the dtype limits; every dtype; now and then a deep chain), each run on
// INTERP and on CPU in a forked child, so that a crash is a reported failure, not the end of the
// test. Both devices must give the same values (ints and the float ops used here exactly: +, -,
// *, max, neg, where, casts and sums in one order round the same on both), or the same kind of
// error.
//
// TINYRW_SWEEP_SEED=N    first seed (default 1); a failure prints its seed and program
// TINYRW_SWEEP_COUNT=K   programs to run (default: as many as TINYRW_SWEEP_SECONDS allow)
// TINYRW_SWEEP_SECONDS=S time budget (default 60)
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "runtime/kernel_error.h"
#include "tensor/tensor.h"

using namespace tinyrw;

namespace {

const std::vector<DType> kDtypes{dtypes::bool_,  dtypes::int8,    dtypes::int16,    dtypes::int32,
                                 dtypes::int64,  dtypes::uint8,   dtypes::uint16,   dtypes::uint32,
                                 dtypes::uint64, dtypes::float16, dtypes::bfloat16, dtypes::float32,
                                 dtypes::float64};

struct Gen {
  std::mt19937_64 rng;
  std::string log;
  explicit Gen(uint64_t seed) : rng(seed) {}
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); }

  // an interesting element of d: the limits, -1, 0, 1, small numbers
  int64_t value(DType d) {
    if (d.is_bool()) return pick(2);
    if (d.is_float()) return pick(9) - 4;
    switch (pick(6)) {
      case 0:
        return static_cast<int64_t>(d.int_min());
      case 1:
        return static_cast<int64_t>(d.int_max());
      case 2:
        return d.is_unsigned() ? 0 : -1;
      default:
        return pick(11) - 5;
    }
  }
  Tensor input(DType d, const Dims& shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    std::vector<int64_t> v;
    for (int64_t i = 0; i < n; ++i) v.push_back(value(d));
    std::string vs;
    for (int64_t x : v) vs += fmt::format("{}{}", vs.empty() ? "" : ",", x);
    log += fmt::format("input {} [{}]; ", d.repr(), vs);
    if (d.is_float() || d.is_bool()) {
      std::vector<double> f(v.begin(), v.end());
      return Tensor::from_vector(f, shape, d);
    }
    if (d.is_unsigned()) {
      // values are taken modulo 2^bits (-1 is the maximum), as the dtype would hold them
      std::vector<uint64_t> u;
      for (int64_t x : v) u.push_back(static_cast<uint64_t>(truncate_int(d, x)));
      return Tensor::from_vector(u, shape, d);
    }
    return Tensor::from_vector(v, shape, d);
  }
  Dims shape() {
    Dims s;
    for (int k = 1 + pick(3); k > 0; --k) s.push_back(1 + pick(4));
    return s;
  }

  // One step applied to x (another operand of x's shape and dtype is `y`).
  Tensor step(const Tensor& x, const Tensor& y, bool elementwise = false) {
    const DType d = x.dtype();
    const bool is_int = !d.is_float() && !d.is_bool();
    const Dims s = x.shape();
    switch (elementwise ? std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 13}[pick(9)] : pick(14)) {
      case 0:
        log += "add; ";
        return d.is_bool() ? x.bitwise_or(y) : x + y;
      case 1:
        log += "mul; ";
        return d.is_bool() ? x.bitwise_and(y) : x * y;
      case 2:
        log += "max; ";
        return x.maximum(y);
      case 3:
      case 4: {
        if (!is_int) return step(x, y, elementwise);
        const Op op = std::vector<Op>{Op::CDiv, Op::CMod, Op::FloorDiv, Op::FloorMod}[pick(4)];
        log += fmt::format("{}; ", op_name(op));
        return Tensor::alu(op, {x, y});
      }
      case 5:
        if (d.is_bool()) return step(x, y, elementwise);
        log += "sub; ";
        return x - y;
      case 6:
        log += "where(y<flip(y), x, y); ";
        return y.lt(y.flip({0})).where(x, y);
      case 7: {  // a cast to any dtype and back (float to int out of range is defined too)
        const DType to = kDtypes[static_cast<size_t>(pick(static_cast<int>(kDtypes.size())))];
        log += fmt::format("cast {} and back; ", to.repr());
        return x.cast(to).cast(d);
      }
      case 8: {
        std::vector<int> order(s.size());
        for (size_t k = 0; k < s.size(); ++k) order[k] = static_cast<int>(k);
        std::shuffle(order.begin(), order.end(), rng);
        std::string o;
        for (int k : order) o += std::to_string(k);
        log += fmt::format("permute {} and back; ", o);
        std::vector<int> inv(order.size());
        for (size_t k = 0; k < order.size(); ++k)
          inv[static_cast<size_t>(order[k])] = static_cast<int>(k);
        return x.permute(order).contiguous().permute(inv);
      }
      case 9: {
        log += "flip 0; ";
        return x.flip({0});
      }
      case 10: {  // pad then shrink back
        log += "pad 1,2 and shrink; ";
        std::vector<std::pair<int64_t, int64_t>> p(s.size(), {0, 0}), w;
        p[0] = {1, 2};
        for (size_t k = 0; k < s.size(); ++k)
          w.push_back({k == 0 ? 1 : 0, (k == 0 ? 1 : 0) + s[k]});
        return x.pad(p).shrink(w);
      }
      case 11: {  // reshape to flat and back
        log += "reshape flat and back; ";
        return x.reshape({-1}).reshape(s);
      }
      case 12: {  // a sum or max over axis 0, expanded back
        if (d.is_bool()) return step(x, y, elementwise);
        const bool sum = pick(2) == 0;
        log += fmt::format("{} axis 0 keepdim, expand; ", sum ? "sum" : "max");
        Tensor r = sum ? x.sum({0}, true) : x.max({0}, true);
        return r.cast(d).expand(s);
      }
      default:
        if (d.is_bool() || d.is_unsigned()) return step(x, y, elementwise);
        log += "neg; ";
        return -x;
    }
  }

  Tensor program() {
    const DType d = kDtypes[static_cast<size_t>(pick(static_cast<int>(kDtypes.size())))];
    const Dims s = shape();
    Tensor x = input(d, s), y = input(d, s);
    // now and then a deep chain of elementwise ops (one kernel)
    const bool deep = pick(20) == 0;
    const int steps = deep ? 200 + pick(800) : 1 + pick(8);
    if (steps > 100) log += fmt::format("{} steps: ", steps);
    const std::string head = log;
    for (int i = 0; i < steps; ++i) {
      x = step(x, y, deep);
      if (steps > 100 && log.size() > head.size() + 400) log = head + "...";
    }
    return x;
  }
};

// A child's result: "V <hex of each element as int64 or double bits>" or "E <kind> <message>".
std::string run_program(uint64_t seed, const std::string& device) {
  set_default_device(device);
  try {
    Gen g(seed);
    Tensor t = g.program();
    const DType d = t.dtype();
    std::string out = "V";
    if (d.is_float()) {
      for (double v : t.to_doubles()) {
        uint64_t bits;
        std::memcpy(&bits, &v, 8);
        out += std::isnan(v) ? " nan" : fmt::format(" {:x}", bits);
      }
    } else if (d.is_unsigned()) {
      for (uint64_t v : t.data<uint64_t>()) out += fmt::format(" {}", v);
    } else {
      for (int64_t v : t.data<int64_t>()) out += fmt::format(" {}", v);
    }
    return out;
  } catch (const KernelError& e) {
    // the kind only: which division a kernel meets first may differ (CPU's loop order for a
    // reduction is not INTERP's)
    return std::string("E KernelError ") +
           (std::string(e.what()).find("division by zero") != std::string::npos ? "division by zero"
                                                                                : e.what());
  } catch (const TensorError& e) {
    return std::string("E TensorError ") + e.what();
  } catch (const std::exception& e) {
    return std::string("E exception ") + e.what();
  }
}

// Runs one program on `device` in a child process: its result, or how it died.
std::string in_child(uint64_t seed, const std::string& device) {
  int fd[2];
  if (pipe(fd) != 0) std::abort();
  const pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    const std::string r = run_program(seed, device);
    size_t off = 0;
    while (off < r.size()) {
      const ssize_t n = write(fd[1], r.data() + off, r.size() - off);
      if (n <= 0) _exit(3);
      off += static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(fd[1]);
  std::string r;
  char buf[4096];
  for (ssize_t n; (n = read(fd[0], buf, sizeof buf)) > 0;) r.append(buf, static_cast<size_t>(n));
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status))
    return fmt::format("CRASH signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  if (WEXITSTATUS(status) != 0) return fmt::format("CRASH exit status {}", WEXITSTATUS(status));
  return r;
}

uint64_t env(const char* name, uint64_t dflt) {
  const char* v = std::getenv(name);
  return v ? std::strtoull(v, nullptr, 10) : dflt;
}

}  // namespace

int main() {
  if (!device_available("CPU")) {
    std::printf("device CPU is not available here: skipped\n");
    return 77;
  }
  const uint64_t first = env("TINYRW_SWEEP_SEED", 1), count = env("TINYRW_SWEEP_COUNT", 0);
  const double seconds = static_cast<double>(env("TINYRW_SWEEP_SECONDS", 60));
  const auto t0 = std::chrono::steady_clock::now();
  int failures = 0, errors = 0, ran = 0;
  for (uint64_t seed = first;; ++seed) {
    if (count ? seed - first >= count
              : std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >
                    seconds)
      break;
    const std::string a = in_child(seed, "INTERP"), b = in_child(seed, "CPU");
    ++ran;
    if (a.rfind("E", 0) == 0) ++errors;
    if (a != b || a.rfind("CRASH", 0) == 0) {
      ++failures;
      Gen g(seed);
      g.program();
      std::printf(
          "FAIL seed %llu (rerun: TINYRW_SWEEP_SEED=%llu TINYRW_SWEEP_COUNT=1)\n  program: %s\n"
          "  INTERP: %.300s\n  CPU:    %.300s\n",
          static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed),
          g.log.c_str(), a.c_str(), b.c_str());
      std::fflush(stdout);
      if (failures >= 10) break;
    }
  }
  std::printf("%d programs from seed %llu, %d raised on both, %d failures\n", ran,
              static_cast<unsigned long long>(first), errors, failures);
  return failures ? 1 : 0;
}
