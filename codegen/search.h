// BEAM search (tinygrad's codegen/opt/search.py): the opts of a kernel chosen by timing
// candidates on the device. Each round extends every kernel of the beam by each action that
// applies (codegen/opt.h), times the new kernels (equal programs are timed once), and keeps the
// `width` fastest; the search stops when a round gains less than BEAM_MIN_PROGRESS microseconds
// (0.01 by default), as tinygrad's. The result is kept on disk per kernel AST,
// device and width, so a later process finds it without searching.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "codegen/opt.h"
#include "codegen/target.h"
#include "ir/uop.h"

namespace tinyrw {

// Every opt BEAM tries (tinygrad's actions; those a target refuses fail when applied).
const std::vector<Opt>& beam_actions();

// The seconds one run of the kernel with these opts takes on the device, or nothing where it
// does not compile; `give_up_after`: a run may stop being timed once it is known slower.
using KernelTimer =
    std::function<std::optional<double>(const std::vector<Opt>& opts, double give_up_after)>;
// The kernel's identity as a program for deduplication (its rendered code), or nothing where
// the opts do not lower.
using KernelRenderer = std::function<std::optional<std::string>(const std::vector<Opt>& opts)>;

struct BeamResult {
  std::vector<Opt> opts;
  double seconds = 0;  // the best time measured (0 when found in the disk cache)
  int timed = 0;       // candidates timed
  bool cached = false;
};

// The search for `sink` (a kernel AST, loops already simplified) on `target`. `start` (may be
// empty) is timed first as a bound for the first round (the heuristics' opts). `cache_key`:
// what besides the AST identifies the result (device and codegen settings); empty, no disk cache.
BeamResult beam_search(const UOp& sink, const Target& target, int width,
                       const KernelRenderer& render, const KernelTimer& time,
                       const std::vector<Opt>& start = {}, const std::string& cache_key = "");

// The directory of on-disk caches: $TINYRW_CACHE_DIR, else $XDG_CACHE_HOME/tinyrw, else
// ~/.cache/tinyrw.
std::string cache_dir();

}  // namespace tinyrw
