// Index math of rules/rangeify.rw: how an index into a view maps to an index into its source.
// Each helper takes the Index(view, i0, i1, ...) node and returns the Index one level down.
#include <fmt/format.h>

#include "dsl/value.h"
#include "rules/helpers/rangeify.h"

namespace tinyrw::rw {
namespace {

std::vector<UOp> idx_of(const UOp& i) {
  return std::vector<UOp>(i.src().begin() + 1, i.src().end());
}

UOp make_index(const UOp& x, const std::vector<UOp>& idx) { return x.index(idx); }

Dims dims_of(const UOp& shape_uop) { return to_dims(uop_to_shape(shape_uop)); }
Dims shape_of(const UOp& x) { return to_dims(x.shape()); }
UOp ci(int64_t v) { return UOp::cint(v); }
// A view of a constant (the symbolic rules may fold a view's source into a shapeless CONST): every
// element is that constant.
bool of_const(const UOp& i) { return i.src(0).src(0).op() == Op::Const; }

UOp index_elementwise(const UOp& i) {
  const UOp& e = i.src(0);
  const std::vector<UOp> idx = idx_of(i);
  std::vector<UOp> src;
  for (const UOp& s : e.src()) src.push_back(make_index(s, idx));
  return e.with_src(src);
}

UOp index_through(const UOp& i) { return make_index(i.src(0).src(0), idx_of(i)); }

// row-major: flatten the output index, unflatten into the source's shape
UOp index_reshape(const UOp& i) {
  if (of_const(i)) return i.src(0).src(0);
  const UOp& r = i.src(0);
  const UOp& x = r.src(0);
  const Dims out = dims_of(r.src(1)), in = shape_of(x);
  const std::vector<UOp> idx = idx_of(i);
  UOp flat = ci(0);
  int64_t stride = 1;
  for (size_t k = out.size(); k-- > 0;) {
    flat = flat + idx[k] * ci(stride);
    stride *= out[k];
  }
  std::vector<UOp> in_idx(in.size());
  stride = 1;
  for (size_t k = in.size(); k-- > 0;) {
    UOp v = stride == 1 ? flat : flat.floordiv(ci(stride));
    if (k > 0) v = v.floormod(ci(in[k]));
    in_idx[k] = v;
    stride *= in[k];
  }
  return make_index(x, in_idx);
}

UOp index_permute(const UOp& i) {
  const UOp& p = i.src(0);
  const std::vector<UOp> idx = idx_of(i);
  std::vector<UOp> in_idx(idx.size());
  auto perm = p.arg().items();
  for (size_t k = 0; k < idx.size(); ++k) in_idx[static_cast<size_t>(perm[k].as_int())] = idx[k];
  return make_index(p.src(0), in_idx);
}

UOp index_expand(const UOp& i) {
  if (of_const(i)) return i.src(0).src(0);
  const UOp& e = i.src(0);
  const Dims in = shape_of(e.src(0));
  std::vector<UOp> idx = idx_of(i);
  for (size_t k = 0; k < idx.size(); ++k)
    if (in[k] == 1) idx[k] = ci(0);
  return make_index(e.src(0), idx);
}

UOp index_pad(const UOp& i) {
  if (of_const(i)) return i.src(0).src(0);
  const UOp& p = i.src(0);
  const UOp& x = p.src(0);
  const Dims off = dims_of(p.src(1)), in = shape_of(x);
  std::vector<UOp> idx = idx_of(i);
  UOp valid;
  for (size_t k = 0; k < idx.size(); ++k) {
    if (off[k] == 0 && dims_of(p.src(2))[k] == in[k]) continue;
    const UOp lo = idx[k].ge(ci(off[k])), hi = idx[k].lt(ci(off[k] + in[k]));
    valid = valid ? (valid & lo & hi) : (lo & hi);
    idx[k] = idx[k] - ci(off[k]);
  }
  const UOp inner = make_index(x, idx);
  if (!valid) return inner;
  return valid.where(inner, UOp::constant(x.dtype(), Arg::integer(0)));
}

UOp index_shrink(const UOp& i) {
  const UOp& s = i.src(0);
  const Dims off = dims_of(s.src(1));
  std::vector<UOp> idx = idx_of(i);
  for (size_t k = 0; k < idx.size(); ++k)
    if (off[k]) idx[k] = idx[k] + ci(off[k]);
  return make_index(s.src(0), idx);
}

UOp index_flip(const UOp& i) {
  if (of_const(i)) return i.src(0).src(0);
  const UOp& f = i.src(0);
  const Dims in = shape_of(f.src(0));
  auto flags = f.arg().items();
  std::vector<UOp> idx = idx_of(i);
  if (flags.size() != idx.size() || in.size() != idx.size())
    throw std::logic_error(fmt::format("index_flip: a FLIP of {} axes ({} flags) indexed with {}",
                                       in.size(), flags.size(), idx.size()));
  for (size_t k = 0; k < idx.size(); ++k)
    if (flags[k].as_bool()) idx[k] = ci(in[k] - 1) - idx[k];
  return make_index(f.src(0), idx);
}

// REDUCE over the first n axes: new ranges for them, a reduction of the source indexed by them.
UOp index_reduce(RewriteContext& ctx, const UOp& i) {
  if (!ctx.user) throw EvalError("index_reduce needs a RangeifyContext");
  auto& rc = ctx.as<RangeifyContext>();
  const UOp& r = i.src(0);
  const UOp& x = r.src(0);
  const Op op = r.arg().items()[0].as_op();
  const auto n = static_cast<size_t>(r.arg().items()[1].as_int());
  const Dims in = shape_of(x);
  std::vector<UOp> ranges, idx;
  for (size_t k = 0; k < n; ++k) ranges.push_back(UOp::range(ci(in[k]), rc.next_axis++));
  idx = ranges;
  for (const UOp& u : idx_of(i)) idx.push_back(u);
  return make_index(x, idx).reduce_over(op, ranges);
}

#define TINYRW_INDEX_HELPER(name, doc)                                                            \
  const HelperRegistrar k_##name(                                                                 \
      {#name, 1, 1, Type::UOp,                                                                    \
       [](RewriteContext&, std::span<const Value> a) { return Value::uop(name(a[0].as_uop())); }, \
       doc});
TINYRW_INDEX_HELPER(index_elementwise,
                    "Index(op(a, b), i...) -> op(Index(a, i...), Index(b, i...))")
TINYRW_INDEX_HELPER(index_through, "Index(marker(x), i...) -> Index(x, i...)")
TINYRW_INDEX_HELPER(index_reshape,
                    "Index(Reshape(x), i...): flatten, then unflatten into x's shape")
TINYRW_INDEX_HELPER(index_permute, "Index(Permute(x), i...): indices reordered by the permutation")
TINYRW_INDEX_HELPER(index_expand, "Index(Expand(x), i...): broadcast axes index 0")
TINYRW_INDEX_HELPER(index_pad, "Index(Pad(x), i...): shifted index, zero outside the source")
TINYRW_INDEX_HELPER(index_shrink, "Index(Shrink(x), i...): indices shifted by the offsets")
TINYRW_INDEX_HELPER(index_flip, "Index(Flip(x), i...): flipped axes index from the end")
#undef TINYRW_INDEX_HELPER

const HelperRegistrar kIndexReduce(
    {"index_reduce", 1, 1, Type::UOp,
     [](RewriteContext& ctx, std::span<const Value> a) {
       return Value::uop(index_reduce(ctx, a[0].as_uop()));
     },
     "Index(Reduce(x), i...) -> REDUCE(Index(x, r..., i...), r...)"});

}  // namespace
}  // namespace tinyrw::rw
