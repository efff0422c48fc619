// The memory UOp nodes live in (only ir/uop.cpp includes this header).
//
// One reserved stretch of virtual memory, handed out in 8-byte units: a node is named by a 32-bit
// index (its offset in units), which lets the hash-consing table keep 8-byte slots, and a node
// costs exactly its size (no malloc header; a binary node is 48 bytes). A freed cell at the top
// goes back to the bump region; others go on a free list per size and are reused for nodes of that
// size; the memory is kept for the process, as CPython's object allocator keeps its pools. Pages
// are committed by the OS on first touch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tinyrw {

class NodeArena {
 public:
  static constexpr size_t kUnit = 8;
  NodeArena();
  NodeArena(const NodeArena&) = delete;
  NodeArena& operator=(const NodeArena&) = delete;

  // A cell of `bytes` (a multiple of kUnit); throws GraphError when the arena is full.
  void* allocate(size_t bytes) {
    const size_t units = bytes / kUnit;
    live_ += bytes;
    if (units < free_.size() && free_[units]) {
      void* p = free_[units];
      unpoison(p, bytes);
      free_[units] = *static_cast<void**>(p);
      return p;
    }
    if (used_ + bytes > reserved_) {
      live_ -= bytes;
      throw_full(bytes);
    }
    void* p = base_ + used_;
    used_ += bytes;
    unpoison(p, bytes);  // a cell given back to the bump region was poisoned
#if defined(__SANITIZE_ADDRESS__)
    if (used_ > leak_scanned_) scan_for_leaks();
#endif
    return p;
  }
  void free(void* p, size_t bytes) {
    const size_t units = bytes / kUnit;
    live_ -= bytes;
    if (static_cast<char*>(p) + bytes == base_ + used_) {
      // The newest cell: give it back to the bump region, so that a graph released in reverse
      // order of creation (a chain, most of a DAG) leaves the next graph contiguous memory.
      // Free-listed cells always lie below used_: only a cell being freed moves it down.
      used_ -= bytes;
      poison(p, bytes);
      return;
    }
    if (units >= free_.size()) free_.resize(units + 1, nullptr);
    *static_cast<void**>(p) = free_[units];
    free_[units] = p;
    poison(p, bytes);
  }

  // Index 0 is never a cell, so it can mean "none".
  uint32_t index_of(const void* p) const {
    return static_cast<uint32_t>((static_cast<const char*>(p) - base_) / kUnit);
  }
  void* at(uint32_t index) const { return base_ + size_t{index} * kUnit; }
  size_t bytes_used() const { return used_; }  // cells ever handed out, live or free
  size_t bytes_live() const { return live_; }  // cells of live nodes

 private:
  static void poison(void* p, size_t bytes);  // no-ops unless built with AddressSanitizer
  static void unpoison(void* p, size_t bytes);
  [[noreturn]] void throw_full(size_t bytes) const;
#if defined(__SANITIZE_ADDRESS__)
  // The leak checker scans only memory it knows: register the cells handed out as a root region
  // (in steps, so that untouched reserved pages are never read), or every heap block a live node
  // refers to would be reported as leaked.
  void scan_for_leaks();
  size_t leak_scanned_ = 0;
#endif

  char* base_ = nullptr;
  size_t reserved_ = 0;
  size_t used_ = 0;
  size_t live_ = 0;
  std::vector<void*> free_;  // by size in units: the first free cell, each holding the next
};

}  // namespace tinyrw
