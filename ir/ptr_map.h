// A flat open-addressing hash map keyed by pointers (linear probing, no erase), for the hot
// per-node bookkeeping of graph walks, where std::unordered_map's node allocations dominate.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace tinyrw {

template <class V>
class PtrMap {
 public:
  explicit PtrMap(size_t expected = 16) { rehash(capacity_for(expected)); }

  V* find(const void* key) {
    for (size_t i = slot(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return &slots_[i].value;
      if (!slots_[i].key) return nullptr;
    }
  }
  // Inserts a default value when absent; returns it and whether it was inserted.
  std::pair<V*, bool> try_emplace(const void* key) {
    if ((size_ + 1) * 4 > slots_.size() * 3) rehash(slots_.size() * 2);
    for (size_t i = slot(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return {&slots_[i].value, false};
      if (!slots_[i].key) {
        slots_[i].key = key;
        ++size_;
        return {&slots_[i].value, true};
      }
    }
  }
  size_t size() const { return size_; }

 private:
  struct Slot {
    const void* key = nullptr;
    V value{};
  };
  static size_t capacity_for(size_t n) {
    size_t c = 16;
    while (c * 3 < n * 4) c *= 2;
    return c;
  }
  // Fibonacci hashing: the top bits of the product are the well-mixed ones.
  size_t slot(const void* key) const {
    const uint64_t h = reinterpret_cast<uintptr_t>(key) * 0x9e3779b97f4a7c15ULL;
    return static_cast<size_t>(h >> shift_);
  }
  void rehash(size_t cap) {
    std::vector<Slot> old(cap);
    old.swap(slots_);
    mask_ = cap - 1;
    shift_ = 64 - static_cast<int>(std::bit_width(cap) - 1);
    size_ = 0;
    for (Slot& s : old) {
      if (s.key) *try_emplace(s.key).first = std::move(s.value);
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int shift_ = 60;
  size_t size_ = 0;
};

}  // namespace tinyrw
