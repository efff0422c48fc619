#include "runtime/interp.h"

#include <algorithm>
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

class Machine {
 public:
  Machine(const UOp& program, const std::map<int64_t, std::shared_ptr<Storage>>& buffers,
          const std::map<std::string, int64_t>& variables, int64_t core_id)
      : code_(program.src().begin(), program.src().end()),
        buffers_(buffers),
        variables_(variables),
        core_id_(core_id) {
    std::vector<size_t> open, gates;
    for (size_t i = 0; i < code_.size(); ++i) {
      if (code_[i].op() == Op::If) gates.push_back(i);
      if (code_[i].op() == Op::EndIf) {
        if (gates.empty() || code_[gates.back()] != code_[i].src(0))
          throw std::logic_error("INTERP: an ENDIF that does not close the innermost open IF");
        end_of_[gates.back()] = i;
        gates.pop_back();
      }
      if (code_[i].op() == Op::Range) open.push_back(i);
      if (code_[i].op() == Op::End) {
        if (open.empty() || code_[open.back()] != code_[i].src(code_[i].nsrc() - 1))
          throw std::logic_error("INTERP: an END that does not close the innermost open RANGE");
        end_of_[open.back()] = i;
        start_of_[i] = open.back();
        open.pop_back();
      }
    }
    if (!open.empty()) throw std::logic_error("INTERP: RANGE without END");
    if (!gates.empty()) throw std::logic_error("INTERP: IF without ENDIF");
  }

  void run() {
    for (size_t pc = 0; pc < code_.size();) pc = step(pc);
  }

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
    if (is_register(buf)) {  // an accumulator register of this run
      auto& reg = registers_[buf.node()];
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
        if (value(u.src(0)).as_int() <= 0) return end_of_.at(pc) + 1;
        return pc + 1;
      }
      case Op::End: {
        const UOp& r = u.src(u.nsrc() - 1);
        const i128 next = value(r).as_int() + 1;
        set(r, Arg::integer(next));
        return next < value(r.src(0)).as_int() ? start_of_.at(pc) + 1 : pc + 1;
      }
      case Op::If:  // what runs up to its ENDIF runs where the gate holds
        return value(u.src(0)).as_bool() ? pc + 1 : end_of_.at(pc) + 1;
      case Op::Special:  // the thread this run is
        set(u, Arg::integer(core_id_));
        return pc + 1;
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
        return pc + 1;  // definitions and ordering: nothing to compute
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
        if (u.nsrc() == 3 && !value(u.src(2)).as_bool()) {
          set(u, cast_value(u.dtype(), value(u.src(1))));
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
    if (!r && is_int_division(u.op()) && !u.dtype().is_float() && args[1].as_int() == 0)
      throw division_by_zero("INTERP", u.op());
    if (!r)
      throw std::runtime_error(
          fmt::format("INTERP: {} is undefined here (e.g. division by zero)", op_name(u.op())));
    set(u, *r);
    return pc + 1;
  }

  std::vector<UOp> code_;
  const std::map<int64_t, std::shared_ptr<Storage>>& buffers_;
  const std::map<std::string, int64_t>& variables_;
  int64_t core_id_;
  std::unordered_map<const UOpNode*, Arg> values_;
  std::unordered_map<size_t, size_t> end_of_, start_of_;
  std::unordered_map<const UOpNode*, std::unique_ptr<Storage>> registers_;
};

}  // namespace

void interp_run(const UOp& program, const std::map<int64_t, std::shared_ptr<Storage>>& buffers,
                const std::map<std::string, int64_t>& variables) {
  if (program.op() != Op::Linear) throw std::logic_error("INTERP runs LINEAR programs");
  // a threaded kernel's threads run one after another, each with its own registers
  int64_t threads = 1;
  for (const UOp& u : program.src())
    if (u.op() == Op::Special) threads = static_cast<int64_t>(u.src(0).arg().as_int());
  for (int64_t t = 0; t < threads; ++t) Machine(program, buffers, variables, t).run();
}

}  // namespace tinyrw
