#include "ir/call.h"

#include <algorithm>
#include <set>
#include <unordered_set>

#include <fmt/format.h>

#include "ir/graph.h"
#include "ir/rewrite.h"

namespace tinyrw {

Arg CallInfo::to_arg() const {
  return Arg::record("CallInfo", {{"name", Arg::string(name)},
                                  {"kernel", Arg::boolean(kernel)},
                                  {"precompile", Arg::boolean(precompile)},
                                  {"precompile_backward", Arg::boolean(precompile_backward)},
                                  {"grad_fn", Arg::integer(grad_fn)},
                                  {"id", Arg::integer(id)}});
}

CallInfo CallInfo::of(const UOp& call) {
  if (call.op() != Op::Call) throw GraphError(fmt::format("{} is not a CALL", op_name(call.op())));
  CallInfo info;
  const Arg& a = call.arg();
  if (!a.is_record()) {  // a bare CALL: an unnamed kernel call
    info.kernel = true;
    return info;
  }
  auto field = [&](std::string_view n) { return a.find_field(n); };
  if (const Arg* f = field("name")) info.name = f->as_string();
  if (const Arg* f = field("kernel")) info.kernel = f->as_bool();
  if (const Arg* f = field("precompile")) info.precompile = f->as_bool();
  if (const Arg* f = field("precompile_backward")) info.precompile_backward = f->as_bool();
  if (const Arg* f = field("grad_fn")) info.grad_fn = static_cast<int64_t>(f->as_int());
  if (const Arg* f = field("id")) info.id = static_cast<int64_t>(f->as_int());
  return info;
}

UOp storage_root(UOp u) {
  while (u.nsrc() > 0 && (groups::movement().contains(u.op()) || u.op() == Op::After)) u = u.src(0);
  return u;
}

UOp param_like(const UOp& like, size_t slot) {
  return UOp::make(Op::Param, like.dtype(), {shape_to_uop(like.shape())},
                   Arg::record("ParamArg", {{"slot", Arg::integer(static_cast<i128>(slot))},
                                            {"device", like.device()}}));
}

namespace {
size_t param_slot(const UOp& p) { return static_cast<size_t>(p.arg().field("slot").as_int()); }
}  // namespace

UOp bind_params(const UOp& body, std::span<const UOp> args) {
  LambdaMatcher m("bind_params");
  m.add({Op::Param}, [&args](RewriteContext&, const UOp& p) {
    const size_t slot = param_slot(p);
    if (slot >= args.size())
      throw GraphError(fmt::format("PARAM {} of a CALL with {} arguments", slot, args.size()));
    const UOp& a = args[slot];
    if (a.dtype() != p.dtype())
      throw GraphError(fmt::format("CALL argument {} is {}, its PARAM expects {}", slot,
                                   a.dtype().repr(), p.dtype().repr()));
    const std::optional<Shape> want = p.shape_opt(), got = a.shape_opt();
    if (want && got && *want != *got)
      throw GraphError(fmt::format("CALL argument {}: shape mismatch: expected {}{}, got {}", slot,
                                   want->empty() ? "scalar " : "", shape_repr(*want),
                                   shape_repr(*got)));
    return a;
  });
  return graph_rewrite(
      body, &m, {.bottom_up = true, .walk = true, .enter_calls = false, .name = "bind_params"});
}

UOp replace_outside_calls(const UOp& root, const std::unordered_map<UOp, UOp>& map) {
  LambdaMatcher m("replace");
  m.add({}, [&map](RewriteContext&, const UOp& x) {
    auto it = map.find(x);
    return it == map.end() ? UOp() : it->second;
  });
  return graph_rewrite(root, &m,
                       {.bottom_up = true, .walk = true, .enter_calls = false, .name = "replace"});
}

UOp inline_output(const UOp& call, size_t i) {
  const UOp& body = call.src(0);
  if (body.op() != Op::Sink || i >= body.nsrc())
    throw GraphError(fmt::format("output {} of a CALL whose body has {} outputs", i, body.nsrc()));
  const std::vector<UOp> args(call.src().begin() + 1, call.src().end());
  return bind_params(body.src(i), args);
}

// ---- gradient bundles
// ------------------------------------------------------------------------------

UOp call_grad_bundle(size_t outputs, size_t i, const UOp& g) {
  std::vector<UOp> src(outputs, UOp::make(Op::Noop));
  src.at(i) = g;
  return UOp::make(Op::Sink, dtypes::void_, src, Arg::string("call gradients"));
}

bool is_call_grad_bundle(const UOp& u) {
  return u.op() == Op::Sink && u.arg().is_string() && u.arg().as_string() == "call gradients";
}

UOp add_call_grad_bundles(const UOp& a, const UOp& b) {
  std::vector<UOp> src(a.src().begin(), a.src().end());
  for (size_t i = 0; i < src.size() && i < b.nsrc(); ++i) {
    if (b.src(i).op() == Op::Noop) continue;
    src[i] = src[i].op() == Op::Noop ? b.src(i) : src[i] + b.src(i);
  }
  return a.with_src(src);
}

size_t call_outputs(const UOp& call) {
  return CallInfo::of(call).kernel || call.src(0).op() != Op::Sink ? call.nsrc() - 1
                                                                   : call.src(0).nsrc();
}

// ---- access analysis
// ------------------------------------------------------------------------------

namespace {

[[noreturn]] void opaque(const UOp& call, const std::string& why) {
  throw GraphError(
      fmt::format("cannot compute accesses of CALL '{}': {}", CallInfo::of(call).name, why));
}

// The PARAM a memory operand addresses (through INDEX, LOAD and movement views), if any.
std::optional<UOp> base_param(UOp u) {
  for (;;) {
    if (u.op() == Op::Param) return u;
    if (u.nsrc() == 0) return std::nullopt;
    if (u.op() == Op::Index || u.op() == Op::Load || groups::movement().contains(u.op()) ||
        u.op() == Op::After)
      u = u.src(0);
    else
      return std::nullopt;
  }
}

std::vector<size_t> checked_slots(const UOp& call, const Arg& slots, size_t nargs) {
  std::vector<size_t> out;
  for (const Arg& s : slots.items()) {
    const i128 v = s.as_int();
    if (v < 0 || v >= static_cast<i128>(nargs))
      throw GraphError(fmt::format("invalid CALL access slot {} for CALL '{}' with {} arguments",
                                   static_cast<int64_t>(v), CallInfo::of(call).name, nargs));
    out.push_back(static_cast<size_t>(v));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// Reads and writes of `body` as slots of its own parameters.
struct SlotSets {
  std::set<size_t> reads, writes;
};

SlotSets body_access(const UOp& call, const UOp& body, size_t nargs);

SlotSets graph_access(const UOp& call, const UOp& body, size_t nargs) {
  SlotSets out;
  const std::vector<UOp> nodes = toposort(body, nullptr, /*enter_calls=*/false);
  for (const UOp& u : nodes) {
    if (u.op() == Op::Custom || u.op() == Op::CustomI || u.op() == Op::CustomFunction)
      opaque(call, fmt::format("its body contains opaque code ({})", op_name(u.op())));
    if (u.op() == Op::Program) opaque(call, "its body contains a PROGRAM");
    if (u.op() == Op::Store) {
      const std::optional<UOp> p = base_param(u.src(0));
      if (!p) opaque(call, "a STORE whose destination is not a parameter");
      out.writes.insert(param_slot(*p));
    }
    if (u.op() == Op::Call) {  // a nested call: its accesses through its arguments
      const CallAccess inner = call_access(u);
      auto map = [&](const std::vector<size_t>& slots, std::set<size_t>& into) {
        for (size_t s : slots)
          if (auto p = base_param(u.src(s + 1))) into.insert(param_slot(*p));
      };
      map(inner.reads, out.reads);
      map(inner.writes, out.writes);
    }
  }
  // every other use of an address reads it: as a value, through a LOAD, or a store into it read
  // back (C[i] = C[i] + x); an address used to build a longer address (INDEX of a view) is
  // decided by that one's users
  auto is_address = [](const UOp& u) {
    return (u.op() == Op::Param || u.op() == Op::Index || groups::movement().contains(u.op())) &&
           base_param(u).has_value();
  };
  for (const UOp& u : nodes) {
    // a nested call's arguments were mapped above; a SINK or GROUP only collects effects
    if (u.op() == Op::Call || u.op() == Op::Sink || u.op() == Op::Group) continue;
    for (size_t k = 0; k < u.nsrc(); ++k) {
      const UOp& s = u.src(k);
      if (!is_address(s)) continue;
      if (k == 0 && (u.op() == Op::Store || is_address(u))) continue;
      out.reads.insert(param_slot(*base_param(s)));
    }
  }
  (void)nargs;  // slots are checked against the argument count by call_access
  return out;
}

SlotSets body_access(const UOp& call, const UOp& body, size_t nargs) {
  switch (body.op()) {
    case Op::Sink:
    case Op::Linear:
      return graph_access(call, body, nargs);
    case Op::Copy: {  // a copy of its source's parameters into argument 0
      SlotSets out;
      out.writes = {0};
      for (const UOp& u : toposort(body.src(0), nullptr, false))
        if (u.op() == Op::Param) out.reads.insert(param_slot(u));
      return out;
    }
    case Op::Program: {
      const Arg& info = body.arg();
      const Arg* ins = info.is_record() ? info.find_field("ins") : nullptr;
      const Arg* outs = info.is_record() ? info.find_field("outs") : nullptr;
      if (!ins || !outs) opaque(call, "a PROGRAM without recorded ins/outs");
      SlotSets out;
      for (size_t s : checked_slots(call, *ins, nargs)) out.reads.insert(s);
      for (size_t s : checked_slots(call, *outs, nargs)) out.writes.insert(s);
      return out;
    }
    default:
      opaque(call, fmt::format("a {} body", op_name(body.op())));
  }
}

}  // namespace

CallAccess call_access(const UOp& call) {
  const size_t nargs = call.nsrc() - 1;
  const SlotSets s = body_access(call, call.src(0), nargs);
  CallAccess out;
  auto checked = [&](const std::set<size_t>& slots, std::vector<size_t>& into) {
    for (size_t slot : slots) {
      if (slot >= nargs)
        throw GraphError(fmt::format("invalid CALL access slot {} for CALL '{}' with {} arguments",
                                     slot, CallInfo::of(call).name, nargs));
      into.push_back(slot);
    }
  };
  checked(s.reads, out.reads);
  checked(s.writes, out.writes);
  // compiled code cannot tell two arguments apart: one buffer passed writable twice, or writable
  // and readable, would have its accesses merged unpredictably
  if (call.src(0).op() == Op::Program)
    for (size_t w : out.writes)
      for (size_t k = 0; k < nargs; ++k)
        if (k != w && call.src(k + 1) == call.src(w + 1))
          throw GraphError(fmt::format(
              "aliased opaque CALL '{}': argument {} is written and also passed as argument {}",
              CallInfo::of(call).name, w, k));
  return out;
}

Arg program_info_from_sink(const UOp& sink, size_t nargs) {
  const UOp probe = UOp::make(Op::Call, dtypes::void_, {sink});  // names the sink in errors
  const SlotSets s = graph_access(probe, sink, nargs);
  std::vector<Arg> ins, outs;
  for (size_t r : s.reads) ins.push_back(Arg::integer(static_cast<i128>(r)));
  for (size_t w : s.writes) outs.push_back(Arg::integer(static_cast<i128>(w)));
  return Arg::record("ProgramInfo",
                     {{"ins", Arg::tuple(std::move(ins))}, {"outs", Arg::tuple(std::move(outs))}});
}

}  // namespace tinyrw
