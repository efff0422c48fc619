#include "ir/uop.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include <sys/mman.h>

#include <fmt/format.h>

#include "ir/node_arena.h"
#include "ir/uop_node.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/lsan_interface.h>
#endif

namespace tinyrw {

// ---- node memory
// ----------------------------------------------------------------------------------

NodeArena::NodeArena() {
  // Reserve the whole 32-bit index space (32 GiB of addresses, no memory) where the system allows
  // it, less where it does not (a strict overcommit policy or an address-space limit).
  for (size_t bytes = size_t{kUnit} << 32; bytes >= (size_t{1} << 26); bytes /= 2) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) continue;
    madvise(p, bytes, MADV_HUGEPAGE);  // fewer page faults and TLB misses; a hint only
    base_ = static_cast<char*>(p);
    reserved_ = bytes;
    used_ = 4 * kUnit;  // index 0 stays unused
    return;
  }
  throw GraphError("cannot reserve memory for UOp nodes (mmap of 64 MiB failed)");
}

void NodeArena::throw_full(size_t bytes) const {
  throw GraphError(
      fmt::format("out of UOp node memory: {} bytes of nodes made, {} more asked for, {} reserved",
                  used_, bytes, reserved_));
}

#if defined(__SANITIZE_ADDRESS__)
void NodeArena::scan_for_leaks() {
  constexpr size_t kStep = size_t{64} << 20;
  while (leak_scanned_ < used_) {
    __lsan_register_root_region(base_ + leak_scanned_, std::min(kStep, reserved_ - leak_scanned_));
    leak_scanned_ += kStep;
  }
}
void NodeArena::poison(void* p, size_t bytes) { ASAN_POISON_MEMORY_REGION(p, bytes); }
void NodeArena::unpoison(void* p, size_t bytes) { ASAN_UNPOISON_MEMORY_REGION(p, bytes); }
#else
void NodeArena::poison(void*, size_t) {}
void NodeArena::unpoison(void*, size_t) {}
#endif

namespace {

constexpr int kKeyTagBits = 6;  // the near key's low bits: the far mark and hash bits

// Never destroyed: UOps held in static objects may be released during static destruction.
NodeArena& arena() {
  static NodeArena* a = new NodeArena();
  return *a;
}

// ---- the hash-consing table ---------------------------------------------------------------------

// A node's two keys (node_keys): `near` places it next to its newest source, `far` is a plain hash
// of its contents, used when the near run is full. Bit 0 tells them apart in a slot.
struct NodeKeys {
  uint32_t near;  // bit 0 clear
  uint32_t far;   // bit 0 set
};
NodeKeys node_keys(uint32_t op_nsrc, uint16_t dtype_id, std::span<const UOp> src, const Arg& arg,
                   const Arg& tag);
NodeKeys node_keys(const UOpNode* n) {
  return node_keys(n->op_nsrc, n->dtype_id, {n->srcs(), n->nsrc()}, n->arg, node_tag(n));
}

// Open addressing with linear probing over 8-byte slots: a key and the node's arena index. A probe
// compares keys in the slot array and touches a node only on a key match.
//
// A node's home slot follows its newest source (node_keys): graphs are built bottom up, so a new
// node's sources were made a moment ago, and the slots their arena positions map to were touched
// a moment ago too. With homes drawn at random, each new node of a million-node graph cost one
// cache miss in 12 MB of slots (perf: 60% of UOp::make). A source with many parents would make one
// long probe run, so a node probes at most kNear slots from its near home; past that it goes to
// its far home under its far key, and its block of near homes counts it, so that lookups there
// also try the far side while one is there. (Leaves are never anchors: a constant or a variable
// is a source of too many nodes; in a rewrite of index expressions, with leaves as anchors and
// blocks flagged until the next resize, 38% of lookups went to the far side: now 3%.)
//
// The capacity is any number (homes are taken modulo it), grown by half past 80% full: while a
// graph grows the load stays between 53% and 80% (issue 18 holds a UOp to 64 bytes with its slot).
// Dropped nodes leave a table of up to kRetainedSlots at its size (emptier, until the next graph
// fills it), and shrink a larger one below 1/8 full. Erase shifts later entries back instead of
// leaving tombstones.
class NodeTable {
 public:
  NodeTable() : arena_(arena()) { resize(kMinCapacity); }
  size_t size() const { return count_; }
  size_t far_count() const { return far_count_; }
  size_t bucket_count() const { return slots_.size(); }
  size_t bytes() const {
    return slots_.size() * sizeof(Slot) + far_blocks_.capacity() * sizeof(uint32_t);
  }
  size_t retained_bytes() const {
    return (buffers_[0].touched + buffers_[1].touched - slots_.size()) * sizeof(Slot);
  }

  // Where find() says a new node goes: a slot and the key it is filed under there.
  struct Place {
    size_t slot = 0;
    uint32_t key = 0;
  };

  // The live node equal to the arguments, or nullptr; `*place` is then where to insert it (valid
  // until the table changes).
  UOpNode* find(const NodeKeys& keys, uint32_t op_nsrc, uint16_t dtype_id, std::span<const UOp> src,
                const Arg& arg, const Arg& tag, Place* place) {
    if ((count_ + 1) * kMaxLoadDen > slots_.size() * kMaxLoadNum) resize(slots_.size() * 3 / 2);
    auto same = [&](const Slot& s, uint32_t key) {
      if (s.key != key) return false;
      auto* n = static_cast<UOpNode*>(arena_.at(s.index));
      if (n->refcount == 0 || n->op_nsrc != op_nsrc || n->dtype_id != dtype_id) return false;
      for (size_t k = 0; k < src.size(); ++k)
        if (n->srcs()[k] != src[k]) return false;
      return n->arg == arg && node_tag(n) == tag;
    };
    const size_t near = near_home(keys.near);
    *place = Place{0, keys.far};
    size_t i = near;
    for (size_t step = 0; step < kNear; ++step, i = next(i)) {
      const Slot& s = slots_[i];
      if (!s.index) {
        *place = Place{i, keys.near};
        break;
      }
      if (same(s, keys.near)) return static_cast<UOpNode*>(arena_.at(s.index));
    }
    const bool goes_far = place->key == keys.far;
    if (!goes_far && far_blocks_[near / kNear] == 0) return nullptr;
    for (i = far_home(keys.far);; i = next(i)) {
      const Slot& s = slots_[i];
      if (!s.index) {
        if (goes_far) place->slot = i;
        return nullptr;
      }
      if (same(s, keys.far)) return static_cast<UOpNode*>(arena_.at(s.index));
    }
  }
  void insert_at(const Place& place, UOpNode* n) {
    slots_[place.slot] = Slot{place.key, arena_.index_of(n)};
    if (place.key & 1) mark_far(n->hash);
    ++count_;
  }
  void erase(UOpNode* n) {
    const uint32_t index = arena_.index_of(n);
    size_t i = near_home(n->hash);
    size_t step = 0;
    for (; step < kNear && slots_[i].index != index; ++step) i = next(i);
    if (step == kNear) {  // not near its near home: from its far home on
      for (i = far_home(node_keys(n).far); slots_[i].index != index;) i = next(i);
    }
    if (slots_[i].key & 1) {  // filed far (its far home may lie near too)
      --far_blocks_[near_home(n->hash) / kNear];
      --far_count_;
    }
    // Backward shift: move each later entry of the probe run into the hole when its home does
    // not lie in (hole, entry], so every entry stays reachable from its home (and a near entry
    // only ever comes closer to its home).
    for (size_t j = next(i); slots_[j].index; j = next(j)) {
      const size_t h = home(slots_[j]);
      const bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
      if (stays) continue;
      slots_[i] = slots_[j];
      i = j;
    }
    slots_[i] = Slot{};
    --count_;
    // Give memory back when a large graph is dropped, down to the slot memory a resize keeps
    // anyway (kRetainedBytes): a table within it keeps its size, so the next graph of that size
    // is made with no resizes (each re-files every node) and the drop itself with none.
    if (slots_.size() > kRetainedSlots && count_ * 8 < slots_.size())
      resize(std::max(kRetainedSlots, count_ * 2));
  }
  // Calls f on every node in the table.
  template <class F>
  void for_each(F&& f) {
    for (const Slot& s : slots_)
      if (s.index) f(static_cast<UOpNode*>(arena_.at(s.index)));
  }

 private:
  struct Slot {
    uint32_t key = 0;    // the node's near or far key
    uint32_t index = 0;  // in the arena; 0: empty
  };
  static constexpr size_t kMinCapacity = 1u << 10;
  static constexpr size_t kMaxLoadNum = 4, kMaxLoadDen = 5;  // grow past 80% full
  static constexpr size_t kNear = 64;                        // slots probed from the near home

  // v mod capacity by Lemire's multiply-shift (no division in the probe loop)
  size_t reduce(uint32_t v) const {
    const uint64_t low = modulo_magic_ * v;
    return static_cast<size_t>((static_cast<unsigned __int128>(low) * slots_.size()) >> 64);
  }
  size_t near_home(uint32_t near_key) const { return reduce(near_key >> kKeyTagBits); }
  size_t far_home(uint32_t far_key) const { return reduce(far_key >> 1); }
  size_t home(const Slot& s) const { return s.key & 1 ? far_home(s.key) : near_home(s.key); }
  size_t next(size_t i) const { return i + 1 == slots_.size() ? 0 : i + 1; }
  void mark_far(uint32_t near_key) {
    ++far_blocks_[near_home(near_key) / kNear];
    ++far_count_;
  }

  // Slot arrays are taken from two buffers in turn: a resize fills the one the table is not in.
  // The one it leaves keeps its memory (up to kRetainedBytes) for the next resize: the OS hands
  // out fresh memory zeroed page by page, and a graph dropped and built again (the compiler's
  // passes do that all the time) resized through a million-node table's sizes each time, a fifth
  // of the time of making it spent in the kernel zeroing pages.
  struct Buffer {
    Slot* data = nullptr;
    size_t size = 0;     // slots allocated (pages the table never used are never committed)
    size_t touched = 0;  // slots the table has used
    void release() {
      std::free(data);
      *this = Buffer{};
    }
  };
  static constexpr size_t kRetainedBytes = size_t{16} << 20;
  static constexpr size_t kRetainedSlots = kRetainedBytes / sizeof(Slot);

  void resize(size_t capacity) {
    Buffer& fill = buffers_[1 - live_];
    if (fill.size < capacity) {
      // Room for the growth after the next too (the buffers alternate), so that a table that
      // grows again through the same sizes finds both big enough.
      const size_t size = capacity * 9 / 4;
      fill.release();
      fill.data = static_cast<Slot*>(std::calloc(size, sizeof(Slot)));
      if (!fill.data) throw std::bad_alloc();
      fill.size = size;
    } else {
      std::memset(static_cast<void*>(fill.data), 0, capacity * sizeof(Slot));
    }
    fill.touched = std::max(fill.touched, capacity);
    const std::span<const Slot> old = slots_;
    slots_ = {fill.data, capacity};
    live_ = 1 - live_;
    modulo_magic_ = UINT64_MAX / capacity + 1;
    far_blocks_.assign(capacity / kNear + 1, 0);
    far_count_ = 0;
    for (const Slot& s : old) {
      if (!s.index) continue;
      // An entry filed far has its near key in its node: it may fit near now.
      const auto* n = static_cast<const UOpNode*>(arena_.at(s.index));
      const uint32_t near_key = s.key & 1 ? n->hash : s.key;
      size_t i = near_home(near_key);
      size_t step = 0;
      for (; step < kNear && slots_[i].index; ++step) i = next(i);
      uint32_t key = near_key;
      if (step == kNear) {
        key = s.key & 1 ? s.key : node_keys(n).far;
        mark_far(near_key);
        for (i = far_home(key); slots_[i].index;) i = next(i);
      }
      slots_[i] = Slot{key, s.index};
    }
    Buffer& left = buffers_[1 - live_];
    if (left.touched * sizeof(Slot) > kRetainedBytes) left.release();
  }

  NodeArena& arena_;  // where the slots' indices point
  Buffer buffers_[2];
  int live_ = 0;                      // the buffer slots_ lies in
  std::span<Slot> slots_;             // the table: a prefix of buffers_[live_]
  std::vector<uint32_t> far_blocks_;  // per kNear near homes: how many of their nodes sit far
  uint64_t modulo_magic_ = 0;
  size_t count_ = 0;
  size_t far_count_ = 0;
};

// Never destroyed, like the arena.
NodeTable& table() {
  static NodeTable* t = new NodeTable();
  return *t;
}

// The far key is a hash of the node's contents; the sources count by address, not by their
// hashes (one built from the sources' hashes repeats along long chains, x = x + x). The near key
// holds, above bit 5, the near home before the modulo: for a node with a source that has sources
// itself, the newest such source's arena index (8-byte units: nodes are 4 to 8 units apart, so
// consecutive nodes' homes are a few slots apart and many graphs' homes interleave evenly) plus
// 0..15 from the hash; for an integer leaf, a position by value; else the hash. Bits 1..5 are
// hash bits.
NodeKeys node_keys(uint32_t op_nsrc, uint16_t dtype_id, std::span<const UOp> src, const Arg& arg,
                   const Arg& tag) {
  uint64_t h = 0xcbf29ce484222325ULL ^ (uint64_t{op_nsrc} << 16 | dtype_id);
  auto mix = [&h](uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0x100000001b3ULL;
  };
  mix(arg.hash());
  if (!tag.is_none()) mix(tag.hash());
  uint32_t newest = 0;
  for (const UOp& s : src) {
    mix(reinterpret_cast<uintptr_t>(s.node()) >> 4);
    if (s.node()->nsrc() > 0) newest = std::max(newest, arena().index_of(s.node()));
  }
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ULL;
  const auto hash = static_cast<uint32_t>(h ^ (h >> 32));
  uint32_t near = hash >> kKeyTagBits;
  if (newest) {
    near = newest + (hash >> 28);
  } else if (src.empty() && arg.is_int() && tag.is_none()) {
    // An integer leaf (a CONST, mostly): next to the leaves of the same op and type with nearby
    // values, which programs make together (indices, sizes, strides).
    near = (op_nsrc << 16 | dtype_id) * 0x9E3779B1u + static_cast<uint32_t>(arg.as_int()) * 4;
  }
  return {near << kKeyTagBits | (hash & 0x3e), hash | 1};
}

// ---- side blocks (tags and derived properties) --------------------------------------------------

uint32_t g_extras_capacity = 0;
uint32_t g_extras_used = 1;  // slot 0 means "none"
// Indices of deleted blocks, for reuse. Never destroyed, like the table.
std::vector<uint32_t>& free_extras() {
  static auto* v = new std::vector<uint32_t>();
  return *v;
}

uint32_t add_extra(Derived* d) {
  uint32_t i;
  if (!free_extras().empty()) {
    i = free_extras().back();
    free_extras().pop_back();
  } else {
    if (g_extras_used >= g_extras_capacity) {
      if (g_extras_capacity >= (uint32_t{1} << 31)) throw GraphError("too many UOp side blocks");
      g_extras_capacity = std::max<uint32_t>(1024, g_extras_capacity * 2);
      auto* grown =
          static_cast<Derived**>(std::realloc(g_node_extras, g_extras_capacity * sizeof(Derived*)));
      if (!grown) throw std::bad_alloc();
      g_node_extras = grown;
    }
    i = g_extras_used++;
  }
  g_node_extras[i] = d;
  return i;
}

// A new side block holding `tag` (None for one made for derived properties); its index.
uint32_t add_side_block(Arg tag) {
  auto d = std::make_unique<Derived>();
  d->tag = std::move(tag);
  const uint32_t i = add_extra(d.get());
  d.release();  // owned by the side-block table now
  return i;
}

void destroy_node(UOpNode* n) {
  table().erase(n);
  if (n->extra) {
    delete g_node_extras[n->extra];
    free_extras().push_back(n->extra);
  }
  const uint32_t nsrc = n->nsrc();
  for (uint32_t i = 0; i < nsrc; ++i) n->srcs()[i].~UOp();
  n->arg.~Arg();
  arena().free(n, uop_node_bytes(nsrc));
}

// Releasing a node releases its sources; a worklist keeps that off the C++ stack. The worklist is
// a heap that destroys the highest address first: a graph's nodes then go back in reverse order
// of creation, each the arena's top cell while nothing newer lives, so the bump region takes them
// back and the next graph is made in contiguous memory. (Taken in the order sources are reached,
// most cells went on the free lists, and the next graph was scattered over them in that order:
// a walk of a million-node DAG made there ran at less than half the speed.)
void release_node(UOpNode* n) {
  // Never destroyed: UOps held by static objects are released during static destruction, after
  // thread-local and most static objects are gone.
  static std::vector<UOpNode*>& pending = *new std::vector<UOpNode*>();
  static bool draining = false;
  pending.push_back(n);
  std::push_heap(pending.begin(), pending.end());
  if (draining) return;
  draining = true;
  while (!pending.empty()) {
    std::pop_heap(pending.begin(), pending.end());
    UOpNode* x = pending.back();
    pending.pop_back();
    destroy_node(x);
  }
  draining = false;
}

// NodeSlots: the epoch of the last walk that owned the nodes' marks, and whether one owns them now.
uint16_t g_last_epoch = 0;
bool g_marks_owned = false;

const Arg& no_tag() {
  static const Arg* none = new Arg();
  return *none;
}

}  // namespace

Derived** g_node_extras = nullptr;

const Arg& node_tag(const UOpNode* n) {
  const Derived* d = derived_of(n);
  return d ? d->tag : no_tag();
}

Derived& derive(UOpNode* n) {
  if (!n->extra) n->extra = add_side_block(Arg());
  return *g_node_extras[n->extra];
}

NodeSlots::NodeSlots() {
  if (g_marks_owned) return;
  g_marks_owned = true;
  if (g_last_epoch == UINT16_MAX) {  // wrapped: forget every old mark so none can match again
    table().for_each([](UOpNode* n) { n->walk_epoch = 0; });
    g_last_epoch = 0;
  }
  epoch_ = ++g_last_epoch;
}
NodeSlots::~NodeSlots() {
  if (epoch_) g_marks_owned = false;
}

UOpTableStats uop_table_stats() {
  return {table().size(),          table().bucket_count(), table().bytes(),
          arena().bytes_live(),    arena().bytes_used(),   table().far_count(),
          table().retained_bytes()};
}
size_t uop_node_bytes(size_t nsrc) { return sizeof(UOpNode) + nsrc * sizeof(UOp); }

// ---- handle -------------------------------------------------------------------------------------

void release_uop_node(UOpNode* n) { release_node(n); }
void throw_bad_source_index(const UOpNode* n, size_t i) {
  throw GraphError(
      fmt::format("{} has {} sources, source {} requested", op_name(n->op()), n->nsrc(), i));
}

const Arg& UOp::tag() const { return node_tag(n_); }

UOp UOp::make(Op op, DType dtype, std::span<const UOp> src, Arg arg, Arg tag) {
  const OpInfo& info = op_info(op);
  if (!info.accepts_arity(static_cast<int>(src.size()))) {
    const std::string want = info.max_src < 0 ? fmt::format("at least {}", info.min_src)
                             : info.min_src == info.max_src
                                 ? fmt::format("{}", info.min_src)
                                 : fmt::format("{} to {}", info.min_src, info.max_src);
    throw GraphError(fmt::format("{} takes {} sources, got {}", info.name, want, src.size()));
  }
  if (src.size() > UOpNode::kMaxSources) {
    throw GraphError(fmt::format("{} given {} sources; a node holds at most {}", info.name,
                                 src.size(), UOpNode::kMaxSources));
  }
  for (const UOp& s : src) {
    if (!s) throw GraphError(fmt::format("{} given an empty source", info.name));
  }
  const uint32_t op_nsrc = static_cast<uint32_t>(op) | static_cast<uint32_t>(src.size()) << 8;
  const uint16_t dtype_id = dtype.id();
  const NodeKeys keys = node_keys(op_nsrc, dtype_id, src, arg, tag);
  NodeTable::Place place;
  if (UOpNode* found = table().find(keys, op_nsrc, dtype_id, src, arg, tag, &place))
    return UOp(found, false);

  void* mem = arena().allocate(uop_node_bytes(src.size()));
  uint32_t extra = 0;
  if (!tag.is_none()) {
    try {
      extra = add_side_block(std::move(tag));
    } catch (...) {
      arena().free(mem, uop_node_bytes(src.size()));
      throw;
    }
  }
  auto* n = static_cast<UOpNode*>(mem);
  n->refcount = 0;
  n->hash = keys.near;
  n->op_nsrc = op_nsrc;
  n->dtype_id = dtype_id;
  n->walk_epoch = 0;
  n->walk_slot = 0;
  n->extra = extra;
  new (&n->arg) Arg(std::move(arg));
  for (size_t i = 0; i < src.size(); ++i) new (&n->srcs()[i]) UOp(src[i]);
  table().insert_at(place, n);
  return UOp(n, false);
}

UOp UOp::make(Op op, DType dtype, std::initializer_list<UOp> src, Arg arg, Arg tag) {
  return make(op, dtype, std::span<const UOp>(src.begin(), src.size()), std::move(arg),
              std::move(tag));
}

namespace {
// Converts a constant to the representation of `dtype` (exact dtype semantics).
Arg const_value(DType dtype, const Arg& v) {
  if (v.is_invalid()) return v;
  if (!v.is_number()) {
    throw GraphError(
        fmt::format("constant of {} must be a number, got {}", dtype.repr(), v.repr()));
  }
  const DType s = dtype.scalar_type();
  if (s.is_bool()) return Arg::boolean(v.is_float() ? v.as_float() != 0 : v.as_int() != 0);
  if (s.is_int()) {
    if (v.is_float()) {
      const double f = v.as_float();
      if (!std::isfinite(f)) {
        throw GraphError(fmt::format("cannot convert {} to integer {}", v.repr(), s.repr()));
      }
      return Arg::integer(truncate_int(s, static_cast<i128>(std::trunc(f))));
    }
    return Arg::integer(truncate_int(s, v.as_int()));
  }
  if (s.is_float()) return Arg::real(truncate_float(s, v.as_float()));
  throw GraphError(fmt::format("cannot make a constant of {}", dtype.repr()));
}
}  // namespace

UOp UOp::constant(DType dtype, const Arg& value) {
  return make(Op::Const, dtype, {}, const_value(dtype, value));
}

UOp UOp::under(Op op) const {
  UOp v = *this;
  while (v.op() == op && v.nsrc() > 0) v = v.src(0);
  return v;
}

UOp UOp::variable(std::string_view name, i128 lo, i128 hi, DType dtype, i128 multiple_of) {
  if (lo > hi) {
    throw GraphError(
        fmt::format("variable {} has an empty range [{}, {}]", name, to_string(lo), to_string(hi)));
  }
  if (multiple_of < 1)
    throw GraphError(fmt::format("variable {}: multiple_of must be positive, got {}", name,
                                 to_string(multiple_of)));
  std::vector<Arg> arg{Arg::string(name), Arg::integer(lo), Arg::integer(hi)};
  if (multiple_of > 1) arg.push_back(Arg::integer(multiple_of));
  return make(Op::DefineVar, dtype, {}, Arg::tuple(std::move(arg)));
}

UOp UOp::range(const UOp& end, int axis, AxisType type) {
  return make(Op::Range, end.dtype(), {end},
              Arg::tuple({Arg::integer(axis), Arg::string(axis_type_name(type))}));
}

UOp UOp::sink(std::span<const UOp> srcs) { return make(Op::Sink, dtypes::void_, srcs); }

UOp UOp::with_src(std::span<const UOp> src) const { return make(op(), dtype(), src, arg(), tag()); }
UOp UOp::with_src(std::initializer_list<UOp> src) const {
  return with_src(std::span<const UOp>(src.begin(), src.size()));
}
UOp UOp::with_arg(Arg a) const { return make(op(), dtype(), src(), std::move(a), tag()); }
UOp UOp::with_dtype(DType d) const { return make(op(), d, src(), arg(), tag()); }
UOp UOp::with_tag(Arg t) const { return make(op(), dtype(), src(), arg(), std::move(t)); }
UOp UOp::with_op(Op o) const { return make(o, dtype(), src(), arg(), tag()); }

// ---- arithmetic
// -------------------------------------------------------------------------------------

UOp UOp::const_like(i128 v) const { return constant(dtype(), Arg::integer(v)); }
UOp UOp::const_like(double v) const { return constant(dtype(), Arg::real(v)); }
UOp UOp::const_like(const Arg& v) const { return constant(dtype(), v); }

namespace {
// The dtype of an ALU node over `src`, or a GraphError when the sources do not type (the rules of
// spec_alu in rules/spec.rw, checked here so that a bad node is refused where it is built).
DType alu_dtype(Op op, std::span<const UOp> src) {
  const DType a = src[0].dtype();
  auto fail = [&](std::string_view why) -> DType {
    std::string ds;
    for (const UOp& s : src) ds += (ds.empty() ? "" : ", ") + s.dtype().repr();
    throw GraphError(fmt::format("{} of ({}): {}", op_name(op), ds, why));
  };
  auto all_same = [&] {
    for (const UOp& s : src)
      if (s.dtype() != a) return false;
    return true;
  };
  switch (op) {
    case Op::Exp2:
    case Op::Log2:
    case Op::Sin:
    case Op::Sqrt:
    case Op::Reciprocal:
      return a.is_float() ? a : fail("needs a float source");
    case Op::Trunc:  // (of an int or a bool: the value itself)
      return a;
    case Op::Neg:  // (no negation of a bool: UOp's unary minus of one is logical_not)
      return a.scalar_type().is_bool() ? fail("needs an int or float source") : a;
    case Op::CmpLt:
    case Op::CmpNe:
    case Op::CmpEq:
      return all_same() ? dtypes::bool_.vec(a.count())
                        : fail("compares sources of different dtypes");
    case Op::Where:
      if (!src[0].dtype().scalar_type().is_bool()) return fail("needs a bool condition");
      return src[1].dtype() == src[2].dtype() ? src[1].dtype()
                                              : fail("the two branches have different dtypes");
    case Op::FDiv:
    case Op::Pow:
      if (!a.scalar_type().is_float()) return fail("needs float sources");
      return all_same() ? a : fail("sources have different dtypes");
    case Op::CDiv:
    case Op::CMod:
    case Op::FloorDiv:
    case Op::FloorMod:
    case Op::Shl:
    case Op::Shr:
      if (!a.scalar_type().is_int() || !src[1].dtype().scalar_type().is_int())
        return fail("needs integer sources");
      return all_same() ? a : fail("sources have different dtypes");
    case Op::And:
    case Op::Or:
    case Op::Xor:
      if (!a.scalar_type().is_int() && !a.scalar_type().is_bool())
        return fail("needs integer or bool sources");
      return all_same() ? a : fail("sources have different dtypes");
    case Op::Sub:
    case Op::MulAcc:
      if (a.scalar_type().is_bool()) return fail("needs int or float sources");
      return all_same() ? a : fail("sources have different dtypes");
    case Op::ThreeFry:
      return a == dtypes::uint64 && all_same() ? a : fail("needs uint64 sources");
    default:  // Add, Mul, Max (at bool: or, and, or)
      return all_same() ? a : fail("sources have different dtypes");
  }
}
}  // namespace

DType alu_result_dtype(Op op, std::span<const UOp> src) {
  const OpInfo& info = op_info(op);
  if (!info.is_alu() || !info.accepts_arity(static_cast<int>(src.size())))
    throw GraphError(fmt::format("{} is not an ALU op of {} sources", op_name(op), src.size()));
  for (const UOp& s : src)
    if (!s) throw GraphError(fmt::format("{} given an empty source", op_name(op)));
  return alu_dtype(op, src);
}

UOp UOp::alu(Op op, std::span<const UOp> others) const {
  if (others.size() > 2)
    throw GraphError(
        fmt::format("{} is not an ALU op of {} sources", op_name(op), others.size() + 1));
  std::array<UOp, 3> src{*this};
  std::copy(others.begin(), others.end(), src.begin() + 1);
  const std::span<const UOp> all(src.data(), others.size() + 1);
  return make(op, alu_result_dtype(op, all), all);
}
UOp UOp::alu(Op op, std::initializer_list<UOp> others) const {
  return alu(op, std::span<const UOp>(others.begin(), others.size()));
}

UOp UOp::operator-() const {
  if (dtype().is_bool()) return logical_not();
  return dtype().is_float() ? *this * const_like(-1.0) : *this * const_like(static_cast<i128>(-1));
}
UOp UOp::floordiv(const UOp& o) const { return alu(Op::FloorDiv, {o}); }
UOp UOp::floormod(const UOp& o) const { return alu(Op::FloorMod, {o}); }
UOp UOp::cdiv(const UOp& o) const { return alu(Op::CDiv, {o}); }
UOp UOp::cmod(const UOp& o) const { return alu(Op::CMod, {o}); }
UOp UOp::maximum(const UOp& o) const { return alu(Op::Max, {o}); }
UOp UOp::minimum(const UOp& o) const { return -((-*this).maximum(-o)); }
UOp UOp::lt(const UOp& o) const { return alu(Op::CmpLt, {o}); }
UOp UOp::le(const UOp& o) const { return o.lt(*this).logical_not(); }
UOp UOp::ge(const UOp& o) const { return lt(o).logical_not(); }
UOp UOp::ne(const UOp& o) const { return alu(Op::CmpNe, {o}); }
UOp UOp::eq(const UOp& o) const { return ne(o).logical_not(); }
UOp UOp::logical_not() const { return ne(cbool(true)); }
UOp UOp::where(const UOp& a, const UOp& b) const { return alu(Op::Where, {a, b}); }
UOp UOp::cast(DType d) const {
  if (d.count() == 1 && dtype().count() > 1) d = d.vec(dtype().count());
  return d == dtype() ? *this : make(Op::Cast, d, {*this});
}
UOp UOp::bitcast(DType d) const { return d == dtype() ? *this : make(Op::Bitcast, d, {*this}); }

UOp operator+(const UOp& a, const UOp& b) { return a.alu(Op::Add, {b}); }
UOp operator-(const UOp& a, const UOp& b) { return a + (-b); }
UOp operator*(const UOp& a, const UOp& b) { return a.alu(Op::Mul, {b}); }
UOp operator&(const UOp& a, const UOp& b) { return a.alu(Op::And, {b}); }
UOp operator|(const UOp& a, const UOp& b) { return a.alu(Op::Or, {b}); }
UOp operator^(const UOp& a, const UOp& b) { return a.alu(Op::Xor, {b}); }
UOp operator<<(const UOp& a, const UOp& b) { return a.alu(Op::Shl, {b}); }
UOp operator>>(const UOp& a, const UOp& b) { return a.alu(Op::Shr, {b}); }

// ---- printing
// ---------------------------------------------------------------------------------------

std::string UOp::repr(int depth) const {
  if (!n_) return "UOp(null)";
  std::string s =
      fmt::format("UOp(Ops.{}, {}, arg={}", op_info(op()).py_name, dtype().repr(), arg().repr());
  if (!tag().is_none()) s += ", tag=" + tag().repr();
  s += ", src=(";
  for (size_t i = 0; i < nsrc(); ++i) {
    if (i) s += ", ";
    s += depth > 0 ? src(i).repr(depth - 1) : "...";
  }
  return s + (nsrc() == 1 ? ",))" : "))");
}

// ---- Num and SInt
// -----------------------------------------------------------------------------------

double Num::as_double() const {
  if (is_float) return f;
  if (i >= kInfinity) return INFINITY;
  if (i <= -kInfinity) return -INFINITY;
  return static_cast<double>(i);
}
bool Num::is_infinite() const { return is_float ? std::isinf(f) : tinyrw::is_infinite(i); }
std::partial_ordering Num::operator<=>(const Num& o) const {
  if (!is_float && !o.is_float) return i <=> o.i;
  return as_double() <=> o.as_double();
}
std::string Num::repr() const {
  if (is_float) return Arg::real(f).repr();
  if (i >= kInfinity) return "inf";
  if (i <= -kInfinity) return "-inf";
  return to_string(i);
}

SInt::SInt(UOp u) {
  if (u.is_const() && u.arg().is_int()) {
    v_ = static_cast<int64_t>(u.arg().as_int());
  } else {
    u_ = std::move(u);
  }
}
int64_t SInt::value() const {
  if (u_) throw GraphError("symbolic size " + u_.repr(1) + " has no concrete value");
  return v_;
}
UOp SInt::as_uop() const { return u_ ? u_ : UOp::cint(v_); }
std::string SInt::repr() const { return u_ ? u_.repr(1) : std::to_string(v_); }

std::string shape_repr(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + s[i].repr();
  return out + (s.size() == 1 ? ",)" : ")");
}

UOp shape_to_uop(const Shape& s) {
  std::vector<UOp> dims;
  dims.reserve(s.size());
  for (const SInt& d : s) dims.push_back(d.as_uop());
  return UOp::make(Op::Stack, s.empty() ? dtypes::void_ : dtypes::index, dims);
}

Shape uop_to_shape(const UOp& u) {
  if (u.op() == Op::Stack) return Shape(u.src().begin(), u.src().end());
  if (u.op() == Op::Const) return Shape{SInt(u)};
  throw GraphError(fmt::format("expected a shape (STACK of sizes), got {}", u.repr(1)));
}

}  // namespace tinyrw
