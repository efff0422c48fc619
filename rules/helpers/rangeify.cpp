// The index math of rules/rangeify.rw that its rules cannot write (each says why): each helper
// takes the Index(view, i0, i1, ...) node and returns the Index one level down.
#include "rules/helpers/rangeify.h"
#include "dsl/value.h"

namespace tinyrw::rw {
namespace {

std::vector<UOp> idx_of(const UOp& i) {
  return std::vector<UOp>(i.src().begin() + 1, i.src().end());
}

UOp make_index(const UOp& x, const std::vector<UOp>& idx) { return x.index(idx); }
Dims shape_of(const UOp& x) { return to_dims(x.shape()); }
UOp ci(int64_t v) { return UOp::cint(v); }

// REDUCE over the first n axes: new ranges for them, a reduction of the source indexed by them.
// Kept here: the new ranges are numbered by the pass's RangeifyContext.
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

const HelperRegistrar kIndexReduce({"index_reduce", 1, 1, Type::UOp,
                                    [](RewriteContext& ctx, std::span<const Value> a) {
                                      return Value::uop(index_reduce(ctx, a[0].as_uop()));
                                    },
                                    "Index(Reduce(x), i...) -> REDUCE(Index(x, r..., i...), r...)"},
                                   {Type::UOp});

}  // namespace
}  // namespace tinyrw::rw
