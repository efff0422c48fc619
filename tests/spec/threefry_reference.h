// A reference Threefry-2x32 of 20 rounds (Salmon et al., "Parallel random numbers: as easy as
// 1, 2, 3", SC'11; Random123's threefry2x32_20), written from the algorithm for the tests, apart
// from the implementations it checks (ir/alu.h's, which INTERP runs, and CPU's lowering in
// rules/decompositions.rw). Packing as the ThreeFry op's: the low and high 32 bits of `counter`
// are the counter words x0, x1, those of `key` the key words k0, k1, and output word 0 is the
// result's low 32 bits, word 1 its high 32 bits.
#pragma once

#include <cstdint>

namespace tinyrw::testing {

inline uint32_t threefry_reference_rotl(uint32_t v, unsigned r) {
  return (v << r) | (v >> (32u - r));
}

inline uint64_t threefry2x32_reference(uint64_t counter, uint64_t key) {
  // the rotation of each of 8 rounds, repeating: rounds 4j..4j+3 use the first or second half
  constexpr unsigned kRotation[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  // the key schedule's parity: subkey k2 = k0 ^ k1 ^ this
  constexpr uint32_t kParity = 0x1BD11BDA;
  const auto k0 = static_cast<uint32_t>(key & 0xffffffffu);
  const auto k1 = static_cast<uint32_t>(key >> 32);
  const uint32_t subkey[3] = {k0, k1, k0 ^ k1 ^ kParity};
  uint32_t word[2] = {static_cast<uint32_t>(counter & 0xffffffffu) + subkey[0],
                      static_cast<uint32_t>(counter >> 32) + subkey[1]};
  for (uint32_t injection = 1; injection <= 5; ++injection) {  // 5 x 4 = 20 rounds
    for (unsigned rot : kRotation[(injection - 1) % 2]) {
      word[0] += word[1];
      word[1] = threefry_reference_rotl(word[1], rot) ^ word[0];
    }
    // every 4 rounds: the next subkeys, and the injection's number added to word 1
    word[0] += subkey[injection % 3];
    word[1] += subkey[(injection + 1) % 3] + injection;
  }
  return (static_cast<uint64_t>(word[1]) << 32) | word[0];
}

}  // namespace tinyrw::testing
