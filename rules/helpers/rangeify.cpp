// The rangeify pipeline's state (schedule/rangeify.cpp) for rules/indexing.rw and
// rules/rangeify.rw: its realize map, new range numbers, STAGE tags and buffers.
#include "rules/helpers/rangeify.h"

#include <limits>

#include <fmt/format.h>

#include <cstdlib>
#include <unordered_set>

#include "dsl/typed_helper.h"
#include "ir/builders.h"
#include "ir/env.h"
#include "ir/graph.h"
#include "runtime/device.h"
#include "schedule/rangeify.h"

namespace tinyrw::rw {
namespace {

// Range propagation's state (schedule/rangeify.cpp's run_rangeify), read by rules/indexing.rw.
IndexingContext& indexing(const RewriteContext& ctx) {
  if (!ctx.user) throw EvalError("range propagation's helpers need an IndexingContext");
  return static_cast<IndexingContext&>(ctx.as<ScheduleContext>());
}

const HelperRegistrar kIsRealized(typed_helper(
    "is_realized",
    +[](RewriteContext& ctx, const UOp& x) { return indexing(ctx).realize_map.contains(x); }));
// tinygrad's new_range: a size-1 axis is index 0 (no loop), else a RANGE numbered in the graph
const HelperRegistrar kNewRange(typed_helper(
    "new_range", +[](RewriteContext& ctx, const Value& size, const std::string& type) {
      const std::optional<AxisType> t = axis_type_from_name(type);
      if (!t) throw EvalError(fmt::format("new_range: unknown axis type '{}'", type));
      const UOp s = size.is_uop() ? size.as_uop() : UOp::cint(size.as_int());
      if (s.op() == Op::Const && s.arg().as_int() == 1) return UOp::cint(0);
      return UOp::range(s, indexing(ctx).next_range++, *t);
    }));

// range propagation's entry for x: (input ranges, output ranges, realized axes or ()); none when
// x has no ranges
const HelperRegistrar kRangeEntry(typed_helper(
    "range_entry", +[](RewriteContext& ctx, const UOp& x) -> Value {
      const IndexingContext& ic = indexing(ctx);
      const auto r = ic.range_map.find(x);
      if (r == ic.range_map.end()) return Value();
      std::vector<Value> in, out, axes;
      for (const UOp& u : r->second.first) in.push_back(Value::uop(u));
      for (const UOp& u : r->second.second) out.push_back(Value::uop(u));
      if (const auto a = ic.realize_map.find(x); a != ic.realize_map.end() && a->second)
        for (int k : *a->second) axes.push_back(Value::integer(k));
      return Value::tuple({Value::tuple(in), Value::tuple(out), Value::tuple(axes)});
    }));
// a STAGE's arg (tinygrad's BufferizeOpts and tag): (removable, tag), the tag numbering the node it
// buffers, which the pipeline's caller reads back from the STAGEs the cost model kept
const HelperRegistrar kStageOpts(typed_helper(
    "stage_opts", +[](RewriteContext& ctx, const UOp& x) {
      IndexingContext& ic = indexing(ctx);
      const auto [tag, fresh] = ic.stage_tags.try_emplace(x, ic.staged.size());
      if (fresh) ic.staged.push_back(x);
      return Value::tuple(
          {Value::boolean(!ic.non_removable.contains(x)), Value::integer(tag->second)});
    }));
// add buffers: the BUFFER of `size` elements a STAGE becomes, one per STAGE, on `device` (none:
// the schedule's default device)
const HelperRegistrar kStageBuffer(typed_helper(
    "stage_buffer", +[](RewriteContext& ctx, const UOp& b, i128 size, const Value& device) {
      IndexingContext& ic = indexing(ctx);
      auto [it, fresh] = ic.stage_buffers.try_emplace(b);
      const auto slot = -static_cast<int64_t>(ic.stage_buffers.size());
      if (size > std::numeric_limits<int64_t>::max())
        throw EvalError("a STAGE's buffer is too large");
      if (!device.is_none() && device.kind() != Value::Kind::String)
        throw EvalError("a STAGE's buffer goes to one device (a multi-device value is not split)");
      if (fresh)
        it->second = buffer_uop(b.dtype(), slot, static_cast<int64_t>(size),
                                device.is_none() ? ic.device : device.as_string());
      return it->second;
    }));
// x's index `idx` (one per axis) moved through each of x's views down to its base: the base's
// index, or empty for a view of a constant
std::vector<UOp> base_index(const UOp& x, std::vector<UOp> idx, bool simplify) {
  UOp view = x;
  while (groups::movement().contains(view.op()) && !idx.empty()) {
    idx = apply_movement_op(view, idx, simplify);
    view = view.src(0);
  }
  return idx;
}
// The axes of x its movement ops never index its base by (broadcast axes, and axes of size 1):
// x indexed by one RANGE per axis, moved through each view down to the base (tinygrad's
// split_reduceop finds them by rangeifying x).
const HelperRegistrar kExpandedAxes(typed_helper(
    "expanded_axes", +[](const UOp& x) -> std::vector<Value> {
      const Shape shape = x.shape();
      std::vector<UOp> axes, idx;
      for (size_t k = 0; k < shape.size(); ++k) {
        const bool loops = !shape[k].is_int() || shape[k].value() > 1;
        axes.push_back(loops ? UOp::range(shape[k].as_uop(), static_cast<int>(k)) : UOp());
        idx.push_back(loops ? axes.back() : UOp::cint(0));
      }
      idx = base_index(x, idx, /*simplify=*/false);
      std::unordered_set<UOp> reached;  // the ranges the base is still indexed by
      if (!idx.empty())
        for (const UOp& u : toposort(UOp::sink(idx)))
          if (u.op() == Op::Range) reached.insert(u);
      std::vector<Value> out;
      for (size_t k = 0; k < axes.size(); ++k)
        if (!axes[k] || !reached.contains(axes[k]))
          out.push_back(Value::integer(static_cast<int64_t>(k)));
      return out;
    }));
// Per axis of x (a view of a base with a static shape), how many elements apart in the base (flat,
// row-major) x's first two elements along that axis are: 0 for a broadcast axis, none where that
// is not a constant (a padded origin, a symbolic shape) or the axis has one element.
const HelperRegistrar kUnitStrides(typed_helper(
    "unit_strides", +[](const UOp& x) -> std::vector<Value> {
      const Shape shape = x.shape();
      UOp base = x;
      while (groups::movement().contains(base.op())) base = base.src(0);
      const Shape base_shape = base.shape();
      // the flat base offset of x's element at `at`, none when not a constant
      auto offset = [&](const std::vector<UOp>& at) -> std::optional<int64_t> {
        const std::vector<UOp> idx = base_index(x, at, /*simplify=*/true);
        if (idx.size() != base_shape.size()) return std::nullopt;
        int64_t flat = 0;
        for (size_t k = 0; k < idx.size(); ++k) {
          if (idx[k].op() != Op::Const || !idx[k].arg().is_int() || !base_shape[k].is_int())
            return std::nullopt;
          flat = flat * base_shape[k].value() + idx[k].arg().as_int();
        }
        return flat;
      };
      const std::vector<UOp> origin(shape.size(), UOp::cint(0));
      const std::optional<int64_t> first = offset(origin);
      std::vector<Value> out;
      for (size_t k = 0; k < shape.size(); ++k) {
        std::optional<int64_t> next;
        if (first && shape[k].is_int() && shape[k].value() > 1) {
          std::vector<UOp> at = origin;
          at[k] = UOp::cint(1);
          next = offset(at);
        }
        out.push_back(next ? Value::integer(*next - *first) : Value());
      }
      return out;
    }));
// the base of a device name, which picks its runtime and compiler ("CPU:1" -> "CPU")
const HelperRegistrar kDeviceBase(typed_helper(
    "device_base", +[](const std::string& name) -> std::string {
      try {
        return device_base(canonical_device(name));
      } catch (const std::exception& e) {
        throw EvalError(e.what());
      }
    }));
// an integer setting from the environment (tinygrad's getenv), `fallback` when unset
const HelperRegistrar kGetenv(typed_helper(
    "getenv", +[](const std::string& name, i128 fallback) -> i128 {
      try {
        return env_int(name.c_str(), static_cast<int64_t>(fallback));
      } catch (const std::invalid_argument& e) {
        throw EvalError(e.what());
      }
    }));

}  // namespace
}  // namespace tinyrw::rw
