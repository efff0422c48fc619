// Scheduling without running: Tensor::schedule's kernels; and the first stages of the rangeify
// pipeline (schedule/rangeify.h), checked against tinygrad's (a9069c17) realize map before range
// propagation (its "get realize" rewrite; the script is /work/notes/issue13-tg/realize_map.py).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <unordered_set>

#include "dsl/interp.h"
#include "dsl/resolve.h"
#include "dsl/ruleset.h"
#include "dsl/verify.h"
#include "ir/builders.h"
#include "ir/call.h"
#include "ir/graph.h"
#include "ir/kernel_info.h"
#include "ir/ops.h"
#include "ir/render.h"
#include "ir/viz.h"
#include "rules_gen/indexing.h"
#include "rules_gen/rangeify.h"
#include "rules_gen/spec.h"
#include "schedule/rangeify.h"
#include "tensor/function.h"
#include "tensor/tensor.h"
#include "tests/expect_error.h"

namespace tinyrw {
namespace {

// `a - a.sum(1, keepdim)`: the sum is broadcast, so it is a reduce kernel of its own (as in
// tinygrad), then the subtraction reading its buffer. Nothing runs, so the realize counters stay
// as they were.
TEST(Schedule, OneEntryPerKernelNothingRun) {
  const Tensor a = Tensor::ones({4, 4}).contiguous().realize();
  const Tensor out = a - a.sum({1}, true);
  const int before = last_kernel_count();
  const std::vector<ScheduleItem> s = Tensor::schedule({&out});
  ASSERT_EQ(s.size(), 2u);
  // each a kernel CALL of its AST, the reduce kernel first: the second reads its buffer
  for (const ScheduleItem& it : s) {
    ASSERT_EQ(it.node.op(), Op::Call);
    EXPECT_EQ(it.node.src(0), it.ast);
  }
  const UOp& reduce_output = s[0].node.src(1);  // PARAM 0: the buffer it stores
  EXPECT_NE(
      std::find(s[1].node.src().begin(), s[1].node.src().end(), reduce_output.after({s[0].node})),
      s[1].node.src().end());
  // each entry a kernel AST (index math over PARAMs, no movement op left, as spec_kernel_ast
  // wants); the subtraction writes one buffer and reads two (a, and the reduce kernel's output)
  for (const ScheduleItem& it : s) {
    verify(it.ast, rules::spec_kernel_ast());
    for (const UOp& u : toposort(it.ast)) EXPECT_FALSE(groups::movement().contains(u.op()));
  }
  EXPECT_EQ(KernelInfo::of(s[0].ast).name, "r_4_4");
  int params = 0;
  for (const UOp& u : toposort(s[1].ast)) params += u.op() == Op::Param;
  EXPECT_EQ(params, 3);
  EXPECT_EQ(last_kernel_count(), before);
}

// An assignment is one kernel whose entry is its STORE; a realized buffer is no kernel at all.
TEST(Schedule, AssignmentAndBuffer) {
  Tensor x = Tensor::ones({4}).contiguous().realize();
  EXPECT_TRUE(Tensor::schedule({&x}).empty());
  x.assign(x * 2);
  const std::vector<ScheduleItem> s = Tensor::schedule({&x});
  ASSERT_EQ(s.size(), 1u);
  // a kernel CALL carrying the assignment's number
  ASSERT_EQ(s[0].node.op(), Op::Call);
  ASSERT_EQ(x.uop().op(), Op::After);
  EXPECT_EQ(CallInfo::of(s[0].node).id, x.uop().src(1).arg().as_int());
  // the kernel stores into x's buffer (PARAM 0) what it reads from it (the same PARAM)
  verify(s[0].ast, rules::spec_kernel_ast());
  int params = 0;
  for (const UOp& u : toposort(s[0].ast)) params += u.op() == Op::Param;
  EXPECT_EQ(params, 1);
  EXPECT_EQ(x.data<float>(), std::vector<float>(4, 2.0f));  // scheduling ran nothing
}

// A shipped rules file loaded for the interpreter (its diagnostics thrown if it does not load).
std::shared_ptr<const rw::ResolvedProgram> shipped(const std::string& file) {
  rw::Diagnostics d;
  std::shared_ptr<const rw::ResolvedProgram> program =
      rw::load_rules(std::string(TINYRW_SOURCE_DIR "/rules/") + file, d);
  if (!program) throw std::runtime_error(d.render());
  return program;
}

UOp sink1(const UOp& u) { return UOp::sink(std::vector<UOp>{u}); }

// The realize map of the tensors' graph, before range propagation.
std::unordered_set<UOp> realize_map(const std::vector<const Tensor*>& ts) {
  std::vector<UOp> roots;
  // a view of a buffer state stands for that state (as Tensor::schedule and realize_all do)
  for (const Tensor* t : ts) {
    const UOp base = view_base(t->uop());
    roots.push_back(base != t->uop() && is_buffer_state(base) ? base : t->uop());
  }
  const KernelGraph g = get_kernel_graph(UOp::sink(roots));
  std::unordered_set<UOp> out;
  for (const auto& [u, axes] : g.ctx.realize_map) {
    EXPECT_FALSE(axes.has_value()) << "axes are range propagation's to decide";
    out.insert(u);
  }
  return out;
}
using Set = std::unordered_set<UOp>;

// tinygrad: {STORE} (the root's), for both. No REDUCE is realized up front (the old boundary
// rules realize every REDUCE).
TEST(RealizeMap, RowSumSubtractionAndSoftmaxRealizeOnlyTheRoot) {
  const Tensor a = Tensor::ones({4, 4}).contiguous().realize();
  const Tensor d = a - a.sum({1}, true);
  EXPECT_EQ(realize_map({&d}), Set{d.uop()});
  const Tensor x = Tensor::ones({4, 32}).contiguous().realize();
  const Tensor s = x.softmax(-1);
  EXPECT_EQ(realize_map({&s}), Set{s.uop()});
  // a buffer asked for is no kernel
  EXPECT_EQ(realize_map({&a}), Set{});
}

// tinygrad: {STORE(4, 4), STORE(4, 4)}: its CONTIGUOUS became a store before rangeify.
TEST(RealizeMap, ContiguousIsRealized) {
  const Tensor a = Tensor::ones({4, 4}).contiguous().realize();
  const Tensor c = (a + 1).contiguous();
  const Tensor out = c * 2;
  EXPECT_EQ(realize_map({&out}), (Set{c.uop(), out.uop()}));
}

// tinygrad: X.assign(X*2) {MUL, STORE}; xs=X[2:4], xs.assign(xs+1) {ADD, STORE}; Y.assign(a
// value not reading Y) {STORE}. The tensor assigned (an AFTER over its buffer) is no kernel.
TEST(RealizeMap, AnAssignmentAndItsValueWhenItReadsTheTarget) {
  Tensor x = Tensor::ones({4}).contiguous().realize();
  const Tensor v = x * 2;
  x.assign(v);
  const UOp store = x.uop().src(1);
  ASSERT_EQ(store.op(), Op::Store);
  EXPECT_EQ(realize_map({&x}), (Set{store, v.uop()}));

  Tensor big = Tensor::ones({4}).contiguous().realize();
  Tensor xs = big.shrink({{2, 4}});
  const Tensor w = xs + 1;
  xs.assign(w);
  UOp slice_store;
  for (const UOp& u : toposort(xs.uop()))
    if (u.op() == Op::Store) slice_store = u;
  EXPECT_EQ(realize_map({&xs}), (Set{slice_store, w.uop()}));

  const Tensor a = Tensor::ones({4, 4}).contiguous().realize();
  Tensor y = Tensor::ones({4}).contiguous().realize();
  y.assign(a.sum({1}) * 2);
  EXPECT_EQ(realize_map({&y}), Set{y.uop().src(1)});
}

// tinygrad realizes a custom kernel's computed arguments (a reshape of a buffer is a buffer);
// the kernel's output tensor (an AFTER over the CALL) is no kernel of its own.
TEST(RealizeMap, CustomKernelArgumentsComputedFirst) {
  const Tensor a = Tensor::ones({4}).contiguous().realize();
  const Tensor b = Tensor::ones({2, 2}).contiguous().realize();
  const Tensor sum = a + 1;
  auto scale = [](const std::vector<UOp>& p) {
    const UOp i = UOp::range(UOp::cint(4), 0);
    return kernel_sink({kernel_end(
        kernel_store(kernel_index(p[0], {i}), kernel_index(p[1], {i}) + kernel_index(p[2], {i})),
        {i})});
  };
  const Tensor out = custom_kernel({Tensor::empty({4}), sum, b.reshape({4})}, scale)[0];
  EXPECT_EQ(realize_map({&out}), Set{sum.uop()});
}

// ---- earliest rewrites

TEST(EarliestRewrites, DropGradientMarkers) {
  const Tensor a = Tensor::ones({4}).contiguous().realize();
  const Tensor d = (a.detach() + a.contiguous_backward()) * 2;
  EXPECT_EQ(earliest_rewrites(sink1(d.uop())), sink1(((a + a) * 2).uop()));
}

// A reduction of no elements is its identity; a tensor of no elements a constant.
TEST(EarliestRewrites, SizeZero) {
  const Tensor e = Tensor::ones({4, 0}).contiguous();
  auto earliest = [](const Tensor& t) { return earliest_rewrites(sink1(t.uop())).src(0); };
  EXPECT_EQ(earliest(e.sum({1})), Tensor::full({4}, 0.0).uop());
  EXPECT_EQ(earliest(e.prod({1})), Tensor::full({4}, 1.0).uop());
  // (tinyrw refuses a max over no elements when it is built)
  EXPECT_EQ(earliest(e + 1), Tensor::full({4, 0}, 0.0).uop());
  // the realize map then has nothing to compute but the constant root
  const Tensor z = e.sum({1});
  const KernelGraph g = get_kernel_graph(sink1(z.uop()));
  EXPECT_EQ(g.ctx.realize_map.size(), 1u);
  EXPECT_EQ(g.ctx.realize_map.begin()->first, Tensor::full({4}, 0.0).uop());
}

// STORE(RESHAPE(t), RESHAPE(v)) with t and v of one shape stores v into t; an assignment chain
// orders the buffer, with views above it.
TEST(EarliestRewrites, StoreRules) {
  Tensor x = Tensor::ones({4}).contiguous().realize();
  const Tensor v = Tensor::ones({4}).contiguous();
  const UOp st = UOp::make(Op::Store, dtypes::void_,
                           {x.uop().reshape({2, 2}), v.uop().reshape({2, 2})}, Arg::integer(7));
  const UOp want = UOp::make(Op::Store, dtypes::void_, {x.uop(), v.uop()}, Arg::integer(7));
  EXPECT_EQ(earliest_rewrites(sink1(st)), sink1(want));
  x.assign(v);
  const UOp once = x.uop();
  // an assignment chain orders the buffer itself, the view above it: AFTER(BUFFER, STORE) (a
  // root that is the whole view: the chain)
  const UOp chain = earliest_rewrites(sink1(once)).src(0);
  ASSERT_EQ(chain.op(), Op::After);
  EXPECT_EQ(chain.src(0).op(), Op::Buffer);
  const UOp viewed = earliest_rewrites(sink1(once.flip({true}))).src(0);
  ASSERT_EQ(viewed.op(), Op::Flip);
  EXPECT_EQ(viewed.src(0).op(), Op::Reshape);
  EXPECT_EQ(viewed.src(0).src(0), chain);
}

// Both executors of rules/rangeify.rw's `earliest` and `realize_map` give the same graphs and
// realize maps (the compiled one is what the stages run by default).
TEST(RangeifyStages, InterpretedRulesAgreeWithCompiled) {
  const std::shared_ptr<const rw::ResolvedProgram> program = shipped("rangeify.rw");
  const rw::InterpretedMatcher earliest(program, *program->find("earliest"));
  const rw::InterpretedMatcher realize(program, *program->find("realize_map"));
  const Tensor a = Tensor::ones({4, 4}).contiguous().realize();
  Tensor x = Tensor::ones({4}).contiguous().realize();
  x.assign(x * 2);
  const Tensor e = Tensor::ones({4, 0}).contiguous();
  const Tensor k = custom_kernel({Tensor::empty({4}), x + 1}, [](const std::vector<UOp>& p) {
    const UOp i = UOp::range(UOp::cint(4), 0);
    return kernel_sink(
        {kernel_end(kernel_store(kernel_index(p[0], {i}), kernel_index(p[1], {i})), {i})});
  })[0];
  const std::vector<Tensor> programs{a - a.sum({1}, true),
                                     a.softmax(-1),
                                     (a.detach() + 1).contiguous() * 2,
                                     x,
                                     e.sum({1}),
                                     e + 1,
                                     k};
  for (const Tensor& t : programs) {
    const UOp sink = sink1(t.uop());
    const UOp early = earliest_rewrites(sink);
    EXPECT_EQ(earliest_rewrites(sink, &earliest), early);
    rw::IndexingContext compiled, interpreted;
    generate_realize_map(early, compiled);
    generate_realize_map(early, interpreted, &realize);
    EXPECT_EQ(compiled.realize_map, interpreted.realize_map);
    EXPECT_FALSE(compiled.realize_map.empty());
  }
}

// ---- range propagation (S8, first part)

// An index as debug_rangeify.txt prints it: a gated one as "(i if valid else Invalid)" (render()
// writes no Invalid).
std::string index_str(const UOp& i) {
  if (i.op() == Op::Where && i.src(2).op() == Op::Const && i.src(2).arg().is_invalid())
    return "(" + render(i.src(1)) + " if " + render(i.src(0)) + " else Invalid)";
  return render(i);
}

// The movement math of rules/rangeify.rw, one op at a time (tinygrad's apply_movement_op; the
// expected index expressions are debug_rangeify.txt's).
TEST(RangePropagation, MovementOps) {
  const UOp buf = buffer_uop(dtypes::float32, 1, 128, "CPU");
  const UOp r0 = UOp::range(UOp::cint(4), 0), r1 = UOp::range(UOp::cint(32), 1);
  // (128,) viewed as (4, 32): [(r0*32+r1)] -> [r0][r1]
  EXPECT_EQ(apply_movement_op(buf.reshape({4, 32}), {r0, r1}),
            std::vector<UOp>{r0 * UOp::cint(32) + r1});
  // (4, 32) permuted to (32, 4): the two ranges swap
  const UOp m = buffer_view(buf, {4, 32});
  EXPECT_EQ(apply_movement_op(m.permute({1, 0}), {r1, r0}), (std::vector<UOp>{r0, r1}));
  // a shrink offsets its axis; a broadcast axis reads index 0; a flip counts down
  const UOp r2 = UOp::range(UOp::cint(15), 2);
  const UOp v16 = buffer_view(buffer_uop(dtypes::float32, 2, 16, "CPU"), {16});
  EXPECT_EQ(apply_movement_op(v16.shrink({1}, {15}), {r2}), std::vector<UOp>{r2 + UOp::cint(1)});
  const UOp col = buffer_view(buffer_uop(dtypes::float32, 3, 4, "CPU"), {4, 1});
  EXPECT_EQ(apply_movement_op(col.expand({4, 32}), {r0, r1}), (std::vector<UOp>{r0, UOp::cint(0)}));
  const UOp r3 = UOp::range(UOp::cint(16), 3);
  const std::vector<UOp> flipped = apply_movement_op(v16.flip({true}), {r3});
  ASSERT_EQ(flipped.size(), 1u);
  EXPECT_EQ(render(flipped[0]), "(L3*-1+15)");
  // a view of a constant has no ranges
  EXPECT_TRUE(apply_movement_op(Tensor::full({4, 32}, 1.0).uop().src(0), {r0, r1}).empty());
  // a pad reads its source shifted back, gated to where the source is (tinygrad's
  // `(r-off).valid(...)`); an axis it leaves alone passes its range through
  const UOp r4 = UOp::range(UOp::cint(18), 4);
  const std::vector<UOp> padded = apply_movement_op(v16.pad({1}, {18}), {r4});
  ASSERT_EQ(padded.size(), 1u);
  EXPECT_EQ(index_str(padded[0]), "((L4+-1) if ((L4>=1)&(L4<17)) else Invalid)");
  const UOp m2 = buffer_view(buf, {4, 32});
  const std::vector<UOp> padded2 =
      apply_movement_op(m2.pad({0, 0}, {4, 33}), {r0, UOp::range(UOp::cint(33), 5)});
  ASSERT_EQ(padded2.size(), 2u);
  EXPECT_EQ(padded2[0], r0);
  EXPECT_EQ(index_str(padded2[1]), "(L5 if (L5<32) else Invalid)");
}

// A node's range map entry as debug_rangeify.txt prints it: "[in]... -> [out]...".
std::string ranges_of(const rw::IndexingContext& ctx, const UOp& x) {
  const auto& [in, out] = ctx.range_map.at(x);
  std::string s;
  for (const UOp& r : in) s += "[" + index_str(r) + "]";
  s += " ->";
  for (const UOp& r : out) s += " [" + index_str(r) + "]";
  return s;
}

// "op(shape)[axes]" of every realized node after range propagation, sorted.
std::vector<std::string> realized_after_rangeify(const Tensor& t) {
  KernelGraph g = get_kernel_graph(sink1(t.uop()));
  run_rangeify(g.sink, g.ctx);
  std::vector<std::string> out;
  for (const auto& [u, axes] : g.ctx.realize_map) {
    std::string e = std::string(op_name(u.op())) + "(";
    for (const SInt& d : u.shape()) e += std::to_string(d.value()) + ",";
    e += ")[";
    for (int a : axes.value()) e += std::to_string(a);
    out.push_back(e + "]");
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A pad as tinygrad's range map for `a.pad(((1,1),))+1` (/work/notes/issue13-tg/pad_cat.txt): the
// PAD's source is read at its range less the offset where that is inside the source, Invalid
// elsewhere; the buffer view under it is indexed alike; nothing is realized but the root. A cat
// (tinyrw's pads each piece and adds; tinygrad's now stacks) gates each piece the same way. Both
// executors of `pad_ranges` and `lift_gates` agree.
TEST(RangePropagation, PadAndCatGateTheirSources) {
  const Tensor a = Tensor::ones({8}).contiguous().realize();
  const Tensor b = Tensor::ones({8}).contiguous().realize();
  const Tensor p = a.pad({{1, 1}}) + 1;
  KernelGraph g = get_kernel_graph(sink1(p.uop()));
  run_rangeify(g.sink, g.ctx);
  EXPECT_EQ(ranges_of(g.ctx, p.uop().src(0)),
            "[((L0+-1) if ((L0>=1)&(L0<9)) else Invalid)] -> [L0]");
  EXPECT_EQ(ranges_of(g.ctx, a.uop()),
            "[((L0+-1) if ((L0>=1)&(L0<9)) else Invalid)] -> "
            "[((L0+-1) if ((L0>=1)&(L0<9)) else Invalid)]");
  EXPECT_EQ(realized_after_rangeify(p), std::vector<std::string>{"Add(10,)[0]"});
  // a.cat(b): (8,) twice, padded to (16,) and added
  const Tensor c = Tensor::cat({a, b});
  KernelGraph gc = get_kernel_graph(sink1(c.uop()));
  run_rangeify(gc.sink, gc.ctx);
  ASSERT_EQ(c.uop().op(), Op::Add);
  EXPECT_EQ(ranges_of(gc.ctx, c.uop().src(0)), "[(L0 if (L0<8) else Invalid)] -> [L0]");
  EXPECT_EQ(ranges_of(gc.ctx, c.uop().src(1)), "[((L0+-8) if (L0>=8) else Invalid)] -> [L0]");
  EXPECT_EQ(realized_after_rangeify(c), std::vector<std::string>{"Add(16,)[0]"});
  // (2, 4) padded on both axes: the gates stay outermost through the RESHAPE of the buffer
  // (tinygrad's range map, pad_cat.txt, with its r0>=1 written (r0<1)!=True)
  const Tensor m = Tensor::ones({2, 4}).contiguous().realize();
  const Tensor pm = m.pad({{1, 1}, {0, 2}}) + 1;
  KernelGraph gm = get_kernel_graph(sink1(pm.uop()));
  run_rangeify(gm.sink, gm.ctx);
  EXPECT_EQ(ranges_of(gm.ctx, m.uop()),
            "[((L0*4+L1+-4) if ((L1<4)&((L0>=1)&(L0<3))) else Invalid)] -> "
            "[((L0+-1) if ((L0>=1)&(L0<3)) else Invalid)] [(L1 if (L1<4) else Invalid)]");
  EXPECT_EQ(realized_after_rangeify(pm), std::vector<std::string>{"Add(4,6,)[01]"});
  // the interpreted rules/indexing.rw moves the index and lifts gates as the compiled one
  const std::shared_ptr<const rw::ResolvedProgram> program = shipped("indexing.rw");
  const rw::InterpretedMatcher pad(program, *program->find("pad_ranges"));
  const UOp q = p.uop().src(0).index({UOp::range(UOp::cint(10), 0)});
  RewriteContext rctx;
  const std::optional<rw::Value> want = rules::pad_ranges().apply(q, rctx, nullptr);
  const std::optional<rw::Value> got = pad.apply(q, rctx, nullptr);
  ASSERT_TRUE(want && got);
  EXPECT_EQ(got->as_uop(), want->as_uop());
  const rw::InterpretedMatcher lift(program, *program->find("lift_gates"));
  const UOp invalid = UOp::constant(dtypes::index, Arg::invalid());
  const UOp r0 = UOp::range(UOp::cint(4), 0), r1 = UOp::range(UOp::cint(6), 1);
  const UOp g0 = r0.ge(UOp::cint(1)).where(r0 - UOp::cint(1), invalid);
  const UOp g1 = r1.lt(UOp::cint(4)).where(r1, invalid);
  const UOp flat = sink1(g0 * UOp::cint(4) + g1);
  const UOp lifted = graph_rewrite(flat, &rules::lift_gates(), {.bottom_up = true});
  EXPECT_EQ(graph_rewrite(flat, &lift, {.bottom_up = true}), lifted);
  EXPECT_EQ(lifted.src(0).op(), Op::Where);
  EXPECT_EQ(lifted.src(0).src(2), invalid);
}

// The nodes tinygrad's range propagation realizes (its `***` lines in debug_rangeify.txt), the
// root standing for its STORE: the REDUCE under a broadcast, the input view two consumers index
// differently (cleanups remove it later), and for softmax the EXP2 both reductions' users read.
TEST(RangePropagation, RealizedNodesAsTinygrad) {
  const Tensor a = Tensor::ones({4, 4}).contiguous().realize();
  EXPECT_EQ(realized_after_rangeify(a - a.sum({1})),
            (std::vector<std::string>{"Add(4,4,)[01]", "Reduce(4,)[0]", "Reshape(4,4,)[01]"}));
  const Tensor x = Tensor::ones({4, 32}).contiguous().realize();
  EXPECT_EQ(realized_after_rangeify(x.softmax(-1)),
            (std::vector<std::string>{"Exp2(4,32,)[01]", "Mul(4,32,)[01]", "Reduce(4,)[0]",
                                      "Reduce(4,)[0]", "Reshape(4,32,)[01]"}));
  // x - x.sum() on (16,): no output axis to realize, so the sum is recomputed per element
  const Tensor v = Tensor::ones({16}).contiguous().realize();
  const std::vector<std::string> r = realized_after_rangeify(v - v.sum());
  EXPECT_TRUE(std::none_of(r.begin(), r.end(),
                           [](const std::string& e) { return e.rfind("Reduce", 0) == 0; }));
}

// How many computed nodes range propagation realizes besides the root (a realized view of an
// input buffer is no kernel: cleanups remove it), for the reducing rows of the kernel
// table: tinygrad's kernel count less the root's kernel. A fused reduction stays unrealized.
TEST(RangePropagation, KernelsAsTinygradsCounts) {
  auto reduces = [](const Tensor& t) {
    KernelGraph g = get_kernel_graph(sink1(t.uop()));
    run_rangeify(g.sink, g.ctx);
    int n = 0;
    for (const auto& [u, axes] : g.ctx.realize_map)
      n += u != t.uop() && movement_base(u).op() != Op::Buffer;
    return n;
  };
  const Tensor a4 = Tensor::ones({4, 4}).contiguous().realize();
  const Tensor b41 = Tensor::ones({4, 1}).contiguous().realize();
  EXPECT_EQ(reduces(a4.sum({1}, true) + b41), 0);  // r_4_4
  const Tensor x = Tensor::ones({4, 32}).contiguous().realize();
  const Tensor y = Tensor::ones({4, 32}).contiguous().realize();
  EXPECT_EQ(reduces(y.sum({-1}) + x.sum({-1})), 0);  // r_4_32_32
  EXPECT_EQ(reduces(x.sum({-1}) + x.max({-1})), 0);  // r_4_32_32
  const Tensor a8 = Tensor::ones({8, 8}).contiguous().realize();
  EXPECT_EQ(reduces(a8.sum({0}) + a8.sum({1})), 0);          // r_8_8_8
  EXPECT_EQ(reduces((a8.sum({1}, true) * a8).sum({1})), 1);  // r_8_8 r_8_8
  const Tensor m = Tensor::ones({4, 16}).contiguous().realize();
  const Tensor w = Tensor::ones({16, 8}).contiguous().realize();
  EXPECT_EQ(reduces(m.matmul(w).relu()), 0);  // r_4_8_16
  const Tensor w2 = Tensor::ones({8, 8}).contiguous().realize();
  EXPECT_EQ(reduces(m.matmul(w).relu().matmul(w2)), 1);  // r_4_16_16 r_4_8_16
  // tinygrad realizes var's scaled mean (sum * 1/n), not its REDUCE: one kernel either way
  EXPECT_EQ(reduces(x.var({-1})), 1);       // x.std: r_4_32 r_4_32
  EXPECT_EQ(reduces(a4 - a4.sum({1})), 1);  // r_4_4 E_4_4
  // r_4_32 r_4_32 E_4_32, and the EXP2's STAGE that S10's cleanups remove
  EXPECT_EQ(reduces(x.softmax(-1)), 3);
  const Tensor v = Tensor::ones({16}).contiguous().realize();
  EXPECT_EQ(reduces(v - (v * 2).sum()), 0);  // r_16_16: the sum and its source recomputed
}

// Both executors of rules/indexing.rw's `range_step` give the same ranges and realized axes; a
// REDUCE's sources are indexed by a new REDUCE range first, then its output ranges.
TEST(RangePropagation, InterpretedRulesAgreeWithCompiled) {
  const std::shared_ptr<const rw::ResolvedProgram> program = shipped("indexing.rw");
  const rw::InterpretedMatcher step(program, *program->find("range_step"));
  const Tensor a = Tensor::ones({4, 4}).contiguous().realize();
  const Tensor x = Tensor::ones({4, 32}).contiguous().realize();
  const Tensor v = Tensor::ones({16}).contiguous().realize();
  const std::vector<Tensor> programs{
      a - a.sum({1}),
      x.softmax(-1),
      v - (v * 2).sum(),
      (a.sum({1}, true) * a).sum({1}),
      a.sum({0}) + a.sum({1}),
      x.var({-1}),
      a.permute({1, 0}).flip({0}).shrink({{1, 3}, {0, 4}}).reshape({8}).sum()};
  for (const Tensor& t : programs) {
    const KernelGraph g = get_kernel_graph(sink1(t.uop()));
    rw::IndexingContext compiled = g.ctx, interpreted = g.ctx;
    run_rangeify(g.sink, compiled);
    run_rangeify(g.sink, interpreted, &step);
    EXPECT_EQ(compiled.range_map, interpreted.range_map);
    EXPECT_EQ(compiled.realize_map, interpreted.realize_map);
    EXPECT_EQ(compiled.next_range, interpreted.next_range);
    EXPECT_FALSE(compiled.range_map.empty());
  }
  const Tensor s = a.sum({1});
  KernelGraph g = get_kernel_graph(sink1(s.uop()));
  run_rangeify(g.sink, g.ctx);
  const auto& [in, out] = g.ctx.range_map.at(s.uop());
  ASSERT_EQ(in.size(), 2u);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(axis_type_of(in[0]), AxisType::Reduce);
  EXPECT_EQ(in[0].src(0), UOp::cint(4));
  EXPECT_EQ(in[1], out[0]);
  // a size-1 axis gets no loop: index 0
  const Tensor k = a.sum({1}, true);
  KernelGraph gk = get_kernel_graph(sink1(k.uop()));
  run_rangeify(gk.sink, gk.ctx);
  const std::vector<UOp>& kout = gk.ctx.range_map.at(k.uop()).second;
  ASSERT_EQ(kout.size(), 2u);
  EXPECT_EQ(kout[0].op(), Op::Range);
  EXPECT_EQ(kout[1], UOp::cint(0));
}

// ---- apply rangeify (S9, first part)

// The graph after apply rangeify, in both executors of rules/indexing.rw's `apply_rangeify`.
UOp applied_graph(const Tensor& t, const rw::RuleSetMatcher* rules = nullptr) {
  KernelGraph g = get_kernel_graph(sink1(t.uop()));
  run_rangeify(g.sink, g.ctx);
  return apply_rangeify(g.sink, g.ctx, rules);
}

// a.sum(1, keepdim) + b: one reduction over a REDUCE range of a's buffer, read through INDEX as b's
// is; the root realized as STAGE(value, r0, 0) (its size-1 axis is index 0); no view left. A PAD
// reads its source where its gate holds, else 0.
TEST(ApplyRangeify, ReduceAndRootStage) {
  const std::shared_ptr<const rw::ResolvedProgram> program = shipped("indexing.rw");
  const rw::InterpretedMatcher apply(program, *program->find("apply_rangeify"));
  const Tensor a = Tensor::ones({4, 4}).contiguous().realize();
  const Tensor b = Tensor::ones({4, 1}).contiguous().realize();
  const UOp out = applied_graph(a.sum({1}, true) + b);
  EXPECT_EQ(applied_graph(a.sum({1}, true) + b, &apply), out);
  int reduces = 0;
  for (const UOp& u : toposort(out)) {
    EXPECT_FALSE(groups::movement().contains(u.op()) && u.op() != Op::Stack) << op_name(u.op());
    if (u.op() == Op::Reduce) {
      ++reduces;
      EXPECT_EQ(u.arg(), Arg::tuple({Arg::op(Op::Add), Arg::integer(0)}));
      ASSERT_EQ(u.src().size(), 2u);
      EXPECT_EQ(axis_type_of(u.src(1)), AxisType::Reduce);
      EXPECT_EQ(u.src(0).op(), Op::Index);
    }
  }
  EXPECT_EQ(reduces, 1);
  const UOp root = out.src(0);
  ASSERT_EQ(root.op(), Op::Stage);
  EXPECT_EQ(root.src(0).op(), Op::Add);
  ASSERT_EQ(root.src().size(), 3u);
  EXPECT_EQ(root.src(1).op(), Op::Range);
  EXPECT_EQ(root.src(2), UOp::cint(0));
  EXPECT_EQ(root.src(0).src(1).op(), Op::Index);  // b's buffer at r0
  // softmax: a STAGE for each node range propagation realized (both REDUCEs, the EXP2, the input
  // view two consumers index differently, the root), as debug_rangeify.txt before cleanups
  const Tensor x = Tensor::ones({4, 32}).contiguous().realize();
  std::map<Op, int> staged;
  int sm_reduces = 0;
  for (const UOp& u : toposort(applied_graph(x.softmax(-1)))) {
    EXPECT_FALSE(groups::movement().contains(u.op()) && u.op() != Op::Stack) << op_name(u.op());
    if (u.op() == Op::Stage) ++staged[u.src(0).op()];
    sm_reduces += u.op() == Op::Reduce;
  }
  EXPECT_EQ(staged,
            (std::map<Op, int>{{Op::Reduce, 2}, {Op::Exp2, 1}, {Op::Index, 1}, {Op::Mul, 1}}));
  EXPECT_EQ(sm_reduces, 2);
  const Tensor v = Tensor::ones({8}).contiguous().realize();
  const UOp padded = applied_graph(v.pad({{1, 1}}) + 1);
  EXPECT_EQ(applied_graph(v.pad({{1, 1}}) + 1, &apply), padded);
  const UOp w = padded.src(0).src(0).src(0);
  ASSERT_EQ(w.op(), Op::Where);
  EXPECT_EQ(render(w.src(0)), "((L0>=1)&(L0<9))");
  EXPECT_EQ(w.src(1).op(), Op::Index);
  EXPECT_EQ(index_str(w.src(1).src(1)), "((L0+-1) if ((L0>=1)&(L0<9)) else Invalid)");
  EXPECT_EQ(w.src(2), UOp::constant(dtypes::float32, Arg::real(0.0)));
}

// ---- cleanups (remove_bufferize, tinygrad's cost model)

// The ops of the nodes whose STAGE the cleanups keep, in both executors of rules/rangeify.rw's
// `remove_bufferize` (each STAGE's tag names its node).
std::map<Op, int> kept_after_cleanups(const Tensor& t, const rw::RuleSetMatcher* rules) {
  KernelGraph g = get_kernel_graph(sink1(t.uop()));
  run_rangeify(g.sink, g.ctx);
  const UOp cleaned = cleanups(apply_rangeify(g.sink, g.ctx), rules);
  std::map<Op, int> kept;
  for (const UOp& u : toposort(cleaned))
    if (u.op() == Op::Stage)
      ++kept[g.ctx.staged.at(static_cast<size_t>(u.arg().items()[1].as_int())).op()];
  return kept;
}

TEST(Cleanups, CostModelAsTinygrad) {
  const std::shared_ptr<const rw::ResolvedProgram> program = shipped("rangeify.rw");
  const rw::InterpretedMatcher remove(program, *program->find("remove_bufferize"));
  for (const rw::RuleSetMatcher* rules : {static_cast<const rw::RuleSetMatcher*>(nullptr),
                                          static_cast<const rw::RuleSetMatcher*>(&remove)}) {
    // softmax: the EXP2 and the input view, read at two indexes, are recomputed (1 buffer, no
    // REDUCE); the two REDUCEs' values (broadcast, each with a REDUCE over a buffer) and the root
    // stay: 3 kernels
    const Tensor x = Tensor::ones({4, 32}).contiguous().realize();
    std::map<Op, int> sm = kept_after_cleanups(x.softmax(-1), rules);
    int total = 0;
    for (const auto& [op, n] : sm) total += n;
    EXPECT_EQ(total, 3);
    EXPECT_FALSE(sm.contains(Op::Exp2));
    // e = exp(a+b+c) read at two offsets: recomputed from 3 buffers, kept from 4
    std::vector<Tensor> in;
    for (int k = 0; k < 4; ++k) in.push_back(Tensor::ones({16}).contiguous().realize());
    const Tensor e3 = (in[0] + in[1] + in[2]).exp(), e4 = (in[0] + in[1] + in[2] + in[3]).exp();
    EXPECT_EQ(kept_after_cleanups(e3.shrink({{1, 16}}) + e3.shrink({{0, 15}}), rules),
              (std::map<Op, int>{{Op::Add, 1}}));
    EXPECT_EQ(kept_after_cleanups(e4.shrink({{1, 16}}) + e4.shrink({{0, 15}}), rules),
              (std::map<Op, int>{{Op::Add, 1}, {Op::Exp2, 1}}));
    // a staged constant folds: no STAGE of a CONST is kept
    const Tensor c = Tensor::full({4, 1}, 2.0);
    const Tensor a = Tensor::ones({4, 4}).contiguous().realize();
    const std::map<Op, int> k = kept_after_cleanups(a.sum({1}, true) * c + c.expand({4, 4}), rules);
    EXPECT_FALSE(k.contains(Op::Const) || k.contains(Op::Expand) || k.contains(Op::Reshape));
  }
}

// ---- add buffers and split kernels

// The kernel graph of each program holds the kernels realize() runs (it runs that graph): as many
// CALLs, each a kernel AST that passes spec_kernel_ast, equal to the ASTs realize() compiled; every
// argument a buffer, or a buffer ordered after the kernel that fills it. Nothing is run to build
// it.
TEST(KernelGraph, CallsAsRealizeRuns) {
  set_default_device("INTERP");
  const Tensor a = Tensor::ones({4, 4}).contiguous().realize();
  const Tensor b = Tensor::ones({4, 1}).contiguous().realize();
  const Tensor x = Tensor::ones({4, 32}).contiguous().realize();
  const Tensor w = Tensor::ones({32, 8}).contiguous().realize();
  const std::vector<Tensor> programs = {
      a.sum({1}, true) + b,     a - a.sum({1}), x.softmax(-1),
      x.matmul(w).relu(),       x - x.sum(),    (x.pad({{1, 1}, {0, 0}}) + 1).sum({0}),
      x.sum({-1}) + x.max({-1})};
  const std::shared_ptr<const rw::ResolvedProgram> program = shipped("rangeify.rw");
  const rw::InterpretedMatcher split(program, *program->find("split_kernels"));
  for (const Tensor& t : programs) {
    KernelGraph g = get_kernel_graph(sink1(t.uop()));
    g.ctx.device = "INTERP";
    const UOp graph = kernel_graph(g);
    verify(graph, rules::spec_kernel_graph(), /*enter_calls=*/false);
    std::vector<std::string> asts, names;
    for (const UOp& u : toposort(graph, nullptr, /*enter_calls=*/false))
      if (u.op() == Op::Call) {
        const UOp& ast = u.src(0);
        verify(ast, rules::spec_kernel_ast());
        asts.push_back(ast.repr(1000));
        names.push_back(KernelInfo::of(ast).name);
        EXPECT_EQ(CallInfo::of(u).name, names.back());
        for (size_t k = 1; k < u.nsrc(); ++k)
          EXPECT_TRUE(u.src(k).op() == Op::Buffer || u.src(k).op() == Op::After)
              << op_name(u.src(k).op());
      }
    // the interpreted split_kernels splits the same kernels: equal UOps
    KernelGraph h = get_kernel_graph(sink1(t.uop()));
    h.ctx.device = "INTERP";
    run_rangeify(h.sink, h.ctx);
    const UOp buffers = add_buffers(cleanups(apply_rangeify(h.sink, h.ctx)), h.ctx);
    EXPECT_EQ(graph_rewrite(buffers, &split, {.enter_calls = false}), graph);
    Tensor(t).realize();
    // (the kernels' own names: realize names each again after its opts)
    std::vector<std::string> ran_asts, ran_names;
    for (const UOp& ast : last_kernel_asts()) {
      ran_asts.push_back(ast.repr(1000));
      ran_names.push_back(KernelInfo::of(ast).name);
    }
    for (auto* v : {&asts, &ran_asts, &names, &ran_names}) std::sort(v->begin(), v->end());
    EXPECT_EQ(asts, ran_asts) << asts.size() << " kernels";
    EXPECT_EQ(names, ran_names);
  }
  set_default_device("");
}

// split_kernels on a hand-made AFTER of two effects and a source that is none (kept as it is), in
// both executors: each effect a kernel CALL carrying its STORE's number, RANGE ids renumbered
// 0..n-1 by their old order (id 2 before id 5), PARAM slots in first-use order (the STORE's target
// first); two RANGEs of one kernel with one id are refused.
TEST(KernelGraph, SplitKernelsRenumbersAndSlots) {
  const std::shared_ptr<const rw::ResolvedProgram> program = shipped("rangeify.rw");
  const rw::InterpretedMatcher interp(program, *program->find("split_kernels"));
  const rw::DifferentialMatcher split(rules::split_kernels(), interp);
  const UOp b = buffer_uop(dtypes::float32, 1, 32, "CPU"),
            c = buffer_uop(dtypes::float32, 2, 32, "CPU");
  const UOp outer = UOp::range(UOp::cint(4), 5), inner = UOp::range(UOp::cint(8), 2);
  const UOp at = outer * UOp::cint(8) + inner;
  const UOp st =
      UOp::make(Op::Store, dtypes::void_,
                {b.index({at}), c.index({at}) + c.index({at}).const_like(1.0)}, Arg::integer(7));
  const UOp loops = UOp::make(Op::End, dtypes::void_, {st, outer, inner});
  const UOp one = UOp::make(Op::Store, dtypes::void_,
                            {b.index({UOp::cint(0)}), c.index({UOp::cint(0)})}, Arg::integer(9));
  const UOp out =
      graph_rewrite(sink1(b.after({loops, one, c})), &split, {.enter_calls = false}).src(0);
  ASSERT_EQ(out.op(), Op::After);
  ASSERT_EQ(out.nsrc(), 4u);
  EXPECT_EQ(out.src(0), b);
  EXPECT_EQ(out.src(3), c);
  for (size_t k : {1u, 2u}) {
    const UOp& call = out.src(k);
    ASSERT_EQ(call.op(), Op::Call);
    EXPECT_TRUE(CallInfo::of(call).kernel);
    EXPECT_EQ(CallInfo::of(call).id, k == 1 ? 7 : 9);
    EXPECT_EQ(CallInfo::of(call).name, KernelInfo::of(call.src(0)).name);
    ASSERT_EQ(call.nsrc(), 3u);  // the AST, then b (slot 0: the target), c (slot 1)
    EXPECT_EQ(call.src(1), b);
    EXPECT_EQ(call.src(2), c);
    verify(call.src(0), rules::spec_kernel_ast());
  }
  std::map<int64_t, int64_t> id_of_size;
  for (const UOp& u : toposort(out.src(1).src(0)))
    if (u.op() == Op::Range)
      id_of_size[static_cast<int64_t>(u.src(0).arg().as_int())] =
          static_cast<int64_t>(u.arg().items()[0].as_int());
  EXPECT_EQ(id_of_size, (std::map<int64_t, int64_t>{{8, 0}, {4, 1}}));
  EXPECT_EQ(KernelInfo::of(out.src(1).src(0)).name, "E_8_4");  // loops named in id order
  const UOp twin = UOp::range(UOp::cint(4), 2);                // another loop numbered 2
  const UOp bad = UOp::make(Op::End, dtypes::void_,
                            {UOp::make(Op::Store, dtypes::void_,
                                       {b.index({twin * UOp::cint(8) + inner}), c.index({inner})}),
                             twin, inner});
  expect_error([&] { (void)graph_rewrite(sink1(b.after({bad})), &split, {}); },
               "two RANGEs of one kernel share an id");
}

// Each stage is a named step in VIZ, its matches attributed to rules/rangeify.rw's rules.
TEST(RangeifyStages, VizShowsEachStage) {
  const Tensor a = Tensor::ones({4, 4}).contiguous().realize();
  const Tensor d = (a.detach() + 1).contiguous() * 2;
  const Tensor x = Tensor::ones({4, 32}).contiguous().realize();
  viz::clear();
  viz::enable();
  (void)get_kernel_graph(sink1(d.uop()));
  KernelGraph g = get_kernel_graph(sink1(x.softmax(-1).uop()));
  (void)kernel_graph(g);
  viz::disable();
  const auto doc = nlohmann::json::parse(viz::to_json());
  viz::clear();
  const std::map<std::string, std::string> file = {
      {"earliest rewrites", "rules/rangeify.rw"}, {"realize map", "rules/rangeify.rw"},
      {"apply rangeify", "rules/indexing.rw"},    {"cleanups", "rules/rangeify.rw"},
      {"add buffers", "rules/rangeify.rw"},       {"split kernels", "rules/rangeify.rw"}};
  std::map<std::string, std::set<std::string>> rules;
  for (const auto& call : doc["calls"]) {
    const auto f = file.find(call["name"]);
    if (f == file.end()) continue;
    for (const auto& m : call["matches"]) {
      rules[call["name"]].insert(m["rule"]["name"]);
      EXPECT_EQ(m["rule"]["file"], f->second) << call["name"];
    }
  }
  EXPECT_EQ(rules["earliest rewrites"], std::set<std::string>{"earliest.gradient_markers"});
  EXPECT_EQ(rules["realize map"],
            (std::set<std::string>{"realize_map.contiguous", "realize_map.root"}));
  // softmax: the EXP2 and the input view recomputed; the reduces and the root stored
  EXPECT_EQ(rules["cleanups"], std::set<std::string>{"remove_bufferize.remove"});
  EXPECT_EQ(rules["add buffers"], (std::set<std::string>{"add_buffers.read", "add_buffers.stage"}));
  EXPECT_TRUE(rules["apply rangeify"].contains("apply_rangeify.reduce"));
  EXPECT_EQ(rules["split kernels"], std::set<std::string>{"split_kernels.effects"});
}

}  // namespace
}  // namespace tinyrw
