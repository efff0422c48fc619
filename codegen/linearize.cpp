#include "codegen/linearize.h"

#include <unordered_map>

#include <fmt/format.h>

namespace tinyrw {

namespace {

UOp identity_of(Op op, DType d) {
  if (op == Op::Add) return UOp::constant(d, Arg::integer(0));
  if (op == Op::Mul) return UOp::constant(d, Arg::integer(1));
  return d.is_float() ? UOp::cfloat(-INFINITY, d) : UOp::constant(d, Arg::integer(d.int_min()));
}

class Linearizer {
 public:
  std::vector<UOp> program;

  // Emits the instructions computing u and returns the node that holds its value there: u with
  // its sources replaced by theirs (a reduction's value is its accumulator load). Once per scope;
  // inner scopes see outer values.
  UOp emit(const UOp& u) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      if (auto f = it->find(u.node()); f != it->end()) return f->second;
    }
    if (u.op() == Op::Reduce) return reduce(u);
    if (u.op() == Op::Range) throw std::logic_error("linearize: a range used outside its loop");
    std::vector<UOp> src;
    for (const UOp& s : u.src()) src.push_back(emit(s));
    const UOp v = u.nsrc() ? u.with_src(src) : u;
    program.push_back(v);
    scopes_.back().emplace(u.node(), v);
    return v;
  }

  void open(const UOp& range) {
    program.push_back(range);
    scopes_.emplace_back();
    scopes_.back().emplace(range.node(), range);
  }
  void close(const UOp& range) {
    scopes_.pop_back();
    program.push_back(UOp::make(Op::End, dtypes::void_, {range}));
  }

 private:
  UOp reduce(const UOp& r) {
    const Op op = r.arg().as_op();
    const DType d = r.dtype();
    // the accumulator: a one-element register buffer, unique per reduction
    const UOp acc = UOp::make(Op::Buffer, d, {},
                              Arg::record("ParamArg", {{"slot", Arg::integer(-(++accumulators_))},
                                                       {"size", Arg::integer(1)},
                                                       {"addrspace", Arg::string("REG")}}));
    const UOp at = UOp::make(Op::Index, d, {acc, UOp::cint(0)});
    const UOp init = emit(identity_of(op, d));
    program.push_back(UOp::make(Op::Store, dtypes::void_, {at, init}));
    std::vector<UOp> ranges(r.src().begin() + 1, r.src().end());
    for (const UOp& rg : ranges) open(rg);
    const UOp v = emit(r.src(0));
    program.push_back(at);  // the current accumulator value
    const UOp next = at.alu(op, {v});
    program.push_back(next);
    program.push_back(UOp::make(Op::Store, dtypes::void_, {at, next}));
    for (auto it = ranges.rbegin(); it != ranges.rend(); ++it) close(*it);
    program.push_back(at);  // the final value, read after the loops
    scopes_.back().emplace(r.node(), at);
    return at;
  }

  std::vector<std::unordered_map<const UOpNode*, UOp>> scopes_{1};
  int64_t accumulators_ = 0;
};

}  // namespace

UOp linearize(const UOp& value, const std::vector<UOp>& ranges, const std::vector<int64_t>& shape,
              const UOp& out) {
  Linearizer l;
  for (const UOp& r : ranges) l.open(r);
  const UOp v = l.emit(value);
  UOp flat = UOp::cint(0);
  int64_t stride = 1;
  for (size_t k = ranges.size(); k-- > 0;) {
    flat = flat + ranges[k] * UOp::cint(stride);
    stride *= shape[k];
  }
  const UOp at = l.emit(flat);
  const UOp dst = UOp::make(Op::Index, out.dtype(), {out, at});
  l.program.push_back(UOp::make(Op::Store, dtypes::void_, {dst, v}));
  for (auto it = ranges.rbegin(); it != ranges.rend(); ++it) l.close(*it);
  return UOp::make(Op::Linear, dtypes::void_, l.program);
}

}  // namespace tinyrw
