// The elementwise op ThreeFry (Threefry-2x32 of 20 rounds) on both devices, two independent
// implementations: INTERP computes it directly (runtime/interp.cpp, through ir/alu.h's
// threefry2x32) and CPU lowers it to 32-bit integer ops (rules/decompositions.rw) that LLVM
// compiles. Each is held against Random123's known answers and against the reference of
// tests/spec/threefry_reference.h, written from the algorithm, alone and inside larger kernels.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "codegen/linearize.h"
#include "codegen/target.h"
#include "dsl/compiled.h"
#include "dsl/interp.h"
#include "ir/alu.h"
#include "ir/call.h"
#include "ir/graph.h"
#include "ir/rewrite.h"
#include "on_device.h"
#include "rules/helpers/kernel.h"
#include "tensor/function.h"
#include "tensor/tensor.h"
#include "tests/expect_error.h"
#include "tests/spec/threefry_reference.h"

using namespace tinyrw;
using tinyrw::testing::threefry2x32_reference;

namespace {

// Word 0 in the low 32 bits, word 1 in the high ones: the ThreeFry op's packing.
uint64_t pack(uint32_t word0, uint32_t word1) { return static_cast<uint64_t>(word1) << 32 | word0; }

struct KnownAnswer {
  uint64_t counter, key, out;
};
// Random123's known-answer vectors for threefry2x32_20 (kat_vectors): counter (x0, x1), key
// (k0, k1), output (word 0, word 1).
const std::vector<KnownAnswer> kKnownAnswers = {
    {pack(0, 0), pack(0, 0), pack(0x6b200159, 0x99ba4efe)},
    {pack(0xffffffff, 0xffffffff), pack(0xffffffff, 0xffffffff), pack(0x1cb996fc, 0xbb002be7)},
    {pack(0x243f6a88, 0x85a308d3), pack(0x13198a2e, 0x03707344), pack(0xc4923a9c, 0x483df7a0)},
};

std::string hex(uint64_t v) { return fmt::format("{:#018x}", v); }

// Counters and keys: the words' edge values in each half, then random pairs.
std::pair<std::vector<uint64_t>, std::vector<uint64_t>> random_pairs(size_t n) {
  std::vector<uint64_t> counters = {0, 1, 0xffffffffu, 1ull << 32, ~0ull, 0x8000000080000000ull},
                        keys = {~0ull, 0, 1ull << 32, 0xffffffffu, 0x1BD11BDAull, 7};
  std::mt19937_64 g(2024);
  while (counters.size() < n) {
    counters.push_back(g());
    keys.push_back(g());
  }
  return {counters, keys};
}

Tensor u64(const std::vector<uint64_t>& v) {
  return Tensor::from_vector(v, {static_cast<int64_t>(v.size())}, dtypes::uint64);
}

// ---- the reference and the host function, without a device

TEST(ThreefryReference, GivesRandom123sKnownAnswers) {
  for (const KnownAnswer& k : kKnownAnswers)
    EXPECT_EQ(hex(threefry2x32_reference(k.counter, k.key)), hex(k.out))
        << "counter " << hex(k.counter) << " key " << hex(k.key);
}

// ir/alu.h's threefry2x32 (INTERP's, and Tensor::rand's generator)
TEST(ThreefryReference, HostFunctionEqualsTheReference) {
  for (const KnownAnswer& k : kKnownAnswers)
    EXPECT_EQ(hex(threefry2x32(k.counter, k.key)), hex(k.out)) << hex(k.counter);
  const auto [counters, keys] = random_pairs(1000);
  for (size_t i = 0; i < counters.size(); ++i)
    ASSERT_EQ(hex(threefry2x32(counters[i], keys[i])),
              hex(threefry2x32_reference(counters[i], keys[i])))
        << "counter " << hex(counters[i]) << " key " << hex(keys[i]);
}

// Tensor::rand draws from the same function: element 2j and 2j+1 are the top 24 bits of words 0
// and 1 of counter 2j under the seed as key, as fractions of 2^24.
TEST(ThreefryReference, RandDrawsFromIt) {
  const uint64_t seed = 0x0123456789abcdefull;
  const std::vector<double> got = Tensor::rand({7}, seed).to_doubles();
  ASSERT_EQ(got.size(), 7u);
  for (size_t i = 0; i < got.size(); ++i) {
    const uint64_t bits = threefry2x32_reference(i - i % 2, seed);
    const auto word = static_cast<uint32_t>(i % 2 == 0 ? bits : bits >> 32);
    EXPECT_EQ(got[i], static_cast<double>(word >> 8) / 16777216.0) << "element " << i;
  }
}

// ---- on each device

class Threefry : public OnDevice {};

// The known answers with counters and keys read from buffers (not constants the compiler could
// see through).
TEST_P(Threefry, GivesRandom123sKnownAnswers) {
  std::vector<uint64_t> counters, keys;
  for (const KnownAnswer& k : kKnownAnswers) {
    counters.push_back(k.counter);
    keys.push_back(k.key);
  }
  const std::vector<uint64_t> got =
      Tensor::alu(Op::ThreeFry, {u64(counters), u64(keys)}).data<uint64_t>();
  ASSERT_EQ(got.size(), kKnownAnswers.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(hex(got[i]), hex(kKnownAnswers[i].out)) << "counter " << hex(counters[i]);
}

TEST_P(Threefry, RandomPairsEqualTheReference) {
  const auto [counters, keys] = random_pairs(400);
  const std::vector<uint64_t> got =
      Tensor::alu(Op::ThreeFry, {u64(counters), u64(keys)}).data<uint64_t>();
  ASSERT_EQ(got.size(), counters.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(hex(got[i]), hex(threefry2x32_reference(counters[i], keys[i])))
        << "counter " << hex(counters[i]) << " key " << hex(keys[i]);
}

// Random bits as tinygrad draws them: ThreeFry of an arange cast to uint64 under a constant key,
// shifted and cast, fused into one kernel (vectorized by the default opts on CPU).
TEST_P(Threefry, InsideAKernelOfArangeAndShift) {
  const int64_t n = 1000;
  const uint64_t key = 0x1BADF00D5EEDull;  // both words nonzero, exact as full()'s double
  const Tensor counters = Tensor::arange(0, n).cast(dtypes::uint64);
  const Tensor bits = Tensor::alu(
      Op::ThreeFry, {counters, Tensor::full({n}, static_cast<double>(key), dtypes::uint64)});
  Tensor top =
      Tensor::alu(Op::Shr, {bits, Tensor::full({n}, 40, dtypes::uint64)}).cast(dtypes::uint32);
  const std::vector<uint32_t> got = top.data<uint32_t>();
  EXPECT_EQ(last_kernel_count(), 1);
  ASSERT_EQ(got.size(), static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(got[static_cast<size_t>(i)],
              static_cast<uint32_t>(threefry2x32_reference(static_cast<uint64_t>(i), key) >> 40))
        << "counter " << i;
}

// A kernel AST whose counter is the loop index itself and whose key is loaded: out[r] = high
// word of ThreeFry(r, key[0]) plus the low word of ThreeFry(r, r) (both uses of the index).
TEST_P(Threefry, InsideAKernelOverItsLoopIndex) {
  const int64_t n = 777;
  const uint64_t key = 0x85a308d3243f6a88ull;
  auto body = [&](const std::vector<UOp>& p) {
    const UOp r = UOp::range(UOp::cint(n), 0);
    const UOp c = r.cast(dtypes::uint64);
    const UOp k = kernel_index(p[1], {UOp::cint(0)});
    const UOp high = c.alu(Op::ThreeFry, {k})
                         .alu(Op::Shr, {UOp::constant(dtypes::uint64, Arg::integer(32))})
                         .cast(dtypes::uint32);
    const UOp low = c.alu(Op::ThreeFry, {c}).cast(dtypes::uint32);
    return kernel_sink(
        {kernel_end(kernel_store(kernel_index(p[0], {r}), high.alu(Op::Add, {low})), {r})},
        "threefry_index");
  };
  const Tensor out = Tensor::from_vector(std::vector<uint32_t>(n, 0), {n}, dtypes::uint32);
  const Tensor keys = Tensor::from_vector(std::vector<uint64_t>{key}, {1}, dtypes::uint64);
  const std::vector<uint32_t> got = custom_kernel({out, keys}, body)[0].data<uint32_t>();
  ASSERT_EQ(got.size(), static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const auto c = static_cast<uint64_t>(i);
    const auto want = static_cast<uint32_t>(threefry2x32_reference(c, key) >> 32) +
                      static_cast<uint32_t>(threefry2x32_reference(c, c));
    ASSERT_EQ(got[static_cast<size_t>(i)], want) << "index " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, Threefry, ::testing::ValuesIn(test_devices()), device_test_name);

// ---- what each target's program holds

// out[r] = ThreeFry(in[r], key[r])
std::vector<Op> program_ops(const std::string& device) {
  const int64_t n = 64;
  const Tensor like = Tensor::full({n}, 0, dtypes::uint64);
  const UOp out = param_like(like.uop(), 0), in = param_like(like.uop(), 1),
            key = param_like(like.uop(), 2);
  const UOp r = UOp::range(UOp::cint(n), 0);
  const UOp value = kernel_index(in, {r}).alu(Op::ThreeFry, {kernel_index(key, {r})});
  const UOp sink = kernel_sink({kernel_end(kernel_store(kernel_index(out, {r}), value), {r})}, "k");
  const UOp program = linearize_kernel(bind_kernel(sink, param_buffers(sink)), Target::of(device));
  std::vector<Op> ops;
  for (const UOp& u : program.src()) ops.push_back(u.op());
  return ops;
}
size_t count(const std::vector<Op>& ops, Op op) {
  return static_cast<size_t>(std::ranges::count(ops, op));
}

// CPU's program holds the 32-bit rounds and no ThreeFry; INTERP's keeps the op for itself (its
// target renders every op), so the two devices compute it independently.
TEST(ThreefryTargets, CpuLowersItAndInterpRunsIt) {
  SKIP_WHERE_INTERP_RUNS_GPU_KERNELS("INTERP");
  EXPECT_FALSE(Target::of("CPU").renders(Op::ThreeFry, dtypes::uint64));
  EXPECT_TRUE(Target::of("INTERP").renders(Op::ThreeFry, dtypes::uint64));
  const std::vector<Op> cpu = program_ops("CPU"), interp = program_ops("INTERP");
  EXPECT_EQ(count(cpu, Op::ThreeFry), 0u);
  // 20 rounds: one Xor each, and the key schedule's parity two more; a rotation is two shifts
  // and an Or
  EXPECT_EQ(count(cpu, Op::Xor), 22u);
  EXPECT_GE(count(cpu, Op::Shl), 20u);
  EXPECT_GE(count(cpu, Op::Shr), 20u);
  EXPECT_GE(count(cpu, Op::Or), 20u);
  EXPECT_EQ(count(interp, Op::ThreeFry), 1u);
  EXPECT_EQ(count(interp, Op::Xor), 0u);
}

// The lowering's compiled matcher (rwc) and the interpreter on rules/decompositions.rw build the
// same 20 rounds, node for node (the random graphs of tests/dsl/test_differential.cpp hold no
// ThreeFry).
TEST(ThreefryTargets, CompiledAndInterpretedLoweringsAgree) {
  SKIP_WHERE_INTERP_RUNS_GPU_KERNELS("INTERP");
  rw::Diagnostics d;
  std::shared_ptr<const rw::ResolvedProgram> program =
      rw::load_rules(TINYRW_SOURCE_DIR "/rules/decompositions.rw", d);
  ASSERT_NE(program, nullptr) << d.render();
  const rw::ResolvedSet* set = program->find("late_decompositions");
  ASSERT_NE(set, nullptr);
  const rw::RuleSetMatcher* compiled = rw::compiled_rules("late_decompositions");
  ASSERT_NE(compiled, nullptr);
  rw::InterpretedMatcher interpreted(program, *set);
  rw::DifferentialMatcher both(*compiled, interpreted);
  rw::KernelContext cpu{.target = &Target::of("CPU")};
  const UOp counter = UOp::variable("c", 0, 1000, dtypes::uint64),
            key = UOp::variable("k", 0, 1000, dtypes::uint64);
  const UOp node = counter.alu(Op::ThreeFry, {key});
  const UOp lowered = graph_rewrite(node, &both, {.ctx = &cpu});
  EXPECT_EQ(lowered, graph_rewrite(node, compiled, {.ctx = &cpu}));
  EXPECT_GT(both.compared(), 0u);
  const std::vector<UOp> nodes = toposort(lowered);
  EXPECT_TRUE(std::ranges::none_of(nodes, [](const UOp& u) { return u.op() == Op::ThreeFry; }));
  EXPECT_EQ(lowered.dtype(), dtypes::uint64);
  // INTERP's target keeps it
  rw::KernelContext interp{.target = &Target::of("INTERP")};
  EXPECT_EQ(graph_rewrite(node, &both, {.ctx = &interp}), node);
}

// ThreeFry takes uint64 sources only: another dtype is refused where the node is built, naming
// the op and the reason.
TEST(ThreefryTargets, RefusesSourcesThatAreNotUint64) {
  const Tensor a = Tensor::from_vector(std::vector<uint32_t>{1, 2}, {2}, dtypes::uint32);
  for (const char* what : {"ThreeFry of (", "needs uint64 sources"})
    expect_error<TensorError>([&] { (void)Tensor::alu(Op::ThreeFry, {a, a}); }, what);
}

}  // namespace
