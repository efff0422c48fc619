// The rangeify pipeline (tinygrad's get_kernel_graph): a tensor graph to a graph of kernels, stage
// by stage, each a named rewrite that VIZ shows. Built so far: "earliest rewrites" and "realize
// map"; range propagation, STAGEs, buffers and kernel splitting come next (issue 13, S8-S11).
// realize() does not use it yet.
#pragma once

#include <functional>

#include "dsl/ruleset.h"
#include "ir/uop.h"
#include "rules/helpers/rangeify.h"

namespace tinyrw {

// The graph after the stages run so far, and the state they left.
struct KernelGraph {
  UOp sink;
  rw::IndexingContext ctx;
};

// rules/rangeify.rw's `earliest`, bottom up over the whole graph (kernel CALL bodies untouched).
// `rules`: another executor of that set (the tests run the interpreted one); the compiled if null.
UOp earliest_rewrites(const UOp& sink, const rw::RuleSetMatcher* rules = nullptr);

// Fills ctx.realize_map by rules/rangeify.rw's `realize_map`, asked about every node of `sink`
// (the roots are sink's sources). `executed`: the effects (STORE, kernel CALL) that already ran;
// nothing under them is visited. `rules`: as for earliest_rewrites, of `realize_map`.
void generate_realize_map(const UOp& sink, rw::IndexingContext& ctx,
                          const std::function<bool(const UOp&)>& executed = nullptr,
                          const rw::RuleSetMatcher* rules = nullptr);

// The stages in order over SINK(roots...): function CALLs inlined, earliest rewrites, realize map.
KernelGraph get_kernel_graph(const UOp& sink,
                             const std::function<bool(const UOp&)>& executed = nullptr);

}  // namespace tinyrw
