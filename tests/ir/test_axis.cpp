// Typed ranges (ir/axis.h) and a kernel SINK's KernelInfo (ir/kernel_info.h): a RANGE's arg is
// (ids..., type name); KernelInfo round-trips through its record arg.
#include <gtest/gtest.h>

#include <set>

#include "ir/graph.h"
#include "ir/kernel_info.h"
#include "ir/render.h"
#include "ir/uop.h"

using namespace tinyrw;

TEST(AxisType, RangeArgEndsInTheTypeName) {
  const UOp r = UOp::range(UOp::cint(8), 3, AxisType::Reduce);
  EXPECT_EQ(r.arg(), Arg::tuple({Arg::integer(3), Arg::string("REDUCE")}));
  EXPECT_EQ(r.arg().repr(), "(3, 'REDUCE')");
  EXPECT_EQ(axis_type_of(r), AxisType::Reduce);
  // the type is part of the node: the same loop of another type is another UOp
  EXPECT_FALSE(r == UOp::range(UOp::cint(8), 3, AxisType::Unroll));
  EXPECT_TRUE(r == UOp::range(UOp::cint(8), 3, AxisType::Reduce));
  EXPECT_EQ(r.dtype(), dtypes::index);
}

TEST(AxisType, DefaultIsWeakAsTinygrad) {
  const UOp r = UOp::range(UOp::cint(4), 0);
  EXPECT_EQ(axis_type_of(r), AxisType::Weak);
  EXPECT_EQ(r.arg().repr(), "(0, 'WEAK')");
}

TEST(AxisType, NamesRoundTripAndUnknownNamesAreRefused) {
  std::set<std::string_view> names;
  for (int i = 0; i < kNumAxisTypes; ++i) {
    const AxisType t = static_cast<AxisType>(i);
    EXPECT_EQ(axis_info(t).type, t) << "table row " << i << " is out of enumerator order";
    EXPECT_EQ(axis_type_from_name(axis_type_name(t)), t);
    EXPECT_TRUE(names.insert(axis_type_name(t)).second) << axis_type_name(t);
    EXPECT_EQ(axis_type_of(UOp::range(UOp::cint(2), 1, t)), t);
  }
  EXPECT_FALSE(axis_type_from_name("weak").has_value());  // names are upper case
  EXPECT_FALSE(axis_type_from_name("").has_value());
  // an arg without a known type at its end, or another op, has no axis type
  EXPECT_THROW(axis_type_of(UOp::make(Op::Range, dtypes::index, {UOp::cint(2)},
                                      Arg::tuple({Arg::integer(0)}))),
               GraphError);
  EXPECT_THROW(axis_type_of(UOp::make(Op::Range, dtypes::index, {UOp::cint(2)},
                                      Arg::tuple({Arg::integer(0), Arg::string("SIDEWAYS")}))),
               GraphError);
  EXPECT_THROW(axis_type_of(UOp::cint(2)), GraphError);
}

// The letters and positions tinygrad's kernel names use (uop/ops.py axis_letters, axis_to_pos).
TEST(AxisType, LettersAndSortPositions) {
  const std::pair<AxisType, std::pair<char, int>> expect[] = {
      {AxisType::Device, {'d', -2}}, {AxisType::Global, {'g', 0}},
      {AxisType::Warp, {'w', 1}},    {AxisType::Local, {'l', 2}},
      {AxisType::Weak, {'L', -1}},   {AxisType::GroupReduce, {'G', 2}},
      {AxisType::Reduce, {'R', 4}},  {AxisType::Upcast, {'u', 3}},
      {AxisType::Unroll, {'r', 5}},  {AxisType::Thread, {'t', 0}},
      {AxisType::Loop, {'L', -1}},
  };
  for (const auto& [t, lp] : expect) {
    EXPECT_EQ(axis_info(t).letter, lp.first) << axis_type_name(t);
    EXPECT_EQ(axis_info(t).position, lp.second) << axis_type_name(t);
  }
  // PLACEHOLDER has neither (a stand-in, never named or sorted)
  EXPECT_EQ(axis_info(AxisType::Placeholder).letter, 0);
  EXPECT_FALSE(axis_info(AxisType::Placeholder).position.has_value());
}

TEST(AxisType, RangesRenderAsLetterAndIds) {
  EXPECT_EQ(range_label(UOp::range(UOp::cint(4), 0)), "L0");
  EXPECT_EQ(range_label(UOp::range(UOp::cint(4), 12, AxisType::Reduce)), "R12");
  EXPECT_EQ(range_label(UOp::range(UOp::cint(4), -1, AxisType::Device)), "dm1");
  // a split range keeps several ids
  const UOp split =
      UOp::make(Op::Range, dtypes::index, {UOp::cint(4)},
                Arg::tuple({Arg::integer(1), Arg::integer(2), Arg::string("UPCAST")}));
  EXPECT_EQ(range_label(split), "u1_2");
  EXPECT_EQ(range_label(UOp::range(UOp::cint(4), 5, AxisType::Placeholder)), "p5");
  const UOp i = UOp::range(UOp::cint(4), 0), j = UOp::range(UOp::cint(8), 1, AxisType::Reduce);
  EXPECT_EQ(render(i * UOp::cint(8) + j), "(L0*8+R1)");
}

TEST(KernelInfoArg, RoundTripsThroughItsRecord) {
  KernelInfo k{.name = "r_4_32",
               .axis_types = {AxisType::Weak, AxisType::Reduce},
               .dont_use_locals = true,
               .applied_opts = {Arg::string("UPCAST 0 4")},
               .opts_to_apply = std::vector<Arg>{},
               .estimates = Estimates{.ops = 128, .lds = 512, .mem = 528},
               .beam = 2};
  const UOp sink = UOp::make(Op::Sink, dtypes::void_, {}, k.to_arg());
  EXPECT_EQ(KernelInfo::of(sink), k);
  EXPECT_EQ(sink.arg().record_type(), "KernelInfo");
  EXPECT_EQ(sink.arg().field("axis_types"),
            Arg::tuple({Arg::string("WEAK"), Arg::string("REDUCE")}));
  // every field is written, with tinygrad's defaults
  const Arg d = KernelInfo{}.to_arg();
  std::vector<std::string> fields;
  for (const auto& [n, v] : d.fields()) fields.push_back(n);
  EXPECT_EQ(fields,
            (std::vector<std::string>{"name", "axis_types", "dont_use_locals", "applied_opts",
                                      "opts_to_apply", "estimates", "beam"}));
  EXPECT_TRUE(d.field("opts_to_apply").is_none());
  EXPECT_TRUE(d.field("estimates").is_none());
  EXPECT_EQ(d.field("beam"), Arg::integer(0));
  // a SINK without an arg reads as the defaults; another arg is refused
  EXPECT_EQ(KernelInfo::of(UOp::sink({})), KernelInfo{});
  EXPECT_THROW(KernelInfo::of(UOp::make(Op::Sink, dtypes::void_, {}, Arg::string("x"))),
               GraphError);
  EXPECT_THROW(KernelInfo::of(UOp::cint(1)), GraphError);
}

// open_ranges (ir/graph.h, tinygrad's UOp.ranges): the RANGEs a node depends on that no END or
// REDUCE at or under it closes, in order of first use.
TEST(AxisType, OpenRangesAreTheRangesNoEndOrReduceCloses) {
  const UOp r0 = UOp::range(UOp::cint(4), 0), r1 = UOp::range(UOp::cint(8), 1);
  const UOp red = UOp::range(UOp::cint(16), 2, AxisType::Reduce);
  const UOp body = r0 * 8 + r1 + red;
  EXPECT_EQ(open_ranges(body), (std::vector<UOp>{r0, r1, red}));
  const UOp sum = UOp::make(Op::Reduce, dtypes::index, {body, red},
                            Arg::tuple({Arg::op(Op::Add), Arg::integer(0)}));
  EXPECT_EQ(open_ranges(sum), (std::vector<UOp>{r0, r1}));  // the REDUCE closes its range
  const UOp end = UOp::make(Op::End, dtypes::void_, {sum, r1});
  EXPECT_EQ(open_ranges(end), (std::vector<UOp>{r0}));
  EXPECT_TRUE(open_ranges(UOp::make(Op::End, dtypes::void_, {end, r0})).empty());
  EXPECT_TRUE(open_ranges(UOp::cint(3)).empty());
  // iterative: a chain a hundred thousand nodes deep
  UOp deep = r0;
  for (int k = 0; k < 100000; ++k) deep = deep + 1;
  EXPECT_EQ(open_ranges(deep), (std::vector<UOp>{r0}));
}
