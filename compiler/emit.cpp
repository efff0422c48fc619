#include "compiler/emit.h"

#include <bit>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include <fmt/format.h>

namespace tinyrw::rw {

namespace {

// ---- literals as C++
// ----------------------------------------------------------------------------------

std::string cpp_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      out += fmt::format("\\x{:02x}\"\"", c);  // split the literal so hex escapes end here
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string cpp_i128(i128 v) {
  if (v >= INT64_MIN && v <= INT64_MAX)
    return fmt::format("static_cast<i128>({}LL)", static_cast<long long>(v));
  const u128 u = static_cast<u128>(v);
  return fmt::format("static_cast<i128>((static_cast<u128>({}ULL) << 64) | {}ULL)",
                     static_cast<unsigned long long>(u >> 64), static_cast<unsigned long long>(u));
}

std::string cpp_double(double d) {
  if (std::isnan(d)) return "std::numeric_limits<double>::quiet_NaN()";
  if (std::isinf(d))
    return d > 0 ? "std::numeric_limits<double>::infinity()"
                 : "-std::numeric_limits<double>::infinity()";
  return fmt::format("std::bit_cast<double>({:#x}ULL) /* {} */", std::bit_cast<uint64_t>(d),
                     Arg::real(d).repr());
}

std::string cpp_dtype(DType d) {
  return fmt::format("*DType::from_name({})", cpp_string(std::string(d.scalar_type().name())));
}

// The enumerator of a static type (a declared helper's result, checked by the generated call).
std::string_view type_enum(Type t) {
  static constexpr std::string_view kNames[] = {"Any", "None",  "Bool", "Int",   "Float", "String",
                                                "UOp", "DType", "Op",   "Tuple", "Status"};
  return kNames[static_cast<size_t>(t)];
}

std::string cpp_arg(const Arg& a) {
  switch (a.kind()) {
    case Arg::Kind::None:
      return "Arg()";
    case Arg::Kind::Invalid:
      return "Arg::invalid()";
    case Arg::Kind::Int:
      return fmt::format("Arg::integer({})", cpp_i128(a.as_int()));
    case Arg::Kind::Float:
      return fmt::format("Arg::real({})", cpp_double(a.as_float()));
    case Arg::Kind::Bool:
      return a.as_bool() ? "Arg::boolean(true)" : "Arg::boolean(false)";
    case Arg::Kind::String:
      return fmt::format("Arg::string({})", cpp_string(a.as_string()));
    case Arg::Kind::Op:
      return fmt::format("Arg::op(Op::{})", op_name(a.as_op()));
    case Arg::Kind::DType:
      return fmt::format("Arg::dtype({})", cpp_dtype(a.as_dtype()));
    case Arg::Kind::Tuple: {
      std::string out = "Arg::tuple({";
      for (size_t i = 0; i < a.items().size(); ++i) out += (i ? ", " : "") + cpp_arg(a.items()[i]);
      return out + "})";
    }
    case Arg::Kind::Record:
      return "Arg()";
  }
  return "Arg()";
}

std::string cpp_value(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::None:
      return "Value()";
    case Value::Kind::Bool:
      return v.as_bool() ? "Value::boolean(true)" : "Value::boolean(false)";
    case Value::Kind::Int:
      return fmt::format("Value::integer({})", cpp_i128(v.as_int()));
    case Value::Kind::Float:
      return fmt::format("Value::real({})", cpp_double(v.as_float()));
    case Value::Kind::String:
      return fmt::format("Value::string({})", cpp_string(v.as_string()));
    case Value::Kind::DType:
      return fmt::format("Value::dtype({})", cpp_dtype(v.as_dtype()));
    case Value::Kind::Op:
      return fmt::format("Value::op(Op::{})", op_name(v.as_op()));
    case Value::Kind::Status:
      return v.status_ok() ? "Value::ok()"
                           : fmt::format("Value::fail({})", cpp_string(v.as_string()));
    case Value::Kind::Tuple: {
      std::string out = "Value::tuple({";
      for (size_t i = 0; i < v.items().size(); ++i)
        out += (i ? ", " : "") + cpp_value(v.items()[i]);
      return out + "})";
    }
    case Value::Kind::UOp:
    case Value::Kind::Record:  // never a literal
      return "Value()";
  }
  return "Value()";
}

std::string ident(const std::string& s) {
  std::string out;
  for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

// ---- checks of one pattern variant, cheapest first
// ------------------------------------------------------

std::string op_test(const OpSet& ops, const std::string& p) {
  std::vector<std::string> parts;
  ops.for_each([&](Op o) { parts.push_back(fmt::format("op({}) == Op::{}", p, op_name(o))); });
  if (parts.size() == 1) return parts[0];
  std::string out = "(";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? " || " : "") + parts[i];
  return out + ")";
}

std::string dtype_test(const DTypeFilter& f, const std::string& p) {
  using K = DTypeFilter::Kind;
  switch (f.kind) {
    case K::Any:
      return "";
    case K::Exact:
      return fmt::format("dtype({}) == {}", p, cpp_dtype(f.exact));
    case K::Int:
      return fmt::format("dtype({}).is_int()", p);
    case K::UInt:
      return fmt::format("dtype({}).is_unsigned()", p);
    case K::SInt:
      return fmt::format(
          "(dtype({0}).is_int() && !dtype({0}).is_unsigned() && !dtype({0}).is_index())", p);
    case K::Float:
      return fmt::format("dtype({}).is_float()", p);
    case K::Bool:
      return fmt::format("dtype({}).is_bool()", p);
    case K::Index:
      return fmt::format("dtype({}).is_index()", p);
    case K::Void:
      return fmt::format("dtype({}).is_void()", p);
    case K::Ptr:
      return fmt::format("dtype({}).is_ptr()", p);
  }
  return "";
}

class Emitter;

// The C++ function a `def` becomes.
std::string def_function(const ResolvedDef& d) { return "def_" + ident(d.name); }
// The C++ function that returns a declared helper's registration.
std::string helper_function(const std::string& name) { return "helper_" + ident(name); }

struct ArgLiteralTable {
  std::vector<std::string> defs;  // file-scope constants
  std::map<std::string, std::string> by_code;
  std::string get(const Arg& a) {
    const std::string code = cpp_arg(a);
    if (auto it = by_code.find(code); it != by_code.end()) return it->second;
    const std::string name = fmt::format("kArg{}", defs.size());
    defs.push_back(fmt::format("const Arg {} = {};", name, code));
    by_code.emplace(code, name);
    return name;
  }
};

// Checks of an arg pattern at `a` (an Arg expression); binds go to `binds`.
void arg_checks(const ArgMatch& m, const std::string& a, ArgLiteralTable& lits,
                std::vector<std::string>& out, std::vector<std::pair<int, std::string>>& binds) {
  switch (m.kind) {
    case ArgMatch::Kind::Any:
      return;
    case ArgMatch::Kind::Literal:
      out.push_back(fmt::format("arg_equals({}, {})", a, lits.get(m.literal)));
      return;
    case ArgMatch::Kind::Bind:
      binds.emplace_back(m.slot, a);
      return;
    case ArgMatch::Kind::Tuple:
      out.push_back(fmt::format("{0}.is_tuple() && {0}.items().size() == {1}", a, m.items.size()));
      for (size_t i = 0; i < m.items.size(); ++i)
        arg_checks(m.items[i], fmt::format("{}.items()[{}]", a, i), lits, out, binds);
      return;
  }
}

// A full boolean condition for a sub-pattern rooted at `v` (used inside repeated sources).
std::string condition(const MatchNode& m, const std::string& v, int depth, ArgLiteralTable& lits) {
  std::vector<std::string> parts;
  if (!m.any_op) parts.push_back(op_test(m.ops, v));
  if (m.sources == MatchNode::Sources::Exact)
    parts.push_back(fmt::format("nsrc({}) == {}", v, m.srcs.size()));
  if (m.sources == MatchNode::Sources::Prefix)
    parts.push_back(fmt::format("nsrc({}) >= {}", v, m.srcs.size()));
  if (auto d = dtype_test(m.dtype, v); !d.empty()) parts.push_back(d);
  std::vector<std::pair<int, std::string>> unused;
  arg_checks(m.arg, fmt::format("arg({})", v), lits, parts, unused);
  if (m.sources == MatchNode::Sources::Repeat) {
    const std::string c = fmt::format("c{}", depth);
    parts.push_back(fmt::format("all_src({}, [&](const UOp& {}) {{ return {}; }})", v, c,
                                condition(m.srcs[0], c, depth + 1, lits)));
  } else {
    for (size_t i = 0; i < m.srcs.size(); ++i)
      parts.push_back(condition(m.srcs[i], fmt::format("src({}, {})", v, i), depth, lits));
  }
  if (parts.empty()) return "true";
  std::string out = "(";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? " && " : "") + parts[i];
  return out + ")";
}

struct VariantChecks {
  std::vector<std::string> checks;                     // in evaluation order
  std::map<int, std::string> uop_slots;                // slot -> path of its node
  std::vector<std::pair<int, std::string>> arg_binds;  // slot -> Arg expression
};

VariantChecks variant_checks(const MatchNode& root, ArgLiteralTable& lits) {
  VariantChecks vc;
  std::vector<std::string> structural, later, identity;
  std::vector<std::pair<const MatchNode*, std::string>> queue{{&root, "n"}};
  std::map<int, std::vector<std::string>> occurrences;
  for (size_t qi = 0; qi < queue.size(); ++qi) {
    const MatchNode& m = *queue[qi].first;
    const std::string p = queue[qi].second;
    if (qi > 0 && !m.any_op) structural.push_back(op_test(m.ops, p));
    if (m.sources == MatchNode::Sources::Exact)
      structural.push_back(fmt::format("nsrc({}) == {}", p, m.srcs.size()));
    if (m.sources == MatchNode::Sources::Prefix)
      structural.push_back(fmt::format("nsrc({}) >= {}", p, m.srcs.size()));
    if (auto d = dtype_test(m.dtype, p); !d.empty()) later.push_back(d);
    arg_checks(m.arg, fmt::format("arg({})", p), lits, later, vc.arg_binds);
    for (int s : m.slots) occurrences[s].push_back(p);
    if (m.sources == MatchNode::Sources::Repeat) {
      const MatchNode& body = m.srcs[0];
      structural.push_back(fmt::format("all_src({}, [&](const UOp& c0) {{ return {}; }})", p,
                                       condition(body, "c0", 1, lits)));
      if (!body.slots.empty()) {
        structural.push_back(fmt::format("nsrc({}) > 0 && all_sources_same({})", p, p));
        for (int s : body.slots) occurrences[s].push_back(fmt::format("src({}, 0)", p));
      }
    } else {
      for (size_t i = 0; i < m.srcs.size(); ++i)
        queue.emplace_back(&m.srcs[i], fmt::format("src({}, {})", p, i));
    }
  }
  for (const auto& [slot, paths] : occurrences) {
    vc.uop_slots[slot] = paths[0];
    for (size_t i = 1; i < paths.size(); ++i)
      identity.push_back(fmt::format("{} == {}", paths[0], paths[i]));
  }
  vc.checks = std::move(structural);
  vc.checks.insert(vc.checks.end(), later.begin(), later.end());
  vc.checks.insert(vc.checks.end(), identity.begin(), identity.end());
  return vc;
}

// ---- expressions
// ------------------------------------------------------------------------------------

enum class CodeKind { UOp, Value, Bool, Num, Op };
struct Code {
  std::string text;
  CodeKind kind;
};

// A def's C++ signature: each parameter and the result unboxed where every call passes, and the
// body gives, one kind of value (infer_def_sigs); Value where they differ.
struct DefSig {
  std::vector<CodeKind> params;
  CodeKind result = CodeKind::Value;
  bool operator==(const DefSig&) const = default;
};
using DefSigs = std::map<const ResolvedDef*, DefSig>;
// The kinds of the arguments seen at the calls of each def, per parameter (inference only).
using CallKinds = std::map<const ResolvedDef*, std::vector<std::optional<CodeKind>>>;

class ExprEmitter {
 public:
  // slot_kinds: the slots held unboxed (a UOp `x_name`, else a bool, Num or Op `v_name`); the
  // other slots are Values `v_name`. seen, when given, collects the kinds passed to each def.
  ExprEmitter(const std::vector<std::string>& slot_names, const std::map<int, CodeKind>& slot_kinds,
              const DefSigs& sigs, CallKinds* seen = nullptr)
      : slot_names_(slot_names), slot_kinds_(slot_kinds), sigs_(sigs), seen_(seen) {}

  Code emit(const RExpr& e) {
    switch (e.k) {
      case RExpr::K::Const:
        return {cpp_value(e.value), CodeKind::Value};
      case RExpr::K::Slot: {
        auto it = slot_kinds_.find(e.slot);
        return {slot_var(e.slot), it == slot_kinds_.end() ? CodeKind::Value : it->second};
      }
      case RExpr::K::Binary:
        return binary_code(e);
      case RExpr::K::And:
      case RExpr::K::Or: {
        const std::string op = e.k == RExpr::K::And ? " && " : " || ";
        return {"(" + as_bool(emit(e.kids[0])) + op + as_bool(emit(e.kids[1])) + ")",
                CodeKind::Bool};
      }
      case RExpr::K::Not:
        return {"!" + as_bool(emit(e.kids[0])), CodeKind::Bool};
      case RExpr::K::Neg: {
        Code k = emit(e.kids[0]);
        if (k.kind == CodeKind::UOp) return {"(-" + k.text + ")", CodeKind::UOp};
        return {fmt::format("negate({})", as_value(k)), CodeKind::Value};
      }
      case RExpr::K::Invert:
        return {fmt::format("invert({})", as_value(emit(e.kids[0]))), CodeKind::Value};
      case RExpr::K::Member: {
        if (!e.kids[0].record.empty()) return record_field_code(e);
        if (auto fast = dtype_property(e)) return *fast;
        Code recv = emit(e.kids[0]);
        if (recv.kind == CodeKind::UOp && (e.name == "vmin" || e.name == "vmax")) {
          return {fmt::format("{}.{}()", recv.text, e.name), CodeKind::Num};
        }
        if (recv.kind == CodeKind::UOp && e.name == "op")
          return {fmt::format("op({})", recv.text), CodeKind::Op};
        if (auto p = uop_prop_from_name(e.name); p && recv.kind == CodeKind::UOp)  // no boxing
          return {fmt::format("uop_member({}, UOpProp::{})", recv.text, prop_enum(*p)),
                  CodeKind::Value};
        if (auto p = uop_prop_from_name(e.name)) {  // a value that may be a UOp: no name lookup
          const std::string v = as_value(recv);
          if (*p == UOpProp::Op) return {fmt::format("op_of({})", v), CodeKind::Op};
          if (*p == UOpProp::VMin || *p == UOpProp::VMax)
            return {fmt::format("num_member({}, UOpProp::{})", v, prop_enum(*p)), CodeKind::Num};
          return {fmt::format("member({}, UOpProp::{})", v, prop_enum(*p)), CodeKind::Value};
        }
        return {fmt::format("member({}, {})", as_value(recv), cpp_string(e.name)), CodeKind::Value};
      }
      case RExpr::K::Method: {
        if (auto fast = uop_method(e)) return *fast;
        std::vector<std::string> args;
        for (size_t i = 1; i < e.kids.size(); ++i) args.push_back(as_value(emit(e.kids[i])));
        if (auto a = analysis_from_name(e.name)) {  // by number: no name lookup per call
          return {fmt::format("analysis({}, Analysis::{}, {})", as_value(emit(e.kids[0])),
                              analysis_enum(*a), value_array(args)),
                  CodeKind::Value};
        }
        return {fmt::format("method({}, {}, {}, {})", as_value(emit(e.kids[0])), cpp_string(e.name),
                            value_array(args), names_array(e.arg_names, 1)),
                CodeKind::Value};
      }
      case RExpr::K::Index: {
        const RExpr& seq = e.kids[0];
        if (seq.k == RExpr::K::Member && uop_prop_from_name(seq.name) == UOpProp::Src) {
          // x.src[i]: the source itself, without the tuple of all sources
          Code recv = emit(seq.kids[0]);
          const RExpr& i = e.kids[1];
          const std::string idx = i.k == RExpr::K::Const && i.value.kind() == Value::Kind::Int
                                      ? cpp_i128(i.value.as_int())
                                      : as_value(emit(i));
          return {fmt::format("src_item({}, {})",
                              recv.kind == CodeKind::UOp ? recv.text : as_value(recv), idx),
                  CodeKind::UOp};
        }
        return {fmt::format("index({}, {})", as_value(emit(e.kids[0])), as_value(emit(e.kids[1]))),
                CodeKind::Value};
      }
      case RExpr::K::Builtin: {
        if (e.name == "const_like" && e.kids.size() == 2 && e.kids[1].k == RExpr::K::Const &&
            e.kids[1].value.kind() == Value::Kind::Int) {
          Code x = emit(e.kids[0]);
          if (x.kind == CodeKind::UOp) {
            return {fmt::format("{}.const_like({})", x.text, cpp_i128(e.kids[1].value.as_int())),
                    CodeKind::UOp};
          }
        }
        if (e.name == "const_like" && e.kids.size() == 2) {
          Code x = emit(e.kids[0]), v = emit(e.kids[1]);
          if (x.kind == CodeKind::UOp && v.kind == CodeKind::Num) {
            return {fmt::format("{}.const_like(Value::from_num({}).to_arg())", x.text, v.text),
                    CodeKind::UOp};
          }
        }
        const std::optional<Builtin> b = builtin_from_name(e.name);  // the checker knows it
        const bool positional = std::all_of(e.arg_names.begin(), e.arg_names.end(),
                                            [](const std::string& n) { return n.empty(); });
        if (b == Builtin::Select && e.kids.size() == 3 && positional) {
          return {fmt::format("select_of({{{}, {}, {}}})", as_value(emit(e.kids[0])),
                              as_value(emit(e.kids[1])), as_value(emit(e.kids[2]))),
                  CodeKind::Value};
        }
        if (b == Builtin::Len && e.kids.size() == 1 && positional) {  // a number, as len() gives
          return {fmt::format("Num::of(static_cast<i128>({}.items().size()))",
                              as_value(emit(e.kids[0]))),
                  CodeKind::Num};
        }
        if (const std::optional<GeneratorUse> use = generator_use(e))
          return comprehension_code(e.kids[0], use);
        std::vector<std::string> args;
        for (const RExpr& k : e.kids) args.push_back(as_value(emit(k)));
        if (is_context_builtin(e.name)) {  // rewritten(u): the running rule set, from ctx
          return {fmt::format("call_context_builtin(ctx, {}, {})", cpp_string(e.name),
                              value_array(args)),
                  CodeKind::Value};
        }
        return {fmt::format("call_builtin({}, {}, {})",
                            b ? fmt::format("Builtin::{}", builtin_enum(*b)) : cpp_string(e.name),
                            value_array(args), names_array(e.arg_names, 0)),
                CodeKind::Value};
      }
      case RExpr::K::Construct: {
        std::vector<Code> kids;
        for (const RExpr& k : e.kids) kids.push_back(emit(k));
        if (!kids.empty() && std::all_of(kids.begin(), kids.end(),
                                         [](const Code& c) { return c.kind == CodeKind::UOp; })) {
          // All sources are UOps: construct() reduces to alu on the first (no constants made).
          std::string rest;
          for (size_t i = 1; i < kids.size(); ++i) rest += (i > 1 ? ", " : "") + kids[i].text;
          return {fmt::format("{}.alu(Op::{}, {{{}}})", kids[0].text, op_name(e.op), rest),
                  CodeKind::UOp};
        }
        std::vector<std::string> args;
        for (const Code& k : kids) args.push_back(as_value(k));
        return {fmt::format("construct(Op::{}, {})", op_name(e.op), value_array(args)),
                CodeKind::Value};
      }
      case RExpr::K::Helper: {
        std::vector<std::string> args;
        for (const RExpr& k : e.kids) args.push_back(as_value(emit(k)));
        // the registered helper, looked up and checked against the declaration once (emit_helpers)
        return {fmt::format("{}().fn(ctx, {})", helper_function(e.name), value_array(args)),
                CodeKind::Value};
      }
      case RExpr::K::Tuple: {
        std::vector<std::string> args;
        for (const RExpr& k : e.kids) args.push_back(as_value(emit(k)));
        std::string out = "Value::tuple({";
        for (size_t i = 0; i < args.size(); ++i) out += (i ? ", " : "") + args[i];
        return {out + "})", CodeKind::Value};
      }
      case RExpr::K::Slice:
        return {fmt::format("slice({}, {}, {}, {})", as_value(emit(e.kids[0])),
                            as_value(emit(e.kids[1])), as_value(emit(e.kids[2])),
                            as_value(emit(e.kids[3]))),
                CodeKind::Value};
      case RExpr::K::Comp:
        return comprehension_code(e);
      case RExpr::K::DefCall:
        return def_call_code(e);
      case RExpr::K::Cond: {  // a C++ conditional: only the chosen branch runs
        Code a = emit(e.kids[0]), c = emit(e.kids[1]), b = emit(e.kids[2]);
        if (a.kind == b.kind)
          return {fmt::format("({} ? {} : {})", as_bool(c), a.text, b.text), a.kind};
        return {fmt::format("({} ? {} : {})", as_bool(c), as_value(a), as_value(b)),
                CodeKind::Value};
      }
    }
    return {"Value()", CodeKind::Value};
  }

  // recv.field of a record type the checker knows: read straight from the node's arg for
  // `x.arg.field` (no record value is built), checked against the type at run time.
  Code record_field_code(const RExpr& e) {
    const RExpr& recv = e.kids[0];
    if (recv.k == RExpr::K::Member && recv.name == "arg") {
      Code node = emit(recv.kids[0]);
      if (node.kind == CodeKind::UOp) {
        return {fmt::format("record_field(arg({}), {}, {})", node.text, cpp_string(e.name),
                            cpp_string(recv.record)),
                CodeKind::Value};
      }
    }
    return {fmt::format("record_field({}, {}, {})", as_value(emit(recv)), cpp_string(e.name),
                        cpp_string(recv.record)),
            CodeKind::Value};
  }

  // A call passes each argument as its parameter's kind; the inference made every call of a
  // def agree with its signature, so a mismatch here is rwc's own error.
  Code def_call_code(const RExpr& e) {
    auto sig = sigs_.find(e.def);
    std::vector<Code> args;
    for (const RExpr& k : e.kids) args.push_back(emit(k));
    if (seen_) {
      auto& kinds = (*seen_)[e.def];
      kinds.resize(args.size());
      for (size_t i = 0; i < args.size(); ++i)
        kinds[i] = !kinds[i] || *kinds[i] == args[i].kind ? args[i].kind : CodeKind::Value;
    }
    std::string text = "ctx";
    for (size_t i = 0; i < args.size(); ++i) {
      const CodeKind want = sig == sigs_.end() ? CodeKind::Value : sig->second.params[i];
      if (want == CodeKind::Value) {
        text += ", " + as_value(args[i]);
      } else if (args[i].kind == want || seen_) {  // while inferring, the text is not kept
        text += ", " + args[i].text;
      } else {
        throw std::logic_error(fmt::format(
            "rwc: a call of def {} passes argument {} unlike its signature", e.def->name, i + 1));
      }
    }
    return {fmt::format("{}({})", def_function(*e.def), text),
            sig == sigs_.end() ? CodeKind::Value : sig->second.result};
  }

  std::string slot_var(int slot) const {
    auto it = slot_kinds_.find(slot);
    return fmt::format("{}_{}", it != slot_kinds_.end() && it->second == CodeKind::UOp ? "x" : "v",
                       ident(slot_names_[static_cast<size_t>(slot)]));
  }
  static std::string as_value(const Code& c) {
    switch (c.kind) {
      case CodeKind::UOp:
        return fmt::format("Value::uop({})", c.text);
      case CodeKind::Bool:
        return fmt::format("Value::boolean({})", c.text);
      case CodeKind::Num:
        return fmt::format("Value::from_num({})", c.text);
      case CodeKind::Op:
        return fmt::format("Value::op({})", c.text);
      case CodeKind::Value:
        return c.text;
    }
    return c.text;
  }
  static std::string as_bool(const Code& c) {
    if (c.kind == CodeKind::Bool) return c.text;
    return fmt::format("{}.as_bool()", as_value(c));
  }

 private:
  static std::string value_array(const std::vector<std::string>& args) {
    if (args.empty()) return "std::span<const Value>()";
    std::string out = fmt::format("std::array<Value, {}>{{", args.size());
    for (size_t i = 0; i < args.size(); ++i) out += (i ? ", " : "") + args[i];
    return out + "}";
  }
  static std::string names_array(const std::vector<std::string>& names, size_t from) {
    bool any = false;
    for (size_t i = from; i < names.size(); ++i) any |= !names[i].empty();
    if (!any) return "std::span<const std::string>()";
    std::string out = fmt::format("std::array<std::string, {}>{{", names.size() - from);
    for (size_t i = from; i < names.size(); ++i)
      out += (i > from ? ", " : "") + cpp_string(names[i]);
    return out + "}";
  }

  static std::string_view builtin_enum(Builtin b) {
    static constexpr std::string_view kNames[] = {
        "ConstLike", "Max",  "Min", "Abs",     "Len",       "Int",   "Float",
        "Select",    "Fail", "Uop", "Zip",     "Enumerate", "Range", "Sum",
        "Prod",      "All",  "Any", "Argsort", "Tuple",     "Fold",  "TypeOf"};
    static_assert(std::size(kNames) == static_cast<size_t>(Builtin::TypeOf) + 1);  // every one
    return kNames[static_cast<size_t>(b)];
  }

  static std::string_view prop_enum(UOpProp p) {
    static constexpr std::string_view kNames[] = {
        "Op",  "DType",   "Arg",    "Tag",     "NSrc",     "VMin",   "VMax", "Shape",
        "Src", "IsConst", "Finite", "MayWrap", "MayRaise", "Ranges", "Base", "Device"};
    static_assert(std::size(kNames) == static_cast<size_t>(UOpProp::Device) + 1);  // every one
    return kNames[static_cast<size_t>(p)];
  }

  // `x.dtype.is_int` (and the other flags) and `x.dtype.count` on a UOp: called on the DType,
  // as the value library's dtype properties do, without a value or a name lookup.
  std::optional<Code> dtype_property(const RExpr& e) {
    static const std::set<std::string_view> kFlags = {"is_int",  "is_float", "is_unsigned",
                                                      "is_bool", "is_index", "is_ptr"};
    const RExpr& r = e.kids[0];
    if (r.k != RExpr::K::Member || uop_prop_from_name(r.name) != UOpProp::DType)
      return std::nullopt;
    if (!kFlags.count(e.name) && e.name != "count") return std::nullopt;
    Code u = emit(r.kids[0]);
    if (u.kind != CodeKind::UOp) return std::nullopt;
    if (e.name == "count")
      return Code{fmt::format("Value::integer(dtype({}).count())", u.text), CodeKind::Value};
    return Code{fmt::format("dtype({}).{}()", u.text, e.name), CodeKind::Bool};
  }

  // A method of a UOp on UOp arguments that the value library maps straight to the UOp method of
  // that name (`x.lt(y)`, `c.where(a, b)`): called directly, with nothing boxed.
  std::optional<Code> uop_method(const RExpr& e) {
    static const std::set<std::string_view> kDirect = {
        "lt",      "le",       "gt",       "ge",   "ne",   "eq",    "maximum",
        "minimum", "floordiv", "floormod", "cdiv", "cmod", "where", "logical_not"};
    if (!kDirect.count(e.name)) return std::nullopt;
    for (const std::string& n : e.arg_names)
      if (!n.empty()) return std::nullopt;
    const size_t want = e.name == "where" ? 2 : e.name == "logical_not" ? 0 : 1;
    if (e.kids.size() != want + 1) return std::nullopt;
    std::vector<Code> kids;
    for (const RExpr& k : e.kids) {
      kids.push_back(emit(k));
      if (kids.back().kind != CodeKind::UOp) return std::nullopt;
    }
    std::string args;
    for (size_t i = 1; i < kids.size(); ++i) args += (i > 1 ? ", " : "") + kids[i].text;
    return Code{fmt::format("{}.{}({})", kids[0].text, e.name, args), CodeKind::UOp};
  }

  // A UOp operand for a typed fast path: a UOp, or a numeric literal turned into a constant of
  // the other operand's dtype (exactly what the value library does).
  std::optional<std::string> uop_operand(const RExpr& e, const Code& c, const std::string& like) {
    if (c.kind == CodeKind::UOp) return c.text;
    if (e.k == RExpr::K::Const &&
        (e.value.kind() == Value::Kind::Int || e.value.kind() == Value::Kind::Bool)) {
      return fmt::format("{}.const_like({})", like, cpp_i128(e.value.as_int()));
    }
    return std::nullopt;
  }

  static bool is_none_const(const RExpr& e) {
    return e.k == RExpr::K::Const && e.value.kind() == Value::Kind::None;
  }

  Code binary_code(const RExpr& e) {
    const BinOp op = e.bop;
    if ((op == BinOp::Eq || op == BinOp::Ne) && is_none_const(e.kids[1])) {  // x == none
      return {
          fmt::format("({}{}.is_none())", op == BinOp::Eq ? "" : "!", as_value(emit(e.kids[0]))),
          CodeKind::Bool};
    }
    if ((op == BinOp::In || op == BinOp::NotIn) && e.kids[1].k == RExpr::K::Tuple &&
        !e.kids[1].kids.empty() &&
        std::all_of(e.kids[1].kids.begin(), e.kids[1].kids.end(), [](const RExpr& k) {
          return k.k == RExpr::K::Const && k.value.kind() == Value::Kind::Op;
        })) {
      // `x.op in (A, B)`: compared op by op, no tuple built
      Code x = emit(e.kids[0]);
      if (x.kind == CodeKind::Op) {
        std::string any;
        for (size_t i = 0; i < e.kids[1].kids.size(); ++i)
          any += fmt::format("{}o == Op::{}", i ? " || " : "",
                             op_name(e.kids[1].kids[i].value.as_op()));
        return {
            fmt::format("{}[](Op o) {{ return {}; }}({})", op == BinOp::In ? "" : "!", any, x.text),
            CodeKind::Bool};
      }
    }
    Code a = emit(e.kids[0]), b = emit(e.kids[1]);
    if ((op == BinOp::Eq || op == BinOp::Ne) && a.kind == CodeKind::UOp &&
        b.kind == CodeKind::UOp) {
      return {fmt::format("({} {} {})", a.text, op == BinOp::Eq ? "==" : "!=", b.text),
              CodeKind::Bool};
    }
    if ((op == BinOp::Eq || op == BinOp::Ne) &&
        (a.kind == CodeKind::Op || b.kind == CodeKind::Op)) {
      auto op_code = [](const RExpr& k, const Code& c) -> std::optional<std::string> {
        if (c.kind == CodeKind::Op) return c.text;
        if (k.k == RExpr::K::Const && k.value.kind() == Value::Kind::Op)
          return fmt::format("Op::{}", op_name(k.value.as_op()));
        return std::nullopt;
      };
      auto x = op_code(e.kids[0], a), y = op_code(e.kids[1], b);
      if (x && y)
        return {fmt::format("({} {} {})", *x, op == BinOp::Eq ? "==" : "!=", *y), CodeKind::Bool};
    }
    const bool cmp = op == BinOp::Lt || op == BinOp::Le || op == BinOp::Gt || op == BinOp::Ge;
    auto num = [&](const RExpr& k, const Code& c) -> std::optional<std::string> {
      if (c.kind == CodeKind::Num) return c.text;
      if (k.k == RExpr::K::Const && k.value.kind() == Value::Kind::Int)
        return fmt::format("Num::of({})", cpp_i128(k.value.as_int()));
      return std::nullopt;
    };
    if (cmp) {
      auto x = num(e.kids[0], a), y = num(e.kids[1], b);
      if (x && y && (a.kind == CodeKind::Num || b.kind == CodeKind::Num)) {
        return {fmt::format("({} {} {})", *x, binop_text(op), *y), CodeKind::Bool};
      }
    }
    if (cmp && (a.kind == CodeKind::UOp || b.kind == CodeKind::UOp)) {  // x < y builds CmpLt
      const std::string like = a.kind == CodeKind::UOp ? a.text : b.text;
      auto x = uop_operand(e.kids[0], a, like), y = uop_operand(e.kids[1], b, like);
      static const char* kMethod[] = {"lt", "le", "gt", "ge"};
      if (x && y) {
        return {fmt::format("{}.{}({})", *x,
                            kMethod[static_cast<size_t>(op) - static_cast<size_t>(BinOp::Lt)], *y),
                CodeKind::UOp};
      }
    }
    const bool arith = !cmp && op != BinOp::Eq && op != BinOp::Ne && op != BinOp::Div;
    if (arith && (a.kind == CodeKind::UOp || b.kind == CodeKind::UOp)) {
      const std::string like = a.kind == CodeKind::UOp ? a.text : b.text;
      auto x = uop_operand(e.kids[0], a, like), y = uop_operand(e.kids[1], b, like);
      if (x && y) {
        switch (op) {
          case BinOp::Add:
            return {fmt::format("({} + {})", *x, *y), CodeKind::UOp};
          case BinOp::Sub:
            return {fmt::format("({} - {})", *x, *y), CodeKind::UOp};
          case BinOp::Mul:
            return {fmt::format("({} * {})", *x, *y), CodeKind::UOp};
          case BinOp::FloorDiv:
            return {fmt::format("{}.floordiv({})", *x, *y), CodeKind::UOp};
          case BinOp::Mod:
            return {fmt::format("{}.floormod({})", *x, *y), CodeKind::UOp};
          case BinOp::And:
            return {fmt::format("({} & {})", *x, *y), CodeKind::UOp};
          case BinOp::Or:
            return {fmt::format("({} | {})", *x, *y), CodeKind::UOp};
          case BinOp::Xor:
            return {fmt::format("({} ^ {})", *x, *y), CodeKind::UOp};
          case BinOp::Shl:
            return {fmt::format("({} << {})", *x, *y), CodeKind::UOp};
          case BinOp::Shr:
            return {fmt::format("({} >> {})", *x, *y), CodeKind::UOp};
          default:
            break;
        }
      }
    }
    return {fmt::format("binary(BinOp::{}, {}, {})", binop_name(op), as_value(a), as_value(b)),
            CodeKind::Value};
  }

  static std::string_view analysis_enum(Analysis a) {
    static constexpr std::string_view kNames[] = {
        "Terms",      "Factors", "Split",      "ConstFactor", "Divides",  "DivideExact", "PopConst",
        "Substitute", "Spine",   "ChainTerms", "Precedes",    "Toposort", "Under"};
    static_assert(std::size(kNames) == static_cast<size_t>(Analysis::Under) + 1);  // every one
    return kNames[static_cast<size_t>(a)];
  }

  static std::string binop_name(BinOp op) {
    static const char* kNames[] = {"Add", "Sub", "Mul", "FloorDiv", "Mod",  "Div", "And",
                                   "Or",  "Xor", "Shl", "Shr",      "Eq",   "Ne",  "Lt",
                                   "Le",  "Gt",  "Ge",  "In",       "NotIn"};
    return kNames[static_cast<size_t>(op)];
  }

  // ---- comprehensions: an immediately invoked lambda with one loop per `for` clause. Given
  // `use` (a generator's builtin, generator_use) no tuple is built: any/all return the bool where
  // an item decides them, sum adds each item to an accumulator as sum() does.
  Code comprehension_code(const RExpr& e, std::optional<GeneratorUse> use = std::nullopt) {
    const int k = counter_++;
    std::set<int> used;
    slots_used(e, used);
    const std::string out = fmt::format("out{}", k), steps = fmt::format("steps{}", k);
    const bool deciding = use == GeneratorUse::Any || use == GeneratorUse::All;
    std::string code = deciding ? "[&]() -> bool {\n" : "[&] {\n";
    if (!use)
      code += fmt::format("  std::vector<Value> {};\n", out);
    else if (use == GeneratorUse::Sum)
      code += fmt::format("  std::optional<Value> {};\n", out);
    code += fmt::format("  size_t {} = 0;\n", steps);
    std::string pad = "  ";
    const size_t nfor = static_cast<size_t>(
        std::count_if(e.comp.begin(), e.comp.end(), [](const RCompClause& c) { return !c.is_if; }));
    for (size_t i = 0; i < e.comp.size(); ++i) {
      const RExpr& x = e.kids[i + 1];
      if (e.comp[i].is_if) {
        code += fmt::format("{}if (!{}) continue;\n", pad, as_bool(emit(x)));
        continue;
      }
      const std::string seq = fmt::format("seq{}_{}", k, i), item = fmt::format("it{}_{}", k, i);
      const RTarget& t = e.comp[i].target;
      if (x.k == RExpr::K::Builtin && x.name == "zip" && !x.kids.empty() && t.is_tuple &&
          t.items.size() == x.kids.size() && !(t.slot >= 0 && used.count(t.slot))) {
        // `for a, b in zip(A, B)` walks A and B side by side: no row tuples are built (zip's
        // errors are items_of's, so the interpreter's messages hold)
        std::string sizes;
        for (size_t m = 0; m < x.kids.size(); ++m) {
          code +=
              fmt::format("{}const Value& {}_{} = {};\n", pad, seq, m, as_value(emit(x.kids[m])));
          code += fmt::format("{}const std::vector<Value>& {}_{}_items = items_of({}_{});\n", pad,
                              seq, m, seq, m);
          sizes += fmt::format("{}{}_{}_items.size()", m ? ", " : "", seq, m);
        }
        code += fmt::format("{}const size_t {}_n = std::min<size_t>({{{}}});\n", pad, seq, sizes);
        code +=
            fmt::format("{}for (size_t {} = 0; {} < {}_n; ++{}) {{\n", pad, item, item, seq, item);
        pad += "  ";
        code += fmt::format("{}comp_step({});\n", pad, steps);
        for (size_t m = 0; m < t.items.size(); ++m)
          bind_target(t.items[m], fmt::format("{}_{}_items[{}]", seq, m, item), used, pad, code);
        continue;
      }
      const bool pair = t.is_tuple && t.items.size() == 2 && !(t.slot >= 0 && used.count(t.slot));
      if (x.k == RExpr::K::Builtin && (x.name == "range" || (x.name == "enumerate" && pair))) {
        // `for k in range(...)` and `for k, v in enumerate(t)` count: no tuple of ints or pairs
        // is built (the checks and errors are the builtin's: range_span, enumerate_start)
        std::string args;
        for (const RExpr& a : x.kids)
          args += fmt::format("{}{}", args.empty() ? "" : ", ", as_value(emit(a)));
        code += fmt::format("{}const std::array<Value, {}> {}_args{{{}}};\n", pad, x.kids.size(),
                            seq, args);
        if (x.name == "range") {
          code += fmt::format("{}const RangeSpan {} = range_span({}_args);\n", pad, seq, seq);
          code += fmt::format("{}for (size_t {} = 0; {} < {}.n; ++{}) {{\n", pad, item, item, seq,
                              item);
          pad += "  ";
          code += fmt::format("{}comp_step({});\n", pad, steps);
          bind_target(t, fmt::format("{}.at({})", seq, item), used, pad, code);
          continue;
        }
        code += fmt::format("{}const i128 {}_start = enumerate_start({}_args);\n", pad, seq, seq);
        code += fmt::format("{}const std::vector<Value>& {}_items = items_of({}_args[0]);\n", pad,
                            seq, seq);
        code += fmt::format("{}for (size_t {} = 0; {} < {}_items.size(); ++{}) {{\n", pad, item,
                            item, seq, item);
        pad += "  ";
        code += fmt::format("{}comp_step({});\n", pad, steps);
        bind_target(
            t.items[0],
            fmt::format("Value::integer(sat_add({}_start, static_cast<i128>({})))", seq, item),
            used, pad, code);
        bind_target(t.items[1], fmt::format("{}_items[{}]", seq, item), used, pad, code);
        continue;
      }
      // a reference: to a temporary (kept alive as long as the reference) or a live slot
      code += fmt::format("{}const Value& {} = {};\n", pad, seq, as_value(emit(x)));
      if (i == 0 && nfor == 1 && !use)  // one loop: at most one item per item of the sequence
        code += fmt::format("{}{}.reserve(items_of({}).size());\n", pad, out, seq);
      code += fmt::format("{}for (const Value& {} : items_of({})) {{\n", pad, item, seq);
      pad += "  ";
      code += fmt::format("{}comp_step({});\n", pad, steps);
      bind_target(e.comp[i].target, item, used, pad, code);
    }
    const bool any = use == GeneratorUse::Any;
    if (deciding) {
      code += fmt::format("{}if ({}({})) return {};\n", pad, any ? "" : "!",
                          as_bool(emit(e.kids[0])), any);
    } else if (use == GeneratorUse::Sum) {
      code +=
          fmt::format("{}accumulate({}, BinOp::Add, {});\n", pad, out, as_value(emit(e.kids[0])));
    } else {
      code += fmt::format("{}{}.push_back({});\n", pad, out, as_value(emit(e.kids[0])));
    }
    while (pad.size() > 2) {
      pad.resize(pad.size() - 2);
      code += pad + "}\n";
    }
    if (deciding) return {code + fmt::format("  return {};\n}}()", !any), CodeKind::Bool};
    if (use == GeneratorUse::Sum)
      return {code + fmt::format("  return {} ? *{} : Value::integer(0);\n}}()", out, out),
              CodeKind::Value};
    code += fmt::format("  return Value::tuple(std::move({}));\n}}()", out);
    return {code, CodeKind::Value};
  }
  void bind_target(const RTarget& t, const std::string& v, const std::set<int>& used,
                   const std::string& pad, std::string& code) {
    if (t.slot >= 0 && used.count(t.slot))  // an item of a sequence that outlives the loop
      code += fmt::format("{}const Value& {} = {};\n", pad, slot_var(t.slot), v);
    if (!t.is_tuple) return;
    const std::string items = fmt::format("u{}", counter_++);
    code += fmt::format("{}const std::vector<Value>& {} = unpack({}, {});\n", pad, items, v,
                        t.items.size());
    for (size_t i = 0; i < t.items.size(); ++i)
      bind_target(t.items[i], fmt::format("{}[{}]", items, i), used, pad, code);
  }

 public:
  static void slots_used(const RExpr& e, std::set<int>& out) {  // as deep as the tree
    if (e.k == RExpr::K::Slot) out.insert(e.slot);
    for (const RExpr& k : e.kids) slots_used(k, out);
  }

 private:
  const std::vector<std::string>& slot_names_;
  const std::map<int, CodeKind>& slot_kinds_;
  const DefSigs& sigs_;
  CallKinds* seen_;
  int counter_ = 0;  // names of comprehension locals
};

// ---- the decision tree
// --------------------------------------------------------------------------------

struct Leaf {
  const ResolvedRule* rule;
  int table_index;
  int position;  // in the root op's order
  VariantChecks vc;
};
struct TreeNode {
  std::string check;  // empty for a leaf
  std::vector<TreeNode> kids;
  std::optional<Leaf> leaf;
};

// Adds a rule under `list`, sharing the last child's check when it is the same: rules stay in
// order, and consecutive rules with a common prefix of checks test it once.
void insert(std::vector<TreeNode>& list, const std::vector<std::string>& checks, size_t i,
            Leaf leaf) {
  if (i == checks.size()) {
    TreeNode n;
    n.leaf = std::move(leaf);
    list.push_back(std::move(n));
    return;
  }
  if (list.empty() || list.back().leaf || list.back().check != checks[i]) {
    TreeNode n;
    n.check = checks[i];
    list.push_back(std::move(n));
  }
  insert(list.back().kids, checks, i + 1, std::move(leaf));
}

struct OpTree {
  Op op;
  std::vector<int> order;  // rule-table indices
  std::vector<TreeNode> roots;
};

std::vector<OpTree> build_trees(const ResolvedSet& set, ArgLiteralTable& lits) {
  std::vector<OpTree> out;
  for (int o = 0; o < kNumOps; ++o) {
    OpTree t{static_cast<Op>(o), {}, {}};
    for (size_t i = 0; i < set.rules.size(); ++i) {
      const ResolvedRule& r = set.rules[i];
      if (!r.root.any_op && !r.root.ops.contains(t.op)) continue;
      Leaf leaf{&r, static_cast<int>(i), static_cast<int>(t.order.size()),
                variant_checks(r.root, lits)};
      t.order.push_back(static_cast<int>(i));
      const std::vector<std::string> checks = leaf.vc.checks;
      insert(t.roots, checks, 0, std::move(leaf));
    }
    if (!t.order.empty()) out.push_back(std::move(t));
  }
  return out;
}

class Writer {
 public:
  void line(int indent, const std::string& s) {  // a multi-line s keeps its inner indentation
    const std::string pad(static_cast<size_t>(indent) * 2, ' ');
    for (size_t at = 0;;) {
      const size_t end = s.find('\n', at);
      out_ += pad + s.substr(at, end == std::string::npos ? end : end - at) + "\n";
      if (end == std::string::npos) break;
      at = end + 1;
    }
  }
  std::string& str() { return out_; }

 private:
  std::string out_;
};

std::string first_line(const std::string& s) {
  std::string l = s.substr(0, s.find('\n'));
  while (!l.empty() && (l.back() == '\\' || l.back() == '\r')) l.pop_back();  // no line splices
  for (size_t p = l.find("*/"); p != std::string::npos; p = l.find("*/")) l.replace(p, 2, "* /");
  return l.size() > 100 ? l.substr(0, 97) + "..." : l;
}

// The path written for each source file: the root as given on the command line, included files
// relative to it (rules composed from another file keep that file's name).
using ShownPaths = std::map<const SourceFile*, std::string>;

ShownPaths shown_paths(const ResolvedProgram& program, const SourceFile& root,
                       const std::string& shown) {
  namespace fs = std::filesystem;
  ShownPaths out;
  const fs::path root_dir = fs::path(root.path).parent_path();
  const fs::path shown_dir = fs::path(shown).parent_path();
  for (const auto& f : program.program.files) {
    out[f.get()] = f.get() == &root ? shown
                                    : (shown_dir / fs::path(f->path).lexically_relative(root_dir))
                                          .lexically_normal()
                                          .string();
  }
  return out;
}

const std::string& path_of(const ShownPaths& paths, const ResolvedRule& r) {
  static const std::string kUnknown = "?";
  auto it = paths.find(r.loc.file);
  return it == paths.end() ? kUnknown : it->second;
}

// The slots a rule's expressions see unboxed: its pattern's nodes.
std::map<int, CodeKind> rule_slot_kinds(const VariantChecks& vc) {
  std::map<int, CodeKind> kinds;
  for (const auto& [slot, path] : vc.uop_slots) kinds[slot] = CodeKind::UOp;
  return kinds;
}

void emit_leaf(Writer& w, int ind, const Leaf& leaf, const ShownPaths& paths, SetKind kind,
               const DefSigs& sigs) {
  const ResolvedRule& r = *leaf.rule;
  w.line(ind, fmt::format("do {{  // {}:{}  {}{}", path_of(paths, r), r.info.line, r.info.name,
                          r.variant ? fmt::format(" (variant {})", r.variant) : ""));
  w.line(ind + 1, fmt::format("// {}", first_line(r.info.source)));
  w.line(ind + 1, fmt::format("rule = {};", leaf.table_index));
  for (const auto& [slot, path] : leaf.vc.uop_slots) {
    w.line(ind + 1, fmt::format("const UOp& x_{} = {};",
                                ident(r.slot_names[static_cast<size_t>(slot)]), path));
  }
  std::set<int> declared;
  for (const auto& [slot, a] : leaf.vc.arg_binds) {
    const std::string var = "v_" + ident(r.slot_names[static_cast<size_t>(slot)]);
    if (declared.insert(slot).second) {
      w.line(ind + 1, fmt::format("const Value {} = Value::from_arg({});", var, a));
    } else {
      w.line(ind + 1, fmt::format("if (!({} == Value::from_arg({}))) break;", var, a));
    }
  }
  if (r.gradient_slot >= 0) {
    w.line(ind + 1, fmt::format("if (!g) break;"));
    w.line(ind + 1, fmt::format("const Value v_g = Value::uop(*g);"));
  }
  const std::map<int, CodeKind> slot_kinds = rule_slot_kinds(leaf.vc);
  ExprEmitter ex(r.slot_names, slot_kinds, sigs);
  for (const Step& st : r.steps) {
    Code c = ex.emit(st.expr);
    if (st.is_let) {
      w.line(ind + 1, fmt::format("const Value v_{} = {};",
                                  ident(r.slot_names[static_cast<size_t>(st.slot)]),
                                  ExprEmitter::as_value(c)));
    } else if (st.is_require) {
      // the reason, with its placeholders' values as text
      std::string why = st.why_args.empty()
                            ? cpp_string(st.why_text[0])
                            : fmt::format("std::string({})", cpp_string(st.why_text[0]));
      for (size_t i = 0; i < st.why_args.size(); ++i)
        why += fmt::format(" + {}.text() + {}", ExprEmitter::as_value(ex.emit(st.why_args[i])),
                           cpp_string(st.why_text[i + 1]));
      const std::string what = st.raises ? "throw EvalError" : "return Value::fail";
      w.line(ind + 1, fmt::format("if (!{}) {}({});", ExprEmitter::as_bool(c), what, why));
    } else {
      w.line(ind + 1, fmt::format("if (!{}) break;", ExprEmitter::as_bool(c)));
    }
  }
  Code res = ex.emit(r.result);
  if (res.kind == CodeKind::UOp) {
    w.line(ind + 1, fmt::format("UOp out = {};", res.text));
    w.line(ind + 1, "if (out == n) break;");
    w.line(ind + 1, "return Value::uop(std::move(out));");
  } else {
    w.line(ind + 1, fmt::format("Value out = {};", ExprEmitter::as_value(res)));
    w.line(ind + 1, "if (out.is_none() || (out.is_uop() && out.as_uop() == n)) break;");
    w.line(ind + 1, "return out;");
  }
  (void)kind;
  w.line(ind, "} while (false);");
}

void emit_tree(Writer& w, int ind, const std::vector<TreeNode>& list, const ShownPaths& shown_path,
               SetKind kind, const DefSigs& sigs) {
  for (const TreeNode& t : list) {
    if (t.leaf) {
      emit_leaf(w, ind, *t.leaf, shown_path, kind, sigs);
      continue;
    }
    w.line(ind, fmt::format("if ({}) {{", t.check));
    emit_tree(w, ind + 1, t.kids, shown_path, kind, sigs);
    w.line(ind, "}");
  }
}

// The typed accessor of a rule set: `rules::rangeify()`. Set names are identifiers; one that is a
// C++ keyword gets a trailing '_'.
std::string accessor_name(const std::string& set) {
  static const std::set<std::string_view> kKeywords = {
      "alignas",   "alignof",   "and",       "asm",       "auto",     "bool",     "break",
      "case",      "catch",     "char",      "class",     "concept",  "const",    "consteval",
      "constexpr", "constinit", "continue",  "decltype",  "default",  "delete",   "do",
      "double",    "else",      "enum",      "explicit",  "export",   "extern",   "false",
      "float",     "for",       "friend",    "goto",      "if",       "inline",   "int",
      "long",      "mutable",   "namespace", "new",       "noexcept", "not",      "nullptr",
      "operator",  "or",        "private",   "protected", "public",   "register", "requires",
      "return",    "short",     "signed",    "sizeof",    "static",   "struct",   "switch",
      "template",  "this",      "throw",     "true",      "try",      "typedef",  "typeid",
      "typename",  "union",     "unsigned",  "using",     "virtual",  "void",     "volatile",
      "while",     "xor"};
  return kKeywords.count(set) ? set + "_" : set;
}

std::vector<const ResolvedSet*> sets_of(const ResolvedProgram& program, const SourceFile& root) {
  std::vector<const ResolvedSet*> out;
  for (const auto& [name, set] : program.sets)
    if (set.loc.file == &root) out.push_back(&set);
  return out;
}

void defs_called(const RExpr& e, std::set<const ResolvedDef*>& out) {  // as deep as the tree
  if (e.k == RExpr::K::DefCall) out.insert(e.def);
  for (const RExpr& k : e.kids) defs_called(k, out);
}

// Every def the rules of `sets` call, directly or through other defs.
std::set<const ResolvedDef*> defs_used(const ResolvedProgram& program,
                                       const std::vector<const ResolvedSet*>& sets) {
  std::set<const ResolvedDef*> used;
  for (const ResolvedSet* set : sets) {
    for (const ResolvedRule& r : set->rules) {
      for (const Step& st : r.steps) defs_called(st.expr, used);
      defs_called(r.result, used);
    }
  }
  for (auto it = program.defs.rbegin(); it != program.defs.rend(); ++it)  // callers first
    if (used.count(it->get())) defs_called((*it)->body, used);
  return used;
}

std::string_view cpp_type(CodeKind k) {
  switch (k) {
    case CodeKind::UOp:
      return "UOp";
    case CodeKind::Bool:
      return "bool";
    case CodeKind::Num:
      return "Num";
    case CodeKind::Op:
      return "Op";
    case CodeKind::Value:
      break;
  }
  return "Value";
}

// A parameter may be unboxed where its annotation, if any, is the same static kind (an `int`
// stays a checked Value: a Num may hold a float or an infinity).
bool annotation_allows(Type declared, CodeKind k) {
  return declared == Type::Any || (declared == Type::UOp && k == CodeKind::UOp) ||
         (declared == Type::Bool && k == CodeKind::Bool) ||
         (declared == Type::Op && k == CodeKind::Op);
}

// The slots a def's body sees unboxed: its unboxed parameters, and a Value parameter annotated
// `uop` (checked on entry, then read as x_name).
std::map<int, CodeKind> def_slot_kinds(const ResolvedDef& d, const DefSig& sig) {
  std::map<int, CodeKind> kinds;
  for (int i = 0; i < d.nparams; ++i) {
    const auto k = static_cast<size_t>(i);
    if (sig.params[k] != CodeKind::Value)
      kinds[i] = sig.params[k];
    else if (d.param_types[k] == Type::UOp)
      kinds[i] = CodeKind::UOp;
  }
  return kinds;
}

// Every def's signature, found by emitting the rules and defs until the kinds settle: each
// round passes the kinds the previous one found, so unboxing a parameter can unbox what the body
// gives and, through it, the arguments of further calls. Kinds only go from Value to one kind;
// a program that does not settle in kMaxRounds keeps every def boxed (always right, slower).
DefSigs infer_def_sigs(const ResolvedProgram& program,
                       const std::vector<const ResolvedSet*>& sets) {
  constexpr int kMaxRounds = 32;
  const std::set<const ResolvedDef*> used = defs_used(program, sets);
  DefSigs boxed;
  for (const ResolvedDef* d : used)
    boxed[d] = {std::vector<CodeKind>(static_cast<size_t>(d->nparams), CodeKind::Value),
                CodeKind::Value};
  std::vector<std::pair<const ResolvedRule*, std::map<int, CodeKind>>> rules;
  ArgLiteralTable scratch;  // the rules' checks are not kept
  for (const ResolvedSet* set : sets)
    for (const ResolvedRule& r : set->rules)
      rules.emplace_back(&r, rule_slot_kinds(variant_checks(r.root, scratch)));
  DefSigs sigs = boxed;
  for (int round = 0; round < kMaxRounds; ++round) {
    CallKinds seen;
    for (const auto& [r, kinds] : rules) {
      ExprEmitter ex(r->slot_names, kinds, sigs, &seen);
      for (const Step& st : r->steps) {
        ex.emit(st.expr);
        for (const RExpr& a : st.why_args) ex.emit(a);
      }
      ex.emit(r->result);
    }
    DefSigs next;
    for (const ResolvedDef* d : used) {
      const std::map<int, CodeKind> kinds = def_slot_kinds(*d, sigs[d]);
      ExprEmitter ex(d->slot_names, kinds, sigs, &seen);
      next[d].result = ex.emit(d->body).kind;
    }
    for (const ResolvedDef* d : used) {
      auto& params = next[d].params;
      params.assign(static_cast<size_t>(d->nparams), CodeKind::Value);
      auto it = seen.find(d);
      if (it == seen.end()) continue;
      for (size_t i = 0; i < params.size() && i < it->second.size(); ++i) {
        const std::optional<CodeKind> k = it->second[i];
        if (k && annotation_allows(d->param_types[i], *k)) params[i] = *k;
      }
    }
    if (next == sigs) return sigs;
    sigs = std::move(next);
  }
  return boxed;
}

// Every def the rules call (those infer_def_sigs gave a signature), as one static function each,
// callees first (the program keeps defs in that order).
void emit_defs(Writer& w, const ResolvedProgram& program, const ShownPaths& paths,
               const DefSigs& sigs) {
  for (const auto& d : program.defs) {
    auto found = sigs.find(d.get());
    if (found == sigs.end()) continue;
    const DefSig& sig = found->second;
    auto path = paths.find(d->loc.file);
    std::set<int> params_used;
    ExprEmitter::slots_used(d->body, params_used);
    std::string params = "RewriteContext& ctx";
    for (int i = 0; i < d->nparams; ++i) {
      const auto k = static_cast<size_t>(i);
      const std::string& p = d->slot_names[k];
      const CodeKind kind = sig.params[k];
      const bool used = params_used.count(i) || d->param_types[k] != Type::Any;
      const std::string pass = kind == CodeKind::Bool || kind == CodeKind::Op
                                   ? std::string(cpp_type(kind))
                                   : fmt::format("const {}&", cpp_type(kind));
      params += fmt::format(", {} {}{}_{}", pass, used ? "" : "/*unused*/ ",
                            kind == CodeKind::UOp ? "x" : "v", ident(p));
    }
    w.line(0, fmt::format("// {}:{}  def {}", path == paths.end() ? "?" : path->second, d->loc.line,
                          d->name));
    w.line(0, fmt::format("{} {}({}) {{", cpp_type(sig.result), def_function(*d), params));
    w.line(1, "(void)ctx;");
    // annotated parameters left boxed are checked as the interpreter checks them
    for (int i = 0; i < d->nparams; ++i) {
      const auto k = static_cast<size_t>(i);
      const Type t = d->param_types[k];
      if (t == Type::Any || sig.params[k] != CodeKind::Value) continue;
      const std::string& p = d->slot_names[k];
      w.line(1, fmt::format("check_def_arg(v_{}, Type::{}, {}, {}, {});", ident(p), type_enum(t),
                            cpp_string(d->name), i, cpp_string(p)));
      if (t == Type::UOp && params_used.count(i))  // checked: the body uses it as a UOp
        w.line(1, fmt::format("const UOp& x_{0} = v_{0}.as_uop();", ident(p)));
    }
    const std::map<int, CodeKind> kinds = def_slot_kinds(*d, sig);
    ExprEmitter ex(d->slot_names, kinds, sigs);
    const Code body = ex.emit(d->body);
    if (sig.result != CodeKind::Value && body.kind != sig.result)
      throw std::logic_error(
          fmt::format("rwc: def {} gives a value unlike its inferred result", d->name));
    w.line(1, fmt::format("return {};",
                          sig.result == CodeKind::Value ? ExprEmitter::as_value(body) : body.text));
    w.line(0, "}");
    w.line(0, "");
  }
}

void helpers_called(const RExpr& e, std::map<std::string, const HelperDecl*>& out) {
  if (e.k == RExpr::K::Helper) out.emplace(e.name, e.decl);
  for (const RExpr& k : e.kids) helpers_called(k, out);  // as deep as the tree
}

// One accessor per helper the rules and defs of this file call: the registration is found by
// name and checked against the declaration on first use, then kept (no lookup per call).
void emit_helpers(Writer& w, const ResolvedProgram& program,
                  const std::vector<const ResolvedSet*>& sets) {
  std::map<std::string, const HelperDecl*> used;
  for (const ResolvedSet* set : sets) {
    for (const ResolvedRule& r : set->rules) {
      for (const Step& st : r.steps) helpers_called(st.expr, used);
      helpers_called(r.result, used);
    }
  }
  for (const ResolvedDef* d : defs_used(program, sets)) helpers_called(d->body, used);
  for (const auto& [name, decl] : used) {
    std::string params;
    for (size_t i = 0; i < decl->params.size(); ++i)
      params += fmt::format("{}Type::{}", i ? ", " : "", type_enum(decl->params[i]));
    w.line(0, fmt::format("const Helper& {}() {{", helper_function(name)));
    w.line(1, fmt::format("static const std::array<Type, {}> kParams{{{}}};", decl->params.size(),
                          params));
    w.line(1, fmt::format("static const Helper& h = helper({}, kParams, Type::{});",
                          cpp_string(name), type_enum(decl->result)));
    w.line(1, "return h;");
    w.line(0, "}");
    w.line(0, "");
  }
}

// The first line of every file rwc writes (the matchers and their header).
std::string generated_banner(const std::string& shown_path) {
  return fmt::format("// Generated by rwc from {}. Do not edit: change the .rw file and rebuild.",
                     shown_path);
}

}  // namespace

std::string emit_cpp(const ResolvedProgram& program, const SourceFile& root,
                     const std::string& shown_path) {
  Writer w;
  ArgLiteralTable lits;
  Writer body;
  const std::string ns = "rules_" + ident(std::filesystem::path(shown_path).stem().string());
  const ShownPaths paths = shown_paths(program, root, shown_path);
  std::vector<std::string> registrations;
  const DefSigs sigs = infer_def_sigs(program, sets_of(program, root));
  for (const ResolvedSet* set : sets_of(program, root)) {
    const std::string cls = "RuleSet_" + ident(set->name);
    std::vector<OpTree> trees = build_trees(*set, lits);
    body.line(0, fmt::format("// ---- rule set '{}' ({} rules, {}:{})", set->name,
                             set->rules.size(), shown_path, set->loc.line));
    body.line(0, fmt::format("const RuleInfo k{}Rules[] = {{", cls));
    for (const ResolvedRule& r : set->rules) {
      body.line(1,
                fmt::format("{{{}, {}, {}, {}}},", cpp_string(r.info.name),
                            cpp_string(path_of(paths, r)), r.info.line, cpp_string(r.info.source)));
    }
    if (set->rules.empty()) body.line(1, "{\"\", \"\", 0, \"\"},");
    body.line(0, "};");
    for (const OpTree& t : trees) {
      std::string order;
      for (size_t i = 0; i < t.order.size(); ++i)
        order += (i ? ", " : "") + std::to_string(t.order[i]);
      body.line(0, fmt::format("const int k{}Order{}[] = {{{}}};", cls, op_name(t.op), order));
    }
    body.line(0, "");
    body.line(0, fmt::format("class {} final : public CompiledMatcher {{", cls));
    body.line(0, " public:");
    body.line(
        1, fmt::format("{}() : CompiledMatcher({}, std::span<const RuleInfo>(k{}Rules, {})) {{}}",
                       cls, cpp_string(set->name), cls, set->rules.size()));
    body.line(0, "");
    body.line(0, " protected:");
    body.line(1,
              "std::optional<Value> dispatch(const UOp& n, RewriteContext& ctx, const UOp* g, int& "
              "rule) const override {");
    body.line(2, "(void)ctx;");
    body.line(2, "(void)g;");
    body.line(2, "switch (op(n)) {");
    for (const OpTree& t : trees)
      body.line(3, fmt::format("case Op::{0}: return match_{0}(n, ctx, g, rule);", op_name(t.op)));
    body.line(3, "default: return std::nullopt;");
    body.line(2, "}");
    body.line(1, "}");
    body.line(1, "std::span<const int> order(Op o) const override {");
    body.line(2, "switch (o) {");
    for (const OpTree& t : trees)
      body.line(3, fmt::format("case Op::{0}: return k{1}Order{0};", op_name(t.op), cls));
    body.line(3, "default: return {};");
    body.line(2, "}");
    body.line(1, "}");
    body.line(0, "");
    body.line(0, " private:");
    for (const OpTree& t : trees) {
      body.line(1, fmt::format("std::optional<Value> match_{}(const UOp& n, RewriteContext& ctx, "
                               "const UOp* g, int& rule) const {{",
                               op_name(t.op)));
      body.line(2, "(void)ctx;");
      body.line(2, "(void)g;");
      emit_tree(body, 2, t.roots, paths, set->kind, sigs);
      body.line(2, "return std::nullopt;");
      body.line(1, "}");
    }
    body.line(0, "};");
    body.line(0, "");
    registrations.push_back(
        fmt::format("const bool k{0}Registered = (register_compiled({1}, {2}, [] {{ return "
                    "std::make_unique<{0}>(); }}), true);",
                    cls, cpp_string(set->name), cpp_string(shown_path)));
  }

  w.line(0, generated_banner(shown_path));
  w.line(0, "// NOLINTBEGIN");
  w.line(0, "#include <algorithm>");
  w.line(0, "#include <array>");
  w.line(0, "#include <bit>");
  w.line(0, "#include <limits>");
  w.line(0, "#include <optional>");
  w.line(0, "");
  w.line(0, "#include \"dsl/compiled.h\"");
  w.line(0, "");
  w.line(0, fmt::format("namespace tinyrw::rw::gen::{} {{", ns));
  w.line(0, "namespace {");
  w.line(0, "");
  for (const std::string& d : lits.defs) w.line(0, d);
  if (!lits.defs.empty()) w.line(0, "");
  emit_helpers(w, program, sets_of(program, root));
  emit_defs(w, program, paths, sigs);
  w.str() += body.str();
  for (const std::string& r : registrations) w.line(0, r);
  w.line(0, "");
  w.line(0, "}  // namespace");
  w.line(0, fmt::format("}}  // namespace tinyrw::rw::gen::{}", ns));
  // typed accessors (declared in the header rwc writes with --header): the registered instance
  w.line(0, "");
  w.line(0, "namespace tinyrw::rules {");
  for (const ResolvedSet* set : sets_of(program, root)) {
    w.line(0, fmt::format("const rw::RuleSetMatcher& {}() {{", accessor_name(set->name)));
    w.line(1, fmt::format("static const rw::RuleSetMatcher& m = rw::gen::registered({});",
                          cpp_string(set->name)));
    w.line(1, "return m;");
    w.line(0, "}");
  }
  w.line(0, "}  // namespace tinyrw::rules");
  w.line(0, "// NOLINTEND");
  return w.str();
}

std::string emit_header(const ResolvedProgram& program, const SourceFile& root,
                        const std::string& shown_path) {
  Writer w;
  w.line(0, generated_banner(shown_path));
  w.line(0, "// The rule sets of that file by name: a misspelt rule set is a compile error.");
  w.line(0, "#pragma once");
  w.line(0, "");
  w.line(0, "#include \"dsl/ruleset.h\"");
  w.line(0, "");
  w.line(0, "namespace tinyrw::rules {");
  for (const ResolvedSet* set : sets_of(program, root)) {
    w.line(0, fmt::format("// {}:{}", shown_path, set->loc.line));
    w.line(0, fmt::format("const rw::RuleSetMatcher& {}();", accessor_name(set->name)));
  }
  w.line(0, "}  // namespace tinyrw::rules");
  return w.str();
}

std::string dump_decision_trees(const ResolvedProgram& program, const SourceFile& root) {
  ArgLiteralTable lits;
  const ShownPaths paths = shown_paths(program, root, root.path);
  std::string out;
  std::function<void(const std::vector<TreeNode>&, int)> walk =
      [&](const std::vector<TreeNode>& list, int ind) {
        for (const TreeNode& t : list) {
          const std::string pad(static_cast<size_t>(ind) * 2, ' ');
          if (t.leaf) {
            const ResolvedRule& r = *t.leaf->rule;
            out += fmt::format("{}-> {} ({}:{}){}  {}\n", pad, r.info.name, path_of(paths, r),
                               r.info.line, r.variant ? fmt::format(" variant {}", r.variant) : "",
                               first_line(r.info.source));
          } else {
            out += fmt::format("{}if {}\n", pad, t.check);
            walk(t.kids, ind + 1);
          }
        }
      };
  for (const ResolvedSet* set : sets_of(program, root)) {
    out += fmt::format("ruleset {} ({} rule variants)\n", set->name, set->rules.size());
    for (const OpTree& t : build_trees(*set, lits)) {
      out += fmt::format("  root {}: {} rules\n", op_name(t.op), t.order.size());
      walk(t.roots, 2);
    }
  }
  return out;
}

}  // namespace tinyrw::rw
