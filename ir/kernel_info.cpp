#include "ir/kernel_info.h"

#include <fmt/format.h>

namespace tinyrw {

namespace {
Arg opts_arg(const std::vector<Arg>& opts) { return Arg::tuple(opts); }
std::vector<Arg> opts_of(const Arg& a) { return {a.items().begin(), a.items().end()}; }
}  // namespace

Arg KernelInfo::to_arg() const {
  std::vector<Arg> types;
  for (AxisType t : axis_types) types.push_back(Arg::string(axis_type_name(t)));
  Arg est;
  if (estimates)
    est = Arg::record("Estimates", {{"ops", Arg::integer(estimates->ops)},
                                    {"lds", Arg::integer(estimates->lds)},
                                    {"mem", Arg::integer(estimates->mem)}});
  return Arg::record("KernelInfo",
                     {{"name", Arg::string(name)},
                      {"axis_types", Arg::tuple(std::move(types))},
                      {"dont_use_locals", Arg::boolean(dont_use_locals)},
                      {"applied_opts", opts_arg(applied_opts)},
                      {"opts_to_apply", opts_to_apply ? opts_arg(*opts_to_apply) : Arg()},
                      {"estimates", est},
                      {"beam", Arg::integer(beam)}});
}

KernelInfo KernelInfo::of(const UOp& sink) {
  if (sink.op() != Op::Sink) throw GraphError(fmt::format("{} is not a SINK", op_name(sink.op())));
  KernelInfo info;
  const Arg& a = sink.arg();
  if (a.is_none()) return info;
  if (!a.is_record() || a.record_type() != "KernelInfo")
    throw GraphError(fmt::format("SINK arg {} is not a KernelInfo", a.repr()));
  if (const Arg* f = a.find_field("name")) info.name = f->as_string();
  if (const Arg* f = a.find_field("axis_types")) {
    for (const Arg& t : f->items()) {
      auto type = axis_type_from_name(t.as_string());
      if (!type) throw GraphError(fmt::format("KernelInfo: unknown axis type {}", t.repr()));
      info.axis_types.push_back(*type);
    }
  }
  if (const Arg* f = a.find_field("dont_use_locals")) info.dont_use_locals = f->as_bool();
  if (const Arg* f = a.find_field("applied_opts")) info.applied_opts = opts_of(*f);
  if (const Arg* f = a.find_field("opts_to_apply"); f && !f->is_none())
    info.opts_to_apply = opts_of(*f);
  if (const Arg* f = a.find_field("estimates"); f && !f->is_none())
    info.estimates = Estimates{static_cast<int64_t>(f->field("ops").as_int()),
                               static_cast<int64_t>(f->field("lds").as_int()),
                               static_cast<int64_t>(f->field("mem").as_int())};
  if (const Arg* f = a.find_field("beam")) info.beam = static_cast<int64_t>(f->as_int());
  return info;
}

}  // namespace tinyrw
