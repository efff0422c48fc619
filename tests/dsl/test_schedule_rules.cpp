// The realize-map rules (rules/rangeify.rw's `realize_map`) on hand-made schedule facts, in both
// executors at once (the differential matcher: the compiled set and the interpreter must agree on
// the result and on the rule that fired): each rule fires where its fact holds, and names the
// nodes it realizes (for good: the cleanups never recompute them). tests/tensor checks the
// kernels realize() makes with them.
#include <gtest/gtest.h>

#include "dsl/interp.h"
#include "ir/builders.h"
#include "ir/call.h"
#include "rules/helpers/schedule.h"
#include "rules_gen/rangeify.h"
#include "rules_gen/schedule.h"

using namespace tinyrw;
using namespace tinyrw::rw;

namespace {

class ScheduleRules : public ::testing::Test {
 protected:
  void SetUp() override {
    Diagnostics d;
    prog_ = load_rules(TINYRW_SOURCE_DIR "/rules/rangeify.rw", d);
    ASSERT_NE(prog_, nullptr) << d.render();
    interp_ = std::make_unique<InterpretedMatcher>(prog_, *prog_->find("realize_map"));
    diff_ = std::make_unique<DifferentialMatcher>(rules::realize_map(), *interp_);
  }
  // The rule that fires on u ("" when none) and the node it realizes (the first, when several),
  // or nothing when the rule keeps it for good and `for_good` is false (and the reverse).
  std::pair<std::string, UOp> decide(const UOp& u, ScheduleContext* facts, bool for_good = false) {
    RewriteContext ctx{.user = facts};
    const RuleInfo* fired = nullptr;
    const std::optional<Value> r = diff_->apply(u, ctx, &fired);
    if (!r) return {"", UOp()};
    const UOp answer = r->as_uop();
    EXPECT_EQ(answer.op(), Op::Sink);
    EXPECT_EQ(!answer.arg().is_none(), for_good) << fired->name;
    return {fired->name, answer.nsrc() > 0 ? answer.src(0) : UOp()};
  }
  std::string rule(const UOp& u, ScheduleContext* facts) { return decide(u, facts).first; }

  // a buffer view, a value computed from it, and an assignment of that value to the buffer
  const UOp buf = buffer_uop(dtypes::float32, 1, 3, "CPU");
  const UOp view = buffer_view(buf, to_shape({3}));
  const UOp sum = view + view;
  const UOp store = UOp::make(Op::Store, dtypes::void_, {view, sum}, Arg::integer(7));
  const UOp chain = view.after({store});                       // the buffer after the store
  const UOp chain_of_view = view.flip({true}).after({store});  // ... through a view of it

  std::shared_ptr<const ResolvedProgram> prog_;
  std::unique_ptr<InterpretedMatcher> interp_;
  std::unique_ptr<DifferentialMatcher> diff_;
};

}  // namespace

// Outside a realize (no facts) only the ops that mean a buffer are realized; a REDUCE is not
// (range propagation decides where it gets a buffer).
TEST_F(ScheduleRules, WithoutFactsOnlyContiguousIsRealized) {
  const UOp c = UOp::make(Op::Contiguous, dtypes::float32, {sum});
  const UOp r = sum.reduce(Op::Add, {0});
  EXPECT_EQ(decide(c, nullptr), std::make_pair(std::string("realize_map.contiguous"), c));
  for (const UOp& u : {sum, view, buf, store, chain, r})
    EXPECT_EQ(rule(u, nullptr), "") << op_name(u.op());
}

TEST_F(ScheduleRules, RootsAreRealizedUnlessAlreadyInABuffer) {
  ScheduleContext facts;
  facts.roots = {sum, view, buf, chain, chain_of_view};
  EXPECT_EQ(decide(sum, &facts), std::make_pair(std::string("realize_map.root"), sum));
  EXPECT_EQ(rule(view, &facts), "");
  EXPECT_EQ(rule(buf, &facts), "");
  EXPECT_EQ(rule(chain, &facts), "");
  // an assignment chain over a view is copied out of its buffer
  EXPECT_EQ(rule(chain_of_view, &facts), "realize_map.root");
}

// A pending assignment is a kernel of its own, and its value too when it reads the target's
// buffer (the cost model may recompute that value in the store's kernel).
TEST_F(ScheduleRules, PendingAssignmentsAreRealized) {
  ScheduleContext facts;
  EXPECT_EQ(rule(store, &facts), "");  // not pending: it ran in an earlier realize
  facts.pending = {store};
  EXPECT_EQ(decide(store, &facts), std::make_pair(std::string("realize_map.store"), store));
}

// A custom kernel's computed arguments and the values with a read-after-write hazard are
// realized for good; what is read in place (a buffer, a view of one, an assignment chain over
// one) is not copied. Another view (a flip) is read through a copy.
TEST_F(ScheduleRules, CallArgumentsAndHazardsAreRealizedWhenComputed) {
  const UOp body = UOp::make(Op::Sink, dtypes::void_, {store});
  // (after the earliest rewrites an assignment chain orders the buffer: a view of it is a
  // movement op over the chain)
  for (const UOp& arg : {sum, view.flip({true})}) {
    const UOp call = UOp::make(Op::Call, dtypes::void_, {body, view, arg},
                               CallInfo{.name = "k", .kernel = true}.to_arg());
    ScheduleContext facts;
    facts.pending = {call};
    EXPECT_EQ(decide(call, &facts, true),
              std::make_pair(std::string("realize_map.call_sources"), arg));
  }
  const UOp in_place = UOp::make(Op::Call, dtypes::void_, {body, view, chain},
                                 CallInfo{.name = "k", .kernel = true}.to_arg());
  ScheduleContext pending;
  pending.pending = {in_place};
  EXPECT_EQ(rule(in_place, &pending), "");
  ScheduleContext hazards;
  hazards.hazards = {sum, view, chain, chain_of_view};
  for (const UOp& u : {sum, chain_of_view})
    EXPECT_EQ(decide(u, &hazards, true), std::make_pair(std::string("realize_map.hazard"), u))
        << op_name(u.op());
  for (const UOp& u : {view, chain}) EXPECT_EQ(rule(u, &hazards), "") << op_name(u.op());
}

// The depth limit cuts the op at the limit, except a view an assignment writes through; at a
// broadcast it cuts the broadcast's source instead (when that is not such a view).
TEST_F(ScheduleRules, TheDepthLimitCutsAtTheLimitAndABroadcastAtItsSource) {
  ScheduleContext facts;
  facts.max_fused_depth = 3;
  facts.depth = {{sum, 2}};
  const UOp prod = sum * sum;  // depth 3
  const UOp shallow = view * view;
  EXPECT_EQ(decide(prod, &facts, true),
            std::make_pair(std::string("realize_map.depth_limit"), prod));
  EXPECT_EQ(rule(shallow, &facts), "");
  facts.pinned = {prod};
  EXPECT_EQ(rule(prod, &facts), "");

  const UOp row = sum.reshape(to_shape({1, 3}));
  const UOp wide = row.expand(to_shape({4, 3}));
  facts.pinned.clear();
  facts.depth[row] = 2;  // the EXPAND is at depth 3: its source is realized
  EXPECT_EQ(decide(wide, &facts, true),
            std::make_pair(std::string("realize_map.depth_limit_broadcast"), row));
  // a view of the broadcast at the limit: the same source is cut
  facts.depth[wide] = 2;
  const UOp turned = wide.permute({1, 0});
  EXPECT_EQ(decide(turned, &facts, true),
            std::make_pair(std::string("realize_map.depth_limit_broadcast"), row));
  // a source an assignment writes through: the view at the limit itself is cut
  facts.pinned = {row};
  EXPECT_EQ(decide(turned, &facts, true),
            std::make_pair(std::string("realize_map.depth_limit"), turned));
  // a view of a broadcast that is not fused (realized already) is cut itself
  facts.pinned.clear();
  facts.depth.erase(wide);
  facts.depth[turned] = 2;
  const UOp flat = turned.reshape(to_shape({12}));
  EXPECT_EQ(decide(flat, &facts, true),
            std::make_pair(std::string("realize_map.depth_limit"), flat));
}

// The rules read the facts through declared helpers; fused_depth counts elementwise and movement
// ops only (a REDUCE, a CONTIGUOUS or a buffer starts no chain).
TEST_F(ScheduleRules, FusedDepthCountsElementwiseAndMovementOps) {
  ScheduleContext facts;
  facts.fuse(view);
  EXPECT_EQ(facts.depth.at(view), 1);  // a buffer view is a RESHAPE
  facts.fuse(sum);
  EXPECT_EQ(facts.depth.at(sum), 2);
  const UOp r = sum.reduce(Op::Add, {0});
  facts.fuse(r);
  EXPECT_FALSE(facts.depth.contains(r));
  EXPECT_EQ(facts.fused_depth(r.reshape(to_shape({1}))), 1);
}

// rules/schedule.rw's drop_executed, in both executors over a whole graph: an AFTER keeps the
// effects that have not run, and one with none left is its buffer; a graph with nothing run is
// unchanged.
TEST_F(ScheduleRules, DropExecutedKeepsThePendingEffects) {
  Diagnostics d;
  const std::shared_ptr<const ResolvedProgram> program =
      load_rules(TINYRW_SOURCE_DIR "/rules/schedule.rw", d);
  ASSERT_NE(program, nullptr) << d.render();
  const InterpretedMatcher interp(program, *program->find("drop_executed"));
  const DifferentialMatcher both(rules::drop_executed(), interp);
  const UOp later = UOp::make(Op::Store, dtypes::void_, {view, view * view}, Arg::integer(8));
  const UOp two = view.after({store, later});
  auto drop = [&](const UOp& root, std::unordered_set<UOp> ran) {
    ScheduleContext facts;
    facts.executed = std::move(ran);
    return graph_rewrite(UOp::sink(std::vector<UOp>{root}), &both,
                         {.ctx = &facts, .bottom_up = true, .enter_calls = false})
        .src(0);
  };
  EXPECT_EQ(drop(two, {}), two);
  EXPECT_EQ(drop(two, {store}), view.after({later}));
  EXPECT_EQ(drop(two, {store, later}), view);
  // a chain of two AFTERs, both effects run: the buffer; the inner one only: the outer effect stays
  EXPECT_EQ(drop(two.after({later}), {store, later}), view);
  EXPECT_EQ(drop(view.after({store}).after({later}), {store}), view.after({later}));
  // a chain through a view of the buffer: the view of the buffer as the store left it
  EXPECT_EQ(drop(chain_of_view + chain_of_view, {store}), view.flip({true}) + view.flip({true}));
}
