#include "runtime/llvm_render.h"

#include <bit>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

#include "codegen/linearize.h"

#include "ir/graph.h"

namespace tinyrw {

namespace {

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
  if (d.is_index()) return "i64";
  if (d.is_int()) return fmt::format("i{}", d.itemsize() * 8);
  if (d == dtypes::float32 || is_half(d)) return "float";
  if (d == dtypes::float64) return "double";
  throw std::invalid_argument("CPU: dtype " + d.repr() + " is not supported");
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
  Emitter(const std::vector<std::pair<int64_t, int64_t>>& sizes) : sizes_(sizes) {}

  std::string tmp() { return fmt::format("%t{}", next_++); }
  std::string label(const char* base) { return fmt::format("{}{}", base, next_++); }
  void line(const std::string& s) { body_ += "  " + s + "\n"; }
  void block(const std::string& name) { body_ += name + ":\n"; }

  // An i64 loop over [0, n): emits the head, leaves the body open; returns the index value.
  struct Loop {
    std::string ptr, head, body, exit, idx;
  };
  Loop open_loop(int64_t n) { return open_loop(std::to_string(n)); }
  Loop open_loop(const std::string& n) {
    Loop l{tmp(), label("head"), label("body"), label("exit"), ""};
    allocas_ += fmt::format("  {} = alloca i64\n", l.ptr);
    line(fmt::format("store i64 0, ptr {}", l.ptr));
    line(fmt::format("br label %{}", l.head));
    block(l.head);
    l.idx = tmp();
    line(fmt::format("{} = load i64, ptr {}", l.idx, l.ptr));
    const std::string c = tmp();
    line(fmt::format("{} = icmp slt i64 {}, {}", c, l.idx, n));
    line(fmt::format("br i1 {}, label %{}, label %{}", c, l.body, l.exit));
    block(l.body);
    return l;
  }
  void close_loop(const Loop& l) {
    const std::string nx = tmp();
    line(fmt::format("{} = add i64 {}, 1", nx, l.idx));
    line(fmt::format("store i64 {}, ptr {}", nx, l.ptr));
    line(fmt::format("br label %{}", l.head));
    block(l.exit);
  }

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

  const std::string* find(const UOp& u) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      if (auto f = it->find(u.node()); f != it->end()) return &f->second;
    }
    return nullptr;
  }
  // The value of u, its sources emitted first, in the order a recursive walk would take, with an
  // explicit stack: a chain of any depth. A reduction's source is emitted by reduce(), inside
  // its loops.
  std::string emit(const UOp& root) {
    if (const std::string* v = find(root)) return *v;
    std::vector<std::pair<const UOp*, bool>> stack{{&root, false}};  // (node, sources pushed)
    while (!stack.empty()) {
      auto& [u, expanded] = stack.back();
      if (find(*u)) {
        stack.pop_back();
        continue;
      }
      if (!expanded && u->op() != Op::Reduce) {
        expanded = true;
        const UOp* node = u;                     // the push below may move the stack
        for (size_t k = node->nsrc(); k-- > 0;)  // (an INDEX's BUFFER is no value)
          if (node->src(k).op() != Op::Buffer && !find(node->src(k)))
            stack.emplace_back(&node->src(k), false);
        continue;
      }
      const UOp* node = u;
      stack.pop_back();
      std::string v = compute(*node);
      scopes_.back().emplace(node->node(), std::move(v));
    }
    return *find(root);
  }

  std::vector<std::unordered_map<const UOpNode*, std::string>> scopes_{1};
  std::map<int64_t, int> buffer_index;  // slot -> argument position (output is 0)
  std::string allocas_, body_;

  // STORE v at INDEX(buffer, i) (an index the caller has checked to stay inside the buffer).
  void store(const UOp& index, const std::string& v) {
    const int64_t slot = static_cast<int64_t>(index.src(0).arg().field("slot").as_int());
    const std::string i = emit(index.src(1)), p = tmp(), mv = to_memory(index.dtype(), v);
    line(fmt::format("{} = getelementptr {}, ptr {}, i64 {}", p, mem_type(index.dtype()),
                     buffer_ptr(slot), i));
    line(fmt::format("store {} {}, ptr {}", mem_type(index.dtype()), mv, p));
  }

 private:
  std::string buffer_ptr(int64_t slot) { return fmt::format("%b{}", buffer_index.at(slot)); }

  std::string compute(const UOp& u) {
    const DType d = u.dtype();
    const std::string t = u.op() == Op::Index || groups::alu().contains(u.op()) ||
                                  u.op() == Op::Const || u.op() == Op::Cast ||
                                  u.op() == Op::Bitcast || u.op() == Op::Reduce
                              ? ll_type(d)
                              : "";
    switch (u.op()) {
      case Op::Const:
        return ll_const(d, u.arg());
      case Op::Index:
        return load(u, t);
      case Op::Cast:
        return round16(d, cast(emit(u.src(0)), u.src(0).dtype(), d));
      case Op::Bitcast: {
        if (is_half(d) || is_half(u.src(0).dtype())) {
          throw std::invalid_argument("CPU: bitcast of 16-bit floats is not supported");
        }
        const std::string x = emit(u.src(0)), r = tmp();
        line(fmt::format("{} = bitcast {} {} to {}", r, ll_type(u.src(0).dtype()), x, ll_type(d)));
        return r;
      }
      case Op::Reduce:
        return reduce(u, t);
      default:
        break;
    }
    if (!groups::alu().contains(u.op())) {
      throw std::invalid_argument("CPU: cannot render " + std::string(op_info(u.op()).py_name));
    }
    std::vector<std::string> a;
    for (const UOp& s : u.src()) a.push_back(emit(s));
    const DType sd = u.src(0).dtype();
    if (is_int_division(u.op()) && !sd.is_float()) return divmod(u, a[0], a[1]);
    return round16(d, alu(u.op(), d, sd, ll_type(sd), a));
  }

  std::string load(const UOp& u, const std::string& t) {
    const UOp& b = u.src(0);
    if (b.op() != Op::Buffer || u.nsrc() != 2) throw std::invalid_argument("CPU: unlowered index");
    const int64_t slot = static_cast<int64_t>(b.arg().field("slot").as_int());
    int64_t size = 1;
    for (const auto& [s, n] : sizes_)
      if (s == slot) size = n;
    // An index that may leave the buffer (a masked, padded lane: where() evaluates both sides
    // here) is clamped; one whose range provably stays inside is used as it is.
    std::string c = emit(u.src(1));
    if (u.src(1).vmin() < Num::of(0) || u.src(1).vmax() > Num::of(size - 1)) {
      const std::string lo = tmp(), cl = tmp();
      line(fmt::format("{} = call i64 @llvm.smax.i64(i64 {}, i64 0)", lo, c));
      line(fmt::format("{} = call i64 @llvm.smin.i64(i64 {}, i64 {})", cl, lo,
                       std::max<int64_t>(size - 1, 0)));
      c = cl;
    }
    const std::string p = tmp(), v = tmp();
    line(fmt::format("{} = getelementptr {}, ptr {}, i64 {}", p, mem_type(u.dtype()),
                     buffer_ptr(slot), c));
    line(fmt::format("{} = load {}, ptr {}", v, mem_type(u.dtype()), p));
    (void)t;
    return from_memory(u.dtype(), v);
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
      const std::string wide = tmp(), lo = tmp(), hi = tmp(), ok = tmp(), sel = tmp();
      line(fmt::format("{} = fptosi {} {} to i128", wide, ft, x));
      line(fmt::format("{} = fcmp ogt {} {}, 0xC760000000000000", lo, ft, x));
      line(fmt::format("{} = fcmp olt {} {}, 0x4760000000000000", hi, ft, x));
      line(fmt::format("{} = and i1 {}, {}", ok, lo, hi));
      line(fmt::format("{} = select i1 {}, i128 {}, i128 0", sel, ok, wide));
      line(fmt::format("{} = trunc i128 {} to {}", r, sel, tt));
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
      case Op::Exp2:
        return intrinsic("exp2", 1);
      case Op::Log2:
        return intrinsic("log2", 1);
      case Op::Sin:
        return intrinsic("sin", 1);
      case Op::Trunc:
        return fl ? intrinsic("trunc", 1) : a[0];
      case Op::Pow:
        return intrinsic("pow", 2);
      case Op::MulAcc: {
        if (fl) return intrinsic("fma", 3);  // one rounding of a*b+c
        const std::string m = tmp();
        line(fmt::format("{} = mul {} {}, {}", m, t, a[0], a[1]));
        line(fmt::format("{} = add {} {}, {}", r, t, m, a[2]));
        return r;
      }
      default:
        throw std::invalid_argument(fmt::format("CPU: cannot render {}", op_name(op)));
    }
  }

  // Integer division without a hardware trap: a zero divisor records the op in the error flag
  // (%err, returned by the kernel; the host raises) and divides by 1 instead; so does
  // INT_MIN / -1 (signed), whose wrapped quotient INT_MIN and remainder 0 are what x / 1 gives.
  // A constant divisor other than 0 and -1 (index math) needs neither guard, and a dividend
  // that cannot be negative divided by a positive constant rounds the same toward zero and -inf.
  std::string divmod(const UOp& u, const std::string& x, const std::string& y) {
    const Op op = u.op();
    const DType sd = u.src(0).dtype();
    const std::string t = ll_type(sd);
    const bool un = sd.is_unsigned() || sd.is_bool();
    const UOp& divisor = u.src(1);
    const i128 c = divisor.op() == Op::Const ? truncate_int(sd, divisor.arg().as_int()) : 0;
    const bool safe = c != 0 && (un || c != -1);
    std::string b = y;
    if (!safe) {
      const std::string z = tmp(), e0 = tmp(), e1 = tmp();
      b = tmp();
      line(fmt::format("{} = icmp eq {} {}, 0", z, t, y));
      line(fmt::format("{} = load i32, ptr %err", e0));
      const std::string first = tmp(), rec = tmp();  // the first division by zero is kept
      line(fmt::format("{} = icmp eq i32 {}, 0", first, e0));
      line(fmt::format("{} = and i1 {}, {}", rec, z, first));
      line(fmt::format("{} = select i1 {}, i32 {}, i32 {}", e1, rec, error_code(op), e0));
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
    const bool trunc =
        un || op == Op::CDiv || op == Op::CMod || (safe && c > 0 && u.src(0).vmin() >= Num::of(0));
    const std::string q = tmp(), m = tmp();
    if (op == Op::CDiv || op == Op::FloorDiv || !trunc)
      line(fmt::format("{} = {} {} {}, {}", q, un ? "udiv" : "sdiv", t, x, b));
    if (op == Op::CMod || op == Op::FloorMod || !trunc)
      line(fmt::format("{} = {} {} {}, {}", m, un ? "urem" : "srem", t, x, b));
    if (trunc) return op == Op::CDiv || op == Op::FloorDiv ? q : m;
    // floor semantics: when the remainder is nonzero and its sign differs from the divisor's,
    // the quotient is one lower and the modulo one divisor higher.
    const std::string nz = tmp(), sm = tmp(), sb = tmp(), diff = tmp(), adj = tmp(), r = tmp();
    line(fmt::format("{} = icmp ne {} {}, 0", nz, t, m));
    line(fmt::format("{} = icmp slt {} {}, 0", sm, t, m));
    line(fmt::format("{} = icmp slt {} {}, 0", sb, t, b));
    line(fmt::format("{} = xor i1 {}, {}", diff, sm, sb));
    line(fmt::format("{} = and i1 {}, {}", adj, nz, diff));
    if (op == Op::FloorDiv) {
      const std::string q1 = tmp();
      line(fmt::format("{} = sub {} {}, 1", q1, t, q));
      line(fmt::format("{} = select i1 {}, {} {}, {} {}", r, adj, t, q1, t, q));
    } else {
      const std::string m1 = tmp();
      line(fmt::format("{} = add {} {}, {}", m1, t, m, b));
      line(fmt::format("{} = select i1 {}, {} {}, {} {}", r, adj, t, m1, t, m));
    }
    return r;
  }

 public:
  static std::string reduce_identity(Op op, DType d) {
    return op == Op::Add   ? (d.is_float() ? "0.0" : "0")
           : op == Op::Mul ? (d.is_float() ? "1.0" : "1")
           : d.is_float()  ? "0xFFF0000000000000"
                           : to_string(d.int_min());
  }

  // acc[j] = acc[j] op body for the innermost output index j (the reduction loops outside it), so
  // the j loop reads memory contiguously and vectorizes (a matmul's inner loop walks B's rows).
  void reduce_rows(const UOp& red, const UOp& last_range, int64_t n, const std::string& acc) {
    const Op op = reduce_op(red);
    const DType d = red.dtype();
    const std::string t = ll_type(d);
    {
      const Loop init = open_loop(n);
      const std::string p = tmp();
      line(fmt::format("{} = getelementptr {}, ptr {}, i64 {}", p, t, acc, init.idx));
      line(fmt::format("store {} {}, ptr {}", t, reduce_identity(op, d), p));
      close_loop(init);
    }
    std::vector<Loop> loops;
    scopes_.emplace_back();
    for (size_t k = 1; k < red.nsrc(); ++k) {
      loops.push_back(open_loop(static_cast<int64_t>(red.src(k).src(0).arg().as_int())));
      scopes_.back().emplace(red.src(k).node(), loops.back().idx);
    }
    const Loop j = open_loop(n);
    scopes_.emplace_back();
    scopes_.back().emplace(last_range.node(), j.idx);
    const std::string v = emit(red.src(0)), p = tmp(), cur = tmp();
    line(fmt::format("{} = getelementptr {}, ptr {}, i64 {}", p, t, acc, j.idx));
    line(fmt::format("{} = load {}, ptr {}", cur, t, p));
    const std::string nx = round16(d, alu(op, d, d, t, {cur, v}));
    line(fmt::format("store {} {}, ptr {}", t, nx, p));
    scopes_.pop_back();
    close_loop(j);
    scopes_.pop_back();
    for (auto it = loops.rbegin(); it != loops.rend(); ++it) close_loop(*it);
  }
  // STORE(INDEX(buffer, i), value) over the row range `row` of n elements (its loop not open),
  // `reds` the REDUCEs of the value outside any other: each row reduced by reduce_rows, then for
  // each element the value computed from the reduced ones and stored at its i (a matmul's bias
  // and activation run after its row is reduced).
  void store_rows(const UOp& st, const UOp& row, int64_t n, const std::vector<UOp>& reds) {
    std::vector<std::string> accs;
    for (const UOp& red : reds) {
      accs.push_back(tmp());
      allocas_ += fmt::format("  {} = alloca [{} x {}]\n", accs.back(), n, ll_type(red.dtype()));
      reduce_rows(red, row, n, accs.back());
    }
    const Loop j = open_loop(n);
    scopes_.emplace_back();
    scopes_.back().emplace(row.node(), j.idx);
    for (size_t k = 0; k < reds.size(); ++k) {
      const std::string t = ll_type(reds[k].dtype()), p = tmp(), v = tmp();
      line(fmt::format("{} = getelementptr {}, ptr {}, i64 {}", p, t, accs[k], j.idx));
      line(fmt::format("{} = load {}, ptr {}", v, t, p));
      scopes_.back().emplace(reds[k].node(), v);
    }
    store(st.src(0), emit(st.src(1)));
    scopes_.pop_back();
    close_loop(j);
  }

 private:
  std::string reduce(const UOp& u, const std::string& t) {
    const Op op = reduce_op(u);
    const DType d = u.dtype();
    const std::string acc = tmp();
    allocas_ += fmt::format("  {} = alloca {}\n", acc, t);
    const std::string init = reduce_identity(op, d);
    line(fmt::format("store {} {}, ptr {}", t, init, acc));
    std::vector<Loop> loops;
    scopes_.emplace_back();
    for (size_t k = 1; k < u.nsrc(); ++k) {
      const UOp& r = u.src(k);
      loops.push_back(open_loop(emit(r.src(0))));  // a computed bound before the loop's head
      scopes_.back().emplace(r.node(), loops.back().idx);
    }
    const std::string v = emit(u.src(0)), cur = tmp();
    line(fmt::format("{} = load {}, ptr {}", cur, t, acc));
    const std::string nx = round16(d, alu(op, d, d, t, {cur, v}));  // as INTERP rounds it
    line(fmt::format("store {} {}, ptr {}", t, nx, acc));
    scopes_.pop_back();
    for (auto it = loops.rbegin(); it != loops.rend(); ++it) close_loop(*it);
    const std::string out = tmp();
    line(fmt::format("{} = load {}, ptr {}", out, t, acc));
    return out;
  }

 public:
  std::set<std::string> intrinsics_;

 private:
  const std::vector<std::pair<int64_t, int64_t>>& sizes_;
  int next_ = 0;
};

}  // namespace

namespace {
RenderedKernel& finish(RenderedKernel& out, Emitter& e) {
  std::string params;
  for (size_t i = 0; i <= out.input_slots.size(); ++i) {
    params += fmt::format(
        "  %p{0} = getelementptr ptr, ptr %bufs, i64 {0}\n  %b{0} = load ptr, ptr %p{0}\n", i);
  }
  out.ir =
      "; tinyrw kernel\n"
      "declare i64 @llvm.smax.i64(i64, i64)\n"
      "declare i64 @llvm.smin.i64(i64, i64)\n";
  for (const std::string& d : e.intrinsics_) out.ir += d + "\n";
  out.ir += "\ndefine i32 @kernel(ptr %bufs) {\nentry:\n  %err = alloca i32\n" + e.allocas_ +
            "  store i32 0, ptr %err\n" + params + e.body_ +
            "  %err.out = load i32, ptr %err\n  ret i32 %err.out\n}\n";
  return out;
}
// The buffers `root` reads or writes become the kernel's arguments after the unused 0th, in
// order of first use.
void number_buffers(const UOp& root, RenderedKernel& out, Emitter& e) {
  for (const UOp& u : toposort(root)) {
    if (u.op() != Op::Buffer) continue;
    const int64_t slot = static_cast<int64_t>(u.arg().field("slot").as_int());
    if (e.buffer_index.emplace(slot, static_cast<int>(out.input_slots.size()) + 1).second)
      out.input_slots.push_back(slot);
  }
}
}  // namespace

std::optional<Op> kernel_error_op(int32_t code) {
  for (Op op : {Op::CDiv, Op::CMod, Op::FloorDiv, Op::FloorMod})
    if (code == error_code(op)) return op;
  return std::nullopt;
}

// The longest row the row fast path (Emitter::store_rows) keeps in its accumulator array.
constexpr int64_t kRowLimit = 4096;

namespace {
// The REDUCEs of a stored value that are not inside another REDUCE.
std::vector<UOp> outer_reduces(const UOp& value) {
  std::vector<UOp> out;
  for (const UOp& u : toposort(value, [](const UOp& n) { return n.op() != Op::Reduce; }))
    if (u.op() == Op::Reduce) out.push_back(u);
  return out;
}

// The row length of END(STORE(INDEX(buffer, i), value), ..., row), value holding REDUCEs, when
// the row fast path (Emitter::store_rows) computes it as the element-by-element order would: the
// innermost range `row` has a constant bound in (1, kRowLimit], each outer reduction's ranges
// constant bounds, and no reduction reads the buffer stored to (every element of the row is
// reduced before any is stored).
std::optional<int64_t> row_length(const UOp& end, std::vector<UOp>& reds) {
  const UOp& st = end.src(0);
  if (end.nsrc() < 2 || st.op() != Op::Store || st.src(0).op() != Op::Index ||
      st.src(1).dtype() != st.src(0).dtype())
    return std::nullopt;
  const UOp& row = end.src(end.nsrc() - 1);
  if (row.op() != Op::Range || row.src(0).op() != Op::Const) return std::nullopt;
  const i128 n = row.src(0).arg().as_int();
  if (n <= 1 || n > kRowLimit) return std::nullopt;
  reds = outer_reduces(st.src(1));
  if (reds.empty()) return std::nullopt;
  const Arg& target = st.src(0).src(0).arg().field("slot");  // a storage, whatever its dtype
  for (const UOp& red : reds) {
    for (size_t k = 1; k < red.nsrc(); ++k)
      if (red.src(k) == row || red.src(k).op() != Op::Range || red.src(k).src(0).op() != Op::Const)
        return std::nullopt;
    for (const UOp& u : toposort(red))
      if (u.op() == Op::Index && u.src(0).op() == Op::Buffer &&
          u.src(0).arg().field("slot") == target)
        return std::nullopt;
  }
  return static_cast<int64_t>(n);
}

// An open END on the effect walk: it, its row length (0: no row fast path), its row's REDUCEs.
struct OpenEnd {
  UOp end;
  int64_t row = 0;
  std::vector<UOp> reds{};
};
}  // namespace

RenderedKernel render_llvm_effects(const UOp& sink,
                                   const std::vector<std::pair<int64_t, int64_t>>& buffer_sizes) {
  RenderedKernel out;
  Emitter e(buffer_sizes);
  number_buffers(sink, out, e);
  // effects in order, each STORE computed afresh (a load after a store sees the stored value)
  std::vector<std::vector<Emitter::Loop>> open;
  std::vector<OpenEnd> rows;
  walk_effects(
      sink, {.store =
                 [&](const UOp& st) {
                   e.scopes_.emplace_back();
                   if (!rows.empty() && rows.back().row > 0 && rows.back().end.src(0) == st) {
                     const UOp& end = rows.back().end;
                     e.store_rows(st, end.src(end.nsrc() - 1), rows.back().row, rows.back().reds);
                   } else {
                     e.store(st.src(0), e.emit(st.src(1)));
                   }
                   e.scopes_.pop_back();
                 },
             .open =
                 [&](const UOp& end) {
                   open.emplace_back();
                   e.scopes_.emplace_back();
                   OpenEnd o{.end = end};
                   o.row = row_length(end, o.reds).value_or(0);
                   const int64_t n = o.row;
                   rows.push_back(std::move(o));
                   for (size_t k = 1; k < end.nsrc() - (n > 0 ? 1 : 0); ++k) {
                     const UOp& r = end.src(k);
                     // the bound is computed before the loop's head, which compares
                     // against it
                     open.back().push_back(e.open_loop(e.emit(r.src(0))));
                     e.scopes_.back().emplace(r.node(), open.back().back().idx);
                   }
                 },
             .close =
                 [&](const UOp&) {
                   for (auto it = open.back().rbegin(); it != open.back().rend(); ++it)
                     e.close_loop(*it);
                   open.pop_back();
                   rows.pop_back();
                   e.scopes_.pop_back();
                 }});
  return finish(out, e);
}

}  // namespace tinyrw
