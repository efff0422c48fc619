#include "runtime/llvm_render.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

#include "codegen/linearize.h"

#include "ir/axis.h"
#include "ir/graph.h"
#include "runtime/storage.h"

namespace tinyrw {

namespace {

// Vector stores into buffers of at least this many bytes bypass the caches (far beyond an L2,
// and beyond the share of a last-level cache a core can count on).
constexpr int64_t kNonTemporalBytes = int64_t{8} << 20;

int error_code(Op op) { return static_cast<int>(op) + 1; }
bool is_int_division(Op op) {
  return op == Op::CDiv || op == Op::CMod || op == Op::FloorDiv || op == Op::FloorMod;
}
// The smallest value of the LLVM integer type t ("i8" ... "i64").
i128 min_of(const std::string& t) {
  return -(static_cast<i128>(1) << (std::stoi(t.substr(1)) - 1));
}

// 16-bit floats compute in float and round every result to their precision (as INTERP does).
bool is_half(DType d) { return d == dtypes::float16 || d == dtypes::bfloat16; }

std::string ll_type(DType d) {
  if (d.is_bool()) return "i1";
  if (d.is_index())  // rules/decompositions.rw lowers every index to int32 or int64
    throw std::logic_error("LLVM renderer: an index-dtype value reached it");
  if (d.is_int()) return fmt::format("i{}", d.itemsize() * 8);
  if (d == dtypes::float32 || is_half(d)) return "float";
  if (d == dtypes::float64) return "double";
  throw std::invalid_argument("LLVM renderer: dtype " + d.repr() + " is not supported");
}
// In memory bools are bytes, halves `half` and bfloat16 the top 16 bits of a float.
std::string mem_type(DType d) {
  if (d.is_bool()) return "i8";
  if (d == dtypes::float16) return "half";
  if (d == dtypes::bfloat16) return "i16";
  return ll_type(d);
}

std::string ll_const(DType d, const Arg& v) {
  if (d.is_bool()) return v.as_bool() ? "true" : "false";
  if (d.is_int()) return to_string(v.as_int());
  const double x =
      d == dtypes::float64 ? v.as_float() : static_cast<double>(static_cast<float>(v.as_float()));
  return fmt::format("0x{:016X}", std::bit_cast<uint64_t>(x));
}
class Emitter {
 public:
  explicit Emitter(LlvmTarget target) : target_(target) {}
  bool gpu() const { return target_ != LlvmTarget::Cpu; }
  // the device a message names
  const char* who() const {
    return target_ == LlvmTarget::Cpu ? "CPU" : target_ == LlvmTarget::Nvptx ? "CUDA" : "HIP";
  }

  std::string tmp() { return fmt::format("%t{}", next_++); }
  std::string label(const char* base) { return fmt::format("{}{}", base, next_++); }
  void line(const std::string& s) { body_ += "  " + s + "\n"; }
  void block(const std::string& name) { body_ += name + ":\n"; }

  // A float value rounded to a 16-bit float's precision (still a float).
  std::string round16(DType d, const std::string& v) {
    if (!is_half(d)) return v;
    if (d == dtypes::float16) {
      const std::string h = tmp(), r = tmp();
      line(fmt::format("{} = fptrunc float {} to half", h, v));
      line(fmt::format("{} = fpext half {} to float", r, h));
      return r;
    }
    // bfloat16: round to nearest even on the top 16 bits
    const std::string u = tmp(), sh = tmp(), lsb = tmp(), bias = tmp(), sum = tmp(), m = tmp(),
                      r = tmp();
    line(fmt::format("{} = bitcast float {} to i32", u, v));
    line(fmt::format("{} = lshr i32 {}, 16", sh, u));
    line(fmt::format("{} = and i32 {}, 1", lsb, sh));
    line(fmt::format("{} = add i32 {}, 32767", bias, lsb));
    line(fmt::format("{} = add i32 {}, {}", sum, u, bias));
    line(fmt::format("{} = and i32 {}, -65536", m, sum));
    line(fmt::format("{} = bitcast i32 {} to float", r, m));
    return r;
  }
  // A value loaded in memory representation, as a computation value.
  std::string from_memory(DType d, const std::string& v) {
    if (d == dtypes::float16) {
      const std::string r = tmp();
      line(fmt::format("{} = fpext half {} to float", r, v));
      return r;
    }
    if (d == dtypes::bfloat16) {
      const std::string z = tmp(), sh = tmp(), r = tmp();
      line(fmt::format("{} = zext i16 {} to i32", z, v));
      line(fmt::format("{} = shl i32 {}, 16", sh, z));
      line(fmt::format("{} = bitcast i32 {} to float", r, sh));
      return r;
    }
    if (d.is_bool()) {
      const std::string r = tmp();
      line(fmt::format("{} = icmp ne i8 {}, 0", r, v));
      return r;
    }
    return v;
  }
  std::string to_memory(DType d, const std::string& v) {
    const std::string r = tmp();
    if (d == dtypes::float16) {
      line(fmt::format("{} = fptrunc float {} to half", r, v));
    } else if (d == dtypes::bfloat16) {
      const std::string u = tmp(), sh = tmp();
      line(fmt::format("{} = bitcast float {} to i32", u, v));
      line(fmt::format("{} = lshr i32 {}, 16", sh, u));
      line(fmt::format("{} = trunc i32 {} to i16", r, sh));
    } else if (d.is_bool()) {
      line(fmt::format("{} = zext i1 {} to i8", r, v));
    } else {
      return v;
    }
    return r;
  }

  // The program's instructions in order: each value an SSA name, each loop a head block with the
  // index's phi, a body, a latch and an exit.
  void program(const UOp& linear) {
    for (const UOp& u : linear.src()) instruction(u);
    if (!loops_.empty()) throw std::logic_error(fmt::format("{}: a RANGE without its END", who()));
    if (!gates_.empty()) throw std::logic_error(fmt::format("{}: an IF without its ENDIF", who()));
  }

  std::map<int64_t, int> buffer_index;  // slot -> argument position (output is 0)
  std::vector<int64_t> input_slots;     // slots in argument order
  std::vector<std::string> variables;   // DEFINE_VAR names, after the buffers in argument order
  int64_t threads = 1;                  // the launch's core_id bound
  std::array<int64_t, 3> global_size{1, 1, 1}, local_size{1, 1, 1};  // GPU launch dimensions
  std::string allocas_, body_, globals_;
  std::set<std::string> intrinsics_;
  bool streams_ = false;           // a non-temporal store was emitted
  std::vector<int> reduce_loops_;  // ids of the loops marked not to unroll
  // metadata: !0 non-temporal, !1 "do not unroll", !(kLoopMetadata + id) loop id's identity
  static constexpr int kLoopMetadata = 2;

 private:
  struct Loop {
    const UOpNode* range;
    std::string idx, head, latch, exit;
    int id;
  };

  // The value of an earlier instruction. One computed inside a loop is only seen inside it (the
  // linearizer places what runs fewer times outside).
  std::string val(const UOp& u) {
    if (u.op() == Op::Const) return ll_const(u.dtype(), u.arg());
    auto it = names_.find(u.node());
    if (it == names_.end())
      throw std::logic_error(
          fmt::format("{}: {} is used before it is computed", who(), op_info(u.op()).py_name));
    const int loop = defined_in_.at(u.node());
    if (loop >= 0 &&
        std::none_of(loops_.begin(), loops_.end(), [&](const Loop& l) { return l.id == loop; }))
      throw std::logic_error(fmt::format("{}: {} computed in a loop is used after it", who(),
                                         op_info(u.op()).py_name));
    return it->second;
  }
  void define(const UOp& u, std::string v) {
    names_[u.node()] = std::move(v);
    defined_in_[u.node()] = loops_.empty() ? -1 : loops_.back().id;
  }

  void instruction(const UOp& u) {
    switch (u.op()) {
      case Op::Const:
      case Op::Sink:
      case Op::Group:
      case Op::Noop:
        return;
      case Op::Buffer:
        return define(u, buffer(u));
      case Op::After:  // the buffer once what it orders ran (they ran before it)
        return define(u, val(u.src(0)));
      case Op::Index: {
        const std::string r = tmp();
        if (is_vector(u.src(0))) {  // a lane of a vector value
          line(fmt::format("{} = extractelement {} {}, {} {}", r, vector_type(u.src(0)),
                           val(u.src(0)), ll_type(u.src(1).dtype()), val(u.src(1))));
          return define(u, r);
        }
        line(fmt::format("{} = getelementptr {}, ptr {}, {} {}", r, mem_type(u.dtype()),
                         val(u.src(0)), ll_type(u.src(1).dtype()), val(u.src(1))));
        return define(u, r);
      }
      case Op::Shrink: {  // a vector address: its first element's
        const std::string p = tmp();
        line(fmt::format("{} = getelementptr {}, ptr {}, {} {}", p, mem_type(u.dtype()),
                         val(u.src(0)), ll_type(u.src(1).src(0).dtype()), val(u.src(1).src(0))));
        return define(u, p);
      }
      case Op::Stack: {  // a vector value: lanes of other vectors shuffled, the rest inserted
        std::vector<bool> shuffled;
        std::string v = shuffle_lanes(u, &shuffled);
        for (size_t k = 0; k < u.nsrc(); ++k) {
          if (shuffled[k]) continue;
          const std::string r = tmp();
          line(fmt::format("{} = insertelement {} {}, {} {}, i64 {}", r, vector_type(u), v,
                           ll_type(u.dtype()), val(u.src(k)), k));
          v = r;
        }
        return define(u, v);
      }
      case Op::Load:
        return define(u, u.src(0).op() == Op::Shrink ? vector_load(u) : load(u));
      case Op::Store: {
        const UOp& at = u.src(0);
        if (at.op() == Op::Shrink) {
          const bool stream = !gpu() && bypasses_cache(at.src(0));
          streams_ = streams_ || stream;
          line(fmt::format("store {} {}, ptr {}, align {}{}", vector_type(u.src(1)), val(u.src(1)),
                           val(at), vector_align(at, u.src(1)), stream ? ", !nontemporal !0" : ""));
          return;
        }
        const std::string v = to_memory(at.dtype(), val(u.src(1)));
        line(fmt::format("store {} {}, ptr {}", mem_type(at.dtype()), v, val(at)));
        return;
      }
      case Op::If: {  // the instructions up to its ENDIF run where the gate holds
        const std::string then = label("then"), done = label("endif");
        line(fmt::format("br i1 {}, label %{}, label %{}", val(u.src(0)), then, done));
        block(then);
        gates_.push_back(done);
        return;
      }
      case Op::EndIf: {
        if (gates_.empty())
          throw std::logic_error(fmt::format("{}: an ENDIF without its IF", who()));
        line(fmt::format("br label %{}", gates_.back()));
        block(gates_.back());
        gates_.pop_back();
        return;
      }
      case Op::Special: {  // the thread this call runs: the function's second argument
        if (u.arg().as_string() != "core_id") return define(u, launch_index(u));
        if (gpu())
          throw std::logic_error(fmt::format("{}: a CPU thread's core_id in a GPU kernel", who()));
        threads = static_cast<int64_t>(u.src(0).arg().as_int());
        if (u.dtype() == dtypes::int32) return define(u, "%core_id");
        const std::string v = tmp();
        line(fmt::format("{} = sext i32 %core_id to {}", v, ll_type(u.dtype())));
        return define(u, v);
      }
      case Op::DefineVar: {  // a value the launch gives: an int64 behind an argument pointer
        const std::string name = u.arg().items()[0].as_string();
        auto it = std::find(variables.begin(), variables.end(), name);
        if (it == variables.end()) it = variables.insert(variables.end(), name);
        const std::string v = fmt::format("%var{}", it - variables.begin());
        if (u.dtype() == dtypes::int64) return define(u, v);
        const std::string t = tmp();
        line(fmt::format("{} = trunc i64 {} to {}", t, v, ll_type(u.dtype())));
        return define(u, t);
      }
      case Op::Barrier:
        return barrier();
      case Op::Range:
        return open_loop(u);
      case Op::End:
        return close_loop(u.src(u.nsrc() - 1));
      default:
        return define(u, compute(u));
    }
  }

  // A kernel argument (its position in the argument array), or a register of this run: an
  // alloca in the entry block (LLVM promotes it to SSA values).
  std::string buffer(const UOp& b) {
    const int64_t slot = static_cast<int64_t>(b.arg().field("slot").as_int());
    if (buffer_addrspace(b) == AddrSpace::Local) {
      if (!gpu()) throw std::logic_error("CPU: shared memory (a LOCAL buffer) in a CPU kernel");
      // the workgroup's shared memory: a global of addrspace 3, used through a generic pointer
      const std::string g = fmt::format("@lds{}", next_++), r = tmp();
      globals_ += fmt::format("{} = internal addrspace(3) global [{} x {}] undef, align 16\n", g,
                              b.arg().field("size").as_int(), mem_type(b.dtype()));
      allocas_ += fmt::format("  {} = addrspacecast ptr addrspace(3) {} to ptr\n", r, g);
      return r;
    }
    if (is_register(b)) {
      const std::string r = tmp();
      allocas_ += fmt::format("  {} = alloca [{} x {}], align {}\n", r,
                              b.arg().field("size").as_int(), mem_type(b.dtype()), kBufferAlign);
      return r;
    }
    auto [it, fresh] = buffer_index.emplace(slot, static_cast<int>(input_slots.size()) + 1);
    if (fresh) input_slots.push_back(slot);
    return fmt::format("%b{}", it->second);
  }

  // LOAD(INDEX(b, i)), or LOAD(INDEX(b, i), alt, gate): element i where gate holds, alt elsewhere,
  // reading element 0 instead where it does not (i may be outside the buffer there).
  std::string load(const UOp& u) {
    const UOp& at = u.src(0);
    const std::string mt = mem_type(at.dtype());
    std::string p = val(at);
    if (u.nsrc() == 3) {
      if (at.src(0).under(Op::After).arg().field("size").as_int() == 0)
        return val(u.src(1));  // nothing to read
      const std::string i = tmp();
      p = tmp();
      const std::string it = ll_type(at.src(1).dtype());
      line(fmt::format("{} = select i1 {}, {} {}, {} 0", i, val(u.src(2)), it, val(at.src(1)), it));
      line(fmt::format("{} = getelementptr {}, ptr {}, {} {}", p, mt, val(at.src(0)), it, i));
    }
    const std::string raw = tmp();
    line(fmt::format("{} = load {}, ptr {}", raw, mt, p));
    const std::string v = from_memory(at.dtype(), raw);
    if (u.nsrc() != 3) return v;
    const std::string r = tmp();
    line(fmt::format("{} = select i1 {}, {} {}, {} {}", r, val(u.src(2)), ll_type(u.dtype()), v,
                     ll_type(u.dtype()), val(u.src(1))));
    return r;
  }

  // Vector values: a STACK of lanes, a load of a SHRINK (rules/devectorizer.rw coalesces only
  // dtypes whose memory and value types agree), or an ALU op on vectors (its vector_alu).
  bool is_vector(const UOp& u) const {
    return u.op() == Op::Stack || (u.op() == Op::Load && u.src(0).op() == Op::Shrink) ||
           alu_lanes_.contains(u.node());
  }
  int64_t vector_lanes(const UOp& v) const {
    if (v.op() == Op::Stack) return static_cast<int64_t>(v.nsrc());
    if (auto it = alu_lanes_.find(v.node()); it != alu_lanes_.end()) return it->second;
    return static_cast<int64_t>(v.src(0).src(2).src(0).arg().as_int());
  }
  std::string vector_type(const UOp& v) const {
    return fmt::format("<{} x {}>", vector_lanes(v), ll_type(v.dtype()));
  }
  // The alignment of the vector access of `value` at `shrink`, in a buffer aligned to
  // kBufferAlign bytes (storage's and the register allocas'): a GPU's starts at an element index
  // its length divides (rules/devectorizer.rw's memory coalescing), so it is aligned to its size,
  // up to that; a CPU's may start anywhere, and is aligned to the power of two its start index is
  // known to be a multiple of (an unaligned x86 vector access is as fast where it is aligned).
  int64_t vector_align(const UOp& shrink, const UOp& value) const {
    const int64_t item = value.dtype().itemsize();
    const int64_t size = std::min<int64_t>(vector_lanes(value) * item, kBufferAlign);
    if (gpu()) return size;
    const int known = std::min(twos_in(shrink.src(1).src(0), 0), 6);  // 2^6 elements >= 64 bytes
    return std::min<int64_t>(item << known, size);
  }
  // How many factors of two the int index i is known to have, by its structure after the late
  // decompositions (a product by a power of two is a shift by then); 0 where unknown. (Unlike
  // UOp::const_factor, which rules see before those decompositions, it reads shifts and casts.)
  static int twos_in(const UOp& i, int depth) {
    constexpr int kMany = 64;
    if (depth > 8) return 0;  // index math is shallow; deeper is left unknown
    switch (i.op()) {
      case Op::Const: {
        const i128 v = i.arg().as_int();
        return v == 0 ? kMany : std::countr_zero(static_cast<uint64_t>(v));
      }
      case Op::Add:
        return std::min(twos_in(i.src(0), depth + 1), twos_in(i.src(1), depth + 1));
      case Op::Mul:
        return std::min(kMany, twos_in(i.src(0), depth + 1) + twos_in(i.src(1), depth + 1));
      case Op::Shl: {
        if (i.src(1).op() != Op::Const) return 0;
        const i128 shift = i.src(1).arg().as_int();
        if (shift < 0) return 0;  // no shift the index math makes; unknown
        return static_cast<int>(std::min<i128>(kMany, twos_in(i.src(0), depth + 1) + shift));
      }
      case Op::Cast:
        return i.dtype().is_int() && i.src(0).dtype().is_int() ? twos_in(i.src(0), depth + 1) : 0;
      default:
        return 0;
    }
  }
  // Vector stores into a buffer much larger than the caches go around them (non-temporal): its
  // lines would only evict the inputs before a reader comes back for them, and the read of each
  // line before its write (for ownership) is saved, as memcpy does for large copies.
  static bool bypasses_cache(const UOp& buffer_state) {
    const UOp b = buffer_state.under(Op::After);
    return b.op() == Op::Buffer && !is_register(b) &&
           b.arg().field("size").as_int() * b.dtype().itemsize() >= kNonTemporalBytes;
  }
  // LOAD(SHRINK(b, i, n)), or LOAD(SHRINK(b, i, n), alt, gate): the n elements from i where gate
  // holds, alt in every lane elsewhere, reading elements 0..n-1 instead there (a buffer of n
  // elements or more: where the gate can hold, i + n - 1 is one of them; a smaller one is never
  // read).
  std::string vector_load(const UOp& u) {
    const std::string vt = vector_type(u);
    std::string p = val(u.src(0));
    const bool readable =
        u.src(0).src(0).under(Op::After).arg().field("size").as_int() >= vector_lanes(u);
    if (u.nsrc() == 3 && !readable) return splat(vt, u.dtype(), val(u.src(1)), vector_lanes(u));
    if (u.nsrc() == 3) {
      const std::string q = tmp();
      line(fmt::format("{} = select i1 {}, ptr {}, ptr {}", q, val(u.src(2)), p,
                       val(u.src(0).src(0))));
      p = q;
    }
    const std::string r = tmp();
    line(fmt::format("{} = load {}, ptr {}, align {}", r, vt, p, vector_align(u.src(0), u)));
    if (u.nsrc() != 3) return r;
    const std::string alt = splat(vt, u.dtype(), val(u.src(1)), vector_lanes(u)), g = tmp();
    line(fmt::format("{} = select i1 {}, {} {}, {} {}", g, val(u.src(2)), vt, r, vt, alt));
    return g;
  }
  // The lanes of STACK u that are constant lanes of up to kMaxShuffleSources vectors of one type,
  // as one shufflevector (the sources concatenated pairwise first, so that the last shuffle has
  // two operands), `*shuffled` marking them; "poison" when there are none. As an insertelement
  // chain of extractelements, LLVM lowers lanes from four vectors into a chain of two-source
  // shuffles: a matmul tile's 4x4 transpose of B took 17 shuffles per step, as one shuffle of two
  // concatenations 5 (rules/devectorizer.rw builds such STACKs for kept-lane accumulators).
  static constexpr size_t kMaxShuffleSources = 4;
  std::string shuffle_lanes(const UOp& u, std::vector<bool>* shuffled) {
    shuffled->assign(u.nsrc(), false);
    std::vector<UOp> sources;
    std::vector<int64_t> mask(u.nsrc(), -1);
    int64_t width = 0;
    for (size_t k = 0; k < u.nsrc(); ++k) {
      const UOp& lane = u.src(k);
      if (lane.op() != Op::Index || !is_vector(lane.src(0)) || lane.src(1).op() != Op::Const)
        continue;
      const UOp& from = lane.src(0);
      const int64_t n = vector_lanes(from), at = lane.src(1).arg().as_int();
      if (from.dtype() != u.dtype() || at < 0 || at >= n) continue;
      if (width == 0) width = n;  // the first source's: the others must be as wide
      if (n != width) continue;
      auto it = std::find(sources.begin(), sources.end(), from);
      if (it == sources.end()) {
        if (sources.size() == kMaxShuffleSources) continue;
        it = sources.insert(sources.end(), from);
      }
      mask[k] = static_cast<int64_t>(it - sources.begin()) * width + at;
      (*shuffled)[k] = true;
    }
    if (sources.empty()) return "poison";
    // concatenate pairwise down to two operands (a lone source is shuffled with poison)
    std::vector<std::string> parts;
    for (const UOp& from : sources) parts.push_back(val(from));
    int64_t part_width = width;
    while (parts.size() > 2) {
      if (parts.size() % 2) parts.push_back("poison");
      std::vector<std::string> joined;
      const std::string type = fmt::format("<{} x {}>", part_width, ll_type(u.dtype()));
      for (size_t k = 0; k < parts.size(); k += 2) {
        const std::string r = tmp();
        line(fmt::format("{} = shufflevector {} {}, {} {}, {}", r, type, parts[k], type,
                         parts[k + 1], shuffle_mask(iota_lanes(2 * part_width))));
        joined.push_back(r);
      }
      parts = std::move(joined);
      part_width *= 2;
    }
    if (parts.size() == 1) parts.push_back("poison");
    const std::string type = fmt::format("<{} x {}>", part_width, ll_type(u.dtype())), r = tmp();
    line(fmt::format("{} = shufflevector {} {}, {} {}, {}", r, type, parts[0], type, parts[1],
                     shuffle_mask(mask)));
    return r;
  }
  static std::vector<int64_t> iota_lanes(int64_t n) {
    std::vector<int64_t> lanes(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) lanes[static_cast<size_t>(k)] = k;
    return lanes;
  }
  // an LLVM shuffle mask constant; -1 is a lane left undefined (poison)
  static std::string shuffle_mask(const std::vector<int64_t>& lanes) {
    std::string out = fmt::format("<{} x i32> <", lanes.size());
    for (size_t k = 0; k < lanes.size(); ++k)
      out +=
          fmt::format("{}{}", k ? ", " : "",
                      lanes[k] < 0 ? std::string("i32 poison") : fmt::format("i32 {}", lanes[k]));
    return out + ">";
  }

  // a vector of type vt with the value v (of dtype d) in each of its n lanes
  std::string splat(const std::string& vt, DType d, const std::string& v, int64_t n) {
    const std::string one = tmp(), all = tmp();
    line(fmt::format("{} = insertelement {} poison, {} {}, i64 0", one, vt, ll_type(d), v));
    line(fmt::format("{} = shufflevector {} {}, {} poison, <{} x i32> zeroinitializer", all, vt,
                     one, vt, n));
    return all;
  }

  // A GPU launch index: the workgroup's position (gidx0..2) or the thread's in it (lidx0..2)
  // along x, y, z, read from the target's registers.
  std::string launch_index(const UOp& u) {
    const std::string& name = u.arg().as_string();
    if (!gpu())
      throw std::logic_error("CPU: a launch dimension other than core_id: " + u.arg().repr());
    const bool group = name[0] == 'g';
    const auto dim = static_cast<size_t>(name.back() - '0');
    (group ? global_size : local_size)[dim] = static_cast<int64_t>(u.src(0).arg().as_int());
    const char axis = static_cast<char>('x' + dim);
    const std::string reg =
        target_ == LlvmTarget::Nvptx
            ? fmt::format("llvm.nvvm.read.ptx.sreg.{}.{}", group ? "ctaid" : "tid", axis)
            : fmt::format("llvm.amdgcn.{}.{}", group ? "workgroup.id" : "workitem.id", axis);
    intrinsics_.insert(fmt::format("declare i32 @{}()", reg));
    const std::string r = tmp();
    line(fmt::format("{} = call i32 @{}()", r, reg));
    if (u.dtype() == dtypes::int32) return r;
    const std::string w = tmp();
    line(fmt::format("{} = sext i32 {} to {}", w, r, ll_type(u.dtype())));
    return w;
  }
  // Every thread of the workgroup waits here, its stores to shared memory seen by all after it.
  void barrier() {
    if (target_ == LlvmTarget::Nvptx) {
      intrinsics_.insert("declare void @llvm.nvvm.barrier0()");
      line("call void @llvm.nvvm.barrier0()");
    } else if (target_ == LlvmTarget::Amdgpu) {
      intrinsics_.insert("declare void @llvm.amdgcn.s.barrier()");
      line("fence syncscope(\"workgroup\") release");
      line("call void @llvm.amdgcn.s.barrier()");
      line("fence syncscope(\"workgroup\") acquire");
    } else {
      throw std::logic_error("CPU: a BARRIER in a CPU kernel");
    }
  }

  // A loop over [0, bound): the head compares the index (a phi of 0 and the latch's next) with
  // the bound, the body runs while it is lower.
  void open_loop(const UOp& range) {
    const std::string bound = val(range.src(0)), pre = label("pre");
    Loop l{range.node(), tmp(), label("head"), label("latch"), label("exit"), next_++};
    line(fmt::format("br label %{}", pre));
    block(pre);
    line(fmt::format("br label %{}", l.head));
    block(l.head);
    const std::string t = ll_type(range.dtype());
    line(fmt::format("{} = phi {} [ 0, %{} ], [ {}.next, %{} ]", l.idx, t, pre, l.idx, l.latch));
    const std::string c = tmp(), body = label("body");
    line(fmt::format("{} = icmp slt {} {}, {}", c, t, l.idx, bound));
    line(fmt::format("br i1 {}, label %{}, label %{}", c, body, l.exit));
    block(body);
    define(range, l.idx);
    loops_.push_back(l);
  }
  void close_loop(const UOp& range) {
    if (loops_.empty() || loops_.back().range != range.node())
      throw std::logic_error(
          fmt::format("{}: an END that does not close the innermost open RANGE", who()));
    const Loop l = loops_.back();
    line(fmt::format("br label %{}", l.latch));
    block(l.latch);
    line(fmt::format("{}.next = add nsw {} {}, 1", l.idx, ll_type(range.dtype()), l.idx));
    // A reduce loop is not unrolled further by LLVM: the UNROLL opt is the optimizer's choice,
    // and LLVM's own unroll of an FMA chain over a register tile made a 512x512 matmul 1.5x
    // slower (40 against 59 GFLOPS on one core).
    if (axis_type_of(range) == AxisType::Reduce) {
      reduce_loops_.push_back(l.id);
      line(fmt::format("br label %{}, !llvm.loop !{}", l.head, kLoopMetadata + l.id));
    } else {
      line(fmt::format("br label %{}", l.head));
    }
    block(l.exit);
    loops_.pop_back();
  }

  std::string compute(const UOp& u) {
    const DType d = u.dtype();
    if (std::any_of(u.src().begin(), u.src().end(), [&](const UOp& s) { return is_vector(s); }))
      return vector_alu(u);
    switch (u.op()) {
      case Op::Cast:
        return round16(d, cast(val(u.src(0)), u.src(0).dtype(), d));
      case Op::Bitcast: {
        if (is_half(d) || is_half(u.src(0).dtype()))
          throw std::invalid_argument(
              fmt::format("{}: bitcast of 16-bit floats is not supported", who()));
        const std::string r = tmp();
        line(fmt::format("{} = bitcast {} {} to {}", r, ll_type(u.src(0).dtype()), val(u.src(0)),
                         ll_type(d)));
        return r;
      }
      default:
        break;
    }
    if (!groups::alu().contains(u.op()))
      throw std::invalid_argument(
          fmt::format("{}: cannot render {}", who(), op_info(u.op()).py_name));
    std::vector<std::string> a;
    for (const UOp& s : u.src()) a.push_back(val(s));
    const DType sd = u.src(0).dtype();
    if (is_int_division(u.op()) && !sd.is_float()) return divmod(u, a[0], a[1]);
    if (u.op() == Op::Max && sd.is_float() && !is_half(sd)) {
      // max(a, b) with a number for b (relu's max(x, 0)): `a <= b ? b : a` is one ordered
      // compare and select, NaN for a NaN a; with a number for a, `a > b ? a : b` alike
      const auto number = [](const UOp& c) {
        return c.op() == Op::Const && (c.arg().is_int() || c.arg().is_float()) &&
               !std::isnan(c.arg().as_float());
      };
      const bool second = number(u.src(1));
      if (second || number(u.src(0))) {
        const std::string t = ll_type(sd), c = tmp(), r = tmp();
        line(fmt::format("{} = fcmp {} {} {}, {}", c, second ? "ole" : "ogt", t, a[0], a[1]));
        line(fmt::format("{} = select i1 {}, {} {}, {} {}", r, c, t, a[second ? 1 : 0], t,
                         a[second ? 0 : 1]));
        return r;
      }
    }
    return round16(d, alu(u.op(), d, sd, ll_type(sd), a));
  }

  // An ALU op on vectors of the same lanes (rules/devectorizer.rw vectorize_alu makes float32 add,
  // sub, mul, fma and max only): one instruction for all lanes, each lane as compute() would.
  std::string vector_alu(const UOp& u) {
    const int64_t n = vector_lanes(u.src(0));
    for (const UOp& s : u.src())
      if (!is_vector(s) || vector_lanes(s) != n)
        throw std::logic_error(fmt::format("{}: {} of a vector and a value of other lanes", who(),
                                           op_info(u.op()).py_name));
    if (u.dtype() != dtypes::float32)
      throw std::invalid_argument(fmt::format("{}: cannot render {} of {} vectors", who(),
                                              op_info(u.op()).py_name, u.dtype().repr()));
    std::vector<std::string> a;
    for (const UOp& s : u.src()) a.push_back(val(s));
    const std::string t = fmt::format("<{} x float>", n), r = tmp();
    alu_lanes_[u.node()] = n;
    switch (u.op()) {
      case Op::Add:
      case Op::Sub:
      case Op::Mul: {
        const char* op = u.op() == Op::Add ? "fadd" : u.op() == Op::Sub ? "fsub" : "fmul";
        line(fmt::format("{} = {} {} {}, {}", r, op, t, a[0], a[1]));
        return r;
      }
      case Op::MulAcc: {  // one rounding of a*b+c in each lane
        const std::string fn = fmt::format("@llvm.fma.v{}f32", n);
        intrinsics_.insert(fmt::format("declare {} {}({}, {}, {})", t, fn, t, t, t));
        line(fmt::format("{} = call {} {}({} {}, {} {}, {} {})", r, t, fn, t, a[0], t, a[1], t,
                         a[2]));
        return r;
      }
      case Op::Max: {  // the greater, NaN where either is (a + b is NaN exactly there)
        const std::string bt = fmt::format("<{} x i1>", n), c = tmp(), m = tmp(), nan = tmp(),
                          sum = tmp();
        line(fmt::format("{} = fcmp ogt {} {}, {}", c, t, a[0], a[1]));
        line(fmt::format("{} = select {} {}, {} {}, {} {}", m, bt, c, t, a[0], t, a[1]));
        line(fmt::format("{} = fcmp uno {} {}, {}", nan, t, a[0], a[1]));
        line(fmt::format("{} = fadd {} {}, {}", sum, t, a[0], a[1]));
        line(fmt::format("{} = select {} {}, {} {}, {} {}", r, bt, nan, t, sum, t, m));
        return r;
      }
      default:
        throw std::invalid_argument(
            fmt::format("{}: cannot render {} of vectors", who(), op_info(u.op()).py_name));
    }
  }

  std::string cast(const std::string& x, DType from, DType to) {
    const std::string ft = ll_type(from), tt = ll_type(to), r = tmp();
    if (ft == tt) return x;
    if (to.is_bool()) {
      line(from.is_float() ? fmt::format("{} = fcmp une {} {}, 0.0", r, ft, x)
                           : fmt::format("{} = icmp ne {} {}, 0", r, ft, x));
      return r;
    }
    if (from.is_float() && to.is_float()) {
      line(fmt::format("{} = {} {} {} to {}", r,
                       from.itemsize() < to.itemsize() ? "fpext" : "fptrunc", ft, x, tt));
    } else if (from.is_float()) {
      // As INTERP (cast_value): truncate toward zero, then wrap to the int type; a magnitude of
      // 2^119 or more, or NaN, gives 0. fptosi alone would be poison out of range.
      // i128 holds every in-range truncation; `select` does not pass on the unchosen arm's poison.
      // Where the int type's bits and the float's mantissa fit 63 bits together (float32 to 32
      // bits), i64 does: every magnitude of 2^63 or more wraps to 0 (its low bits are zeros).
      const int mantissa = from == dtypes::float64 ? 53 : from == dtypes::float32 ? 24 : 11;
      const bool narrow = to.itemsize() * 8 + mantissa <= 63;
      if (!narrow && gpu()) return wide_float_to_int(x, ft, tt);  // (GPUs have no i128 casts)
      const std::string w = narrow ? "i64" : "i128";
      const char* bound = narrow ? "0x43E0000000000000" : "0x4760000000000000";  // 2^63, 2^119
      const std::string wide = tmp(), lo = tmp(), hi = tmp(), ok = tmp(), sel = tmp();
      line(fmt::format("{} = fptosi {} {} to {}", wide, ft, x, w));
      line(fmt::format("{} = fcmp ogt {} {}, {}", lo, ft, x,
                       narrow ? "0xC3E0000000000000" : "0xC760000000000000"));
      line(fmt::format("{} = fcmp olt {} {}, {}", hi, ft, x, bound));
      line(fmt::format("{} = and i1 {}, {}", ok, lo, hi));
      line(fmt::format("{} = select i1 {}, {} {}, {} 0", sel, ok, w, wide, w));
      line(fmt::format("{} = trunc {} {} to {}", r, w, sel, tt));
    } else if (to.is_float()) {
      line(fmt::format("{} = {} {} {} to {}", r,
                       from.is_unsigned() || from.is_bool() ? "uitofp" : "sitofp", ft, x, tt));
    } else {
      const int fb = from.is_bool() ? 1 : from.is_index() ? 64 : from.itemsize() * 8;
      const int tb = to.is_index() ? 64 : to.itemsize() * 8;
      const char* op = fb > tb ? "trunc" : (from.is_unsigned() || from.is_bool()) ? "zext" : "sext";
      line(fmt::format("{} = {} {} {} to {}", r, op, ft, x, tt));
    }
    return r;
  }

  // A float's truncation to a 64-bit integer's bits, wrapped to `tt`, without i128 (which the
  // GPU backends do not convert): below 2^63 in magnitude fptosi's, from 2^63 to 2^119 the low 64
  // bits of the mantissa shifted by the exponent, 0 beyond or for NaN; negated for a negative x.
  std::string wide_float_to_int(const std::string& x, const std::string& ft,
                                const std::string& tt) {
    const bool dbl = ft == "double";
    const int mantissa_bits = dbl ? 52 : 23, bias = dbl ? 1023 : 127;
    const std::string fabs = fmt::format("llvm.fabs.{}", dbl ? "f64" : "f32");
    intrinsics_.insert(fmt::format("declare {0} @{1}({0})", ft, fabs));
    const std::string ax = tmp(), small = tmp(), safe = tmp(), lo = tmp(), bits = tmp(),
                      bits64 = tmp(), e = tmp(), shift = tmp(), m = tmp(), m1 = tmp(),
                      in_range = tmp(), sh = tmp(), shifted = tmp(), big = tmp(), mag = tmp(),
                      ok = tmp(), kept = tmp(), neg = tmp(), negated = tmp(), v = tmp();
    line(fmt::format("{} = call {} @{}({} {})", ax, ft, fabs, ft, x));
    line(fmt::format("{} = fcmp olt {} {}, 0x43E0000000000000", small, ft, ax));  // 2^63
    line(fmt::format("{} = select i1 {}, {} {}, {} 0.0", safe, small, ft, ax, ft));
    line(fmt::format("{} = fptosi {} {} to i64", lo, ft, safe));
    line(fmt::format("{} = bitcast {} {} to {}", bits, ft, ax, dbl ? "i64" : "i32"));
    line(dbl ? fmt::format("{} = or i64 {}, 0", bits64, bits)
             : fmt::format("{} = zext i32 {} to i64", bits64, bits));
    line(fmt::format("{} = lshr i64 {}, {}", e, bits64, mantissa_bits));
    line(fmt::format("{} = sub i64 {}, {}", shift, e, bias + mantissa_bits));
    line(fmt::format("{} = and i64 {}, {}", m, bits64, (int64_t{1} << mantissa_bits) - 1));
    line(fmt::format("{} = or i64 {}, {}", m1, m, int64_t{1} << mantissa_bits));
    line(fmt::format("{} = icmp ult i64 {}, 64", in_range, shift));
    line(fmt::format("{} = select i1 {}, i64 {}, i64 0", sh, in_range, shift));
    line(fmt::format("{} = shl i64 {}, {}", shifted, m1, sh));
    line(fmt::format("{} = select i1 {}, i64 {}, i64 0", big, in_range, shifted));
    line(fmt::format("{} = select i1 {}, i64 {}, i64 {}", mag, small, lo, big));
    line(fmt::format("{} = fcmp olt {} {}, 0x4760000000000000", ok, ft, ax));  // 2^119; NaN: 0
    line(fmt::format("{} = select i1 {}, i64 {}, i64 0", kept, ok, mag));
    line(fmt::format("{} = fcmp olt {} {}, 0.0", neg, ft, x));
    line(fmt::format("{} = sub i64 0, {}", negated, kept));
    line(fmt::format("{} = select i1 {}, i64 {}, i64 {}", v, neg, negated, kept));
    if (tt == "i64") return v;
    const std::string r = tmp();
    line(fmt::format("{} = trunc i64 {} to {}", r, v, tt));
    return r;
  }

  // A GPU math library function of float or double arguments: __nv_sinf / __nv_sin (libdevice),
  // __ocml_sin_f32 / __ocml_sin_f64 (ocml).
  std::string math_library_call(const std::string& fn, const std::string& t,
                                const std::vector<std::string>& a) {
    const bool dbl = t == "double";
    const std::string name = target_ == LlvmTarget::Nvptx
                                 ? fmt::format("__nv_{}{}", fn, dbl ? "" : "f")
                                 : fmt::format("__ocml_{}_f{}", fn, dbl ? 64 : 32);
    std::string types, args;
    for (size_t i = 0; i < a.size(); ++i) {
      types += (i ? ", " : "") + t;
      args += (i ? ", " : "") + t + " " + a[i];
    }
    intrinsics_.insert(fmt::format("declare {} @{}({})", t, name, types));
    const std::string r = tmp();
    line(fmt::format("{} = call {} @{}({})", r, t, name, args));
    return r;
  }

  std::string alu(Op op, DType d, DType sd, const std::string& st,
                  const std::vector<std::string>& a) {
    const bool fl = sd.is_float();
    const bool un = sd.is_unsigned() || sd.is_bool();
    const std::string t = ll_type(d), r = tmp();
    auto bin = [&](const char* iop, const char* fop) {
      line(fmt::format("{} = {} {} {}, {}", r, fl ? fop : iop, t, a[0], a[1]));
      return r;
    };
    auto intrinsic = [&](const char* name, size_t n) {
      std::string args;
      for (size_t i = 0; i < n; ++i) args += (i ? ", " : "") + t + " " + a[i];
      line(fmt::format("{} = call {} @llvm.{}.{}({})", r, t, name, t == "float" ? "f32" : "f64",
                       args));
      intrinsics_.insert(fmt::format("declare {} @llvm.{}.{}({})", t, name,
                                     t == "float" ? "f32" : "f64",
                                     n == 1   ? t
                                     : n == 2 ? t + ", " + t
                                              : t + ", " + t + ", " + t));
      return r;
    };
    switch (op) {
      case Op::Add:
        return bin("add", "fadd");
      case Op::Sub:
        return bin("sub", "fsub");
      case Op::Mul:
        return bin("mul", "fmul");
      case Op::FDiv:
        return bin("sdiv", "fdiv");
      case Op::And:
        return bin("and", "and");
      case Op::Or:
        return bin("or", "or");
      case Op::Xor:
        return bin("xor", "xor");
      case Op::Shl:
        return bin("shl", "shl");
      case Op::Shr:
        return bin(un ? "lshr" : "ashr", "ashr");
      case Op::Max: {
        const std::string c = tmp();
        line(fl ? fmt::format("{} = fcmp ogt {} {}, {}", c, t, a[0], a[1])
                : fmt::format("{} = icmp {} {} {}, {}", c, un ? "ugt" : "sgt", t, a[0], a[1]));
        if (!fl) {
          line(fmt::format("{} = select i1 {}, {} {}, {} {}", r, c, t, a[0], t, a[1]));
          return r;
        }
        const std::string m = tmp(), nan = tmp();
        line(fmt::format("{} = select i1 {}, {} {}, {} {}", m, c, t, a[0], t, a[1]));
        line(fmt::format("{} = fcmp uno {} {}, {}", nan, t, a[0], a[1]));  // nan in, nan out
        line(fmt::format("{} = select i1 {}, {} 0x7FF8000000000000, {} {}", r, nan, t, t, m));
        return r;
      }
      case Op::CmpLt:
        line(fl ? fmt::format("{} = fcmp olt {} {}, {}", r, st, a[0], a[1])
                : fmt::format("{} = icmp {} {} {}, {}", r, un ? "ult" : "slt", st, a[0], a[1]));
        return r;
      case Op::CmpNe:
        line(fl ? fmt::format("{} = fcmp une {} {}, {}", r, st, a[0], a[1])
                : fmt::format("{} = icmp ne {} {}, {}", r, st, a[0], a[1]));
        return r;
      case Op::CmpEq:
        line(fl ? fmt::format("{} = fcmp oeq {} {}, {}", r, st, a[0], a[1])
                : fmt::format("{} = icmp eq {} {}, {}", r, st, a[0], a[1]));
        return r;
      case Op::Where:
        line(fmt::format("{} = select i1 {}, {} {}, {} {}", r, a[0], t, a[1], t, a[2]));
        return r;
      case Op::Neg:
        line(fl ? fmt::format("{} = fneg {} {}", r, t, a[0])
                : fmt::format("{} = sub {} 0, {}", r, t, a[0]));
        return r;
      case Op::Reciprocal:
        line(fmt::format("{} = fdiv {} 1.0, {}", r, t, a[0]));
        return r;
      case Op::Sqrt:
        return intrinsic("sqrt", 1);
      case Op::Sin:
      case Op::Pow:
        // the CPU's come from the C library, a GPU's from its device math library (CUDA's
        // libdevice, ROCm's ocml: runtime/gpu_compile.h links it)
        if (gpu()) return math_library_call(op == Op::Sin ? "sin" : "pow", t, a);
        return intrinsic(op == Op::Sin ? "sin" : "pow", op == Op::Sin ? 1 : 2);
      case Op::Trunc:
        return fl ? intrinsic("trunc", 1) : a[0];
      case Op::MulAcc: {
        if (fl) return intrinsic("fma", 3);  // one rounding of a*b+c
        const std::string m = tmp();
        line(fmt::format("{} = mul {} {}, {}", m, t, a[0], a[1]));
        line(fmt::format("{} = add {} {}, {}", r, t, m, a[2]));
        return r;
      }
      default:
        throw std::invalid_argument(fmt::format("{}: cannot render {}", who(), op_name(op)));
    }
  }

  // Integer division without a hardware trap: a zero divisor records the op in the error flag
  // (%err, returned by the kernel; the host raises) and divides by 1 instead; so does
  // INT_MIN / -1 (signed), whose wrapped quotient INT_MIN and remainder 0 are what x / 1 gives.
  // A constant divisor other than 0 and -1 (index math) needs neither guard. Floor division
  // and modulo arrive as these (rules/decompositions.rw); their CDiv and CMod carry the name of
  // the op the user wrote as their arg, for the error.
  std::string divmod(const UOp& u, const std::string& x, const std::string& y) {
    const Op op = u.op();
    if (op != Op::CDiv && op != Op::CMod)
      throw std::invalid_argument(
          fmt::format("{}: cannot render {} (rules/decompositions.rw lowers it to CDiv and CMod)",
                      who(), op_name(op)));
    const DType sd = u.src(0).dtype();
    const std::string t = ll_type(sd);
    const bool un = sd.is_unsigned() || sd.is_bool();
    const UOp& divisor = u.src(1);
    const i128 c = divisor.op() == Op::Const ? truncate_int(sd, divisor.arg().as_int()) : 0;
    std::string b = y;
    if (c == 0 || (!un && c == -1)) {
      Op named = op;
      if (u.arg().is_string()) named = op_from_name(u.arg().as_string()).value_or(op);
      const std::string z = tmp(), e0 = tmp(), e1 = tmp();
      b = tmp();
      line(fmt::format("{} = icmp eq {} {}, 0", z, t, y));
      line(fmt::format("{} = load i32, ptr %err", e0));
      const std::string first = tmp(), rec = tmp();  // the first division by zero is kept
      line(fmt::format("{} = icmp eq i32 {}, 0", first, e0));
      line(fmt::format("{} = and i1 {}, {}", rec, z, first));
      line(fmt::format("{} = select i1 {}, i32 {}, i32 {}", e1, rec, error_code(named), e0));
      line(fmt::format("store i32 {}, ptr %err", e1));
      std::string guard = z;
      if (!un) {
        const std::string mn = tmp(), m1 = tmp(), ov = tmp(), g = tmp();
        line(fmt::format("{} = icmp eq {} {}, {}", mn, t, x, to_string(min_of(t))));
        line(fmt::format("{} = icmp eq {} {}, -1", m1, t, y));
        line(fmt::format("{} = and i1 {}, {}", ov, mn, m1));
        line(fmt::format("{} = or i1 {}, {}", g, z, ov));
        guard = g;
      }
      line(fmt::format("{} = select i1 {}, {} 1, {} {}", b, guard, t, t, y));
    }
    const std::string r = tmp();
    line(fmt::format("{} = {} {} {}, {}", r,
                     op == Op::CDiv ? (un ? "udiv" : "sdiv") : (un ? "urem" : "srem"), t, x, b));
    return r;
  }

  std::unordered_map<const UOpNode*, std::string> names_;
  std::unordered_map<const UOpNode*, int64_t> alu_lanes_;  // the lanes of each vector ALU op
  std::unordered_map<const UOpNode*, int> defined_in_;     // the loop a value is computed in, or -1
  std::vector<Loop> loops_;                                // the open loops, innermost last
  std::vector<std::string> gates_;                         // the open IFs' ENDIF labels
  LlvmTarget target_;

 public:
  int next_ = 0;
};

}  // namespace

std::optional<Op> kernel_error_op(int32_t code) {
  for (Op op : {Op::CDiv, Op::CMod, Op::FloorDiv, Op::FloorMod})
    if (code == error_code(op)) return op;
  return std::nullopt;
}

namespace {
// A GPU kernel's symbol: the kernel's name with what is no letter, digit or '_' as '_'.
std::string symbol_of(const std::string& name) {
  std::string out = name.empty() ? "kernel" : name;
  for (char& c : out)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
  if (std::isdigit(static_cast<unsigned char>(out[0]))) out = "k_" + out;
  return out;
}

// The module of a GPU kernel: buffers and the error flag as global pointers (used as generic
// ones), the variables by value; a thread that met an error stores its code.
std::string gpu_module(const Emitter& e, const RenderedKernel& k, LlvmTarget target) {
  std::string params, entry;
  for (size_t i = 1; i <= k.input_slots.size(); ++i) {
    params += fmt::format("ptr addrspace(1) %a{}, ", i);
    entry += fmt::format("  %b{0} = addrspacecast ptr addrspace(1) %a{0} to ptr\n", i);
  }
  params += "ptr addrspace(1) %errp";
  for (size_t j = 0; j < k.variables.size(); ++j) params += fmt::format(", i64 %var{}", j);
  const bool amd = target == LlvmTarget::Amdgpu;
  std::string ir = "; tinyrw kernel\n";
  for (const std::string& d : e.intrinsics_) ir += d + "\n";
  ir += e.globals_;
  ir += fmt::format("\ndefine {}void @{}({}){} {{\nentry:\n  %err = alloca i32\n",
                    amd ? "amdgpu_kernel " : "", k.name, params, amd ? " #0" : "");
  ir += e.allocas_ + "  store i32 0, ptr %err\n" + entry + e.body_ +
        "  %err.out = load i32, ptr %err\n  %err.met = icmp ne i32 %err.out, 0\n"
        "  br i1 %err.met, label %report, label %done\nreport:\n"
        "  store i32 %err.out, ptr addrspace(1) %errp\n  br label %done\ndone:\n  ret void\n}\n";
  if (!e.reduce_loops_.empty()) ir += "!1 = !{!\"llvm.loop.unroll.disable\"}\n";
  for (int id : e.reduce_loops_)
    ir += fmt::format("!{0} = distinct !{{!{0}, !1}}\n", Emitter::kLoopMetadata + id);
  if (amd) {
    int64_t threads = 1;
    for (int64_t n : k.local_size) threads *= n;
    ir += fmt::format("attributes #0 = {{ \"amdgpu-flat-work-group-size\"=\"1,{}\" }}\n", threads);
  } else {
    const int annotation = Emitter::kLoopMetadata + e.next_ + 1;
    ir += fmt::format("!nvvm.annotations = !{{!{0}}}\n!{0} = !{{ptr @{1}, !\"kernel\", i32 1}}\n",
                      annotation, k.name);
  }
  return ir;
}
}  // namespace

RenderedKernel render_llvm(const UOp& program, LlvmTarget target, const std::string& name) {
  if (program.op() != Op::Linear) throw std::logic_error("LLVM renders LINEAR programs");
  Emitter e(target);
  e.program(program);
  RenderedKernel out{.ir = "",
                     .input_slots = e.input_slots,
                     .variables = e.variables,
                     .threads = e.threads,
                     .name = target == LlvmTarget::Cpu ? "kernel" : symbol_of(name),
                     .global_size = e.global_size,
                     .local_size = e.local_size};
  if (target != LlvmTarget::Cpu) {
    out.ir = gpu_module(e, out, target);
    return out;
  }
  std::string params;
  for (size_t i = 0; i <= out.input_slots.size(); ++i)
    params += fmt::format(
        "  %p{0} = getelementptr ptr, ptr %bufs, i64 {0}\n  %b{0} = load ptr, ptr %p{0}\n", i);
  for (size_t j = 0; j < out.variables.size(); ++j)
    params += fmt::format(
        "  %vp{0} = getelementptr ptr, ptr %bufs, i64 {1}\n  %va{0} = load ptr, ptr %vp{0}\n"
        "  %var{0} = load i64, ptr %va{0}\n",
        j, out.input_slots.size() + 1 + j);
  out.ir = "; tinyrw kernel\n";
  for (const std::string& d : e.intrinsics_) out.ir += d + "\n";
  out.ir += "\ndefine i32 @kernel(ptr %bufs, i32 %core_id) {\nentry:\n  %err = alloca i32\n" +
            e.allocas_ + "  store i32 0, ptr %err\n" + params + e.body_ +
            // non-temporal stores are weakly ordered: a fence makes them visible to whoever
            // reads the buffer after the kernel returns (another thread too)
            (e.streams_ ? "  fence seq_cst\n" : "") +
            "  %err.out = load i32, ptr %err\n  ret i32 %err.out\n}\n" +
            (e.streams_ ? "!0 = !{i32 1}\n" : "");
  if (!e.reduce_loops_.empty()) out.ir += "!1 = !{!\"llvm.loop.unroll.disable\"}\n";
  for (int id : e.reduce_loops_)
    out.ir += fmt::format("!{0} = distinct !{{!{0}, !1}}\n", Emitter::kLoopMetadata + id);
  return out;
}

}  // namespace tinyrw
