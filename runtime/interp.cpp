#include "runtime/interp.h"

#include <algorithm>
#include <array>
#include <unordered_map>

#include <fmt/format.h>

#include "codegen/linearize.h"
#include "ir/alu.h"
#include "runtime/kernel_error.h"
#include "runtime/storage.h"

namespace tinyrw {

namespace {

bool is_int_division(Op op) {
  return op == Op::CDiv || op == Op::CMod || op == Op::FloorDiv || op == Op::FloorMod;
}

// A program's instructions with where each loop and IF ends, and its launch: the threads of a
// CPU-shaped kernel (SPECIAL core_id), or a GPU-shaped kernel's workgroups (SPECIAL gidx0..2) and
// the threads of each (lidx0..2).
struct Code {
  explicit Code(const UOp& program) : code(program.src().begin(), program.src().end()) {
    std::vector<size_t> open, gates;
    for (size_t i = 0; i < code.size(); ++i) {
      const UOp& u = code[i];
      if (u.op() == Op::If) gates.push_back(i);
      if (u.op() == Op::EndIf) {
        if (gates.empty() || code[gates.back()] != u.src(0))
          throw std::logic_error("INTERP: an ENDIF that does not close the innermost open IF");
        end_of[gates.back()] = i;
        gates.pop_back();
      }
      if (u.op() == Op::Range) open.push_back(i);
      if (u.op() == Op::End) {
        if (open.empty() || code[open.back()] != u.src(u.nsrc() - 1))
          throw std::logic_error("INTERP: an END that does not close the innermost open RANGE");
        end_of[open.back()] = i;
        start_of[i] = open.back();
        open.pop_back();
      }
      if (u.op() == Op::Special) launch_dim(u);
    }
    if (!open.empty()) throw std::logic_error("INTERP: RANGE without END");
    if (!gates.empty()) throw std::logic_error("INTERP: IF without ENDIF");
  }

  std::vector<UOp> code;
  std::unordered_map<size_t, size_t> end_of, start_of;
  int64_t threads = 1;  // core_id's bound
  std::array<int64_t, 3> global{1, 1, 1}, local{1, 1, 1};

 private:
  void launch_dim(const UOp& special) {
    const std::string& name = special.arg().as_string();
    const auto bound = static_cast<int64_t>(special.src(0).arg().as_int());
    if (name == "core_id") {
      threads = bound;
    } else if (name.size() == 5 && (name.starts_with("gidx") || name.starts_with("lidx")) &&
               name[4] >= '0' && name[4] <= '2') {
      (name[0] == 'g' ? global : local)[static_cast<size_t>(name[4] - '0')] = bound;
    } else {
      throw std::logic_error("INTERP: an unknown launch dimension " + special.arg().repr());
    }
  }
};

// Where a run is in its launch: the thread of a CPU-shaped kernel, or the workgroup and the thread
// in it of a GPU-shaped one.
struct LaunchIds {
  int64_t core_id = 0;
  std::array<int64_t, 3> group{}, thread{};
};

// A workgroup's shared memory: each LOCAL buffer once for all its threads.
using SharedMemory = std::unordered_map<const UOpNode*, std::unique_ptr<Storage>>;

class Machine {
 public:
  Machine(const Code& code, const std::map<int64_t, std::shared_ptr<Storage>>& buffers,
          const std::map<std::string, int64_t>& variables, LaunchIds ids, SharedMemory& shared)
      : prog_(code),
        code_(code.code),
        buffers_(buffers),
        variables_(variables),
        ids_(ids),
        shared_(shared) {}

  // Runs until the program's end (false) or past its next BARRIER (true).
  bool run_to_barrier() {
    while (pc_ < code_.size()) {
      const bool barrier = code_[pc_].op() == Op::Barrier;
      pc_ = step(pc_);
      if (barrier) return true;
    }
    return false;
  }
  size_t pc() const { return pc_; }

 private:
  const Arg& value(const UOp& u) {
    if (u.op() == Op::Const) return u.arg();
    auto it = values_.find(u.node());
    if (it == values_.end()) {
      throw std::logic_error(
          fmt::format("INTERP: {} used before it was computed", op_info(u.op()).py_name));
    }
    return it->second;
  }
  void set(const UOp& u, Arg v) { values_[u.node()] = std::move(v); }

  // The storage a BUFFER (or an AFTER of one: the buffer once what it orders ran) stands for.
  Storage& storage(const UOp& b) {
    const UOp buf = b.under(Op::After);
    const int64_t slot = static_cast<int64_t>(buf.arg().field("slot").as_int());
    if (is_register(buf) || is_shared(buf)) {  // a register of this run, the group's memory
      auto& reg = (is_shared(buf) ? shared_ : registers_)[buf.node()];
      if (!reg) {
        const auto n = static_cast<size_t>(buf.arg().field("size").as_int());
        reg = std::make_unique<Storage>(
            Storage{slot, buf.dtype(), static_cast<int64_t>(n),
                    BufferBytes(n * static_cast<size_t>(buf.dtype().itemsize()))});
      }
      return *reg;
    }
    return *buffers_.at(slot);
  }
  // A vector value: a load of a SHRINK, or a STACK.
  static bool is_vector(const UOp& u) {
    return u.op() == Op::Stack || (u.op() == Op::Load && u.src(0).op() == Op::Shrink);
  }
  // The elements a vector address (SHRINK(buffer, (first,), (n,))) spans.
  static int64_t lanes_of(const UOp& shrink) {
    return static_cast<int64_t>(shrink.src(2).src(0).arg().as_int());
  }
  // The element an INDEX (or the first a SHRINK) addresses: bind_kernel refused every access that
  // may leave its buffer, and a gated load reads only where its gate holds.
  std::pair<Storage*, int64_t> address(const UOp& index) {
    Storage& s = storage(index.src(0));
    const auto i = static_cast<int64_t>(value(index).as_int());
    const int64_t last = i + (index.op() == Op::Shrink ? lanes_of(index) - 1 : 0);
    if (i < 0 || last >= s.size)
      throw std::out_of_range(
          fmt::format("INTERP: access of element {} of a buffer of {}", i, s.size));
    return {&s, i};
  }

  size_t step(size_t pc) {
    const UOp& u = code_[pc];
    switch (u.op()) {
      case Op::Range: {
        set(u, Arg::integer(0));
        if (value(u.src(0)).as_int() <= 0) return prog_.end_of.at(pc) + 1;
        return pc + 1;
      }
      case Op::End: {
        const UOp& r = u.src(u.nsrc() - 1);
        const i128 next = value(r).as_int() + 1;
        set(r, Arg::integer(next));
        return next < value(r.src(0)).as_int() ? prog_.start_of.at(pc) + 1 : pc + 1;
      }
      case Op::If:  // what runs up to its ENDIF runs where the gate holds
        return value(u.src(0)).as_bool() ? pc + 1 : prog_.end_of.at(pc) + 1;
      case Op::Special: {  // where this run is in the launch
        const std::string& name = u.arg().as_string();
        const auto dim = static_cast<size_t>(name.back() - '0');
        set(u, Arg::integer(name == "core_id" ? ids_.core_id
                            : name[0] == 'g'  ? ids_.group[dim]
                                              : ids_.thread[dim]));
        return pc + 1;
      }
      case Op::DefineVar: {  // a value the launch gives, within the variable's bounds
        const std::string name = u.arg().items()[0].as_string();
        const auto it = variables_.find(name);
        if (it == variables_.end())
          throw std::logic_error("INTERP: the launch gives no value for variable " + name);
        if (it->second < u.vmin().i || it->second > u.vmax().i)
          throw std::logic_error(
              fmt::format("INTERP: variable {} = {} is outside its bounds", name, it->second));
        set(u, Arg::integer(it->second));
        return pc + 1;
      }
      case Op::EndIf:
      case Op::Const:
      case Op::Buffer:
      case Op::After:  // a buffer once its dependencies ran: they ran before it
      case Op::Group:
      case Op::Sink:
      case Op::Noop:
      case Op::Barrier:  // the workgroup's threads meet here (interp_run)
        return pc + 1;   // definitions and ordering: nothing to compute
      case Op::Index:
        if (is_vector(u.src(0))) {  // a lane of a vector value
          set(u, value(u.src(0)).items()[static_cast<size_t>(value(u.src(1)).as_int())]);
        } else {  // an address: the element's position
          set(u, value(u.src(1)));
        }
        return pc + 1;
      case Op::Shrink:  // a vector address: its first element's position
        set(u, value(u.src(1).src(0)));
        return pc + 1;
      case Op::Stack: {  // a vector value (or a shape): its sources' values
        std::vector<Arg> items;
        for (const UOp& s : u.src()) items.push_back(value(s));
        set(u, Arg::tuple(std::move(items)));
        return pc + 1;
      }
      case Op::Load: {
        if (u.nsrc() == 3 && !value(u.src(2)).as_bool()) {  // alt, in every lane of a vector
          const Arg alt = cast_value(u.dtype(), value(u.src(1)));
          set(u, u.src(0).op() == Op::Shrink
                     ? Arg::tuple(std::vector<Arg>(static_cast<size_t>(lanes_of(u.src(0))), alt))
                     : alt);
          return pc + 1;
        }
        auto [s, i] = address(u.src(0));
        if (u.src(0).op() != Op::Shrink) {
          set(u, load_element(*s, i));
          return pc + 1;
        }
        std::vector<Arg> lanes;
        for (int64_t k = 0; k < lanes_of(u.src(0)); ++k) lanes.push_back(load_element(*s, i + k));
        set(u, Arg::tuple(std::move(lanes)));
        return pc + 1;
      }
      case Op::Store: {
        auto [s, i] = address(u.src(0));
        if (u.src(0).op() != Op::Shrink) {
          store_element(*s, i, value(u.src(1)));
          return pc + 1;
        }
        const Arg& v = value(u.src(1));
        for (int64_t k = 0; k < lanes_of(u.src(0)); ++k)
          store_element(*s, i + k, v.items()[static_cast<size_t>(k)]);
        return pc + 1;
      }
      case Op::Cast:
        set(u, cast_value(u.dtype(), value(u.src(0))));
        return pc + 1;
      case Op::Bitcast: {  // reinterpret the bytes through a one-element buffer of each type
        const DType from = u.src(0).dtype();
        Storage tmp{0, from, 1, BufferBytes(static_cast<size_t>(from.itemsize()))};
        store_element(tmp, 0, value(u.src(0)));
        tmp.dtype = u.dtype();
        set(u, load_element(tmp, 0));
        return pc + 1;
      }
      case Op::Where:
        set(u,
            cast_value(u.dtype(), value(u.src(0)).as_bool() ? value(u.src(1)) : value(u.src(2))));
        return pc + 1;
      default:
        break;
    }
    if (!groups::alu().contains(u.op())) {
      throw std::logic_error("INTERP: cannot execute " + std::string(op_info(u.op()).py_name));
    }
    std::vector<Arg> args;
    for (const UOp& s : u.src()) args.push_back(value(s));
    // a product of two 64-bit elements can leave i128, where exact arithmetic saturates; the
    // dtype keeps only its low bits, which modular arithmetic gives exactly
    if ((u.op() == Op::Mul || u.op() == Op::MulAcc) && u.dtype().is_int()) {
      using u128 = unsigned __int128;
      u128 p = static_cast<u128>(args[0].as_int()) * static_cast<u128>(args[1].as_int());
      if (u.op() == Op::MulAcc) p += static_cast<u128>(args[2].as_int());
      set(u, Arg::integer(truncate_int(u.dtype(), static_cast<i128>(p))));
      return pc + 1;
    }
    // computed here, not by exec_alu, which folds constants: tinygrad leaves ThreeFry of constants
    // to its lowering, and CPU lowers it in rules/decompositions.rw
    if (u.op() == Op::ThreeFry) {
      set(u, Arg::integer(threefry2x32(static_cast<uint64_t>(args[0].as_int()),
                                       static_cast<uint64_t>(args[1].as_int()))));
      return pc + 1;
    }
    auto r = exec_alu(u.op(), u.dtype(), args);
    if (!r && is_int_division(u.op()) && !u.dtype().is_float() && args[1].as_int() == 0) {
      // a CDiv or CMod a floor division or modulo became (rules/decompositions.rw, on a target
      // that decomposes them) carries the name of the op the user wrote
      Op named = u.op();
      if (u.arg().is_string()) named = op_from_name(u.arg().as_string()).value_or(named);
      throw division_by_zero("INTERP", named);
    }
    if (!r)
      throw std::runtime_error(
          fmt::format("INTERP: {} is undefined here (e.g. division by zero)", op_name(u.op())));
    set(u, *r);
    return pc + 1;
  }

  static bool is_shared(const UOp& buf) { return buffer_addrspace(buf) == AddrSpace::Local; }

  const Code& prog_;
  const std::vector<UOp>& code_;
  const std::map<int64_t, std::shared_ptr<Storage>>& buffers_;
  const std::map<std::string, int64_t>& variables_;
  LaunchIds ids_;
  SharedMemory& shared_;
  size_t pc_ = 0;
  std::unordered_map<const UOpNode*, Arg> values_;
  std::unordered_map<const UOpNode*, std::unique_ptr<Storage>> registers_;
};

// One workgroup of a GPU-shaped kernel: its threads run in lockstep from barrier to barrier --
// each in turn runs to the next BARRIER, and none goes past it before all have reached it (the
// same one: a BARRIER some threads skip is an error, as on a GPU it would hang).
void run_workgroup(const Code& code, const std::map<int64_t, std::shared_ptr<Storage>>& buffers,
                   const std::map<std::string, int64_t>& variables, int64_t core_id,
                   const std::array<int64_t, 3>& group) {
  SharedMemory shared;
  std::vector<Machine> threads;
  for (int64_t z = 0; z < code.local[2]; ++z)
    for (int64_t y = 0; y < code.local[1]; ++y)
      for (int64_t x = 0; x < code.local[0]; ++x)
        threads.emplace_back(code, buffers, variables,
                             LaunchIds{.core_id = core_id, .group = group, .thread = {x, y, z}},
                             shared);
  // Between two barriers the threads run one after another, in turn first to last and last to
  // first: a program that reads shared memory another thread may still write there (a missing
  // barrier) gives other values than it would in one order only.
  const size_t n = threads.size();
  for (bool at_barrier = true, forward = true; at_barrier; forward = !forward) {
    const size_t first = forward ? 0 : n - 1;
    at_barrier = threads[first].run_to_barrier();
    for (size_t k = 1; k < n; ++k) {
      Machine& t = threads[forward ? k : n - 1 - k];
      if (t.run_to_barrier() != at_barrier || t.pc() != threads[first].pc())
        throw std::logic_error(
            "INTERP: the threads of a workgroup reach different BARRIERs (a barrier in divergent "
            "control flow)");
    }
  }
}

}  // namespace

void interp_run(const UOp& program, const std::map<int64_t, std::shared_ptr<Storage>>& buffers,
                const std::map<std::string, int64_t>& variables) {
  if (program.op() != Op::Linear) throw std::logic_error("INTERP runs LINEAR programs");
  const Code code(program);
  // a threaded kernel's threads run one after another, each with its own registers
  for (int64_t t = 0; t < code.threads; ++t)
    for (int64_t z = 0; z < code.global[2]; ++z)
      for (int64_t y = 0; y < code.global[1]; ++y)
        for (int64_t x = 0; x < code.global[0]; ++x)
          run_workgroup(code, buffers, variables, t, {x, y, z});
}

}  // namespace tinyrw
