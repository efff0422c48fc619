#include <gtest/gtest.h>
#include <malloc.h>

#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/ops.h"
#include "ir/uop.h"

using namespace tinyrw;

namespace {
// Released during static destruction, after thread-local storage is gone: must not crash at exit.
const UOp kReleasedAtExit = UOp::variable("static_at_exit", 0, 1) + 1;

size_t heap_in_use() { return mallinfo2().uordblks; }

// 0..n-1 in a fixed random order (Fisher-Yates with an LCG), for dropping nodes in random order.
std::vector<int> shuffled_indices(int n, uint64_t seed) {
  std::vector<int> order(n);
  for (int i = 0; i < n; ++i) order[i] = i;
  for (int i = n - 1; i > 0; --i) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    std::swap(order[i], order[static_cast<int>((seed >> 33) % (i + 1))]);
  }
  return order;
}
}  // namespace

TEST(OpTable, CoversTinyspecOps) {
  for (const char* name :
       {"ADD",     "MUL",    "FLOORDIV", "FLOORMOD",   "CDIV",    "CMOD",   "CMPEQ",    "CMPLT",
        "CMPNE",   "INDEX",  "RANGE",    "END",        "SPECIAL", "STAGE",  "RETURNED", "CALL",
        "PARAM",   "BUFFER", "AFTER",    "STORE",      "LOAD",    "REDUCE", "RESHAPE",  "EXPAND",
        "PERMUTE", "PAD",    "SHRINK",   "FLIP",       "WHERE",   "CAST",   "BITCAST",  "SINK",
        "GROUP",   "STACK",  "UNSHARD",  "CONTIGUOUS", "DETACH",  "COPY"}) {
    EXPECT_TRUE(op_from_name(name).has_value()) << name;
  }
  EXPECT_EQ(op_from_name("Add"), Op::Add);
  EXPECT_FALSE(op_from_name("Frobnicate").has_value());
  EXPECT_TRUE(op_info(Op::Add).is_commutative());
  EXPECT_FALSE(op_info(Op::FloorDiv).is_commutative());
  EXPECT_EQ(op_info(Op::Where).min_src, 3);
  EXPECT_EQ(op_info(Op::Sink).max_src, -1);
  EXPECT_EQ(op_info(Op::Reshape).category, OpCategory::Movement);
  EXPECT_EQ(op_info(Op::Sub).category, OpCategory::Decomposed);
  EXPECT_TRUE(groups::comparison().contains(Op::CmpEq));
  EXPECT_TRUE(groups::alu().contains(Op::Where));
  EXPECT_FALSE(groups::alu().contains(Op::Cast));
  EXPECT_TRUE(groups::elementwise().contains(Op::Cast));
  EXPECT_EQ(groups::movement().size(), 6u);
  EXPECT_EQ(groups::commutative().size(), 8u);
}

TEST(UOp, HashConsingGivesIdenticalNodes) {
  const UOp x = UOp::variable("x", 0, 10);
  const UOp a = x * 2 + 1;
  const UOp b = x * 2 + 1;
  EXPECT_TRUE(a == b);
  EXPECT_EQ(a.node(), b.node());
  EXPECT_FALSE(a == x * 2 + 2);
  EXPECT_FALSE(UOp::cint(1) == UOp::cint(1, dtypes::int32));  // dtype is part of identity
  EXPECT_FALSE(UOp::cfloat(0.0) == UOp::cfloat(-0.0));        // -0.0 is not 0.0
  EXPECT_TRUE(UOp::cfloat(NAN) == UOp::cfloat(NAN));          // nan is one constant
  EXPECT_FALSE(a == a.with_tag(Arg::integer(1)));             // tags are part of identity
  EXPECT_TRUE(a.with_tag(Arg::integer(1)).with_tag(Arg()) == a);
}

TEST(UOp, ReleasedWhenUnreferenced) {
  const size_t before = uop_table_stats().live_nodes;
  {
    const UOp x = UOp::variable("released_x", 0, 10);
    const UOp e = (x + 3) * (x + 4);
    EXPECT_EQ(uop_table_stats().live_nodes, before + 6);
  }
  EXPECT_EQ(uop_table_stats().live_nodes, before);
}

TEST(UOp, TenMillionNodesLeaveMemoryFlat) {
  const size_t live0 = uop_table_stats().live_nodes;
  size_t after_first_round = 0;
  for (int round = 0; round < 10; ++round) {
    {
      UOp x = UOp::variable("flat", 0, 1000);
      for (int i = 0; i < 1000000; ++i) x = x + UOp::cint(i & 7);  // 1M new ADD nodes per round
    }
    EXPECT_EQ(uop_table_stats().live_nodes, live0) << "round " << round;
    if (round == 0) after_first_round = heap_in_use();
  }
  // Everything built was freed: the heap is where it was after the first round (small slack).
  EXPECT_LE(heap_in_use(), after_first_round + (1u << 20));
  // The table keeps slot memory for the next round's resizes, within its budget (16 MB of slots
  // used in each of its two buffers).
  EXPECT_GT(uop_table_stats().table_retained_bytes, 4u << 20);
  EXPECT_LE(uop_table_stats().table_retained_bytes, 32u << 20);
}

TEST(UOp, DroppingAMillionDeepChainDoesNotRecurse) {
  UOp x = UOp::cfloat(2.0);
  for (int i = 0; i < 1000000; ++i) x = x.alu(Op::Sqrt, std::span<const UOp>());
  EXPECT_EQ(x.op(), Op::Sqrt);
  x = UOp();  // releases 1M nodes through the worklist
  SUCCEED();
}

TEST(UOp, ArityIsCheckedAgainstTheOpTable) {
  const UOp x = UOp::variable("x", 0, 10);
  EXPECT_THROW(UOp::make(Op::Add, dtypes::index, {x}), GraphError);
  EXPECT_THROW(UOp::make(Op::Where, dtypes::index, {x, x}), GraphError);
  EXPECT_THROW(UOp::make(Op::Const, dtypes::index, {x}, Arg::integer(1)), GraphError);
  EXPECT_NO_THROW(UOp::make(Op::Sink, dtypes::void_, {x, x, x}));
  try {
    UOp::make(Op::Add, dtypes::index, {x, x, x});
    FAIL();
  } catch (const GraphError& e) {
    EXPECT_STREQ(e.what(), "Add takes 2 sources, got 3");
  }
  EXPECT_THROW(UOp::variable("bad", 5, 1), GraphError);
}

TEST(UOp, ConstantsFollowDtypeSemantics) {
  EXPECT_EQ(UOp::cint(300, dtypes::uint8).arg().as_int(), 44);
  EXPECT_EQ(UOp::cint(-1, dtypes::uint32).arg().as_int(), 4294967295);
  EXPECT_EQ(UOp::constant(dtypes::int32, Arg::real(-2.7)).arg().as_int(), -2);
  EXPECT_EQ(UOp::constant(dtypes::bool_, Arg::integer(5)).arg(), Arg::boolean(true));
  EXPECT_EQ(UOp::cfloat(0.1, dtypes::float16).arg().as_float(), 0.0999755859375);
  EXPECT_THROW(UOp::constant(dtypes::int32, Arg::real(INFINITY)), GraphError);
  EXPECT_THROW(UOp::constant(dtypes::int32, Arg::string("x")), GraphError);
}

TEST(UOp, BuildersMatchTinygradForms) {
  const UOp x = UOp::variable("x", 0, 10);
  const UOp y = UOp::variable("y", 0, 10);
  EXPECT_TRUE((x - y) == x + y * -1);
  EXPECT_TRUE(-x == x * -1);
  EXPECT_EQ(x.lt(y).dtype(), dtypes::bool_);
  EXPECT_TRUE(x.ge(y) == x.lt(y).ne(UOp::cbool(true)));
  EXPECT_TRUE(x.minimum(y) == -((-x).maximum(-y)));
  EXPECT_THROW(x + UOp::cint(1, dtypes::int8), GraphError);  // no silent promotion
  EXPECT_TRUE(x.cast(dtypes::index) == x);
  EXPECT_EQ(x.cast(dtypes::int32).op(), Op::Cast);
  EXPECT_TRUE(x.with_src({}) == x);
  EXPECT_EQ((x + y).with_op(Op::Mul).op(), Op::Mul);
  EXPECT_EQ(x.repr(), "UOp(Ops.DEFINE_VAR, dtypes.index, arg=('x', 0, 10), src=())");
}

// The hash-consing table is open-addressed: erasing a node moves later entries of its probe run
// back. After dropping a random half of many nodes (in random order, so runs are cut anywhere),
// every kept node must still be found by building it again, and nothing else may be.
TEST(UOp, TableFindsEveryKeptNodeAfterRandomErasures) {
  const size_t live0 = uop_table_stats().live_nodes;
  const UOp x = UOp::variable("erase_x", 0, 1 << 20);
  constexpr int kNodes = 20000;
  std::vector<UOp> nodes;
  for (int i = 0; i < kNodes; ++i) nodes.push_back(x + UOp::cint(i));
  const std::vector<int> order = shuffled_indices(kNodes, 12345);
  const size_t full = uop_table_stats().live_nodes;
  for (int k = 0; k < kNodes / 2; ++k) nodes[order[k]] = UOp();
  const size_t live = uop_table_stats().live_nodes;
  EXPECT_GE(full - live, static_cast<size_t>(kNodes / 2));  // at least the dropped ADDs went
  for (int i = 0; i < kNodes; ++i) {
    if (!nodes[i]) continue;
    const UOp again = x + UOp::cint(i);
    EXPECT_EQ(again.node(), nodes[i].node()) << i;
  }
  EXPECT_EQ(uop_table_stats().live_nodes, live);  // every rebuild was a hit
  nodes.clear();
  EXPECT_EQ(uop_table_stats().live_nodes, live0 + 1);
}

// A node's home slot follows its newest source with sources of its own, so such a source with
// many parents (an index made after the constants it is combined with) would make one long probe
// run: past a short run they go to a second, random home. Every such node must be found again,
// after erasures in random order too.
TEST(UOp, ANewestSourceWithManyParentsKeepsItsParentsFindable) {
  const size_t live0 = uop_table_stats().live_nodes;
  const size_t far0 = uop_table_stats().far_nodes;
  constexpr int kParents = 30000;
  std::vector<UOp> consts;
  for (int i = 0; i < kParents; ++i) consts.push_back(UOp::cint(3 * i + 1000003));
  const UOp x = UOp::variable("many_parents_x", 0, 1 << 20) * 2;  // newer than every constant
  std::vector<UOp> parents;
  for (int i = 0; i < kParents; ++i) parents.push_back(x * consts[i]);
  EXPECT_GT(uop_table_stats().far_nodes, far0) << "no parent left its source's run";
  // Drop all but a few, in random order: the near run empties while far parents stay.
  for (int i : shuffled_indices(kParents, 99))
    if (i % 97 != 0) parents[i] = UOp();
  const size_t live = uop_table_stats().live_nodes;
  for (int i = 0; i < kParents; ++i) {  // the kept ones, while the dropped left holes
    if (parents[i]) EXPECT_EQ((x * consts[i]).node(), parents[i].node()) << i;
  }
  EXPECT_EQ(uop_table_stats().live_nodes, live);
  for (int i = 0; i < kParents; ++i) {  // the dropped ones made anew
    if (!parents[i]) parents[i] = x * consts[i];
  }
  for (int i = 0; i < kParents; ++i) EXPECT_EQ((x * consts[i]).node(), parents[i].node()) << i;
  EXPECT_LT(live, live0 + 2 * kParents + 3);  // x is three nodes (a variable, 2, their product)
  EXPECT_EQ(uop_table_stats().live_nodes, live0 + 2 * kParents + 3);
  parents.clear();
  consts.clear();
  EXPECT_EQ(uop_table_stats().live_nodes, live0 + 3);
  EXPECT_EQ(uop_table_stats().far_nodes, far0);
}

// A dropped graph gives its cells back newest first, so the arena's bump region takes them all
// back and the next graph is made in the same contiguous memory (not scattered over free lists).
TEST(UOp, ADroppedGraphLeavesTheArenaAsItWas) {
  const UOp x = UOp::variable("arena_x", 0, 100);
  const size_t arena0 = uop_table_stats().arena_bytes;
  for (int round = 0; round < 3; ++round) {
    std::vector<UOp> layer;
    for (int i = 0; i < 200; ++i) layer.push_back(x * UOp::cint(7 * i + 3 + round));
    for (int l = 0; l < 50; ++l) {
      std::vector<UOp> next;
      for (int i = 0; i < 200; ++i) next.push_back(layer[i] + layer[(i + 1) % 200]);
      layer.swap(next);
    }
    const UOp g = UOp::sink(layer);
    layer.clear();
    EXPECT_GE(uop_table_stats().live_nodes, 10000u);
  }  // dropping g drops the whole lattice
  EXPECT_EQ(uop_table_stats().arena_bytes, arena0);
}

// A node is 32 bytes and its sources; a tag and derived properties live in a side block, which
// must stay with its node (and be dropped with it) while other nodes come and go.
TEST(UOp, NodesCostTheirCellAndTagsLiveBesideThem) {
  EXPECT_EQ(uop_node_bytes(2), 48u);
  const UOp x = UOp::variable("cell_x", 0, 10);
  const UOp y = UOp::variable("cell_y", 0, 5);
  const size_t bytes0 = uop_table_stats().node_bytes;
  {
    const UOp s = x + y;
    EXPECT_EQ(uop_table_stats().node_bytes, bytes0 + uop_node_bytes(2));
  }
  EXPECT_EQ(uop_table_stats().node_bytes, bytes0);
  const size_t arena0 = uop_table_stats().arena_bytes;
  std::vector<UOp> tagged;
  for (int i = 0; i < 1000; ++i) {
    const UOp plain = x * UOp::cint(i);
    (void)plain.vmax();  // a side block for the untagged node too
    tagged.push_back(plain.with_tag(Arg::integer(i)));
  }
  for (int i = 0; i < 1000; i += 2) tagged[i] = UOp();  // free cells and side blocks in between
  for (int i = 1; i < 1000; i += 2) {
    EXPECT_EQ(tagged[i].tag(), Arg::integer(i));
    EXPECT_FALSE(tagged[i] == x * UOp::cint(i));  // the tag is part of identity
    EXPECT_EQ(tagged[i].with_tag(Arg()), x * UOp::cint(i));
    EXPECT_EQ(tagged[i].vmax().i, 10 * i);
    EXPECT_EQ(tagged[i], (x * UOp::cint(i)).with_tag(Arg::integer(i)));  // found again
  }
  tagged.clear();
  for (int i = 0; i < 1000; ++i) tagged.push_back((x * UOp::cint(i)).with_tag(Arg::string("t")));
  EXPECT_LE(uop_table_stats().arena_bytes, arena0 + 2000 * uop_node_bytes(2))
      << "freed cells are reused";
  for (const UOp& t : tagged) EXPECT_EQ(t.tag().as_string(), "t");
}

// The limits of a node's fields (docs/limits.md): a count that does not fit is an error, not a
// wrapped field.
TEST(UOp, SourceCountBeyondTheNodeLimitIsAnError) {
  const UOp x = UOp::variable("many_x", 0, 1);
  std::vector<UOp> srcs(size_t{UOpNode::kMaxSources} + 1, x);
  try {
    UOp::sink(srcs);
    FAIL() << "a SINK of 2**24 sources was made";
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("a node holds at most 16777215"), std::string::npos)
        << e.what();
  }
}

// Run in a child process: the dtypes it makes stay for the life of the process.
TEST(UOpDeathTest, DtypesBeyondTheIdLimitAreAnError) {
  EXPECT_EXIT(
      {
        try {
          for (int64_t size = 1;; ++size) (void)dtypes::float32.ptr(AddrSpace::Global, size);
        } catch (const std::length_error& e) {
          const bool named =
              std::string(e.what()).find("at most 65536 distinct dtypes") != std::string::npos;
          std::exit(named ? 0 : 2);
        }
      },
      ::testing::ExitedWithCode(0), "");
}
